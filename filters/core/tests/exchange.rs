//! Whole-call tests: a synthetic exchange per protocol, driven the way the
//! wasm adapter drives the core, checking the complete published record.

use std::rc::Rc;
use wirelens_core::frame::encode_frame;
use wirelens_core::headers::{iter_serialized, serialize};
use wirelens_core::record::{BodySource, SliceSource};
use wirelens_core::{Call, OpMap, Protocol, Streaming, KEYS};

const CONFIG: &str = r#"{
  "operations": [
    {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
     "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
     "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]},
    {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "operation": "catalog.GetProduct",
     "streaming": "unary",
     "http_rules": [{"method": "GET", "pattern": "/v1/products/{id}"}]},
    {"grpc_path": "/wirelens.v1.Catalog/Watch", "operation": "catalog.Watch",
     "streaming": "bidi"}
  ]
}"#;

fn map() -> Rc<OpMap> {
    Rc::new(OpMap::from_json(CONFIG.as_bytes()).unwrap())
}

type Pairs<'a> = &'a [(&'a str, &'a str)];

fn hbytes(h: Pairs) -> u64 {
    h.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum()
}

/// Drives one call the way the adapter does: headers through the serialized
/// map format, bodies in the given chunks through a `BodySource`.
struct Exchange<'a> {
    req_headers: Pairs<'a>,
    req_chunks: Vec<Vec<u8>>,
    resp_headers: Pairs<'a>,
    resp_chunks: Vec<Vec<u8>>,
    resp_trailers: Option<Pairs<'a>>,
    window: usize,
}

impl<'a> Exchange<'a> {
    fn run(&self, map: Rc<OpMap>) -> Call {
        let mut call = Call::new(map).with_read_window(self.window);
        let req_buf = serialize(self.req_headers);
        let req_eos = self.req_chunks.is_empty();
        call.on_request_headers(iter_serialized(&req_buf), req_eos, Some(1_000_000));
        let n = self.req_chunks.len();
        for (i, c) in self.req_chunks.iter().enumerate() {
            let mut src = SliceSource::new(c);
            if call.wants_request_body() {
                call.on_request_body(c.len(), i + 1 == n, &mut src);
            } else {
                call.on_request_body(c.len(), i + 1 == n, &mut NoRead);
            }
        }
        let resp_buf = serialize(self.resp_headers);
        let only_headers = self.resp_chunks.is_empty() && self.resp_trailers.is_none();
        let done =
            call.on_response_headers(iter_serialized(&resp_buf), only_headers, || Some(3_500_000));
        assert_eq!(done, only_headers);
        let n = self.resp_chunks.len();
        for (i, c) in self.resp_chunks.iter().enumerate() {
            let last = i + 1 == n && self.resp_trailers.is_none();
            let mut src = SliceSource::new(c);
            let done = if call.wants_response_body() {
                call.on_response_body(c.len(), last, &mut src, || Some(9_000_000))
            } else {
                call.on_response_body(c.len(), last, &mut NoRead, || Some(9_000_000))
            };
            assert_eq!(done, last);
        }
        if let Some(t) = self.resp_trailers {
            let buf = serialize(t);
            assert!(call.on_response_trailers(iter_serialized(&buf), || Some(9_000_000)));
        }
        assert!(call.response_complete());
        assert!(call.claim_publish());
        assert!(!call.claim_publish());
        call
    }
}

/// A body source that must never be read (REST bodies are not read).
struct NoRead;
impl BodySource for NoRead {
    type Buf = Vec<u8>;
    fn read(&mut self, _: usize, _: usize) -> Option<Vec<u8>> {
        panic!("body must not be read");
    }
}

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        s.push(A[(n >> 18) as usize & 63] as char);
        s.push(A[(n >> 12) as usize & 63] as char);
        s.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

fn record_map(call: &Call) -> Vec<(&'static str, String)> {
    call.record(None).to_pairs()
}

