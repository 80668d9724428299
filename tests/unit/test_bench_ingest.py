"""bench/ingest.py's own parts that need no stack: the hand-encoded OTLP spans and the rate axis's arguments.

The spans reaching a real Collector and ClickHouse is checked by the benchmark itself (it fails when
otel.otel_traces does not get them); here the encoding is read back with a minimal protobuf wire reader."""

from __future__ import annotations

import struct

import pytest

from bench import ingest
from wirelens_helpers import protowire


def read_fields(data: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of one protobuf message: varints as int, fixed64 as bytes, length-delimited as bytes."""
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((field, wire, value))
    assert i == len(data), "trailing bytes"
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def one(fields, number):
    found = [v for f, _, v in fields if f == number]
    assert len(found) == 1, (number, fields)
    return found[0]


def test_varint_round_trips():
    for n in (0, 1, 127, 128, 300, 2**32, 2**63 - 1, 2**64 - 1):
        assert _varint(protowire.varint(n), 0) == (n, len(protowire.varint(n)))


def test_spans_request_reads_back_as_otlp():
    source = ingest.LineSource(("grpc", "rest"), templates=4)
    lines = source.take(3)
    request = read_fields(ingest.otlp_spans_request(lines))
    resource_spans = read_fields(one(request, 1))            # ExportTraceServiceRequest.resource_spans
    resource = read_fields(one(resource_spans, 1))            # ResourceSpans.resource
    service = read_fields(one(resource, 1))                   # Resource.attributes[0]
    assert one(service, 1) == b"service.name"
    scope_spans = read_fields(one(resource_spans, 2))         # ResourceSpans.scope_spans
    spans = [read_fields(v) for f, _, v in scope_spans if f == 2]
    assert len(spans) == 3
    for span, line in zip(spans, lines):
        assert one(span, 1) == bytes.fromhex(line["trace_id"]) and len(one(span, 1)) == 16
        assert one(span, 2) == bytes.fromhex(line["span_id"]) and len(one(span, 2)) == 8
        assert one(span, 6) == 2                               # SPAN_KIND_SERVER
        start, end = (struct.unpack("<Q", one(span, n))[0] for n in (7, 8))
        assert end - start == 1_000_000 and abs(start / 1e9 - float(line["time"])) < 1e-3
        attributes = {}
        for kv in (read_fields(v) for f, _, v in span if f == 9):
            value = read_fields(one(kv, 2))
            attributes[one(kv, 1).decode()] = value[0][2]
        assert attributes["wirelens.record"] == line["attributes"]["wirelens.record"].encode()
        assert attributes["guid:x-request-id"] == line["attributes"]["wirelens.request_id"].encode()


def test_line_source_gives_distinct_calls():
    source = ingest.LineSource(("grpc",), templates=2)
    ids = {line["attributes"]["wirelens.request_id"] for line in source.take(50)}
    assert len(ids) == 50


@pytest.mark.parametrize("argv, message", [
    (["--rates", "x"], "expected whole calls/s"),
    (["--rates=-5"], "cannot be negative"),
    (["--mixes", "foo"], "unknown foo"),
    (["--seconds", "0"], "--seconds must be positive"),
    (["--agents", "logship,fluentbit"], "expected some of logship, filelog"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        ingest.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
