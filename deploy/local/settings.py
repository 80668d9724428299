"""The local stack's settings and where its state lives.

    load_settings   ports from deploy/local/ports.env, overridable by environment variables of
                    the same names, and every other WIRELENS_* setting with its default, checked
    state_dir, pid_path, log_path, read_pid
                    $WIRELENS_STATE_DIR (default .run/local): pids/NAME.pid, logs/NAME.log
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from envoy import plugin_settings, wiring
from queries.schema.cluster import cluster_schema
from wirelens_helpers import ROOT, supervise
from wirelens_helpers.settings import PORTS_FILE, read_ports

BIN = ROOT / "bin"
BUILD = ROOT / "build"
READY_TIMEOUT_S = float(os.environ.get("WIRELENS_READY_TIMEOUT", "60"))


class StackError(supervise.SupervisorError):
    """A failure the user can act on; the message says what and where."""


def load_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Ports from ports.env, each overridable by an environment variable."""
    environ = dict(os.environ if environ is None else environ)
    try:
        settings = read_ports(PORTS_FILE, environ)
    except ValueError as exc:
        raise StackError(str(exc)) from None
    state_dir = Path(environ.get("WIRELENS_STATE_DIR", ROOT / ".run" / "local")).resolve()
    settings["WIRELENS_STATE_DIR"] = str(state_dir)
    settings["WIRELENS_ENVOY_CONCURRENCY"] = environ.get("WIRELENS_ENVOY_CONCURRENCY", "2")
    # Which paired services run behind Envoy (comma-separated): go (always), python
    # (services/python; calls with x-wirelens-stack: python reach it), jvm (services/jvm:
    # x-wirelens-stack: jvm reaches WebFlux and grpc-java, jvm-mvc Spring Web MVC's REST).
    settings["WIRELENS_STACKS"] = ",".join(parse_stacks(environ.get("WIRELENS_STACKS", "go")))
    settings["WIRELENS_REQUESTS_TTL_DAYS"] = environ.get("WIRELENS_REQUESTS_TTL_DAYS", "30")
    if not settings["WIRELENS_REQUESTS_TTL_DAYS"].isdigit():
        raise StackError(f"WIRELENS_REQUESTS_TTL_DAYS={settings['WIRELENS_REQUESTS_TTL_DAYS']!r} "
                         "is not a whole number of days")
    # A ClickHouse cluster instead of one server (docs/clickhouse-cluster.md): the
    # schema step applies queries/schema/cluster's form of the schema for it.
    for name, default in (("WIRELENS_CLICKHOUSE_CLUSTER", ""), ("WIRELENS_CLICKHOUSE_REPLICATED", "1"),
                          ("WIRELENS_CLICKHOUSE_ON_CLUSTER", "1")):
        settings[name] = environ.get(name, default)
    try:
        schema_mode(settings)
    except ValueError as exc:
        raise StackError(str(exc)) from None
    settings["WIRELENS_COLLECTOR_STORAGE_DIR"] = str(state_dir / "collector" / "storage")
    # Jaeger keeps its traces on disk (Badger) so they survive a restart, and serves
    # its UI from the vendored source's build (`make jaeger-ui`); without that build
    # (empty path) Jaeger serves its API and a placeholder page.
    settings["WIRELENS_JAEGER_STORAGE_DIR"] = str(state_dir / "jaeger" / "badger")
    settings["WIRELENS_JAEGER_UI_DIR"] = environ.get(
        "WIRELENS_JAEGER_UI_DIR", str(BUILD / "jaeger-ui") if (BUILD / "jaeger-ui" / "index.html").exists() else "")
    # Where Envoy's per-call access-log records go (envoy/wiring.py): `file`
    # (default) is a JSON-lines file that logship ships to the Collector with a
    # checkpoint, so a Collector outage loses nothing; `otlp` is Envoy's OTel
    # access logger straight to the Collector, which drops while it is down.
    settings["WIRELENS_ACCESS_LOG_SINK"] = environ.get("WIRELENS_ACCESS_LOG_SINK", "file")
    if settings["WIRELENS_ACCESS_LOG_SINK"] not in wiring.ACCESS_LOG_SINKS:
        raise StackError(f"WIRELENS_ACCESS_LOG_SINK={settings['WIRELENS_ACCESS_LOG_SINK']!r}: expected one of "
                         f"{', '.join(wiring.ACCESS_LOG_SINKS)}")
    settings["WIRELENS_ACCESS_LOG"] = str(state_dir / "envoy" / "access.jsonl")
    # What ships that file to the Collector (issue 32): `logship` (default; collector/cmd/logship,
    # checkpoint after the Collector's OK, rotation, the disk cap with exact drop counts) or
    # `filelog` (a second Collector, the log agent, with the file_log receiver:
    # collector/filelog-agent.yaml; no rotation, no cap: collector/README.md, "filelog as the log agent").
    settings["WIRELENS_LOG_SHIPPER"] = environ.get("WIRELENS_LOG_SHIPPER", "logship")
    if settings["WIRELENS_LOG_SHIPPER"] not in LOG_SHIPPERS:
        raise StackError(f"WIRELENS_LOG_SHIPPER={settings['WIRELENS_LOG_SHIPPER']!r}: expected one of "
                         f"{', '.join(LOG_SHIPPERS)}")
    settings["WIRELENS_LOG_AGENT_STORAGE_DIR"] = str(state_dir / "log-agent" / "storage")
    # The agent's feature gates: stanza.synchronousLogEmitter keeps a kill -9 from losing the
    # receiver's in-memory batch (tests/e2e/test_filelog_limits.py); empty = the receiver's defaults.
    settings["WIRELENS_LOG_AGENT_FEATURE_GATES"] = environ.get("WIRELENS_LOG_AGENT_FEATURE_GATES",
                                                               "stanza.synchronousLogEmitter")
    # Which build of the filter Envoy runs (envoy/wiring.py, MODULES): `wasm` (default,
    # build/wirelens_filter.wasm, `make filter`) or `native` (the Envoy dynamic module,
    # build/native/libwirelens.so, `make native`). Both record the same; only the filter entry differs.
    settings["WIRELENS_FILTER_MODULE"] = environ.get("WIRELENS_FILTER_MODULE", "wasm")
    try:
        wiring.check_module(settings["WIRELENS_FILTER_MODULE"], "WIRELENS_FILTER_MODULE")
    except ValueError as exc:
        raise StackError(str(exc)) from None
    # The share of calls the wirelens filter records (its sample_rate; envoy/wiring.py,
    # "Sampling"). The saved queries and the report weight each recorded call by 1/rate.
    settings["WIRELENS_SAMPLE_RATE"] = environ.get("WIRELENS_SAMPLE_RATE", "1")
    try:
        plugin_settings.check_sample_rate(settings["WIRELENS_SAMPLE_RATE"], "WIRELENS_SAMPLE_RATE")
    except ValueError as exc:
        raise StackError(str(exc)) from None
    # The share of recorded calls whose payloads the filter sizes in the other
    # protocol's encoding (its counterfactual_rate, docs/what-if.md): every
    # call here, 0.01 by the filter's default elsewhere.
    settings["WIRELENS_COUNTERFACTUAL_RATE"] = environ.get("WIRELENS_COUNTERFACTUAL_RATE", "1")
    # The most of a body (or one streamed message) read for it: 1 MiB here, so
    # E4's 500-product list is estimated too (the filter's default is 64 KiB).
    settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"] = environ.get("WIRELENS_COUNTERFACTUAL_MAX_BYTES", "1048576")
    try:
        plugin_settings.check_counterfactual_rate(settings["WIRELENS_COUNTERFACTUAL_RATE"],
                                                  "WIRELENS_COUNTERFACTUAL_RATE")
        plugin_settings.check_counterfactual_max_bytes(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"],
                                                       "WIRELENS_COUNTERFACTUAL_MAX_BYTES")
    except ValueError as exc:
        raise StackError(str(exc)) from None
    # How much of a gRPC status message (grpc-message, which can echo user
    # input) the filter stores: its grpc_message_max_bytes; 0 = never.
    settings["WIRELENS_GRPC_MESSAGE_BYTES"] = environ.get("WIRELENS_GRPC_MESSAGE_BYTES",
                                                         str(plugin_settings.GRPC_MESSAGE_BYTES_DEFAULT))
    try:
        plugin_settings.check_grpc_message_bytes(settings["WIRELENS_GRPC_MESSAGE_BYTES"],
                                                 "WIRELENS_GRPC_MESSAGE_BYTES")
    except ValueError as exc:
        raise StackError(str(exc)) from None
    # Backpressure caps (README, "Guarantees"): the access-log file with its rotated,
    # unshipped files (logship drops and counts the oldest records past it; 0 = no
    # cap), and each Collector exporter's persistent queue, in serialized bytes.
    for name, default in (("WIRELENS_ENVOY_FILE_FLUSH_MS", "200"),
                          ("WIRELENS_ACCESS_LOG_ROTATE_BYTES", str(64 << 20)),
                          ("WIRELENS_ACCESS_LOG_MAX_BYTES", str(1 << 30)),
                          ("WIRELENS_COLLECTOR_QUEUE_BYTES", str(256 << 20))):
        settings[name] = environ.get(name, default)
        if not settings[name].isdigit():
            raise StackError(f"{name}={settings[name]!r} is not a whole number")
    max_bytes, rotate_bytes = int(settings["WIRELENS_ACCESS_LOG_MAX_BYTES"]), int(settings["WIRELENS_ACCESS_LOG_ROTATE_BYTES"])
    if max_bytes and (not rotate_bytes or max_bytes < 2 * rotate_bytes):
        raise StackError(f"WIRELENS_ACCESS_LOG_MAX_BYTES={max_bytes} must be at least twice "
                         f"WIRELENS_ACCESS_LOG_ROTATE_BYTES={rotate_bytes} (logship drops a rotated file at a time)")
    if int(settings["WIRELENS_COLLECTOR_QUEUE_BYTES"]) == 0:
        raise StackError("WIRELENS_COLLECTOR_QUEUE_BYTES=0: each exporter's queue needs room")
    # The queue's file (bbolt) holds more than the serialized bytes it counts: its
    # own cap on disk, past which writes fail like a full queue.
    settings["WIRELENS_COLLECTOR_STORAGE_MAX_BYTES"] = str(2 * int(settings["WIRELENS_COLLECTOR_QUEUE_BYTES"]) + (8 << 20))
    # The services' own tracing (issue 34): `on` (default) gives every service the OTel SDK and
    # its framework's instrumentation, exporting OTLP to the Collector (components.service_tracing_env);
    # `off` installs no SDK at all (the bench's baseline).
    settings["WIRELENS_SERVICE_TRACING"] = environ.get("WIRELENS_SERVICE_TRACING", "on")
    if settings["WIRELENS_SERVICE_TRACING"] not in SERVICE_TRACING:
        raise StackError(f"WIRELENS_SERVICE_TRACING={settings['WIRELENS_SERVICE_TRACING']!r}: expected one of "
                         f"{', '.join(SERVICE_TRACING)}")
    settings["WIRELENS_CLICKHOUSE_ENDPOINT"] = environ.get(
        "WIRELENS_CLICKHOUSE_ENDPOINT",
        f"tcp://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_TCP_PORT']}?dial_timeout=5s")
    return settings


