"""The counterfactual against the paired services, the oracle no other tool has (issue 27, item 5).

Every E1-E5 operation served both as REST and as unary gRPC is called with the
same logical requests over every protocol (loadgen, sequential: call i of each
run carries request i), through the real Envoy with the filter sampling every
call for the counterfactual (the local stack's rate 1). Per call i:

- the protobuf message the filter estimates from the REST twin's JSON (request
  and response, path and query bound) plus gRPC's 5-byte prefix equals the
  message bytes plus framing measured on the gRPC twin's call i (and on
  gRPC-Web, gRPC-Web-text, and the transcoded REST listener's estimate);
- the JSON body the filter estimates from each gRPC-family call i, and from the
  protobuf REST call i, equals the body bytes measured on the REST twin's call i
  (a GET's request body: 0);
- rest-proto's request estimate (its body with the path and query bound)
  plus 5 equals gRPC's request message plus framing, and its measured
  protobuf response body equals gRPC's response message bytes.

A mismatch names the operation, the protocol, the call and both numbers.
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from envoy import wiring
from tests.e2e.conftest import ROOT, rows, stack_for_module
from wirelens_helpers.wait import wait_for

CALLS = 12
# Replies holding a value the server measures per call, so the REST and gRPC twins differ in it.
SERVER_TIMED_REPLIES = {"math.CalculateFactorial"}
# E1-E5's operations with a REST route and a unary gRPC method, and the
# loadgen flags that make call i the same logical request on every protocol.
OPERATIONS = {
    "math.CalculateFactorial": ["-number", "1000"],
    "hello.SayHello": [],
    "hello.SayHelloBig": [],
    "people.Register": [],
    "catalog.GetProduct": ["-id", "0"],
    "catalog.ListProducts": ["-count", "20"],
    "echo.Unary": [],
}
# (recorded protocol, loadgen -protocol, listener)
PROTOCOLS = [
    ("rest", "rest", "WIRELENS_ENVOY_PORT"),
    ("rest-proto", "rest-proto", "WIRELENS_ENVOY_PORT"),
    ("rest-transcoded", "rest", "WIRELENS_ENVOY_TRANSCODE_PORT"),
    ("grpc", "grpc", "WIRELENS_ENVOY_PORT"),
    ("grpc-web", "grpc-web", "WIRELENS_ENVOY_PORT"),
    ("grpc-web-text", "grpc-web-text", "WIRELENS_ENVOY_PORT"),
]
COLUMNS = ["counterfactual_reason", "request_body_bytes", "response_body_bytes",
           "request_message_bytes", "response_message_bytes", "request_framing_bytes", "response_framing_bytes",
           "counterfactual_request_proto_bytes", "counterfactual_response_proto_bytes",
           "counterfactual_request_json_bytes", "counterfactual_response_json_bytes"]


def calls_of(settings, run_id: str) -> list[dict]:
    """The run's rows in the order they were sent (sequential model)."""
    out = rows(settings, f"SELECT {', '.join(COLUMNS)} FROM wirelens.requests FINAL "
                         f"WHERE run_id = '{run_id}' ORDER BY timestamp")
    return [{c: (None if v == "\\N" else v if c == "counterfactual_reason" else int(v))
             for c, v in zip(COLUMNS, r)} for r in out]


@pytest.fixture(scope="module", params=wiring.MODULES)
def twins_stack(request):
    """Both builds of the filter estimate the same (envoy/wiring.py, MODULES): the Wasm build's
    session stack, then the native build's (conftest.native_stack)."""
    return stack_for_module(request, "local_stack")


