//! The operation map's key of a call's labels: what the record publishes
//! instead of the fields that are constant per operation and REST rule.
//!
//! The published record (format 2) leaves out `rpc.service`, `rpc.method`,
//! `wirelens.streaming` and `http.route`: they follow from the operation and
//! the matched rule. It carries this key instead, a hash of exactly those
//! labels (and the operation's name), and the Collector restores them from
//! its copy of the map (`collector/opmap.py`, which computes the same key),
//! matching (operation, key). A Collector whose map differs from the Envoy's
//! (a map changed during a rolling upgrade) does not know the key of a
//! changed operation or rule: it keeps the key on the record as
//! `wirelens.opmap.key` and restores nothing, rather than restore another
//! version's labels.

/// Characters of the key: 4 of base32 (20 bits of the hash).
pub const KEY_LEN: usize = 4;
const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// The key of (operation, rpc.service, rpc.method, streaming, route): FNV-1a
/// (64-bit) over each value's byte length (4 bytes, little-endian) and bytes,
/// in that order; its top 20 bits in 4 base32 characters. `streaming` and
/// `route` are `""` when absent (a gRPC call's labels have no route).
pub fn labels_key(
    operation: &str,
    service: &str,
    method: &str,
    streaming: &str,
    route: &str,
) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [operation, service, method, streaming, route] {
        let len = (part.len() as u32).to_le_bytes();
        for &b in len.iter().chain(part.as_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (0..KEY_LEN)
        .map(|i| ALPHABET[((h >> (59 - 5 * i)) & 31) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same vectors as collector/opmap.py's tests (tests/unit/test_collector_opmap.py).
    #[test]
    fn vectors() {
        assert_eq!(labels_key("", "", "", "", ""), "tq2v");
        let cases = [
            (
                (
                    "hello.SayHello",
                    "wirelens.v1.Hello",
                    "SayHello",
                    "unary",
                    "",
                ),
                "igg4",
            ),
            (
                (
                    "hello.SayHello",
                    "wirelens.v1.Hello",
                    "SayHello",
                    "unary",
                    "/v1/hello",
                ),
                "dnjv",
            ),
            (
                (
                    "catalog.GetProduct",
                    "wirelens.v1.Catalog",
                    "GetProduct",
                    "unary",
                    "/v1/products/{id}",
                ),
                "feno",
            ),
            (("x", "", "", "", "/a,b%"), "bkjm"),
        ];
        for ((o, s, m, st, r), want) in cases {
            let got = labels_key(o, s, m, st, r);
            assert_eq!(got, want, "{o} {r}");
        }
        // Each value's length is hashed: moving a byte between values changes the key.
        assert_ne!(
            labels_key("ab", "c", "", "", ""),
            labels_key("a", "bc", "", "", "")
        );
    }
}
