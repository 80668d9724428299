//! What validating the plugin configuration shares between its two parts:
//! the top level and publishing options ([`crate::config`]) and the
//! operations ([`crate::opmap`]'s `parse`). The error names the offending
//! field by its path; the checks here are the JSON shape checks both use.
//!
//! Both modules depend on this one and not on each other's internals:
//! `config` builds on `opmap` (the map is part of a configuration), and
//! `opmap` knows nothing of `config`.

use serde_json::{Map, Value};
use std::fmt;

/// Configuration error: the dotted path of the offending field and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

pub(crate) fn err<T>(
    path: impl Into<String>,
    message: impl Into<String>,
) -> Result<T, ConfigError> {
    Err(ConfigError {
        path: path.into(),
        message: message.into(),
    })
}

/// The JSON type of `v`, as errors name it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Rejects the first key of `obj` not in `allowed`, naming it under `path`.
pub(crate) fn check_fields(
    path: &str,
    obj: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), ConfigError> {
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            return err(
                at,
                format!("unknown field, expected one of: {}", allowed.join(", ")),
            );
        }
    }
    Ok(())
}
