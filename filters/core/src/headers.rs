//! A header map as the core reads it ([`HeaderEntries`]), and the reader
//! (and writer, for tests) of the proxy-wasm serialized header map.
//!
//! A host hands a header map over in its own form: the proxy-wasm ABI as
//! one serialized buffer ([`Serialized`]), Envoy's dynamic-module ABI as an
//! array of `{name, value}` buffers pointing into Envoy's memory. The core
//! only iterates `(name, value)` pairs, so neither is converted.
//!
//! Layout, as returned by `proxy_get_header_map_pairs`: a little-endian
//! `u32` entry count `n`; `n` pairs of little-endian `u32` (name length,
//! value length); then for each entry the name bytes, a NUL, the value
//! bytes, a NUL. Reading is zero-copy and bounds-checked: a truncated or
//! inconsistent buffer simply ends the iteration early (see
//! [`HeaderIter::is_truncated`]).

/// A header map a host handed over: its `(name, value)` pairs, read in
/// place, as often as the reader needs (no copy, no allocation).
pub trait HeaderEntries {
    fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_;
}

/// A header map in the proxy-wasm serialized layout (`proxy_get_header_map_pairs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Serialized<B>(pub B);

impl<B: AsRef<[u8]>> HeaderEntries for Serialized<B> {
    fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        iter_serialized(self.0.as_ref())
    }
}

/// Iterator over `(name, value)` pairs of a serialized header map.
#[derive(Clone, Debug)]
pub struct HeaderIter<'a> {
    buf: &'a [u8],
    /// Next entry index.
    idx: usize,
    count: usize,
    /// Offset of the next entry's name in the data section.
    pos: usize,
    truncated: bool,
}

fn le32(buf: &[u8], at: usize) -> Option<usize> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Iterates a serialized header map. An empty buffer is an empty map.
pub fn iter_serialized(buf: &[u8]) -> HeaderIter<'_> {
    let mut it = HeaderIter {
        buf,
        idx: 0,
        count: 0,
        pos: 0,
        truncated: false,
    };
    if buf.is_empty() {
        return it;
    }
    let table_end = le32(buf, 0)
        .and_then(|n| n.checked_mul(8).map(|t| (n, t)))
        .and_then(|(n, t)| t.checked_add(4).map(|e| (n, e)));
    match table_end {
        Some((n, end)) if end <= buf.len() => {
            it.count = n;
            it.pos = end;
        }
        _ => it.truncated = true,
    }
    it
}

impl<'a> HeaderIter<'a> {
    /// True when the buffer ended before all announced entries were read.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.idx >= self.count || self.truncated {
            return None;
        }
        let slot = 4 + self.idx * 8;
        let entry = (|| {
            let nl = le32(self.buf, slot)?;
            let vl = le32(self.buf, slot + 4)?;
            let name_start = self.pos;
            let name_end = name_start.checked_add(nl)?;
            let value_start = name_end.checked_add(1)?;
            let value_end = value_start.checked_add(vl)?;
            let next = value_end.checked_add(1)?;
            if next > self.buf.len() {
                return None;
            }
            Some((name_start..name_end, value_start..value_end, next))
        })();
        match entry {
            Some((n, v, next)) => {
                self.idx += 1;
                self.pos = next;
                Some((&self.buf[n], &self.buf[v]))
            }
            None => {
                self.truncated = true;
                None
            }
        }
    }
}

/// Serializes pairs in the proxy-wasm header-map layout (tests, harnesses).
#[cfg(any(test, feature = "test-support"))]
pub fn serialize<N: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(N, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
    for (n, v) in pairs {
        out.extend_from_slice(&(n.as_ref().len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.as_ref().len() as u32).to_le_bytes());
    }
    for (n, v) in pairs {
        out.extend_from_slice(n.as_ref());
        out.push(0);
        out.extend_from_slice(v.as_ref());
        out.push(0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let pairs = [
            (":method", "POST"),
            (":path", "/wirelens.v1.Hello/SayHello"),
            ("content-type", "application/grpc"),
            ("empty", ""),
        ];
        let buf = serialize(&pairs);
        let got: Vec<_> = iter_serialized(&buf).collect();
        assert_eq!(got.len(), 4);
        for ((n, v), (gn, gv)) in pairs.iter().zip(got) {
            assert_eq!(n.as_bytes(), gn);
            assert_eq!(v.as_bytes(), gv);
        }
        assert_eq!(iter_serialized(&[]).count(), 0);
        assert_eq!(iter_serialized(&serialize::<&str, &str>(&[])).count(), 0);
    }

    #[test]
    fn truncated_buffers_never_panic() {
        let buf = serialize(&[("a", "1"), ("bb", "22"), ("ccc", "333")]);
        for i in 0..buf.len() {
            let mut it = iter_serialized(&buf[..i]);
            let n = it.by_ref().count();
            assert!(n < 3);
            assert!(it.is_truncated() || i == 0, "len {i}");
        }
        // Absurd counts and lengths.
        let mut bad = u32::MAX.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0; 16]);
        assert_eq!(iter_serialized(&bad).count(), 0);
        let mut bad = 1u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&u32::MAX.to_le_bytes());
        bad.extend_from_slice(&u32::MAX.to_le_bytes());
        bad.extend_from_slice(&[0; 4]);
        assert_eq!(iter_serialized(&bad).count(), 0);
    }
}
