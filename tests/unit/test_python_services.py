"""The Python pair (services/python) answers as the Go pair does: same routes, bodies, errors, gRPC messages.

Both pairs run here on free loopback ports, without Envoy (the stack tests put
them behind it): each operation the Python pair serves is called on both, and
the answers compared byte for byte (factorial: all but the time it took).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from deploy.local import stack
from wirelens_helpers.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))

GEN = ROOT / "build" / "python" / "gen" / "wirelens" / "v1" / "math_pb2.py"



@pytest.fixture(scope="module")
def pairs():
    """{'go': (rest port, grpc port), 'python': (...)}, all four servers running."""
    missing = [str(p.relative_to(ROOT)) for p in (GEN, ROOT / "bin" / "rest-server") if not p.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: make python-services services builds them")
    ports = stack.free_ports(4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "services" / "python"), str(GEN.parents[2])])}
    commands = {
        ("go", "rest"): [str(ROOT / "bin" / "rest-server"), "-listen", f"127.0.0.1:{ports[0]}"],
        ("go", "grpc"): [str(ROOT / "bin" / "grpc-server"), "-listen", f"127.0.0.1:{ports[1]}"],
        ("python", "rest"): [sys.executable, "-m", "uvicorn", "wirelens_py.rest_server:app", "--host", "127.0.0.1",
                             "--port", str(ports[2]), "--log-level", "warning"],
        ("python", "grpc"): [sys.executable, "-m", "wirelens_py.grpc_server", "--listen", f"127.0.0.1:{ports[3]}"],
    }
    port_of = dict(zip(commands, ports))
    processes = []
    try:
        for key, argv in commands.items():
            process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            processes.append(process)
            wait_for(f"{' '.join(key)} listening on port {port_of[key]}", stack.tcp_open(port_of[key]),
                     timeout_s=30, interval_s=0.05, processes=[process])
        yield {s: (port_of[(s, "rest")], port_of[(s, "grpc")]) for s in ("go", "python")}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
                process.wait()


def rest(port: int, path: str, body: bytes, headers: dict | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=body, headers={"content-type": "application/json", **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("content-type"), data


REST_SAME = [
    ("/v1/hello", b'{"name":"wirelens"}'),
    ("/v1/hello", b""),  # the empty message
    ("/v1/hello", b'{"name":"gr\xc3\xbc\xc3\x9fe \\"q\\""}'),
    ("/v1/hello-big", b'{"name":"wirelens"}'),
    ("/v1/factorial", b'{"number":10000}'),
    ("/v1/factorial", b'{"number":-1}'),  # 400, INVALID_ARGUMENT, the same message
    ("/v1/factorial", b'{"number":10000001}'),
]


@pytest.mark.parametrize("path, body", REST_SAME, ids=[f"{p} {b[:20]!r}" for p, b in REST_SAME])
def test_rest_answers_the_same_bytes(pairs, path, body):
    go = rest(pairs["go"][0], path, body)
    python = rest(pairs["python"][0], path, body)
    if path == "/v1/factorial" and go[0] == 200:
        go_json, py_json = json.loads(go[2]), json.loads(python[2])
        assert go_json.pop("timeTaken") > 0 and py_json.pop("timeTaken") > 0
        assert (go[0], go[1], go_json) == (python[0], python[1], py_json) == (200, "application/json",
                                                                             {"result": "6388460"})
        return
    assert python == go


def test_rest_errors_have_the_go_pair_shape(pairs):
    for body in (b'{"nmae":"x"}', b"{not json"):
        go, python = rest(pairs["go"][0], "/v1/hello", body), rest(pairs["python"][0], "/v1/hello", body)
        assert go[0] == python[0] == 400
        assert json.loads(python[2])["code"] == json.loads(go[2])["code"] == 3
        assert json.loads(python[2])["message"].startswith("invalid JSON body: ")


def test_rest_protobuf_both_ways(pairs):
    from wirelens.v1 import hello_pb2
    body = hello_pb2.HelloRequest(name="wirelens").SerializeToString()
    headers = {"content-type": "application/protobuf", "accept": "application/protobuf"}
    go = rest(pairs["go"][0], "/v1/hello", body, headers)
    python = rest(pairs["python"][0], "/v1/hello", body, headers)
    assert python == go
    assert hello_pb2.HelloReply.FromString(python[2]).message == "Hello, wirelens"


def grpc_call(port: int, method: str, request: bytes) -> tuple[grpc.StatusCode, bytes | None, str | None]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(method)  # raw bytes both ways
        try:
            reply, state = call.with_call(request, timeout=10)
            return state.code(), reply, None
        except grpc.RpcError as exc:
            return exc.code(), None, exc.details()


def test_grpc_answers_the_same_messages(pairs):
    from wirelens.v1 import hello_pb2, math_pb2
    hello = hello_pb2.HelloRequest(name="wirelens").SerializeToString()
    for method, request in (("/wirelens.v1.Hello/SayHello", hello), ("/wirelens.v1.Hello/SayHello", b""),
                            ("/wirelens.v1.Hello/SayHelloBig", hello),
                            ("/wirelens.v1.Math/CalculateFactorial", math_pb2.FactorialRequest(number=-5)
                             .SerializeToString())):
        assert grpc_call(pairs["python"][1], method, request) == grpc_call(pairs["go"][1], method, request), method
    request = math_pb2.FactorialRequest(number=10000).SerializeToString()
    replies = [math_pb2.FactorialReply.FromString(grpc_call(pairs[s][1], "/wirelens.v1.Math/CalculateFactorial",
                                                            request)[1]) for s in ("go", "python")]
    assert [r.result for r in replies] == [6388460, 6388460] and all(r.time_taken > 0 for r in replies)
