//! The operation map: plugin configuration, gRPC path lookup and REST
//! (`google.api.http` template) matching.
//!
//! Everything is parsed and indexed once, at configure time; lookups on the
//! request path do not parse the configuration and do not allocate.

use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;

/// Deterministic hasher: keys come from the configuration, and it avoids the
/// WASI `random_get` import that `RandomState` would need.
type FixedState = BuildHasherDefault<DefaultHasher>;

/// `wirelens.operation` of every call the map does not know: one fixed
/// value, so a client cannot grow the operation dimension by inventing
/// paths. Reserved: no configured operation may take this name.
pub const UNKNOWN_OPERATION: &str = "unknown";

/// Streaming shape of an RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Streaming {
    Unary,
    Client,
    Server,
    Bidi,
}

impl Streaming {
    pub const VARIANTS: [&'static str; 4] = ["unary", "client", "server", "bidi"];

    pub fn as_str(self) -> &'static str {
        match self {
            Streaming::Unary => "unary",
            Streaming::Client => "client",
            Streaming::Server => "server",
            Streaming::Bidi => "bidi",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "unary" => Some(Streaming::Unary),
            "client" => Some(Streaming::Client),
            "server" => Some(Streaming::Server),
            "bidi" => Some(Streaming::Bidi),
            _ => None,
        }
    }
}

/// One logical operation of the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    pub operation: String,
    pub rpc_service: String,
    pub rpc_method: String,
    pub streaming: Option<Streaming>,
    pub grpc_path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    /// A literal segment.
    Lit(String),
    /// `*` or `{var}` / `{var=*}`: exactly one non-empty segment.
    One,
    /// `**` or `{var=**}`: zero or more segments (always last).
    Rest,
}

impl Seg {
    fn rank(&self) -> u8 {
        match self {
            Seg::Lit(_) => 3,
            Seg::One => 2,
            Seg::Rest => 0,
        }
    }
}

/// A REST binding of an operation: HTTP method + path template.
#[derive(Clone, Debug)]
pub struct HttpRule {
    /// Upper-cased HTTP method.
    pub method: String,
    /// The template as configured; published as `http.route`.
    pub pattern: String,
    /// Index of the operation in [`OpMap::operations`].
    pub op: usize,
    segs: Vec<Seg>,
    verb: Option<String>,
}

impl HttpRule {
    /// Does `path` (no query string) match this rule's template?
    fn matches(&self, path: &[u8]) -> bool {
        let mut p = path;
        if let Some(verb) = &self.verb {
            let v = verb.as_bytes();
            if p.len() < v.len() + 1 || !p.ends_with(v) || p[p.len() - v.len() - 1] != b':' {
                return false;
            }
            p = &p[..p.len() - v.len() - 1];
        }
        let Some(rest) = p.strip_prefix(b"/") else {
            return false;
        };
        let mut parts = rest.split(|&b| b == b'/');
        if rest.is_empty() {
            // "/" has no segments.
            parts.next();
        }
        for seg in &self.segs {
            match seg {
                Seg::Rest => return true,
                Seg::Lit(l) => {
                    if parts.next() != Some(l.as_bytes()) {
                        return false;
                    }
                }
                Seg::One => match parts.next() {
                    Some(s) if !s.is_empty() => {}
                    _ => return false,
                },
            }
        }
        parts.next().is_none()
    }

