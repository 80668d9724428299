"""The JVM pair (services/jvm: Spring WebFlux, Spring Web MVC, grpc-java) behind the same Envoy.

Golden cross-protocol rows in test_local_stack.py's style: the same calls to the Go pair and to
the JVM pair over every protocol that carries each operation land as exactly N rows per (stack,
operation, protocol), the stack from Envoy's cluster metadata (jvm, jvm-mvc), and the JVM pair's
bodies and gRPC messages have exactly the Go pair's sizes (its catalog is the same 10,000
products, its JSON the same compact proto3 mapping).
"""

from __future__ import annotations

import json
import subprocess
import uuid

import grpc

from tests.e2e.conftest import ROOT, rows
from wirelens_helpers.wait import wait_for
from tests.e2e.test_local_stack import HELLO_REPLY, HELLO_REQUEST, REST_REPLY, REST_REQUEST, STACK_HEADER, protocols_for

CALLS = 3
# E2, E3 and E4's operations (the JVM pair serves these), each with its loadgen flags.
OPERATIONS = {
    "hello.SayHello": ["-name", "wirelens"],
    "hello.SayHelloBig": ["-name", "wirelens"],
    "people.Register": [],
    "people.RegisterBatch": ["-messages", "10"],
    "catalog.GetProduct": ["-id", "0"],  # cycles 1, 2, 3: the same three products on every stack
    "catalog.ListProducts": ["-count", "100"],
}
REST_FAMILY = ("rest", "rest-proto", "rest-transcoded")


def plan() -> list[tuple[str, str, str, str, str]]:
    """(stack, operation, recorded protocol, loadgen protocol, listener) of every call group."""
    operations = {op["operation"]: op["streaming"]
                  for op in json.loads((ROOT / "build" / "opmap.json").read_text())["operations"]}
    out = []
    for stack_name in ("go", "jvm", "jvm-mvc"):
        for operation in OPERATIONS:
            for recorded_as, protocol, port in protocols_for(operations[operation]):
                # jvm-mvc names Spring Web MVC's REST; its gRPC is the pair's grpc-java (stack jvm).
                if stack_name == "jvm-mvc" and recorded_as not in ("rest", "rest-proto"):
                    continue
                out.append((stack_name, operation, recorded_as, protocol, port))
    return out


def test_jvm_pair_rows_and_sizes_are_the_go_pairs(local_stack):
    settings, run_id = local_stack, f"e2e-jvm-{uuid.uuid4().hex[:8]}"
    expected: dict[tuple[str, str, str], int] = {}
    for stack_name, operation, recorded_as, protocol, port in plan():
        result = subprocess.run(
            [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port]}", "-protocol", protocol,
             "-operation", operation, *OPERATIONS[operation], "-n", str(CALLS), "-run-id", run_id,
             "-stack", stack_name, "-timeout", "60s"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{stack_name} {operation} over {recorded_as}: {result.stderr}"
        summary = json.loads(result.stdout.splitlines()[-1])
        assert (summary["stack"], summary["ok"], summary["errors"]) == (stack_name, CALLS, 0), summary
        expected[(stack_name, operation, recorded_as)] = CALLS

    def seen():
        return {(s, op, p): int(n) for s, op, p, n in rows(
            settings, "SELECT stack, operation, protocol, count() FROM wirelens.requests FINAL "
                      f"WHERE run_id = '{run_id}' GROUP BY stack, operation, protocol")}

    wait_for(f"{sum(expected.values())} rows of run {run_id}", seen, lambda s: sum(s.values()) >= sum(expected.values()))
    assert seen() == expected
    failures = rows(settings, "SELECT stack, operation, protocol, http_status, grpc_status FROM wirelens.requests "
                              f"FINAL WHERE run_id = '{run_id}' AND (http_status != 200 OR ifNull(grpc_status, 0) != 0 "
                              "OR malformed OR upstream_service_ms IS NULL)")
    assert failures == []

    # Sizes per (stack, operation, protocol): REST bodies, gRPC messages (gRPC-Web bodies also hold
    # each server's own trailers, which differ: grpc-go and grpc-java word them differently).
    sizes = {(s, op, p): tuple(map(int, v)) for s, op, p, *v in rows(
        settings, "SELECT stack, operation, protocol, sum(request_body_bytes), sum(response_body_bytes), "
                  "sum(request_message_bytes), sum(response_message_bytes), sum(request_messages), "
                  "sum(response_messages) FROM wirelens.requests FINAL "
                  f"WHERE run_id = '{run_id}' GROUP BY stack, operation, protocol")}

    def comparable(key):
        body_in, body_out, msg_in, msg_out, n_in, n_out = sizes[key]
        return (body_in, body_out) if key[2] in REST_FAMILY else (msg_in, msg_out, n_in, n_out)

    for stack_name, operation, recorded_as, _, _ in plan():
        if stack_name != "go":
            assert comparable((stack_name, operation, recorded_as)) == comparable(("go", operation, recorded_as)), \
                (stack_name, operation, recorded_as, sizes[(stack_name, operation, recorded_as)])
    # The golden hello: known bytes, independently counted.
    for stack_name in ("jvm", "jvm-mvc"):
        assert sizes[(stack_name, "hello.SayHello", "rest")][:2] == (CALLS * len(REST_REQUEST), CALLS * len(REST_REPLY))
    assert comparable(("jvm", "hello.SayHello", "grpc")) == (
        CALLS * len(HELLO_REQUEST), CALLS * len(HELLO_REPLY), CALLS, CALLS)
    # E4's list of 100 products is ~79 KB as JSON on both stacks, the same bytes.
    assert 70_000 < sizes[("jvm", "catalog.ListProducts", "rest")][1] / CALLS < 90_000


def test_jvm_pair_answers_the_golden_hello_through_envoy(local_stack):
    """Byte for byte: the JVM pair's REST reply and gRPC message through Envoy are the Go pair's."""
    import http.client
    port = int(local_stack["WIRELENS_ENVOY_PORT"])
    for stack_name in ("jvm", "jvm-mvc"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/v1/hello", body=REST_REQUEST,
                     headers={"content-type": "application/json", STACK_HEADER: stack_name})
        response = conn.getresponse()
        assert (response.status, response.getheader("content-type"), response.read()) == \
            (200, "application/json", REST_REPLY), stack_name
        conn.close()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply, call = channel.unary_unary("/wirelens.v1.Hello/SayHello").with_call(
            HELLO_REQUEST, timeout=10, metadata=[(STACK_HEADER, "jvm")])
    assert call.code() == grpc.StatusCode.OK and reply == HELLO_REPLY
