"""End to end: wirelens injected into Envoy configs we did not write, measured live.

For each config in tests/e2e/user_configs (shapes users run: a front proxy,
a gRPC bridge, tracing already on, TLS, two listeners, per-route config,
grpc-web + CORS, a transcoder), envoy/inject.py adds wirelens; real Envoy
validates the result and serves known calls of every protocol the config
carries, next to the original config. Checked: the responses are the same
byte for byte, every call is exactly one row in ClickHouse with its
operation, protocol, body bytes and messages, its span is in Jaeger, and
--remove gives back the original file. The record takes the durable default:
Envoy's file access log, shipped by the agent `inject --agent-config` wrote
(logship), run as a user would run it.

The ECDS test (with the OTLP access logger, behind its flag) changes the
operation map, the counterfactual rate, the sample rate and the module while
traffic flows, and finds each switch at a known point in the rows.

Both run once per build of the filter (`--module wasm|native`, envoy/wiring.py
MODULES): a config written by someone else gets the native module as it gets
the Wasm one, through ECDS too.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import string
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from tests.e2e.conftest import ROOT, free_ports, jaeger_trace, rows, stack
from wirelens_helpers import supervise
from wirelens_helpers.wait import wait_for
from tests.e2e.numbered_calls import NumberedCalls
from tests.e2e.test_local_stack import HELLO_REPLY, HELLO_REQUEST, REST_REPLY, REST_REQUEST, grpc_frame, traceparent, varint
from wirelens_helpers import programs
from envoy import wiring
from envoy.inject import edit

USER_CONFIGS = ROOT / "tests" / "e2e" / "user_configs"
CASES = json.loads((USER_CONFIGS / "cases.json").read_text())
INJECT = programs.command("envoy.inject")  # run with env=programs.environment(): from any directory
DESCRIPTORS = ROOT / "build" / "proto" / "wirelens.pb"
WASM = ROOT / "build" / "wirelens_filter.wasm"
# Headers that differ between any two responses, with or without wirelens.
VARYING_HEADERS = {"date", "x-envoy-upstream-service-time"}
GRPC_FAMILY = {"grpc", "grpc-web", "grpc-web-text"}


# ---------------------------------------------------------------- Envoy processes


class Envoy:
    """One Envoy we start and stop ourselves (its process group), under wirelens_helpers.supervise."""

    def __init__(self, config: Path, admin_port: int, log: Path, extra: tuple[str, ...] = ()):
        self.admin_port = admin_port
        self.log = log
        self.supervised = supervise.Supervised(
            f"Envoy with {config.name}", [str(stack.envoy_binary()), "-c", str(config), "--disable-hot-restart",
                                          "--concurrency", "1", "--log-level", "warn", *extra], log)
        self.process = self.supervised.start()
        try:
            self.supervised.wait_ready(supervise.http_ok(f"http://127.0.0.1:{admin_port}/ready", "LIVE"),
                                       timeout_s=60)
        except supervise.SupervisorError as exc:
            self.stop()
            pytest.fail(str(exc))

    def stat(self, name: str) -> int:
        # Envoy's main thread serves the admin and builds a new Wasm VM from an ECDS update: under a load
        # average of 20-30 on 2 cores (other builds) that took over 5 s (a /stats timeout in a full e2e run).
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/stats?filter=^{name}$", timeout=30).read()
        for line in text.decode().splitlines():
            key, _, value = line.partition(": ")
            if key == name:
                return int(value)
        return 0

    def stop(self) -> None:
        self.supervised.stop(grace_s=20)


class ShippingAgent:
    """The agent beside Envoy as the user runs it: the script `inject --agent-config` wrote (logship)."""

    def __init__(self, script: Path, port: int, log: Path):
        self.port = port
        self.supervised = supervise.Supervised(f"the agent {script.name}", ["sh", str(script)], log)
        self.supervised.start()
        try:
            self.supervised.wait_ready(supervise.http_ok(f"http://127.0.0.1:{port}/healthz"), timeout_s=60)
        except supervise.SupervisorError as exc:
            self.stop()
            pytest.fail(str(exc))

    def progress(self) -> dict:
        return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.port}/progress", timeout=10).read())

    def stop(self) -> None:
        self.supervised.stop(grace_s=20)


def durable_flags(tmp_path: Path, settings: dict) -> tuple[list[str], Path, int]:
    """inject's flags for the durable default (the file access log and logship beside Envoy) in tmp_path:
    the flags, the agent's script and its port."""
    (agent_port,) = free_ports(1)
    script = tmp_path / "ship-access-log.sh"
    return (["--access-log-path", str(tmp_path / "logs" / "access.jsonl"), "--agent-config", str(script),
             "--agent-port", str(agent_port),
             "--collector", f"127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}"], script, agent_port)


