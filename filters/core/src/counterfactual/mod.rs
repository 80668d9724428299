//! What the other protocol would have sent: the body bytes of the same
//! message(s) in the other encoding, computed from the payload of a
//! sampled call and the operation's message types (issue 27;
//! `docs/what-if.md`).
//!
//! * A JSON body (REST) → the protobuf message gRPC would carry, with the
//!   fields the `google.api.http` rule binds to the path and query set
//!   ([`proto_message_size`]).
//! * A protobuf message (gRPC family, REST with a protobuf body) → the JSON
//!   body a REST twin would send under the rule's `body` binding
//!   ([`json_body_size`]), as Go's `protojson` prints it ([`protojson`]).
//!
//! Only message bytes are estimated: headers, trailers, the URL and time
//! are not. prost-reflect does the mapping; nothing here keeps a byte of
//! content beyond the call that read it.

pub mod capture;
pub mod estimate;
pub mod protojson;
pub mod wire;

use prost_reflect::{
    DeserializeOptions, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage,
    Value,
};

/// Default share of recorded calls whose payloads are estimated.
pub const DEFAULT_RATE: f64 = 0.01;
/// Default bound on the bytes read for an estimate (a REST body, or one
/// gRPC message of a stream).
pub const DEFAULT_MAX_BYTES: u32 = 64 * 1024;

/// Whether, and why not, a call sampled for the counterfactual has an
/// estimate (`wirelens.counterfactual.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Estimated.
    Ok,
    /// A body (or one message) larger than `counterfactual_max_bytes`.
    TooLarge,
    /// A compressed message or a `content-encoding` other than identity.
    Compressed,
    /// The payload does not match the operation's message type (invalid
    /// JSON or protobuf, an unknown field, a path or query value that does
    /// not parse), or a body the estimate cannot read (a content type that
    /// is neither JSON nor protobuf).
    Mismatch,
    /// The call did not complete OK (HTTP status outside 2xx, or a gRPC
    /// status other than 0): error bodies are not payload.
    NotOk,
    /// The operation map has no message types for the operation (or the
    /// call is not one the map knows).
    NoSchema,
}

impl Reason {
    pub const VARIANTS: [Reason; 6] = [
        Reason::Ok,
        Reason::TooLarge,
        Reason::Compressed,
        Reason::Mismatch,
        Reason::NotOk,
        Reason::NoSchema,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ok => "ok",
            Reason::TooLarge => "too_large",
            Reason::Compressed => "compressed",
            Reason::Mismatch => "mismatch",
            Reason::NotOk => "not_ok",
            Reason::NoSchema => "no_schema",
        }
    }
}

/// Which part of a message a REST body holds (`google.api.http` `body` /
/// `response_body`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyField<'a> {
    /// `"*"` (or no rule: the whole message): every field not bound to the
    /// path.
    Whole,
    /// One field, by its proto name (the body is that field's value).
    Field(&'a str),
    /// No body (a rule without `body`: GET, DELETE): every field travels in
    /// the path or the query.
    None,
}

impl<'a> BodyField<'a> {
    /// The binding for a rule's `body` (request side): absent → none.
    pub fn request(body: Option<&'a str>) -> Self {
        match body {
            None | Some("") => BodyField::None,
            Some("*") => BodyField::Whole,
            Some(f) => BodyField::Field(f),
        }
    }

    /// The binding for a rule's `response_body`: absent → the whole message.
    pub fn response(body: Option<&'a str>) -> Self {
        match body {
            None | Some("") | Some("*") => BodyField::Whole,
            Some(f) => BodyField::Field(f),
        }
    }
}

/// The field a (possibly dotted) path names, by proto or JSON name, with
/// every step but the last a singular message (as the Go REST server and
/// Envoy's transcoder resolve them).
fn resolve_path(desc: &MessageDescriptor, path: &str) -> Option<Vec<FieldDescriptor>> {
    let mut out = Vec::new();
    let mut msg = desc.clone();
    let mut names = path.split('.').peekable();
    while let Some(name) = names.next() {
        let field = msg
            .get_field_by_name(name)
            .or_else(|| msg.get_field_by_json_name(name))?;
        if names.peek().is_some() {
            match field.kind() {
                Kind::Message(m) if !field.is_list() && !field.is_map() => msg = m,
                _ => return None,
            }
        }
        out.push(field);
    }
    Some(out)
}

