//! The counterfactual's decoders on any input (issue 27, item 5): bytes as
//! a protobuf message sized as JSON, bytes as JSON sized as protobuf, and
//! bytes as gRPC frames through the bounded capture, against the oracle
//! corpus's schema (`core/tests/counterfactual/vectors.json`: every field
//! kind, recursive and well-known types).
//!
//! Input: byte 0 picks the message type, byte 1 the mode (bit 0: the
//! payload is JSON, else protobuf; bit 1: also fed as frames through a
//! `Capture`), byte 2 the chunk size for the capture, byte 3 its bound;
//! the rest is the payload.
//!
//! Checks: never panics; a size, when there is one, stays under a bound
//! linear in the payload (JSON: at most `K` bytes per payload byte plus an
//! object, `K` from the schema's longest name; protobuf: 10 bytes per JSON
//! byte); the capture never holds more than its bound, and chunked feeding
//! gives what whole feeding gives.

use base64::Engine;
use prost_reflect::{DescriptorPool, MessageDescriptor};
use std::sync::OnceLock;
use wirelens_core::counterfactual::capture::Capture;
use wirelens_core::counterfactual::{json_body_size, proto_message_size, BodyField, Reason};

struct Schema {
    messages: Vec<MessageDescriptor>,
    /// JSON bytes one protobuf byte can become, at most.
    per_byte: u64,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../core/tests/counterfactual/vectors.json"))
                .expect("vectors.json");
        let set = base64::engine::general_purpose::STANDARD
            .decode(vectors["descriptor_set"].as_str().expect("descriptor_set"))
            .expect("base64");
        let pool = DescriptorPool::decode(set.as_slice()).expect("the corpus descriptors");
        let messages: Vec<_> = pool.all_messages().filter(|m| !m.is_map_entry()).collect();
        let longest_field = messages
            .iter()
            .flat_map(|m| m.fields())
            .map(|f| f.json_name().len())
            .max()
            .unwrap_or(0);
        let longest_enum = pool
            .all_enums()
            .flat_map(|e| e.values().map(|v| v.name().len()).collect::<Vec<_>>())
            .max()
            .unwrap_or(0);
        // A timestamp with nanoseconds (32 characters from 4 bytes) is the
        // densest value; a name plus quotes, colon and comma the densest key.
        let per_byte = 32.max(longest_field.max(longest_enum) as u64 + 8);
        Schema { messages, per_byte }
    })
}

pub fn check(data: &[u8]) {
    let Some((head, payload)) = data.split_first_chunk::<4>() else {
        return;
    };
    let [pick, mode, chunk, bound] = *head;
    let s = schema();
    let desc = &s.messages[pick as usize % s.messages.len()];
    let json_in = mode & 1 == 1;
    let len = payload.len() as u64;
    if json_in {
        if let Ok(n) = proto_message_size(desc, payload, BodyField::Whole, []) {
            assert!(
                n <= 10 * len + 16,
                "{n} protobuf bytes from {len} JSON bytes"
            );
        }
    } else {
        match json_body_size(desc, payload, BodyField::Whole, &[]) {
            Ok(n) => assert!(
                n <= s.per_byte * (len + 1),
                "{n} JSON bytes from {len} protobuf bytes"
            ),
            Err(r) => assert_eq!(r, Reason::Mismatch),
        }
    }
    if mode & 2 == 2 {
        let max = bound as usize * 4;
        let size = |m: &[u8]| json_body_size(desc, m, BodyField::Whole, &[]);
        let run = |chunk: usize| {
            let mut c = Capture::frames(max);
            let mut each = |m: &[u8]| {
                assert!(
                    m.len() <= max,
                    "a message of {} over the bound {max}",
                    m.len()
                );
                size(m)
            };
            for piece in payload.chunks(chunk) {
                c.feed(piece, &mut each);
                assert!(c.held() <= max, "capture holds {} over {max}", c.held());
            }
            (c.finish(&mut each), c.messages())
        };
        assert_eq!(run(chunk.max(1) as usize), run(payload.len().max(1)));
    }
}
