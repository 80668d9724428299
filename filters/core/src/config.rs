//! The plugin configuration: the operation map plus the publishing options
//! (`sample_rate`, `optional_fields`, `rest_transcoded`,
//! `grpc_message_max_bytes`).
//!
//! Parsed once, at configure time. Errors name the offending field path
//! (`sample_rate: must be a number in [0, 1], got 1.5`).

use crate::counterfactual::{DEFAULT_MAX_BYTES, DEFAULT_RATE};
use crate::opmap::OpMap;
use crate::validate::{check_fields, err, type_name, ConfigError};
use prost_reflect::DescriptorPool;
use serde_json::{Map, Value};
use std::fmt;

/// A set of optional record key groups (see README, "The record").
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fields(u8);

impl Fields {
    pub const NONE: Fields = Fields(0);
    /// `wirelens.{request,response}.message.{bytes,min,max}`.
    pub const MESSAGE_SIZES: Fields = Fields(1);
    /// `wirelens.{request,response}.framing.bytes`.
    pub const FRAMING: Fields = Fields(2);
    /// `wirelens.{request,response}.compressed_messages`.
    pub const COMPRESSION: Fields = Fields(4);
    /// `wirelens.request.duration_us`.
    pub const REQUEST_DURATION: Fields = Fields(8);
    /// `wirelens.grpc.message`.
    pub const GRPC_MESSAGE: Fields = Fields(16);
    pub const ALL: Fields = Fields(31);

    /// The group names accepted in `optional_fields`, in documentation order.
    pub const GROUPS: [(&'static str, Fields); 5] = [
        ("message_sizes", Fields::MESSAGE_SIZES),
        ("framing", Fields::FRAMING),
        ("compression", Fields::COMPRESSION),
        ("request_duration", Fields::REQUEST_DURATION),
        ("grpc_message", Fields::GRPC_MESSAGE),
    ];

    /// The group named `name`, if any.
    pub fn parse(name: &str) -> Option<Fields> {
        Self::GROUPS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
    }

    /// True when every group of `other` is in `self`.
    pub const fn contains(self, other: Fields) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: Fields) -> Fields {
        Fields(self.0 | other.0)
    }

    pub const fn without(self, other: Fields) -> Fields {
        Fields(self.0 & !other.0)
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields::ALL
    }
}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_set();
        for (name, g) in Self::GROUPS {
            if self.contains(g) {
                l.entry(&name);
            }
        }
        l.finish()
    }
}

/// Longest JSON text kept for the sample rate.
const RATE_TEXT_MAX: usize = 24;

/// Default cut of a published `grpc-message`: enough for an error summary,
/// too short to carry much of the user data a message can echo.
pub const GRPC_MESSAGE_DEFAULT_BYTES: u16 = 128;

/// Largest `grpc_message_max_bytes` accepted: the most of a `grpc-message`
/// the filter ever keeps ([`crate::percent::MAX_MESSAGE_LEN`]).
pub const GRPC_MESSAGE_MAX_BYTES: u16 = crate::percent::MAX_MESSAGE_LEN as u16;

/// A rate in [0, 1] and its JSON text, formatted once (published on every
/// record while below 1).
#[derive(Clone, Copy, PartialEq)]
struct Rate {
    value: f64,
    text: [u8; RATE_TEXT_MAX],
    len: u8,
}

impl Rate {
    /// The text of a short rate, zero-padded (a const: `Options::default`
    /// runs for every call, and must not format or allocate).
    const fn short(value: f64, text: &[u8]) -> Self {
        let mut bytes = [0; RATE_TEXT_MAX];
        let mut i = 0;
        while i < text.len() {
            bytes[i] = text[i];
            i += 1;
        }
        Rate {
            value,
            text: bytes,
            len: text.len() as u8,
        }
    }

    const ONE: Rate = Rate::short(1.0, b"1");
    const COUNTERFACTUAL_DEFAULT: Rate = Rate::short(DEFAULT_RATE, b"0.01");

