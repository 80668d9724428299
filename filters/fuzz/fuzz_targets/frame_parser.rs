//! Arbitrary bytes through `FrameParser`, fed in chunks and with `skip()`.
//!
//! Input: `[n] [n control bytes] [stream...]` (`n` taken mod 32). Each
//! control byte `c` (cycled) is one step: `len = c & 0x3f`, `c >> 6`:
//! 0 feed `len` bytes; 1 feed `len` bytes then skip all it allows;
//! 2 skip up to `16 * len` bytes then feed `len`; 3 feed `64 * (len + 1)`.
//! Whatever is left is fed at once; `n == 0` feeds the whole stream.
//!
//! Checks: never panics; the chunked/skipping run ends in exactly the state
//! of feeding the whole stream at once (stats, trailer, malformed, boundary);
//! that agrees with a naive whole-buffer frame walk (complete frames counted,
//! `total_bytes == message_bytes + framing_bytes` at a frame boundary).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelens_core::frame::{
    parse_trailer_block, FrameParser, FrameStats, GrpcTrailer, TRAILER_FLAG,
};

type Outcome = (FrameStats, Option<GrpcTrailer>, bool, bool);

fn end(mut p: FrameParser) -> Outcome {
    let boundary = p.at_frame_boundary();
    p.finish();
    (p.stats(), p.take_trailer(), p.is_malformed(), boundary)
}

/// Naive model: walk the complete buffer frame by frame. Only complete
/// frames are counted (payload lengths as declared); `total_bytes` is all.
fn model(s: &[u8]) -> Outcome {
    let mut st = FrameStats {
        total_bytes: s.len() as u64,
        ..FrameStats::default()
    };
    let (mut trailer, mut bad, mut pos) = (None, false, 0usize);
    while s.len() - pos >= 5 {
        let flags = s[pos];
        let len = u32::from_be_bytes(s[pos + 1..pos + 5].try_into().unwrap());
        let body = &s[pos + 5..];
        if body.len() < len as usize {
            break; // ends inside the payload
        }
        let body = &body[..len as usize];
        if flags & TRAILER_FLAG != 0 {
            st.trailer_frames += 1;
            st.framing_bytes += 5 + len as u64;
            // The whole block at once; the parser under test gets it in chunks.
            match parse_trailer_block(body) {
                Ok(t) => trailer = Some(t),
                Err(()) => bad = true,
            }
        } else {
            st.message_min = if st.messages == 0 {
                len
            } else {
                st.message_min.min(len)
            };
            st.message_max = st.message_max.max(len);
            st.messages += 1;
            st.compressed_messages += (flags & 1) as u64;
            st.message_bytes += len as u64;
            st.framing_bytes += 5;
        }
        pos += 5 + len as usize;
    }
    let boundary = pos == s.len();
    if boundary {
        assert_eq!(st.total_bytes, st.message_bytes + st.framing_bytes);
    }
    (st, trailer, bad || !boundary, boundary)
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (ctl, stream) = rest.split_at((n as usize % 32).min(rest.len()));

    let mut whole = FrameParser::new();
    whole.feed(stream);
    let reference = end(whole);
    assert_eq!(reference, model(stream), "whole feed vs model");

    let mut p = FrameParser::new();
    let mut pos = 0usize;
    let feed = |p: &mut FrameParser, pos: &mut usize, k: usize| {
        let k = k.min(stream.len() - *pos);
        p.feed(&stream[*pos..*pos + k]);
        *pos += k;
    };
    let skip = |p: &mut FrameParser, pos: &mut usize, want: u64| {
        let allowed = p.skippable();
        assert!(allowed == 0 || !p.at_frame_boundary());
        // Only ask for bytes that exist (the whole-stream run fed them); the
        // parser clamps the request to what it allows.
        let k = want.min((stream.len() - *pos) as u64);
        let before = p.stats().total_bytes;
        p.skip(k);
        let done = k.min(allowed);
        assert_eq!(p.stats().total_bytes - before, done, "skip not clamped");
        *pos += done as usize;
    };
    for &c in ctl
        .iter()
        .cycle()
        .take(if ctl.is_empty() { 0 } else { 4096 })
    {
        if pos >= stream.len() {
            break;
        }
        let len = (c & 0x3f) as usize;
        match c >> 6 {
            0 => feed(&mut p, &mut pos, len),
            1 => {
                feed(&mut p, &mut pos, len);
                skip(&mut p, &mut pos, u64::MAX);
            }
            2 => {
                skip(&mut p, &mut pos, 16 * len as u64);
                feed(&mut p, &mut pos, len);
            }
            _ => feed(&mut p, &mut pos, 64 * (len + 1)),
        }
        assert_eq!(p.stats().total_bytes, pos as u64);
    }
    feed(&mut p, &mut pos, usize::MAX);
    assert_eq!(end(p), reference, "chunked/skipped vs whole");
});
