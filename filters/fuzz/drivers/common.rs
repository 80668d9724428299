//! What the whole-call drivers (`call.rs`, `call_sequence.rs`) share: the
//! operation map, how an input is cut into sections and bodies into
//! pieces, and reading a number back from a published record. Whoever
//! includes a driver includes this beside it, as `mod common`.

use std::sync::Arc;
use wirelens_core::OpMap;

/// The operations the bad-input suite calls, as the local stack maps them.
const OPERATIONS: &[u8] = br#"{"operations": [
  {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello", "streaming": "unary",
   "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]},
  {"grpc_path": "/wirelens.v1.Echo/ServerStream", "operation": "echo.ServerStream", "streaming": "server"},
  {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "operation": "catalog.GetProduct", "streaming": "unary",
   "http_rules": [{"method": "GET", "pattern": "/v1/products/{id}"}]}
]}"#;

pub fn operation_map() -> Arc<OpMap> {
    Arc::new(OpMap::from_json(OPERATIONS).expect("the driver's operation map"))
}

/// A u32 little-endian length and that many bytes, taken from the front of
/// `data`; a truncated section is taken as far as it goes.
pub fn section<'a>(data: &mut &'a [u8]) -> &'a [u8] {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        let taken = *data;
        *data = &[];
        return &taken[..0];
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (taken, rest) = rest.split_at(len);
    *data = rest;
    taken
}

/// The pieces a body arrives in: control bytes cycled, or the whole body.
pub fn pieces<'b>(body: &'b [u8], chunks: &[u8]) -> Vec<&'b [u8]> {
    if chunks.is_empty() || body.is_empty() {
        return vec![body];
    }
    let mut out = Vec::new();
    let mut rest = body;
    for &c in chunks.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (now, later) = rest.split_at((c as usize + 1).min(rest.len()));
        out.push(now);
        rest = later;
    }
    out
}

/// The number a published record holds for `key` (its short name), if any.
pub fn number(record: &str, key: &str) -> Option<u64> {
    // The published record (format 2): values by position (names::published).
    let at = wirelens_core::names::published::FIELDS
        .iter()
        .position(|(wire, _)| *wire == key)?;
    record.split(',').nth(at)?.parse().ok()
}

/// The published record's protocol (its first value), if it has one.
pub fn protocol_text(record: &str) -> Option<&str> {
    record.split(',').next().filter(|p| !p.is_empty())
}