fn expect(call: &Call, want: &[(&str, &str)]) {
    let got = record_map(call);
    assert_eq!(got.len(), KEYS.len());
    for (k, v) in want {
        let key = format!("wirelens.{k}");
        let g = got
            .iter()
            .find(|(gk, _)| *gk == key)
            .unwrap_or_else(|| panic!("no key {key}"));
        assert_eq!(g.1, *v, "{key}");
    }
}

const GRPC_REQ: &[(&str, &str)] = &[
    (":method", "POST"),
    (":scheme", "http"),
    (":path", "/wirelens.v1.Hello/SayHello"),
    (":authority", "localhost:8080"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
];

#[test]
fn grpc_unary() {
    let req_body = encode_frame(0, b"\x0a\x05world");
    let resp_body = encode_frame(0, b"\x0a\x0bhello world");
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc")];
    let trailers: Pairs = &[("grpc-status", "0"), ("grpc-message", "all%20good")];
    let call = Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![req_body.clone()],
        resp_headers,
        resp_chunks: vec![resp_body.clone()],
        resp_trailers: Some(trailers),
        window: 16 * 1024,
    }
    .run(map());
    let r = call.record(None);
    assert_eq!(r.protocol, Some(Protocol::Grpc));
    assert_eq!(r.streaming, Some(Streaming::Unary));
    expect(
        &call,
        &[
            ("protocol", "grpc"),
            ("operation", "hello.SayHello"),
            ("rpc_service", "wirelens.v1.Hello"),
            ("rpc_method", "SayHello"),
            ("streaming", "unary"),
            ("route", ""),
            ("req_header_bytes", &hbytes(GRPC_REQ).to_string()),
            ("resp_header_bytes", &hbytes(resp_headers).to_string()),
            ("resp_trailer_bytes", &hbytes(trailers).to_string()),
            ("req_body_bytes", &req_body.len().to_string()),
            ("resp_body_bytes", &resp_body.len().to_string()),
            ("req_messages", "1"),
            ("resp_messages", "1"),
            ("grpc_status", "0"),
            ("grpc_message", "all good"),
            ("ttfb_us", "2500"),
            ("duration_us", "8000"),
            ("malformed", "0"),
        ],
    );
}

#[test]
fn grpc_unknown_method_trailers_only() {
    let req: Pairs = &[
        (":method", "POST"),
        (":path", "/acme.inventory.v2.StockService/Reserve"),
        ("content-type", "application/grpc+proto"),
    ];
    let resp: Pairs = &[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "12"),
        ("grpc-message", "unknown%20service"),
    ];
    let call = Exchange {
        req_headers: req,
        req_chunks: vec![encode_frame(0, b"")],
        resp_headers: resp,
        resp_chunks: vec![],
        resp_trailers: None,
        window: 16 * 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("protocol", "grpc"),
            ("operation", "stockService.Reserve"),
            ("rpc_service", "acme.inventory.v2.StockService"),
            ("rpc_method", "Reserve"),
            ("streaming", ""),
            ("req_body_bytes", "5"),
            ("req_messages", "1"),
            ("resp_messages", "0"),
            ("resp_trailer_bytes", "0"),
            ("resp_body_bytes", "0"),
            ("grpc_status", "12"),
            ("grpc_message", "unknown service"),
            ("ttfb_us", "2500"),
            ("duration_us", "2500"),
            ("malformed", "0"),
        ],
    );
}

fn bidi_stream() -> (Vec<u8>, Vec<u8>) {
    let mut req = Vec::new();
    for i in 0..20u8 {
        req.extend(encode_frame(i % 2, &vec![i; i as usize * 37]));
    }
    let mut resp = Vec::new();
    resp.extend(encode_frame(0, b""));
    resp.extend(encode_frame(0, &vec![1u8; 70_000]));
    resp.extend(encode_frame(1, b"zz"));
    (req, resp)
}

