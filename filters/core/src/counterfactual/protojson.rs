//! Sizes in the proto3 JSON mapping as Go's `protojson.Marshal` prints by
//! default (lowerCamel `json_name` keys, default values omitted, enums by
//! name, 64-bit integers as strings, no whitespace), counted without
//! keeping the text.
//!
//! prost-reflect walks the message (the mapping, the well-known types);
//! serde_json writes it. Two printers differ in floats only: serde_json
//! writes ryu's shortest digits as `1.0` and `1e21`, protojson as Go's
//! `strconv.FormatFloat(f, 'f' or 'e', -1, bits)` with the exponent form
//! outside [1e-6, 1e21) (`1`, `1e+21`, `1e-7`). [`GoFloats`] writes the
//! same digits the Go way, so the counts are exact.
//!
//! prost-reflect's walk differs from protojson in two more places, added
//! back by [`go_extra`]: a `float`/`double` field holding `-0.0` is taken
//! for its default and left out (Go prints `-0`), and a `FloatValue` or
//! `DoubleValue` wrapper holding NaN or an infinity comes out as `null`
//! (Go prints `"NaN"`, `"Infinity"`, `"-Infinity"`; and `-0` where
//! prost-reflect, re-encoding the wrapper, prints `0`).

use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, ReflectMessage, SerializeOptions, Value,
};
use serde_json::ser::Formatter;
use std::io;

/// An `io::Write` that only counts.
#[derive(Default)]
struct Count(u64);

impl io::Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// serde_json's compact formatter with Go's float formatting.
struct GoFloats;

impl Formatter for GoFloats {
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        let mut b = ryu::Buffer::new();
        let exp_form = value != 0.0 && !(1e-6..1e21).contains(&value.abs());
        write_go_float(w, b.format_finite(value), exp_form)
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        let mut b = ryu::Buffer::new();
        let exp_form = value != 0.0 && !(1e-6..1e21).contains(&value.abs());
        write_go_float(w, b.format_finite(value), exp_form)
    }
}

/// Rewrites ryu's shortest representation (`-1.5e-7`, `123.0`, `1e21`)
/// in Go's form: `'f'` (`123`, `0.0000015`) or, when `exp_form`, `'e'`
/// with at least two exponent digits, then (as protojson does) a
/// single-digit negative exponent without its leading zero (`1.5e-7`,
/// `1e+21`).
fn write_go_float<W: ?Sized + io::Write>(w: &mut W, ryu: &str, exp_form: bool) -> io::Result<()> {
    let (negative, ryu) = match ryu.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, ryu),
    };
    let (mantissa, exp) = match ryu.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (ryu, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    // value = 0.DIGITS × 10^point
    let mut digits = [0u8; 40];
    let mut n = 0usize;
    let mut point = int_part.len() as i32 + exp;
    for &d in int_part.as_bytes().iter().chain(frac_part.as_bytes()) {
        if n == 0 && d == b'0' {
            point -= 1;
            continue;
        }
        if n < digits.len() {
            digits[n] = d;
            n += 1;
        }
    }
    while n > 0 && digits[n - 1] == b'0' {
        n -= 1;
    }
    if negative {
        w.write_all(b"-")?;
    }
    if n == 0 {
        return w.write_all(b"0");
    }
    let digits = &digits[..n];
    if exp_form {
        w.write_all(&digits[..1])?;
        if n > 1 {
            w.write_all(b".")?;
            w.write_all(&digits[1..])?;
        }
        let e = point - 1;
        if e < 0 {
            write!(w, "e-{}", -e)
        } else {
            write!(w, "e+{e:02}")
        }
    } else if point <= 0 {
        w.write_all(b"0.")?;
        for _ in 0..-point {
            w.write_all(b"0")?;
        }
        w.write_all(digits)
    } else if point as usize >= n {
        w.write_all(digits)?;
        for _ in 0..(point as usize - n) {
            w.write_all(b"0")?;
        }
        Ok(())
    } else {
        let p = point as usize;
        w.write_all(&digits[..p])?;
        w.write_all(b".")?;
        w.write_all(&digits[p..])
    }
}

/// The protojson default options (prost-reflect's defaults are the same;
/// spelled out because the counts depend on them).
fn options() -> SerializeOptions {
    SerializeOptions::new()
        .stringify_64_bit_integers(true)
        .use_enum_numbers(false)
        .use_proto_field_name(false)
        .skip_default_fields(true)
}