def test_rest_and_grpc_twins_estimate_each_other_exactly(twins_stack):
    settings = twins_stack
    session = f"e2e-whatif-{uuid.uuid4().hex[:8]}"
    runs = {}
    for operation, flags in OPERATIONS.items():
        for recorded_as, protocol, port in PROTOCOLS:
            run_id = f"{session}-{operation}-{recorded_as}"
            result = subprocess.run(
                [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port]}", "-protocol", protocol,
                 "-operation", operation, "-n", str(CALLS), "-run-id", run_id, "-timeout", "60s", *flags],
                capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, f"{operation} over {recorded_as}: {result.stderr}"
            assert json.loads(result.stdout.splitlines()[-1])["ok"] == CALLS
            runs[(operation, recorded_as)] = run_id

    def counts():
        return {r[0]: int(r[1]) for r in rows(
            settings, "SELECT run_id, count() FROM wirelens.requests FINAL "
                      f"WHERE run_id LIKE '{session}-%' GROUP BY run_id")}

    wait_for(f"{CALLS} rows for each of {len(runs)} runs",
             counts, lambda seen: all(seen.get(r, 0) >= CALLS for r in runs.values()))

    problems = []
    print(f"\n{'operation':24} {'REST body req/resp':>20} {'gRPC est. req/resp':>20} "
          f"{'gRPC msg+5 req/resp':>20} {'REST est. from gRPC':>20}   (call 0, bytes)")
    for operation in OPERATIONS:
        calls = {p: calls_of(settings, runs[(operation, p)]) for p, _, _ in PROTOCOLS}
        r0, g0 = calls["rest"][0], calls["grpc"][0]
        pair = lambda a, b: f"{a}/{b}"  # noqa: E731
        print(f"{operation:24} {pair(r0['request_body_bytes'], r0['response_body_bytes']):>20} "
              f"{pair((r0['counterfactual_request_proto_bytes'] or 0) + 5, (r0['counterfactual_response_proto_bytes'] or 0) + 5):>20} "
              f"{pair(g0['request_message_bytes'] + g0['request_framing_bytes'], g0['response_message_bytes'] + g0['response_framing_bytes']):>20} "
              f"{pair(g0['counterfactual_request_json_bytes'], g0['counterfactual_response_json_bytes']):>20}")
        for p, got in calls.items():
            assert len(got) == CALLS, f"{operation} over {p}: {len(got)} rows, want {CALLS}"
        for i in range(CALLS):
            rest, grpc = calls["rest"][i], calls["grpc"][i]
            reasons = {p: calls[p][i]["counterfactual_reason"] for p in calls}
            if set(reasons.values()) != {"ok"}:
                problems.append(f"{operation} call {i}: reasons {reasons}")
                continue
            # gRPC's message plus its framing, as REST's twin would send it.
            want_req = grpc["request_message_bytes"] + grpc["request_framing_bytes"]
            want_resp = grpc["response_message_bytes"] + grpc["response_framing_bytes"]
            for p in ("rest", "rest-transcoded"):
                got = (calls[p][i]["counterfactual_request_proto_bytes"] + 5,
                       calls[p][i]["counterfactual_response_proto_bytes"] + 5)
                if got != (want_req, want_resp):
                    problems.append(f"{operation} call {i}: {p}'s gRPC estimate {got}, gRPC measured "
                                    f"{(want_req, want_resp)}")
            # A protobuf REST request: its body plus what its URL binds, as gRPC's message.
            got = calls["rest-proto"][i]["counterfactual_request_proto_bytes"]
            if got is None or got + 5 != want_req:
                problems.append(f"{operation} call {i}: rest-proto's gRPC request estimate {got} + 5, "
                                f"gRPC measured {want_req}")
            for p in ("grpc-web", "grpc-web-text"):
                measured = (calls[p][i]["request_message_bytes"], calls[p][i]["response_message_bytes"])
                if measured != (grpc["request_message_bytes"], grpc["response_message_bytes"]):
                    problems.append(f"{operation} call {i}: {p} messages {measured}, gRPC's "
                                    f"{(grpc['request_message_bytes'], grpc['response_message_bytes'])}")
            proto_bodies = (calls["rest-proto"][i]["request_body_bytes"],
                            calls["rest-proto"][i]["response_body_bytes"])
            if proto_bodies[1] != grpc["response_message_bytes"]:
                problems.append(f"{operation} call {i}: rest-proto response body {proto_bodies[1]}, "
                                f"gRPC message {grpc['response_message_bytes']}")
            # The JSON bodies REST measured, as the gRPC family's twin would send them. A reply
            # with a value the server measures per call (CalculateFactorial's time_taken, a float
            # whose JSON has as many digits as that call's timing) differs between the twins
            # themselves: only its request is compared (its protobuf reply, fixed-size, is above).
            timed = operation in SERVER_TIMED_REPLIES
            want_json = (rest["request_body_bytes"], None if timed else rest["response_body_bytes"])
            for p in ("grpc", "grpc-web", "grpc-web-text", "rest-proto"):
                got = (calls[p][i]["counterfactual_request_json_bytes"],
                       None if timed else calls[p][i]["counterfactual_response_json_bytes"])
                if got != want_json:
                    problems.append(f"{operation} call {i}: {p}'s JSON estimate {got}, REST measured {want_json}")
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:40])