#[test]
fn grpc_stream_split_everywhere_with_small_windows() {
    let (req, resp) = bidi_stream();
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Catalog/Watch"),
        ("content-type", "application/grpc"),
    ];
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc")];
    let trailers: Pairs = &[("grpc-status", "0")];
    let reference = Exchange {
        req_headers,
        req_chunks: vec![req.clone()],
        resp_headers,
        resp_chunks: vec![resp.clone()],
        resp_trailers: Some(trailers),
        window: 1 << 20,
    }
    .run(map());
    expect(
        &reference,
        &[
            ("operation", "catalog.Watch"),
            ("streaming", "bidi"),
            ("req_messages", "20"),
            ("resp_messages", "3"),
            ("req_body_bytes", &req.len().to_string()),
            ("resp_body_bytes", &resp.len().to_string()),
            ("malformed", "0"),
        ],
    );
    let want = record_map(&reference);
    for window in [1usize, 3, 7, 4096] {
        for i in (0..=req.len()).step_by(if window < 7 { 17 } else { 1 }) {
            let call = Exchange {
                req_headers,
                req_chunks: vec![req[..i].to_vec(), req[i..].to_vec()],
                resp_headers,
                resp_chunks: vec![
                    resp[..i.min(resp.len())].to_vec(),
                    resp[i.min(resp.len())..].to_vec(),
                ],
                resp_trailers: Some(trailers),
                window,
            }
            .run(map());
            assert_eq!(record_map(&call), want, "window {window} split {i}");
        }
    }
}

#[test]
fn large_message_is_skipped_not_read() {
    const SIZE: usize = 16 << 20;
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), false, Some(0));
    // The message arrives in 1 MiB chunks; the first carries the prefix.
    let mut body = encode_frame(0, &[]);
    body[1..5].copy_from_slice(&(SIZE as u32).to_be_bytes());
    body.resize(5 + SIZE, 0xAB);
    let mut total_read = 0;
    let mut reads = 0;
    for (i, chunk) in body.chunks(1 << 20).enumerate() {
        let mut src = SliceSource::new(chunk);
        let last = (i + 1) * (1 << 20) >= body.len();
        call.on_request_body(chunk.len(), last, &mut src);
        total_read += src.bytes_read;
        reads += src.reads;
    }
    let r = call.record(None);
    assert_eq!(r.req_messages, 1);
    assert_eq!(r.req_body_bytes, (SIZE + 5) as u64);
    assert!(!r.malformed);
    assert_eq!(reads, 1, "only the chunk with the prefix is read");
    assert!(total_read <= 16 * 1024, "read {total_read} bytes");
}

#[test]
fn grpc_body_ending_mid_frame_is_malformed() {
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), false, Some(0));
    let body = encode_frame(0, b"hello");
    call.on_request_body(7, true, &mut SliceSource::new(&body[..7]));
    assert!(call.record(None).malformed);
}

#[test]
fn grpc_web_binary() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Catalog/GetProduct"),
        (":authority", "localhost"),
        ("content-type", "application/grpc-web+proto"),
        ("x-grpc-web", "1"),
        ("accept", "application/grpc-web+proto"),
    ];
    let resp_headers: Pairs = &[
        (":status", "200"),
        ("content-type", "application/grpc-web+proto"),
    ];
    let req_body = encode_frame(0, b"\x08\x2a");
    let mut resp_body = encode_frame(0, b"\x0a\x03abc");
    let trailer = encode_frame(
        0x80,
        b"grpc-status:5\r\ngrpc-message:product%2042%20not%20found\r\n",
    );
    resp_body.extend_from_slice(&trailer);
    // Envoy's grpc_web filter hands the trailer frame as its own chunk,
    // followed by an empty trailer map.
    let msg_len = resp_body.len() - trailer.len();
    let call = Exchange {
        req_headers,
        req_chunks: vec![req_body.clone()],
        resp_headers,
        resp_chunks: vec![resp_body[..msg_len].to_vec(), trailer.clone()],
        resp_trailers: Some(&[]),
        window: 16 * 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("protocol", "grpc-web"),
            ("operation", "catalog.GetProduct"),
            ("rpc_service", "wirelens.v1.Catalog"),
            ("rpc_method", "GetProduct"),
            ("streaming", "unary"),
            ("route", ""),
            ("req_header_bytes", &hbytes(req_headers).to_string()),
            ("resp_header_bytes", &hbytes(resp_headers).to_string()),
            ("resp_trailer_bytes", "0"),
            ("req_body_bytes", &req_body.len().to_string()),
            ("resp_body_bytes", &resp_body.len().to_string()),
            ("req_messages", "1"),
            ("resp_messages", "1"),
            ("grpc_status", "5"),
            ("grpc_message", "product 42 not found"),
            ("ttfb_us", "2500"),
            ("duration_us", "8000"),
            ("malformed", "0"),
        ],
    );
}