/// Bytes of `message` in protojson's default output; `None` when the
/// mapping refuses it (an `Any` of an unknown type, a timestamp out of
/// range, ...).
pub fn json_size(message: &DynamicMessage) -> Option<u64> {
    json_size_with(message, &options())
}

/// Bytes of a non-message field's default value as protojson prints it (a
/// body bound to one field at its default: the twin still sends it).
pub fn default_value_size(field: &FieldDescriptor) -> u64 {
    if field.is_list() || field.is_map() {
        return 2; // [] or {}
    }
    match field.kind() {
        Kind::Bool => 5, // false
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64 => 3, // "0"
        Kind::String | Kind::Bytes => 2, // ""
        Kind::Enum(e) => e.get_value(0).map_or(1, |v| v.name().len() as u64 + 2), // "NAME", else 0
        _ => 1,          // 0
    }
}

fn json_size_with(message: &DynamicMessage, options: &SerializeOptions) -> Option<u64> {
    let mut count = Count::default();
    let mut ser = serde_json::Serializer::with_formatter(&mut count, GoFloats);
    message.serialize_with_options(&mut ser, options).ok()?;
    Some(count.0 + go_extra(message))
}

/// The bytes protojson prints for `message` beyond what prost-reflect's
/// walk printed (module docs).
fn go_extra(message: &DynamicMessage) -> u64 {
    let desc = message.descriptor();
    let mut extra = 0u64;
    if matches!(
        desc.full_name(),
        "google.protobuf.FloatValue" | "google.protobuf.DoubleValue"
    ) {
        let value = desc
            .get_field(1)
            .map(|f| message.get_field(&f).into_owned());
        let x = match value {
            Some(Value::F32(x)) => f64::from(x),
            Some(Value::F64(x)) => x,
            _ => return 0,
        };
        return match x {
            x if x.is_nan() => 1,                         // "NaN" for null
            x if x == f64::INFINITY => 6,                 // "Infinity"
            x if x == f64::NEG_INFINITY => 7,             // "-Infinity"
            x if x.to_bits() == (-0.0f64).to_bits() => 1, // -0 for 0
            _ => 0,
        };
    }
    let (mut printed, mut negative_zeros) = (0u64, 0u64);
    for field in desc.fields() {
        if message.has_field(&field) {
            printed += 1;
        }
        let value = message.get_field(&field);
        match value.as_ref() {
            Value::F32(x) if x.to_bits() == (-0.0f32).to_bits() && !field.supports_presence() => {
                negative_zeros += 1;
                extra += field.json_name().len() as u64 + 5; // "name":-0
            }
            Value::F64(x) if x.to_bits() == (-0.0f64).to_bits() && !field.supports_presence() => {
                negative_zeros += 1;
                extra += field.json_name().len() as u64 + 5;
            }
            // An unset message field reads as its default: not printed, and
            // a recursive type would never end.
            Value::Message(m) if message.has_field(&field) => extra += go_extra(m),
            Value::List(items) if matches!(field.kind(), Kind::Message(_)) => {
                for item in items {
                    if let Value::Message(m) = item {
                        extra += go_extra(m);
                    }
                }
            }
            Value::Map(entries) => {
                for v in entries.values() {
                    if let Value::Message(m) = v {
                        extra += go_extra(m);
                    }
                }
            }
            _ => {}
        }
    }
    // One comma before each field added, but before the first of an
    // otherwise empty object.
    if negative_zeros > 0 {
        extra += if printed == 0 {
            negative_zeros - 1
        } else {
            negative_zeros
        };
    }
    extra
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go32(v: f32) -> String {
        let mut out = Vec::new();
        GoFloats.write_f32(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn go64(v: f64) -> String {
        let mut out = Vec::new();
        GoFloats.write_f64(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_as_go_prints_them() {
        // Expected values: Go's strconv.FormatFloat as protojson applies it.
        let cases64 = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (123456.0, "123456"),
            (0.1, "0.1"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (1e-10, "1e-10"),
            (1e16, "10000000000000000"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (0.30000000000000004, "0.30000000000000004"),
        ];
        for (v, want) in cases64 {
            assert_eq!(go64(v), want, "{v:e}");
        }
        let cases32 = [
            (0.1f32, "0.1"),
            (1.0f32, "1"),
            (3.4028235e38, "3.4028235e+38"),
            (1e-7f32, "1e-7"),
            (16777216.0, "16777216"),
        ];
        for (v, want) in cases32 {
            assert_eq!(go32(v), want, "{v:e}");
        }
    }
}
