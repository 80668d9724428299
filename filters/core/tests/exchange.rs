//! Whole-call tests: a synthetic exchange per protocol, driven through the
//! callbacks the wasm adapter forwards with a `MemoryHost`, checking the
//! complete published record and the host calls made.

use serde_json::{json, Map, Value};
use std::sync::Arc;
use wirelens_core::config::{Fields, Options};
use wirelens_core::frame::{encode_frame, FrameStats};
use wirelens_core::headers::serialize;
use wirelens_core::names::{attribute_name, keys};
use wirelens_core::record::decode_published;
use wirelens_core::{Call, HostCalls, MemoryHost, OpMap, Protocol, KEYS, WIRE_KEYS};

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

fn map() -> Arc<OpMap> {
    Arc::new(OpMap::from_json(CONFIG.as_bytes()).unwrap())
}

type Pairs<'a> = &'a [(&'a str, &'a str)];

fn hbytes(h: Pairs) -> u64 {
    h.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum()
}

/// One call as Envoy delivers it: header maps (serialized by the
/// [`MemoryHost`]), body chunks, optional response trailers. The call is
/// driven through the same callbacks the wasm adapter forwards, so it makes
/// the filter's host calls and publishes what the filter publishes.
struct Exchange<'a> {
    req_headers: Pairs<'a>,
    req_chunks: Vec<Vec<u8>>,
    resp_headers: Pairs<'a>,
    resp_chunks: Vec<Vec<u8>>,
    resp_trailers: Option<Pairs<'a>>,
    window: usize,
}

/// Clock of every exchange: request headers at 1 ms, request end (last body
/// chunk) at 2 ms, response headers at 3.5 ms, response end at 9 ms.
impl<'a> Exchange<'a> {
    fn run(&self, map: Arc<OpMap>) -> Call {
        self.run_with(map, Options::default())
    }

    fn run_with(&self, map: Arc<OpMap>, options: Options) -> Call {
        self.drive(map, options).0
    }