STACKS = ("go", "python", "jvm")
LOG_SHIPPERS = ("logship", "filelog")
SERVICE_TRACING = ("on", "off")


def parse_stacks(value: str) -> list[str]:
    """The stacks of a WIRELENS_STACKS value (go is always one), or StackError."""
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in STACKS]
    if unknown:
        raise StackError(f"WIRELENS_STACKS={value!r}: unknown stack {', '.join(unknown)}; expected {', '.join(STACKS)}")
    return [s for s in STACKS if s == "go" or s in names]


def schema_mode(settings: dict[str, str]) -> tuple[str, bool, bool]:
    """(cluster name or '' for one server, replicated, ON CLUSTER) from the settings; ValueError names a bad one."""
    cluster = settings.get("WIRELENS_CLICKHOUSE_CLUSTER", "")
    flags = []
    for name in ("WIRELENS_CLICKHOUSE_REPLICATED", "WIRELENS_CLICKHOUSE_ON_CLUSTER"):
        value = settings.get(name, "1")
        if value not in ("0", "1"):
            raise ValueError(f"{name}={value!r}: expected 1 or 0")
        flags.append(value == "1")
    if cluster:
        cluster_schema.check_cluster_name(cluster)
    return cluster, flags[0], flags[1]


def stack_on(name: str) -> Callable[[dict[str, str]], bool]:
    """Whether the settings' WIRELENS_STACKS runs the paired services of stack `name`."""
    return lambda s: name in s.get("WIRELENS_STACKS", "go").split(",")


def state_dir(settings: dict[str, str]) -> Path:
    return Path(settings["WIRELENS_STATE_DIR"])


def pid_path(settings: dict[str, str], name: str) -> Path:
    return state_dir(settings) / "pids" / f"{name}.pid"


def log_path(settings: dict[str, str], name: str) -> Path:
    return state_dir(settings) / "logs" / f"{name}.log"


def read_pid(settings: dict[str, str], name: str) -> int | None:
    """The component's pid, if its pid file names a process still running what `up` started."""
    return supervise.read_pid(pid_path(settings, name))
