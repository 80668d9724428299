//! Streaming parser for gRPC / gRPC-Web length-prefixed frames.
//!
//! A frame is a flag byte, a 4-byte big-endian payload length and the
//! payload. Flag bit 7 clear: a data frame (one gRPC message; bit 0 means
//! compressed). Flag bit 7 set (`0x80`): a gRPC-Web trailer frame whose
//! payload is an HTTP/1-style header block (`grpc-status:0\r\n...`).
//!
//! The parser has constant state: it never buffers message payloads (it only
//! counts them, and the caller may [`FrameParser::skip`] over payload bytes
//! it never read), and keeps at most [`TRAILER_CAPTURE_LIMIT`] bytes of one
//! line of a trailer frame. Input may be split anywhere, including inside the 5-byte
//! prefix.

use crate::percent::{decode_grpc_message, MAX_MESSAGE_LEN};

/// Most bytes of one trailer line that are kept for parsing.
pub const TRAILER_CAPTURE_LIMIT: usize = 1024;

/// Flag bit marking a gRPC-Web trailer frame.
pub const TRAILER_FLAG: u8 = 0x80;

/// Counters of a frame stream.
///
/// Everything but `total_bytes` counts complete frames only, so for a
/// stream that ends at a frame boundary
/// `total_bytes == message_bytes + framing_bytes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameStats {
    /// Completed data frames (messages).
    pub messages: u64,
    /// Completed data frames with the compressed bit (flag bit 0) set.
    pub compressed_messages: u64,
    /// Σ payload length (as declared in the prefix) of completed data frames.
    pub message_bytes: u64,
    /// Smallest payload length of a completed data frame (0 when `messages == 0`).
    pub message_min: u32,
    /// Largest payload length of a completed data frame (0 when `messages == 0`).
    pub message_max: u32,
    /// Bytes of completed frames that are not message payload: 5 per data
    /// frame plus each whole trailer frame (5-byte prefix + payload).
    pub framing_bytes: u64,
    /// Completed trailer frames.
    pub trailer_frames: u64,
    /// Bytes consumed in total (fed + skipped).
    pub total_bytes: u64,
}

/// `grpc-status` / `grpc-message` taken from trailers or a trailer frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GrpcTrailer {
    pub status: Option<u32>,
    /// Decoded (percent-decoding applied), at most 1 KiB.
    pub message: Option<String>,
}

/// Streaming parser of a gRPC-Web trailer block: lines separated by `\r\n`
/// (a bare `\n` is accepted too), each `name:value`, names case-insensitive,
/// blanks around names and values ignored, empty lines skipped.
///
/// It keeps only the current line, cut at [`TRAILER_CAPTURE_LIMIT`] bytes, so
/// `grpc-status` is found wherever it stands in the block (grpc-java sends it
/// after the application's trailers, which can be large) and memory stays
/// constant. A `grpc-message` longer than the limit is cut, not dropped.
#[derive(Clone, Debug, Default)]
pub struct TrailerBlockParser {
    line: Vec<u8>,
    line_cut: bool,
    fields: GrpcTrailer,
    bad: bool,
}

