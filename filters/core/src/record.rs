//! The record one call publishes, and its compact JSON writer.
//!
//! [`Call::record`](crate::Call::record) fills a [`Record`];
//! [`Record::write_published`] writes what the filter publishes (format 2:
//! values by position, [`published`]), [`Record::write_json`] the JSON object
//! under the short names of [`wire`](crate::names::wire) that filters
//! published before (format 1, which the Collector still reads), and
//! [`Record::to_json`] the JSON under the attribute names the Collector
//! expands either to.

use crate::classify::Protocol;
use crate::config::Fields;
use crate::counterfactual::estimate::Counterfactual;
use crate::frame::FrameStats;
#[cfg(any(test, feature = "test-support"))]
use crate::json::ObjectWriter;
use crate::json::{cut_utf8, PositionalWriter};
use crate::names::published::pos;
#[cfg(any(test, feature = "test-support"))]
use crate::names::{keys, published, wire};
use crate::opmap::{strip_query, Streaming};

/// Most bytes of `url.path` published (UTF-8, before JSON escaping): enough
/// to tell which unknown paths were hit, bounded whatever a client sends.
pub const URL_PATH_MAX_BYTES: usize = 128;

/// `url.path` of an unknown call: the request path without query string or
/// fragment, invalid UTF-8 replaced by U+FFFD, cut to at most
/// [`URL_PATH_MAX_BYTES`] on a character boundary. Only a bounded head of
/// `path` is looked at, whatever its length.
pub fn url_path(path: &[u8]) -> String {
    let path = strip_query(path);
    // Every input byte yields at least one output byte, so the kept prefix
    // comes from the first URL_PATH_MAX_BYTES input bytes; 3 more let a
    // character straddling the cut decode whole (and be dropped) rather
    // than turn into U+FFFD.
    let head = &path[..path.len().min(URL_PATH_MAX_BYTES + 3)];
    cut_utf8(&String::from_utf8_lossy(head), URL_PATH_MAX_BYTES).to_string()
}

/// Frame statistics of both directions (gRPC family only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    /// The request body, as the client sent it (decoded for grpc-web-text).
    pub request: FrameStats,
    /// The response body, as the client receives it.
    pub response: FrameStats,
}

/// The per-call record (see README for the definition of every key).
/// Holds every value; [`Record::write_json`] applies `fields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub protocol: Option<Protocol>,
    pub operation: &'a str,
    pub rpc_service: &'a str,
    pub rpc_method: &'a str,
    pub streaming: Option<Streaming>,
    pub route: &'a str,
    /// The operation map's key of (operation, rule): published instead of
    /// the four fields above (empty for calls the map does not know).
    pub opmap_key: &'a str,
    /// Only for calls the map does not know ([`url_path`]).
    pub url_path: &'a str,
    pub grpc_status: Option<u32>,
    pub grpc_message: &'a str,
    pub req_header_bytes: u64,
    pub resp_header_bytes: u64,
    pub resp_trailer_bytes: u64,
    pub req_body_bytes: u64,
    pub resp_body_bytes: u64,
    /// `None` outside the gRPC family.
    pub frames: Option<Frames>,
    pub ttfb_us: Option<u64>,
    pub duration_us: Option<u64>,
    pub request_duration_us: Option<u64>,
    pub malformed: bool,
    /// Optional key groups to publish.
    pub fields: Fields,
    /// JSON text of the configured sample rate, when below 1.
    pub sample_rate: Option<&'a str>,
    /// The counterfactual of a call sampled for it (`reason` `None`: not
    /// sampled, nothing written).
    pub counterfactual: Counterfactual,
    /// JSON text of the counterfactual rate, when below 1 (written only
    /// with a counterfactual).
    pub counterfactual_rate: Option<&'a str>,
}

