//! The `call_sequence` checker's own oracles (issue 33, item 6): a base64
//! decoder, a header-map reader, the protocol classifier and a gRPC frame
//! walker, written from the documented semantics (filters/record.yaml,
//! filters/README.md "How bodies are read", core/src/headers.rs's layout
//! comment) and sharing no code with the product's, so a bug both would
//! share cannot hide: the checker compares the product's record with what
//! these say.
//!
//! Each answers in three ways where the documents leave a case open
//! (`Verdict::Unsure`, `None`): the checker then asserts nothing about it
//! rather than guess the product's choice.
//!
//! Included from `call_sequence.rs` (`#[path]`, next to it).

/// A verdict on bytes as the documents define them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<T> {
    /// Valid; what it means.
    Valid(T),
    /// Invalid: the documents say the record is then malformed.
    Invalid(&'static str),
    /// The documents do not decide.
    Unsure,
}

// ------------------------------------------------------------------ base64

/// The value of a base64 symbol (RFC 4648 standard alphabet), by ranges.
fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// A whole grpc-web-text body decoded (README "How bodies are read",
/// record.yaml `mf`): the text is a sequence of 4-symbol groups; `\r` and
/// `\n` are ignored anywhere; a group may end in padding (`xx==`, `xxx=`)
/// anywhere in the stream, not only at its end (frames are padded
/// separately), and decoding goes on with a new group after it; the last
/// group may lack its padding (2 or 3 symbols). Invalid: a character
/// outside the alphabet, `=` where no padding can be, one symbol left
/// dangling at the end. Unsure: a last group `xx=` (half its padding).
///
/// Works on the whole text at once, group by group (the product's decoder
/// is incremental, carrying pending bits between chunks).
pub fn base64_decode(text: &[u8]) -> Verdict<Vec<u8>> {
    let symbols: Vec<u8> = text
        .iter()
        .copied()
        .filter(|&c| c != b'\r' && c != b'\n')
        .collect();
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3 + 3);
    for group in symbols.chunks(4) {
        let data = group.iter().take_while(|&&c| c != b'=').count();
        let pad = &group[data..];
        if !pad.iter().all(|&c| c == b'=') {
            return Verdict::Invalid("'=' inside a group");
        }
        let mut bits = 0u32;
        for &c in &group[..data] {
            match sextet(c) {
                Some(v) => bits = bits << 6 | v,
                None => return Verdict::Invalid("a character outside the alphabet"),
            }
        }
        // `data` symbols carry `data * 6` bits: 1, 2 or 3 whole bytes.
        let bytes = match (group.len(), data) {
            (4, 4) => 3,
            (4, 3) | (3, 3) => 2,
            (4, 2) | (2, 2) => 1,
            (3, 2) => return Verdict::Unsure,
            (1, 1) => return Verdict::Invalid("one symbol dangling at the end"),
            _ => return Verdict::Invalid("padding where none can be"),
        };
        let bits = bits << (6 * (4 - data));
        out.extend_from_slice(&bits.to_be_bytes()[1..1 + bytes]);
    }
    Verdict::Valid(out)
}

// ------------------------------------------------------------------ header maps

