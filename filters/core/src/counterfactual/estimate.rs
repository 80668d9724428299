//! One sampled call's counterfactual: what its payloads are read as, fed
//! from the call's body callbacks, and the record fields at the end.

use super::capture::Capture;
use super::{
    json_body_size, proto_message_size, proto_message_size_of_protobuf, BodyField, Reason,
};
use crate::classify::{classify, Protocol};
use crate::opmap::{strip_query, MessageTypes, OpMap};
use crate::percent::decode_url_component;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor};

/// How one direction's payload is encoded, and so which size it yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    /// A JSON body: yields the protobuf message size.
    Json,
    /// A protobuf body (REST with protobuf): yields the JSON body size.
    Proto,
    /// gRPC messages: yield the JSON body size, summed.
    Frames,
}

/// The counterfactual fields of one record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counterfactual {
    pub reason: Option<Reason>,
    pub request_proto: Option<u64>,
    pub response_proto: Option<u64>,
    pub request_json: Option<u64>,
    pub response_json: Option<u64>,
}

/// One direction: its encoding, what it binds, and its payload so far.
#[derive(Clone, Debug)]
struct Side {
    encoding: Encoding,
    capture: Capture,
    result: Option<Result<u64, Reason>>,
    /// A protobuf REST request's gRPC message: its body with the path and
    /// query bound (the body alone lacks the fields in the URL).
    grpc_message: Option<u64>,
}

impl Side {
    fn new(encoding: Encoding, max: usize) -> Self {
        let capture = match encoding {
            Encoding::Frames => Capture::frames(max),
            _ => Capture::whole(max),
        };
        Side {
            encoding,
            capture,
            result: None,
            grpc_message: None,
        }
    }

    fn failed(reason: Reason) -> Self {
        let mut side = Side::new(Encoding::Json, 0);
        side.result = Some(Err(reason));
        side
    }
}

/// The schema-side of one call: its message types and REST binding.
#[derive(Clone, Debug)]
struct Binding {
    request: MessageDescriptor,
    response: MessageDescriptor,
    body: Option<String>,
    response_body: Option<String>,
    /// Field paths of the rule's path variables.
    path_fields: Vec<String>,
    /// REST calls: the path variables and query parameters, decoded.
    bindings: Vec<(String, String)>,
}

/// The counterfactual of one call sampled for it.
#[derive(Clone, Debug)]
pub struct Estimate {
    binding: Option<Binding>,
    /// Why there will be no estimate, decided before any payload.
    early: Option<Reason>,
    max: usize,
    request: Option<Side>,
    response: Option<Side>,
    rest: bool,
    http_status: Option<u16>,
}

fn is_json(content_type: Option<&[u8]>) -> bool {
    let Some(ct) = content_type else {
        return true;
    };
    let media = ct.split(|&b| b == b';').next().unwrap_or(b"");
    let media = media.trim_ascii();
    media.eq_ignore_ascii_case(b"application/json")
        || (media.len() > 5 && media[media.len() - 5..].eq_ignore_ascii_case(b"+json"))
}

/// A protobuf body: the media type that makes a REST call `rest-proto`.
fn is_protobuf(content_type: Option<&[u8]>) -> bool {
    classify(content_type) == Protocol::RestProto
}

fn compressed(content_encoding: Option<&[u8]>) -> bool {
    content_encoding.is_some_and(|e| {
        let e = e.trim_ascii();
        !e.is_empty() && !e.eq_ignore_ascii_case(b"identity")
    })
}

/// The request headers a counterfactual reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestHeaders<'a> {
    pub path: &'a [u8],
    pub content_type: Option<&'a [u8]>,
    pub content_encoding: Option<&'a [u8]>,
}