/// The message at the end of `fields[..fields.len()-1]`, created on the way.
fn parent_mut<'m>(
    mut msg: &'m mut DynamicMessage,
    fields: &[FieldDescriptor],
) -> Option<&'m mut DynamicMessage> {
    for f in &fields[..fields.len().saturating_sub(1)] {
        msg = match msg.get_field_mut(f) {
            Value::Message(m) => m,
            _ => return None,
        };
    }
    Some(msg)
}

/// Bytes of the JSON body a REST twin would send for the protobuf message
/// `payload` of type `desc`: the whole message without the fields bound to
/// `path_fields` (body `*`), one field's value, or nothing.
pub fn json_body_size(
    desc: &MessageDescriptor,
    payload: &[u8],
    body: BodyField<'_>,
    path_fields: &[String],
) -> Result<u64, Reason> {
    let mut msg = DynamicMessage::decode(desc.clone(), payload).map_err(|_| Reason::Mismatch)?;
    match body {
        BodyField::None => Ok(0),
        BodyField::Whole => {
            for path in path_fields {
                if let Some(fields) = resolve_path(desc, path) {
                    if let (Some(parent), Some(last)) =
                        (parent_mut(&mut msg, &fields), fields.last())
                    {
                        parent.clear_field(last);
                    }
                }
            }
            protojson::json_size(&msg).ok_or(Reason::Mismatch)
        }
        BodyField::Field(path) => {
            let fields = resolve_path(desc, path).ok_or(Reason::Mismatch)?;
            let (parent, last) = match (parent_mut(&mut msg, &fields), fields.last()) {
                (Some(p), Some(l)) => (p, l),
                _ => return Err(Reason::Mismatch),
            };
            if let (Kind::Message(_), false) = (last.kind(), last.is_list() || last.is_map()) {
                // A message body: printed as protojson prints any message.
                return match parent.get_field(last).as_ref() {
                    Value::Message(m) => protojson::json_size(m).ok_or(Reason::Mismatch),
                    _ => Err(Reason::Mismatch),
                };
            }
            // A scalar or list body: a one-field message holding it, printed,
            // less the `{"jsonName":` … `}` around the value. A value at its
            // default is not printed there, but the twin still sends it.
            let mut only = DynamicMessage::new(parent.descriptor());
            only.set_field(last, parent.get_field(last).into_owned());
            let size = protojson::json_size(&only).ok_or(Reason::Mismatch)?;
            Ok(match size.checked_sub(last.json_name().len() as u64 + 5) {
                Some(value) if size > 2 => value,
                _ => protojson::default_value_size(last),
            })
        }
    }
}

/// Bytes of the protobuf message gRPC would carry (without its 5-byte
/// prefix) for a REST call: `json` is the body (bound to `body`), and
/// `bindings` are the path variables and query parameters as (field path,
/// value) pairs; a field named more than once is a list.
pub fn proto_message_size<'b>(
    desc: &MessageDescriptor,
    json: &[u8],
    body: BodyField<'_>,
    bindings: impl IntoIterator<Item = (&'b str, &'b str)>,
) -> Result<u64, Reason> {
    let mut msg = proto_message(desc, json, body)?;
    for (path, value) in bindings {
        bind(&mut msg, path, value)?;
    }
    Ok(wire::message_size(&msg))
}

/// Bytes of the protobuf message gRPC would carry for a REST call with a
/// protobuf body (`rest-proto`): the body bound to `body` (the message for
/// `*`, one message field's value, nothing for a rule without a body) and
/// the path variables and query parameters in `bindings`.
pub fn proto_message_size_of_protobuf<'b>(
    desc: &MessageDescriptor,
    payload: &[u8],
    body: BodyField<'_>,
    bindings: impl IntoIterator<Item = (&'b str, &'b str)>,
) -> Result<u64, Reason> {
    let decode =
        |d: MessageDescriptor| DynamicMessage::decode(d, payload).map_err(|_| Reason::Mismatch);
    let mut msg = match body {
        BodyField::None => DynamicMessage::new(desc.clone()),
        BodyField::Whole => decode(desc.clone())?,
        BodyField::Field(path) => {
            let fields = resolve_path(desc, path).ok_or(Reason::Mismatch)?;
            let last = fields.last().ok_or(Reason::Mismatch)?;
            let Kind::Message(m) = last.kind() else {
                return Err(Reason::Mismatch);
            };
            let mut msg = DynamicMessage::new(desc.clone());
            let value = Value::Message(decode(m)?);
            parent_mut(&mut msg, &fields)
                .ok_or(Reason::Mismatch)?
                .set_field(last, value);
            msg
        }
    };
    for (path, value) in bindings {
        bind(&mut msg, path, value)?;
    }
    Ok(wire::message_size(&msg))
}