#[test]
fn grpc_web_trailer_frame_with_eos_body_and_split_everywhere() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Hello/SayHello"),
        ("content-type", "application/grpc-web"),
    ];
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc-web")];
    let mut resp = encode_frame(0, b"hi");
    resp.extend(encode_frame(
        0x80,
        b"Grpc-Status: 0\r\nGrpc-Message: fine\r\n",
    ));
    for i in 0..=resp.len() {
        let call = Exchange {
            req_headers,
            req_chunks: vec![encode_frame(0, b"x")],
            resp_headers,
            resp_chunks: vec![resp[..i].to_vec(), resp[i..].to_vec()],
            resp_trailers: None,
            window: 3,
        }
        .run(map());
        expect(
            &call,
            &[
                ("resp_messages", "1"),
                ("grpc_status", "0"),
                ("grpc_message", "fine"),
                ("malformed", "0"),
            ],
        );
    }
}

#[test]
fn grpc_web_bad_trailer_frame_is_malformed() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Hello/SayHello"),
        ("content-type", "application/grpc-web"),
    ];
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc-web")];
    let call = Exchange {
        req_headers,
        req_chunks: vec![],
        resp_headers,
        resp_chunks: vec![encode_frame(0x80, b"garbage")],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    expect(&call, &[("malformed", "1"), ("grpc_status", "")]);
}

fn text_body(frames: &[Vec<u8>]) -> String {
    // Each frame base64-encoded (and padded) on its own, with line breaks.
    let mut s = String::new();
    for f in frames {
        s.push_str(&b64(f));
        s.push_str("\r\n");
    }
    s
}

#[test]
fn grpc_web_text_split_everywhere() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Hello/SayHello"),
        ("content-type", "application/grpc-web-text"),
        ("accept", "application/grpc-web-text"),
    ];
    let resp_headers: Pairs = &[
        (":status", "200"),
        ("content-type", "application/grpc-web-text+proto"),
    ];
    let req = text_body(&[encode_frame(0, b"\x0a\x05world")]);
    let resp = text_body(&[
        encode_frame(0, b"\x0a\x0bhello world"),
        encode_frame(0, b""),
        encode_frame(0, b"abcd"),
        encode_frame(0x80, b"grpc-status:0\r\ngrpc-message:caf%C3%A9\r\n"),
    ]);
    let (req, resp) = (req.into_bytes(), resp.into_bytes());
    let want = [
        ("protocol", "grpc-web-text"),
        ("operation", "hello.SayHello"),
        ("streaming", "unary"),
        ("req_header_bytes", &hbytes(req_headers).to_string()),
        ("resp_header_bytes", &hbytes(resp_headers).to_string()),
        ("req_body_bytes", &req.len().to_string()),
        ("resp_body_bytes", &resp.len().to_string()),
        ("req_messages", "1"),
        ("resp_messages", "3"),
        ("grpc_status", "0"),
        ("grpc_message", "café"),
        ("malformed", "0"),
    ];
    let want: Vec<(&str, &str)> = want.iter().map(|(k, v)| (*k, *v)).collect();
    for window in [2usize, 5, 16 * 1024] {
        for i in 0..=resp.len() {
            let ri = i.min(req.len());
            let call = Exchange {
                req_headers,
                req_chunks: vec![req[..ri].to_vec(), req[ri..].to_vec()],
                resp_headers,
                resp_chunks: vec![resp[..i].to_vec(), resp[i..].to_vec()],
                resp_trailers: None,
                window,
            }
            .run(map());
            expect(&call, &want);
        }
    }
    // One byte at a time.
    let call = Exchange {
        req_headers,
        req_chunks: req.chunks(1).map(<[u8]>::to_vec).collect(),
        resp_headers,
        resp_chunks: resp.chunks(1).map(<[u8]>::to_vec).collect(),
        resp_trailers: None,
        window: 16 * 1024,
    }
    .run(map());
    expect(&call, &want);
}

