#!/usr/bin/env python3
"""The local wirelens stack, without Docker: start, stop and inspect it.

    python -m deploy.local.stack up                 start every component in dependency order, wait for each
    python -m deploy.local.stack down               stop exactly what `up` started (pid files), nothing else
    python -m deploy.local.stack status             each component: pid, port, health
    python -m deploy.local.stack start COMPONENT    start one component (if it is not running)
    python -m deploy.local.stack stop COMPONENT     stop one component (SIGTERM, then SIGKILL after 20 s)
    python -m deploy.local.stack restart COMPONENT  stop, then start
    python -m deploy.local.stack kill COMPONENT     SIGKILL its whole process group at once: a crash, for tests

Components, in start order: ClickHouse (chdb-core engine under a supervisor),
Jaeger, the OpenTelemetry Collector, logship (ships Envoy's access-log file to
the Collector), the REST and gRPC services (the Python pair too with
WIRELENS_STACKS=go,python), Envoy with the wirelens filter,
procmetrics (CPU and memory of every component, as OTLP metrics). Ports come
from deploy/local/ports.env, overridden by environment variables of the same
names. State (pid files, logs, data, Envoy's access-log file and logship's
checkpoint) lives in $WIRELENS_STATE_DIR (default: .run/local), with
credentials.env (0600): the passwords of ClickHouse's writer (the Collector)
and read-only reporter, made at the first start (clickhouse_users.py).
Every listener binds 127.0.0.1.

This is the command line; the work is done by, one job each:
    deploy/local/settings.py     the settings (ports.env and WIRELENS_*), where state lives
    deploy/local/components.py   what runs: commands, ports, readiness probes, hooks
    deploy/local/lifecycle.py    up, down, start, stop, kill (wirelens_helpers.supervise)
    deploy/local/schema.py       the schema step and the SQL splitter
    deploy/local/status.py       status and the backpressure counters
Programs and tests use them through this module (stack.load_settings, stack.start, ...).
"""

from __future__ import annotations

import argparse
import sys

from deploy.local.components import (
    BY_NAME, COMPONENTS, Component, component_named, envoy_binary, logship_progress, render_envoy, require,
    users_xml_path)
from deploy.local.lifecycle import check_port_free, down, kill, start, start_all, start_one, stop, up
from deploy.local.schema import apply_schema, clickhouse_query, schema_statements
from queries.schema.ddl import split_sql
from deploy.local.settings import (
    BIN, BUILD, ROOT, StackError, load_settings, log_path, pid_path, read_pid, state_dir)
from deploy.local.status import collector_counters, status
from wirelens_helpers.ports import free_ports
from wirelens_helpers.settings import clickhouse_url
from wirelens_helpers.supervise import SupervisorError, http_get, http_ok, port_holder, tcp_open

__all__ = [  # what programs and tests use as stack.NAME
    "BIN", "BUILD", "BY_NAME", "COMPONENTS", "ROOT", "Component", "StackError", "apply_schema", "check_port_free",
    "clickhouse_query", "clickhouse_url", "collector_counters", "component_named", "down", "envoy_binary",
    "free_ports", "http_get", "http_ok", "kill", "load_settings", "log_path", "logship_progress", "pid_path",
    "port_holder", "read_pid", "render_envoy", "require", "schema_statements", "split_sql", "start", "start_all",
    "start_one", "state_dir", "status", "stop", "tcp_open", "up", "users_xml_path",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "render-envoy", "apply-schema",
                                            "start", "stop", "restart", "kill"])
    parser.add_argument("component", nargs="?", help="for start, stop, restart, kill: " + ", ".join(BY_NAME))
    args = parser.parse_args(argv)
    one = args.command in ("start", "stop", "restart", "kill")
    if one != bool(args.component):
        parser.error(f"{args.command} takes a component name" if one else f"{args.command} takes no component")
    try:
        settings = load_settings()
        if args.command == "up":
            print(f"starting the local stack (state in {state_dir(settings)})")
            up(settings)
            print("stack is up: `make status` to inspect, `make down` to stop")
        elif args.command == "down":
            down(settings)
        elif args.command == "status":
            return 0 if status(settings) else 1
        elif args.command == "render-envoy":
            state_dir(settings).mkdir(parents=True, exist_ok=True)
            render_envoy(settings)
            print(state_dir(settings) / "envoy.yaml")
        elif args.command == "apply-schema":
            apply_schema(settings)
        elif args.command == "start":
            print(f"  {args.component:<13} {start_one(args.component, settings)}")
        elif args.command == "stop":
            component_named(args.component)
            print(f"  {args.component:<13} {stop(args.component, settings)}")
        elif args.command == "restart":
            component_named(args.component)
            print(f"  {args.component:<13} {stop(args.component, settings)}")
            print(f"  {args.component:<13} {start_one(args.component, settings)}")
        elif args.command == "kill":
            component_named(args.component)
            print(f"  {args.component:<13} {kill(args.component, settings)}")
    except SupervisorError as exc:  # StackError, and the supervisor's own
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
