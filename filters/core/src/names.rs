//! The record's key names: the attribute names ([`keys`], what the
//! Collector stores and the README defines) and the short names it is
//! published under ([`wire`]), in the fixed order the record writes them.

/// The keys of the `wirelens.record` JSON object.
pub mod keys {
    pub const PROTOCOL: &str = "wirelens.protocol";
    pub const OPERATION: &str = "wirelens.operation";
    pub const RPC_SERVICE: &str = "rpc.service";
    pub const RPC_METHOD: &str = "rpc.method";
    pub const STREAMING: &str = "wirelens.streaming";
    pub const ROUTE: &str = "http.route";
    pub const URL_PATH: &str = "url.path";
    pub const GRPC_STATUS: &str = "rpc.grpc.status_code";
    pub const GRPC_MESSAGE: &str = "wirelens.grpc.message";
    pub const REQ_HEADER_SIZE: &str = "wirelens.request.header.size";
    pub const RESP_HEADER_SIZE: &str = "wirelens.response.header.size";
    pub const RESP_TRAILER_SIZE: &str = "wirelens.response.trailer.size";
    pub const REQ_BODY_SIZE: &str = "http.request.body.size";
    pub const RESP_BODY_SIZE: &str = "http.response.body.size";
    pub const REQ_MESSAGES: &str = "wirelens.request.messages";
    pub const RESP_MESSAGES: &str = "wirelens.response.messages";
    pub const REQ_MESSAGE_BYTES: &str = "wirelens.request.message.bytes";
    pub const REQ_MESSAGE_MIN: &str = "wirelens.request.message.min";
    pub const REQ_MESSAGE_MAX: &str = "wirelens.request.message.max";
    pub const RESP_MESSAGE_BYTES: &str = "wirelens.response.message.bytes";
    pub const RESP_MESSAGE_MIN: &str = "wirelens.response.message.min";
    pub const RESP_MESSAGE_MAX: &str = "wirelens.response.message.max";
    pub const REQ_FRAMING_BYTES: &str = "wirelens.request.framing.bytes";
    pub const RESP_FRAMING_BYTES: &str = "wirelens.response.framing.bytes";
    pub const REQ_COMPRESSED: &str = "wirelens.request.compressed_messages";
    pub const RESP_COMPRESSED: &str = "wirelens.response.compressed_messages";
    pub const TTFB_US: &str = "wirelens.time_to_first_byte_us";
    pub const DURATION_US: &str = "wirelens.duration_us";
    pub const REQ_DURATION_US: &str = "wirelens.request.duration_us";
    pub const MALFORMED: &str = "wirelens.malformed";
    pub const SAMPLE_RATE: &str = "wirelens.sample_rate";
}

/// The short names the record is published under (`Record::write_json`),
/// one per entry of [`keys`]. Envoy pays for every byte of the record it
/// exports (the access-log line, the span tag): the attribute names were
/// two thirds of it (`docs/performance.md`). The Collector maps them back
/// (collector/config.yaml, `transform/wirelens_record`).
pub mod wire {
    pub const PROTOCOL: &str = "pr";
    pub const OPERATION: &str = "op";
    pub const RPC_SERVICE: &str = "sv";
    pub const RPC_METHOD: &str = "md";
    pub const STREAMING: &str = "sg";
    pub const ROUTE: &str = "rt";
    pub const URL_PATH: &str = "up";
    pub const GRPC_STATUS: &str = "gs";
    pub const GRPC_MESSAGE: &str = "gm";
    pub const REQ_HEADER_SIZE: &str = "qh";
    pub const RESP_HEADER_SIZE: &str = "sh";
    pub const RESP_TRAILER_SIZE: &str = "tr";
    pub const REQ_BODY_SIZE: &str = "qb";
    pub const RESP_BODY_SIZE: &str = "sb";
    pub const REQ_MESSAGES: &str = "qm";
    pub const RESP_MESSAGES: &str = "sm";
    pub const REQ_MESSAGE_BYTES: &str = "qmb";
    pub const REQ_MESSAGE_MIN: &str = "qmn";
    pub const REQ_MESSAGE_MAX: &str = "qmx";
    pub const RESP_MESSAGE_BYTES: &str = "smb";
    pub const RESP_MESSAGE_MIN: &str = "smn";
    pub const RESP_MESSAGE_MAX: &str = "smx";
    pub const REQ_FRAMING_BYTES: &str = "qf";
    pub const RESP_FRAMING_BYTES: &str = "sf";
    pub const REQ_COMPRESSED: &str = "qc";
    pub const RESP_COMPRESSED: &str = "sc";
    pub const TTFB_US: &str = "tt";
    pub const DURATION_US: &str = "du";
    pub const REQ_DURATION_US: &str = "qd";
    pub const MALFORMED: &str = "mf";
    pub const SAMPLE_RATE: &str = "sr";
}