    /// Runs the exchange through `on_log`; returns the call and its host.
    /// Checks on the way what holds for every complete exchange: the clock
    /// is read only by the callbacks that start or end a direction, REST
    /// bodies are never read, the response completes with its last event,
    /// and exactly one record is published: [`Call::record`] under the
    /// short names, before the log phase unless the response headers were
    /// only sized and no trailers came.
    fn drive(&self, map: Arc<OpMap>, options: Options) -> (Call, MemoryHost) {
        let opmap = Arc::clone(&map);
        let mut call = Call::new(map)
            .with_read_window(self.window)
            .with_options(options);
        let mut host = MemoryHost {
            now: Some(1_000_000),
            request_headers: Some(serialize(self.req_headers)),
            response_headers: Some(serialize(self.resp_headers)),
            response_trailers: self.resp_trailers.map(serialize),
            ..MemoryHost::default()
        };
        let req_eos = self.req_chunks.is_empty();
        call.on_request_headers(&mut host, req_eos);
        assert_eq!(host.calls.clock, 1);
        host.now = Some(2_000_000);
        let n = self.req_chunks.len();
        for (i, c) in self.req_chunks.iter().enumerate() {
            let last = i + 1 == n;
            let clock = host.calls.clock;
            host.request_body = Some(c.clone());
            call.on_request_body(&mut host, c.len(), last);
            assert_eq!(
                host.calls.clock - clock,
                usize::from(last),
                "the clock is read by the request chunk that ends it, only"
            );
        }
        host.now = Some(3_500_000);
        let only_headers = self.resp_chunks.is_empty() && self.resp_trailers.is_none();
        call.on_response_headers(&mut host, only_headers);
        assert_eq!(host.calls.publications, usize::from(only_headers));
        host.now = Some(9_000_000);
        let n = self.resp_chunks.len();
        for (i, c) in self.resp_chunks.iter().enumerate() {
            let last = i + 1 == n && self.resp_trailers.is_none();
            host.response_body = Some(c.clone());
            call.on_response_body(&mut host, c.len(), last);
            assert_eq!(call.response_complete(), last);
        }
        if self.resp_trailers.is_some() {
            call.on_response_trailers(&mut host);
        }
        assert!(call.response_complete());
        assert!(call.request_complete());
        let deferred = host.calls.publications == 0;
        let before = host.calls;
        call.on_log(&mut host);
        assert_eq!(host.calls.clock, before.clock, "no clock in the log phase");
        assert_eq!(
            host.calls.map_copies - before.map_copies,
            usize::from(deferred),
            "the log phase copies the deferred response headers, only"
        );
        assert_eq!(host.calls.publications, 1);
        if deferred {
            // Only native gRPC defers: its sized headers are read now.
            assert_eq!(call.protocol(), Some(Protocol::Grpc));
        }
        if !call.protocol().is_some_and(Protocol::is_grpc_family) {
            assert_eq!(host.calls.body_reads, 0, "REST bodies are never read");
        }
        let mut published = String::new();
        call.record(None).write_published(&mut published);
        assert_eq!(host.published, [published.clone()]);
        // What the Collector expands it to (the labels restored from the map
        // by its key) is the record a filter of format 1 published.
        let mut format1 = String::new();
        call.record(None).write_json(&mut format1);
        assert_eq!(
            decode_published(&published, &opmap),
            serde_json::from_str::<Map<String, Value>>(&format1).unwrap(),
            "{published} against {format1}"
        );
        (call, host)
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

fn record_json(call: &Call) -> String {
    call.record(None).to_json()
}

/// The record parsed back; checks it is an object whose keys follow [`KEYS`] order.
fn record_obj(call: &Call) -> Map<String, Value> {
    let text = record_json(call);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let Value::Object(m) = v else {
        panic!("not an object: {text}")
    };
    for k in m.keys() {
        assert!(KEYS.contains(&k.as_str()), "unknown key {k} in {text}");
    }
    // serde_json's Map is sorted (no preserve_order): check order on the text.
    let mut at = 0;
    for k in KEYS {
        if let Some(i) = text.find(&format!("\"{k}\":")) {
            assert!(i >= at, "{k} out of order in {text}");
            at = i;
        }
    }
    m
}

/// Checks the listed keys (full names); `Value::Null` means "absent".
fn expect(call: &Call, want: &[(&str, Value)]) {
    let got = record_obj(call);
    for (k, v) in want {
        assert!(KEYS.contains(k), "test uses unknown key {k}");
        match (got.get(*k), v) {
            (None, Value::Null) => {}
            (Some(g), _) => assert_eq!(g, v, "{k} in {}", record_json(call)),
            (None, _) => panic!("no key {k} in {}", record_json(call)),
        }
    }
}

/// Keys of the gRPC-family-only groups.
const GRPC_ONLY: [&str; 12] = [
    keys::REQ_MESSAGES,
    keys::RESP_MESSAGES,
    keys::REQ_MESSAGE_BYTES,
    keys::REQ_MESSAGE_MIN,
    keys::REQ_MESSAGE_MAX,
    keys::RESP_MESSAGE_BYTES,
    keys::RESP_MESSAGE_MIN,
    keys::RESP_MESSAGE_MAX,
    keys::REQ_FRAMING_BYTES,
    keys::RESP_FRAMING_BYTES,
    keys::REQ_COMPRESSED,
    keys::RESP_COMPRESSED,
];

fn absent(call: &Call, ks: &[&str]) {
    let got = record_obj(call);
    for k in ks {
        assert!(
            !got.contains_key(*k),
            "{k} present in {}",
            record_json(call)
        );
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

// ---------------------------------------------------------------- goldens

const REST_REQ: &[(&str, &str)] = &[
    (":method", "GET"),
    (":path", "/v1/products/42?fields=name"),
    (":authority", "localhost"),
    ("accept", "application/json"),
];
const REST_RESP: &[(&str, &str)] = &[
    (":status", "200"),
    ("content-type", "application/json"),
    ("content-length", "25"),
];

const PROTO_REQ: &[(&str, &str)] = &[
    (":method", "POST"),
    (":path", "/v1/hello"),
    ("content-type", "application/x-protobuf"),
];
const PROTO_RESP: &[(&str, &str)] = &[
    (":status", "200"),
    ("content-type", "application/x-protobuf"),
];

/// Request: a plain message, a compressed one and a zero-length one, split
/// over two chunks (the split falls inside the second prefix).
fn grpc_request_body() -> Vec<u8> {
    let mut b = encode_frame(0, b"\x0a\x05world");
    b.extend(encode_frame(1, b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"));
    b.extend(encode_frame(0, b""));
    b
}

const WEB_REQ: &[(&str, &str)] = &[
    (":method", "POST"),
    (":path", "/wirelens.v1.Catalog/GetProduct"),
    (":authority", "localhost"),
    ("content-type", "application/grpc-web+proto"),
    ("x-grpc-web", "1"),
    ("accept", "application/grpc-web+proto"),
];
const WEB_RESP: &[(&str, &str)] = &[
    (":status", "200"),
    ("content-type", "application/grpc-web+proto"),
];
const WEB_TRAILER: &[u8] = b"grpc-status:5\r\ngrpc-message:product%2042%20not%20found\r\n";

const TEXT_REQ: &[(&str, &str)] = &[
    (":method", "POST"),
    (":path", "/wirelens.v1.Hello/SayHello"),
    ("content-type", "application/grpc-web-text"),
    ("accept", "application/grpc-web-text"),
];
const TEXT_RESP: &[(&str, &str)] = &[
    (":status", "200"),
    ("content-type", "application/grpc-web-text+proto"),
];

fn text_body(frames: &[Vec<u8>]) -> String {
    // Each frame base64-encoded (and padded) on its own, with line breaks.
    let mut s = String::new();
    for f in frames {
        s.push_str(&b64(f));
        s.push_str("\r\n");
    }
    s
}

fn text_exchange() -> (Vec<u8>, Vec<u8>) {
    let req = text_body(&[encode_frame(0, b"\x0a\x05world")]);
    let resp = text_body(&[
        encode_frame(0, b"\x0a\x0bhello world"),
        encode_frame(0, b""),
        encode_frame(1, b"abcd"),
        encode_frame(0x80, b"grpc-status:0\r\ngrpc-message:caf%C3%A9\r\n"),
    ]);
    (req.into_bytes(), resp.into_bytes())
}

const TEXT_GOLDEN: &str = r#"{"wirelens.protocol":"grpc-web-text","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","rpc.grpc.status_code":0,"wirelens.grpc.message":"café","wirelens.request.header.size":111,"wirelens.response.header.size":53,"wirelens.response.trailer.size":0,"http.request.body.size":18,"http.response.body.size":112,"wirelens.request.messages":1,"wirelens.response.messages":3,"wirelens.request.message.bytes":7,"wirelens.request.message.min":7,"wirelens.request.message.max":7,"wirelens.response.message.bytes":17,"wirelens.response.message.min":0,"wirelens.response.message.max":13,"wirelens.request.framing.bytes":5,"wirelens.response.framing.bytes":59,"wirelens.request.compressed_messages":0,"wirelens.response.compressed_messages":1,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#;

/// The record of each protocol (the README's examples), and variants that
/// must not change it. Every row also checks what follows from its
/// exchange alone: header and body sizes, no gRPC keys outside the gRPC
/// family, and payload + framing = body for complete binary frames.
struct Golden<'a> {
    name: &'a str,
    exchange: Exchange<'a>,
    options: Options,
    /// The whole record, under the attribute names.
    json: Option<&'a str>,
    /// Further values (`Value::Null`: absent).
    expect: Vec<(&'a str, Value)>,
}

fn goldens<'a>(
    rest_body: &'a [u8],
    grpc_bodies: &'a (Vec<u8>, Vec<u8>),
    web_bodies: &'a (Vec<u8>, Vec<u8>, usize),
    text_bodies: &'a (Vec<u8>, Vec<u8>),
) -> Vec<Golden<'a>> {
    let (grpc_req, grpc_resp) = grpc_bodies;
    let (web_req, web_resp, web_msg_len) = web_bodies;
    let (text_req, text_resp) = text_bodies;
    let transcoded_req: Pairs = &[
        (":method", "POST"),
        (":path", "/v1/hello"),
        ("content-type", "application/json"),
    ];
    let healthz = || Exchange {
        req_headers: &[(":method", "GET"), (":path", "/healthz")],
        req_chunks: vec![],
        resp_headers: &[(":status", "404")],
        resp_chunks: vec![],
        resp_trailers: None,
        window: 1024,
    };
    let proto = || Exchange {
        req_headers: PROTO_REQ,
        req_chunks: vec![b"\x0a\x05world".to_vec()],
        resp_headers: PROTO_RESP,
        resp_chunks: vec![b"\x0a\x0bhello world".to_vec()],
        resp_trailers: None,
        window: 1024,
    };
    let transcoded = Options::default().with_rest_transcoded(true);
    vec![
        Golden {
            // Bodies look like gRPC frames on purpose: REST bodies are never parsed.
            name: "rest",
            exchange: Exchange {
                req_headers: REST_REQ,
                req_chunks: vec![],
                resp_headers: REST_RESP,
                resp_chunks: vec![rest_body[..10].to_vec(), rest_body[10..].to_vec()],
                resp_trailers: None,
                window: 1024,
            },
            options: Options::default(),
            json: Some(
                r#"{"wirelens.protocol":"rest","wirelens.operation":"catalog.GetProduct","rpc.service":"wirelens.v1.Catalog","rpc.method":"GetProduct","wirelens.streaming":"unary","http.route":"/v1/products/{id}","wirelens.request.header.size":83,"wirelens.response.header.size":54,"wirelens.response.trailer.size":0,"http.request.body.size":0,"http.response.body.size":25,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":0,"wirelens.malformed":0}"#,
            ),
            expect: vec![],
        },
        Golden {
            name: "rest-proto",
            exchange: proto(),
            options: Options::default(),
            json: Some(
                r#"{"wirelens.protocol":"rest-proto","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","http.route":"/v1/hello","wirelens.request.header.size":59,"wirelens.response.header.size":44,"wirelens.response.trailer.size":0,"http.request.body.size":7,"http.response.body.size":13,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#,
            ),
            expect: vec![],
        },
        Golden {
            // rest_transcoded only changes `rest`.
            name: "rest-proto, rest_transcoded",
            exchange: Exchange {
                resp_chunks: vec![],
                ..proto()
            },
            options: transcoded,
            json: None,
            expect: vec![(keys::PROTOCOL, json!("rest-proto"))],
        },
        Golden {
            name: "bodiless GET accepting protobuf",
            exchange: Exchange {
                req_headers: &[
                    (":method", "GET"),
                    (":path", "/v1/hello?name=x"),
                    ("accept", "application/json;q=0.5, application/protobuf"),
                ],
                req_chunks: vec![],
                resp_chunks: vec![b"\x0a\x01x".to_vec()],
                ..proto()
            },
            options: Options::default(),
            json: None,
            expect: vec![(keys::PROTOCOL, json!("rest-proto"))],
        },
        Golden {
            name: "rest-transcoded",
            exchange: Exchange {
                req_headers: transcoded_req,
                req_chunks: vec![br#"{"name":"world"}"#.to_vec()],
                resp_headers: &[(":status", "200"), ("content-type", "application/json")],
                resp_chunks: vec![br#"{"message":"hello world"}"#.to_vec()],
                resp_trailers: None,
                window: 1024,
            },
            options: transcoded.with_sample_rate(0.25),
            json: Some(
                r#"{"wirelens.protocol":"rest-transcoded","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","http.route":"/v1/hello","wirelens.request.header.size":53,"wirelens.response.header.size":38,"wirelens.response.trailer.size":0,"http.request.body.size":16,"http.response.body.size":25,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":1000,"wirelens.malformed":0,"wirelens.sample_rate":0.25}"#,
            ),
            expect: vec![],
        },
        Golden {
            // Unmatched: the one fixed operation and the bounded path, no other names.
            name: "rest-transcoded, unknown",
            exchange: healthz(),
            options: transcoded,
            json: Some(
                r#"{"wirelens.protocol":"rest-transcoded","wirelens.operation":"unknown","url.path":"/healthz","wirelens.request.header.size":23,"wirelens.response.header.size":10,"wirelens.response.trailer.size":0,"http.request.body.size":0,"http.response.body.size":0,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":2500,"wirelens.request.duration_us":0,"wirelens.malformed":0}"#,
            ),
            expect: vec![],
        },
        Golden {
            // Request: a plain message, a compressed one and a zero-length
            // one, over two chunks (the split falls inside the second prefix).
            name: "grpc",
            exchange: Exchange {
                req_headers: GRPC_REQ,
                req_chunks: vec![grpc_req[..14].to_vec(), grpc_req[14..].to_vec()],
                resp_headers: &[(":status", "200"), ("content-type", "application/grpc")],
                resp_chunks: vec![grpc_resp.clone()],
                resp_trailers: Some(&[("grpc-status", "0"), ("grpc-message", "all%20good")]),
                window: 16 * 1024,
            },
            options: Options::default(),
            json: Some(
                r#"{"wirelens.protocol":"grpc","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","rpc.grpc.status_code":0,"wirelens.grpc.message":"all good","wirelens.request.header.size":116,"wirelens.response.header.size":38,"wirelens.response.trailer.size":34,"http.request.body.size":32,"http.response.body.size":18,"wirelens.request.messages":3,"wirelens.response.messages":1,"wirelens.request.message.bytes":17,"wirelens.request.message.min":0,"wirelens.request.message.max":10,"wirelens.response.message.bytes":13,"wirelens.response.message.min":13,"wirelens.response.message.max":13,"wirelens.request.framing.bytes":15,"wirelens.response.framing.bytes":5,"wirelens.request.compressed_messages":1,"wirelens.response.compressed_messages":0,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#,
            ),
            expect: vec![],
        },
        Golden {
            // Envoy's grpc_web filter hands the trailer frame as its own
            // chunk, followed by an empty trailer map.
            name: "grpc-web",
            exchange: Exchange {
                req_headers: WEB_REQ,
                req_chunks: vec![web_req.clone()],
                resp_headers: WEB_RESP,
                resp_chunks: vec![
                    web_resp[..*web_msg_len].to_vec(),
                    web_resp[*web_msg_len..].to_vec(),
                ],
                resp_trailers: Some(&[]),
                window: 16 * 1024,
            },
            options: Options::default(),
            json: Some(
                r#"{"wirelens.protocol":"grpc-web","wirelens.operation":"catalog.GetProduct","rpc.service":"wirelens.v1.Catalog","rpc.method":"GetProduct","wirelens.streaming":"unary","rpc.grpc.status_code":5,"wirelens.grpc.message":"product 42 not found","wirelens.request.header.size":147,"wirelens.response.header.size":48,"wirelens.response.trailer.size":0,"http.request.body.size":7,"http.response.body.size":71,"wirelens.request.messages":1,"wirelens.response.messages":1,"wirelens.request.message.bytes":2,"wirelens.request.message.min":2,"wirelens.request.message.max":2,"wirelens.response.message.bytes":5,"wirelens.response.message.min":5,"wirelens.response.message.max":5,"wirelens.request.framing.bytes":5,"wirelens.response.framing.bytes":66,"wirelens.request.compressed_messages":0,"wirelens.response.compressed_messages":0,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#,
            ),
            // 5 (data prefix) + the whole trailer frame.
            expect: vec![(
                keys::RESP_FRAMING_BYTES,
                json!(5 + web_resp.len() - web_msg_len),
            )],
        },
        Golden {
            name: "grpc-web-text",
            exchange: Exchange {
                req_headers: TEXT_REQ,
                req_chunks: vec![text_req.clone()],
                resp_headers: TEXT_RESP,
                resp_chunks: vec![text_resp.clone()],
                resp_trailers: None,
                window: 16 * 1024,
            },
            options: Options::default(),
            json: Some(TEXT_GOLDEN),
            // Framing on the decoded bytes: 3 data prefixes + the 5+39-byte trailer frame.
            expect: vec![(keys::RESP_FRAMING_BYTES, json!(3 * 5 + 5 + 39))],
        },
    ]
}

#[test]
fn goldens_per_protocol() {
    let rest_body = encode_frame(0, b"{\"id\":42,\"name\":\"x\"}");
    let grpc = (grpc_request_body(), encode_frame(0, b"\x0a\x0bhello world"));
    let web = {
        let mut resp = encode_frame(0, b"\x0a\x03abc");
        let msg_len = resp.len();
        resp.extend(encode_frame(0x80, WEB_TRAILER));
        (encode_frame(0, b"\x08\x2a"), resp, msg_len)
    };
    let text = text_exchange();
    for g in goldens(&rest_body, &grpc, &web, &text) {
        let name = g.name;
        let call = g.exchange.run_with(map(), g.options);
        if let Some(json) = g.json {
            assert_eq!(record_json(&call), json, "{name}");
        }
        let sum = |chunks: &[Vec<u8>]| chunks.iter().map(Vec::len).sum::<usize>();
        let e = &g.exchange;
        let mut want = vec![
            (keys::REQ_HEADER_SIZE, json!(hbytes(e.req_headers))),
            (keys::RESP_HEADER_SIZE, json!(hbytes(e.resp_headers))),
            (
                keys::RESP_TRAILER_SIZE,
                json!(e.resp_trailers.map_or(0, hbytes)),
            ),
            (keys::REQ_BODY_SIZE, json!(sum(&e.req_chunks))),
            (keys::RESP_BODY_SIZE, json!(sum(&e.resp_chunks))),
        ];
        want.extend(g.expect.iter().cloned());
        expect(&call, &want);
        let r = call.record(None);
        let protocol = r.protocol.expect("a protocol");
        if !protocol.is_grpc_family() {
            absent(&call, &GRPC_ONLY);
            assert_eq!(r.frames, None, "{name}");
        }
        if matches!(protocol, Protocol::Grpc | Protocol::GrpcWeb) {
            // Complete frames: body = payload + framing.
            let f = r.frames.unwrap();
            for (dir, body) in [(f.request, &e.req_chunks), (f.response, &e.resp_chunks)] {
                assert_eq!(
                    dir.message_bytes + dir.framing_bytes,
                    sum(body) as u64,
                    "{name}"
                );
            }
        }
    }
}

// ------------------------------------------------------ publishing contract

/// A known unary gRPC call without bodies, answered with status 0.
fn bodiless_grpc_ok() -> Exchange<'static> {
    Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![],
        resp_headers: &[(":status", "200"), ("content-type", "application/grpc")],
        resp_chunks: vec![],
        resp_trailers: Some(&[("grpc-status", "0")]),
        window: 1024,
    }
}

#[test]
fn record_json_reuses_its_buffer() {
    let call = bodiless_grpc_ok().run(map());
    let mut buf = String::from("stale contents");
    call.record(None).write_json(&mut buf);
    // Published under the short names, key for key the record of the
    // attribute names (record_json).
    assert!(
        buf.starts_with(r#"{"pr":"grpc","op":"hello.SayHello","#),
        "{buf}"
    );
    let published: Map<String, Value> = serde_json::from_str(&buf).unwrap();
    let expanded: std::collections::BTreeMap<&str, &Value> = published
        .iter()
        .map(|(k, v)| (attribute_name(k).unwrap(), v))
        .collect();
    let attributes = record_obj(&call);
    assert_eq!(
        expanded,
        attributes.iter().map(|(k, v)| (k.as_str(), v)).collect()
    );
    assert_eq!(WIRE_KEYS.len(), KEYS.len());
    // Reusing the buffer does not reallocate.
    let cap = buf.capacity();
    let ptr = buf.as_ptr();
    for _ in 0..10 {
        call.record(None).write_json(&mut buf);
    }
    assert_eq!((buf.capacity(), buf.as_ptr()), (cap, ptr));

    // Unknown operation: the fixed operation and the path; the map's other
    // keys are omitted from the record.
    let call = Exchange {
        req_headers: &[(":method", "GET"), (":path", "/healthz")],
        req_chunks: vec![],
        resp_headers: &[(":status", "404")],
        resp_chunks: vec![],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    call.record(None).write_json_named(&mut buf, false);
    assert!(
        buf.starts_with(
            r#"{"wirelens.protocol":"rest","wirelens.operation":"unknown","url.path":"/healthz","#
        ),
        "{buf}"
    );
    absent(
        &call,
        &[
            keys::RPC_SERVICE,
            keys::RPC_METHOD,
            keys::STREAMING,
            keys::ROUTE,
            keys::GRPC_STATUS,
            keys::GRPC_MESSAGE,
        ],
    );
}

#[test]
fn unknown_paths_share_one_operation() {
    // Whatever paths clients invent, `wirelens.operation` takes one value
    // and the path goes, bounded, to `url.path` alone.
    let long = format!("/{}", "z".repeat(8191));
    let cases: &[(&str, &str, &str, &str)] = &[
        // (method, path, content-type, url.path)
        (
            "GET",
            "/no/such/route?secret=1",
            "application/json",
            "/no/such/route",
        ),
        (
            "POST",
            "/v1/hello/extra",
            "application/json",
            "/v1/hello/extra",
        ),
        ("POST", "/x.Y/qwerty", "application/grpc", "/x.Y/qwerty"),
        (
            "POST",
            "/x.Y/qwerty#frag",
            "application/grpc-web-text",
            "/x.Y/qwerty",
        ),
        ("POST", "not-a-path", "application/grpc-web", "not-a-path"),
        ("GET", &long, "application/json", &long[..128]),
        ("POST", &long, "application/grpc", &long[..128]),
    ];
    for &(method, path, content_type, want_path) in cases {
        let call = Exchange {
            req_headers: &[
                (":method", method),
                (":path", path),
                ("content-type", content_type),
            ],
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
                (keys::OPERATION, json!("unknown")),
                (keys::URL_PATH, json!(want_path)),
                (keys::RPC_SERVICE, Value::Null),
                (keys::RPC_METHOD, Value::Null),
                (keys::STREAMING, Value::Null),
                (keys::ROUTE, Value::Null),
            ],
        );
    }
    // A known call carries no `url.path`.
    let call = bodiless_grpc_ok().run(map());
    absent(&call, &[keys::URL_PATH]);
}

#[test]
fn grpc_message_is_cut_to_the_configured_length() {
    let message = "é".repeat(300);
    let trailers_only = |options: Options| {
        let resp = [
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", "2"),
            ("grpc-message", message.as_str()),
        ];
        Exchange {
            req_headers: GRPC_REQ,
            req_chunks: vec![],
            resp_headers: &resp,
            resp_chunks: vec![],
            resp_trailers: None,
            window: 1024,
        }
        .run_with(map(), options)
    };
    let web_trailer_frame = |options: Options| {
        let block = format!("grpc-status:2\r\ngrpc-message:{message}\r\n");
        Exchange {
            req_headers: &[
                (":method", "POST"),
                (":path", "/wirelens.v1.Hello/SayHello"),
                ("content-type", "application/grpc-web"),
            ],
            req_chunks: vec![],
            resp_headers: &[(":status", "200"), ("content-type", "application/grpc-web")],
            resp_chunks: vec![encode_frame(0x80, block.as_bytes())],
            resp_trailers: None,
            window: 1024,
        }
        .run_with(map(), options)
    };
    for run in [
        &trailers_only as &dyn Fn(Options) -> Call,
        &web_trailer_frame,
    ] {
        // Default 128 bytes: 64 whole "é".
        let call = run(Options::default());
        assert_eq!(record_obj(&call)[keys::GRPC_MESSAGE], json!("é".repeat(64)));
        // An odd limit never splits a character.
        let call = run(Options::default().with_grpc_message_max_bytes(7));
        assert_eq!(record_obj(&call)[keys::GRPC_MESSAGE], json!("ééé"));
        let call = run(Options::default().with_grpc_message_max_bytes(1024));
        assert_eq!(
            record_obj(&call)[keys::GRPC_MESSAGE],
            json!("é".repeat(300))
        );
        // 0: never published; the status still is.
        let call = run(Options::default().with_grpc_message_max_bytes(0));
        absent(&call, &[keys::GRPC_MESSAGE]);
        assert_eq!(record_obj(&call)[keys::GRPC_STATUS], json!(2));
    }
}

#[test]
fn nasty_grpc_message_is_escaped() {
    // Raw quote and backslash, percent-encoded quote, newline, NUL, an
    // invalid UTF-8 byte, a valid multi-byte character and a broken escape.
    let raw = "say \"hi\"\\ %22q%22%0Anext%00%FF caf%C3%A9 100%";
    let resp: Pairs = &[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "13"),
        ("grpc-message", raw),
    ];
    let call = Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![],
        resp_headers: resp,
        resp_chunks: vec![],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    let text = record_json(&call);
    assert!(
        text.contains(r#""rpc.grpc.status_code":13,"wirelens.grpc.message":"say \"hi\"\\ \"q\"\u000anext\u0000� café 100%","#),
        "{text}"
    );
    let obj = record_obj(&call);
    assert_eq!(
        obj[keys::GRPC_MESSAGE],
        json!("say \"hi\"\\ \"q\"\nnext\u{0}\u{FFFD} café 100%")
    );
    // The same message in a gRPC-Web trailer frame.
    let mut block = b"grpc-status:13\r\ngrpc-message:".to_vec();
    block.extend_from_slice(raw.as_bytes());
    block.extend_from_slice(b"\x01\r\n");
    let call = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/wirelens.v1.Hello/SayHello"),
            ("content-type", "application/grpc-web"),
        ],
        req_chunks: vec![],
        resp_headers: &[(":status", "200"), ("content-type", "application/grpc-web")],
        resp_chunks: vec![encode_frame(0x80, &block)],
        resp_trailers: None,
        window: 1024,
    }
    .run(map());
    assert_eq!(
        record_obj(&call)[keys::GRPC_MESSAGE],
        json!("say \"hi\"\\ \"q\"\nnext\u{0}\u{FFFD} café 100%\u{1}")
    );
}

#[test]
fn optional_fields_remove_each_group() {
    let (req, resp) = text_exchange();
    let run = |fields: Fields| {
        Exchange {
            req_headers: TEXT_REQ,
            req_chunks: vec![req.clone()],
            resp_headers: TEXT_RESP,
            resp_chunks: vec![resp.clone()],
            resp_trailers: None,
            window: 16 * 1024,
        }
        .run_with(map(), Options::default().with_fields(fields))
    };
    let groups: [(Fields, &[&str]); 5] = [
        (
            Fields::MESSAGE_SIZES,
            &[
                keys::REQ_MESSAGE_BYTES,
                keys::REQ_MESSAGE_MIN,
                keys::REQ_MESSAGE_MAX,
                keys::RESP_MESSAGE_BYTES,
                keys::RESP_MESSAGE_MIN,
                keys::RESP_MESSAGE_MAX,
            ],
        ),
        (
            Fields::FRAMING,
            &[keys::REQ_FRAMING_BYTES, keys::RESP_FRAMING_BYTES],
        ),
        (
            Fields::COMPRESSION,
            &[keys::REQ_COMPRESSED, keys::RESP_COMPRESSED],
        ),
        (Fields::REQUEST_DURATION, &[keys::REQ_DURATION_US]),
        (Fields::GRPC_MESSAGE, &[keys::GRPC_MESSAGE]),
    ];
    let full = record_obj(&run(Fields::ALL));
    assert_eq!(record_json(&run(Fields::ALL)), TEXT_GOLDEN);
    for (g, ks) in groups {
        for k in ks {
            assert!(full.contains_key(*k), "{k}");
        }
        // Without the group: exactly its keys disappear.
        let got = record_obj(&run(Fields::ALL.without(g)));
        let mut want = full.clone();
        for k in ks {
            want.remove(*k);
        }
        assert_eq!(got, want, "{g:?}");
        // Only the group: the group's keys plus the fixed ones.
        let got = record_obj(&run(g));
        for k in full.keys() {
            let in_group = ks.contains(&k.as_str());
            let optional = groups.iter().any(|(_, gk)| gk.contains(&k.as_str()));
            assert_eq!(got.contains_key(k), in_group || !optional, "{g:?} {k}");
        }
    }
    let none = record_json(&run(Fields::NONE));
    assert_eq!(
        none,
        r#"{"wirelens.protocol":"grpc-web-text","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","rpc.grpc.status_code":0,"wirelens.request.header.size":111,"wirelens.response.header.size":53,"wirelens.response.trailer.size":0,"http.request.body.size":18,"http.response.body.size":112,"wirelens.request.messages":1,"wirelens.response.messages":3,"wirelens.time_to_first_byte_us":2500,"wirelens.duration_us":8000,"wirelens.malformed":0}"#
    );
}

#[test]
fn sample_rate_key() {
    let run = |rate: f64| {
        Exchange {
            req_headers: GRPC_REQ,
            req_chunks: vec![],
            resp_headers: &[(":status", "200")],
            resp_chunks: vec![],
            resp_trailers: None,
            window: 1024,
        }
        .run_with(map(), Options::default().with_sample_rate(rate))
    };
    expect(&run(1.0), &[(keys::SAMPLE_RATE, Value::Null)]);
    expect(&run(0.25), &[(keys::SAMPLE_RATE, json!(0.25))]);
    expect(&run(0.001), &[(keys::SAMPLE_RATE, json!(0.001))]);
    assert!(
        record_json(&run(0.5)).ends_with(r#","wirelens.malformed":0,"wirelens.sample_rate":0.5}"#)
    );
}

// ------------------------------------------------------ chunking invariance

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
    let req_payload: u64 = (0..20u64).map(|i| i * 37).sum();
    expect(
        &reference,
        &[
            (keys::OPERATION, json!("catalog.Watch")),
            (keys::STREAMING, json!("bidi")),
            (keys::REQ_MESSAGES, json!(20)),
            (keys::RESP_MESSAGES, json!(3)),
            (keys::REQ_BODY_SIZE, json!(req.len())),
            (keys::RESP_BODY_SIZE, json!(resp.len())),
            (keys::REQ_MESSAGE_BYTES, json!(req_payload)),
            (keys::REQ_MESSAGE_MIN, json!(0)),
            (keys::REQ_MESSAGE_MAX, json!(19 * 37)),
            (keys::RESP_MESSAGE_BYTES, json!(70_002)),
            (keys::RESP_MESSAGE_MIN, json!(0)),
            (keys::RESP_MESSAGE_MAX, json!(70_000)),
            (keys::REQ_FRAMING_BYTES, json!(100)),
            (keys::RESP_FRAMING_BYTES, json!(15)),
            (keys::REQ_COMPRESSED, json!(10)),
            (keys::RESP_COMPRESSED, json!(1)),
            (keys::MALFORMED, json!(0)),
        ],
    );
    let want = record_json(&reference);
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
            assert_eq!(record_json(&call), want, "window {window} split {i}");
        }
    }
    // Three-way splits of the request, one byte at a time for the response.
    for i in (0..=req.len()).step_by(97) {
        for j in (i..=req.len()).step_by(89) {
            let call = Exchange {
                req_headers,
                req_chunks: vec![req[..i].to_vec(), req[i..j].to_vec(), req[j..].to_vec()],
                resp_headers,
                resp_chunks: vec![resp.clone()],
                resp_trailers: Some(trailers),
                window: 64,
            }
            .run(map());
            assert_eq!(record_json(&call), want, "split {i} {j}");
        }
    }
    let small: Vec<u8> = resp[..5].iter().chain(&resp[70_010..]).copied().collect();
    let one_byte = |w| {
        Exchange {
            req_headers,
            req_chunks: req.chunks(1).map(<[u8]>::to_vec).collect(),
            resp_headers,
            resp_chunks: small.chunks(1).map(<[u8]>::to_vec).collect(),
            resp_trailers: Some(trailers),
            window: w,
        }
        .run(map())
    };
    let a = record_obj(&one_byte(1));
    let b = record_obj(&one_byte(4096));
    assert_eq!(a, b);
    assert_eq!(a[keys::REQ_MESSAGE_BYTES], json!(req_payload));
    assert_eq!(a[keys::REQ_FRAMING_BYTES], json!(100));
    assert_eq!(a[keys::RESP_MESSAGE_MAX], json!(2));
}

#[test]
fn grpc_golden_is_chunking_invariant() {
    let req_body = grpc_request_body();
    let resp_body = encode_frame(0, b"\x0a\x0bhello world");
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc")];
    let trailers: Pairs = &[("grpc-status", "0"), ("grpc-message", "all%20good")];
    let run = |rq: Vec<Vec<u8>>, rs: Vec<Vec<u8>>, window| {
        record_json(
            &Exchange {
                req_headers: GRPC_REQ,
                req_chunks: rq,
                resp_headers,
                resp_chunks: rs,
                resp_trailers: Some(trailers),
                window,
            }
            .run(map()),
        )
    };
    let want = run(vec![req_body.clone()], vec![resp_body.clone()], 16 * 1024);
    for i in 0..=req_body.len() {
        for j in i..=req_body.len() {
            let k = j.min(resp_body.len());
            for window in [1, 4, 16 * 1024] {
                let got = run(
                    vec![
                        req_body[..i].to_vec(),
                        req_body[i..j].to_vec(),
                        req_body[j..].to_vec(),
                    ],
                    vec![resp_body[..k].to_vec(), resp_body[k..].to_vec()],
                    window,
                );
                assert_eq!(got, want, "{i} {j} window {window}");
            }
        }
    }
}

#[test]
fn grpc_web_trailer_frame_with_eos_body_and_split_everywhere() {
    let req_headers: Pairs = &[
        (":method", "POST"),
        (":path", "/wirelens.v1.Hello/SayHello"),
        ("content-type", "application/grpc-web"),
    ];
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc-web")];
    let block = b"Grpc-Status: 0\r\nGrpc-Message: fine\r\n";
    let mut resp = encode_frame(0, b"hi");
    resp.extend(encode_frame(0x80, block));
    let mut want: Option<String> = None;
    for i in 0..=resp.len() {
        for j in (i..=resp.len()).step_by(3) {
            let call = Exchange {
                req_headers,
                req_chunks: vec![encode_frame(0, b"x")],
                resp_headers,
                resp_chunks: vec![resp[..i].to_vec(), resp[i..j].to_vec(), resp[j..].to_vec()],
                resp_trailers: None,
                window: 3,
            }
            .run(map());
            expect(
                &call,
                &[
                    (keys::RESP_MESSAGES, json!(1)),
                    (keys::RESP_MESSAGE_BYTES, json!(2)),
                    (keys::RESP_FRAMING_BYTES, json!(5 + 5 + block.len())),
                    (keys::GRPC_STATUS, json!(0)),
                    (keys::GRPC_MESSAGE, json!("fine")),
                    (keys::MALFORMED, json!(0)),
                ],
            );
            let got = record_json(&call);
            assert_eq!(got, *want.get_or_insert_with(|| got.clone()), "{i} {j}");
        }
    }
}

#[test]
fn grpc_web_text_split_everywhere() {
    let (req, resp) = text_exchange();
    for window in [2usize, 5, 16 * 1024] {
        for i in 0..=resp.len() {
            let ri = i.min(req.len());
            let call = Exchange {
                req_headers: TEXT_REQ,
                req_chunks: vec![req[..ri].to_vec(), req[ri..].to_vec()],
                resp_headers: TEXT_RESP,
                resp_chunks: vec![resp[..i].to_vec(), resp[i..].to_vec()],
                resp_trailers: None,
                window,
            }
            .run(map());
            assert_eq!(record_json(&call), TEXT_GOLDEN, "window {window} split {i}");
        }
    }
    // Three-way splits.
    for i in (0..=resp.len()).step_by(7) {
        for j in (i..=resp.len()).step_by(11) {
            let call = Exchange {
                req_headers: TEXT_REQ,
                req_chunks: vec![req.clone()],
                resp_headers: TEXT_RESP,
                resp_chunks: vec![resp[..i].to_vec(), resp[i..j].to_vec(), resp[j..].to_vec()],
                resp_trailers: None,
                window: 3,
            }
            .run(map());
            assert_eq!(record_json(&call), TEXT_GOLDEN, "split {i} {j}");
        }
    }
    // One byte at a time.
    let call = Exchange {
        req_headers: TEXT_REQ,
        req_chunks: req.chunks(1).map(<[u8]>::to_vec).collect(),
        resp_headers: TEXT_RESP,
        resp_chunks: resp.chunks(1).map(<[u8]>::to_vec).collect(),
        resp_trailers: None,
        window: 16 * 1024,
    }
    .run(map());
    assert_eq!(record_json(&call), TEXT_GOLDEN);
}

// ------------------------------------------------------------------ clock

/// A call of [`GRPC_REQ`] after its request headers, and its host with the
/// clock at `t`.
fn grpc_started(end_of_stream: bool, t: Option<u64>) -> (Call, MemoryHost) {
    let mut host = MemoryHost {
        now: t,
        request_headers: Some(serialize(GRPC_REQ)),
        ..MemoryHost::default()
    };
    let mut call = Call::new(map());
    call.on_request_headers(&mut host, end_of_stream);
    (call, host)
}

/// A request body chunk of `size` bytes whose readable bytes are `data`
/// (`None`: the host refuses reads); returns the clock reads it made.
fn request_chunk(
    call: &mut Call,
    host: &mut MemoryHost,
    data: Option<&[u8]>,
    size: usize,
    end_of_stream: bool,
) -> usize {
    host.request_body = data.map(<[u8]>::to_vec);
    let clock = host.calls.clock;
    call.on_request_body(host, size, end_of_stream);
    host.calls.clock - clock
}

/// Serialized response headers of a native gRPC answer.
fn grpc_response_headers() -> Vec<u8> {
    serialize(&[(":status", "200"), ("content-type", "application/grpc")])
}

#[test]
fn request_duration_client_streaming() {
    // The request ends with the last of several body chunks.
    let (mut call, mut host) = grpc_started(false, Some(1_000_000));
    let body = grpc_request_body();
    let chunks: Vec<&[u8]> = body.chunks(6).collect();
    let n = chunks.len();
    assert!(n >= 5);
    host.now = Some(7_250_000);
    for (i, c) in chunks.iter().enumerate() {
        let last = i + 1 == n;
        let clock = request_chunk(&mut call, &mut host, Some(c), c.len(), last);
        assert_eq!(clock, usize::from(last));
        assert_eq!(call.request_complete(), last);
    }
    // More events for the request do not move its end (nor read the clock).
    let clock = host.calls.clock;
    call.on_request_trailers(&mut host);
    assert_eq!(request_chunk(&mut call, &mut host, Some(b""), 0, true), 0);
    assert_eq!(host.calls.clock, clock);
    let r = call.record(Some(9_000_000));
    assert_eq!(r.request_duration_us, Some(6250));
    assert_eq!(r.duration_us, Some(8000));
    expect(
        &call,
        &[
            (keys::REQ_DURATION_US, json!(6250)),
            (keys::REQ_MESSAGES, json!(3)),
            (keys::REQ_MESSAGE_BYTES, json!(17)),
        ],
    );

    // Ended by request trailers.
    let (mut call, mut host) = grpc_started(false, Some(1_000_000));
    assert_eq!(
        request_chunk(&mut call, &mut host, Some(&body), body.len(), false),
        0
    );
    host.now = Some(4_000_000);
    call.on_request_trailers(&mut host);
    assert_eq!(call.record(None).request_duration_us, Some(3000));

    // Ended with the headers.
    let (call, _) = grpc_started(true, Some(1_000_000));
    assert_eq!(call.record(None).request_duration_us, Some(0));

    // Never ended (reset): omitted.
    let (mut call, mut host) = grpc_started(false, Some(1_000_000));
    request_chunk(&mut call, &mut host, Some(&body), body.len(), false);
    assert_eq!(call.record(Some(5_000_000)).request_duration_us, None);
    expect(
        &call,
        &[
            (keys::REQ_DURATION_US, Value::Null),
            (keys::TTFB_US, Value::Null),
        ],
    );
}

#[test]
fn clock_going_backwards_gives_zero() {
    let (mut call, mut host) = grpc_started(false, Some(5_000_000));
    host.now = Some(4_000_000);
    request_chunk(&mut call, &mut host, Some(b""), 0, true);
    host.response_headers = Some(grpc_response_headers());
    host.response_trailers = Some(serialize(&[("grpc-status", "0")]));
    host.now = Some(1_000);
    call.on_response_headers(&mut host, false);
    host.now = Some(4_999_999);
    call.on_response_trailers(&mut host);
    let r = call.record(None);
    assert_eq!(r.request_duration_us, Some(0));
    assert_eq!(r.ttfb_us, Some(0));
    assert_eq!(r.duration_us, Some(0));
    // No clock at all: every duration omitted.
    let (mut call, mut host) = grpc_started(true, None);
    host.response_headers = Some(grpc_response_headers());
    call.on_response_headers(&mut host, true);
    assert_eq!(host.calls.publications, 1);
    let r = call.record(None);
    assert_eq!(
        (r.ttfb_us, r.duration_us, r.request_duration_us),
        (None, None, None)
    );
    absent(
        &call,
        &[keys::TTFB_US, keys::DURATION_US, keys::REQ_DURATION_US],
    );
}

// ------------------------------------------------------------- robustness

/// A named exchange and values its record must hold (`Value::Null`: absent).
type Case<'a> = (&'a str, Exchange<'a>, Vec<(&'a str, Value)>);

