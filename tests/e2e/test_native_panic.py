"""The native module fails open: a panic in any of its hooks never reaches Envoy.

An Envoy 1.40 of its own runs the native module built with the panic probe
(`make native-probe`: feature panic-probe, a request header
`x-wirelens-panic: <hook>` makes that hook panic) in front of the Go REST
and gRPC services. For each hook, a REST call and a gRPC call that panic
there:

- the call itself succeeds, with the service's exact answer (the stream
  went on without the filter), and so does a good call right after;
- Envoy's log names the hook (`wirelens: panic in <hook>`, error level);
- the call's record is in the access log (%FILTER_STATE(wasm.wirelens.record:PLAIN)%)
  marked `wirelens.malformed` 1 (wire key `mf`), except after a panic in
  `stream_complete`, which runs after the record was published (at the
  response's end: REST's last body chunk, gRPC's trailers): that record is
  complete and unmarked; the good calls' records are unmarked;
- after all of it Envoy is live, with no Envoy bug counted.
"""
from __future__ import annotations

import json
import urllib.request

import grpc
import pytest

from deploy.local import stack
from envoy import wiring
from filters import recordgen
from tests.e2e import bare_envoy
from wirelens_helpers import supervise
from wirelens_helpers.ports import free_ports
from wirelens_helpers.wait import wait_for

PROBE = bare_envoy.NATIVE_PROBE
DEADLINE_S = 20.0
HOOKS = ("request_headers", "request_body", "response_headers", "response_body", "response_trailers",
         "stream_complete")
# Hooks that run after the record was published (nothing left to mark), per protocol.
AFTER_PUBLICATION = {"rest": {"stream_complete"}, "grpc": {"stream_complete"}}
# Hooks a call of that protocol passes through (no trailers on the REST responses).
PASSES = {"rest": set(HOOKS) - {"response_trailers"}, "grpc": set(HOOKS)}
SAY_HELLO = "/wirelens.v1.Hello/SayHello"
HELLO_REQUEST, HELLO_REPLY = b"\x0a\x06native", b"\x0a\x0dHello, native"

LOG_FORMAT = {"case": "%REQ(x-wirelens-case)%", "record": "%FILTER_STATE(wasm.wirelens.record:PLAIN)%"}


@pytest.fixture(scope="module")
def envoy_with_probe(tmp_path_factory):
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is missing: make native-probe builds it")
    tmp = tmp_path_factory.mktemp("native-panic")
    port, admin, rest, grpc_port = free_ports(4)
    config = json.dumps(json.loads((stack.ROOT / "build" / "opmap.json").read_text()) | {"counterfactual_rate": 0},
                        separators=(",", ":"))
    programs = [
        supervise.Supervised("REST service", [str(stack.ROOT / "bin" / "rest-server"), "-listen", f"127.0.0.1:{rest}"],
                             tmp / "rest.log", new_session=False),
        supervise.Supervised("gRPC service", [str(stack.ROOT / "bin" / "grpc-server"), "-listen",
                                              f"127.0.0.1:{grpc_port}"], tmp / "grpc.log", new_session=False),
    ]
    try:
        for p in programs:
            p.start()
        programs.append(bare_envoy.start("Envoy with the panic probe", bare_envoy.config(
            port=port, admin=admin, http_filter=wiring.native_filter(config, PROBE),
            routes=[("/wirelens.v1.", "grpc"), ("/", "rest")], clusters={"rest": (rest, False), "grpc": (grpc_port, True)},
            access_log=tmp / "access.log", log_format=LOG_FORMAT), tmp))
        yield {"port": port, "admin": admin, "log": tmp / "envoy.log", "access_log": tmp / "access.log",
               "envoy": programs[2]}
    finally:
        for p in reversed(programs):
            p.stop(grace_s=DEADLINE_S)


def rest_call(port: int, case: str, panic: str | None) -> tuple[int, bytes]:
    headers = {"content-type": "application/json", "x-wirelens-case": case}
    if panic:
        headers["x-wirelens-panic"] = panic
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/hello", data=b'{"name":"native"}', headers=headers,
                                 method="POST")
    with urllib.request.urlopen(req, timeout=DEADLINE_S) as r:
        return r.status, r.read()


def grpc_call(port: int, case: str, panic: str | None) -> bytes:
    metadata = [("x-wirelens-case", case)] + ([("x-wirelens-panic", panic)] if panic else [])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        return channel.unary_unary(SAY_HELLO)(HELLO_REQUEST, timeout=DEADLINE_S, metadata=metadata)


def records(access_log) -> dict[str, dict]:
    """The access log's records by case (a call without a record: {})."""
    out = {}
    for entry in bare_envoy.logged(access_log):
        record = entry.get("record")
        out[entry["case"]] = recordgen.decode_published(record) if record and record != "-" else {}
    return out


def stat(admin: int, name: str) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/stats?filter=^{name}$", timeout=DEADLINE_S).read()
    return int(text.decode().split(":")[1]) if text.strip() else 0


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_a_panic_in_any_hook_fails_the_call_open(envoy_with_probe, protocol):
    e = envoy_with_probe
    expected = {}
    for hook in sorted(PASSES[protocol]):
        for case, panic in ((f"{protocol}-{hook}", hook), (f"{protocol}-{hook}-after", None)):
            if protocol == "rest":
                assert rest_call(e["port"], case, panic) == (200, b'{"message":"Hello, native"}'), case
            else:
                assert grpc_call(e["port"], case, panic) == HELLO_REPLY, case
            marked = panic is not None and hook not in AFTER_PUBLICATION[protocol]
            expected[case] = 1 if marked else 0
    got = wait_for("a record per call in the access log", lambda: records(e["access_log"]),
                   lambda r: set(expected) <= set(r), timeout_s=DEADLINE_S,
                   state=lambda: e["access_log"].read_text()[-2000:])
    wire = "grpc" if protocol == "grpc" else "rest"
    for case, mf in expected.items():
        assert got[case].get("mf") == mf, (case, got[case])
        assert got[case].get("pr") == wire and got[case].get("op") == "hello.SayHello", (case, got[case])
    log = e["log"].read_text()
    for hook in PASSES[protocol]:
        assert f"wirelens: panic in {hook}" in log, hook
    assert e["envoy"].alive()
    assert supervise.http_get(f"http://127.0.0.1:{e['admin']}/ready")[0] == 200
    assert stat(e["admin"], "server.envoy_bug_failures") == 0