impl TrailerBlockParser {
    /// Starts a new block, keeping the line buffer's allocation.
    pub fn reset(&mut self) {
        if self.line.capacity() == 0 {
            self.line.reserve_exact(TRAILER_CAPTURE_LIMIT);
        }
        self.line.clear();
        self.line_cut = false;
        self.fields = GrpcTrailer::default();
        self.bad = false;
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let (segment, newline) = match data.iter().position(|&b| b == b'\n') {
                Some(i) => (&data[..i], true),
                None => (data, false),
            };
            let room = TRAILER_CAPTURE_LIMIT - self.line.len();
            self.line
                .extend_from_slice(&segment[..room.min(segment.len())]);
            self.line_cut |= segment.len() > room;
            data = &data[segment.len() + newline as usize..];
            if newline {
                self.end_line();
            }
        }
    }

    /// The block's fields; `Err(())` when a line has no `:`, an empty name,
    /// or `grpc-status` is not a decimal number.
    #[allow(clippy::result_unit_err)]
    pub fn finish(&mut self) -> Result<GrpcTrailer, ()> {
        self.end_line();
        if self.bad {
            Err(())
        } else {
            Ok(std::mem::take(&mut self.fields))
        }
    }

    fn end_line(&mut self) {
        let line = trim(&self.line);
        if !line.is_empty() {
            match line.iter().position(|&b| b == b':') {
                Some(colon) if !trim(&line[..colon]).is_empty() => {
                    let name = trim(&line[..colon]);
                    let value = trim(&line[colon + 1..]);
                    if name.eq_ignore_ascii_case(b"grpc-status") {
                        match parse_status(value) {
                            Some(status) if !self.line_cut => self.fields.status = Some(status),
                            _ => self.bad = true,
                        }
                    } else if name.eq_ignore_ascii_case(b"grpc-message") {
                        self.fields.message = Some(decode_grpc_message(value, MAX_MESSAGE_LEN));
                    }
                }
                _ => self.bad = true,
            }
        }
        self.line.clear();
        self.line_cut = false;
    }
}

/// Parses a whole gRPC-Web trailer block (see [`TrailerBlockParser`]).
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::result_unit_err)]
pub fn parse_trailer_block(block: &[u8]) -> Result<GrpcTrailer, ()> {
    let mut parser = TrailerBlockParser::default();
    parser.feed(block);
    parser.finish()
}

/// Parses a `grpc-status` value: ASCII decimal digits, fits in `u32`.
pub fn parse_status(value: &[u8]) -> Option<u32> {
    let value = trim(value);
    if value.is_empty() || value.len() > 10 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (b - b'0') as u64;
    }
    u32::try_from(n).ok()
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = s {
        s = rest;
    }
    s
}

/// Streaming frame parser (constant memory).
#[derive(Clone, Debug, Default)]
pub struct FrameParser {
    prefix: [u8; 5],
    /// Bytes of the current prefix collected (0..5) while not in a payload.
    prefix_len: u8,
    in_payload: bool,
    flags: u8,
    /// Payload bytes left in the current frame.
    remaining: u32,
    /// Payload length declared by the current frame's prefix.
    declared: u32,
    stats: FrameStats,
    /// The current trailer frame's block, parsed as it streams.
    trailer_block: TrailerBlockParser,
    trailer: Option<GrpcTrailer>,
    malformed: bool,
}

impl FrameParser {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn stats(&self) -> FrameStats {
        self.stats
    }

    /// True once a trailer frame failed to parse or the stream ended mid-frame.
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    /// True between frames (nothing of a frame pending).
    pub fn at_frame_boundary(&self) -> bool {
        !self.in_payload && self.prefix_len == 0
    }

    /// The most recent trailer frame's fields, taken (a later trailer frame
    /// replaces an untaken one).
    pub fn take_trailer(&mut self) -> Option<GrpcTrailer> {
        self.trailer.take()
    }

    fn in_trailer_frame(&self) -> bool {
        self.flags & TRAILER_FLAG != 0
    }

    /// Number of upcoming bytes the parser does not need to see: the rest of
    /// the current data frame's payload. The caller may [`skip`](Self::skip)
    /// them instead of feeding them.
    pub fn skippable(&self) -> u64 {
        if self.in_payload && !self.in_trailer_frame() {
            self.remaining as u64
        } else {
            0
        }
    }

    /// Advances over `n` payload bytes without looking at them;
    /// `n` is clamped to [`skippable`](Self::skippable).
    pub fn skip(&mut self, n: u64) {
        let n = n.min(self.skippable());
        if n == 0 {
            return;
        }
        // n <= remaining <= u32::MAX
        self.remaining -= n as u32;
        self.stats.total_bytes += n;
        if self.remaining == 0 {
            self.end_frame();
        }
    }