    /// `rate` clamped to [0, 1] (NaN: 1).
    fn new(rate: f64) -> Self {
        let rate = if rate.is_nan() {
            1.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        // -0.0 → 0.0
        let value = rate + 0.0;
        // serde_json's shortest round-trip form (e.g. `0.25`, `1e-7`): the
        // float writer is already linked in for configuration errors, so
        // this adds no formatting code to the module.
        let text =
            serde_json::Number::from_f64(value).map_or_else(|| "1".to_string(), |n| n.to_string());
        let len = text.len().min(RATE_TEXT_MAX);
        let mut bytes = [0; RATE_TEXT_MAX];
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Rate {
            value,
            text: bytes,
            len: len as u8,
        }
    }

    /// The JSON text when below 1.
    fn json_below_one(&self) -> Option<&str> {
        if self.value < 1.0 {
            std::str::from_utf8(&self.text[..self.len as usize]).ok()
        } else {
            None
        }
    }
}

/// Publishing options shared by every call of a plugin instance.
#[derive(Clone, Copy, PartialEq)]
pub struct Options {
    sample: Rate,
    counterfactual: Rate,
    /// Most bytes read for one counterfactual estimate (a REST body, or one
    /// message of a gRPC stream).
    pub counterfactual_max_bytes: u32,
    /// The optional key groups published.
    pub fields: Fields,
    /// `rest` calls are recorded as `rest-transcoded`.
    pub rest_transcoded: bool,
    /// Most bytes of a decoded `grpc-message` published (cut on a character
    /// boundary); 0 never publishes it (`fields` then lacks `GRPC_MESSAGE`).
    pub grpc_message_max_bytes: u16,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sample: Rate::ONE,
            counterfactual: Rate::COUNTERFACTUAL_DEFAULT,
            counterfactual_max_bytes: DEFAULT_MAX_BYTES,
            fields: Fields::ALL,
            rest_transcoded: false,
            grpc_message_max_bytes: GRPC_MESSAGE_DEFAULT_BYTES,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("sample_rate", &self.sample.value)
            .field("counterfactual_rate", &self.counterfactual.value)
            .field("counterfactual_max_bytes", &self.counterfactual_max_bytes)
            .field("fields", &self.fields)
            .field("rest_transcoded", &self.rest_transcoded)
            .field("grpc_message_max_bytes", &self.grpc_message_max_bytes)
            .finish()
    }
}

impl Options {
    /// Sets the sample rate, clamped to [0, 1] (NaN: 1).
    pub fn with_sample_rate(mut self, rate: f64) -> Self {
        self.sample = Rate::new(rate);
        self
    }

    /// Sets the share of recorded calls estimated for the counterfactual,
    /// clamped to [0, 1] (NaN: 1).
    pub fn with_counterfactual_rate(mut self, rate: f64) -> Self {
        self.counterfactual = Rate::new(rate);
        self
    }

    pub fn with_counterfactual_max_bytes(mut self, max: u32) -> Self {
        self.counterfactual_max_bytes = max;
        self
    }

    #[cfg(any(test, feature = "test-support"))]
    pub fn with_fields(mut self, fields: Fields) -> Self {
        self.fields = fields;
        self
    }

    #[cfg(any(test, feature = "test-support"))]
    pub fn with_rest_transcoded(mut self, on: bool) -> Self {
        self.rest_transcoded = on;
        self
    }

    /// Sets the `grpc-message` cut, at most [`GRPC_MESSAGE_MAX_BYTES`]; 0
    /// also drops the `grpc_message` group, as the configuration field does.
    pub fn with_grpc_message_max_bytes(mut self, max: u16) -> Self {
        self.grpc_message_max_bytes = max.min(GRPC_MESSAGE_MAX_BYTES);
        if max == 0 {
            self.fields = self.fields.without(Fields::GRPC_MESSAGE);
        }
        self
    }

    pub fn sample_rate(&self) -> f64 {
        self.sample.value
    }

    /// The sample rate as a JSON number when it is below 1 (published as
    /// `wirelens.sample_rate`), else `None`.
    pub fn sample_rate_json(&self) -> Option<&str> {
        self.sample.json_below_one()
    }

    pub fn counterfactual_rate(&self) -> f64 {
        self.counterfactual.value
    }

    /// The counterfactual rate as a JSON number when below 1 (published as
    /// `wirelens.counterfactual.rate` on the calls it sampled).
    pub fn counterfactual_rate_json(&self) -> Option<&str> {
        self.counterfactual.json_below_one()
    }
}

