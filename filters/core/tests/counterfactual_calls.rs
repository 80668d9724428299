//! The counterfactual through whole calls (issue 27, item 2): the real
//! operation map (`services/gen/wirelens/opmap/opmap.json`, with its
//! descriptors), calls driven as the adapter drives them, and the
//! published record's counterfactual keys.

use serde_json::{Map, Value};
use std::sync::Arc;
use wirelens_core::config::Options;
use wirelens_core::frame::encode_frame;
use wirelens_core::headers::serialize;
use wirelens_core::names::wire;
use wirelens_core::{Call, Config, MemoryHost, OpMap};

fn config() -> Config {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../services/gen/wirelens/opmap/opmap.json"
    );
    Config::from_json(&std::fs::read(path).unwrap())
        .expect("the generated map configures the filter")
}

struct Exchange<'a> {
    req_headers: &'a [(&'a str, &'a str)],
    req_body: Vec<u8>,
    resp_headers: &'a [(&'a str, &'a str)],
    resp_body: Vec<u8>,
    trailers: Option<&'a [(&'a str, &'a str)]>,
}

impl Exchange<'_> {
    /// The published record (short names), the call sampled for the
    /// counterfactual or not; bodies in `chunk`-byte pieces.
    fn run(
        &self,
        map: Arc<OpMap>,
        options: Options,
        sampled: bool,
        chunk: usize,
    ) -> Map<String, Value> {
        let opmap = Arc::clone(&map);
        let mut call = Call::new(map)
            .with_options(options)
            .with_counterfactual(sampled);
        let mut host = MemoryHost {
            now: Some(1_000_000),
            request_headers: Some(serialize(self.req_headers)),
            response_headers: Some(serialize(self.resp_headers)),
            response_trailers: self.trailers.map(serialize),
            ..MemoryHost::default()
        };
        call.on_request_headers(&mut host, self.req_body.is_empty());
        let pieces: Vec<&[u8]> = self.req_body.chunks(chunk.max(1)).collect();
        for (i, p) in pieces.iter().enumerate() {
            host.request_body = Some(p.to_vec());
            call.on_request_body(&mut host, p.len(), i + 1 == pieces.len());
        }
        let headers_only = self.resp_body.is_empty() && self.trailers.is_none();
        call.on_response_headers(&mut host, headers_only);
        let pieces: Vec<&[u8]> = self.resp_body.chunks(chunk.max(1)).collect();
        for (i, p) in pieces.iter().enumerate() {
            host.response_body = Some(p.to_vec());
            let last = i + 1 == pieces.len() && self.trailers.is_none();
            call.on_response_body(&mut host, p.len(), last);
        }
        if self.trailers.is_some() {
            call.on_response_trailers(&mut host);
        }
        call.on_log(&mut host);
        assert_eq!(host.published.len(), 1);
        wirelens_core::record::decode_published(&host.published[0], &opmap)
    }
}

fn pb_string(field: u8, s: &str) -> Vec<u8> {
    let mut out = vec![field << 3 | 2, s.len() as u8];
    out.extend_from_slice(s.as_bytes());
    out
}

fn grpc_body(messages: &[Vec<u8>]) -> Vec<u8> {
    messages.iter().flat_map(|m| encode_frame(0, m)).collect()
}

fn num(r: &Map<String, Value>, k: &str) -> Option<u64> {
    r.get(k).and_then(Value::as_u64)
}

const GRPC_REQ: &[(&str, &str)] = &[
    (":method", "POST"),
    (":path", "/wirelens.v1.Hello/SayHello"),
    ("content-type", "application/grpc"),
];
const GRPC_RESP: &[(&str, &str)] = &[(":status", "200"), ("content-type", "application/grpc")];
const GRPC_OK: &[(&str, &str)] = &[("grpc-status", "0")];