#[test]
fn grpc_web_text_bad_base64_is_malformed() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Hello/SayHello"),
        ("content-type", "application/grpc-web-text"),
    ];
    let resp_headers: Pairs = &[
        (":status", "200"),
        ("content-type", "application/grpc-web-text"),
    ];
    let call = Exchange {
        req_headers,
        req_chunks: vec![b"AAAAAAE*".to_vec()],
        resp_headers,
        resp_chunks: vec![],
        resp_trailers: Some(&[("grpc-status", "0")]),
        window: 1024,
    }
    .run(map());
    expect(&call, &[("malformed", "1"), ("grpc_status", "0")]);
}

#[test]
fn rest_json() {
    let req_headers: Pairs = &[
        (":method", "GET"),
        (":path", "/v1/products/42?fields=name"),
        (":authority", "localhost"),
        ("accept", "application/json"),
    ];
    let resp_headers: Pairs = &[
        (":status", "200"),
        ("content-type", "application/json"),
        ("content-length", "27"),
    ];
    // Bodies look like gRPC frames on purpose: REST bodies are never parsed.
    let body = encode_frame(0, b"{\"id\":42,\"name\":\"x\"}");
    let call = Exchange {
        req_headers,
        req_chunks: vec![],
        resp_headers,
        resp_chunks: vec![body[..10].to_vec(), body[10..].to_vec()],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("protocol", "rest"),
            ("operation", "catalog.GetProduct"),
            ("rpc_service", "wirelens.v1.Catalog"),
            ("rpc_method", "GetProduct"),
            ("streaming", "unary"),
            ("route", "/v1/products/{id}"),
            ("req_header_bytes", &hbytes(req_headers).to_string()),
            ("resp_header_bytes", &hbytes(resp_headers).to_string()),
            ("resp_trailer_bytes", "0"),
            ("req_body_bytes", "0"),
            ("resp_body_bytes", &body.len().to_string()),
            ("req_messages", "0"),
            ("resp_messages", "0"),
            ("grpc_status", ""),
            ("grpc_message", ""),
            ("ttfb_us", "2500"),
            ("duration_us", "8000"),
            ("malformed", "0"),
        ],
    );
}

#[test]
fn rest_proto_and_unmatched() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/v1/hello"),
        ("content-type", "application/x-protobuf"),
    ];
    let call = Exchange {
        req_headers,
        req_chunks: vec![b"\x0a\x05world".to_vec()],
        resp_headers: &[
            (":status", "200"),
            ("content-type", "application/x-protobuf"),
        ],
        resp_chunks: vec![b"\x0a\x0bhello world".to_vec()],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("protocol", "rest-proto"),
            ("operation", "hello.SayHello"),
            ("route", "/v1/hello"),
            ("req_body_bytes", "7"),
            ("resp_body_bytes", "13"),
            ("req_messages", "0"),
        ],
    );

    let call = Exchange {
        req_headers: &[(":method", "GET"), (":path", "/healthz")],
        req_chunks: vec![],
        resp_headers: &[(":status", "404")],
        resp_chunks: vec![],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("protocol", "rest"),
            ("operation", ""),
            ("rpc_service", ""),
            ("rpc_method", ""),
            ("streaming", ""),
            ("route", ""),
            ("duration_us", "2500"),
        ],
    );
}