/// The whole plugin configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub map: OpMap,
    pub options: Options,
}

const TOP_FIELDS: &[&str] = &[
    "operations",
    "sample_rate",
    "optional_fields",
    "rest_transcoded",
    "grpc_message_max_bytes",
    "descriptors",
    "counterfactual_rate",
    "counterfactual_max_bytes",
];

/// The top-level `descriptors`: a FileDescriptorSet, standard base64.
fn parse_descriptors(top: &Map<String, Value>) -> Result<Option<DescriptorPool>, ConfigError> {
    use ::base64::Engine;
    let text = match top.get("descriptors") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(v) => {
            return err(
                "descriptors",
                format!("invalid type: {}, expected a base64 string", type_name(v)),
            )
        }
    };
    let bytes = match ::base64::engine::general_purpose::STANDARD.decode(text) {
        Ok(b) => b,
        Err(e) => return err("descriptors", format!("invalid base64: {e}")),
    };
    match DescriptorPool::decode(bytes.as_slice()) {
        Ok(pool) => Ok(Some(pool)),
        Err(e) => err("descriptors", format!("not a valid FileDescriptorSet: {e}")),
    }
}

impl Config {
    /// Parses the plugin configuration (JSON). Empty or all-blank input, `{}`
    /// and `null` give an empty map and default options. Unknown fields are
    /// rejected at every level; the error names the offending field.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let value: Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => return err("", format!("invalid JSON: {e}")),
        };
        let top = match &value {
            Value::Null => return Ok(Self::default()),
            Value::Object(m) => m,
            v => {
                return err(
                    "",
                    format!("invalid type: {}, expected an object", type_name(v)),
                )
            }
        };
        check_fields("", top, TOP_FIELDS)?;
        let pool = parse_descriptors(top)?;
        let map = OpMap::from_operations(top.get("operations"), pool)?;
        let options = parse_options(top)?;
        Ok(Config { map, options })
    }
}

#[cfg(any(test, feature = "test-support"))]
impl OpMap {
    /// Parses the plugin configuration (JSON) and keeps its operation map;
    /// the other top-level settings are validated and dropped (see
    /// [`Config::from_json`]). Empty or all-blank input, `{}` and `null`
    /// give an empty map. Unknown fields are rejected at every level; the
    /// error names the offending field. (Here, not in `opmap`: the map is
    /// part of a configuration, not the other way round.)
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        Config::from_json(bytes).map(|c| c.map)
    }
}

/// A rate field (`sample_rate`, `counterfactual_rate`): absent or `null`, or
/// a number in [0, 1].
fn rate_field(top: &Map<String, Value>, key: &str) -> Result<Option<f64>, ConfigError> {
    match top.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(r) if (0.0..=1.0).contains(&r) => Ok(Some(r)),
            _ => err(key, format!("must be a number in [0, 1], got {v}")),
        },
    }
}