#[test]
fn rest_and_grpc_twins_agree_both_ways() {
    let map = Arc::new(config().map);
    let opts = Options::default().with_counterfactual_rate(1.0);
    // The same logical call: HelloRequest{name:"world"} -> HelloReply{message:"Hello, world"}.
    let req_json = br#"{"name":"world"}"#.to_vec();
    let resp_json = br#"{"message":"Hello, world"}"#.to_vec();
    let req_pb = pb_string(1, "world");
    let resp_pb = pb_string(1, "Hello, world");
    for chunk in [1, 3, 1000] {
        let rest = Exchange {
            req_headers: &[
                (":method", "POST"),
                (":path", "/v1/hello"),
                ("content-type", "application/json"),
            ],
            req_body: req_json.clone(),
            resp_headers: &[(":status", "200"), ("content-type", "application/json")],
            resp_body: resp_json.clone(),
            trailers: None,
        }
        .run(Arc::clone(&map), opts, true, chunk);
        assert_eq!(rest[wire::COUNTERFACTUAL_REASON], "ok", "{rest:?}");
        assert_eq!(
            num(&rest, wire::COUNTERFACTUAL_REQ_PROTO_SIZE),
            Some(req_pb.len() as u64)
        );
        assert_eq!(
            num(&rest, wire::COUNTERFACTUAL_RESP_PROTO_SIZE),
            Some(resp_pb.len() as u64)
        );
        assert!(!rest.contains_key(wire::COUNTERFACTUAL_REQ_JSON_SIZE));

        let grpc = Exchange {
            req_headers: GRPC_REQ,
            req_body: grpc_body(std::slice::from_ref(&req_pb)),
            resp_headers: GRPC_RESP,
            resp_body: grpc_body(std::slice::from_ref(&resp_pb)),
            trailers: Some(GRPC_OK),
        }
        .run(Arc::clone(&map), opts, true, chunk);
        assert_eq!(grpc[wire::COUNTERFACTUAL_REASON], "ok", "{grpc:?}");
        assert_eq!(
            num(&grpc, wire::COUNTERFACTUAL_REQ_JSON_SIZE),
            Some(req_json.len() as u64)
        );
        assert_eq!(
            num(&grpc, wire::COUNTERFACTUAL_RESP_JSON_SIZE),
            Some(resp_json.len() as u64)
        );
        assert!(
            !grpc.contains_key(wire::COUNTERFACTUAL_RATE),
            "a rate below 1 only"
        );
    }
}

#[test]
fn path_and_query_bind_into_the_grpc_message() {
    let map = Arc::new(config().map);
    // GET /v1/products/{id}: GetProductRequest{id: 42} is 2 bytes; a GET has no JSON body.
    let rest = Exchange {
        req_headers: &[(":method", "GET"), (":path", "/v1/products/42")],
        req_body: Vec::new(),
        resp_headers: &[(":status", "200"), ("content-type", "application/json")],
        resp_body: br#"{"id":42,"name":"x"}"#.to_vec(),
        trailers: None,
    }
    .run(Arc::clone(&map), Options::default(), true, 64);
    assert_eq!(rest[wire::COUNTERFACTUAL_REASON], "ok");
    assert_eq!(num(&rest, wire::COUNTERFACTUAL_REQ_PROTO_SIZE), Some(2));
    assert_eq!(
        num(&rest, wire::COUNTERFACTUAL_RESP_PROTO_SIZE),
        Some(2 + 3)
    );
    // GET /v1/echo?content=a%20b+c: EchoRequest{content:"a b c"}.
    let rest = Exchange {
        req_headers: &[(":method", "GET"), (":path", "/v1/echo?content=a%20b+c")],
        req_body: Vec::new(),
        resp_headers: &[(":status", "200"), ("content-type", "application/json")],
        resp_body: br#"{"content":"a b c"}"#.to_vec(),
        trailers: None,
    }
    .run(Arc::clone(&map), Options::default(), true, 64);
    assert_eq!(num(&rest, wire::COUNTERFACTUAL_REQ_PROTO_SIZE), Some(7));
    // Its gRPC twin: the REST request would carry no body at all.
    let grpc = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/wirelens.v1.Echo/Unary"),
            ("content-type", "application/grpc"),
        ],
        req_body: grpc_body(&[pb_string(1, "a b c")]),
        resp_headers: GRPC_RESP,
        resp_body: grpc_body(&[pb_string(1, "a b c")]),
        trailers: Some(GRPC_OK),
    }
    .run(Arc::clone(&map), Options::default(), true, 64);
    assert_eq!(num(&grpc, wire::COUNTERFACTUAL_REQ_JSON_SIZE), Some(0));
    assert_eq!(num(&grpc, wire::COUNTERFACTUAL_RESP_JSON_SIZE), Some(19));
    // An unknown query parameter does not match the message.
    let rest = Exchange {
        req_headers: &[(":method", "GET"), (":path", "/v1/echo?nosuch=1")],
        req_body: Vec::new(),
        resp_headers: &[(":status", "200"), ("content-type", "application/json")],
        resp_body: b"{}".to_vec(),
        trailers: None,
    }
    .run(map, Options::default(), true, 64);
    assert_eq!(rest[wire::COUNTERFACTUAL_REASON], "mismatch");
}