/// Odd calls, one row each.
#[test]
fn odd_calls() {
    let cases: Vec<Case> = vec![
        (
            "grpc unknown method trailers only",
            Exchange {
                req_headers: &[
                    (":method", "POST"),
                    (":path", "/acme.inventory.v2.StockService/Reserve"),
                    ("content-type", "application/grpc+proto"),
                ],
                req_chunks: vec![encode_frame(0, b"")],
                resp_headers: &[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "12"),
                    ("grpc-message", "unknown%20service"),
                ],
                resp_chunks: vec![],
                resp_trailers: None,
                window: 16 * 1024,
            },
            vec![
                (keys::PROTOCOL, json!("grpc")),
                // Never derived from the path: a client cannot invent operations.
                (keys::OPERATION, json!("unknown")),
                (
                    keys::URL_PATH,
                    json!("/acme.inventory.v2.StockService/Reserve"),
                ),
                (keys::RPC_SERVICE, Value::Null),
                (keys::RPC_METHOD, Value::Null),
                (keys::STREAMING, Value::Null),
                (keys::ROUTE, Value::Null),
                (keys::REQ_BODY_SIZE, json!(5)),
                (keys::REQ_MESSAGES, json!(1)),
                (keys::REQ_MESSAGE_MIN, json!(0)),
                (keys::REQ_MESSAGE_MAX, json!(0)),
                (keys::RESP_MESSAGES, json!(0)),
                (keys::RESP_MESSAGE_BYTES, json!(0)),
                (keys::RESP_MESSAGE_MIN, Value::Null),
                (keys::RESP_MESSAGE_MAX, Value::Null),
                (keys::RESP_FRAMING_BYTES, json!(0)),
                (keys::RESP_TRAILER_SIZE, json!(0)),
                (keys::RESP_BODY_SIZE, json!(0)),
                (keys::GRPC_STATUS, json!(12)),
                (keys::GRPC_MESSAGE, json!("unknown service")),
                (keys::TTFB_US, json!(2500)),
                (keys::DURATION_US, json!(2500)),
                (keys::MALFORMED, json!(0)),
            ],
        ),
        (
            "grpc web bad trailer frame is malformed",
            Exchange {
                req_headers: &[
                    (":method", "POST"),
                    (":path", "/wirelens.v1.Hello/SayHello"),
                    ("content-type", "application/grpc-web"),
                ],
                req_chunks: vec![],
                resp_headers: &[(":status", "200"), ("content-type", "application/grpc-web")],
                resp_chunks: vec![encode_frame(0x80, b"garbage")],
                resp_trailers: None,
                window: 1024,
            },
            vec![
                (keys::MALFORMED, json!(1)),
                (keys::GRPC_STATUS, Value::Null),
                // The frame completed: it is framing even though it did not parse.
                (keys::RESP_FRAMING_BYTES, json!(12)),
            ],
        ),
        (
            "grpc web text bad base64 is malformed",
            Exchange {
                req_headers: &[
                    (":method", "POST"),
                    (":path", "/wirelens.v1.Hello/SayHello"),
                    ("content-type", "application/grpc-web-text"),
                ],
                req_chunks: vec![b"AAAAAAE*".to_vec()],
                resp_headers: &[
                    (":status", "200"),
                    ("content-type", "application/grpc-web-text"),
                ],
                resp_chunks: vec![],
                resp_trailers: Some(&[("grpc-status", "0")]),
                window: 1024,
            },
            vec![(keys::MALFORMED, json!(1)), (keys::GRPC_STATUS, json!(0))],
        ),
        (
            "grpc error page response is not parsed",
            // An upstream error page (not gRPC) answering a gRPC request.
            Exchange {
                req_headers: GRPC_REQ,
                req_chunks: vec![encode_frame(0, b"x")],
                resp_headers: &[(":status", "503"), ("content-type", "text/plain")],
                resp_chunks: vec![b"upstream connect error".to_vec()],
                resp_trailers: None,
                window: 1024,
            },
            vec![
                (keys::RESP_MESSAGES, json!(0)),
                (keys::RESP_MESSAGE_BYTES, json!(0)),
                (keys::RESP_FRAMING_BYTES, json!(0)),
                (keys::RESP_BODY_SIZE, json!(22)),
                (keys::MALFORMED, json!(0)),
            ],
        ),
        (
            "invalid grpc status header is malformed",
            Exchange {
                req_headers: GRPC_REQ,
                req_chunks: vec![],
                resp_headers: &[(":status", "200"), ("content-type", "application/grpc")],
                resp_chunks: vec![],
                resp_trailers: Some(&[("grpc-status", "not a number at all")]),
                window: 1024,
            },
            vec![
                (keys::MALFORMED, json!(1)),
                (keys::GRPC_STATUS, Value::Null),
            ],
        ),
        (
            "grpc response without trailers takes its status from the deferred headers",
            Exchange {
                req_headers: GRPC_REQ,
                req_chunks: vec![encode_frame(0, b"x")],
                resp_headers: &[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "14"),
                    ("grpc-message", "unavailable"),
                ],
                resp_chunks: vec![encode_frame(0, b"partial")],
                resp_trailers: None,
                window: 1024,
            },
            vec![
                (keys::GRPC_STATUS, json!(14)),
                (keys::RESP_MESSAGES, json!(1)),
                (keys::RESP_BODY_SIZE, json!(12)),
                (keys::MALFORMED, json!(0)),
            ],
        ),
    ];
    for (name, exchange, want) in cases {
        println!("{name}");
        expect(&exchange.run(map()), &want);
    }
}