fn parse_options(top: &Map<String, Value>) -> Result<Options, ConfigError> {
    let mut options = Options::default();
    if let Some(r) = rate_field(top, "sample_rate")? {
        options = options.with_sample_rate(r);
    }
    if let Some(r) = rate_field(top, "counterfactual_rate")? {
        options = options.with_counterfactual_rate(r);
    }
    match top.get("counterfactual_max_bytes") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if n <= u64::from(u32::MAX) => {
                options = options.with_counterfactual_max_bytes(n as u32)
            }
            _ => {
                return err(
                    "counterfactual_max_bytes",
                    format!("must be an integer in [0, {}], got {v}", u32::MAX),
                )
            }
        },
    }
    match top.get("optional_fields") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            let mut fields = Fields::NONE;
            for (i, v) in names.iter().enumerate() {
                let Value::String(name) = v else {
                    return err(
                        format!("optional_fields[{i}]"),
                        format!("invalid type: {}, expected a string", type_name(v)),
                    );
                };
                match Fields::parse(name) {
                    Some(g) => fields = fields.union(g),
                    None => {
                        let all: Vec<&str> = Fields::GROUPS.iter().map(|g| g.0).collect();
                        return err(
                            format!("optional_fields[{i}]"),
                            format!(
                                "unknown group {name:?}, expected one of: {}",
                                all.join(", ")
                            ),
                        );
                    }
                }
            }
            options.fields = fields;
        }
        Some(v) => {
            return err(
                "optional_fields",
                format!("invalid type: {}, expected an array", type_name(v)),
            )
        }
    }
    match top.get("rest_transcoded") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => options.rest_transcoded = *b,
        Some(v) => {
            return err(
                "rest_transcoded",
                format!("invalid type: {}, expected a boolean", type_name(v)),
            )
        }
    }
    // After `optional_fields`: 0 turns the `grpc_message` group off whatever
    // that list says.
    match top.get("grpc_message_max_bytes") {
        None | Some(Value::Null) => {}
        Some(v) => match v.as_u64() {
            Some(n) if n <= u64::from(GRPC_MESSAGE_MAX_BYTES) => {
                options = options.with_grpc_message_max_bytes(n as u16)
            }
            _ => {
                return err(
                    "grpc_message_max_bytes",
                    format!("must be an integer in [0, {GRPC_MESSAGE_MAX_BYTES}], got {v}"),
                )
            }
        },
    }
    Ok(options)
}

#[cfg(test)]
mod tests {

    #[test]
    fn default_rates_are_what_new_makes() {
        // A rate of 1 is never published, whatever its text.
        assert_eq!(Rate::ONE.value, Rate::new(1.0).value);
        assert_eq!(Rate::ONE.json_below_one(), None);
        assert!(Rate::COUNTERFACTUAL_DEFAULT == Rate::new(DEFAULT_RATE));
        assert_eq!(Rate::COUNTERFACTUAL_DEFAULT.json_below_one(), Some("0.01"));
    }
    use super::*;

    fn cfg(s: &str) -> Config {
        Config::from_json(s.as_bytes()).unwrap()
    }