    /// Consumes bytes of the stream.
    pub fn feed(&mut self, mut data: &[u8]) {
        self.stats.total_bytes += data.len() as u64;
        while !data.is_empty() {
            if self.in_payload {
                let n = (self.remaining as usize).min(data.len());
                if self.in_trailer_frame() {
                    self.trailer_block.feed(&data[..n]);
                }
                self.remaining -= n as u32;
                data = &data[n..];
                if self.remaining == 0 {
                    self.end_frame();
                }
            } else {
                let at = self.prefix_len as usize;
                let n = (5 - at).min(data.len());
                self.prefix[at..at + n].copy_from_slice(&data[..n]);
                self.prefix_len += n as u8;
                data = &data[n..];
                if self.prefix_len == 5 {
                    self.begin_frame();
                }
            }
        }
    }

    fn begin_frame(&mut self) {
        let p = self.prefix;
        self.prefix_len = 0;
        self.flags = p[0];
        self.remaining = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
        self.declared = self.remaining;
        self.in_payload = true;
        if self.in_trailer_frame() {
            self.trailer_block.reset();
        }
        if self.remaining == 0 {
            self.end_frame();
        }
    }

    fn end_frame(&mut self) {
        self.in_payload = false;
        let len = self.declared;
        if self.in_trailer_frame() {
            self.stats.trailer_frames += 1;
            self.stats.framing_bytes += 5 + len as u64;
            match self.trailer_block.finish() {
                Ok(t) => self.trailer = Some(t),
                Err(()) => self.malformed = true,
            }
        } else {
            let st = &mut self.stats;
            if st.messages == 0 {
                st.message_min = len;
                st.message_max = len;
            } else {
                st.message_min = st.message_min.min(len);
                st.message_max = st.message_max.max(len);
            }
            st.messages += 1;
            st.message_bytes += len as u64;
            st.framing_bytes += 5;
            if self.flags & 1 != 0 {
                st.compressed_messages += 1;
            }
        }
        self.flags = 0;
    }

    /// End of the stream: ending inside a frame marks it malformed.
    pub fn finish(&mut self) {
        if !self.at_frame_boundary() {
            self.malformed = true;
        }
    }
}

