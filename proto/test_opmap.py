"""Tests for proto/opmap.py (run: .venv/bin/python -m pytest proto/)."""

import json
import os
import subprocess
import sys
import tempfile

import base64

import pytest
from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2, descriptor_pool

from proto import opmap


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
    # .x.Req and .x.Rep are not in this descriptor set: no types, no schema.
    assert all("request_type" not in o and "response_type" not in o for o in ops)
    assert "descriptors" not in doc


def test_response_body_is_kept_like_body():
    rule = http_pb2.HttpRule(post="/v1/things", body="thing", response_body="result")
    rule.additional_bindings.add(get="/v1/things/{id}", response_body="result")
    assert opmap.http_rules(rule) == [
        {"method": "POST", "pattern": "/v1/things", "body": "thing", "response_body": "result"},
        {"method": "GET", "pattern": "/v1/things/{id}", "response_body": "result"},
    ]


HELLO_OPERATIONS = [
    {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
     "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
     "request_type": "wirelens.v1.HelloRequest", "response_type": "wirelens.v1.HelloReply",
     "http_rules": [{"method": "POST", "pattern": "/v1/hello", "body": "*"}]},
    {"grpc_path": "/wirelens.v1.Hello/SayHelloBig", "operation": "hello.SayHelloBig",
     "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHelloBig", "streaming": "unary",
     "request_type": "wirelens.v1.HelloRequest", "response_type": "wirelens.v1.HelloBigReply",
     "http_rules": [{"method": "POST", "pattern": "/v1/hello-big", "body": "*"}]},
]


def _includes():
    import grpc_tools  # in requirements.txt: a missing one fails here, it does not skip
    import google.api
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    gapi = os.path.dirname(os.path.dirname(list(google.api.__path__)[0]))
    return wkt, gapi


def _compile(protos, out, root=HERE, *flags):
    """protoc as proto/gen.sh runs it: a descriptor set of protos (paths under root)."""
    wkt, gapi = _includes()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", str(root), "-I", wkt, "-I", gapi,
                    *flags, f"--descriptor_set_out={out}", *protos], check=True, cwd=root)
    with open(out, "rb") as fh:
        return fh.read()


def _schema(doc):
    """The map's descriptors as a FileDescriptorSet, and a fresh pool built from it alone."""
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(base64.b64decode(doc["descriptors"], validate=True))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:  # in order: every file after its dependencies
        pool.Add(f)
    return fds, pool


def test_hello_proto_end_to_end():
    with tempfile.TemporaryDirectory() as tmp:
        pb = os.path.join(tmp, "wirelens.pb")
        out = os.path.join(tmp, "opmap.json")
        _compile(["wirelens/v1/hello.proto"], pb, HERE, "--include_imports")
        assert opmap.main([pb, "-o", out]) == 0
        with open(out, encoding="utf-8") as fh:
            text = fh.read()
    doc = json.loads(text)
    assert list(doc) == ["operations", "descriptors"]
    assert doc["operations"] == HELLO_OPERATIONS
    fds, pool = _schema(doc)
    assert [f.name for f in fds.file] == ["wirelens/v1/hello.proto"]
    assert list(fds.file[0].dependency) == []
    assert pool.FindMessageTypeByName("wirelens.v1.HelloBigReply").fields_by_name["data_list"]
    assert text.endswith("}\n")


def test_no_descriptors_leaves_out_the_schema_and_the_types():
    with tempfile.TemporaryDirectory() as tmp:
        pb = os.path.join(tmp, "wirelens.pb")
        out = os.path.join(tmp, "opmap.json")
        _compile(["wirelens/v1/hello.proto"], pb, HERE, "--include_imports")
        assert opmap.main([pb, "-o", out, "--no-descriptors"]) == 0
        with open(out, encoding="utf-8") as fh:
            doc = json.load(fh)
    assert doc == {"operations": [{k: v for k, v in op.items() if not k.endswith("_type")}
                                  for op in HELLO_OPERATIONS]}


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


def _all_protos_map():
    protos = sorted(os.path.relpath(os.path.join(d, f), HERE)
                    for d, _, files in os.walk(os.path.join(HERE, "wirelens"))
                    for f in files if f.endswith(".proto"))
    with tempfile.TemporaryDirectory() as tmp:
        # As proto/gen.sh builds it: with imports and source info.
        data = _compile(protos, os.path.join(tmp, "wirelens.pb"), HERE,
                        "--include_imports", "--include_source_info")
    return data, opmap.opmap(data)


def test_all_protos_end_to_end():
    """The operation map of every proto under proto/wirelens (E1-E5's services);
    every unary method has a REST route, no streaming one has."""
    _, doc = _all_protos_map()
    got = [(op["operation"], op["streaming"], [(r["method"], r["pattern"]) for r in op["http_rules"]])
           for op in doc["operations"]]
    assert got == ALL_OPERATIONS
    for op in doc["operations"]:
        assert op["grpc_path"] == f"/{op['rpc_service']}/{op['rpc_method']}"
        assert op["rpc_service"].startswith("wirelens.v1.")