    fn bad(s: &str) -> String {
        Config::from_json(s.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn defaults() {
        for s in [
            "",
            "{}",
            "null",
            r#"{"sample_rate": null, "optional_fields": null}"#,
        ] {
            let c = cfg(s);
            assert_eq!(c.options, Options::default(), "{s}");
            assert_eq!(c.options.sample_rate(), 1.0);
            assert_eq!(c.options.sample_rate_json(), None);
            assert_eq!(c.options.fields, Fields::ALL);
            assert!(!c.options.rest_transcoded);
            assert_eq!(c.options.grpc_message_max_bytes, 128);
        }
    }

    #[test]
    fn grpc_message_max_bytes() {
        let c = cfg(r#"{"grpc_message_max_bytes": 1024}"#);
        assert_eq!(c.options.grpc_message_max_bytes, 1024);
        assert_eq!(c.options.fields, Fields::ALL);
        let c =
            cfg(r#"{"grpc_message_max_bytes": 7, "optional_fields": ["framing", "grpc_message"]}"#);
        assert_eq!(c.options.grpc_message_max_bytes, 7);
        assert_eq!(
            c.options.fields,
            Fields::FRAMING.union(Fields::GRPC_MESSAGE)
        );
        // 0 is "never publish": the group is off even when listed.
        let c = cfg(r#"{"optional_fields": ["grpc_message"], "grpc_message_max_bytes": 0}"#);
        assert_eq!(c.options.fields, Fields::NONE);
        assert_eq!(
            cfg(r#"{"grpc_message_max_bytes": null}"#).options,
            Options::default()
        );
        let o = Options::default().with_grpc_message_max_bytes(5000);
        assert_eq!(o.grpc_message_max_bytes, 1024);
    }

    #[test]
    fn options() {
        let c = cfg(
            r#"{"sample_rate": 0.25, "optional_fields": ["framing", "grpc_message", "framing"],
                       "rest_transcoded": true, "operations": []}"#,
        );
        assert_eq!(c.options.sample_rate(), 0.25);
        assert_eq!(c.options.sample_rate_json(), Some("0.25"));
        assert_eq!(
            c.options.fields,
            Fields::FRAMING.union(Fields::GRPC_MESSAGE)
        );
        assert!(c.options.rest_transcoded);
        assert_eq!(
            cfg(r#"{"optional_fields": []}"#).options.fields,
            Fields::NONE
        );
        assert_eq!(
            cfg(r#"{"sample_rate": 0}"#).options.sample_rate_json(),
            Some("0.0")
        );
        assert_eq!(
            cfg(r#"{"sample_rate": 1}"#).options.sample_rate_json(),
            None
        );
        assert_eq!(cfg(r#"{"sample_rate": 1.0}"#).options.sample_rate(), 1.0);
        assert_eq!(
            cfg(r#"{"sample_rate": 1e-7}"#).options.sample_rate_json(),
            Some("1e-7")
        );
        let tiny = cfg(r#"{"sample_rate": 1.2345678901234567e-300}"#).options;
        let text = tiny.sample_rate_json().unwrap();
        assert_eq!(text.parse::<f64>().unwrap(), tiny.sample_rate());
        for (name, g) in Fields::GROUPS {
            let c = cfg(&format!(r#"{{"optional_fields": ["{name}"]}}"#));
            assert_eq!(c.options.fields, g);
        }
        assert_eq!(format!("{:?}", Fields::FRAMING), "{\"framing\"}");
    }

    #[test]
    fn option_errors() {
        assert_eq!(
            bad(r#"{"sample_rate": 1.5}"#),
            "sample_rate: must be a number in [0, 1], got 1.5"
        );
        assert_eq!(
            bad(r#"{"sample_rate": -0.1}"#),
            "sample_rate: must be a number in [0, 1], got -0.1"
        );
        assert_eq!(
            bad(r#"{"sample_rate": "0.5"}"#),
            "sample_rate: must be a number in [0, 1], got \"0.5\""
        );
        assert_eq!(
            bad(r#"{"sample_rate": true}"#),
            "sample_rate: must be a number in [0, 1], got true"
        );
        assert_eq!(
            bad(r#"{"optional_fields": ["framing", "sizes"]}"#),
            "optional_fields[1]: unknown group \"sizes\", expected one of: message_sizes, framing, compression, request_duration, grpc_message"
        );
        assert_eq!(
            bad(r#"{"optional_fields": "framing"}"#),
            "optional_fields: invalid type: string, expected an array"
        );
        assert_eq!(
            bad(r#"{"optional_fields": [1]}"#),
            "optional_fields[0]: invalid type: number, expected a string"
        );
        assert_eq!(
            bad(r#"{"rest_transcoded": "yes"}"#),
            "rest_transcoded: invalid type: string, expected a boolean"
        );
        assert_eq!(
            bad(r#"{"sample_rates": 1}"#),
            "sample_rates: unknown field, expected one of: operations, sample_rate, optional_fields, rest_transcoded, grpc_message_max_bytes, descriptors, counterfactual_rate, counterfactual_max_bytes"
        );
        for v in ["1025", "-1", "1.5", "128.0", "\"128\"", "true"] {
            assert_eq!(
                bad(&format!(r#"{{"grpc_message_max_bytes": {v}}}"#)),
                format!("grpc_message_max_bytes: must be an integer in [0, 1024], got {v}")
            );
        }
        // Operation errors still come first and keep their paths.
        assert!(
            bad(r#"{"sample_rate": 2, "operations": [{"grpc_path": "x"}]}"#)
                .starts_with("operations[0].grpc_path:")
        );
    }

    #[test]
    fn opmap_from_json_accepts_the_whole_configuration() {
        let m = OpMap::from_json(
            br#"{"sample_rate": 0.5, "rest_transcoded": true,
                 "operations": [{"grpc_path": "/a.B/C"}]}"#,
        )
        .unwrap();
        assert_eq!(m.operations().len(), 1);
        assert!(OpMap::from_json(br#"{"sample_rate": 7}"#).is_err());
    }

    #[test]
    fn clamped_setter() {
        let o = Options::default().with_sample_rate(f64::NAN);
        assert_eq!(o.sample_rate(), 1.0);
        let o = Options::default().with_sample_rate(-0.0);
        assert_eq!(o.sample_rate_json(), Some("0.0"));
        let o = Options::default().with_sample_rate(3.0);
        assert_eq!(o.sample_rate_json(), None);
    }
}
