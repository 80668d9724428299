//! The second oracle (issue 27, item 5): every case of
//! `tests/counterfactual/vectors.json` (Python protobuf, checked against Go's
//! protojson by `gocheck`) sized by the filter core: the protobuf bytes as
//! protojson JSON (`json_size`), the JSON as protobuf (`proto_size`), and
//! the mismatch cases refused.

use base64::Engine;
use prost_reflect::DescriptorPool;
use serde_json::Value;
use wirelens_core::counterfactual::{json_body_size, proto_message_size, BodyField, Reason};

/// Vectors whose JSON holds a `float` of ±3.4028235e+38 (FLT_MAX as protojson
/// prints it): prost-reflect compares the parsed double with FLT_MAX before
/// rounding (the decimal is a hair above it) and refuses the payload, where
/// Go rounds to FLT_MAX. These get no estimate (`mismatch`), never a wrong
/// one; the protobuf -> JSON direction is exact for them too.
const FLOAT_MAX_REFUSED: &[&str] = &[
    "scalars_max",
    "scalars_min",
    "repeated_packed",
    "repeated_special_floats",
];

fn vectors() -> (DescriptorPool, Vec<Value>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/counterfactual/vectors.json"
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let set = b64.decode(v["descriptor_set"].as_str().unwrap()).unwrap();
    let pool = DescriptorPool::decode(set.as_slice()).unwrap();
    (pool, v["cases"].as_array().unwrap().clone())
}

#[test]
fn every_vector_sizes_exactly() {
    let (pool, cases) = vectors();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let desc = pool
            .get_message_by_name(case["type"].as_str().unwrap())
            .unwrap();
        if let Some(json) = case["json_invalid"].as_str() {
            let got = proto_message_size(&desc, json.as_bytes(), BodyField::Whole, []);
            if got != Err(Reason::Mismatch) {
                failures.push(format!("{name}: invalid JSON sized as {got:?}"));
            }
            continue;
        }
        if let Some(bin) = case["binary_invalid"].as_str() {
            let bytes = b64.decode(bin).unwrap();
            let got = json_body_size(&desc, &bytes, BodyField::Whole, &[]);
            if got != Err(Reason::Mismatch) {
                failures.push(format!("{name}: invalid binary sized as {got:?}"));
            }
            continue;
        }
        let binary = b64.decode(case["binary"].as_str().unwrap()).unwrap();
        let json = case["json"].as_str().unwrap();
        let want_json = case["json_size"].as_u64().unwrap();
        let want_proto = case["proto_size"].as_u64().unwrap();
        match json_body_size(&desc, &binary, BodyField::Whole, &[]) {
            Ok(n) if n == want_json => {}
            got => failures.push(format!(
                "{name}: protobuf -> JSON {got:?}, want {want_json} ({json})"
            )),
        }
        match proto_message_size(&desc, json.as_bytes(), BodyField::Whole, []) {
            Ok(n) if n == want_proto => {}
            Err(Reason::Mismatch) if FLOAT_MAX_REFUSED.contains(&name) => {}
            got => failures.push(format!(
                "{name}: JSON -> protobuf {got:?}, want {want_proto} ({json})"
            )),
        }
        checked += 1;
    }
    assert!(checked >= 60, "only {checked} valid vectors");
    assert!(
        failures.is_empty(),
        "{} of {} vectors:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A rule whose `body` is one field (`body: "string_value"`): the JSON body
/// is that field's value alone, as protojson prints it inside the message.
#[test]
fn a_one_field_body_is_the_value_alone() {
    let (pool, cases) = vectors();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut checked = 0;
    for case in &cases {
        let (Some(ty), Some(bin), Some(json)) = (
            case["type"].as_str(),
            case["binary"].as_str(),
            case["json"].as_str(),
        ) else {
            continue;
        };
        let desc = pool.get_message_by_name(ty).unwrap();
        let printed: serde_json::Map<String, Value> = serde_json::from_str(json).unwrap();
        for field in desc.fields() {
            if field.is_list() || field.is_map() || field.containing_oneof().is_some() {
                continue;
            }
            let Some(value) = printed.get(field.json_name()) else {
                continue;
            };
            // The value's text as the vector prints it (it sits between
            // `"name":` and the next comma or brace).
            let key = format!("\"{}\":", field.json_name());
            let at = json.find(&key).unwrap() + key.len();
            let text = serde_json::Deserializer::from_str(&json[at..])
                .into_iter::<Value>()
                .next()
                .unwrap()
                .unwrap();
            assert_eq!(&text, value);
            let rest = &json[at..];
            let mut de = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            de.next();
            let want = de.byte_offset() as u64;
            let binary = b64.decode(bin).unwrap();
            let got = json_body_size(&desc, &binary, BodyField::Field(field.name()), &[]);
            assert_eq!(got, Ok(want), "{}: body {}", case["name"], field.name());
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} one-field bodies");
    // At its default the value is not in the message's JSON, but the twin sends it.
    let scalars = pool
        .get_message_by_name("wirelens.test.whatif.Scalars")
        .unwrap();
    for (field, text) in [
        ("int32_value", "0"),
        ("int64_value", "\"0\""),
        ("bool_value", "false"),
        ("string_value", "\"\""),
        ("double_value", "0"),
    ] {
        let got = json_body_size(&scalars, b"", BodyField::Field(field), &[]);
        assert_eq!(got, Ok(text.len() as u64), "default {field}");
    }
}
