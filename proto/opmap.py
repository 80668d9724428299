"""Writes the wirelens filter's operation map from a protobuf descriptor set.

Usage: opmap.py DESCRIPTOR_SET [-o OUT] [--no-descriptors]   (OUT defaults to stdout)

The descriptor set comes from protoc --descriptor_set_out --include_imports
(proto/gen.sh). Only services whose package is ``wirelens`` or ``wirelens.*``
are listed by default; ``--package`` names other packages and
``--all-packages`` takes every service but Google's and gRPC's own
(``google.*``, ``grpc.*``: health, reflection). envoy/inject builds the
operation map of a user's services with the same code. Output (a contract with the Rust filter; keep the key names):

  {"operations": [
    {"grpc_path": "/wirelens.v1.Hello/SayHello",
     "operation": "hello.SayHello",          # service short name, first letter lower-cased
     "rpc_service": "wirelens.v1.Hello",
     "rpc_method": "SayHello",
     "streaming": "unary",                   # unary | client | server | bidi
     "request_type": "wirelens.v1.HelloRequest",   # the method's input and output
     "response_type": "wirelens.v1.HelloReply",    # message types, no leading dot
     "http_rules": [{"method": "POST", "pattern": "/v1/hello", "body": "*"}]}
   ],
   "descriptors": "<base64 FileDescriptorSet>"}

Operations are sorted by grpc_path; http_rules keep the order of the
google.api.http option (the main rule, then its additional_bindings); a rule's
"body" and "response_body" are there only when the option sets them.

"descriptors" (standard base64, padded) is the schema of the operations'
messages, for the filter's counterfactual sizes: a FileDescriptorSet pruned to
the request and response types and what they reference, through fields, map
entries and nested types. A kept file keeps only its top-level messages and
enums in that closure (a message whole, with its nested types), loses its
services, extensions and source info, and lists as dependencies exactly the
kept files it needs (no public or weak imports); files keep the descriptor
set's order, dependencies first, so the set builds a descriptor pool on its
own. An operation whose types do not resolve in the descriptor set (built
without --include_imports) has no request_type / response_type (a warning
says which); with --no-descriptors, no operation has them and there is no
"descriptors" (a smaller configuration, no counterfactual).

This file holds the operation rules for every language: proto/gen.sh also
writes this map into services/gen/wirelens/opmap, which the Go code embeds
(internal/ops).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any, Iterable, Iterator

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
    if out and rule.response_body:
        out[0]["response_body"] = rule.response_body
    for extra in rule.additional_bindings:
        out.extend(http_rules(extra))
    return out


def method_http_rules(method: descriptor_pb2.MethodDescriptorProto) -> list[dict[str, str]]:
    if not method.HasField("options"):
        return []
    if not method.options.HasExtension(annotations_pb2.http):
        return []
    return http_rules(method.options.Extensions[annotations_pb2.http])


def type_name(name: str) -> str:
    """A descriptor's type reference (".pkg.Msg") as the map writes it ("pkg.Msg")."""
    return name[1:] if name.startswith(".") else name


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
                        "request_type": type_name(method.input_type),
                        "response_type": type_name(method.output_type),
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


# ------------------------------------------------------------------ the pruned schema


class _Types:
    """Every message and enum of a descriptor set by full name (no leading dot)."""

    def __init__(self, files: Iterable[descriptor_pb2.FileDescriptorProto]):
        # full name -> (file name, the message or enum, the top-level name it is
        # declared under: itself when top-level)
        self.by_name: dict[str, tuple[str, Any, str]] = {}
        for f in files:
            prefix = f"{f.package}." if f.package else ""
            for m in f.message_type:
                self._message(f.name, prefix + m.name, m, prefix + m.name)
            for e in f.enum_type:
                self.by_name[prefix + e.name] = (f.name, e, prefix + e.name)

    def _message(self, file: str, name: str, m: descriptor_pb2.DescriptorProto, top: str) -> None:
        self.by_name[name] = (file, m, top)
        for nested in m.nested_type:
            self._message(file, f"{name}.{nested.name}", nested, top)
        for e in m.enum_type:
            self.by_name[f"{name}.{e.name}"] = (file, e, top)

    def closure(self, roots: Iterable[str]) -> tuple[set[str], set[str]]:
        """The types roots need (a type's enclosing top-level message whole,
        with all its nested types, and every type their fields name), and the
        names among them that the descriptor set does not define."""
        seen: set[str] = set()
        missing: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in seen or name in missing:
                continue
            entry = self.by_name.get(name)
            if entry is None:
                missing.add(name)
                continue
            seen.add(name)
            _, proto, top = entry
            if top != name:
                todo.append(top)
            if isinstance(proto, descriptor_pb2.DescriptorProto):
                todo.extend(type_name(f.type_name) for f in proto.field if f.type_name)
                todo.extend(f"{name}.{n.name}" for n in proto.nested_type)
                todo.extend(f"{name}.{e.name}" for e in proto.enum_type)
        return seen, missing


