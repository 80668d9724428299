#!/usr/bin/env python3
"""Writes vectors.json, the oracle for the filter's counterfactual sizes (issue 27).

Usage: make_vectors.py            regenerate vectors.json beside this file
       make_vectors.py --check    regenerate in memory; fail if vectors.json differs

Run it with the project venv (.venv/bin/python): protoc is grpcio-tools' (as in
proto/gen.sh), the oracle is the venv's Python protobuf. Each case holds a
message of corpus.proto as Python protobuf encodes it (``binary``,
SerializeToString) and as Go's protojson.Marshal prints it by default
(``json``), with both sizes in bytes. The JSON is json_format.MessageToDict
(default options) printed by the small serialiser below, which follows
protojson where Python's printer differs: no whitespace, map and Struct keys
sorted, fields in declaration order, protojson's string escaping and its float
formatting. README.md lists the differences.

Every valid case is checked here before it is written: the printed JSON,
parsed by json_format (with two fixes that make it read numbers as protojson
does: parse_json, float_bounds_as_protojson), serialises to the same bytes, and
it means the same values as MessageToDict. Every mismatch case is checked to fail in Python
(ParseError / DecodeError). gocheck/ checks the whole file against Go's
protojson and proto.Size (go run ./filters/core/tests/counterfactual/gocheck).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import decimal
import difflib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, json_format, message, message_factory
# The well-known types, loaded into the default pool before corpus.proto is added.
from google.protobuf import duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2
from google.protobuf.internal import type_checkers

HERE = Path(__file__).resolve().parent
PROTO = "corpus.proto"
PACKAGE = "wirelens.test.whatif"
VECTORS = HERE / "vectors.json"


# ------------------------------------------------------------------ descriptors

def compile_corpus() -> bytes:
    """corpus.proto -> FileDescriptorSet (--include_imports, no source info)."""
    import grpc_tools
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "corpus.pb")
        subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", "-I", str(HERE), "-I", wkt,
             "--include_imports", f"--descriptor_set_out={out}", PROTO],
            check=True,
        )
        with open(out, "rb") as fh:
            return fh.read()


def load_classes(descriptor_set: bytes) -> Callable[[str], type]:
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(descriptor_set)
    pool = descriptor_pool.Default()
    for f in fds.file:
        if f.name == PROTO:
            pool.Add(f)

    def cls(name: str) -> type:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
    return cls


# ------------------------------------------------------------------ the printer

F32_MAX = struct.unpack("<f", bytes.fromhex("ffff7f7f"))[0]
F32_MIN_SUBNORMAL = struct.unpack("<f", bytes.fromhex("01000000"))[0]
F32_MIN_NORMAL = struct.unpack("<f", bytes.fromhex("00008000"))[0]


def f32(x: float) -> float:
    """x rounded to float32 (the value a float field holds)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:  # beyond FLT_MAX by more than half a unit: rounds to infinity
        return math.copysign(math.inf, x)


class Number(float):
    """A float that prints as protojson prints a float (bits 32) or double (bits 64) field."""

    def __new__(cls, value: float, bits: int):
        obj = super().__new__(cls, value)
        obj.bits = bits
        return obj


def shortest_digits(x: float, bits: int) -> tuple[str, int]:
    """The shortest decimal digits that read back as x (as a float32 when bits is 32),
    and the position of the decimal point: x == 0.DIGITS * 10**point."""
    if bits == 64:
        text = repr(x)  # Python's repr: shortest round-trip digits, nearest when several
    else:
        # The nearest decimal of each length, shortest first. (At a power of two
        # the rounding interval is narrower below x, where strconv may find a
        # digit string of this length above x that this misses; gocheck would say.)
        for precision in range(1, 10):  # float32 needs at most 9 digits
            text = "%.*e" % (precision - 1, x)
            if f32(float(text)) == x:
                break
    _, digits, exponent = decimal.Decimal(text).as_tuple()
    all_digits = "".join(map(str, digits)).lstrip("0")
    significant = all_digits.rstrip("0")
    if not significant:
        return "0", 1
    exponent += len(all_digits) - len(significant)  # x == int(significant) * 10**exponent
    return significant, len(significant) + exponent