/// Builds one frame (test and fuzz helper).
#[cfg(any(test, feature = "test-support"))]
pub fn encode_frame(flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + payload.len());
    v.push(flags);
    v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    v.extend_from_slice(payload);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_stream() -> Vec<u8> {
        let mut s = Vec::new();
        s.extend(encode_frame(0, b"hello"));
        s.extend(encode_frame(0, b""));
        s.extend(encode_frame(1, &[0x1f, 0x8b, 1, 2, 3, 4, 5, 6]));
        s.extend(encode_frame(0, &[7u8; 300]));
        s.extend(encode_frame(0, b""));
        s.extend(encode_frame(
            0x80,
            b"grpc-status:3\r\ngrpc-message:bad%20thing\r\n",
        ));
        s
    }

    fn run(pieces: &[&[u8]]) -> (FrameStats, Option<GrpcTrailer>, bool) {
        let mut p = FrameParser::new();
        for piece in pieces {
            p.feed(piece);
        }
        p.finish();
        let t = p.take_trailer();
        (p.stats(), t, p.is_malformed())
    }

    #[test]
    fn whole_stream() {
        let s = sample_stream();
        let (stats, trailer, bad) = run(&[&s]);
        assert!(!bad);
        assert_eq!(stats.messages, 5);
        assert_eq!(stats.compressed_messages, 1);
        assert_eq!(stats.message_bytes, 5 + 8 + 300);
        assert_eq!(stats.message_min, 0);
        assert_eq!(stats.message_max, 300);
        let trailer_len = 5 + "grpc-status:3\r\ngrpc-message:bad%20thing\r\n".len() as u64;
        assert_eq!(stats.framing_bytes, 5 * 5 + trailer_len);
        assert_eq!(stats.trailer_frames, 1);
        assert_eq!(stats.total_bytes, s.len() as u64);
        assert_eq!(stats.total_bytes, stats.message_bytes + stats.framing_bytes);
        let t = trailer.unwrap();
        assert_eq!(t.status, Some(3));
        assert_eq!(t.message.as_deref(), Some("bad thing"));
    }

    #[test]
    fn every_split_and_byte_at_a_time() {
        let s = sample_stream();
        let reference = run(&[&s]);
        for i in 0..=s.len() {
            assert_eq!(run(&[&s[..i], &s[i..]]), reference, "split at {i}");
        }
        for i in 0..=s.len() {
            for j in i..=s.len() {
                assert_eq!(
                    run(&[&s[..i], &s[i..j], &s[j..]]),
                    reference,
                    "split {i} {j}"
                );
            }
        }
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(run(&bytes), reference);
    }

    #[test]
    fn large_message_declared_and_skipped() {
        const SIZE: usize = 16 << 20;
        let mut p = FrameParser::new();
        let mut prefix = vec![0u8];
        prefix.extend_from_slice(&(SIZE as u32).to_be_bytes());
        // Prefix split inside, then a bit of payload, then skip the rest in chunks.
        p.feed(&prefix[..2]);
        p.feed(&prefix[2..]);
        assert_eq!(p.skippable(), SIZE as u64);
        p.feed(&[9u8; 1000]);
        let chunk = 64 * 1024u64;
        let mut left = (SIZE - 1000) as u64;
        while left > 0 {
            let n = left.min(chunk);
            if left % 3 == 0 {
                p.skip(n);
            } else {
                // feed a few bytes from a reused buffer, skip the rest
                p.feed(&[1u8; 10][..(n.min(10) as usize)]);
                p.skip(n - n.min(10));
            }
            left -= n;
        }
        assert!(p.at_frame_boundary());
        p.finish();
        let st = p.stats();
        assert!(!p.is_malformed());
        assert_eq!(st.messages, 1);
        assert_eq!(st.message_bytes, SIZE as u64);
        assert_eq!((st.message_min, st.message_max), (SIZE as u32, SIZE as u32));
        assert_eq!(st.framing_bytes, 5);
        assert_eq!(st.total_bytes, SIZE as u64 + 5);
    }

    #[test]
    fn skip_is_clamped_and_never_enters_trailer() {
        let mut p = FrameParser::new();
        p.feed(&encode_frame(0, b"abc")[..6]);
        assert_eq!(p.skippable(), 2);
        p.skip(100);
        assert!(p.at_frame_boundary());
        assert_eq!(p.stats().messages, 1);
        p.feed(&encode_frame(0x80, b"grpc-status: 0\r\n")[..7]);
        assert_eq!(p.skippable(), 0);
        p.skip(5);
        assert!(!p.at_frame_boundary());
    }

    #[test]
    fn only_complete_frames_are_counted() {
        let mut s = encode_frame(1, b"abc");
        s.extend(encode_frame(0x80, b"grpc-status:0\r\n"));
        let whole = run(&[&s]).0;
        assert_eq!(whole.compressed_messages, 1);
        assert_eq!(whole.framing_bytes, 5 + 5 + 15);
        for i in 0..s.len() {
            let (st, _, _) = run(&[&s[..i]]);
            let data_done = i >= 8;
            assert_eq!(st.messages, data_done as u64, "cut at {i}");
            assert_eq!(st.message_bytes, if data_done { 3 } else { 0 });
            assert_eq!(st.framing_bytes, if data_done { 5 } else { 0 });
            assert_eq!(st.total_bytes, i as u64);
        }
    }

    #[test]
    fn ending_mid_frame_is_malformed() {
        let s = encode_frame(0, b"hello");
        for i in 1..s.len() {
            let (_, _, bad) = run(&[&s[..i]]);
            assert!(bad, "cut at {i}");
        }
        assert!(!run(&[&s]).2);
        assert!(!run(&[]).2);
    }

    #[test]
    fn trailer_blocks() {
        let t = parse_trailer_block(b"grpc-status:0\r\ngrpc-message:ok\r\n").unwrap();
        assert_eq!(t.status, Some(0));
        assert_eq!(t.message.as_deref(), Some("ok"));
        let t = parse_trailer_block(
            b"Grpc-Status : 14 \r\nx-other: a:b\r\n\r\nGRPC-MESSAGE:  no%20route%3A%20x\n",
        )
        .unwrap();
        assert_eq!(t.status, Some(14));
        assert_eq!(t.message.as_deref(), Some("no route: x"));
        assert_eq!(parse_trailer_block(b""), Ok(GrpcTrailer::default()));
        assert!(parse_trailer_block(b"grpc-status 0\r\n").is_err());
        assert!(parse_trailer_block(b"grpc-status:zero\r\n").is_err());
        assert!(parse_trailer_block(b"grpc-status:99999999999\r\n").is_err());
        assert!(parse_trailer_block(b":x\r\n").is_err());
        // A last line without its line break still counts.
        let t = parse_trailer_block(b"grpc-status:5\r\ngrpc-message:gone").unwrap();
        assert_eq!(t.status, Some(5));
        assert_eq!(t.message.as_deref(), Some("gone"));
    }

    #[test]
    fn status_is_found_after_a_long_trailer() {
        // grpc-java appends grpc-status after the application's trailers,
        // which (e.g. grpc-status-details-bin) can exceed the line limit.
        let mut block = b"grpc-message:not%20found\r\ngrpc-status-details-bin:".to_vec();
        block.extend(std::iter::repeat_n(b'A', 1500));
        block.extend_from_slice(b"\r\ngrpc-status:5\r\n");
        for cut in [1, 7, 1024, 1100, block.len() - 3] {
            let s = encode_frame(0x80, &block);
            let (_, t, bad) = run(&[&s[..5 + cut], &s[5 + cut..]]);
            assert!(!bad, "cut at {cut}");
            let t = t.unwrap();
            assert_eq!(t.status, Some(5), "cut at {cut}");
            assert_eq!(t.message.as_deref(), Some("not found"), "cut at {cut}");
        }
    }

    #[test]
    fn trailer_frame_capture_is_capped() {
        let mut block = b"grpc-status:7\r\ngrpc-message:".to_vec();
        block.extend(std::iter::repeat_n(b'x', 5000));
        block.extend_from_slice(b"\r\n");
        let s = encode_frame(0x80, &block);
        let (stats, t, bad) = run(&[&s]);
        assert!(!bad);
        assert_eq!(stats.trailer_frames, 1);
        assert_eq!(stats.messages, 0);
        let t = t.unwrap();
        assert_eq!(t.status, Some(7));
        // The message is cut at the line limit, not dropped.
        let message = t.message.unwrap();
        assert!(message.len() < TRAILER_CAPTURE_LIMIT && message.bytes().all(|b| b == b'x'));
        assert!(message.len() > TRAILER_CAPTURE_LIMIT - 20);
    }

    #[test]
    fn bad_trailer_frame_is_malformed() {
        let s = encode_frame(0x80, b"this is not a header block");
        let (stats, t, bad) = run(&[&s]);
        assert!(bad);
        assert_eq!(stats.trailer_frames, 1);
        assert_eq!(t, None);
    }

    #[test]
    fn status_parse() {
        assert_eq!(parse_status(b"0"), Some(0));
        assert_eq!(parse_status(b" 16 "), Some(16));
        assert_eq!(parse_status(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_status(b"4294967296"), None);
        assert_eq!(parse_status(b"-1"), None);
        assert_eq!(parse_status(b""), None);
    }
}
