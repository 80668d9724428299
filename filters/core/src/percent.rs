//! Percent-decoding: of `grpc-message` values, and of URL path segments and
//! query components (the counterfactual's REST bindings).
//!
//! gRPC percent-encodes the status message on the wire. Following the gRPC
//! spec, invalid escapes are never an error there: they are kept verbatim.
//! A URL component with one does not bind (as Go's `url` package refuses it).

use crate::json::cut_utf8;

/// Most bytes of a decoded `grpc-message` the filter ever keeps (the plugin's
/// `grpc_message_max_bytes` publishes at most this many).
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
/// most `max` bytes (at most [`MAX_MESSAGE_LEN`]; on a character boundary).
pub fn decode_grpc_message(raw: &[u8], max: usize) -> String {
    let max = max.min(MAX_MESSAGE_LEN);
    let mut out = Vec::with_capacity(raw.len().min(max));
    let mut i = 0;
    // Up to 3 bytes past `max` so that a character straddling the cut is
    // decoded whole (and then dropped) rather than replaced.
    while i < raw.len() && out.len() < max + 3 {
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
    let s = match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    cut_utf8(&s, max).to_string()
}

/// Decodes a URL path segment or query component (`+` as a space when
/// `plus_is_space`, as in a query string); `None` for an invalid escape or
/// invalid UTF-8.
pub fn decode_url_component(raw: &[u8], plus_is_space: bool) -> Option<String> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let h = hex(*raw.get(i + 1)?)?;
                let l = hex(*raw.get(i + 2)?)?;
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_components() {
        assert_eq!(
            decode_url_component(b"a%20b+c", true).as_deref(),
            Some("a b c")
        );
        assert_eq!(decode_url_component(b"a+b", false).as_deref(), Some("a+b"));
        assert_eq!(
            decode_url_component(b"%e2%82%AC", false).as_deref(),
            Some("\u{20ac}")
        );
        assert_eq!(decode_url_component(b"50%", true), None);
        assert_eq!(decode_url_component(b"%zz", true), None);
        assert_eq!(decode_url_component(b"%ff", true), None);
    }

    #[test]
    fn decodes() {
        assert_eq!(decode_grpc_message(b"ok", MAX_MESSAGE_LEN), "ok");
        assert_eq!(
            decode_grpc_message(b"not%20found", MAX_MESSAGE_LEN),
            "not found"
        );
        assert_eq!(
            decode_grpc_message(b"caf%C3%A9%21", MAX_MESSAGE_LEN),
            "café!"
        );
        assert_eq!(decode_grpc_message(b"%e2%9c%93", MAX_MESSAGE_LEN), "✓");
        assert_eq!(decode_grpc_message(b"", MAX_MESSAGE_LEN), "");
    }

    #[test]
    fn invalid_escapes_are_kept() {
        assert_eq!(decode_grpc_message(b"100%", MAX_MESSAGE_LEN), "100%");
        assert_eq!(decode_grpc_message(b"100%2", MAX_MESSAGE_LEN), "100%2");
        assert_eq!(decode_grpc_message(b"%zz%4", MAX_MESSAGE_LEN), "%zz%4");
        assert_eq!(decode_grpc_message(b"%%41", MAX_MESSAGE_LEN), "%A");
        assert_eq!(decode_grpc_message(b"%FF", MAX_MESSAGE_LEN), "\u{FFFD}");
    }

    #[test]
    fn capped() {
        let long = "é".repeat(2000);
        let s = decode_grpc_message(long.as_bytes(), MAX_MESSAGE_LEN);
        assert_eq!(s.len(), MAX_MESSAGE_LEN);
        assert!(s.chars().all(|c| c == 'é'));
        let s = decode_grpc_message(&[b'x'; 5000], MAX_MESSAGE_LEN);
        assert_eq!(s.len(), MAX_MESSAGE_LEN);
        assert_eq!(
            decode_grpc_message(&[b'x'; 5000], 5000).len(),
            MAX_MESSAGE_LEN
        );
    }

    #[test]
    fn cut_at_max_on_a_character_boundary() {
        assert_eq!(decode_grpc_message(b"not%20found", 5), "not f");
        // "é" is 2 bytes: a cut at 3 keeps one whole "é", never half of one.
        assert_eq!(decode_grpc_message("ééé".as_bytes(), 3), "é");
        assert_eq!(decode_grpc_message(b"caf%C3%A9", 4), "caf");
        assert_eq!(decode_grpc_message(b"caf%C3%A9", 5), "café");
        assert_eq!(decode_grpc_message(b"anything", 0), "");
    }
}