def format_float(x: float, bits: int) -> str:
    """strconv.FormatFloat(x, fmt, -1, bits) with protojson's choice of fmt and its
    exponent clean-up (internal/encoding/json.appendFloat in google.golang.org/protobuf)."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if bits == 32:
        if f32(x) != x:
            raise ValueError(f"{x!r} is not a float32 value")
        small, large = f32(1e-6), f32(1e21)
    else:
        small, large = 1e-6, 1e21
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0"
    digits, point = shortest_digits(abs(x), bits)
    if abs(x) < small or abs(x) >= large:
        exp = point - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        # strconv writes at least two exponent digits (e-07, e+21); protojson then
        # shortens a one-digit negative exponent as encoding/json does (e-07 -> e-7).
        if -10 < exp < 0:
            exponent = f"-{-exp}"
        else:
            exponent = ("-" if exp < 0 else "+") + f"{abs(exp):02d}"
        return f"{sign}{mantissa}e{exponent}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(s: str) -> str:
    """protojson's string escaping: " and \\ and C0 controls only; non-ASCII as is."""
    out = ['"']
    for ch in s:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(value: Any) -> str:
    """Compact JSON, as protojson writes it (no whitespace at all)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Number):
        return format_float(float(value), value.bits)
    if isinstance(value, float):
        raise TypeError(f"float {value!r} without a field type")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, dict):
        return "{" + ",".join(quote(k) + ":" + dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot print {type(value).__name__}")


# MessageToDict's output, shaped as protojson prints it: fields in declaration
# order, map keys in protojson's order, floats tagged with their width.

_FD = descriptor.FieldDescriptor
_INT_KEYS = {_FD.TYPE_INT32, _FD.TYPE_INT64, _FD.TYPE_UINT32, _FD.TYPE_UINT64, _FD.TYPE_SINT32,
             _FD.TYPE_SINT64, _FD.TYPE_FIXED32, _FD.TYPE_FIXED64, _FD.TYPE_SFIXED32, _FD.TYPE_SFIXED64}


def _map_key_order(key_field: descriptor.FieldDescriptor) -> Callable[[str], Any]:
    # protojson ranges over map entries in order.GenericKeyOrder: false before
    # true, integers by value, strings by bytes (code points sort the same way).
    if key_field.type == _FD.TYPE_BOOL:
        return lambda k: k == "true"
    if key_field.type in _INT_KEYS:
        return int
    return lambda k: k


def _shape_value(js: Any) -> Any:
    """google.protobuf.Value: numbers are doubles."""
    if isinstance(js, bool) or js is None or isinstance(js, str):
        return js
    if isinstance(js, (int, float)):
        return Number(float(js), 64)
    if isinstance(js, list):
        return [_shape_value(v) for v in js]
    if isinstance(js, dict):
        return {k: _shape_value(js[k]) for k in sorted(js)}
    raise TypeError(type(js).__name__)


def _shape_field(field: descriptor.FieldDescriptor, js: Any) -> Any:
    if field.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
        return shape(field.message_type, js)
    if field.type in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE) and not isinstance(js, str):
        # MessageToDict gives a float field's value as the double nearest its
        # (6 or more digit) decimal form; rounding to float32 gives the field back.
        return Number(f32(js), 32) if field.type == _FD.TYPE_FLOAT else Number(js, 64)
    return js


def shape(desc: descriptor.Descriptor, js: Any) -> Any:
    name = desc.full_name
    if desc.file.name == "google/protobuf/wrappers.proto":
        return _shape_field(desc.fields_by_name["value"], js)
    if name in ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"):
        return _shape_value(js)
    if name in ("google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"):
        return js
    if name == "google.protobuf.Any":
        raise NotImplementedError("Any is not in the corpus")
    out: dict[str, Any] = {}
    for field in desc.fields:  # declaration order
        if field.json_name not in js:
            continue
        value = js[field.json_name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field = field.message_type.fields_by_name["key"]
            value_field = field.message_type.fields_by_name["value"]
            out[field.json_name] = {k: _shape_field(value_field, value[k])
                                    for k in sorted(value, key=_map_key_order(key_field))}
        elif field.is_repeated:
            out[field.json_name] = [_shape_field(field, v) for v in value]
        else:
            out[field.json_name] = _shape_field(field, value)
    if set(out) != set(js):
        raise AssertionError(f"{name}: keys {sorted(set(js) - set(out))} not in the descriptor")
    return out


def protojson(msg) -> str:
    return dumps(shape(msg.DESCRIPTOR, json_format.MessageToDict(msg)))


# ------------------------------------------------------------------ the corpus

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
U32_MAX, U64_MAX = 2**32 - 1, 2**64 - 1
NAN, INF = float("nan"), float("inf")

ESCAPES = 'quote " backslash \\ slash / tab \t newline \n return \r backspace \b formfeed \f'
CONTROLS = "".join(chr(c) for c in range(0x20)) + "\x7f"
UNICODE = "héllo wörld ñ · 日本語のテキスト · Ελληνικά · עברית · emoji 😀🎉👍🏽 · \u2028\u2029 · \ufeff · e\u0301"


def corpus(C: Callable[[str], type]) -> list[tuple[str, Any]]:
    """(name, message) of every valid case."""
    Nothing, Scalars, Repeated, Point, Maps = C("Nothing"), C("Scalars"), C("Repeated"), C("Point"), C("Maps")
    Outer, Choice, Enums, WellKnown = C("Outer"), C("Choice"), C("Enums"), C("WellKnown")
    Names, Optionals, Everything = C("Names"), C("Optionals"), C("Everything")
    Inner, Deep = Outer.Inner, Outer.Inner.Deep
    Ts, Dur = timestamp_pb2.Timestamp, duration_pb2.Duration
    W = wrappers_pb2
    Color = {"UNSPECIFIED": 0, "RED": 1, "GREEN": 2, "BLUE": 3, "INFRARED": -1}

    def struct(d: dict) -> struct_pb2.Struct:
        s = struct_pb2.Struct()
        s.update(d)
        return s

    def value(v: Any) -> struct_pb2.Value:
        out = struct_pb2.Value()
        if v is None:
            out.null_value = struct_pb2.NULL_VALUE
        elif isinstance(v, dict):
            out.struct_value.CopyFrom(struct(v))
        elif isinstance(v, list):
            out.list_value.SetInParent()  # an empty list is still a list
            out.list_value.extend(v)
        elif isinstance(v, bool):
            out.bool_value = v
        elif isinstance(v, str):
            out.string_value = v
        else:
            out.number_value = v
        return out

    def listv(items: list) -> struct_pb2.ListValue:
        lv = struct_pb2.ListValue()
        lv.extend(items)
        return lv

    def scalars(**kw) -> Any:
        return Scalars(**kw)

    every_scalar_default = dict(
        int32_value=0, int64_value=0, uint32_value=0, uint64_value=0, sint32_value=0,
        sint64_value=0, fixed32_value=0, fixed64_value=0, sfixed32_value=0, sfixed64_value=0,
        float_value=0.0, double_value=0.0, bool_value=False, string_value="", bytes_value=b"")

    cases: list[tuple[str, Any]] = [
        # ---- empty and default
        ("nothing_empty", Nothing()),
        ("scalars_empty", Scalars()),
        ("scalars_defaults_explicit", scalars(**every_scalar_default)),
        ("repeated_empty", Repeated()),
        ("maps_empty", Maps()),
        ("everything_empty", Everything()),
        # ---- scalars
        ("scalars_small", scalars(
            int32_value=1, int64_value=2, uint32_value=3, uint64_value=4, sint32_value=5,
            sint64_value=6, fixed32_value=7, fixed64_value=8, sfixed32_value=9, sfixed64_value=10,
            float_value=1.5, double_value=2.25, bool_value=True, string_value="a", bytes_value=b"\x00")),
        ("scalars_max", scalars(
            int32_value=I32_MAX, int64_value=I64_MAX, uint32_value=U32_MAX, uint64_value=U64_MAX,
            sint32_value=I32_MAX, sint64_value=I64_MAX, fixed32_value=U32_MAX, fixed64_value=U64_MAX,
            sfixed32_value=I32_MAX, sfixed64_value=I64_MAX, float_value=F32_MAX,
            double_value=sys.float_info.max, bool_value=True)),
        ("scalars_min", scalars(
            int32_value=I32_MIN, int64_value=I64_MIN, sint32_value=I32_MIN, sint64_value=I64_MIN,
            sfixed32_value=I32_MIN, sfixed64_value=I64_MIN, float_value=-F32_MAX,
            double_value=-sys.float_info.max)),
        ("scalars_minus_one", scalars(
            int32_value=-1, int64_value=-1, sint32_value=-1, sint64_value=-1, sfixed32_value=-1,
            sfixed64_value=-1, float_value=-1.0, double_value=-1.0)),
        ("scalars_varint_boundaries", scalars(
            int32_value=127, int64_value=128, uint32_value=16383, uint64_value=16384,
            sint32_value=-64, sint64_value=64, fixed32_value=1, fixed64_value=2**53 + 1)),
        ("scalars_large_int64", scalars(
            int64_value=9007199254740993, uint64_value=18446744073709551615 - 1,
            sint64_value=-9007199254740993, fixed64_value=2**63, sfixed64_value=-(2**53))),
        ("float_subnormal", scalars(float_value=F32_MIN_SUBNORMAL, double_value=5e-324)),
        ("float_min_normal", scalars(float_value=F32_MIN_NORMAL, double_value=sys.float_info.min)),
        ("float_1e-6", scalars(float_value=f32(1e-6), double_value=1e-6)),
        ("float_below_1e-6", scalars(float_value=f32(9.99e-7), double_value=9.99e-7)),
        ("float_1e-7", scalars(float_value=f32(1e-7), double_value=-1e-7)),
        ("float_1e-5", scalars(float_value=f32(1e-5), double_value=0.00001)),
        ("float_1e-10", scalars(float_value=f32(1.2345e-10), double_value=1.2345e-10)),
        ("float_1e16", scalars(float_value=f32(1e16), double_value=1e16)),
        ("float_1e20", scalars(float_value=f32(1e20), double_value=123456789012345680000.0)),
        ("float_below_1e21", scalars(float_value=f32(9.9e20), double_value=999999999999999900000.0)),
        ("float_1e21", scalars(float_value=f32(1e21), double_value=1e21)),
        ("float_huge_exponent", scalars(float_value=f32(-3e38), double_value=1.5e300)),
        ("float_tiny_exponent", scalars(float_value=f32(-1e-38), double_value=-1e-300)),
        ("float_fractions", scalars(float_value=f32(0.1), double_value=0.1 + 0.2)),
        ("float_digits", scalars(float_value=f32(3.14159265), double_value=math.pi)),
        ("float_integral", scalars(float_value=f32(16777217.0), double_value=2.0**53)),
        ("float_negative_zero", scalars(float_value=-0.0, double_value=-0.0)),
        ("float_nan", scalars(float_value=NAN, double_value=NAN)),
        ("float_infinities", scalars(float_value=INF, double_value=-INF)),
        ("float_one", scalars(float_value=1.0, double_value=-100.0)),
        ("bool_only", scalars(bool_value=True)),
        ("string_escapes", scalars(string_value=ESCAPES)),
        ("string_controls", scalars(string_value=CONTROLS)),
        ("string_unicode", scalars(string_value=UNICODE)),
        ("string_long", scalars(string_value="x" * 200, bytes_value=b"y" * 20000)),
        ("bytes_all_values", scalars(bytes_value=bytes(range(256)))),
        # ---- repeated
        ("repeated_packed", Repeated(
            int32s=[0, 1, -1, I32_MAX, I32_MIN], int64s=[0, 1, -1, I64_MAX, I64_MIN],
            uint32s=[0, 1, U32_MAX], uint64s=[0, 1, U64_MAX], sint32s=[0, -1, 1, I32_MIN, I32_MAX],
            sint64s=[0, -1, 1, I64_MIN, I64_MAX], fixed32s=[0, U32_MAX], fixed64s=[0, U64_MAX],
            sfixed32s=[I32_MIN, 0, I32_MAX], sfixed64s=[I64_MIN, 0, I64_MAX],
            floats=[0.0, 1.5, f32(0.1), -F32_MAX], doubles=[0.0, 0.1, -2.5e-8, 1e300],
            bools=[True, False, True], colors=[Color["RED"], Color["UNSPECIFIED"], Color["INFRARED"]])),
        ("repeated_unpacked", Repeated(
            unpacked_int32s=[0, 1, -1, 300], unpacked_sint64s=[-1, I64_MIN],
            unpacked_fixed32s=[1, 2, U32_MAX], unpacked_doubles=[0.5, -0.0, 1e21],
            unpacked_bools=[False, True], unpacked_colors=[Color["BLUE"], 99, Color["INFRARED"]])),
        ("repeated_defaults_kept", Repeated(
            int32s=[0, 0, 0], bools=[False], strings=["", ""], blobs=[b""], points=[Point()],
            unpacked_int32s=[0], doubles=[0.0])),
        ("repeated_strings_bytes", Repeated(
            strings=["a", ESCAPES, "日本", "😀"], blobs=[b"a", b"ab", b"abc", b"abcd", b"\xff\xfe"])),
        ("repeated_points", Repeated(points=[Point(), Point(x=1), Point(y=-1, label="p"), Point(x=I32_MAX)])),
        ("repeated_unknown_enums", Repeated(colors=[7, Color["GREEN"], -7], unpacked_colors=[1000000])),
        ("repeated_special_floats", Repeated(
            floats=[NAN, INF, -INF, -0.0, F32_MIN_SUBNORMAL, F32_MAX],
            doubles=[NAN, -INF, INF, 5e-324, 1e-7, 1e21])),
        ("repeated_large", Repeated(
            int32s=list(range(-500, 500)), doubles=[i / 7 for i in range(300)],
            strings=[f"item-{i}" for i in range(200)])),
        # ---- maps
        ("maps_each", Maps(
            string_to_int32={"one": 1}, int64_to_point={7: Point(x=1, y=2)},
            bool_to_string={True: "yes"}, uint32_to_bytes={1: b"\x01\x02"},
            sint64_to_double={-3: 0.75}, int32_to_color={5: Color["GREEN"]},
            fixed64_to_string={U64_MAX: "max"}, string_to_string={"k": "v"},
            uint64_to_float={2: 0.5}, sfixed32_to_nothing={-9: Nothing()})),
        ("maps_key_order", Maps(
            string_to_int32={"b": 2, "a": 1, "B": 3, "é": 4, "10": 10, "9": 9, "": 0},
            int64_to_point={10: Point(x=10), -5: Point(x=-5), 3: Point(x=3), I64_MIN: Point(), I64_MAX: Point()},
            bool_to_string={True: "t", False: "f"},
            uint32_to_bytes={U32_MAX: b"z", 0: b"a", 100: b"m"},
            sint64_to_double={1: 1.0, -1: -1.0, 0: 0.0},
            fixed64_to_string={2**63: "big", 1: "one"})),
        ("maps_default_entries", Maps(
            string_to_int32={"": 0}, int64_to_point={0: Point()}, bool_to_string={False: ""},
            uint32_to_bytes={0: b""}, sint64_to_double={0: 0.0}, int32_to_color={0: 0},
            fixed64_to_string={0: ""}, string_to_string={"": ""}, uint64_to_float={0: 0.0},
            sfixed32_to_nothing={0: Nothing()})),
        ("maps_escaped_keys", Maps(string_to_string={
            'quote"': "q", "back\\slash": "b", "tab\t": "t", "nul\x00": "n", "😀": "emoji", "日本": UNICODE})),
        ("maps_unknown_enum", Maps(int32_to_color={1: Color["RED"], 2: 42, -1: Color["INFRARED"], 3: -42})),
        ("maps_float_values", Maps(
            uint64_to_float={U64_MAX: f32(0.1), 0: -0.0, 1: NAN},
            sint64_to_double={-1: 1e21, 1: INF, 2: 1e-7})),
        ("maps_large", Maps(string_to_string={f"key-{i:04d}": f"value {i}" for i in range(300)})),
        # ---- nested
        ("outer_nested_empties", Outer(inner=Inner(deep=Deep()), nothing=Nothing(), child=Outer())),
        ("outer_deep", Outer(
            inner=Inner(deep=Deep(leaf="leaf", color=Color["BLUE"]), deeps=[Deep(), Deep(leaf="x")], count=-1),
            inners=[Inner(), Inner(count=I64_MAX)], child=Outer(inner=Inner(count=1)))),
        ("outer_recursive", _chain(Outer, 25)),
        # ---- oneof
        ("choice_text", Choice(name="n", text="hello", after=1)),
        ("choice_number_zero", Choice(number=0)),
        ("choice_point_empty", Choice(point=Point())),
        ("choice_blob_empty", Choice(blob=b"")),
        ("choice_color_default", Choice(color=Color["UNSPECIFIED"])),
        ("choice_ratio_negative_zero", Choice(ratio=-0.0)),
        ("choice_ratio_nan", Choice(ratio=NAN)),
        ("choice_none", Choice(name="empty", none=empty_pb2.Empty(), after=-1)),
        # ---- enums
        ("enums_named", Enums(color=Color["BLUE"], level=Enums.HIGH)),
        ("enums_unknown", Enums(color=42, level=7)),
        ("enums_negative", Enums(color=Color["INFRARED"], optional_color=-42)),
        ("enums_optional_default", Enums(optional_color=Color["UNSPECIFIED"])),
        # ---- well-known types
        ("wkt_timestamps", WellKnown(timestamp=Ts(seconds=1700000000), timestamps=[
            Ts(), Ts(seconds=1, nanos=100000000), Ts(seconds=-1, nanos=1000), Ts(seconds=1700000000, nanos=1),
            Ts(seconds=-62135596800), Ts(seconds=253402300799, nanos=999999999)])),
        ("wkt_duration_zero", WellKnown(duration=Dur())),
        ("wkt_duration_fraction", WellKnown(duration=Dur(seconds=1, nanos=500000000))),
        ("wkt_duration_negative", WellKnown(duration=Dur(seconds=-1, nanos=-500000))),
        ("wkt_duration_nanosecond", WellKnown(duration=Dur(nanos=-1))),
        ("wkt_duration_max", WellKnown(duration=Dur(seconds=315576000000, nanos=999999999))),
        ("wkt_wrappers", WellKnown(
            double_wrapper=W.DoubleValue(value=1e-7), float_wrapper=W.FloatValue(value=f32(0.1)),
            int64_wrapper=W.Int64Value(value=-1), uint64_wrapper=W.UInt64Value(value=U64_MAX),
            int32_wrapper=W.Int32Value(value=I32_MIN), uint32_wrapper=W.UInt32Value(value=U32_MAX),
            bool_wrapper=W.BoolValue(value=True), string_wrapper=W.StringValue(value="é\n"),
            bytes_wrapper=W.BytesValue(value=b"\xff\x00"))),
        ("wkt_wrappers_default", WellKnown(
            double_wrapper=W.DoubleValue(), float_wrapper=W.FloatValue(), int64_wrapper=W.Int64Value(),
            uint64_wrapper=W.UInt64Value(), int32_wrapper=W.Int32Value(), uint32_wrapper=W.UInt32Value(),
            bool_wrapper=W.BoolValue(), string_wrapper=W.StringValue(), bytes_wrapper=W.BytesValue())),
        ("wkt_wrappers_special_floats", WellKnown(
            double_wrapper=W.DoubleValue(value=-INF), float_wrapper=W.FloatValue(value=NAN))),
        ("wkt_struct", WellKnown(struct=struct({
            "z": 1, "a": [True, None, "x", {"c": 1.5}], "m": {}, "": "empty key", "é": 1e21,
            "n": -0.5, "big": 12345678901234567890.0, "small": 1e-7, "list": [], "esc\"ape": "\t"}))),
        ("wkt_struct_empty", WellKnown(struct=struct_pb2.Struct())),
        ("wkt_value_null", WellKnown(value=value(None))),
        ("wkt_value_number", WellKnown(value=value(0.0))),
        ("wkt_value_string", WellKnown(value=value(""))),
        ("wkt_value_bool", WellKnown(value=value(False))),
        ("wkt_value_struct", WellKnown(value=value({}))),
        ("wkt_value_list", WellKnown(value=value([]))),
        ("wkt_list", WellKnown(list=listv([1, "two", None, [], {}, [3.25, [False]]]))),
        ("wkt_list_empty", WellKnown(list=struct_pb2.ListValue())),
        ("wkt_field_mask", WellKnown(field_mask=field_mask_pb2.FieldMask(paths=["foo_bar", "a.b_c", "x"]))),
        ("wkt_field_mask_empty", WellKnown(field_mask=field_mask_pb2.FieldMask())),
        ("wkt_empty", WellKnown(empty=empty_pb2.Empty())),
        ("wkt_values_map", WellKnown(values={"n": value(3), "s": value("x"), "null": value(None), "l": value([1])})),
        # ---- names
        ("names", Names(custom="c", snake_case_field=1, field_2_number=2, already_camelCase="a",
                        with_json_name=-3, x=True)),
        # ---- optionals
        ("optionals_defaults", Optionals(
            maybe_int32=0, maybe_int64=0, maybe_string="", maybe_bool=False, maybe_double=0.0,
            maybe_float=0.0, maybe_bytes=b"", maybe_uint64=0)),
        ("optionals_values", Optionals(
            maybe_int32=-1, maybe_int64=I64_MIN, maybe_string="s", maybe_bool=True, maybe_double=-0.0,
            maybe_float=f32(1e-45), maybe_bytes=b"\x01", maybe_uint64=U64_MAX)),
        # ---- everything
        ("everything_nested_empties", Everything(
            scalars=Scalars(), repeated=Repeated(), maps=Maps(), outer=Outer(), choice=Choice(),
            enums=Enums(), well_known=WellKnown(), names=Names(), optionals=Optionals())),
    ]
    realistic = Everything()
    realistic.scalars.CopyFrom(scalars(int32_value=42, int64_value=1700000000000, string_value="Ada Lovelace",
                                       double_value=19.99, float_value=f32(0.25), bool_value=True))
    realistic.repeated.strings.extend(["reading", "chess", "hiking"])
    realistic.repeated.points.add(x=3, y=4, label="home")
    realistic.maps.string_to_string.update({"region": "eu-west-1", "tier": "gold"})
    realistic.outer.inner.deep.leaf = "Zürich"
    realistic.choice.point.x = 1
    realistic.enums.color = Color["GREEN"]
    realistic.well_known.timestamp.FromSeconds(1764000000)
    realistic.well_known.duration.FromMilliseconds(1500)
    realistic.well_known.string_wrapper.value = "optional text"
    realistic.well_known.struct.update({"source": "web", "retries": 3})
    realistic.names.custom = "x"
    realistic.optionals.maybe_bool = False
    cases.append(("everything_realistic", realistic))
    return cases


def _chain(Outer: type, depth: int) -> Any:
    root = Outer()
    node = root
    for i in range(depth):
        node.inner.count = i
        node = node.child
    return root


def mismatches() -> list[dict[str, str]]:
    """Payloads that must not decode as their type (protojson and Python agree)."""
    def j(name: str, type_: str, text: str) -> dict[str, str]:
        return {"name": name, "type": f"{PACKAGE}.{type_}", "json_invalid": text}

    def b(name: str, type_: str, hexbytes: str) -> dict[str, str]:
        return {"name": name, "type": f"{PACKAGE}.{type_}",
                "binary_invalid": base64.b64encode(bytes.fromhex(hexbytes)).decode()}

    return [
        j("json_unknown_field", "Scalars", '{"int32Value":1,"noSuchField":2}'),
        j("json_wrong_type_bool", "Scalars", '{"boolValue":"yes"}'),
        j("json_wrong_type_string", "Scalars", '{"stringValue":5}'),
        j("json_object_for_int", "Scalars", '{"int32Value":{}}'),
        j("json_int32_out_of_range", "Scalars", '{"int32Value":2147483648}'),
        j("json_int32_fraction", "Scalars", '{"int32Value":1.5}'),
        j("json_truncated", "Scalars", '{"int32Value":'),
        j("json_trailing_garbage", "Scalars", '{"int32Value":1}}'),
        j("json_not_an_object", "Scalars", "[1,2]"),
        j("json_unknown_enum_name", "Enums", '{"color":"PURPLE"}'),
        j("json_bad_timestamp", "WellKnown", '{"timestamp":"yesterday"}'),
        j("json_bad_map_key", "Maps", '{"int64ToPoint":{"abc":{}}}'),
        j("json_repeated_not_array", "Repeated", '{"int32s":1}'),
        b("binary_truncated_varint", "Scalars", "08ff"),
        b("binary_varint_too_long", "Scalars", "08ffffffffffffffffffff01"),
        b("binary_length_overflow", "Scalars", "72056162"),
        b("binary_length_huge", "Scalars", "72ffffffff0f61"),
        b("binary_truncated_fixed64", "Scalars", "41010203"),
        b("binary_truncated_fixed32", "Scalars", "3d0102"),
        b("binary_wire_type_7", "Scalars", "0f"),
        b("binary_wire_type_6", "Scalars", "0e"),
        b("binary_end_group_unopened", "Scalars", "0c"),
        b("binary_group_unclosed", "Scalars", "0b0801"),
        b("binary_field_number_zero", "Scalars", "0001"),
        b("binary_invalid_utf8", "Scalars", "7202c328"),
        b("binary_packed_overflow", "Repeated", "0a050102"),
        b("binary_nested_truncated", "Outer", "0a030a0561"),
    ]


# ------------------------------------------------------------------ generate and check

def _same_json(a: Any, b: Any, bits: int = 64) -> bool:
    """a (our printed JSON, parsed) means the same values as b (MessageToDict)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        # MessageToDict prints float fields with at least 6 significant digits;
        # ours are the shortest float32 digits: the same float32 either way.
        return a == b or f32(a) == f32(b)
    return a == b