#[test]
fn large_message_is_skipped_not_read() {
    const SIZE: usize = 16 << 20;
    let (mut call, mut host) = grpc_started(false, Some(0));
    // The message arrives in 1 MiB chunks; the first carries the prefix.
    let mut body = encode_frame(0, &[]);
    body[1..5].copy_from_slice(&(SIZE as u32).to_be_bytes());
    body.resize(5 + SIZE, 0xAB);
    for (i, chunk) in body.chunks(1 << 20).enumerate() {
        let last = (i + 1) * (1 << 20) >= body.len();
        request_chunk(&mut call, &mut host, Some(chunk), chunk.len(), last);
    }
    let r = call.record(None);
    let f = r.frames.unwrap().request;
    assert_eq!(f.messages, 1);
    assert_eq!(f.message_bytes, SIZE as u64);
    assert_eq!((f.message_min, f.message_max), (SIZE as u32, SIZE as u32));
    assert_eq!(f.framing_bytes, 5);
    assert_eq!(r.req_body_bytes, (SIZE + 5) as u64);
    assert!(!r.malformed);
    assert_eq!(
        host.calls.body_reads, 1,
        "only the chunk with the prefix is read"
    );
    assert!(
        host.calls.body_bytes <= 256,
        "read {} bytes",
        host.calls.body_bytes
    );
}