#[test]
fn reasons_without_an_estimate() {
    let map = Arc::new(config().map);
    let reason = |x: &Exchange, options: Options| {
        let r = x.run(Arc::clone(&map), options, true, 7);
        assert!(!r.contains_key(wire::COUNTERFACTUAL_REQ_JSON_SIZE), "{r:?}");
        assert!(
            !r.contains_key(wire::COUNTERFACTUAL_REQ_PROTO_SIZE),
            "{r:?}"
        );
        r[wire::COUNTERFACTUAL_REASON].as_str().unwrap().to_string()
    };
    let ok_grpc = |req: Vec<u8>, trailers| Exchange {
        req_headers: GRPC_REQ,
        req_body: req,
        resp_headers: GRPC_RESP,
        resp_body: grpc_body(&[pb_string(1, "hi")]),
        trailers: Some(trailers),
    };
    let hello = grpc_body(&[pb_string(1, "world")]);
    assert_eq!(
        reason(
            &ok_grpc(hello.clone(), &[("grpc-status", "13")]),
            Options::default()
        ),
        "not_ok"
    );
    let compressed = encode_frame(1, &pb_string(1, "world"));
    assert_eq!(
        reason(&ok_grpc(compressed, GRPC_OK), Options::default()),
        "compressed"
    );
    assert_eq!(
        reason(
            &ok_grpc(hello.clone(), GRPC_OK),
            Options::default().with_counterfactual_max_bytes(4)
        ),
        "too_large"
    );
    assert_eq!(
        reason(
            &ok_grpc(grpc_body(&[vec![0xff, 0xff]]), GRPC_OK),
            Options::default()
        ),
        "mismatch"
    );
    let unknown = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/nowhere"),
            ("content-type", "application/json"),
        ],
        req_body: b"{}".to_vec(),
        resp_headers: &[(":status", "404")],
        resp_body: Vec::new(),
        trailers: None,
    };
    assert_eq!(reason(&unknown, Options::default()), "no_schema");
    let gzip_rest = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/v1/hello"),
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ],
        req_body: vec![0x1f, 0x8b, 0],
        resp_headers: &[(":status", "200"), ("content-type", "application/json")],
        resp_body: b"{}".to_vec(),
        trailers: None,
    };
    assert_eq!(reason(&gzip_rest, Options::default()), "compressed");
}

#[test]
fn unsampled_calls_carry_no_counterfactual_and_read_no_rest_body() {
    let map = Arc::new(config().map);
    let x = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/v1/hello"),
            ("content-type", "application/json"),
        ],
        req_body: br#"{"name":"world"}"#.to_vec(),
        resp_headers: &[(":status", "200"), ("content-type", "application/json")],
        resp_body: br#"{"message":"Hello, world"}"#.to_vec(),
        trailers: None,
    };
    let r = x.run(Arc::clone(&map), Options::default(), false, 4);
    assert!(r.keys().all(|k| !k.starts_with('c')), "{r:?}");
    // A rate below 1 is published with the estimate.
    let r = x.run(
        map,
        Options::default().with_counterfactual_rate(0.25),
        true,
        4,
    );
    assert_eq!(r[wire::COUNTERFACTUAL_RATE], 0.25);
}

