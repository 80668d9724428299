"""Writes the seed corpora under corpus/<target>/ (committed; rerun after a
change of an input format, then commit the result). Input formats: see the
comment at the top of each fuzz_targets/<target>.rs.

    .venv/bin/python -m filters.fuzz.make_seeds      (from the checkout root)
"""

import base64
import json
import os
import shutil
import struct

from tests.e2e import bad_inputs

HERE = os.path.dirname(os.path.abspath(__file__))
# The bad-input suite's cases (tests/e2e/bad_inputs.py): the e2e test sends them to
# Envoy, bad_seeds() below turns the same bytes into seeds.


def frame(flags, payload):
    return bytes([flags]) + struct.pack(">I", len(payload)) + payload


STREAM = (
    frame(0, b"\x0a\x05hello")
    + frame(0, b"")
    + frame(1, b"\x1f\x8b\x08\x00\x01\x02\x03")
    + frame(0, bytes(range(40)))
    + frame(0x80, b"grpc-status:0\r\ngrpc-message:ok\r\n")
)
ERROR_TRAILER = frame(0x80, b"Grpc-Status : 14 \r\nx-other: a:b\r\n\r\ngrpc-message: no%20route%3A%20x\n")
BIG_TRAILER = frame(0x80, b"grpc-status:7\r\ngrpc-message:" + b"x" * 1100 + b"\r\n")
BAD_TRAILER = frame(0x80, b"this is not a header block")
# A 16 MiB message announced, only 20 bytes of it present.
PARTIAL = b"\x00" + struct.pack(">I", 16 << 20) + b"p" * 20


def b64_per_frame(stream_frames, crlf=True):
    sep = b"\r\n" if crlf else b""
    return sep.join(base64.b64encode(f) for f in stream_frames)


def headers(pairs):
    out = struct.pack("<I", len(pairs))
    for n, v in pairs:
        out += struct.pack("<II", len(n), len(v))
    for n, v in pairs:
        out += n + b"\0" + v + b"\0"
    return out


REQ_HEADERS = [
    (b":method", b"POST"),
    (b":path", b"/wirelens.v1.Hello/SayHello"),
    (b":authority", b"localhost:8080"),
    (b":scheme", b"http"),
    (b"content-type", b"application/grpc-web-text"),
    (b"x-request-id", b"4f1c"),
    (b"empty", b""),
]

