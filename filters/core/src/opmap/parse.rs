//! The operation map's configuration: `operations[]` parsed and validated
//! (unknown fields, types, gRPC paths, duplicates, reserved names), with
//! errors that name the offending field.

use super::template::HttpRule;
use super::{labels_key, FixedState, MessageTypes, OpMap, Operation, Streaming, UNKNOWN_OPERATION};
use crate::validate::{check_fields, err, type_name, ConfigError};
use prost_reflect::{DescriptorPool, MessageDescriptor};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Splits `/package.Service/Method` into (`package.Service`, `Method`).
pub fn split_grpc_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    let (service, method) = rest.split_once('/')?;
    if service.is_empty() || method.is_empty() || method.contains('/') {
        return None;
    }
    Some((service, method))
}

/// The derived operation name: the short service name with its first letter
/// lower-cased, a dot, the method (`wirelens.v1.Hello`, `SayHello` →
/// `hello.SayHello`).
pub fn derive_operation(service: &str, method: &str) -> String {
    let short = service.rsplit('.').next().unwrap_or(service);
    let mut out = String::with_capacity(short.len() + 1 + method.len());
    let mut chars = short.chars();
    if let Some(c) = chars.next() {
        out.extend(c.to_lowercase());
    }
    out.push_str(chars.as_str());
    out.push('.');
    out.push_str(method);
    out
}

