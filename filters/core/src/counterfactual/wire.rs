//! Protobuf sizes as Go's `proto.Size` computes them (Python, C++ and Java
//! agree): what a gRPC twin would put on the wire.
//!
//! prost-reflect's own `encoded_len` follows prost, which differs in two
//! places (`tests/counterfactual/README.md`, "Sizes an encoder may get
//! wrong"): it leaves a map entry's default key or value out (`{"": 0}` is
//! `0a 00` there, `0a 04 0a 00 10 00` in Go), and it takes a `float` or
//! `double` field holding `-0.0` for its default (`==`) and drops it, where
//! Go compares bits and writes it. So the size is summed here, field by
//! field, over prost-reflect's message; nothing is encoded.

use prost::encoding::encoded_len_varint as varint;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

/// Bytes of `msg` in the protobuf binary encoding (no gRPC prefix).
pub fn message_size(msg: &DynamicMessage) -> u64 {
    size(msg) as u64
}

fn size(msg: &DynamicMessage) -> usize {
    let mut n = 0;
    for field in msg.descriptor().fields() {
        let value = msg.get_field(&field);
        let tag = tag_len(&field);
        match value.as_ref() {
            Value::Map(entries) => {
                let Kind::Message(entry) = field.kind() else {
                    continue;
                };
                let key_field = entry.map_entry_key_field();
                let value_field = entry.map_entry_value_field();
                for (k, v) in entries {
                    let entry = tag_len(&key_field)
                        + key_len(k, &key_field.kind())
                        + tag_len(&value_field)
                        + value_len(v, &value_field);
                    n += tag + varint(entry as u64) + entry;
                }
            }
            Value::List(items) if field.is_packed() => {
                if !items.is_empty() {
                    let payload: usize = items.iter().map(|v| value_len(v, &field)).sum();
                    n += tag + varint(payload as u64) + payload;
                }
            }
            Value::List(items) => {
                n += items
                    .iter()
                    .map(|v| tag + value_len(v, &field))
                    .sum::<usize>();
            }
            v => {
                let present = if field.supports_presence() {
                    msg.has_field(&field)
                } else {
                    !is_default(v)
                };
                if present {
                    n += tag + value_len(v, &field);
                }
            }
        }
    }
    n + msg.unknown_fields().map(|u| u.encoded_len()).sum::<usize>()
}

fn tag_len(field: &FieldDescriptor) -> usize {
    varint(u64::from(field.number()) << 3)
}

/// The default of a field without presence, by bits for floats as Go.
fn is_default(v: &Value) -> bool {
    match v {
        Value::Bool(b) => !b,
        Value::I32(x) | Value::EnumNumber(x) => *x == 0,
        Value::I64(x) => *x == 0,
        Value::U32(x) => *x == 0,
        Value::U64(x) => *x == 0,
        Value::F32(x) => x.to_bits() == 0,
        Value::F64(x) => x.to_bits() == 0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::Message(_) | Value::List(_) | Value::Map(_) => false,
    }
}

fn zigzag32(x: i32) -> u64 {
    u64::from(((x << 1) ^ (x >> 31)) as u32)
}

fn zigzag64(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

/// Bytes of one value after its tag (a group's closing tag included).
fn value_len(v: &Value, field: &FieldDescriptor) -> usize {
    let kind = field.kind();
    match (v, &kind) {
        (Value::Bool(_), _) => 1,
        (Value::I32(x), Kind::Sint32) => varint(zigzag32(*x)),
        (Value::I32(_), Kind::Sfixed32) => 4,
        (Value::I32(x), _) | (Value::EnumNumber(x), _) => varint(i64::from(*x) as u64),
        (Value::I64(x), Kind::Sint64) => varint(zigzag64(*x)),
        (Value::I64(_), Kind::Sfixed64) => 8,
        (Value::I64(x), _) => varint(*x as u64),
        (Value::U32(_), Kind::Fixed32) => 4,
        (Value::U32(x), _) => varint(u64::from(*x)),
        (Value::U64(_), Kind::Fixed64) => 8,
        (Value::U64(x), _) => varint(*x),
        (Value::F32(_), _) => 4,
        (Value::F64(_), _) => 8,
        (Value::String(s), _) => varint(s.len() as u64) + s.len(),
        (Value::Bytes(b), _) => varint(b.len() as u64) + b.len(),
        (Value::Message(m), _) if field.is_group() => size(m) + tag_len(field),
        (Value::Message(m), _) => {
            let body = size(m);
            varint(body as u64) + body
        }
        // Lists and maps are sized by the caller, element by element.
        (Value::List(_), _) | (Value::Map(_), _) => 0,
    }
}

fn key_len(k: &MapKey, kind: &Kind) -> usize {
    match (k, kind) {
        (MapKey::Bool(_), _) => 1,
        (MapKey::I32(x), Kind::Sint32) => varint(zigzag32(*x)),
        (MapKey::I32(_), Kind::Sfixed32) => 4,
        (MapKey::I32(x), _) => varint(i64::from(*x) as u64),
        (MapKey::I64(x), Kind::Sint64) => varint(zigzag64(*x)),
        (MapKey::I64(_), Kind::Sfixed64) => 8,
        (MapKey::I64(x), _) => varint(*x as u64),
        (MapKey::U32(_), Kind::Fixed32) => 4,
        (MapKey::U32(x), _) => varint(u64::from(*x)),
        (MapKey::U64(_), Kind::Fixed64) => 8,
        (MapKey::U64(x), _) => varint(*x),
        (MapKey::String(s), _) => varint(s.len() as u64) + s.len(),
    }
}