def test_all_protos_types_and_their_pruned_schema():
    data, doc = _all_protos_map()
    source = descriptor_pb2.FileDescriptorSet()
    source.ParseFromString(data)
    methods = {f"/{f.package}.{s.name}/{m.name}": m for f in source.file for s in f.service for m in s.method}
    for op in doc["operations"]:
        method = methods[op["grpc_path"]]
        assert "." + op["request_type"] == method.input_type
        assert "." + op["response_type"] == method.output_type
    assert {op["operation"]: (op["request_type"], op["response_type"]) for op in doc["operations"]
            if op["operation"] in ("people.Register", "catalog.GetProduct")} == {
        "people.Register": ("wirelens.v1.Person", "google.protobuf.Empty"),
        "catalog.GetProduct": ("wirelens.v1.GetProductRequest", "wirelens.v1.Product")}

    fds, pool = _schema(doc)
    names = [f.name for f in fds.file]
    # Every file imports google/api/annotations.proto (-> http.proto, descriptor.proto)
    # for the http option, but no message uses their types.
    assert sorted(names) == ["google/protobuf/empty.proto", "wirelens/v1/catalog.proto",
                             "wirelens/v1/echo.proto", "wirelens/v1/hello.proto",
                             "wirelens/v1/math.proto", "wirelens/v1/people.proto"]
    deps = {f.name: list(f.dependency) for f in fds.file}
    # people.proto imported empty.proto for Register's reply, a method: its messages do not need it.
    assert deps == {name: [] for name in names}
    for f in fds.file:
        assert not f.service and not f.extension and not f.HasField("source_code_info")
        assert not f.public_dependency and not f.weak_dependency
        assert names.index(f.name) > max((names.index(d) for d in f.dependency), default=-1)
    for op in doc["operations"]:
        pool.FindMessageTypeByName(op["request_type"])
        pool.FindMessageTypeByName(op["response_type"])
    # Field JSON names stay (protojson prints them).
    assert pool.FindMessageTypeByName("wirelens.v1.Person").fields_by_name["address"].json_name == "address"
    # Deterministic: the same input gives the same text.
    assert opmap.opmap(data)["descriptors"] == doc["descriptors"]


SHOP = {
    "shop/v1/money.proto": '''syntax = "proto3"; package shop.v1;
        message Money { string currency = 1; int64 units = 2; }
        enum Unused { UNUSED_UNSPECIFIED = 0; }''',
    "shop/v1/kinds.proto": '''syntax = "proto3"; package shop.v1;
        enum Kind { KIND_UNSPECIFIED = 0; BOOK = 1; }''',
    "shop/v1/reexport.proto": '''syntax = "proto3"; package shop.v1;
        import public "shop/v1/kinds.proto";''',
    "shop/v1/cart.proto": '''syntax = "proto3"; package shop.v1;
        import "google/api/annotations.proto";
        import "google/protobuf/duration.proto";
        import "google/protobuf/timestamp.proto";
        import "shop/v1/money.proto";
        import "shop/v1/reexport.proto";
        message Item {
          message Note { google.protobuf.Timestamp at = 1; }  // nested: kept with Item
          string sku = 1; Kind kind = 2;
        }
        message AddRequest { map<string, Item> items = 1; }
        message AddReply { repeated Money totals = 1; }
        message Unrelated { google.protobuf.Duration d = 1; }  // no operation needs it
        service Cart {
          rpc Add(AddRequest) returns (AddReply) {
            option (google.api.http) = { post: "/v1/cart" body: "*" response_body: "totals" };
          }
        }''',
}


def test_pruning_follows_fields_maps_nested_types_and_public_imports(tmp_path):
    for name, text in SHOP.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    data = _compile(["shop/v1/cart.proto"], tmp_path / "shop.pb", tmp_path, "--include_imports")
    doc = opmap.opmap(data, packages=("shop",))
    (op,) = doc["operations"]
    assert (op["request_type"], op["response_type"]) == ("shop.v1.AddRequest", "shop.v1.AddReply")
    assert op["http_rules"] == [{"method": "POST", "pattern": "/v1/cart", "body": "*", "response_body": "totals"}]
    fds, pool = _schema(doc)
    files = {f.name: f for f in fds.file}
    # Through the map entry to Item, its nested Note to Timestamp, the public
    # re-export to Kind; not Duration (only Unrelated uses it), not the re-export
    # file itself, not google/api.
    assert sorted(files) == ["google/protobuf/timestamp.proto", "shop/v1/cart.proto",
                             "shop/v1/kinds.proto", "shop/v1/money.proto"]
    assert [m.name for m in files["shop/v1/cart.proto"].message_type] == ["Item", "AddRequest", "AddReply"]
    assert [e.name for e in files["shop/v1/money.proto"].enum_type] == []
    assert sorted(files["shop/v1/cart.proto"].dependency) == [
        "google/protobuf/timestamp.proto", "shop/v1/kinds.proto", "shop/v1/money.proto"]
    entry = pool.FindMessageTypeByName("shop.v1.AddRequest").fields_by_name["items"].message_type
    assert entry.GetOptions().map_entry and entry.fields_by_name["value"].message_type.full_name == "shop.v1.Item"
    assert pool.FindMessageTypeByName("shop.v1.Item.Note").fields_by_name["at"].message_type.full_name == \
        "google.protobuf.Timestamp"


def test_types_missing_from_the_set_are_left_out_with_a_warning(tmp_path, capsys):
    for name, text in SHOP.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    data = _compile(["shop/v1/cart.proto"], tmp_path / "shop.pb", tmp_path)  # no --include_imports
    doc = opmap.opmap(data, packages=("shop",))
    (op,) = doc["operations"]
    assert "request_type" not in op and "response_type" not in op and "descriptors" not in doc
    assert "cart.Add: " in capsys.readouterr().err