README_CONFIG = {
    "operations": [
        {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
         "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
         "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]}
    ]
}
TEMPLATES_CONFIG = {
    "operations": [
        {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "streaming": "unary",
         "http_rules": [{"method": "GET", "pattern": "/v1/products/{id}"},
                        {"method": "get", "pattern": "/v2/products/{product.id=*}"}]},
        {"grpc_path": "/wirelens.v1.Catalog/ListProducts", "streaming": "server",
         "http_rules": [{"method": "GET", "pattern": "/v1/products"}]},
        {"grpc_path": "/wirelens.v1.Catalog/Special", "operation": "catalog.Special",
         "http_rules": [{"method": "GET", "pattern": "/v1/products/special"}]},
        {"operation": "files.Get",
         "http_rules": [{"method": "GET", "pattern": "/v1/files/{path=**}"},
                        {"method": "POST", "pattern": "/v1/{name=shelves/*/books/*}:archive"},
                        {"method": "PUT", "pattern": "/*/x/**"},
                        {"method": "DELETE", "pattern": "/"}]},
        {"grpc_path": "/wirelens.v1.Chat/Talk", "streaming": "bidi", "rpc_service": None},
    ]
}


def j(v):
    return json.dumps(v, separators=(",", ":")).encode()


SEEDS = {
    "frame_parser": {
        "whole": b"\x00" + STREAM,
        "byte_at_a_time": b"\x01\x01" + STREAM,
        "chunks_and_skips": b"\x04\x03\x47\x85\xc2" + STREAM + ERROR_TRAILER,
        "split_prefix": b"\x02\x02\x03" + STREAM,
        "big_trailer": b"\x02\x07\xc1" + BIG_TRAILER,
        "bad_trailer": b"\x00" + BAD_TRAILER + STREAM,
        "partial_skipped": b"\x02\x06\x48" + PARTIAL,
    },
    "grpc_web_text": {
        "text_whole": b"\x00\x00" + b64_per_frame([STREAM[:12], STREAM[12:40], STREAM[40:]]),
        "text_chunked": b"\x00\x03\x01\x02\x3f" + b64_per_frame([STREAM, ERROR_TRAILER]),
        "text_unpadded_end": b"\x00\x01\x05" + base64.b64encode(STREAM).rstrip(b"="),
        "text_malformed": b"\x00\x02\x03\x01" + base64.b64encode(STREAM[:10]) + b"!" + base64.b64encode(STREAM),
        "binary_pieces": b"\x01\x02\x84\x02" + STREAM,
        "binary_no_final_pad": b"\x03\x03\x9f\x01\x05" + STREAM + ERROR_TRAILER,
        "binary_big_trailer": b"\x01\x01\x1f" + BIG_TRAILER,
    },
    "header_map": {
        "request": b"\x00" + headers(REQ_HEADERS),
        "truncated": b"\x00" + headers(REQ_HEADERS)[:60],
        "empty_map": b"\x00" + headers([]),
        "huge_count": b"\x00" + struct.pack("<I", 0xFFFFFFFF) + bytes(16),
        "huge_lengths": b"\x00" + struct.pack("<IIII", 1, 0xFFFFFFFF, 0xFFFFFFFF, 0),
        "pairs_roundtrip": b"\x81" + b"\0".join(x for p in REQ_HEADERS for x in p),
    },
    "config": {
        "readme": j(README_CONFIG) + b"\0POST\0/v1/hello?x=1",
        "templates": j(TEMPLATES_CONFIG) + b"\0POST\0/v1/shelves/s1/books/b2:archive",
        "templates_files": j(TEMPLATES_CONFIG) + b"\0GET\0/v1/files/a/b/c",
        "empty_object": b"{}",
        "null": b"null",
        "blank": b" \n",
        "options": j({"sample_rate": 0.25, "optional_fields": ["message_sizes", "framing", "grpc_message"],
                      "rest_transcoded": True, **README_CONFIG}),
        "tiny_rate": b'{"sample_rate":1e-320,"optional_fields":[],"rest_transcoded":false}',
        "bad_streaming": j({"operations": [{"grpc_path": "/a.B/C", "streaming": "uni"}]}),
        # url.path of an unknown call: a long path, a 3-byte character and an
        # invalid byte around the 128-byte cut, a query string after it.
        "unknown_long_path": j(README_CONFIG) + b"\0GET\0/" + b"z" * 126 + "€".encode() + b"\xff" * 8 + b"?q=1",
        "grpc_message_off": b'{"grpc_message_max_bytes":0,"optional_fields":["grpc_message"]}',
    },
}


# The `call` target's flags (fuzz/drivers/call.rs).
REQUEST_ENDS, REQUEST_TRAILERS, RESPONSE_HEADERS, RESPONSE_ENDS, RESPONSE_TRAILERS = 1, 2, 4, 8, 16


def call_input(flags, window, sections, chunks):
    out = bytes([flags, window])
    for section in sections:
        out += struct.pack("<I", len(section)) + section
    return out + chunks


def h1_header_map(raw):
    """The first request of raw HTTP/1 bytes as Envoy shows it to the filter (pseudo-headers, lower-case
    names); None when the bytes are not an HTTP/1 request."""
    head = raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    parts = head[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
        return None
    pairs = [(b":method", parts[0]), (b":path", parts[1]), (b":scheme", b"http")]
    for line in head[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        pairs.append((b":authority", value.strip()) if name == b"host" else (name, value.strip()))
    return pairs


def h1_body(raw):
    return raw.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in raw else b""


REPLY = frame(0, bad_inputs.proto_string(1, b"Hello, wirelens"))
GRPC_WEB_REPLY = REPLY + frame(0x80, b"grpc-status:0\r\ngrpc-message:ok\r\n")
# A typical answer per request content type: (response headers, body, trailers).
RESPONSES = {
    "application/grpc": ([(b":status", b"200"), (b"content-type", b"application/grpc")], REPLY,
                         [(b"grpc-status", b"0")]),
    "application/grpc-web+proto": ([(b":status", b"200"), (b"content-type", b"application/grpc-web+proto")],
                                   GRPC_WEB_REPLY, []),
    "application/grpc-web-text": ([(b":status", b"200"), (b"content-type", b"application/grpc-web-text")],
                                  base64.b64encode(GRPC_WEB_REPLY), []),
    "rest": ([(b":status", b"200"), (b"content-type", b"application/json")], b'{"id":1}', []),
}
# How each sender of the e2e test ends the call: request flags, response flags.
ENDINGS = {
    "h2": (REQUEST_ENDS, RESPONSE_HEADERS | RESPONSE_ENDS),
    "h1": (REQUEST_ENDS, RESPONSE_HEADERS | RESPONSE_ENDS),
    "h2_request_trailers": (REQUEST_ENDS | REQUEST_TRAILERS, RESPONSE_HEADERS | RESPONSE_ENDS),
    "h2_rapid_reset": (REQUEST_ENDS, 0),
    "h2_reset_mid_request": (0, 0),
    "h2_close_mid_request": (0, 0),
    "h1_close": (0, 0),
    "h2_reset_mid_response": (REQUEST_ENDS, RESPONSE_HEADERS),
}


def bad_seeds():
    """Seeds from every bad-input case that carries a request: its header map (header_map), its gRPC
    body (frame_parser, grpc_web_text) and the whole call with a typical response (call)."""
    seeds = {"header_map": {}, "frame_parser": {}, "grpc_web_text": {}, "call": {}}
    for case in bad_inputs.CASES:
        pairs = case.headers or (h1_header_map(case.raw) if case.raw else None)
        if not pairs:
            continue  # floods and non-HTTP bytes: no request for the filter
        body = case.body or h1_body(case.raw)
        name = f"bad_{case.id}"
        seeds["header_map"][name] = b"\x00" + headers(pairs)
        content_type = dict(pairs).get(b"content-type", b"").decode().lower()
        if content_type == "application/grpc-web-text":
            seeds["grpc_web_text"][name] = b"\x00\x00" + body
        elif content_type.startswith("application/grpc"):
            seeds["frame_parser"][name] = b"\x00" + body
        response = RESPONSES.get(content_type, RESPONSES["rest"])
        request_flags, response_flags = ENDINGS[case.send]
        if response_flags & RESPONSE_ENDS and response[2]:
            response_flags |= RESPONSE_TRAILERS
        response_body = response[1] if response_flags & RESPONSE_ENDS else response[1][:7]
        # Window 16 bytes, chunks of 5, 1 and 64 bytes: the reads cross every frame boundary.
        seeds["call"][name] = call_input(request_flags | response_flags, 1,
                                         [headers(pairs), body, headers(response[0]), response_body,
                                          headers(response[2])], bytes([4, 0, 63]))
    return seeds


# The `call_sequence` target's callbacks and refusals (fuzz/drivers/call_sequence.rs).
REQ_H, REQ_B, REQ_T, RESP_H, RESP_B, RESP_T, LOG, EOS = 0, 1, 2, 3, 4, 5, 6, 8
NO_REQUEST_HEADERS, NO_RESPONSE_HEADERS, REFUSE_MAP_COPIES, REFUSE_MAP_SIZES = 1, 2, 8, 16
REFUSE_BODY_READS, REFUSE_CLOCK, REFUSE_PUBLICATION = 32, 64, 128


def sequence_seeds():
    """Whole calls in Envoy's order and out of it, with and without host refusals."""
    def request(content_type, body):
        return [headers([(b":method", b"POST"), (b":path", b"/wirelens.v1.Hello/SayHello"),
                         (b"content-type", content_type)]), body]

    grpc = request(b"application/grpc", frame(0, b"\x0a\x02hi") + frame(1, b"zz"))
    web = request(b"application/grpc-web+proto", frame(0, b"\x0a\x02hi"))
    text = request(b"application/grpc-web-text", base64.b64encode(frame(0, b"\x0a\x02hi")))
    rest = [headers([(b":method", b"POST"), (b":path", b"/v1/hello"), (b"content-type", b"application/json")]),
            b'{"name":"hi"}']
    # gRPC-Web-text as browsers send it: each frame base64-padded on its own
    # (padding mid-stream), CRLFs between; and one with a character outside
    # the alphabet. The checker's own decoder (drivers/oracles.rs) decides.
    text_padded = request(b"application/grpc-web-text",
                          b64_per_frame([frame(0, b"\x0a\x03hi!"), frame(0, b"xy"), frame(1, b"\x1f\x8b\x08")]))
    text_bad = request(b"application/grpc-web-text", base64.b64encode(frame(0, b"\x0a\x02hi"))[:8] + b"*AAA")
    text_answer = [headers([(b":status", b"200"), (b"content-type", b"application/grpc-web-text+proto")]),
                   b64_per_frame([frame(0, b"\x0a\x04hey"), frame(0x80, b"grpc-status:0\r\n")], crlf=False), b""]
    error_page = [headers([(b":status", b"503"), (b"content-type", b"text/plain")]), b"upstream reset", b""]

    def answer(content_type):
        h, body, trailers = RESPONSES[content_type]
        return [headers(h), body, headers(trailers)]

    def seed(flags, refusals, script, sections, chunks=bytes([4, 0, 63])):
        out = bytes([flags, refusals, 1]) + struct.pack("<I", len(script)) + bytes(script)
        for section in sections:
            out += struct.pack("<I", len(section)) + section
        return out + chunks

    envoy_order = [REQ_H, REQ_B | EOS, RESP_H, RESP_B, RESP_T, LOG]
    return {
        "grpc_envoy_order": seed(0, 0, envoy_order, grpc + answer("application/grpc")),
        "grpc_web_response_before_request_ends":
            seed(0, 0, [REQ_H, RESP_H, RESP_B | EOS, REQ_B | EOS], web + answer("application/grpc-web+proto")),
        "no_request_headers": seed(0, 0, [REQ_B | EOS, RESP_H, RESP_B | EOS], grpc + answer("application/grpc")),
        "log_without_response": seed(0, 0, [REQ_H, REQ_B | EOS, LOG], text + answer("application/grpc-web-text")),
        "trailers_without_body": seed(0, 0, [REQ_H | EOS, RESP_H, RESP_T], grpc + answer("application/grpc")),
        "duplicate_end_of_stream":
            seed(0, 0, [REQ_H, REQ_B | EOS, REQ_B | EOS, REQ_T, RESP_H, RESP_B | EOS, RESP_B | EOS, RESP_T, LOG, LOG],
                 text + answer("application/grpc-web-text")),
        "grpc_error_page_in_log": seed(0, 0, [REQ_H, REQ_B | EOS, RESP_H, RESP_B | EOS], grpc + error_page),
        "refused_request_headers": seed(0, NO_REQUEST_HEADERS, envoy_order, grpc + answer("application/grpc")),
        "refused_response_headers":
            seed(0, NO_RESPONSE_HEADERS, [REQ_H, REQ_B | EOS, RESP_H, RESP_B | EOS], web + answer("application/grpc-web+proto")),
        "refused_map_copies_error_page": seed(0, REFUSE_MAP_COPIES, [REQ_H, REQ_B | EOS, RESP_H, RESP_B | EOS, LOG],
                                              grpc + error_page),
        "refused_map_sizes_rest": seed(1, REFUSE_MAP_SIZES, envoy_order, rest + answer("rest")),
        "refused_body_reads": seed(0, REFUSE_BODY_READS, envoy_order, text + answer("application/grpc-web-text")),
        "text_frames_padded_separately": seed(0, 0, envoy_order, text_padded + text_answer),
        "text_bad_base64": seed(0, 0, envoy_order, text_bad + text_answer),
        "refused_clock_and_publication":
            seed(0, REFUSE_CLOCK | REFUSE_PUBLICATION, envoy_order, grpc + answer("application/grpc")),
    }


def counterfactual_seeds():
    """The oracle vectors' payloads (core/tests/counterfactual/vectors.json),
    each as protobuf and as JSON, some also through the frame capture."""
    path = os.path.join(HERE, "..", "core", "tests", "counterfactual", "vectors.json")
    with open(path) as f:
        cases = json.load(f)["cases"]
    seeds = {}
    for i, case in enumerate(cases):
        pick = i % 256
        if "binary" in case:
            binary = base64.b64decode(case["binary"])
            seeds[f"pb_{case['name']}"] = bytes([pick, 0, 7, 64]) + binary
            seeds[f"frames_{case['name']}"] = bytes([pick, 2, 3, 64]) + frame(0, binary) + frame(0, binary)
            seeds[f"json_{case['name']}"] = bytes([pick, 1, 7, 64]) + case["json"].encode()
        if "binary_invalid" in case:
            seeds[f"pb_{case['name']}"] = bytes([pick, 2, 1, 8]) + base64.b64decode(case["binary_invalid"])
        if "json_invalid" in case:
            seeds[f"json_{case['name']}"] = bytes([pick, 1, 1, 8]) + case["json_invalid"].encode()
    return seeds


def main():
    SEEDS["counterfactual"] = counterfactual_seeds()
    for target, extra in bad_seeds().items():
        SEEDS.setdefault(target, {}).update(extra)
    SEEDS["call_sequence"] = sequence_seeds()
    for target, seeds in SEEDS.items():
        d = os.path.join(HERE, "corpus", target)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"corpus/{target}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