#[test]
fn small_messages_are_read_in_growing_windows() {
    let (mut call, mut host) = grpc_started(false, Some(0));
    let body: Vec<u8> = (0..10_000u32)
        .flat_map(|i| encode_frame(0, &[i as u8; 19]))
        .collect();
    request_chunk(&mut call, &mut host, Some(&body), body.len(), true);
    let f = call.record(None).frames.unwrap().request;
    assert_eq!(f.messages, 10_000);
    // 256 B doubling to the 16 KiB window, then 16 KiB reads; the tail of a
    // payload cut by a window's end is skipped, not read.
    let HostCalls {
        body_reads,
        body_bytes,
        ..
    } = host.calls;
    assert!(
        body_reads <= 22,
        "{body_reads} reads of a 240 KB chunk of 24-byte frames"
    );
    assert!(body_bytes > body.len() - 19 * body_reads);
}

#[test]
fn grpc_body_ending_mid_frame_is_malformed() {
    let (mut call, mut host) = grpc_started(false, Some(0));
    let body = encode_frame(0, b"hello");
    request_chunk(&mut call, &mut host, Some(&body[..7]), 7, true);
    let r = call.record(None);
    assert!(r.malformed);
    // The incomplete frame counts nowhere.
    assert_eq!(
        r.frames.unwrap().request,
        FrameStats {
            total_bytes: 7,
            ..Default::default()
        }
    );
}