    /// Ordering by specificity: `Greater` means `self` is more specific.
    /// Literal beats variable beats `**`; an exact end beats `**`; a verb
    /// beats none.
    fn cmp_specificity(&self, other: &HttpRule) -> Ordering {
        let n = self.segs.len().max(other.segs.len());
        for i in 0..n {
            // A missing segment ranks between a variable and `**`.
            let a = self.segs.get(i).map_or(1, Seg::rank);
            let b = other.segs.get(i).map_or(1, Seg::rank);
            match a.cmp(&b) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        self.verb.is_some().cmp(&other.verb.is_some())
    }
}

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

/// The operation map built from the plugin configuration.
#[derive(Clone, Debug, Default)]
pub struct OpMap {
    ops: Vec<Operation>,
    by_grpc_path: HashMap<String, usize, FixedState>,
    rules: Vec<HttpRule>,
    rules_by_method: HashMap<String, Vec<usize>, FixedState>,
}

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

/// The request path without query string or fragment.
pub fn strip_query(path: &[u8]) -> &[u8] {
    match path.iter().position(|&b| b == b'?' || b == b'#') {
        Some(i) => &path[..i],
        None => path,
    }
}

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

fn is_var_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Parses a `google.api.http` path template into segments and an optional
/// verb. Supported: literal segments, `*`, `**`, `{var}`, `{var=*}`,
/// `{var=**}`, `{var=literal/*/...}`, and a trailing `:verb`.
fn parse_template(t: &str) -> Result<(Vec<Seg>, Option<String>), String> {
    let Some(body) = t.strip_prefix('/') else {
        return Err("must start with \"/\"".into());
    };
    if body.is_empty() {
        return Ok((Vec::new(), None));
    }
    // Split into top-level segments (a '/' inside braces does not split).
    let mut raw: Vec<&str> = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        match c {
            '{' => {
                if depth > 0 {
                    return Err("nested \"{\"".into());
                }
                depth = 1;
            }
            '}' => {
                if depth == 0 {
                    return Err("unbalanced \"}\"".into());
                }
                depth = 0;
            }
            '/' if depth == 0 => {
                raw.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unclosed \"{\"".into());
    }
    raw.push(&body[start..]);
    // Verb: a ':' after the last top-level '/', outside braces.
    let mut verb = None;
    if let Some(last) = raw.last_mut() {
        let mut depth = 0u32;
        let mut colon = None;
        for (i, c) in last.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ':' if depth == 0 => colon = Some(i),
                _ => {}
            }
        }
        if let Some(i) = colon {
            let v = &last[i + 1..];
            if v.is_empty() || v.contains(['{', '}', '*']) {
                return Err(format!("invalid verb {v:?}"));
            }
            verb = Some(v.to_string());
            *last = &last[..i];
        }
    }
    let mut segs = Vec::new();
    let push_plain = |segs: &mut Vec<Seg>, s: &str| -> Result<(), String> {
        match s {
            "" => Err("empty segment".into()),
            "*" => {
                segs.push(Seg::One);
                Ok(())
            }
            "**" => {
                segs.push(Seg::Rest);
                Ok(())
            }
            _ if s.contains(['{', '}', '*']) => Err(format!("invalid segment {s:?}")),
            _ => {
                segs.push(Seg::Lit(s.to_string()));
                Ok(())
            }
        }
    };
    for s in raw {
        if let Some(inner) = s.strip_prefix('{') {
            let Some(inner) = inner.strip_suffix('}') else {
                return Err(format!("invalid segment {s:?}"));
            };
            let (name, sub) = match inner.split_once('=') {
                Some((n, sub)) => (n, Some(sub)),
                None => (inner, None),
            };
            if !is_var_name(name) {
                return Err(format!("invalid variable name {name:?}"));
            }
            match sub {
                None => segs.push(Seg::One),
                Some(sub) => {
                    for part in sub.split('/') {
                        push_plain(&mut segs, part)?;
                    }
                }
            }
        } else {
            push_plain(&mut segs, s)?;
        }
    }
    if let Some(i) = segs.iter().position(|s| *s == Seg::Rest) {
        if i + 1 != segs.len() {
            return Err("\"**\" must be the last segment".into());
        }
    }
    Ok((segs, verb))
}

const OP_FIELDS: &[&str] = &[
    "grpc_path",
    "operation",
    "rpc_service",
    "rpc_method",
    "streaming",
    "http_rules",
];
const RULE_FIELDS: &[&str] = &["method", "pattern"];

