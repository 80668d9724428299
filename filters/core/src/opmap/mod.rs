//! The operation map: gRPC path lookup and REST (`google.api.http`
//! template) matching. Its configuration is parsed and validated in
//! `parse`, templates parsed and matched in `template`.
//!
//! Everything is parsed and indexed once, at configure time; lookups on the
//! request path do not parse the configuration and do not allocate.

use std::cmp::Ordering;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use prost_reflect::{DescriptorPool, MessageDescriptor};

mod key;
mod parse;
mod template;

pub use key::{labels_key, KEY_LEN};
pub use parse::{derive_operation, split_grpc_path};
pub use template::HttpRule;

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
    /// Request and response message types, when the configuration names
    /// them (and carries `descriptors`): what the counterfactual decodes.
    pub types: Option<MessageTypes>,
    /// The operation's main REST rule (its first), if any.
    pub main_rule: Option<usize>,
    /// The key of its labels without a route ([`labels_key`]): a gRPC call's.
    pub key: String,
}

/// The request and response message types of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageTypes {
    pub request: MessageDescriptor,
    pub response: MessageDescriptor,
}

/// The operation map built from the plugin configuration.
#[derive(Clone, Debug, Default)]
pub struct OpMap {
    ops: Vec<Operation>,
    /// The message types the configuration's `descriptors` define.
    pool: Option<DescriptorPool>,
    by_grpc_path: HashMap<String, usize, FixedState>,
    rules: Vec<HttpRule>,
    rules_by_method: HashMap<String, Vec<usize>, FixedState>,
}

/// The request path without query string or fragment.
pub fn strip_query(path: &[u8]) -> &[u8] {
    match path.iter().position(|&b| b == b'?' || b == b'#') {
        Some(i) => &path[..i],
        None => path,
    }
}

impl OpMap {
    /// An empty map (no operations, no REST rules).
    pub fn empty() -> Self {
        Self::default()
    }

    /// The configured descriptors (`None`: the configuration has none, and
    /// no call is sampled for the counterfactual).
    pub fn descriptors(&self) -> Option<&DescriptorPool> {
        self.pool.as_ref()
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
    fn rule_body_is_accepted_and_ignored() {
        let with_body = r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
            "http_rules": [{"method": "POST", "pattern": "/v1/hello", "body": "*"},
                           {"method": "PUT", "pattern": "/v1/hello/{name}", "body": null}]}]}"#;
        let m = OpMap::from_json(with_body.as_bytes()).unwrap();
        assert_eq!(
            rest(&m, "POST", "/v1/hello"),
            Some(("hello.SayHello".to_string(), "/v1/hello".to_string()))
        );
        assert_eq!(
            rest(&m, "PUT", "/v1/hello/ann"),
            Some(("hello.SayHello".to_string(), "/v1/hello/{name}".to_string()))
        );
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
            "ops: unknown field, expected one of: operations, sample_rate, optional_fields, rest_transcoded, grpc_message_max_bytes, descriptors, counterfactual_rate, counterfactual_max_bytes"
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
                r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "GET", "pattern": "/x", "bdy": "*"}]}]}"#
            ),
            "operations[0].http_rules[0].bdy: unknown field, expected one of: method, pattern, body, response_body"
        );
        assert_eq!(
            bad(
                r#"{"operations": [{"operation": "x.Y", "http_rules": [{"method": "POST", "pattern": "/x", "body": 1}]}]}"#
            ),
            "operations[0].http_rules[0].body: invalid type: number, expected a string"
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
