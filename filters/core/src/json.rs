//! The record's writers into a reused `String`: [`PositionalWriter`], what
//! the filter publishes (format 2), and, for tests and harnesses only
//! (feature `test-support`), [`ObjectWriter`], the compact JSON of format 1.
//!
//! No spaces; strings escaped per RFC 8259 (`"` and `\` backslash-escaped,
//! every control character U+0000–U+001F as `\u00XX`); integers in decimal.
//! Input strings are `&str`, so the output is always valid UTF-8 (invalid
//! bytes were already replaced by U+FFFD where the text was decoded).

#[cfg(any(test, feature = "test-support"))]
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` escaped (without the surrounding quotes).
#[cfg(any(test, feature = "test-support"))]
pub fn push_escaped(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0..=0x1f => "",
            _ => continue,
        };
        // `i` is at an ASCII byte, so both ends are char boundaries.
        if let Some(run) = s.get(start..i) {
            out.push_str(run);
        }
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    if let Some(run) = s.get(start..) {
        out.push_str(run);
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a
/// character boundary: how every length-capped text of the record is cut.
pub fn cut_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The separators a positional record needs at most at once (a run of absent values).
const COMMAS: &str = ",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,";

/// Appends `n` in decimal.
pub fn push_u64(out: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // One push_str: a push per digit re-encodes UTF-8 and checks capacity each time.
    if let Ok(digits) = std::str::from_utf8(&buf[i..]) {
        out.push_str(digits);
    }
}

/// Writes one JSON object member by member (format 1: tests and harnesses).
#[cfg(any(test, feature = "test-support"))]
pub struct ObjectWriter<'a> {
    out: &'a mut String,
    empty: bool,
}

#[cfg(any(test, feature = "test-support"))]
impl<'a> ObjectWriter<'a> {
    /// Starts an object at the end of `out`.
    pub fn new(out: &'a mut String) -> Self {
        out.push('{');
        Self { out, empty: true }
    }

    /// `key` must not need escaping (the record's keys are fixed ASCII).
    fn key(&mut self, key: &str) {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\":");
    }

    pub fn string(&mut self, key: &str, value: &str) {
        self.key(key);
        self.out.push('"');
        push_escaped(self.out, value);
        self.out.push('"');
    }

    pub fn number(&mut self, key: &str, value: u64) {
        self.key(key);
        push_u64(self.out, value);
    }

    /// A member whose value is already JSON text.
    pub fn raw(&mut self, key: &str, json: &str) {
        self.key(key);
        self.out.push_str(json);
    }

    pub fn finish(self) {
        self.out.push('}');
    }
}

/// Writes the published record (format 2): values by position,
/// comma-separated, an absent value empty, trailing absent values left off.
/// Positions must be written in increasing order.
pub struct PositionalWriter<'a> {
    out: &'a mut String,
    /// The last position written, if any.
    last: Option<usize>,
}

impl<'a> PositionalWriter<'a> {
    /// Starts a record at the end of `out`.
    pub fn new(out: &'a mut String) -> Self {
        Self { out, last: None }
    }

    /// The commas that end the positions before `pos`.
    fn at(&mut self, pos: usize) {
        let commas = match self.last {
            None => pos,
            Some(last) => {
                debug_assert!(pos > last, "position {pos} written after {last}");
                pos - last
            }
        };
        // One push_str for the run of commas (an absent value is an empty one).
        let mut left = commas;
        while left > 0 {
            let run = left.min(COMMAS.len());
            self.out.push_str(&COMMAS[..run]);
            left -= run;
        }
        self.last = Some(pos);
    }

    pub fn number(&mut self, pos: usize, value: u64) {
        self.at(pos);
        push_u64(self.out, value);
    }

    /// A value that is already text without `,` or `%` (a number's JSON text).
    pub fn raw(&mut self, pos: usize, text: &str) {
        self.at(pos);
        self.out.push_str(text);
    }

    /// Text, escaped: `%` as `%25`, `,` as `%2C`.
    pub fn string(&mut self, pos: usize, value: &str) {
        self.at(pos);
        push_positional_escaped(self.out, value);
    }
}

/// Appends `s` with `%` as `%25` and `,` as `%2C` (a text value of the published record).
pub fn push_positional_escaped(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'%' => "%25",
            b',' => "%2C",
            _ => continue,
        };
        // `i` is at an ASCII byte, so both ends are char boundaries.
        out.push_str(&s[start..i]);
        out.push_str(esc);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut o = String::new();
        push_escaped(&mut o, s);
        o
    }

    #[test]
    fn escaping() {
        assert_eq!(esc(""), "");
        assert_eq!(esc("plain"), "plain");
        assert_eq!(esc("a\"b\\c"), "a\\\"b\\\\c");
        assert_eq!(
            esc("l1\nl2\r\t\u{0}\u{1f}"),
            "l1\\u000al2\\u000d\\u0009\\u0000\\u001f"
        );
        assert_eq!(esc("café ✓ \u{fffd} \u{7f}"), "café ✓ \u{fffd} \u{7f}");
        let long = "x\"".repeat(1000);
        assert_eq!(esc(&long).len(), 3000);
        // Round trip through a real JSON parser.
        let nasty = "q\"b\\s/\u{8}\u{c}\n\r\t\u{1}é\u{fffd}";
        let mut o = String::new();
        let mut w = ObjectWriter::new(&mut o);
        w.string("k", nasty);
        w.finish();
        let v: serde_json::Value = serde_json::from_str(&o).unwrap();
        assert_eq!(v["k"], nasty);
    }

    #[test]
    fn positional() {
        let mut o = String::new();
        let mut w = PositionalWriter::new(&mut o);
        w.string(1, "a,b%2C");
        w.number(2, 7);
        w.raw(5, "0.25");
        assert_eq!(o, ",a%2Cb%252C,7,,,0.25");
        let mut o = String::new();
        let mut w = PositionalWriter::new(&mut o);
        w.string(0, "rest");
        w.string(1, "");
        assert_eq!(o, "rest,");
        let mut o = String::new();
        PositionalWriter::new(&mut o);
        assert_eq!(o, "");
    }

    #[test]
    fn numbers_and_objects() {
        let mut o = String::new();
        for n in [0u64, 7, 1234567890, u64::MAX] {
            push_u64(&mut o, n);
            o.push(' ');
        }
        assert_eq!(o, "0 7 1234567890 18446744073709551615 ");
        let mut o = String::new();
        ObjectWriter::new(&mut o).finish();
        assert_eq!(o, "{}");
        let mut o = String::new();
        let mut w = ObjectWriter::new(&mut o);
        w.number("a", 1);
        w.string("b", "x");
        w.raw("c", "0.25");
        w.finish();
        assert_eq!(o, r#"{"a":1,"b":"x","c":0.25}"#);
    }
}