def _field_types(m: descriptor_pb2.DescriptorProto) -> Iterator[str]:
    for f in m.field:
        if f.type_name:
            yield type_name(f.type_name)
    for nested in m.nested_type:
        yield from _field_types(nested)


def _drop_extensions(m: descriptor_pb2.DescriptorProto) -> None:
    m.ClearField("extension")
    for nested in m.nested_type:
        _drop_extensions(nested)


def pruned_descriptor_set(files: list[descriptor_pb2.FileDescriptorProto],
                          types: Iterable[str]) -> descriptor_pb2.FileDescriptorSet:
    """The files defining what types need (_Types.closure), each cut down to
    those types and made self-contained (see the module doc). Every name in
    types and its closure must be defined in files."""
    index = _Types(files)
    needed, missing = index.closure(types)
    if missing:
        raise ValueError(f"types not in the descriptor set: {', '.join(sorted(missing))}")
    kept: dict[str, tuple[descriptor_pb2.FileDescriptorProto, set[str]]] = {}
    for f in files:
        prefix = f"{f.package}." if f.package else ""
        messages = [m for m in f.message_type if prefix + m.name in needed]
        enums = [e for e in f.enum_type if prefix + e.name in needed]
        if not messages and not enums:
            continue
        cut = descriptor_pb2.FileDescriptorProto()
        cut.CopyFrom(f)
        for field in ("message_type", "enum_type", "service", "extension", "source_code_info",
                      "dependency", "public_dependency", "weak_dependency", "option_dependency"):
            if field in cut.DESCRIPTOR.fields_by_name:
                cut.ClearField(field)
        cut.message_type.extend(messages)
        cut.enum_type.extend(enums)
        for m in cut.message_type:
            _drop_extensions(m)
        uses = {index.by_name[t][0] for m in messages for t in _field_types(m)} - {f.name}
        kept[f.name] = (cut, uses)
    # The set's order (protoc's: every file after its dependencies), kept
    # where it already holds, else each file after what it uses.
    out = descriptor_pb2.FileDescriptorSet()
    placed: set[str] = set()

    def place(name: str, path: tuple[str, ...] = ()) -> None:
        if name in placed:
            return
        if name in path:
            raise ValueError(f"import cycle: {' -> '.join(path + (name,))}")
        cut, uses = kept[name]
        for dep in sorted(uses, key=list(kept).index):
            place(dep, path + (name,))
        cut.dependency.extend(sorted(uses, key=list(kept).index))
        out.file.append(cut)
        placed.add(name)

    for name in kept:
        place(name)
    return out


def descriptors(files: list[descriptor_pb2.FileDescriptorProto], ops: list[dict[str, Any]]) -> str | None:
    """The base64 "descriptors" of ops, from each op's request_type and
    response_type (None: no op has them). An op whose types do not resolve
    loses them, with a warning."""
    index = _Types(files)
    roots: list[str] = []
    for op in ops:
        if "request_type" not in op:
            continue
        pair = [op["request_type"], op["response_type"]]
        _, missing = index.closure(pair)
        if missing:
            print(f"opmap: warning: {op['operation']}: {', '.join(sorted(missing))} not in the descriptor set "
                  "(build it with protoc --include_imports); no request_type/response_type",
                  file=sys.stderr)
            del op["request_type"], op["response_type"]
            continue
        roots.extend(pair)
    if not roots:
        return None
    pruned = pruned_descriptor_set(files, roots)
    return base64.b64encode(pruned.SerializeToString(deterministic=True)).decode("ascii")


def opmap(descriptor_set: bytes, packages: Iterable[str] | None = OUR_PACKAGES,
          with_descriptors: bool = True) -> dict[str, Any]:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(descriptor_set)
    files = list(fds.file)
    ops = operations(files, packages)
    doc: dict[str, Any] = {"operations": ops}
    if not with_descriptors:
        for op in ops:
            del op["request_type"], op["response_type"]
        return doc
    encoded = descriptors(files, ops)
    if encoded is not None:
        doc["descriptors"] = encoded
    return doc


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
    parser.add_argument("--no-descriptors", action="store_true",
                        help="leave out the message types and the pruned descriptor set "
                             "(a smaller configuration; no counterfactual sizes)")
    args = parser.parse_args(argv)
    packages = None if args.all_packages else tuple(args.package or OUR_PACKAGES)

    with open(args.descriptor_set, "rb") as fh:
        text = render(opmap(fh.read(), packages, with_descriptors=not args.no_descriptors))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
