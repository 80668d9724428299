#!/usr/bin/env python3
"""Writes the wirelens filter's operation map from a protobuf descriptor set.

Usage: opmap.py DESCRIPTOR_SET [-o OUT]   (OUT defaults to stdout)

The descriptor set comes from protoc --descriptor_set_out --include_imports
(proto/gen.sh). Only services whose package is ``wirelens`` or ``wirelens.*``
are listed by default; ``--package`` names other packages and
``--all-packages`` takes every service but Google's and gRPC's own
(``google.*``, ``grpc.*``: health, reflection). envoy/inject.py builds the
operation map of a user's services with the same code. Output (a contract with the Rust filter; keep the key names):

  {"operations": [
    {"grpc_path": "/wirelens.v1.Hello/SayHello",
     "operation": "hello.SayHello",          # service short name, first letter lower-cased
     "rpc_service": "wirelens.v1.Hello",
     "rpc_method": "SayHello",
     "streaming": "unary",                   # unary | client | server | bidi
     "http_rules": [{"method": "POST", "pattern": "/v1/hello", "body": "*"}]}
  ]}

Operations are sorted by grpc_path; http_rules keep the order of the
google.api.http option (the main rule, then its additional_bindings); a rule's
"body" is there only when the option sets one. This file holds the operation
rules for every language: proto/gen.sh also writes this map into
services/gen/wirelens/opmap, which the Go code embeds (internal/ops).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Iterable

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2

# HttpRule's pattern oneof: field name -> HTTP method.
_PATTERN_METHODS = {
    "get": "GET",
    "put": "PUT",
    "post": "POST",
    "delete": "DELETE",
    "patch": "PATCH",
}


OUR_PACKAGES = ("wirelens",)
INFRASTRUCTURE_PACKAGES = ("google", "grpc")


def in_scope(package: str, packages: Iterable[str] | None = OUR_PACKAGES) -> bool:
    """Is a service of this package listed? packages None: all but google.* and grpc.*."""
    def under(prefixes: Iterable[str]) -> bool:
        return any(package == p or package.startswith(p + ".") for p in prefixes)
    return not under(INFRASTRUCTURE_PACKAGES) if packages is None else under(packages)


def streaming_kind(method: descriptor_pb2.MethodDescriptorProto) -> str:
    client, server = method.client_streaming, method.server_streaming
    if client and server:
        return "bidi"
    if client:
        return "client"
    if server:
        return "server"
    return "unary"


def operation_name(service_name: str, method_name: str) -> str:
    return service_name[:1].lower() + service_name[1:] + "." + method_name


def http_rules(rule: http_pb2.HttpRule) -> list[dict[str, str]]:
    """Flattens one google.api.http rule and its additional_bindings."""
    out: list[dict[str, str]] = []
    kind = rule.WhichOneof("pattern")
    if kind in _PATTERN_METHODS:
        out.append({"method": _PATTERN_METHODS[kind], "pattern": getattr(rule, kind)})
    elif kind == "custom":
        out.append({"method": rule.custom.kind, "pattern": rule.custom.path})
    if out and rule.body:  # only when set: the filter's map keeps its keys for GET routes
        out[0]["body"] = rule.body
    for extra in rule.additional_bindings:
        out.extend(http_rules(extra))
    return out


def method_http_rules(method: descriptor_pb2.MethodDescriptorProto) -> list[dict[str, str]]:
    if not method.HasField("options"):
        return []
    if not method.options.HasExtension(annotations_pb2.http):
        return []
    return http_rules(method.options.Extensions[annotations_pb2.http])


def operations(files: Iterable[descriptor_pb2.FileDescriptorProto],
               packages: Iterable[str] | None = OUR_PACKAGES) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for f in files:
        if not in_scope(f.package, packages):
            continue
        for service in f.service:
            full_service = f"{f.package}.{service.name}" if f.package else service.name
            for method in service.method:
                ops.append(
                    {
                        "grpc_path": f"/{full_service}/{method.name}",
                        "operation": operation_name(service.name, method.name),
                        "rpc_service": full_service,
                        "rpc_method": method.name,
                        "streaming": streaming_kind(method),
                        "http_rules": method_http_rules(method),
                    }
                )
    ops.sort(key=lambda op: op["grpc_path"])
    seen: dict[str, str] = {}
    for op in ops:
        other = seen.setdefault(op["operation"], op["grpc_path"])
        if other != op["grpc_path"]:
            print(
                f"opmap: warning: operation {op['operation']} names both "
                f"{other} and {op['grpc_path']}",
                file=sys.stderr,
            )
    return ops


def opmap(descriptor_set: bytes, packages: Iterable[str] | None = OUR_PACKAGES) -> dict[str, Any]:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(descriptor_set)
    return {"operations": operations(fds.file, packages)}


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("descriptor_set", help="FileDescriptorSet written by protoc --include_imports")
    parser.add_argument("-o", "--output", help="output file (default: stdout)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--package", action="append", metavar="PKG",
                       help="list services of PKG and its sub-packages (repeatable; default: wirelens)")
    scope.add_argument("--all-packages", action="store_true",
                       help="list every service except google.* and grpc.*")
    args = parser.parse_args(argv)
    packages = None if args.all_packages else tuple(args.package or OUR_PACKAGES)

    with open(args.descriptor_set, "rb") as fh:
        text = render(opmap(fh.read(), packages))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
