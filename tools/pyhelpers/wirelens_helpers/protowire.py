"""The protobuf wire format's base-128 varint (also WebAssembly's unsigned LEB128): for the few places that
hand-encode a message or a module instead of carrying a generated one (bench/ingest.py's OTLP spans, tests)."""

from __future__ import annotations


def varint(n: int) -> bytes:
    """n >= 0, seven bits a byte, least significant first, the high bit set on every byte but the last."""
    if n < 0:
        raise ValueError(f"varint of a negative number: {n}")
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)
