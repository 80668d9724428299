//! The proxy-wasm serialized header-map reader.
//!
//! Input: `[mode] [rest...]`.
//! * mode bit 0 clear: `rest` is the serialized map itself (any bytes).
//!   Checks: never panics; every pair lies inside the buffer, entries are
//!   laid out in order; no more entries than announced, and fewer only when
//!   the iterator reports truncation; re-serializing what was read gives the
//!   buffer's prefix when its separators are NULs.
//! * mode bit 0 set: `rest` is split at NUL bytes into names and values,
//!   serialized, and read back: exactly the pairs; the buffer cut at
//!   `(mode >> 1) / 128` of its length reads a prefix of the pairs and
//!   reports truncation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelens_core::headers::{iter_serialized, serialize};

fn within(buf: &[u8], s: &[u8]) -> std::ops::Range<usize> {
    let start = s.as_ptr() as usize - buf.as_ptr() as usize;
    assert!(
        start <= buf.len() && s.len() <= buf.len() - start,
        "slice outside the buffer"
    );
    start..start + s.len()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let buf = rest;
        let mut it = iter_serialized(buf);
        let pairs: Vec<(&[u8], &[u8])> = it.by_ref().collect();
        assert_eq!(it.next(), None, "iterator resumed after its end");
        let announced = buf
            .get(..4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
        assert!(pairs.len() <= announced);
        if buf.is_empty() {
            assert!(!it.is_truncated());
        }
        if pairs.len() < announced || (1..4).contains(&buf.len()) {
            assert!(it.is_truncated(), "short read not reported");
        }
        let mut pos = 4 + 8 * announced;
        for (name, value) in &pairs {
            let n = within(buf, name);
            let v = within(buf, value);
            assert_eq!(n.start, pos);
            assert_eq!(v.start, n.end + 1);
            pos = v.end + 1;
            assert!(pos <= buf.len());
        }
        if !it.is_truncated() {
            let again = serialize(&pairs);
            let nul_separated = pairs
                .iter()
                .all(|(n, v)| buf[within(buf, n).end] == 0 && buf[within(buf, v).end] == 0);
            if nul_separated && !buf.is_empty() {
                assert_eq!(&buf[..again.len()], &again[..]);
            }
        }
    } else {
        let fields: Vec<&[u8]> = rest.split(|&b| b == 0).collect();
        let pairs: Vec<(&[u8], &[u8])> = fields
            .chunks(2)
            .map(|c| (c[0], *c.get(1).unwrap_or(&&b""[..])))
            .collect();
        let buf = serialize(&pairs);
        let mut it = iter_serialized(&buf);
        assert!(it.by_ref().eq(pairs.iter().copied()), "round trip");
        assert!(!it.is_truncated());
        let cut = (mode as usize >> 1) * buf.len() / 128;
        let mut it = iter_serialized(&buf[..cut]);
        let got: Vec<_> = it.by_ref().collect();
        assert!(got.len() < pairs.len());
        assert_eq!(&got[..], &pairs[..got.len()]);
        assert!(cut == 0 || it.is_truncated(), "cut at {cut} not reported");
    }
});