#[test]
fn grpc_error_page_response_is_not_parsed() {
    // An upstream error page (not gRPC) answering a gRPC request.
    let call = Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![encode_frame(0, b"x")],
        resp_headers: &[(":status", "503"), ("content-type", "text/plain")],
        resp_chunks: vec![b"upstream connect error".to_vec()],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    expect(
        &call,
        &[
            ("resp_messages", "0"),
            ("resp_body_bytes", "22"),
            ("malformed", "0"),
        ],
    );
}

#[test]
fn aborted_stream_publishes_in_log_phase() {
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), false, Some(1_000_000));
    let body = encode_frame(0, b"hello");
    // Reset mid-frame: not end of stream, so not malformed.
    call.on_request_body(4, false, &mut SliceSource::new(&body[..4]));
    assert!(!call.response_complete());
    assert!(call.claim_publish());
    let r = call.record(Some(5_000_000));
    assert_eq!(r.duration_us, Some(4000));
    assert_eq!(r.ttfb_us, None);
    assert!(!r.malformed);
    assert_eq!(r.req_messages, 0);
    assert_eq!(r.req_body_bytes, 4);
    let pairs = r.to_pairs();
    assert_eq!(pairs[15], ("wirelens.ttfb_us", String::new()));
    assert!(!call.claim_publish());

    // No request headers at all: nothing to publish.
    let mut call = Call::new(map());
    assert!(!call.claim_publish());
}

#[test]
fn host_read_failure_marks_malformed_and_stops_reading() {
    struct Failing(usize);
    impl BodySource for Failing {
        type Buf = Vec<u8>;
        fn read(&mut self, _: usize, _: usize) -> Option<Vec<u8>> {
            self.0 += 1;
            None
        }
    }
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), false, Some(0));
    let mut f = Failing(0);
    call.on_request_body(10, false, &mut f);
    assert!(!call.wants_request_body());
    call.on_request_body(10, true, &mut f);
    assert_eq!(f.0, 1);
    let r = call.record(None);
    assert!(r.malformed);
    assert_eq!(r.req_body_bytes, 20);
}

#[test]
fn short_host_buffer_ends_chunk_quietly() {
    // The host may report a body size larger than what it lets us read.
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), false, Some(0));
    let body = encode_frame(0, b"abc");
    call.on_request_body(100, true, &mut SliceSource::new(&body));
    let r = call.record(None);
    assert_eq!(r.req_body_bytes, 100);
    assert_eq!(r.req_messages, 1);
    assert!(!r.malformed);
}

#[test]
fn invalid_grpc_status_header_is_malformed() {
    let call = Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![],
        resp_headers: &[(":status", "200"), ("content-type", "application/grpc")],
        resp_chunks: vec![],
        resp_trailers: Some(&[("grpc-status", "OK")]),
        window: 1024,
    }
    .run(map());
    expect(&call, &[("malformed", "1"), ("grpc_status", "")]);
}

#[test]
fn events_after_completion_are_ignored_for_publishing() {
    let mut call = Call::new(map());
    let h = serialize(GRPC_REQ);
    call.on_request_headers(iter_serialized(&h), true, Some(0));
    let rh = serialize(&[(":status", "200"), ("content-type", "application/grpc")]);
    assert!(!call.on_response_headers(iter_serialized(&rh), false, || Some(1000)));
    let t = serialize(&[("grpc-status", "0")]);
    assert!(call.on_response_trailers(iter_serialized(&t), || Some(2000)));
    assert!(!call.on_response_trailers(iter_serialized(&t), || Some(3000)));
    assert!(!call.on_response_body(0, true, &mut NoRead, || Some(4000)));
    assert_eq!(call.record(Some(99_000)).duration_us, Some(2));
}