@contextlib.contextmanager
def float_bounds_as_protojson():
    """json_format.Parse rejects a float field's JSON number above FLT_MAX as a
    double, so it rejects "3.4028235e+38", the shortest form of FLT_MAX that it
    prints itself; protojson (strconv.ParseFloat(s, 32)) rounds first and rejects
    only what rounds to infinity. For the round-trip check, widen the bound to
    the largest double that rounds to FLT_MAX."""
    saved = type_checkers._FLOAT_MAX, type_checkers._FLOAT_MIN
    bound = math.nextafter(float.fromhex("0x1.ffffffp+127"), 0.0)  # below the tie with 2**128
    type_checkers._FLOAT_MAX, type_checkers._FLOAT_MIN = bound, -bound
    try:
        yield
    finally:
        type_checkers._FLOAT_MAX, type_checkers._FLOAT_MIN = saved


def parse_json(text: str) -> Any:
    """json.loads as json_format.Parse calls it, but "-0" stays the float -0.0:
    Python's json reads it as the integer 0, so json_format.Parse drops the sign
    of a negative zero that protojson (strconv.ParseFloat) keeps."""
    return json.loads(text, object_pairs_hook=json_format._DuplicateChecker,
                      parse_int=lambda s: -0.0 if s == "-0" else int(s))