impl Estimate {
    /// A call sampled for the counterfactual: `op` and `rule` as the map
    /// resolved them (`None`: a call the map does not know).
    pub fn start(
        map: &OpMap,
        protocol: Protocol,
        op: Option<usize>,
        rule: Option<usize>,
        headers: RequestHeaders<'_>,
        max: usize,
    ) -> Self {
        let rest = !protocol.is_grpc_family();
        let mut e = Estimate {
            binding: None,
            early: None,
            max,
            request: None,
            response: None,
            rest,
            http_status: None,
        };
        let operation = op.and_then(|i| map.operation(i));
        let Some(MessageTypes { request, response }) = operation.and_then(|o| o.types.clone())
        else {
            e.early = Some(Reason::NoSchema);
            return e;
        };
        // REST: the rule the call matched; the gRPC family: the operation's
        // main rule, the one a REST twin would be called through.
        let rule = if rest {
            rule
        } else {
            operation.and_then(|o| o.main_rule)
        }
        .and_then(|r| map.rule(r));
        let mut binding = Binding {
            request,
            response,
            body: rule.and_then(|r| r.body.clone()),
            response_body: rule.and_then(|r| r.response_body.clone()),
            path_fields: rule.map_or_else(Vec::new, |r| r.variables().map(String::from).collect()),
            bindings: Vec::new(),
        };
        if rule.is_none() {
            // No REST route: the twin a REST API would most likely add, a
            // POST of the whole message.
            binding.body = Some("*".to_string());
        }
        if rest {
            if let Some(rule) = rule {
                let path = strip_query(headers.path);
                let mut bad = false;
                rule.captures(path, |field, raw| match decode_url_component(raw, false) {
                    Some(v) => binding.bindings.push((field.to_string(), v)),
                    None => bad = true,
                });
                if let Some(q) = headers
                    .path
                    .get(path.len()..)
                    .and_then(|r| r.strip_prefix(b"?"))
                {
                    let q = q.split(|&b| b == b'#').next().unwrap_or(b"");
                    for pair in q.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
                        let (k, v) = match pair.iter().position(|&b| b == b'=') {
                            Some(i) => (&pair[..i], &pair[i + 1..]),
                            None => (pair, &b""[..]),
                        };
                        match (decode_url_component(k, true), decode_url_component(v, true)) {
                            (Some(k), Some(v)) => binding.bindings.push((k, v)),
                            _ => bad = true,
                        }
                    }
                }
                if bad {
                    e.early = Some(Reason::Mismatch);
                }
            }
        }
        e.binding = Some(binding);
        e.request = Some(if compressed(headers.content_encoding) {
            Side::failed(Reason::Compressed)
        } else if !rest {
            Side::new(Encoding::Frames, max)
        } else if is_protobuf(headers.content_type) {
            Side::new(Encoding::Proto, max)
        } else if is_json(headers.content_type) {
            Side::new(Encoding::Json, max)
        } else {
            Side::failed(Reason::Mismatch)
        });
        e
    }

    /// True while one direction's bytes are wanted.
    pub fn wants(&self, request: bool) -> bool {
        let side = if request {
            &self.request
        } else {
            &self.response
        };
        side.as_ref()
            .is_some_and(|s| s.result.is_none() && s.capture.wants_bytes())
    }

    /// Whether the response headers' entries are needed (REST: status,
    /// content type and encoding).
    pub fn needs_response_headers(&self) -> bool {
        self.rest && self.binding.is_some()
    }

    /// Body bytes of one direction (decoded, for gRPC-Web-text).
    pub fn bytes(&mut self, request: bool, bytes: &[u8]) {
        let side = if request {
            &mut self.request
        } else {
            &mut self.response
        };
        if let (Some(side), Some(binding)) = (side.as_mut(), self.binding.as_ref()) {
            feed(side, binding, request, bytes);
        }
    }

    /// One direction ended.
    pub fn end(&mut self, request: bool) {
        let side = if request {
            &mut self.request
        } else {
            &mut self.response
        };
        if let (Some(side), Some(binding)) = (side.as_mut(), self.binding.as_ref()) {
            finish(side, binding, request);
        }
    }

    /// The response began. REST: its headers' `:status`, `content-type` and
    /// `content-encoding` (entries given); the gRPC family: framed as the
    /// call was (`grpc_body`: the response body is read as frames).
    pub fn response_headers<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        grpc_body: bool,
    ) {
        if self.binding.is_none() || self.response.is_some() {
            return;
        }
        if !self.rest {
            self.response = Some(if grpc_body {
                Side::new(Encoding::Frames, self.max)
            } else {
                Side::failed(Reason::NotOk)
            });
            return;
        }
        let (mut ct, mut ce) = (None, None);
        for (n, v) in headers {
            if n == b":status" {
                self.http_status = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok());
            } else if n.eq_ignore_ascii_case(b"content-type") {
                ct = Some(v);
            } else if n.eq_ignore_ascii_case(b"content-encoding") {
                ce = Some(v);
            }
        }
        self.response = Some(if compressed(ce) {
            Side::failed(Reason::Compressed)
        } else if is_protobuf(ct) {
            Side::new(Encoding::Proto, self.max)
        } else if is_json(ct) {
            Side::new(Encoding::Json, self.max)
        } else {
            Side::failed(Reason::Mismatch)
        });
    }

    /// The record's fields. `grpc_status`: the call's (gRPC family).
    pub fn result(&self, grpc_status: Option<u32>) -> Counterfactual {
        let mut out = Counterfactual::default();
        let ok = if self.rest {
            self.http_status.is_some_and(|s| (200..300).contains(&s))
        } else {
            grpc_status == Some(0)
        };
        let side = |s: &Option<Side>| match s {
            Some(Side {
                result: Some(r), ..
            }) => *r,
            Some(Side { result: None, .. }) | None => Err(Reason::Mismatch),
        };
        let (req, resp) = (side(&self.request), side(&self.response));
        let reason = if let Some(r) = self.early {
            r
        } else if !ok {
            Reason::NotOk
        } else if let Err(r) = req {
            r
        } else if let Err(r) = resp {
            r
        } else {
            Reason::Ok
        };
        out.reason = Some(reason);
        if reason == Reason::Ok {
            let put =
                |s: &Option<Side>, v: u64, proto: &mut Option<u64>, json: &mut Option<u64>| match s
                    .as_ref()
                    .map(|s| s.encoding)
                {
                    Some(Encoding::Json) => *proto = Some(v),
                    _ => *json = Some(v),
                };
            if let Ok(v) = req {
                put(
                    &self.request,
                    v,
                    &mut out.request_proto,
                    &mut out.request_json,
                );
            }
            if let Some(v) = self.request.as_ref().and_then(|s| s.grpc_message) {
                out.request_proto = Some(v);
            }
            if let Ok(v) = resp {
                put(
                    &self.response,
                    v,
                    &mut out.response_proto,
                    &mut out.response_json,
                );
            }
        }
        out
    }
}