/// The pairs of a header map in the proxy-wasm serialized layout
/// (core/src/headers.rs's layout comment: a little-endian `u32` count `n`;
/// `n` pairs of little-endian `u32` name and value lengths; then each
/// entry's name, a NUL, its value, a NUL). `None` unless the buffer is
/// exactly that layout (truncated, inconsistent, a missing NUL, bytes left
/// over): the documents only say such a map "ends the iteration early",
/// not which pairs are seen. No bytes at all is the empty map (a host
/// returns an empty map as (null, 0): filters/abi/README.md).
pub fn header_pairs(buf: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if buf.is_empty() {
        return Some(Vec::new());
    }
    let u32_at = |at: usize| -> Option<usize> {
        let b = buf.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let n = u32_at(0)?;
    let mut data = 4usize.checked_add(n.checked_mul(8)?)?;
    if data > buf.len() {
        return None;
    }
    let mut pairs = Vec::with_capacity(n);
    for i in 0..n {
        let name_len = u32_at(4 + 8 * i)?;
        let value_len = u32_at(8 + 8 * i)?;
        let name_end = data.checked_add(name_len)?;
        let value_at = name_end.checked_add(1)?;
        let value_end = value_at.checked_add(value_len)?;
        if value_end >= buf.len() || buf[name_end] != 0 || buf[value_end] != 0 {
            return None;
        }
        pairs.push((
            buf[data..name_end].to_vec(),
            buf[value_at..value_end].to_vec(),
        ));
        data = value_end + 1;
    }
    (data == buf.len()).then_some(pairs)
}

/// The one value of a header (names compared ASCII case-insensitively):
/// `Some(None)` absent, `Some(Some(v))` present once or always with the
/// same value, `None` present with different values (which one counts is
/// not documented).
pub fn single<'a>(pairs: &'a [(Vec<u8>, Vec<u8>)], name: &str) -> Option<Option<&'a [u8]>> {
    let mut values = pairs
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v.as_slice());
    let first = values.next();
    values.all(|v| Some(v) == first).then_some(first)
}

// ------------------------------------------------------------------ protocol

fn blank_trimmed(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(start, |i| i + 1);
    &s[start..end]
}

fn is_protobuf_type(media: &[u8]) -> bool {
    let media = blank_trimmed(media).to_ascii_lowercase();
    media == b"application/protobuf" || media == b"application/x-protobuf"
}

/// `wirelens.protocol` from the request `content-type` (record.yaml, `pr`):
/// case-insensitive, blanks trimmed; prefix `application/grpc-web-text` →
/// `grpc-web-text`, `application/grpc-web` → `grpc-web`,
/// `application/grpc` → `grpc`; media type (before any `;` parameters)
/// `application/protobuf` or `application/x-protobuf` → `rest-proto`;
/// anything else, or none, → `rest`, but `rest-proto` when the request
/// `accept` lists `application/protobuf` or `application/x-protobuf` (any
/// q-value), or `rest-transcoded` on a `rest_transcoded` plugin (which
/// wins over `accept`). (Writing this oracle found the `accept` rule
/// missing from record.yaml; 98f060e added it there.)
pub fn protocol(
    content_type: Option<&[u8]>,
    accept: Option<&[u8]>,
    rest_transcoded: bool,
) -> &'static str {
    if let Some(ct) = content_type {
        let ct = blank_trimmed(ct).to_ascii_lowercase();
        for (prefix, name) in [
            (&b"application/grpc-web-text"[..], "grpc-web-text"),
            (b"application/grpc-web", "grpc-web"),
            (b"application/grpc", "grpc"),
        ] {
            if ct.starts_with(prefix) {
                return name;
            }
        }
        if is_protobuf_type(ct.split(|&c| c == b';').next().unwrap_or(&[])) {
            return "rest-proto";
        }
    }
    if rest_transcoded {
        return "rest-transcoded";
    }
    let accepts = accept.is_some_and(|a| {
        a.split(|&c| c == b',')
            .any(|item| is_protobuf_type(item.split(|&c| c == b';').next().unwrap_or(&[])))
    });
    if accepts {
        "rest-proto"
    } else {
        "rest"
    }
}

/// How a response body is framed by its `content-type` alone: `Some(true)`
/// base64 text, `Some(false)` binary gRPC frames, `None` not a gRPC-family
/// type.
pub fn grpc_framing(content_type: &[u8]) -> Option<bool> {
    match protocol(Some(content_type), None, false) {
        "grpc-web-text" => Some(true),
        "grpc" | "grpc-web" => Some(false),
        _ => None,
    }
}

// ------------------------------------------------------------------ frames

/// The statistics of a gRPC-framed stream (record.yaml, `qm`…`sf`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    pub messages: u64,
    pub compressed: u64,
    pub message_bytes: u64,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub framing: u64,
}

