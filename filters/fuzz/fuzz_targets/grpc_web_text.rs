//! grpc-web-text: `Base64Decoder` feeding a `FrameParser`, as the filter
//! reads a grpc-web-text body.
//!
//! Input: `[mode] [n] [n control bytes] [body...]` (`n` mod 32).
//! * mode bit 0 clear: `body` is the base64 text itself (mostly invalid).
//! * mode bit 0 set: `body` is the binary frame stream; it is base64-encoded
//!   in pieces (control byte `c`: piece of `(c & 0x1f) + 1` bytes, padded
//!   separately; `c & 0x80` adds a CRLF after it; mode bit 1 drops the final
//!   padding) and must decode back to exactly `body`, not malformed.
//!
//! The text is decoded twice, whole and in chunks of `c & 0x3f` bytes
//! (cycled control bytes), each straight into a frame parser. Checks: never
//! panics; both runs give the same decoded bytes, malformed flags and parser
//! state, equal to the parser fed the decoded bytes at once; the sink never
//! gets an empty slice; at most 3 characters are pending between calls.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelens_core::base64::Base64Decoder;
use wirelens_core::frame::{FrameParser, FrameStats, GrpcTrailer};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn encode(data: &[u8], pad: bool, out: &mut Vec<u8>) {
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        let chars = c.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]);
            } else if pad {
                out.push(b'=');
            }
        }
    }
}

#[derive(Debug, PartialEq)]
struct Run {
    decoded: Vec<u8>,
    b64_malformed: bool,
    stats: FrameStats,
    trailer: Option<GrpcTrailer>,
    frames_malformed: bool,
}

/// Decodes `text` in pieces of the given sizes (the rest at once), as the
/// filter does: decoded bytes go straight into the frame parser.
fn run(text: &[u8], sizes: impl Iterator<Item = usize>) -> Run {
    let mut dec = Base64Decoder::new();
    let mut frames = FrameParser::new();
    let mut decoded = Vec::new();
    let mut sink = |d: &[u8]| {
        assert!(!d.is_empty(), "empty sink call");
        decoded.extend_from_slice(d);
        frames.feed(d);
    };
    let mut rest = text;
    for k in sizes {
        if rest.is_empty() {
            break;
        }
        let (now, later) = rest.split_at(k.min(rest.len()));
        dec.decode(now, &mut sink);
        assert!(dec.pending_chars() <= 3);
        rest = later;
    }
    dec.decode(rest, &mut sink);
    dec.finish(&mut sink);
    assert!(dec.is_malformed() || dec.pending_chars() == 0);
    assert_eq!(dec.decoded_len(), decoded.len() as u64);
    frames.finish();
    Run {
        decoded,
        b64_malformed: dec.is_malformed(),
        stats: frames.stats(),
        trailer: frames.take_trailer(),
        frames_malformed: frames.is_malformed(),
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, n, rest @ ..] = data else {
        return;
    };
    let (ctl, body) = rest.split_at((*n as usize % 32).min(rest.len()));

    let encoded;
    let text: &[u8] = if mode & 1 == 0 {
        body
    } else {
        let mut t = Vec::with_capacity(body.len() * 2);
        let mut left = body;
        let mut i = 0;
        while !left.is_empty() {
            let c = if ctl.is_empty() {
                0x1f
            } else {
                ctl[i % ctl.len()]
            };
            i += 1;
            let (piece, later) = left.split_at(((c & 0x1f) as usize + 1).min(left.len()));
            encode(piece, !(later.is_empty() && mode & 2 != 0), &mut t);
            if c & 0x80 != 0 {
                t.extend_from_slice(b"\r\n");
            }
            left = later;
        }
        encoded = t;
        &encoded
    };

    let whole = run(text, std::iter::empty());
    let sizes = ctl.iter().map(|&c| (c & 0x3f) as usize).cycle();
    let chunked = run(text, sizes.take(if ctl.is_empty() { 0 } else { 8192 }));
    assert_eq!(whole, chunked, "whole vs chunked decoding");

    let mut direct = FrameParser::new();
    direct.feed(&whole.decoded);
    direct.finish();
    assert_eq!(direct.stats(), whole.stats);
    assert_eq!(direct.take_trailer(), whole.trailer);
    assert_eq!(direct.is_malformed(), whole.frames_malformed);

    if mode & 1 != 0 {
        assert!(!whole.b64_malformed, "valid base64 reported malformed");
        assert_eq!(whole.decoded, body, "base64 round trip");
    }
});