impl Record<'_> {
    /// The record as the filter publishes it (format 2, [`published`]),
    /// replacing the contents of `out` (reuse one buffer and publishing does
    /// not allocate once it has grown): its values by position,
    /// comma-separated, unknown values and disabled groups empty, trailing
    /// empties left off, text escaped (`%25`, `%2C`). `rpc.service`,
    /// `rpc.method`, `wirelens.streaming` and `http.route` are not written:
    /// the operation map's key stands for them ([`crate::opmap::labels_key`]).
    pub fn write_published(&self, out: &mut String) {
        out.clear();
        let mut w = PositionalWriter::new(out);
        if let Some(p) = self.protocol {
            w.raw(pos::PROTOCOL, p.as_str());
        }
        if !self.operation.is_empty() {
            w.string(pos::OPERATION, self.operation);
        }
        if !self.opmap_key.is_empty() {
            w.raw(pos::OPMAP_KEY, self.opmap_key);
        }
        w.number(pos::REQ_HEADER_SIZE, self.req_header_bytes);
        w.number(pos::RESP_HEADER_SIZE, self.resp_header_bytes);
        w.number(pos::RESP_TRAILER_SIZE, self.resp_trailer_bytes);
        w.number(pos::REQ_BODY_SIZE, self.req_body_bytes);
        w.number(pos::RESP_BODY_SIZE, self.resp_body_bytes);
        if let Some(t) = self.ttfb_us {
            w.number(pos::TTFB_US, t);
        }
        if let Some(t) = self.duration_us {
            w.number(pos::DURATION_US, t);
        }
        if let Some(t) = self.request_duration_us {
            if self.fields.contains(Fields::REQUEST_DURATION) {
                w.number(pos::REQ_DURATION_US, t);
            }
        }
        w.number(pos::MALFORMED, self.malformed as u64);
        if let Some(rate) = self.sample_rate {
            w.raw(pos::SAMPLE_RATE, rate);
        }
        if let Some(code) = self.grpc_status {
            w.number(pos::GRPC_STATUS, code as u64);
        }
        if let Some(Frames { request, response }) = &self.frames {
            w.number(pos::REQ_MESSAGES, request.messages);
            w.number(pos::RESP_MESSAGES, response.messages);
            if self.fields.contains(Fields::MESSAGE_SIZES) {
                let sizes = [
                    (
                        request,
                        [
                            pos::REQ_MESSAGE_BYTES,
                            pos::REQ_MESSAGE_MIN,
                            pos::REQ_MESSAGE_MAX,
                        ],
                    ),
                    (
                        response,
                        [
                            pos::RESP_MESSAGE_BYTES,
                            pos::RESP_MESSAGE_MIN,
                            pos::RESP_MESSAGE_MAX,
                        ],
                    ),
                ];
                for (st, [bytes, min, max]) in sizes {
                    w.number(bytes, st.message_bytes);
                    if st.messages > 0 {
                        w.number(min, st.message_min as u64);
                        w.number(max, st.message_max as u64);
                    }
                }
            }
            if self.fields.contains(Fields::FRAMING) {
                w.number(pos::REQ_FRAMING_BYTES, request.framing_bytes);
                w.number(pos::RESP_FRAMING_BYTES, response.framing_bytes);
            }
            if self.fields.contains(Fields::COMPRESSION) {
                w.number(pos::REQ_COMPRESSED, request.compressed_messages);
                w.number(pos::RESP_COMPRESSED, response.compressed_messages);
            }
        }
        if self.fields.contains(Fields::GRPC_MESSAGE) && !self.grpc_message.is_empty() {
            w.string(pos::GRPC_MESSAGE, self.grpc_message);
        }
        if !self.url_path.is_empty() {
            w.string(pos::URL_PATH, self.url_path);
        }
        let cf = &self.counterfactual;
        if let Some(reason) = cf.reason {
            w.raw(pos::COUNTERFACTUAL_REASON, reason.as_str());
            let sizes = [
                (cf.request_proto, pos::COUNTERFACTUAL_REQ_PROTO_SIZE),
                (cf.response_proto, pos::COUNTERFACTUAL_RESP_PROTO_SIZE),
                (cf.request_json, pos::COUNTERFACTUAL_REQ_JSON_SIZE),
                (cf.response_json, pos::COUNTERFACTUAL_RESP_JSON_SIZE),
            ];
            for (value, at) in sizes {
                if let Some(v) = value {
                    w.number(at, v);
                }
            }
            if let Some(rate) = self.counterfactual_rate {
                w.raw(pos::COUNTERFACTUAL_RATE, rate);
            }
        }
    }

    /// The record as filters published it before format 2 (format 1): a
    /// compact JSON object under the short names, every field (keys in
    /// [`KEYS`](crate::KEYS) order, unknown values and disabled groups
    /// omitted), replacing the contents of `out`. The Collector still reads
    /// it (a fleet upgrades Envoy by Envoy); tests and harnesses write it.
    #[cfg(any(test, feature = "test-support"))]
    pub fn write_json(&self, out: &mut String) {
        self.write_json_named(out, true);
    }

    /// The record as JSON, under the short names it is published with
    /// (`short`, [`wire`]) or under its attribute names ([`keys`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn write_json_named(&self, out: &mut String, short: bool) {
        let n = |attribute: &'static str, wire: &'static str| if short { wire } else { attribute };
        out.clear();
        let mut w = ObjectWriter::new(out);
        let text = |w: &mut ObjectWriter, k: &str, v: &str| {
            if !v.is_empty() {
                w.string(k, v);
            }
        };
        if let Some(p) = self.protocol {
            w.string(n(keys::PROTOCOL, wire::PROTOCOL), p.as_str());
        }
        text(&mut w, n(keys::OPERATION, wire::OPERATION), self.operation);
        text(
            &mut w,
            n(keys::RPC_SERVICE, wire::RPC_SERVICE),
            self.rpc_service,
        );
        text(
            &mut w,
            n(keys::RPC_METHOD, wire::RPC_METHOD),
            self.rpc_method,
        );
        if let Some(s) = self.streaming {
            w.string(n(keys::STREAMING, wire::STREAMING), s.as_str());
        }
        text(&mut w, n(keys::ROUTE, wire::ROUTE), self.route);
        text(&mut w, n(keys::URL_PATH, wire::URL_PATH), self.url_path);
        if let Some(code) = self.grpc_status {
            w.number(n(keys::GRPC_STATUS, wire::GRPC_STATUS), code as u64);
        }
        if self.fields.contains(Fields::GRPC_MESSAGE) {
            text(
                &mut w,
                n(keys::GRPC_MESSAGE, wire::GRPC_MESSAGE),
                self.grpc_message,
            );
        }
        w.number(
            n(keys::REQ_HEADER_SIZE, wire::REQ_HEADER_SIZE),
            self.req_header_bytes,
        );
        w.number(
            n(keys::RESP_HEADER_SIZE, wire::RESP_HEADER_SIZE),
            self.resp_header_bytes,
        );
        w.number(
            n(keys::RESP_TRAILER_SIZE, wire::RESP_TRAILER_SIZE),
            self.resp_trailer_bytes,
        );
        w.number(
            n(keys::REQ_BODY_SIZE, wire::REQ_BODY_SIZE),
            self.req_body_bytes,
        );
        w.number(
            n(keys::RESP_BODY_SIZE, wire::RESP_BODY_SIZE),
            self.resp_body_bytes,
        );
        if let Some(Frames { request, response }) = &self.frames {
            w.number(n(keys::REQ_MESSAGES, wire::REQ_MESSAGES), request.messages);
            w.number(
                n(keys::RESP_MESSAGES, wire::RESP_MESSAGES),
                response.messages,
            );
            if self.fields.contains(Fields::MESSAGE_SIZES) {
                let sizes = [
                    (
                        request,
                        [
                            n(keys::REQ_MESSAGE_BYTES, wire::REQ_MESSAGE_BYTES),
                            n(keys::REQ_MESSAGE_MIN, wire::REQ_MESSAGE_MIN),
                            n(keys::REQ_MESSAGE_MAX, wire::REQ_MESSAGE_MAX),
                        ],
                    ),
                    (
                        response,
                        [
                            n(keys::RESP_MESSAGE_BYTES, wire::RESP_MESSAGE_BYTES),
                            n(keys::RESP_MESSAGE_MIN, wire::RESP_MESSAGE_MIN),
                            n(keys::RESP_MESSAGE_MAX, wire::RESP_MESSAGE_MAX),
                        ],
                    ),
                ];
                for (st, [bytes, min, max]) in sizes {
                    w.number(bytes, st.message_bytes);
                    if st.messages > 0 {
                        w.number(min, st.message_min as u64);
                        w.number(max, st.message_max as u64);
                    }
                }
            }
            if self.fields.contains(Fields::FRAMING) {
                w.number(
                    n(keys::REQ_FRAMING_BYTES, wire::REQ_FRAMING_BYTES),
                    request.framing_bytes,
                );
                w.number(
                    n(keys::RESP_FRAMING_BYTES, wire::RESP_FRAMING_BYTES),
                    response.framing_bytes,
                );
            }
            if self.fields.contains(Fields::COMPRESSION) {
                w.number(
                    n(keys::REQ_COMPRESSED, wire::REQ_COMPRESSED),
                    request.compressed_messages,
                );
                w.number(
                    n(keys::RESP_COMPRESSED, wire::RESP_COMPRESSED),
                    response.compressed_messages,
                );
            }
        }
        if let Some(t) = self.ttfb_us {
            w.number(n(keys::TTFB_US, wire::TTFB_US), t);
        }
        if let Some(t) = self.duration_us {
            w.number(n(keys::DURATION_US, wire::DURATION_US), t);
        }
        if let Some(t) = self.request_duration_us {
            if self.fields.contains(Fields::REQUEST_DURATION) {
                w.number(n(keys::REQ_DURATION_US, wire::REQ_DURATION_US), t);
            }
        }
        w.number(n(keys::MALFORMED, wire::MALFORMED), self.malformed as u64);
        if let Some(rate) = self.sample_rate {
            w.raw(n(keys::SAMPLE_RATE, wire::SAMPLE_RATE), rate);
        }
        let cf = &self.counterfactual;
        if let Some(reason) = cf.reason {
            w.string(
                n(keys::COUNTERFACTUAL_REASON, wire::COUNTERFACTUAL_REASON),
                reason.as_str(),
            );
            let sizes = [
                (
                    cf.request_proto,
                    n(
                        keys::COUNTERFACTUAL_REQ_PROTO_SIZE,
                        wire::COUNTERFACTUAL_REQ_PROTO_SIZE,
                    ),
                ),
                (
                    cf.response_proto,
                    n(
                        keys::COUNTERFACTUAL_RESP_PROTO_SIZE,
                        wire::COUNTERFACTUAL_RESP_PROTO_SIZE,
                    ),
                ),
                (
                    cf.request_json,
                    n(
                        keys::COUNTERFACTUAL_REQ_JSON_SIZE,
                        wire::COUNTERFACTUAL_REQ_JSON_SIZE,
                    ),
                ),
                (
                    cf.response_json,
                    n(
                        keys::COUNTERFACTUAL_RESP_JSON_SIZE,
                        wire::COUNTERFACTUAL_RESP_JSON_SIZE,
                    ),
                ),
            ];
            for (value, key) in sizes {
                if let Some(v) = value {
                    w.number(key, v);
                }
            }
            if let Some(rate) = self.counterfactual_rate {
                w.raw(
                    n(keys::COUNTERFACTUAL_RATE, wire::COUNTERFACTUAL_RATE),
                    rate,
                );
            }
        }
        w.finish();
    }

    /// The record as a new JSON string under its attribute names, as the
    /// Collector expands it (tests, harnesses).
    #[cfg(any(test, feature = "test-support"))]
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(512);
        self.write_json_named(&mut s, false);
        s
    }
}