/// A `grpc-status` value as the documents accept it: a number. Unsure
/// beyond two digits (how large a number may be is not documented).
pub fn status_ok(value: &[u8]) -> Verdict<()> {
    let v = blank_trimmed(value);
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        Verdict::Invalid("grpc-status not a number")
    } else if v.len() <= 2 {
        Verdict::Valid(())
    } else {
        Verdict::Unsure
    }
}

/// A gRPC-Web trailer frame's header block (README: `name:value` lines
/// separated by CRLF, names case-insensitive, blanks ignored; record.yaml
/// `mf`: a line without `:`, an empty name or a non-numeric `grpc-status`
/// is malformed). Unsure: over 1 KiB (only that much is kept), a lone
/// `\r` or `\n`.
fn trailer_block(block: &[u8]) -> Verdict<()> {
    if block.len() > 1024 {
        return Verdict::Unsure;
    }
    let mut lines = Vec::new();
    let mut rest = block;
    while let Some(at) = rest.windows(2).position(|w| w == b"\r\n") {
        lines.push(&rest[..at]);
        rest = &rest[at + 2..];
    }
    lines.push(rest);
    let mut verdict = Verdict::Valid(());
    for line in lines {
        if line.contains(&b'\r') || line.contains(&b'\n') {
            return Verdict::Unsure;
        }
        if blank_trimmed(line).is_empty() {
            continue;
        }
        let Some(colon) = line.iter().position(|&c| c == b':') else {
            return Verdict::Invalid("a trailer line without ':'");
        };
        let name = blank_trimmed(&line[..colon]);
        if name.is_empty() {
            return Verdict::Invalid("a trailer line with an empty name");
        }
        if name.eq_ignore_ascii_case(b"grpc-status") {
            match status_ok(&line[colon + 1..]) {
                Verdict::Invalid(why) => return Verdict::Invalid(why),
                Verdict::Unsure => verdict = Verdict::Unsure,
                Verdict::Valid(()) => {}
            }
        }
    }
    verdict
}

/// What a walk of a gRPC-framed stream found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The statistics of its complete frames (record.yaml counts only
    /// those).
    pub frames: Frames,
    /// It ends inside a frame (prefix or payload).
    pub ends_inside: bool,
}

