//! `record.rs` writes the record's fields by hand (their conditions are
//! code); the names and their order come from the record's one definition,
//! `filters/record.yaml`, through the generated `names.rs`. A record with
//! every value known writes the keys of [`KEYS`], in that order, under the
//! short names of [`WIRE_KEYS`].

use serde_json::{Map, Value};
use std::sync::Arc;
use wirelens_core::counterfactual::estimate::Counterfactual;
use wirelens_core::counterfactual::Reason;
use wirelens_core::frame::FrameStats;
use wirelens_core::record::Frames;
use wirelens_core::{Call, Fields, OpMap, Protocol, Streaming, KEYS, WIRE_KEYS};

/// The keys of a JSON object in the order the text has them (serde_json's
/// `Map` is sorted), and the object.
fn keys_in_order(text: &str) -> (Vec<String>, Map<String, Value>) {
    let Value::Object(m) = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    else {
        panic!("not an object: {text}")
    };
    let mut keys: Vec<(usize, String)> = m
        .keys()
        .map(|k| {
            let at = text
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} in {text}"));
            (at, k.clone())
        })
        .collect();
    keys.sort();
    (keys.into_iter().map(|(_, k)| k).collect(), m)
}

#[test]
fn a_full_record_writes_every_key_in_keys_order() {
    let call = Call::new(Arc::new(OpMap::from_json(b"{}").unwrap()));
    let mut r = call.record(None);
    // Every value known, whatever the protocol: a record of one real call
    // never has them all (http.route is REST's, url.path unknown calls').
    let stats = FrameStats {
        messages: 2,
        compressed_messages: 1,
        message_bytes: 30,
        message_min: 10,
        message_max: 20,
        framing_bytes: 10,
        ..FrameStats::default()
    };
    r.protocol = Some(Protocol::Grpc);
    r.operation = "hello.SayHello";
    r.rpc_service = "wirelens.v1.Hello";
    r.rpc_method = "SayHello";
    r.streaming = Some(Streaming::Unary);
    r.route = "/v1/hello";
    r.url_path = "/v1/other";
    r.grpc_status = Some(0);
    r.grpc_message = "ok";
    r.req_header_bytes = 1;
    r.resp_header_bytes = 2;
    r.resp_trailer_bytes = 3;
    r.req_body_bytes = 40;
    r.resp_body_bytes = 40;
    r.frames = Some(Frames {
        request: stats,
        response: stats,
    });
    r.ttfb_us = Some(4);
    r.duration_us = Some(5);
    r.request_duration_us = Some(6);
    r.malformed = true;
    r.fields = Fields::ALL;
    r.sample_rate = Some("0.25");
    r.counterfactual = Counterfactual {
        reason: Some(Reason::Ok),
        request_proto: Some(7),
        response_proto: Some(8),
        request_json: Some(9),
        response_json: Some(10),
    };
    r.counterfactual_rate = Some("0.5");

    let (written, attributes) = keys_in_order(&r.to_json());
    assert_eq!(
        written, KEYS,
        "Record::to_json of a full record: every key of KEYS, in that order"
    );

    let mut short = String::new();
    r.write_json(&mut short);
    let (published, values) = keys_in_order(&short);
    let expected: Vec<String> = written
        .iter()
        .map(|k| WIRE_KEYS[KEYS.iter().position(|a| a == k).unwrap()].to_string())
        .collect();
    assert_eq!(published, expected, "Record::write_json of a full record");
    for (wire, attribute) in WIRE_KEYS.iter().zip(KEYS) {
        assert_eq!(
            values.get(*wire),
            attributes.get(attribute),
            "{wire} = {attribute}"
        );
    }
}