#[test]
fn streams_sum_their_messages_and_web_text_decodes() {
    let map = Arc::new(config().map);
    // Echo.ServerStream: EchoStreamRequest{content:"ab", count:3} -> 3 x EchoReply{content:"ab"}.
    let req = {
        let mut m = pb_string(1, "ab");
        m.extend_from_slice(&[0x10, 3]);
        m
    };
    let replies = vec![pb_string(1, "ab"); 3];
    let x = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/wirelens.v1.Echo/ServerStream"),
            ("content-type", "application/grpc-web-text"),
        ],
        req_body: b64(&grpc_body(&[req])).into_bytes(),
        resp_headers: &[
            (":status", "200"),
            ("content-type", "application/grpc-web-text"),
        ],
        resp_body: {
            let mut body = grpc_body(&replies);
            let trailer = b"grpc-status:0\r\n";
            body.push(0x80);
            body.extend_from_slice(&(trailer.len() as u32).to_be_bytes());
            body.extend_from_slice(trailer);
            b64(&body).into_bytes()
        },
        trailers: None,
    };
    for chunk in [1, 5, 4096] {
        let r = x.run(Arc::clone(&map), Options::default(), true, chunk);
        assert_eq!(r[wire::COUNTERFACTUAL_REASON], "ok", "{r:?}");
        // No REST route: the whole message, {"content":"ab","count":3}.
        assert_eq!(num(&r, wire::COUNTERFACTUAL_REQ_JSON_SIZE), Some(26));
        // {"content":"ab"} three times.
        assert_eq!(num(&r, wire::COUNTERFACTUAL_RESP_JSON_SIZE), Some(3 * 16));
    }
}

fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[test]
fn rest_with_protobuf_bodies_gets_both_sizes() {
    let map = Arc::new(config().map);
    let opts = Options::default().with_counterfactual_rate(1.0);
    // GET with the protobuf media type: no body, the message is in the URL.
    let get = Exchange {
        req_headers: &[
            (":method", "GET"),
            (":path", "/v1/echo?content=a%20b+c"),
            ("content-type", "application/protobuf"),
            ("accept", "application/protobuf"),
        ],
        req_body: Vec::new(),
        resp_headers: &[(":status", "200"), ("content-type", "application/protobuf")],
        resp_body: pb_string(1, "a b c"),
        trailers: None,
    }
    .run(Arc::clone(&map), opts, true, 3);
    assert_eq!(get[wire::COUNTERFACTUAL_REASON], "ok", "{get:?}");
    assert_eq!(num(&get, wire::COUNTERFACTUAL_REQ_PROTO_SIZE), Some(7));
    assert_eq!(num(&get, wire::COUNTERFACTUAL_REQ_JSON_SIZE), Some(0));
    assert_eq!(num(&get, wire::COUNTERFACTUAL_RESP_JSON_SIZE), Some(19));
    assert!(!get.contains_key(wire::COUNTERFACTUAL_RESP_PROTO_SIZE));
    // POST of the whole message as protobuf: the same bytes as gRPC's, and the JSON twin.
    let post = Exchange {
        req_headers: &[
            (":method", "POST"),
            (":path", "/v1/hello"),
            ("content-type", "application/x-protobuf"),
            ("accept", "application/x-protobuf"),
        ],
        req_body: pb_string(1, "world"),
        resp_headers: &[
            (":status", "200"),
            ("content-type", "application/x-protobuf"),
        ],
        resp_body: pb_string(1, "Hello, world"),
        trailers: None,
    }
    .run(map, opts, true, 2);
    assert_eq!(num(&post, wire::COUNTERFACTUAL_REQ_PROTO_SIZE), Some(7));
    assert_eq!(num(&post, wire::COUNTERFACTUAL_REQ_JSON_SIZE), Some(16));
    assert_eq!(num(&post, wire::COUNTERFACTUAL_RESP_JSON_SIZE), Some(26));
}
