"""A bare Envoy for tests that need one filter and nothing else of the stack: one listener, a JSON file
access log, the filter under test before the router, prefix routes to loopback upstreams.

    config = bare_envoy.config(port=..., admin=..., http_filter=wiring.native_filter(cfg, so),
                               routes=[("/", "upstream")], clusters={"upstream": (upstream_port, True)},
                               access_log=tmp / "access.log", log_format={"record": "%FILTER_STATE(...)%"})
    envoy = bare_envoy.start("Envoy with X", config, tmp)     # ready, or AssertionError with its log
"""
from __future__ import annotations

import json
from pathlib import Path

from deploy.local import stack
from envoy import wiring
from wirelens_helpers import supervise

READY_S = 20.0
# The native module built with the test-only features panic-probe and conformance (make native-probe).
NATIVE_PROBE = stack.ROOT / "build" / "native-probe" / "libwirelens.so"
ROUTER = {"name": "envoy.filters.http.router",
          "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}


def _address(port: int) -> dict:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def config(*, port: int, admin: int, http_filter: dict, routes: list[tuple[str, str]],
           clusters: dict[str, tuple[int, bool]], access_log: Path, log_format: dict[str, str]) -> dict:
    """routes: (path prefix, cluster) in match order; clusters: name -> (loopback port, HTTP/2 upstream)."""
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "bare",
        "codec_type": "AUTO",
        "access_log": [{"name": "envoy.access_loggers.file", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
            "path": str(access_log), "log_format": {"json_format": log_format}}}],
        "http_filters": [http_filter, ROUTER],
        "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [
            {"match": {"prefix": prefix}, "route": {"cluster": cluster}} for prefix, cluster in routes]}]},
    }
    return {
        "admin": {"address": _address(admin)},
        "static_resources": {
            "listeners": [{"name": "main", "address": _address(port), "filter_chains": [{"filters": [
                {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]}],
            "clusters": [{
                "name": name, "type": "STATIC",
                **({"typed_extension_protocol_options": wiring.http2_upstream()} if http2 else {}),
                "load_assignment": {"cluster_name": name, "endpoints": [
                    {"lb_endpoints": [{"endpoint": {"address": _address(upstream)}}]}]},
            } for name, (upstream, http2) in clusters.items()],
        },
    }


def argv(config_path: Path, envoy: str | None = None) -> list[str]:
    return [envoy or str(stack.envoy_binary()), "-c", str(config_path), "--concurrency", "1",
            "--disable-hot-restart", "--log-level", "warn"]


def start(name: str, envoy_config: dict, tmp: Path, envoy: str | None = None) -> supervise.Supervised:
    """Writes tmp/envoy.yaml, starts Envoy (log: tmp/envoy.log) and waits until its admin says LIVE."""
    (tmp / "envoy.yaml").write_text(json.dumps(envoy_config))
    admin = envoy_config["admin"]["address"]["socket_address"]["port_value"]
    program = supervise.Supervised(name, argv(tmp / "envoy.yaml", envoy), tmp / "envoy.log", new_session=False)
    program.start()
    try:
        program.wait_ready(supervise.http_ok(f"http://127.0.0.1:{admin}/ready", "LIVE"), timeout_s=READY_S,
                           error=AssertionError)
    except BaseException:
        program.stop(grace_s=READY_S)
        raise
    return program


def logged(access_log: Path) -> list[dict]:
    """The JSON access-log entries Envoy has written so far. Its file sink may flush a long line in pieces, so
    only lines with their newline count: a half-written last line is not an entry yet."""
    text = access_log.read_text() if access_log.exists() else ""
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]