/// The estimate for one payload: a message (frames) or a whole body.
fn size_of(
    binding: &Binding,
    request: bool,
    encoding: Encoding,
    payload: &[u8],
) -> Result<u64, Reason> {
    let desc = if request {
        &binding.request
    } else {
        &binding.response
    };
    let body = if request {
        BodyField::request(binding.body.as_deref())
    } else {
        BodyField::response(binding.response_body.as_deref())
    };
    match encoding {
        Encoding::Frames => {
            let path_fields: &[String] = if request { &binding.path_fields } else { &[] };
            json_body_size(desc, payload, body, path_fields)
        }
        Encoding::Json => {
            let bindings = if request {
                &binding.bindings[..]
            } else {
                &[][..]
            };
            proto_message_size(
                desc,
                payload,
                body,
                bindings.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            )
        }
        // A protobuf REST body holds the body part of the message: the
        // message itself for `*` (path fields are not in it), or the bound
        // field's message.
        Encoding::Proto => match body {
            BodyField::None => Ok(0),
            BodyField::Whole => json_body_size(desc, payload, BodyField::Whole, &[]),
            BodyField::Field(f) => match desc.get_field_by_name(f).map(|f| f.kind()) {
                Some(Kind::Message(m)) => {
                    let msg = DynamicMessage::decode(m, payload).map_err(|_| Reason::Mismatch)?;
                    super::protojson::json_size(&msg).ok_or(Reason::Mismatch)
                }
                _ => Err(Reason::Mismatch),
            },
        },
    }
}

fn feed(side: &mut Side, binding: &Binding, request: bool, bytes: &[u8]) {
    if side.result.is_some() {
        return;
    }
    let encoding = side.encoding;
    side.capture
        .feed(bytes, &mut |m| size_of(binding, request, encoding, m));
}

fn finish(side: &mut Side, binding: &Binding, request: bool) {
    if side.result.is_some() {
        return;
    }
    let encoding = side.encoding;
    let mut grpc_message = None;
    side.result = Some(side.capture.finish(&mut |m| {
        if request && encoding == Encoding::Proto {
            grpc_message = Some(proto_message_size_of_protobuf(
                &binding.request,
                m,
                BodyField::request(binding.body.as_deref()),
                binding
                    .bindings
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            )?);
        }
        size_of(binding, request, encoding, m)
    }));
    side.grpc_message = grpc_message;
}
