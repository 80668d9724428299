//! Incremental base64 decoder for grpc-web-text bodies.
//!
//! * Standard alphabet (`A-Z a-z 0-9 + /`), `=` padding.
//! * Input may be split anywhere, including inside a quad: at most three
//!   pending characters (18 bits) are carried between calls.
//! * Padding may appear in the middle of the stream (grpc-web-text encoders
//!   pad each frame or each chunk separately); after a padded quad decoding
//!   simply starts a new quad.
//! * `\r` and `\n` are ignored anywhere.
//! * Anything else (an invalid character, `=` where no padding can be, a
//!   single dangling character at the end) marks the stream malformed; after
//!   that the decoder stops producing output.
//! * A missing final padding is tolerated: two or three trailing characters
//!   are decoded at [`Base64Decoder::finish`].
//!
//! Decoding never allocates: output goes through a small stack buffer to a
//! caller-supplied sink.

const INVALID: u8 = 0xFF;

const fn build_table() -> [u8; 256] {
    let mut t = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
}

static TABLE: [u8; 256] = build_table();

/// Size of the stack buffer decoded bytes are collected in before being
/// handed to the sink (a multiple of 3).
const OUT_CHUNK: usize = 768;

/// Incremental base64 decoder state (constant size).
#[derive(Clone, Debug, Default)]
pub struct Base64Decoder {
    /// Accumulated sextets of the current quad.
    acc: u32,
    /// Number of sextets in `acc` (0..=3).
    pending: u8,
    /// Saw `xx=`, expecting the second `=`.
    want_pad: bool,
    malformed: bool,
    decoded: u64,
}

struct Out<F: FnMut(&[u8])> {
    buf: [u8; OUT_CHUNK],
    len: usize,
    sink: F,
}

impl<F: FnMut(&[u8])> Out<F> {
    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() > OUT_CHUNK {
            self.flush();
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn flush(&mut self) {
        if self.len > 0 {
            (self.sink)(&self.buf[..self.len]);
            self.len = 0;
        }
    }
}

impl Base64Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once invalid input was seen.
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    /// Number of decoded bytes produced so far.
    #[cfg(any(test, feature = "test-support"))]
    pub fn decoded_len(&self) -> u64 {
        self.decoded
    }

    /// Number of characters carried over to the next call (0..=3).
    #[cfg(any(test, feature = "test-support"))]
    pub fn pending_chars(&self) -> usize {
        self.pending as usize
    }

    /// Decodes `input`, handing decoded bytes to `sink` (possibly in several
    /// pieces, never an empty one).
    pub fn decode<F: FnMut(&[u8])>(&mut self, input: &[u8], sink: F) {
        if self.malformed {
            return;
        }
        let mut out = Out {
            buf: [0u8; OUT_CHUNK],
            len: 0,
            sink,
        };
        for &c in input {
            if c == b'\r' || c == b'\n' {
                continue;
            }
            if self.want_pad {
                if c == b'=' {
                    self.want_pad = false;
                    continue;
                }
                self.malformed = true;
                break;
            }
            if c == b'=' {
                match self.pending {
                    2 => {
                        out.push(&[(self.acc >> 4) as u8]);
                        self.decoded += 1;
                        self.want_pad = true;
                    }
                    3 => {
                        out.push(&[(self.acc >> 10) as u8, (self.acc >> 2) as u8]);
                        self.decoded += 2;
                    }
                    _ => {
                        self.malformed = true;
                        break;
                    }
                }
                self.acc = 0;
                self.pending = 0;
                continue;
            }
            let v = TABLE[c as usize];
            if v == INVALID {
                self.malformed = true;
                break;
            }
            self.acc = (self.acc << 6) | v as u32;
            self.pending += 1;
            if self.pending == 4 {
                let a = self.acc;
                out.push(&[(a >> 16) as u8, (a >> 8) as u8, a as u8]);
                self.decoded += 3;
                self.acc = 0;
                self.pending = 0;
            }
        }
        out.flush();
    }

