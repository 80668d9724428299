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