def validate(config: Path, node_flags: tuple[str, ...]) -> str:
    result = subprocess.run([str(stack.envoy_binary()), "--mode", "validate", "-c", str(config),
                             "--disable-hot-restart", "--log-level", "error", *node_flags],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"envoy --mode validate {config.name}:\n{result.stdout}{result.stderr}"
    return result.stdout.strip()


# ---------------------------------------------------------------- clients


@dataclass
class Answer:
    status: str                       # HTTP status, or the gRPC code
    headers: dict[str, str]
    body: bytes
    request_body_bytes: int
    response_body_bytes: int          # what crossed the wire to the client as body (gRPC: the frames)
    request_messages: int = 0
    response_messages: int = 0

    def seen_by_client(self) -> tuple:
        return self.status, {k: v for k, v in self.headers.items() if k not in VARYING_HEADERS}, self.body


def _http(port: int, tls: Path | None, method: str, path: str, body: bytes, headers: dict[str, str]):
    if tls:
        context = ssl.create_default_context(cafile=str(tls))
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=context)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def call(protocol: str, port: int, call_spec: dict, tls: Path | None, extra_headers: dict[str, str]) -> Answer:
    authority = call_spec.get("authority")
    headers = dict(extra_headers)
    if authority:
        headers["host"] = authority
    if protocol in ("rest", "rest-transcoded"):
        status, got, body = _http(port, tls, "POST", "/v1/hello", REST_REQUEST,
                                  {**headers, "content-type": "application/json"})
        return Answer(str(status), got, body, len(REST_REQUEST), len(body))
    if protocol == "rest-proto":
        status, got, body = _http(port, tls, "POST", "/v1/hello", HELLO_REQUEST,
                                  {**headers, "content-type": "application/x-protobuf",
                                   "accept": "application/x-protobuf"})
        return Answer(str(status), got, body, len(HELLO_REQUEST), len(body))
    if protocol in ("grpc-web", "grpc-web-text") or call_spec.get("http1"):
        frame = grpc_frame(HELLO_REQUEST)
        if protocol == "grpc-web":
            sent, kind = frame, {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"}
        elif protocol == "grpc-web-text":
            sent, kind = base64.b64encode(frame), {"content-type": "application/grpc-web-text", "x-grpc-web": "1",
                                                    "accept": "application/grpc-web-text"}
        else:                          # gRPC over HTTP/1.1, for grpc_http1_bridge
            sent, kind = frame, {"content-type": "application/grpc", "te": "trailers"}
        status, got, body = _http(port, tls, "POST", "/wirelens.v1.Hello/SayHello", sent, {**headers, **kind})
        return Answer(str(status), got, body, len(sent), len(body), 1, 1)
    assert protocol == "grpc", protocol
    target = f"127.0.0.1:{port}"
    options = [("grpc.default_authority", authority)] if authority else []
    channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials(tls.read_bytes()), options)
               if tls else grpc.insecure_channel(target, options))
    with channel:
        reply, rpc = channel.unary_unary("/wirelens.v1.Hello/SayHello").with_call(
            HELLO_REQUEST, timeout=20, metadata=list(headers.items()))
        metadata = {k: v for k, v in (*rpc.initial_metadata(), *rpc.trailing_metadata())}
    return Answer(rpc.code().name, metadata, reply, 5 + len(HELLO_REQUEST), 5 + len(reply), 1, 1)


# ---------------------------------------------------------------- the proof on users' configs


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def render_case(case: dict, settings: dict, tls_cert, ports: dict[str, int]) -> str:
    template = string.Template((USER_CONFIGS / case["file"]).read_text())
    return template.substitute(
        {name: str(port) for name, port in ports.items()},
        REST_PORT=settings["WIRELENS_REST_PORT"], GRPC_PORT=settings["WIRELENS_GRPC_PORT"],
        OTEL_PORT=settings["WIRELENS_COLLECTOR_OTLP_PORT"], CERT_FILE=str(tls_cert[0]), KEY_FILE=str(tls_cert[1]),
        DESCRIPTOR_SET=str(DESCRIPTORS))


