"""The JVM pair (services/jvm) answers as the Go pair does: same routes, bodies, errors, gRPC messages.

Both pairs run here on free loopback ports, without Envoy (tests/e2e/test_jvm_stack.py puts them
behind it): each operation the JVM pair serves is called on the Go pair, on Spring WebFlux, on
Spring Web MVC and on grpc-java, and the answers compared byte for byte, the catalog's 10,000
products included (a Java port of Go's PCG stream).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from deploy.local import stack
from wirelens_helpers.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]

JAR = ROOT / "build" / "jvm" / "target" / "wirelens-jvm.jar"

REST_SERVERS = ("go", "webflux", "mvc")


@pytest.fixture(scope="module")
def servers():
    """{'go': port, 'webflux': port, 'mvc': port, 'go-grpc': port, 'jvm-grpc': port}, all running."""
    missing = [str(p.relative_to(ROOT)) for p in (JAR, ROOT / "bin" / "rest-server") if not p.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: make jvm-services services builds them")
    names = ("go", "go-grpc", "webflux", "mvc", "jvm-grpc")
    port_of = dict(zip(names, stack.free_ports(len(names))))
    java = ["java", "-Xmx256m", "-jar", str(JAR)]
    commands = {
        "go": [str(ROOT / "bin" / "rest-server"), "-listen", f"127.0.0.1:{port_of['go']}"],
        "go-grpc": [str(ROOT / "bin" / "grpc-server"), "-listen", f"127.0.0.1:{port_of['go-grpc']}"],
        "webflux": [*java, "webflux", "127.0.0.1", str(port_of["webflux"])],
        "mvc": [*java, "mvc", "127.0.0.1", str(port_of["mvc"])],
        "jvm-grpc": [*java, "grpc", "127.0.0.1", str(port_of["jvm-grpc"])],
    }
    processes = {}
    try:
        for name, argv in commands.items():
            processes[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for name, process in processes.items():
            wait_for(f"{name} listening on port {port_of[name]}", stack.tcp_open(port_of[name]),
                     timeout_s=90, interval_s=0.1, processes=[process])
        yield port_of
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=15)
            if process.poll() is None:
                process.kill()
                process.wait()


def rest(port: int, method: str, path: str, body: bytes | None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    base = {"content-type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers={**base, **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("content-type"), data


REST_SAME = [
    ("POST", "/v1/hello", b'{"name":"wirelens"}'),
    ("POST", "/v1/hello", b""),  # the empty message
    ("POST", "/v1/hello", b'{"name":"gr\xc3\xbc\xc3\x9fe \\"q\\" <&>"}'),
    ("POST", "/v1/hello-big", b'{"name":"test"}'),
    ("POST", "/v1/person", b'{"name":"kevin","age":20,"hobbies":["foot ball"],"address":{"city":"seoul","zipCode":"1"}}'),
    ("POST", "/v1/person", b""),
    ("GET", "/v1/products/1", None),
    ("GET", "/v1/products/10000", None),
    ("GET", "/v1/products/10001", None),  # 404, NOT_FOUND, the same message
    ("GET", "/v1/products/0", None),
    ("GET", "/v1/products", None),  # count 0 means 100
    ("GET", "/v1/products?count=500", None),
    ("GET", "/v1/products?count=10000", None),  # every product: the whole generated catalog
    ("GET", "/v1/products?count=-1", None),  # 400, INVALID_ARGUMENT
]


@pytest.mark.parametrize("method, path, body", REST_SAME, ids=[f"{m} {p} {(b or b'')[:16]!r}" for m, p, b in REST_SAME])
def test_rest_answers_the_same_bytes(servers, method, path, body):
    go, webflux, mvc = (rest(servers[s], method, path, body) for s in REST_SERVERS)
    assert webflux == go
    assert mvc == go


def test_rest_errors_have_the_go_pair_shape(servers):
    for body in (b'{"nmae":"x"}', b"{not json"):
        answers = [rest(servers[s], "POST", "/v1/hello", body) for s in REST_SERVERS]
        for status, ctype, data in answers:
            assert (status, ctype, json.loads(data)["code"]) == (400, "application/json", 3), data
            assert json.loads(data)["message"].startswith("invalid JSON body: ")


def test_rest_protobuf_both_ways(servers):
    sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))
    from wirelens.v1 import catalog_pb2, hello_pb2
    body = hello_pb2.HelloRequest(name="wirelens").SerializeToString()
    headers = {"content-type": "application/protobuf", "accept": "application/protobuf"}
    answers = [rest(servers[s], "POST", "/v1/hello", body, headers) for s in REST_SERVERS]
    assert answers[1] == answers[0] and answers[2] == answers[0]
    assert hello_pb2.HelloReply.FromString(answers[0][2]).message == "Hello, wirelens"
    answers = [rest(servers[s], "GET", "/v1/products?count=3", None, {"accept": "application/x-protobuf"})
               for s in REST_SERVERS]
    assert answers[1] == answers[0] and answers[2] == answers[0]
    assert [p.id for p in catalog_pb2.ListProductsReply.FromString(answers[0][2]).products] == [1, 2, 3]


def grpc_call(port: int, method: str, request: bytes):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply, state = channel.unary_unary(method).with_call(request, timeout=20)
            return state.code(), reply, None
        except grpc.RpcError as exc:
            return exc.code(), None, exc.details()


def test_grpc_answers_the_same_messages(servers):
    sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))
    from wirelens.v1 import catalog_pb2, hello_pb2, people_pb2
    hello = hello_pb2.HelloRequest(name="wirelens").SerializeToString()
    person = people_pb2.Person(name="kevin", age=3, hobbies=["a"]).SerializeToString()
    for method, request in (("/wirelens.v1.Hello/SayHello", hello), ("/wirelens.v1.Hello/SayHello", b""),
                            ("/wirelens.v1.Hello/SayHelloBig", hello),
                            ("/wirelens.v1.People/Register", person),
                            ("/wirelens.v1.Catalog/GetProduct", catalog_pb2.GetProductRequest(id=42).SerializeToString()),
                            ("/wirelens.v1.Catalog/GetProduct", catalog_pb2.GetProductRequest(id=0).SerializeToString()),
                            ("/wirelens.v1.Catalog/ListProducts", catalog_pb2.ListProductsRequest(count=500).SerializeToString()),
                            ("/wirelens.v1.Catalog/ListProducts", catalog_pb2.ListProductsRequest(count=-2).SerializeToString())):
        assert grpc_call(servers["jvm-grpc"], method, request) == grpc_call(servers["go-grpc"], method, request), method


def test_grpc_client_stream_counts_the_persons(servers):
    sys.path.insert(0, str(ROOT / "build" / "python" / "gen"))
    from wirelens.v1 import people_pb2
    persons = [people_pb2.Person(name="kevin", age=i).SerializeToString() for i in range(1, 8)]
    for name in ("go-grpc", "jvm-grpc"):
        with grpc.insecure_channel(f"127.0.0.1:{servers[name]}") as channel:
            reply = channel.stream_unary("/wirelens.v1.People/RegisterBatch")(iter(persons), timeout=20)
        assert people_pb2.RegisterBatchReply.FromString(reply).count == 7, name