#[test]
fn aborted_stream_publishes_in_log_phase() {
    let (mut call, mut host) = grpc_started(false, Some(1_000_000));
    let body = encode_frame(0, b"hello");
    // Reset mid-frame: not end of stream, so not malformed.
    assert_eq!(
        request_chunk(&mut call, &mut host, Some(&body[..4]), 4, false),
        0
    );
    assert!(!call.response_complete());
    // The log phase reads the clock: the end of a call that never completed.
    host.now = Some(5_000_000);
    let clock = host.calls.clock;
    call.on_log(&mut host);
    assert_eq!(host.calls.clock, clock + 1);
    assert_eq!(host.calls.publications, 1);
    let r = call.record(Some(5_000_000));
    let mut published = String::new();
    r.write_published(&mut published);
    assert_eq!(host.published, [published]);
    assert_eq!(r.duration_us, Some(4000));
    assert_eq!(r.ttfb_us, None);
    assert_eq!(r.request_duration_us, None);
    assert!(!r.malformed);
    assert_eq!(r.frames.unwrap().request.messages, 0);
    assert_eq!(r.req_body_bytes, 4);
    assert_eq!(
        r.to_json(),
        r#"{"wirelens.protocol":"grpc","wirelens.operation":"hello.SayHello","rpc.service":"wirelens.v1.Hello","rpc.method":"SayHello","wirelens.streaming":"unary","wirelens.request.header.size":116,"wirelens.response.header.size":0,"wirelens.response.trailer.size":0,"http.request.body.size":4,"http.response.body.size":0,"wirelens.request.messages":0,"wirelens.response.messages":0,"wirelens.request.message.bytes":0,"wirelens.response.message.bytes":0,"wirelens.request.framing.bytes":0,"wirelens.response.framing.bytes":0,"wirelens.request.compressed_messages":0,"wirelens.response.compressed_messages":0,"wirelens.duration_us":4000,"wirelens.malformed":0}"#
    );
    // A second log phase publishes nothing more, and reads nothing.
    let before = host.calls;
    call.on_log(&mut host);
    assert_eq!(host.calls, before);

    // No request headers at all: nothing to publish.
    let mut call = Call::new(map());
    let mut host = MemoryHost::default();
    call.on_log(&mut host);
    assert_eq!(host.calls.publications, 0);
    assert!(!call.published());
}