/// An empty (or blank) JSON body: read as the empty message.
pub fn is_json_empty(json: &[u8]) -> bool {
    json.iter().all(u8::is_ascii_whitespace)
}

fn strict() -> DeserializeOptions {
    DeserializeOptions::new().deny_unknown_fields(true)
}

fn proto_message(
    desc: &MessageDescriptor,
    json: &[u8],
    body: BodyField<'_>,
) -> Result<DynamicMessage, Reason> {
    let parse = |d: MessageDescriptor, text: &[u8]| {
        let mut de = serde_json::Deserializer::from_slice(text);
        let m = DynamicMessage::deserialize_with_options(d, &mut de, &strict())
            .map_err(|_| Reason::Mismatch)?;
        de.end().map_err(|_| Reason::Mismatch)?;
        Ok(m)
    };
    match body {
        BodyField::None => Ok(DynamicMessage::new(desc.clone())),
        // An empty body: the empty message (what the Go REST server reads).
        BodyField::Whole if is_json_empty(json) => Ok(DynamicMessage::new(desc.clone())),
        BodyField::Whole => parse(desc.clone(), json),
        BodyField::Field(path) => {
            let fields = resolve_path(desc, path).ok_or(Reason::Mismatch)?;
            let last = fields.last().ok_or(Reason::Mismatch)?;
            let mut msg = DynamicMessage::new(desc.clone());
            if is_json_empty(json) {
                return Ok(msg);
            }
            // The body is the field's value: read it as that field of a
            // one-field message (`{"name": <body>}`), then move it in.
            let mut wrapped = Vec::with_capacity(json.len() + last.name().len() + 5);
            wrapped.extend_from_slice(b"{\"");
            wrapped.extend_from_slice(last.name().as_bytes());
            wrapped.extend_from_slice(b"\":");
            wrapped.extend_from_slice(json);
            wrapped.push(b'}');
            let holder = parse(last.parent_message().clone(), &wrapped)?;
            let value = holder.get_field(last).into_owned();
            let parent = parent_mut(&mut msg, &fields).ok_or(Reason::Mismatch)?;
            parent.set_field(last, value);
            Ok(msg)
        }
    }
}

/// Sets the field at `path` (proto or JSON names, dotted) from a path or
/// query string value: a scalar or enum, appended when the field is a
/// list. Maps and message leaves are refused, as by the Go REST server.
fn bind(msg: &mut DynamicMessage, path: &str, value: &str) -> Result<(), Reason> {
    let fields = resolve_path(&msg.descriptor(), path).ok_or(Reason::Mismatch)?;
    let last = fields.last().ok_or(Reason::Mismatch)?.clone();
    if last.is_map() {
        return Err(Reason::Mismatch);
    }
    let v = parse_scalar(&last.kind(), value).ok_or(Reason::Mismatch)?;
    let parent = parent_mut(msg, &fields).ok_or(Reason::Mismatch)?;
    if last.is_list() {
        if let Value::List(l) = parent.get_field_mut(&last) {
            l.push(v);
        }
    } else {
        parent.set_field(&last, v);
    }
    Ok(())
}

fn parse_scalar(kind: &Kind, s: &str) -> Option<Value> {
    use ::base64::Engine;
    Some(match kind {
        Kind::String => Value::String(s.to_string()),
        Kind::Bytes => {
            let e = ::base64::engine::general_purpose::URL_SAFE;
            let std = ::base64::engine::general_purpose::STANDARD;
            Value::Bytes(e.decode(s).or_else(|_| std.decode(s)).ok()?.into())
        }
        Kind::Bool => Value::Bool(match s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => return None,
        }),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Value::I32(s.parse().ok()?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Value::I64(s.parse().ok()?),
        Kind::Uint32 | Kind::Fixed32 => Value::U32(s.parse().ok()?),
        Kind::Uint64 | Kind::Fixed64 => Value::U64(s.parse().ok()?),
        Kind::Float => Value::F32(s.parse().ok()?),
        Kind::Double => Value::F64(s.parse().ok()?),
        Kind::Enum(e) => match e.get_value_by_name(s) {
            Some(v) => Value::EnumNumber(v.number()),
            None => Value::EnumNumber(s.parse().ok()?),
        },
        Kind::Message(_) => return None,
    })
}