/// A published record, as the Collector expands it, under the short names:
/// format 2 decoded by position (text unescaped, numbers typed as format 1's
/// JSON has them), the four labels restored from `map` by (operation, key) as
/// `transform/wirelens_opmap` restores them (the key dropped once it
/// resolved, kept as `ok` otherwise); format 1 (a JSON object) as it is.
/// Tests and harnesses (feature test-support).
#[cfg(any(test, feature = "test-support"))]
pub fn decode_published(
    text: &str,
    map: &crate::opmap::OpMap,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    if text.starts_with('{') {
        return match serde_json::from_str(text) {
            Ok(Value::Object(m)) => m,
            _ => panic!("not a format-1 record: {text}"),
        };
    }
    let mut m = serde_json::Map::new();
    let values: Vec<&str> = text.split(',').collect();
    assert!(
        values.len() <= published::LEN,
        "more positions than {}: {text}",
        published::LEN
    );
    for (value, (wire, kind)) in values.iter().zip(published::FIELDS) {
        if value.is_empty() {
            continue;
        }
        let v = match kind {
            "string" => Value::from(value.replace("%2C", ",").replace("%25", "%")),
            "number" => Value::from(
                value
                    .parse::<f64>()
                    .unwrap_or_else(|e| panic!("{wire}: {e}: {text}")),
            ),
            _ => Value::from(
                value
                    .parse::<u64>()
                    .unwrap_or_else(|e| panic!("{wire}: {e}: {text}")),
            ),
        };
        m.insert(wire.to_string(), v);
    }
    let (Some(Value::String(op)), Some(Value::String(key))) =
        (m.get(wire::OPERATION), m.get(published::KEY))
    else {
        return m;
    };
    let labels = map.operations().iter().enumerate().find_map(|(i, o)| {
        if o.operation != *op {
            return None;
        }
        if o.key == *key {
            return Some((o, ""));
        }
        map.rules()
            .iter()
            .find(|r| r.op == i && r.key == *key)
            .map(|r| (o, r.pattern.as_str()))
    });
    if let Some((o, route)) = labels {
        let restored = [
            (wire::RPC_SERVICE, o.rpc_service.as_str()),
            (wire::RPC_METHOD, o.rpc_method.as_str()),
            (wire::STREAMING, o.streaming.map_or("", Streaming::as_str)),
            (wire::ROUTE, route),
        ];
        for (k, v) in restored {
            if !v.is_empty() {
                m.insert(k.to_string(), Value::from(v));
            }
        }
        m.remove(published::KEY);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_path_is_bounded() {
        assert_eq!(url_path(b"/v1/x?token=secret#frag"), "/v1/x");
        assert_eq!(url_path(b"/a\xffb"), "/a\u{FFFD}b");
        assert_eq!(url_path(b""), "");
        let long = vec![b'a'; 8192];
        assert_eq!(url_path(&long), "a".repeat(URL_PATH_MAX_BYTES));
        // A 3-byte character straddling byte 128 is dropped whole.
        let mut path = b"/".repeat(URL_PATH_MAX_BYTES - 1);
        path.extend_from_slice("€€".as_bytes());
        assert_eq!(url_path(&path), "/".repeat(URL_PATH_MAX_BYTES - 1));
        // Replacement characters (3 bytes each) count against the cut too.
        let u = url_path(&[0xff; 200]);
        assert_eq!(u, "\u{FFFD}".repeat(URL_PATH_MAX_BYTES / 3));
    }
}