#[test]
fn host_read_failure_marks_malformed_and_stops_reading() {
    let (mut call, mut host) = grpc_started(false, Some(0));
    request_chunk(&mut call, &mut host, None, 10, false);
    host.now = Some(1000);
    request_chunk(&mut call, &mut host, None, 10, true);
    assert_eq!(host.calls.body_reads, 1);
    let r = call.record(None);
    assert!(r.malformed);
    assert_eq!(r.req_body_bytes, 20);
    assert_eq!(r.request_duration_us, Some(1));
}

#[test]
fn short_host_buffer_ends_chunk_quietly() {
    // The host may report a body size larger than what it lets us read.
    let (mut call, mut host) = grpc_started(false, Some(0));
    let body = encode_frame(0, b"abc");
    request_chunk(&mut call, &mut host, Some(&body), 100, true);
    let r = call.record(None);
    assert_eq!(r.req_body_bytes, 100);
    assert_eq!(r.frames.unwrap().request.messages, 1);
    assert!(!r.malformed);
}

#[test]
fn events_after_completion_are_ignored_for_publishing() {
    let (mut call, mut host) = grpc_started(true, Some(0));
    host.response_headers = Some(grpc_response_headers());
    host.response_trailers = Some(serialize(&[("grpc-status", "0")]));
    host.now = Some(1000);
    call.on_response_headers(&mut host, false);
    assert_eq!(host.calls.publications, 0);
    host.now = Some(2000);
    call.on_response_trailers(&mut host);
    assert_eq!(host.calls.publications, 1);
    host.now = Some(3000);
    call.on_response_trailers(&mut host);
    host.now = Some(4000);
    host.response_body = Some(Vec::new());
    call.on_response_body(&mut host, 0, true);
    call.on_log(&mut host);
    assert_eq!(host.calls.publications, 1);
    assert_eq!(call.record(Some(99_000)).duration_us, Some(2));
}

