"""Tests for proto/opmap.py (run: .venv/bin/python -m pytest proto/)."""

import json
import os
import subprocess
import sys
import tempfile

import pytest
from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2

import wirelens_helpers  # noqa: F401  (the checkout's programs by module name: tools/pyhelpers/wirelens_helpers/programs.py)
import opmap  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def _method(name, *, client=False, server=False, rule=None):
    m = descriptor_pb2.MethodDescriptorProto(
        name=name, input_type=".x.Req", output_type=".x.Rep",
        client_streaming=client, server_streaming=server)
    if rule is not None:
        m.options.Extensions[annotations_pb2.http].CopyFrom(rule)
    return m


def _file(package, service, methods):
    f = descriptor_pb2.FileDescriptorProto(name=f"{package}/{service}.proto", package=package)
    f.service.add(name=service).method.extend(methods)
    return f


def test_streaming_rules_and_sorting():
    rule = http_pb2.HttpRule(get="/v1/products/{id}")
    rule.additional_bindings.add(post="/v1/products:get", body="*")
    rule.additional_bindings.add(custom=http_pb2.CustomHttpPattern(kind="HEAD", path="/v1/p/{id}"))
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(_file("wirelens.catalog.v1", "CatalogService", [
        _method("Watch", server=True),
        _method("GetProduct", rule=rule),
        _method("Chat", client=True, server=True),
        _method("Upload", client=True),
    ]))
    fds.file.append(_file("other.v1", "Skipped", [_method("X")]))
    fds.file.append(_file("wirelensx", "AlsoSkipped", [_method("Y")]))
    doc = opmap.opmap(fds.SerializeToString())
    ops = doc["operations"]
    assert [o["grpc_path"] for o in ops] == [
        "/wirelens.catalog.v1.CatalogService/Chat",
        "/wirelens.catalog.v1.CatalogService/GetProduct",
        "/wirelens.catalog.v1.CatalogService/Upload",
        "/wirelens.catalog.v1.CatalogService/Watch",
    ]
    by = {o["rpc_method"]: o for o in ops}
    assert by["Chat"]["streaming"] == "bidi"
    assert by["Upload"]["streaming"] == "client"
    assert by["Watch"]["streaming"] == "server"
    assert by["GetProduct"]["streaming"] == "unary"
    assert by["GetProduct"]["operation"] == "catalogService.GetProduct"
    assert by["GetProduct"]["rpc_service"] == "wirelens.catalog.v1.CatalogService"
    assert by["GetProduct"]["http_rules"] == [
        {"method": "GET", "pattern": "/v1/products/{id}"},
        {"method": "POST", "pattern": "/v1/products:get", "body": "*"},
        {"method": "HEAD", "pattern": "/v1/p/{id}"},
    ]
    assert by["Watch"]["http_rules"] == []


HELLO_OPMAP = {"operations": [
    {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
     "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
     "http_rules": [{"method": "POST", "pattern": "/v1/hello", "body": "*"}]},
    {"grpc_path": "/wirelens.v1.Hello/SayHelloBig", "operation": "hello.SayHelloBig",
     "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHelloBig", "streaming": "unary",
     "http_rules": [{"method": "POST", "pattern": "/v1/hello-big", "body": "*"}]},
]}


def test_hello_proto_end_to_end():
    grpc_tools = pytest.importorskip("grpc_tools")
    import google.api
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    gapi = os.path.dirname(os.path.dirname(list(google.api.__path__)[0]))
    with tempfile.TemporaryDirectory() as tmp:
        pb = os.path.join(tmp, "wirelens.pb")
        out = os.path.join(tmp, "opmap.json")
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", HERE, "-I", wkt, "-I", gapi,
                        "--include_imports", f"--descriptor_set_out={pb}", "wirelens/v1/hello.proto"],
                       check=True, cwd=HERE)
        assert opmap.main([pb, "-o", out]) == 0
        with open(out, encoding="utf-8") as fh:
            text = fh.read()
    assert json.loads(text) == HELLO_OPMAP
    assert text.endswith("}\n")


# Every operation of proto/wirelens/v1: (operation, streaming, [(method, pattern)]).
ALL_OPERATIONS = [
    ("catalog.GetProduct", "unary", [("GET", "/v1/products/{id}")]),
    ("catalog.ListProducts", "unary", [("GET", "/v1/products")]),
    ("echo.BiStream", "bidi", []),
    ("echo.ServerStream", "server", []),
    ("echo.Unary", "unary", [("GET", "/v1/echo")]),
    ("hello.SayHello", "unary", [("POST", "/v1/hello")]),
    ("hello.SayHelloBig", "unary", [("POST", "/v1/hello-big")]),
    ("math.CalculateFactorial", "unary", [("POST", "/v1/factorial")]),
    ("people.Register", "unary", [("POST", "/v1/person")]),
    ("people.RegisterBatch", "client", []),
]


def test_all_protos_end_to_end():
    """The operation map of every proto under proto/wirelens (E1-E5's services);
    every unary method has a REST route, no streaming one has."""
    grpc_tools = pytest.importorskip("grpc_tools")
    import google.api
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    gapi = os.path.dirname(os.path.dirname(list(google.api.__path__)[0]))
    protos = sorted(os.path.relpath(os.path.join(d, f), HERE)
                    for d, _, files in os.walk(os.path.join(HERE, "wirelens"))
                    for f in files if f.endswith(".proto"))
    with tempfile.TemporaryDirectory() as tmp:
        pb = os.path.join(tmp, "wirelens.pb")
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", HERE, "-I", wkt, "-I", gapi,
                        "--include_imports", f"--descriptor_set_out={pb}", *protos],
                       check=True, cwd=HERE)
        with open(pb, "rb") as fh:
            doc = opmap.opmap(fh.read())
    got = [(op["operation"], op["streaming"], [(r["method"], r["pattern"]) for r in op["http_rules"]])
           for op in doc["operations"]]
    assert got == ALL_OPERATIONS
    for op in doc["operations"]:
        assert op["grpc_path"] == f"/{op['rpc_service']}/{op['rpc_method']}"
        assert op["rpc_service"].startswith("wirelens.v1.")
