//! Percent-decoding of `grpc-message` values.
//!
//! gRPC percent-encodes the status message on the wire. Following the gRPC
//! spec, invalid escapes are never an error: they are kept verbatim.

/// Most bytes of a decoded `grpc-message` the filter keeps.
pub const MAX_MESSAGE_LEN: usize = 1024;

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` escapes, keeps anything else (including malformed escapes)
/// as is, replaces invalid UTF-8 with U+FFFD and truncates the result to at
/// most [`MAX_MESSAGE_LEN`] bytes (on a character boundary).
pub fn decode_grpc_message(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len().min(MAX_MESSAGE_LEN));
    let mut i = 0;
    while i < raw.len() && out.len() < MAX_MESSAGE_LEN {
        let b = raw[i];
        if b == b'%' && i + 2 < raw.len() {
            if let (Some(h), Some(l)) = (hex(raw[i + 1]), hex(raw[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    let mut s = match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    if s.len() > MAX_MESSAGE_LEN {
        let mut cut = MAX_MESSAGE_LEN;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        assert_eq!(decode_grpc_message(b"ok"), "ok");
        assert_eq!(decode_grpc_message(b"not%20found"), "not found");
        assert_eq!(decode_grpc_message(b"caf%C3%A9%21"), "café!");
        assert_eq!(decode_grpc_message(b"%e2%9c%93"), "✓");
        assert_eq!(decode_grpc_message(b""), "");
    }

    #[test]
    fn invalid_escapes_are_kept() {
        assert_eq!(decode_grpc_message(b"100%"), "100%");
        assert_eq!(decode_grpc_message(b"100%2"), "100%2");
        assert_eq!(decode_grpc_message(b"%zz%4"), "%zz%4");
        assert_eq!(decode_grpc_message(b"%%41"), "%A");
        assert_eq!(decode_grpc_message(b"%FF"), "\u{FFFD}");
    }

    #[test]
    fn capped() {
        let long = "é".repeat(2000);
        let s = decode_grpc_message(long.as_bytes());
        assert!(s.len() <= MAX_MESSAGE_LEN);
        assert!(s.chars().all(|c| c == 'é'));
        let s = decode_grpc_message(&[b'x'; 5000]);
        assert_eq!(s.len(), MAX_MESSAGE_LEN);
    }
}