#[test]
fn grpc_response_headers_are_sized_when_trailers_follow() {
    // (trailers, copied, status): trailers confirm a gRPC response either
    // way, so the sized headers are never copied.
    let long: Pairs = &[("grpc-status", "0"), ("grpc-message", "fine, thanks")];
    let cases: [(Pairs, bool, Option<u32>); 2] = [
        (&[("grpc-status", "0")], false, None),
        (long, true, Some(0)),
    ];
    for (trailers, copied, status) in cases {
        let (mut call, mut host) = grpc_started(true, Some(1_000_000));
        assert!(!call.response_headers_need_entries(false));
        // Trailers-only: grpc-status is in the headers, so they are read.
        assert!(call.response_headers_need_entries(true));
        host.response_headers = Some(grpc_response_headers());
        host.response_trailers = Some(serialize(trailers));
        host.now = Some(2_000_000);
        call.on_response_headers(&mut host, false);
        assert_eq!((host.calls.map_copies, host.calls.map_sizes), (1, 1));
        let body = encode_frame(0, b"hi");
        host.response_body = Some(body.clone());
        call.on_response_body(&mut host, body.len(), false);
        assert_eq!(host.calls.body_reads, 1);
        host.now = Some(3_000_000);
        call.on_response_trailers(&mut host);
        assert_eq!(
            host.calls.publications, 1,
            "trailers make the response gRPC"
        );
        call.on_log(&mut host);
        assert_eq!(
            (host.calls.map_copies, host.calls.map_sizes),
            (1 + usize::from(copied), 2)
        );
        let r = call.record(None);
        assert_eq!(r.resp_header_bytes, 38);
        assert_eq!(r.grpc_status, status);
        assert_eq!(r.frames.unwrap().response.messages, 1);
        assert!(!r.malformed);
    }
}

#[test]
fn deferred_headers_are_ignored_once_trailers_arrived() {
    let (mut call, mut host) = grpc_started(true, Some(1_000_000));
    // Headers that would say "not gRPC, status 2", were they read.
    host.response_headers = Some(serialize(&[
        ("content-type", "text/html"),
        ("grpc-status", "2"),
    ]));
    host.response_trailers = Some(serialize(&[
        ("grpc-status", "0"),
        ("grpc-message", "fine, thanks"),
    ]));
    call.on_response_headers(&mut host, false);
    let body = encode_frame(0, b"hi");
    host.response_body = Some(body.clone());
    call.on_response_body(&mut host, body.len(), false);
    call.on_response_trailers(&mut host);
    call.on_log(&mut host);
    // The request map and the trailers: the headers were only sized.
    assert_eq!(host.calls.map_copies, 2);
    let r = call.record(None);
    assert_eq!(r.grpc_status, Some(0));
    assert_eq!(r.frames.unwrap().response.messages, 1);
}

/// Native gRPC trailers too small to carry a status and a non-empty
/// `grpc-message` (an OK call's) are only sized: the record leaves the
/// status to Envoy's `%GRPC_STATUS%`. Larger ones are read as before
/// (golden_grpc).
#[test]
fn native_grpc_trailers_are_read_only_when_they_can_carry_a_message() {
    let resp_headers: Pairs = &[(":status", "200"), ("content-type", "application/grpc")];
    let ok: Pairs = &[("grpc-status", "0")];
    let exchange = Exchange {
        req_headers: GRPC_REQ,
        req_chunks: vec![grpc_request_body()],
        resp_headers,
        resp_chunks: vec![encode_frame(0, b"hi")],
        resp_trailers: Some(ok),
        window: 16 * 1024,
    };
    let call = exchange.run(map());
    absent(&call, &[keys::GRPC_STATUS]);
    expect(
        &call,
        &[
            (keys::RESP_TRAILER_SIZE, json!(hbytes(ok))),
            (keys::RESP_MESSAGES, json!(1)),
            (keys::MALFORMED, json!(0)),
        ],
    );
    // Native gRPC trailers of at most 24 bytes are only sized: a short
    // non-numeric status is Envoy's to read (%GRPC_STATUS%), not flagged.
    assert!(!call.response_trailers_need_entries(hbytes(&[("grpc-status", "OK")])));
    // grpc-go's OK trailers: `grpc-status: 0` and an empty `grpc-message`.
    assert!(!call.response_trailers_need_entries(24));
    // `grpc-status: 5`, `grpc-message: x`.
    assert!(call.response_trailers_need_entries(25));
    // Publishing no grpc-message: never read.
    let silent = Options::default().with_fields(Fields::ALL.without(Fields::GRPC_MESSAGE));
    let call = exchange.run_with(map(), silent);
    assert!(!call.response_trailers_need_entries(4096));
    // Every other protocol reads them (gRPC-Web's are in the body anyway).
    let mut rest = Call::new(map());
    let mut host = MemoryHost {
        request_headers: Some(serialize(&[(":method", "GET"), (":path", "/v1/hello")])),
        response_trailers: Some(serialize(&[("grpc-status", "0")])),
        ..MemoryHost::default()
    };
    rest.on_request_headers(&mut host, true);
    assert!(rest.response_trailers_need_entries(12));
    rest.on_response_trailers(&mut host);
    assert_eq!((host.calls.map_copies, host.calls.map_sizes), (2, 1));
}