def build(C: Callable[[str], type]) -> list[dict[str, Any]]:
    with float_bounds_as_protojson():
        return _build(C)


def _build(C: Callable[[str], type]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name, msg in corpus(C):
        if name in seen:
            raise AssertionError(f"duplicate case name {name}")
        seen.add(name)
        binary = msg.SerializeToString(deterministic=True)
        text = protojson(msg)
        back = type(msg)()
        json_format.ParseDict(parse_json(text), back)
        if back.SerializeToString(deterministic=True) != binary:
            raise AssertionError(f"{name}: the printed JSON parses to other bytes")
        if not _same_json(json.loads(text), json_format.MessageToDict(msg)):
            raise AssertionError(f"{name}: the printed JSON differs from MessageToDict: {text}")
        out.append({
            "name": name,
            "type": msg.DESCRIPTOR.full_name,
            "binary": base64.b64encode(binary).decode(),
            "json": text,
            "proto_size": len(binary),
            "json_size": len(text.encode("utf-8")),
        })
    for case in mismatches():
        if case["name"] in seen:
            raise AssertionError(f"duplicate case name {case['name']}")
        seen.add(case["name"])
        cls = C(case["type"].rsplit(".", 1)[1])
        try:
            if "json_invalid" in case:
                json_format.Parse(case["json_invalid"], cls())
            else:
                cls().ParseFromString(base64.b64decode(case["binary_invalid"]))
        except (json_format.ParseError, message.DecodeError):
            pass
        else:
            raise AssertionError(f"{case['name']}: Python accepts it")
        out.append(case)
    return out


def generate() -> str:
    descriptor_set = compile_corpus()
    cases = build(load_classes(descriptor_set))
    doc = {
        "descriptor_set": base64.b64encode(descriptor_set).decode(),
        "cases": cases,
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and fail if vectors.json differs")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        have = VECTORS.read_text(encoding="utf-8") if VECTORS.exists() else ""
        if have == text:
            print(f"make_vectors: {VECTORS.name} is up to date")
            return 0
        diff = difflib.unified_diff(have.splitlines(), text.splitlines(),
                                    str(VECTORS.name), "regenerated", lineterm="", n=0)
        for i, line in enumerate(diff):
            if i == 40:
                print("...", file=sys.stderr)
                break
            print(line[:300], file=sys.stderr)
        print(f"make_vectors: {VECTORS} differs from corpus.proto and this script; "
              f"run {Path(__file__).name} to regenerate", file=sys.stderr)
        return 1
    VECTORS.write_text(text, encoding="utf-8")
    valid = sum(1 for c in json.loads(text)["cases"] if "binary" in c)
    print(f"make_vectors: wrote {VECTORS} ({valid} cases, {len(json.loads(text)['cases']) - valid} mismatches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