/// Every key the record can hold, in the fixed order they appear in (keys
/// with an unknown value are omitted).
pub const KEYS: [&str; 31] = [
    keys::PROTOCOL,
    keys::OPERATION,
    keys::RPC_SERVICE,
    keys::RPC_METHOD,
    keys::STREAMING,
    keys::ROUTE,
    keys::URL_PATH,
    keys::GRPC_STATUS,
    keys::GRPC_MESSAGE,
    keys::REQ_HEADER_SIZE,
    keys::RESP_HEADER_SIZE,
    keys::RESP_TRAILER_SIZE,
    keys::REQ_BODY_SIZE,
    keys::RESP_BODY_SIZE,
    keys::REQ_MESSAGES,
    keys::RESP_MESSAGES,
    keys::REQ_MESSAGE_BYTES,
    keys::REQ_MESSAGE_MIN,
    keys::REQ_MESSAGE_MAX,
    keys::RESP_MESSAGE_BYTES,
    keys::RESP_MESSAGE_MIN,
    keys::RESP_MESSAGE_MAX,
    keys::REQ_FRAMING_BYTES,
    keys::RESP_FRAMING_BYTES,
    keys::REQ_COMPRESSED,
    keys::RESP_COMPRESSED,
    keys::TTFB_US,
    keys::DURATION_US,
    keys::REQ_DURATION_US,
    keys::MALFORMED,
    keys::SAMPLE_RATE,
];

/// [`KEYS`] as published: `WIRE_KEYS[i]` is the short name of `KEYS[i]`.
pub const WIRE_KEYS: [&str; 31] = [
    wire::PROTOCOL,
    wire::OPERATION,
    wire::RPC_SERVICE,
    wire::RPC_METHOD,
    wire::STREAMING,
    wire::ROUTE,
    wire::URL_PATH,
    wire::GRPC_STATUS,
    wire::GRPC_MESSAGE,
    wire::REQ_HEADER_SIZE,
    wire::RESP_HEADER_SIZE,
    wire::RESP_TRAILER_SIZE,
    wire::REQ_BODY_SIZE,
    wire::RESP_BODY_SIZE,
    wire::REQ_MESSAGES,
    wire::RESP_MESSAGES,
    wire::REQ_MESSAGE_BYTES,
    wire::REQ_MESSAGE_MIN,
    wire::REQ_MESSAGE_MAX,
    wire::RESP_MESSAGE_BYTES,
    wire::RESP_MESSAGE_MIN,
    wire::RESP_MESSAGE_MAX,
    wire::REQ_FRAMING_BYTES,
    wire::RESP_FRAMING_BYTES,
    wire::REQ_COMPRESSED,
    wire::RESP_COMPRESSED,
    wire::TTFB_US,
    wire::DURATION_US,
    wire::REQ_DURATION_US,
    wire::MALFORMED,
    wire::SAMPLE_RATE,
];

/// The attribute name of a published short name.
pub fn attribute_name(wire: &str) -> Option<&'static str> {
    WIRE_KEYS.iter().position(|w| *w == wire).map(|i| KEYS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        for names in [KEYS, WIRE_KEYS] {
            let mut ks = names.to_vec();
            ks.sort_unstable();
            ks.dedup();
            assert_eq!(ks.len(), names.len());
        }
    }
}