fn opt_string(
    path: &str,
    obj: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => err(
            format!("{path}.{key}"),
            format!("invalid type: {}, expected a string", type_name(v)),
        ),
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

const OP_FIELDS: &[&str] = &[
    "grpc_path",
    "operation",
    "rpc_service",
    "rpc_method",
    "streaming",
    "http_rules",
    "request_type",
    "response_type",
];
const RULE_FIELDS: &[&str] = &["method", "pattern", "body", "response_body"];

/// The message type `name` (fully qualified, no leading dot) names in
/// `pool`; the error says which field and why.
fn message_type(
    pool: Option<&DescriptorPool>,
    path: &str,
    key: &str,
    name: &str,
) -> Result<MessageDescriptor, ConfigError> {
    let Some(pool) = pool else {
        return err(
            format!("{path}.{key}"),
            "needs the top-level \"descriptors\" (a base64 FileDescriptorSet)",
        );
    };
    match pool.get_message_by_name(name.strip_prefix('.').unwrap_or(name)) {
        Some(m) => Ok(m),
        None => err(
            format!("{path}.{key}"),
            format!("unknown message type {name:?} (not in \"descriptors\")"),
        ),
    }
}

impl OpMap {
    /// Builds the map from the top-level `operations` value (absent or
    /// `null`: empty); message types resolve in `pool`.
    pub(crate) fn from_operations(
        ops: Option<&Value>,
        pool: Option<DescriptorPool>,
    ) -> Result<Self, ConfigError> {
        let mut map = Self::empty();
        map.pool = pool;
        let ops = match ops {
            None | Some(Value::Null) => return Ok(map),
            Some(Value::Array(a)) => a,
            Some(v) => {
                return err(
                    "operations",
                    format!("invalid type: {}, expected an array", type_name(v)),
                )
            }
        };
        let mut seen_rules: HashMap<(String, String), String, FixedState> = HashMap::default();
        for (i, v) in ops.iter().enumerate() {
            let path = format!("operations[{i}]");
            map.add_operation(&path, v, &mut seen_rules)?;
        }
        Ok(map)
    }

    fn add_operation(
        &mut self,
        path: &str,
        v: &Value,
        seen_rules: &mut HashMap<(String, String), String, FixedState>,
    ) -> Result<(), ConfigError> {
        let Value::Object(obj) = v else {
            return err(
                path,
                format!("invalid type: {}, expected an object", type_name(v)),
            );
        };
        check_fields(path, obj, OP_FIELDS)?;
        let grpc_path = opt_string(path, obj, "grpc_path")?;
        let derived = match &grpc_path {
            Some(p) => match split_grpc_path(p) {
                Some(sm) => Some(sm),
                None => {
                    return err(
                        format!("{path}.grpc_path"),
                        format!("invalid gRPC path {p:?}, expected \"/package.Service/Method\""),
                    )
                }
            },
            None => None,
        };
        let operation = match opt_string(path, obj, "operation")? {
            Some(o) if o.is_empty() => {
                return err(format!("{path}.operation"), "must not be empty")
            }
            Some(o) => o,
            None => match derived {
                Some((s, m)) => derive_operation(s, m),
                None => {
                    return err(
                        path,
                        "missing field \"operation\" (required when there is no \"grpc_path\")",
                    )
                }
            },
        };
        if operation == UNKNOWN_OPERATION {
            return err(
                format!("{path}.operation"),
                format!("{UNKNOWN_OPERATION:?} is reserved for calls the map does not know"),
            );
        }
        let rpc_service = opt_string(path, obj, "rpc_service")?
            .unwrap_or_else(|| derived.map_or(String::new(), |(s, _)| s.to_string()));
        let rpc_method = opt_string(path, obj, "rpc_method")?
            .unwrap_or_else(|| derived.map_or(String::new(), |(_, m)| m.to_string()));
        let streaming = match obj.get("streaming") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match Streaming::parse(s) {
                Some(st) => Some(st),
                None => {
                    return err(
                        format!("{path}.streaming"),
                        format!(
                            "unknown variant {s:?}, expected one of: {}",
                            Streaming::VARIANTS.join(", ")
                        ),
                    )
                }
            },
            Some(v) => {
                return err(
                    format!("{path}.streaming"),
                    format!("invalid type: {}, expected a string", type_name(v)),
                )
            }
        };
        let rules = match obj.get("http_rules") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(v) => {
                return err(
                    format!("{path}.http_rules"),
                    format!("invalid type: {}, expected an array", type_name(v)),
                )
            }
        };
        if grpc_path.is_none() && rules.is_empty() {
            return err(path, "needs \"grpc_path\" or \"http_rules\"");
        }
        let request_type = opt_string(path, obj, "request_type")?;
        let response_type = opt_string(path, obj, "response_type")?;
        let types = match (request_type, response_type) {
            (None, None) => None,
            (Some(q), Some(s)) => Some(MessageTypes {
                request: message_type(self.pool.as_ref(), path, "request_type", &q)?,
                response: message_type(self.pool.as_ref(), path, "response_type", &s)?,
            }),
            (None, Some(_)) => return err(path, "\"response_type\" without \"request_type\""),
            (Some(_), None) => return err(path, "\"request_type\" without \"response_type\""),
        };
        let first_rule = self.rules.len();
        let op_index = self.ops.len();
        if let Some(p) = &grpc_path {
            if let Some(&prev) = self.by_grpc_path.get(p) {
                return err(
                    format!("{path}.grpc_path"),
                    format!("duplicate {p:?} (also in operations[{prev}])"),
                );
            }
            self.by_grpc_path.insert(p.clone(), op_index);
        }
        for (j, r) in rules.iter().enumerate() {
            let rpath = format!("{path}.http_rules[{j}]");
            let Value::Object(robj) = r else {
                return err(
                    rpath,
                    format!("invalid type: {}, expected an object", type_name(r)),
                );
            };
            check_fields(&rpath, robj, RULE_FIELDS)?;
            let method = match opt_string(&rpath, robj, "method")? {
                Some(m) if !m.is_empty() && m.chars().all(is_token_char) => m.to_ascii_uppercase(),
                Some(m) => {
                    return err(
                        format!("{rpath}.method"),
                        format!("invalid HTTP method {m:?}"),
                    )
                }
                None => return err(rpath, "missing field \"method\""),
            };
            let Some(pattern) = opt_string(&rpath, robj, "pattern")? else {
                return err(rpath, "missing field \"pattern\"");
            };
            let body = opt_string(&rpath, robj, "body")?;
            let response_body = opt_string(&rpath, robj, "response_body")?;
            let rule = match HttpRule::new(method, pattern.clone(), op_index) {
                Ok(mut rule) => {
                    rule.body = body;
                    rule.response_body = response_body;
                    rule.key = labels_key(
                        &operation,
                        &rpc_service,
                        &rpc_method,
                        streaming.map_or("", Streaming::as_str),
                        &rule.pattern,
                    );
                    rule
                }
                Err(e) => {
                    return err(
                        format!("{rpath}.pattern"),
                        format!("invalid template {pattern:?}: {e}"),
                    )
                }
            };
            let key = (rule.method.clone(), rule.pattern.clone());
            if let Some(prev) = seen_rules.get(&key) {
                return err(
                    rpath,
                    format!("duplicate rule \"{} {}\" (also in {prev})", key.0, key.1),
                );
            }
            seen_rules.insert(key, rpath.clone());
            let idx = self.rules.len();
            self.rules_by_method
                .entry(rule.method.clone())
                .or_default()
                .push(idx);
            self.rules.push(rule);
        }
        let key = labels_key(
            &operation,
            &rpc_service,
            &rpc_method,
            streaming.map_or("", Streaming::as_str),
            "",
        );
        self.ops.push(Operation {
            key,
            operation,
            rpc_service,
            rpc_method,
            streaming,
            grpc_path,
            types,
            main_rule: (!rules.is_empty()).then_some(first_rule),
        });
        Ok(())
    }
}