impl OpMap {
    /// An empty map (no operations, no REST rules).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses the plugin configuration (JSON) and keeps its operation map;
    /// the other top-level settings are validated and dropped (see
    /// [`Config::from_json`](crate::config::Config::from_json)). Empty or
    /// all-blank input, `{}` and `null` give an empty map. Unknown fields are
    /// rejected at every level; the error names the offending field.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        crate::config::Config::from_json(bytes).map(|c| c.map)
    }

    /// Builds the map from the top-level `operations` value (absent or
    /// `null`: empty).
    pub(crate) fn from_operations(ops: Option<&Value>) -> Result<Self, ConfigError> {
        let mut map = Self::empty();
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
            let (segs, verb) = match parse_template(&pattern) {
                Ok(x) => x,
                Err(e) => {
                    return err(
                        format!("{rpath}.pattern"),
                        format!("invalid template {pattern:?}: {e}"),
                    )
                }
            };
            let key = (method.clone(), pattern.clone());
            if let Some(prev) = seen_rules.get(&key) {
                return err(
                    rpath,
                    format!("duplicate rule \"{} {}\" (also in {prev})", key.0, key.1),
                );
            }
            seen_rules.insert(key, rpath.clone());
            let idx = self.rules.len();
            self.rules_by_method
                .entry(method.clone())
                .or_default()
                .push(idx);
            self.rules.push(HttpRule {
                method,
                pattern,
                op: op_index,
                segs,
                verb,
            });
        }
        self.ops.push(Operation {
            operation,
            rpc_service,
            rpc_method,
            streaming,
            grpc_path,
        });
        Ok(())
    }

    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    pub fn operation(&self, index: usize) -> Option<&Operation> {
        self.ops.get(index)
    }

    pub fn rules(&self) -> &[HttpRule] {
        &self.rules
    }

    pub fn rule(&self, index: usize) -> Option<&HttpRule> {
        self.rules.get(index)
    }

    /// Operation index for a gRPC `:path` (query string ignored).
    pub fn lookup_grpc(&self, path: &[u8]) -> Option<usize> {
        let path = std::str::from_utf8(strip_query(path)).ok()?;
        self.by_grpc_path.get(path).copied()
    }

    /// Best REST rule for (method, path): returns (operation index, rule
    /// index). The query string is ignored; among several matching rules
    /// the most specific wins, ties go to the first configured.
    pub fn match_rest(&self, method: &[u8], path: &[u8]) -> Option<(usize, usize)> {
        let method = std::str::from_utf8(method).ok()?;
        let candidates = self.rules_by_method.get(method)?;
        let path = strip_query(path);
        let mut best: Option<&HttpRule> = None;
        let mut best_idx = 0;
        for &i in candidates {
            let rule = &self.rules[i];
            if !rule.matches(path) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => rule.cmp_specificity(b) == Ordering::Greater,
            };
            if better {
                best = Some(rule);
                best_idx = i;
            }
        }
        best.map(|r| (r.op, best_idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{
      "operations": [
        {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
         "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
         "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]},
        {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "streaming": "unary",
         "http_rules": [{"method": "GET", "pattern": "/v1/products/{id}"},
                        {"method": "get", "pattern": "/v2/products/{product.id=*}"}]},
        {"grpc_path": "/wirelens.v1.Catalog/ListProducts", "streaming": "server",
         "http_rules": [{"method": "GET", "pattern": "/v1/products"}]},
        {"grpc_path": "/wirelens.v1.Catalog/Special", "operation": "catalog.Special",
         "http_rules": [{"method": "GET", "pattern": "/v1/products/special"}]},
        {"operation": "files.Get",
         "http_rules": [{"method": "GET", "pattern": "/v1/files/{path=**}"},
                        {"method": "POST", "pattern": "/v1/{name=shelves/*/books/*}:archive"}]},
        {"grpc_path": "/wirelens.v1.Chat/Talk", "streaming": "bidi"}
      ]
    }"#;

    fn map() -> OpMap {
        OpMap::from_json(CONFIG.as_bytes()).unwrap()
    }

    fn rest(m: &OpMap, method: &str, path: &str) -> Option<(String, String)> {
        m.match_rest(method.as_bytes(), path.as_bytes())
            .map(|(o, r)| {
                (
                    m.operation(o).unwrap().operation.clone(),
                    m.rule(r).unwrap().pattern.clone(),
                )
            })
    }

    #[test]
    fn parses_and_derives() {
        let m = map();
        assert_eq!(m.operations().len(), 6);
        let op = &m.operations()[1];
        assert_eq!(op.operation, "catalog.GetProduct");
        assert_eq!(op.rpc_service, "wirelens.v1.Catalog");
        assert_eq!(op.rpc_method, "GetProduct");
        assert_eq!(op.streaming, Some(Streaming::Unary));
        let op = &m.operations()[4];
        assert_eq!(op.operation, "files.Get");
        assert_eq!(op.rpc_service, "");
        assert_eq!(op.grpc_path, None);
        assert_eq!(m.operations()[5].streaming, Some(Streaming::Bidi));
        assert_eq!(m.operations()[3].streaming, None);
    }

    #[test]
    fn grpc_lookup() {
        let m = map();
        assert_eq!(m.lookup_grpc(b"/wirelens.v1.Hello/SayHello"), Some(0));
        assert_eq!(m.lookup_grpc(b"/wirelens.v1.Hello/SayHello?x=1"), Some(0));
        assert_eq!(m.lookup_grpc(b"/wirelens.v1.Hello/sayhello"), None);
        assert_eq!(m.lookup_grpc(b"/wirelens.v1.Chat/Talk"), Some(5));
        assert_eq!(m.lookup_grpc(b"\xff"), None);
    }

    #[test]
    fn template_matching() {
        let m = map();
        let r = |method, path| rest(&m, method, path);
        let pair = |o: &str, p: &str| Some((o.to_string(), p.to_string()));
        assert_eq!(r("POST", "/v1/hello"), pair("hello.SayHello", "/v1/hello"));
        assert_eq!(
            r("POST", "/v1/hello?lang=en"),
            pair("hello.SayHello", "/v1/hello")
        );
        assert_eq!(r("GET", "/v1/hello"), None, "method mismatch");
        assert_eq!(r("POST", "/v1/hello/x"), None);
        assert_eq!(r("POST", "/v1/hell"), None);
        assert_eq!(
            r("GET", "/v1/products/42"),
            pair("catalog.GetProduct", "/v1/products/{id}")
        );
        assert_eq!(
            r("GET", "/v1/products/42?fields=name#frag"),
            pair("catalog.GetProduct", "/v1/products/{id}")
        );
        assert_eq!(
            r("GET", "/v2/products/42"),
            pair("catalog.GetProduct", "/v2/products/{product.id=*}")
        );
        assert_eq!(
            r("GET", "/v1/products/"),
            None,
            "empty segment is not a variable"
        );
        assert_eq!(r("GET", "/v1/products/42/x"), None);
        assert_eq!(
            r("GET", "/v1/products"),
            pair("catalog.ListProducts", "/v1/products")
        );
        assert_eq!(
            r("GET", "/v1/products/special"),
            pair("catalog.Special", "/v1/products/special"),
            "literal beats variable"
        );
        assert_eq!(
            r("GET", "/v1/files/a/b/c.txt"),
            pair("files.Get", "/v1/files/{path=**}")
        );
        assert_eq!(
            r("GET", "/v1/files"),
            pair("files.Get", "/v1/files/{path=**}")
        );
        assert_eq!(
            r("POST", "/v1/shelves/1/books/2:archive"),
            pair("files.Get", "/v1/{name=shelves/*/books/*}:archive")
        );
        assert_eq!(r("POST", "/v1/shelves/1/books/2"), None);
        assert_eq!(r("POST", "/v1/shelves/1/books/2:other"), None);
        assert_eq!(r("DELETE", "/v1/products/1"), None);
        assert_eq!(r("GET", "v1/products/1"), None);
    }

    #[test]
    fn specificity() {
        let cfg = r#"{"operations": [
            {"operation": "a.Any", "http_rules": [{"method": "GET", "pattern": "/v1/{x=**}"}]},
            {"operation": "a.One", "http_rules": [{"method": "GET", "pattern": "/v1/{id}"}]},
            {"operation": "a.Lit", "http_rules": [{"method": "GET", "pattern": "/v1/lit"}]},
            {"operation": "a.Root", "http_rules": [{"method": "GET", "pattern": "/"}]},
            {"operation": "a.Star", "http_rules": [{"method": "GET", "pattern": "/v1/*/x"}]},
            {"operation": "a.Exact", "http_rules": [{"method": "GET", "pattern": "/v1"}]}
        ]}"#;
        let m = OpMap::from_json(cfg.as_bytes()).unwrap();
        let op = |p: &str| rest(&m, "GET", p).map(|x| x.0);
        assert_eq!(op("/v1/lit").as_deref(), Some("a.Lit"));
        assert_eq!(op("/v1/abc").as_deref(), Some("a.One"));
        assert_eq!(op("/v1/abc/x").as_deref(), Some("a.Star"));
        assert_eq!(op("/v1/abc/y").as_deref(), Some("a.Any"));
        assert_eq!(op("/v1").as_deref(), Some("a.Exact"));
        assert_eq!(op("/").as_deref(), Some("a.Root"));
        assert_eq!(op("/v2").as_deref(), None);
    }

    #[test]
    fn empty_configs() {
        for c in [
            "",
            "  \n",
            "{}",
            "null",
            r#"{"operations": []}"#,
            r#"{"operations": null}"#,
        ] {
            let m = OpMap::from_json(c.as_bytes()).unwrap();
            assert!(m.operations().is_empty(), "{c:?}");
        }
    }

    fn bad(cfg: &str) -> String {
        OpMap::from_json(cfg.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            bad(r#"{"operations": [{"grpc_path": "/a.B/C", "streaming": "uni"}]}"#),
            "operations[0].streaming: unknown variant \"uni\", expected one of: unary, client, server, bidi"
        );
        assert_eq!(
            bad(r#"{"ops": []}"#),
            "ops: unknown field, expected one of: operations, sample_rate, optional_fields, rest_transcoded, grpc_message_max_bytes"
        );
        assert!(
            bad(r#"{"operations": [{"grpc_path": "/a.B/C", "stremaing": "unary"}]}"#)
                .starts_with("operations[0].stremaing: unknown field")
        );
        assert_eq!(
            bad(r#"{"operations": [{"grpc_path": "/a.B/C"}, {"grpc_path": "/a.B/C"}]}"#),
            "operations[1].grpc_path: duplicate \"/a.B/C\" (also in operations[0])"
        );
        assert!(bad(r#"{"operations": [{"grpc_path": "a.B/C"}]}"#)
            .starts_with("operations[0].grpc_path: invalid gRPC path"));
        assert!(bad(r#"{"operations": [{"grpc_path": "/a.B/C/D"}]}"#)
            .starts_with("operations[0].grpc_path: invalid gRPC path"));
        assert_eq!(
            bad(r#"{"operations": [{"grpc_path": 7}]}"#),
            "operations[0].grpc_path: invalid type: number, expected a string"
        );
        assert_eq!(
            bad(r#"{"operations": [{"operation": "x.Y"}]}"#),
            "operations[0]: needs \"grpc_path\" or \"http_rules\""
        );
        assert!(
            bad(r#"{"operations": [{"http_rules": [{"method": "GET", "pattern": "/x"}]}]}"#)
                .starts_with("operations[0]: missing field \"operation\"")
        );
        assert_eq!(
            bad(
                r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "GET", "pattern": "/v1/{id"}]}]}"#
            ),
            "operations[0].http_rules[0].pattern: invalid template \"/v1/{id\": unclosed \"{\""
        );
        for p in [
            "v1",
            "/v1//x",
            "/v1/{x=**}/y",
            "/v1/a{b}",
            "/v1/{}",
            "/v1/x:",
            "/v1/}",
        ] {
            let cfg = format!(
                r#"{{"operations": [{{"operation": "x.Y", "http_rules": [{{"method": "GET", "pattern": "{p}"}}]}}]}}"#
            );
            assert!(
                bad(&cfg).starts_with("operations[0].http_rules[0].pattern: invalid template"),
                "{p}: {}",
                bad(&cfg)
            );
        }
        assert_eq!(
            bad(
                r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "G T", "pattern": "/x"}]}]}"#
            ),
            "operations[0].http_rules[0].method: invalid HTTP method \"G T\""
        );
        assert_eq!(
            bad(
                r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "GET", "pattern": "/x", "body": "*"}]}]}"#
            ),
            "operations[0].http_rules[0].body: unknown field, expected one of: method, pattern"
        );
        assert_eq!(
            bad(r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "GET", "pattern": "/x"}]},
                                   {"operation": "x.Z", "http_rules": [{"method": "get", "pattern": "/x"}]}]}"#),
            "operations[1].http_rules[0]: duplicate rule \"GET /x\" (also in operations[0].http_rules[0])"
        );
        assert_eq!(
            bad(r#"{"operations": [{"grpc_path": "/a.B/C", "operation": "unknown"}]}"#),
            "operations[0].operation: \"unknown\" is reserved for calls the map does not know"
        );
        assert!(bad("{").starts_with("invalid JSON:"));
        assert_eq!(bad("[]"), "invalid type: array, expected an object");
        assert_eq!(
            bad(r#"{"operations": {}}"#),
            "operations: invalid type: object, expected an array"
        );
    }

    #[test]
    fn derivation() {
        assert_eq!(
            split_grpc_path("/wirelens.v1.Hello/SayHello"),
            Some(("wirelens.v1.Hello", "SayHello"))
        );
        assert_eq!(
            split_grpc_path("/Hello/SayHello"),
            Some(("Hello", "SayHello"))
        );
        assert_eq!(split_grpc_path("/Hello/"), None);
        assert_eq!(split_grpc_path("//x"), None);
        assert_eq!(split_grpc_path("/x"), None);
        assert_eq!(
            derive_operation("wirelens.v1.Hello", "SayHello"),
            "hello.SayHello"
        );
        assert_eq!(derive_operation("Catalog", "Get"), "catalog.Get");
        assert_eq!(derive_operation("a.b.ÉTÉ", "X"), "éTÉ.X");
    }
}