    /// End of input: decodes an unpadded final group of 2 or 3 characters;
    /// a single dangling character marks the stream malformed.
    pub fn finish<F: FnMut(&[u8])>(&mut self, mut sink: F) {
        if self.malformed {
            return;
        }
        match self.pending {
            0 => {}
            1 => self.malformed = true,
            2 => {
                sink(&[(self.acc >> 4) as u8]);
                self.decoded += 1;
            }
            _ => {
                sink(&[(self.acc >> 10) as u8, (self.acc >> 2) as u8]);
                self.decoded += 2;
            }
        }
        self.acc = 0;
        self.pending = 0;
        self.want_pad = false;
    }
}

#[cfg(test)]
pub(crate) fn encode(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        s.push(A[(n >> 18) as usize & 63] as char);
        s.push(A[(n >> 12) as usize & 63] as char);
        s.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        s.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(pieces: &[&[u8]]) -> (Vec<u8>, bool) {
        let mut d = Base64Decoder::new();
        let mut out = Vec::new();
        for p in pieces {
            d.decode(p, |b| {
                assert!(!b.is_empty());
                out.extend_from_slice(b)
            });
            assert!(d.pending_chars() <= 3);
        }
        d.finish(|b| out.extend_from_slice(b));
        assert_eq!(d.decoded_len(), out.len() as u64);
        (out, d.is_malformed())
    }

    #[test]
    fn known_vectors() {
        for (enc, dec) in [
            ("", ""),
            ("Zg==", "f"),
            ("Zm8=", "fo"),
            ("Zm9v", "foo"),
            ("Zm9vYg==", "foob"),
            ("Zm9vYmE=", "fooba"),
            ("Zm9vYmFy", "foobar"),
        ] {
            assert_eq!(
                decode_all(&[enc.as_bytes()]),
                (dec.as_bytes().to_vec(), false)
            );
            assert_eq!(encode(dec.as_bytes()), enc);
        }
    }

    #[test]
    fn padding_mid_stream_and_line_breaks() {
        let (out, bad) = decode_all(&[b"Zg==\r\nZm8=Zm9v\nZg", b"=", b"=Zm9vYmE="]);
        assert!(!bad);
        assert_eq!(out, b"ffofooffooba");
    }

    #[test]
    fn every_split_point() {
        let data: Vec<u8> = (0u8..=255).chain(0..100).collect();
        // Per-piece padding, with line breaks.
        let mut text = String::new();
        for piece in data.chunks(7) {
            text.push_str(&encode(piece));
            text.push_str("\r\n");
        }
        let t = text.as_bytes();
        for i in 0..=t.len() {
            let (out, bad) = decode_all(&[&t[..i], &t[i..]]);
            assert!(!bad, "split {i}");
            assert_eq!(out, data, "split {i}");
        }
        let pieces: Vec<&[u8]> = t.chunks(1).collect();
        assert_eq!(decode_all(&pieces), (data.clone(), false));
    }

    #[test]
    fn unpadded_end_is_tolerated() {
        assert_eq!(decode_all(&[b"Zm8"]), (b"fo".to_vec(), false));
        assert_eq!(decode_all(&[b"Zg"]), (b"f".to_vec(), false));
        assert_eq!(decode_all(&[b"Zg="]), (b"f".to_vec(), false));
    }

    #[test]
    fn malformed() {
        assert!(decode_all(&[b"Z"]).1);
        assert!(decode_all(&[b"Zm9v!"]).1);
        assert!(decode_all(&[b"Zm9v Zm9v"]).1);
        assert!(decode_all(&[b"="]).1);
        assert!(decode_all(&[b"Z="]).1);
        assert!(decode_all(&[b"Zg=A"]).1);
        assert!(decode_all(&[b"Zm9v-_"]).1);
        // Output stops at the first error.
        let (out, bad) = decode_all(&[b"Zm9v", b"*", b"Zm9v"]);
        assert!(bad);
        assert_eq!(out, b"foo");
    }

    #[test]
    fn large_input_flushes_in_pieces() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let text = encode(&data);
        let mut d = Base64Decoder::new();
        let mut out = Vec::new();
        let mut calls = 0;
        d.decode(text.as_bytes(), |b| {
            calls += 1;
            assert!(b.len() <= OUT_CHUNK);
            out.extend_from_slice(b);
        });
        d.finish(|b| out.extend_from_slice(b));
        assert!(calls > 1);
        assert_eq!(out, data);
    }
}