/// Walks a whole gRPC-framed stream (binary, or base64-decoded): 5-byte
/// prefixes (flags, big-endian `u32` length), data frames with flag bit 7
/// clear (bit 0: compressed), gRPC-Web trailer frames with bit 7 set
/// (framing, not messages). Invalid: a trailer block that does not parse.
/// Unsure: a trailer frame that is not the last frame, or in a stream
/// where none is documented (`trailers_allowed` false: requests, native
/// gRPC).
pub fn walk_frames(stream: &[u8], trailers_allowed: bool) -> Verdict<Walk> {
    let mut f = Frames::default();
    let mut rest = stream;
    let mut unsure = false;
    while !rest.is_empty() {
        if rest.len() < 5 {
            break;
        }
        let flags = rest[0];
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if rest.len() - 5 < len {
            break;
        }
        let payload = &rest[5..5 + len];
        rest = &rest[5 + len..];
        if flags & 0x80 == 0 {
            let n = len as u64;
            f.messages += 1;
            f.compressed += u64::from(flags & 1);
            f.message_bytes += n;
            f.min = Some(f.min.map_or(n, |m| m.min(n)));
            f.max = Some(f.max.map_or(n, |m| m.max(n)));
            f.framing += 5;
        } else {
            if !trailers_allowed || !rest.is_empty() {
                return Verdict::Unsure;
            }
            f.framing += 5 + len as u64;
            match trailer_block(payload) {
                Verdict::Invalid(why) => return Verdict::Invalid(why),
                Verdict::Unsure => unsure = true,
                Verdict::Valid(()) => {}
            }
        }
    }
    if unsure {
        Verdict::Unsure
    } else {
        Verdict::Valid(Walk {
            frames: f,
            ends_inside: !rest.is_empty(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_documented() {
        let v = |s: &str| base64_decode(s.as_bytes());
        assert_eq!(v("aGVsbG8="), Verdict::Valid(b"hello".to_vec()));
        // Padded frames back to back, CRLFs anywhere, missing final padding.
        assert_eq!(v("aGk=\r\naGk=aA=="), Verdict::Valid(b"hihih".to_vec()));
        assert_eq!(v("aGVsbG8"), Verdict::Valid(b"hello".to_vec()));
        assert_eq!(v("aA"), Verdict::Valid(b"h".to_vec()));
        assert_eq!(v(""), Verdict::Valid(vec![]));
        assert!(matches!(v("aGVsb"), Verdict::Invalid(_)));
        assert!(matches!(v("a=GV"), Verdict::Invalid(_)));
        assert!(matches!(v("aG=s"), Verdict::Invalid(_)));
        assert!(matches!(v("aGV*"), Verdict::Invalid(_)));
        assert!(matches!(v("===="), Verdict::Invalid(_)));
        assert_eq!(v("aA="), Verdict::Unsure);
    }

    #[test]
    fn header_layout() {
        let mut buf = 2u32.to_le_bytes().to_vec();
        for n in [1u32, 2, 2, 0] {
            buf.extend(n.to_le_bytes());
        }
        buf.extend(b"a\0bc\0de\0\0");
        let pairs = header_pairs(&buf).unwrap();
        assert_eq!(
            pairs,
            [(b"a".to_vec(), b"bc".to_vec()), (b"de".to_vec(), vec![])]
        );
        assert_eq!(header_pairs(&buf[..buf.len() - 1]), None);
        assert_eq!(header_pairs(b""), Some(vec![]));
        assert_eq!(header_pairs(&[0, 0, 0]), None);
        buf.push(0);
        assert_eq!(header_pairs(&buf), None);
        assert_eq!(single(&pairs, "A"), Some(Some(&b"bc"[..])));
        assert_eq!(single(&pairs, "x"), Some(None));
    }

    #[test]
    fn protocols() {
        let p = |ct: &str| protocol(Some(ct.as_bytes()), None, false);
        assert_eq!(p(" Application/GRPC-Web-Text+proto"), "grpc-web-text");
        assert_eq!(p("application/grpc-web"), "grpc-web");
        assert_eq!(p("application/grpcx"), "grpc");
        assert_eq!(p("application/x-protobuf ; a=b"), "rest-proto");
        assert_eq!(p("application/protobufx"), "rest");
        assert_eq!(
            protocol(None, Some(b"text/html, application/protobuf;q=0.1"), false),
            "rest-proto"
        );
        assert_eq!(
            protocol(None, Some(b"application/protobuf"), true),
            "rest-transcoded"
        );
        assert_eq!(
            protocol(Some(b"application/protobuf"), None, true),
            "rest-proto"
        );
    }

    #[test]
    fn frames() {
        let mut s = vec![1, 0, 0, 0, 2, 7, 7, 0, 0, 0, 0, 0];
        s.extend([0x80, 0, 0, 0, 15]);
        s.extend(b"grpc-status:0\r\n");
        let frames = Frames {
            messages: 2,
            compressed: 1,
            message_bytes: 2,
            min: Some(0),
            max: Some(2),
            framing: 30,
        };
        assert_eq!(
            walk_frames(&s, true),
            Verdict::Valid(Walk {
                frames,
                ends_inside: false
            })
        );
        assert_eq!(walk_frames(&s, false), Verdict::Unsure);
        let head = Frames {
            framing: 10,
            ..frames
        };
        assert_eq!(
            walk_frames(&s[..14], true),
            Verdict::Valid(Walk {
                frames: head,
                ends_inside: true
            })
        );
        let bad = [0x80, 0, 0, 0, 3, b'a', b'b', b'c'];
        assert!(matches!(walk_frames(&bad, true), Verdict::Invalid(_)));
    }
}
