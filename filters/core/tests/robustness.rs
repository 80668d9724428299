//! Arbitrary input never panics (a cheap stand-in until cargo-fuzz lands):
//! random bytes through every parser, and through whole calls with random
//! chunking and read windows.

use std::sync::Arc;
use wirelens_core::base64::Base64Decoder;
use wirelens_core::frame::{encode_frame, parse_trailer_block, FrameParser};
use wirelens_core::headers::{iter_serialized, serialize};
use wirelens_core::{Call, Fields, MemoryHost, OpMap, Options, KEYS};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        let alphabet: &[u8] = match self.below(4) {
            0 => b"AB+/=\r\nxyz09",
            1 => &[0, 0x80, 1, 0xff, b':', b'\r', b'\n', b'g'],
            _ => &[],
        };
        (0..n)
            .map(|_| {
                if alphabet.is_empty() {
                    self.next() as u8
                } else {
                    alphabet[self.below(alphabet.len())]
                }
            })
            .collect()
    }
}

#[test]
fn parsers_survive_random_bytes() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let data = rng.bytes(200);
        let mut p = FrameParser::new();
        let mut d = Base64Decoder::new();
        for piece in data.chunks(rng.below(9) + 1) {
            p.feed(piece);
            let skip = rng.below(50) as u64;
            p.skip(skip);
            d.decode(piece, |_| {});
            assert!(d.pending_chars() <= 3);
        }
        p.finish();
        d.finish(|_| {});
        let _ = parse_trailer_block(&data);
        let _ = iter_serialized(&data).count();
        let _ = OpMap::from_json(&data);
    }
}

#[test]
fn calls_survive_random_bodies() {
    let map = Arc::new(
        OpMap::from_json(br#"{"operations": [{"grpc_path": "/a.B/C", "streaming": "unary"}]}"#)
            .unwrap(),
    );
    let cts = [
        "application/grpc",
        "application/grpc-web",
        "application/grpc-web-text",
        "application/json",
    ];
    let mut rng = Rng(42);
    for round in 0..1500 {
        let ct = cts[round % cts.len()];
        let req = serialize(&[
            (":method", "POST"),
            (":path", "/a.B/C"),
            ("content-type", ct),
        ]);
        let options = Options::default()
            .with_fields(
                Fields::GROUPS[rng.below(5)]
                    .1
                    .union(Fields::GROUPS[rng.below(5)].1),
            )
            .with_rest_transcoded(rng.below(2) == 0)
            .with_sample_rate(if rng.below(2) == 0 { 1.0 } else { 0.5 });
        let mut call = Call::new(Arc::clone(&map))
            .with_read_window(rng.below(64) + 1)
            .with_options(options);
        let message = rng.bytes(30);
        let mut host = MemoryHost {
            now: Some(0),
            tick: 1,
            request_headers: Some(req),
            response_headers: Some(serialize(&[
                (&b":status"[..], &b"200"[..]),
                (b"content-type", ct.as_bytes()),
                (b"grpc-status", b"x"),
                (b"grpc-message", &message),
            ])),
            ..MemoryHost::default()
        };
        call.on_request_headers(&mut host, false);
        let mut body = rng.bytes(300);
        if rng.below(2) == 0 {
            // A trailer frame whose grpc-message is arbitrary bytes.
            let mut block = b"grpc-status:1\r\ngrpc-message:".to_vec();
            block.extend(rng.bytes(40).iter().filter(|&&b| b != b'\n'));
            block.extend_from_slice(b"\r\n");
            body.extend(encode_frame(0x80, &block));
        }
        let chunks: Vec<&[u8]> = body.chunks(rng.below(40) + 1).collect();
        for (i, c) in chunks.iter().enumerate() {
            host.request_body = Some(c.to_vec());
            call.on_request_body(&mut host, c.len(), i + 1 == chunks.len());
        }
        call.on_response_headers(&mut host, false);
        for (i, c) in chunks.iter().enumerate() {
            // Report a larger size than readable now and then.
            let size = c.len() + rng.below(3);
            host.response_body = Some(c.to_vec());
            call.on_response_body(&mut host, size, i + 1 == chunks.len());
        }
        call.on_log(&mut host);
        assert_eq!(host.calls.publications, 1);
        let r = call.record(None);
        assert_eq!(r.req_body_bytes, body.len() as u64);
        // The record is always a JSON object with known keys, published as
        // the record under its short names.
        if call.response_complete() {
            let mut published = String::new();
            r.write_published(&mut published);
            assert_eq!(host.published, [published]);
        }
        let text = r.to_json();
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let obj = v.as_object().unwrap();
        assert!(obj.keys().all(|k| KEYS.contains(&k.as_str())), "{text}");
        assert_eq!(obj["http.request.body.size"], body.len());
    }
}