def new_ports() -> dict[str, int]:
    return dict(zip(("LISTEN_PORT", "LISTEN_PORT_2", "ADMIN_PORT"), free_ports(3)))


def node_flags(case: dict) -> tuple[str, ...]:
    return () if case["has_node"] else ("--service-node", f"{case['name']}-1", "--service-cluster", case["name"])


def wirelens_span(trace: dict | None) -> tuple[dict, str] | None:
    """The span of a trace that carries the wirelens record, and its service name."""
    for span in (trace or {}).get("spans", []):
        tags = {t["key"]: t["value"] for t in span.get("tags", [])}
        if "wirelens.protocol" in tags:
            return tags, trace["processes"][span["processID"]]["serviceName"]
    return None


def module_flags(module: str) -> list[str]:
    """inject's flags for a build of the filter (envoy/wiring.py, MODULES): the same tool, only the filter differs."""
    if module == "native":
        return ["--module", "native", "--native", str(wiring.MODULE_FILES["native"])]
    return ["--wasm", str(WASM)]


@pytest.mark.parametrize("module", wiring.MODULES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_injected_user_config_measures_every_call_and_changes_nothing(local_stack, case, module, tmp_path, tls_cert):
    settings = local_stack
    suffix = Path(case["file"]).suffix
    original_ports, injected_ports = new_ports(), new_ports()
    original = tmp_path / f"original{suffix}"
    original.write_text(render_case(case, settings, tls_cert, original_ports))
    users = tmp_path / f"envoy{suffix}"
    users.write_text(render_case(case, settings, tls_cert, injected_ports))
    injected = tmp_path / f"envoy-wirelens{suffix}"
    # The transcoder's config names its own descriptor set; the tool must find it there.
    descriptor = [] if case["name"] == "grpc-json-transcoder" else ["--descriptor-set", str(DESCRIPTORS)]
    # The durable default: Envoy's file access log, shipped by the agent inject wrote (logship).
    flags, script, agent_port = durable_flags(tmp_path, settings)
    (tmp_path / "logs").mkdir()
    result = subprocess.run([*INJECT, str(users), "-o", str(injected), *module_flags(module), *descriptor, *flags],
                            env=programs.environment(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "ship the file with the agent beside Envoy (logship" in result.stderr, result.stderr
    listener_names = {listener["name"] for listener in case["listeners"]}
    assert all(f'listener "{name}"' in result.stderr for name in listener_names), result.stderr
    validate(original, node_flags(case))
    validate(injected, node_flags(case))

    assert f"({edit.BUILD_NOTES[module]})" in result.stderr, result.stderr
    run_id = f"inject-{module}-{case['name']}-{uuid.uuid4().hex[:8]}"
    envoys = []
    try:
        envoys.append(Envoy(original, original_ports["ADMIN_PORT"], tmp_path / "original.log", node_flags(case)))
        envoys.append(Envoy(injected, injected_ports["ADMIN_PORT"], tmp_path / "injected.log", node_flags(case)))
        envoys.append(ShippingAgent(script, agent_port, tmp_path / "agent.log"))
        expected: dict[str, tuple[str, Answer]] = {}
        for listener in case["listeners"]:
            tls = tls_cert[0] if listener["tls"] else None
            for spec in listener["calls"]:
                protocol = spec["protocol"]
                before = call(protocol, original_ports[listener["port"]], spec, tls, {"traceparent": traceparent()[1]})
                trace_id, tp = traceparent()
                after = call(protocol, injected_ports[listener["port"]], spec, tls,
                             {"traceparent": tp, "x-wirelens-run": run_id})
                assert after.seen_by_client() == before.seen_by_client(), \
                    f"{protocol} on {listener['name']}: wirelens changed what the client sees"
                assert after.status in ("200", "OK"), (protocol, after)
                expected[trace_id] = (protocol, after)
        # Envoy batches access-log records and spans: it runs until they have arrived.
        check_rows_and_spans(settings, case, run_id, expected)
        progress = envoys[-1].progress()
        assert progress["records_rejected"] == 0 and progress["malformed_lines"] == 0, progress
    finally:
        for envoy in envoys:
            envoy.stop()

    removed = subprocess.run([*INJECT, "--remove", str(injected)], env=programs.environment(), capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == users.read_text(), "--remove did not give back the original file"


def check_rows_and_spans(settings, case: dict, run_id: str, expected: dict) -> None:

    columns = ("trace_id, protocol, operation, rpc_service, rpc_method, request_body_bytes, response_body_bytes, "
               "request_messages, response_messages, grpc_status, http_status")
    query = f"SELECT {columns} FROM wirelens.requests FINAL WHERE run_id = '{run_id}' ORDER BY trace_id"
    wait_for(f"{len(expected)} rows of run {run_id}", lambda: rows(settings, query),
             lambda seen: len(seen) >= len(expected))
    got = {row[0]: row[1:] for row in rows(settings, query)}
    assert len(rows(settings, query)) == len(expected), "more rows than calls"
    for trace_id, (protocol, answer) in expected.items():
        grpc_status = "0" if protocol in GRPC_FAMILY else got.get(trace_id, [None] * 10)[8]
        assert got.get(trace_id) == [
            protocol, "hello.SayHello", "wirelens.v1.Hello", "SayHello", str(answer.request_body_bytes),
            str(answer.response_body_bytes), str(answer.request_messages), str(answer.response_messages),
            grpc_status, "200"], f"{protocol} call {trace_id}: row differs"

    # The spans' service: the case's own tracer (otel-tracing), one a caller names (Istio: the proxy's
    # node cluster), else the service name wirelens' tracer gives.
    tracer_service = case.get("tracer_service") or ("edge-proxy" if case["name"] == "otel-tracing" else "wirelens-envoy")
    for trace_id, (protocol, answer) in expected.items():
        tags, service = wait_for(f"the span of the {protocol} call {trace_id} in Jaeger",
                                 lambda: wirelens_span(jaeger_trace(f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}", trace_id)), lambda found: found is not None)
        assert service == tracer_service
        assert tags["wirelens.protocol"] == protocol and tags["wirelens.operation"] == "hello.SayHello"
        assert tags["http.request.body.size"] == answer.request_body_bytes
        if case["name"] == "otel-tracing":   # the user's own tags stay on the span
            assert tags["deployment.environment"] == "staging"


# ---------------------------------------------------------------- live updates through ECDS


def with_custom_section(wasm: bytes, name: str, payload: bytes) -> bytes:
    """The same module with one more custom section: a new build as far as Envoy can tell."""
    content = varint(len(name)) + name.encode() + payload   # sizes are LEB128, as protobuf varints
    return wasm + b"\x00" + varint(len(content)) + content


def numbered_rest_call(port: int, run_id: str) -> Callable[[int, str], str | None]:
    """One numbered REST call (tests/e2e/numbered_calls.py's send): None when answered 200 with the reply."""
    def send(number: int, tp: str) -> str | None:
        status, _, body = _http(port, None, "POST", "/v1/hello", REST_REQUEST,
                                {"content-type": "application/json", "x-wirelens-run": run_id, "traceparent": tp})
        return None if status == 200 and body == REST_REPLY else f"status {status}, body {body[:80]!r}"
    return send


def upgraded_build(module: str, tmp_path: Path, run: str) -> Path:
    """A new build of the module, as far as Envoy can tell: the Wasm with one more custom section,
    the .so with bytes after its end (the loader maps what its program headers name)."""
    if module == "native":
        upgraded = tmp_path / "libwirelens-upgraded.so"
        upgraded.write_bytes(wiring.MODULE_FILES["native"].read_bytes() + run.encode())
        return upgraded
    upgraded = tmp_path / "wirelens_filter-upgraded.wasm"
    upgraded.write_bytes(with_custom_section(WASM.read_bytes(), "wirelens.build", run.encode()))
    return upgraded


@pytest.mark.parametrize("module", wiring.MODULES)
def test_ecds_switches_operation_map_sample_rate_and_module_live(local_stack, module, tmp_path, tls_cert):
    settings = local_stack
    case = next(c for c in CASES if c["name"] == "grpc-web-cors")
    ports = new_ports()
    users = tmp_path / "envoy.yaml"
    users.write_text(render_case(case, settings, tls_cert, ports))
    ecds = tmp_path / "ecds"
    injected = tmp_path / "envoy-wirelens.yaml"
    # Start without an operation map: REST calls are the operation "unknown" until the map arrives.
    # The OTLP access logger, behind its flag, runs live here (the Collector stays up in this test).
    result = subprocess.run([*INJECT, str(users), "-o", str(injected), *module_flags(module), "--ecds-dir", str(ecds),
                             "--access-log", "otlp",
                             "--collector", f"127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}"],
                            env=programs.environment(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    validate(injected, ())
    reload_stat = "extension_config_discovery.http_filter.wirelens.config_reload"
    # A rejected update also raises config_reload (DESIGN.md): Envoy must have rejected none.
    rejected_stat = "extension_config_discovery.http_filter.wirelens.update_rejected"
    envoy = Envoy(injected, ports["ADMIN_PORT"], tmp_path / "envoy.log")
    run = f"ecds-{uuid.uuid4().hex[:8]}"
    # Numbered calls all through the changes (tests/e2e/numbered_calls.py): every one answered, and one row
    # each at sample_rate 1, also in flight during the map change and the upgrade; none at 0.
    through = NumberedCalls(numbered_rest_call(ports["LISTEN_PORT"], f"{run}-through"), rate_per_s=25,
                            name=f"numbered calls through the ECDS changes ({module})")
    per_phase = 20

    def phase(name: str) -> None:
        for _ in range(per_phase):
            status, _, _ = _http(ports["LISTEN_PORT"], None, "POST", "/v1/hello", REST_REQUEST,
                                 {"content-type": "application/json", "x-wirelens-run": f"{run}-{name}"})
            assert status == 200

    def update(*flags: str, sample_rate: float = 1) -> str:
        reloads = envoy.stat(reload_stat)
        with through.change(" ".join(f.rsplit("/", 1)[-1] for f in flags), sample_rate):
            done = subprocess.run([*INJECT, "--update-ecds", "--ecds-dir", str(ecds), *flags],
                                  env=programs.environment(), capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            # The known point: Envoy has taken the new resource.
            wait_for(f"{reload_stat} > {reloads} after --update-ecds {' '.join(flags)}",
                     lambda: envoy.stat(reload_stat), lambda seen: seen > reloads, timeout_s=30)
        assert envoy.stat(rejected_stat) == 0, \
            f"Envoy rejected --update-ecds {' '.join(flags)}:\n{(tmp_path / 'envoy.log').read_text()[-3000:]}"
        return done.stderr

    upgraded = upgraded_build(module, tmp_path, run)
    try:
        through.start()
        phase("no-map")
        update("--descriptor-set", str(DESCRIPTORS))
        phase("map")
        # Every recorded call is sized in the other encoding, then none: the access log is not involved.
        assert "wirelens: counterfactual_rate 0.01 -> 1\n" in update("--counterfactual-rate", "1")
        phase("counterfactual")
        assert "wirelens: counterfactual_rate 1 -> 0\n" in update("--counterfactual-rate", "0")
        phase("no-counterfactual")
        update("--sample-rate", "0", sample_rate=0)
        phase("unsampled")
        update("--sample-rate", "1")
        # The upgrade at sample_rate 1: the calls in flight while Envoy swaps the module lose no row either.
        if module == "native":
            update("--native", str(upgraded))
            # A new build is a new content-addressed path, which Envoy loads beside the old one.
            (resource,) = json.loads((ecds / "wirelens.json").read_text())["resources"]
            loaded = wiring.filter_parts(resource["typed_config"])[2]
            assert loaded.read_bytes() == upgraded.read_bytes()
            wait_for(f"Envoy (pid {envoy.process.pid}) to load {loaded.name}",
                     lambda: str(loaded) in Path(f"/proc/{envoy.process.pid}/maps").read_text(),
                     lambda found: found, timeout_s=30)
        else:
            vms = envoy.stat("wasm.envoy.wasm.runtime.v8.created")
            update("--wasm", str(upgraded))
            assert envoy.stat("wasm.envoy.wasm.runtime.v8.created") > vms, "the new module did not start a new VM"
        phase("upgraded")
        through.stop()
        query = (f"SELECT run_id, operation, count() FROM wirelens.requests FINAL WHERE run_id LIKE '{run}-%' "
                 f"AND run_id != '{run}-through' GROUP BY run_id, operation ORDER BY run_id")
        want = [[f"{run}-counterfactual", "hello.SayHello", str(per_phase)],
                [f"{run}-map", "hello.SayHello", str(per_phase)],
                [f"{run}-no-counterfactual", "hello.SayHello", str(per_phase)],
                [f"{run}-no-map", "unknown", str(per_phase)],
                [f"{run}-upgraded", "hello.SayHello", str(per_phase)]]
        # Envoy batches access-log records: it runs until they have arrived.
        wait_for(f"the rows of the ECDS phases of run {run}", lambda: rows(settings, query),
                 lambda seen: sum(int(r[2]) for r in seen) >= len(want) * per_phase)
        assert rows(settings, query) == want
        # At rate 1 every call's record carries the counterfactual (cr "ok"; the JSON body's message
        # in protobuf is exactly what the gRPC client sends, prefix aside); at 0 (and after) none does.
        counterfactual = rows(settings, (
            f"SELECT run_id, counterfactual_reason, counterfactual_request_proto_bytes, "
            f"counterfactual_response_proto_bytes, count() FROM wirelens.requests FINAL "
            f"WHERE run_id IN ('{run}-counterfactual', '{run}-no-counterfactual', '{run}-upgraded') "
            f"GROUP BY ALL ORDER BY run_id"))
        assert counterfactual == [
            [f"{run}-counterfactual", "ok", str(len(HELLO_REQUEST)), str(len(HELLO_REPLY)), str(per_phase)],
            [f"{run}-no-counterfactual", "", "\\N", "\\N", str(per_phase)],
            [f"{run}-upgraded", "", "\\N", "\\N", str(per_phase)]], counterfactual
    finally:
        through.stopping.set()
        envoy.stop()
    # The numbered calls: all answered, all logged, at sample_rate 1 exactly one row each (the missing and the
    # doubled named by number), none while it was 0; the calls in a 1 <-> 0 window one row or none.
    counts = through.check(settings, f"{run}-through")
    print(f"{module}: " + through.summary(counts) + "\n  " + "\n  ".join(through.timeline()), file=sys.stderr)


# ---------------------------------------------------------------- the default path across a Collector restart


def test_default_path_loses_no_call_across_a_collector_restart_the_otlp_logger_does(local_stack, tmp_path):
    """inject's default (the file access log + the logship script it writes) against --access-log otlp, at once,
    through one Collector SIGKILL and restart (bench/restart_loss.py's measurement, bounded): every call of the
    default path is a row; the OTLP path's missing rows are the records Envoy dropped while the Collector was down
    (its logs_dropped; a few it had written onto the stream the kill cut would be lost too: none in the runs so far)."""
    from bench import restart_loss   # noqa: PLC0415

    result = restart_loss.measure(local_stack, tmp_path, ["otlp", "logship"], calls=400, rate=40.0, kill_after=100,
                                  down_s=3.0, deadline_s=150.0)
    durable, otlp = result["paths"]["logship"], result["paths"]["otlp"]
    print(json.dumps(result, indent=2))
    assert durable["answered"] == otlp["answered"] == 400, result
    assert durable["rows"] == 400, f"the default path lost {durable['lost']} of 400 calls: {durable}"
    assert durable["agent"]["export_failures"] > 0, f"logship never saw the Collector down: {durable['agent']}"
    stats = {key.rsplit(".", 1)[1]: value for key, value in otlp["envoy_stats"].items()}
    assert otlp["settled_s"] is not None, f"the OTLP path never settled: {otlp}"
    assert stats["logs_dropped"] > 0, f"Envoy's OTel access logger dropped nothing while the Collector was down: {otlp}"
    in_flight = stats["logs_written"] - otlp["rows"]
    assert otlp["rows"] + stats["logs_dropped"] + in_flight == 400 and 0 <= in_flight <= 20, (
        f"OTLP path: {otlp['rows']} rows + {stats['logs_dropped']} dropped by Envoy + {in_flight} written but lost "
        f"!= 400 calls: {otlp}")
