//! Shared pieces of the ABI tests: the plugin configuration, an
//! independent model of the expected record (computed from what the test
//! fed, following filters/README.md), and the publication checks.
#![allow(dead_code)]

use serde_json::{Map, Number, Value};
use wirelens_abi::{Headers, HostCall, Property, Vm};

pub const CONFIG: &str = r#"{
  "operations": [
    {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
     "streaming": "unary", "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]},
    {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "operation": "catalog.GetProduct",
     "streaming": "unary", "http_rules": [{"method": "get", "pattern": "/v1/products/{id}"}]},
    {"grpc_path": "/wirelens.v1.Upload/Collect", "operation": "upload.Collect",
     "streaming": "client"}
  ]
}"#;

/// Base of the controllable clock (ns); tests set offsets from it.
pub const T0: u64 = 1_700_000_000_123_456_789;

pub fn at(vm: &mut Vm, offset_ns: u64) {
    vm.set_time_ns(T0 + offset_ns);
}

/// µs between two clock offsets (ns), truncated, saturating.
pub fn us(from_ns: u64, to_ns: u64) -> u64 {
    to_ns.saturating_sub(from_ns) / 1000
}

/// The record keys in their fixed order (filters/README.md, "The record object").
pub const KEY_ORDER: [&str; 31] = [
    "wirelens.protocol",
    "wirelens.operation",
    "rpc.service",
    "rpc.method",
    "wirelens.streaming",
    "http.route",
    "url.path",
    "rpc.grpc.status_code",
    "wirelens.grpc.message",
    "wirelens.request.header.size",
    "wirelens.response.header.size",
    "wirelens.response.trailer.size",
    "http.request.body.size",
    "http.response.body.size",
    "wirelens.request.messages",
    "wirelens.response.messages",
    "wirelens.request.message.bytes",
    "wirelens.request.message.min",
    "wirelens.request.message.max",
    "wirelens.response.message.bytes",
    "wirelens.response.message.min",
    "wirelens.response.message.max",
    "wirelens.request.framing.bytes",
    "wirelens.response.framing.bytes",
    "wirelens.request.compressed_messages",
    "wirelens.response.compressed_messages",
    "wirelens.time_to_first_byte_us",
    "wirelens.duration_us",
    "wirelens.request.duration_us",
    "wirelens.malformed",
    "wirelens.sample_rate",
];

/// Frame statistics of one direction, computed from the frames the test built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dir {
    pub messages: u64,
    pub bytes: u64,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub framing: u64,
    pub compressed: u64,
}

impl Dir {
    /// A complete data frame of `len` payload bytes.
    pub fn message(&mut self, flags: u8, len: usize) {
        let len = len as u64;
        self.messages += 1;
        self.bytes += len;
        self.min = Some(self.min.map_or(len, |m| m.min(len)));
        self.max = Some(self.max.map_or(len, |m| m.max(len)));
        self.framing += 5;
        if flags & 1 != 0 {
            self.compressed += 1;
        }
    }
    /// A complete gRPC-Web trailer frame of `len` payload bytes.
    pub fn trailer_frame(&mut self, len: usize) {
        self.framing += 5 + len as u64;
    }
}

/// The expected record.
#[derive(Clone, Debug)]
pub struct Expect {
    pub protocol: &'static str,
    pub operation: Option<String>,
    pub service: Option<String>,
    pub method: Option<String>,
    pub streaming: Option<&'static str>,
    pub route: Option<String>,
    pub url_path: Option<String>,
    pub grpc_status: Option<u64>,
    pub grpc_message: Option<String>,
    pub req_headers: u64,
    pub resp_headers: u64,
    pub resp_trailers: u64,
    pub req_body: u64,
    pub resp_body: u64,
    /// gRPC family: (request, response).
    pub frames: Option<(Dir, Dir)>,
    pub ttfb_us: Option<u64>,
    pub duration_us: Option<u64>,
    pub req_duration_us: Option<u64>,
    pub malformed: bool,
    pub sample_rate: Option<f64>,
    /// Enabled optional groups.
    pub groups: Vec<&'static str>,
}

pub const ALL_GROUPS: [&str; 5] = [
    "message_sizes",
    "framing",
    "compression",
    "request_duration",
    "grpc_message",
];

impl Expect {
    pub fn new(protocol: &'static str) -> Self {
        let grpc = matches!(protocol, "grpc" | "grpc-web" | "grpc-web-text");
        Expect {
            protocol,
            operation: None,
            service: None,
            method: None,
            streaming: None,
            route: None,
            url_path: None,
            grpc_status: None,
            grpc_message: None,
            req_headers: 0,
            resp_headers: 0,
            resp_trailers: 0,
            req_body: 0,
            resp_body: 0,
            frames: grpc.then(Default::default),
            ttfb_us: None,
            duration_us: None,
            req_duration_us: None,
            malformed: false,
            sample_rate: None,
            groups: ALL_GROUPS.to_vec(),
        }
    }

    pub fn op(
        mut self,
        operation: &str,
        service: &str,
        method: &str,
        streaming: Option<&'static str>,
    ) -> Self {
        self.operation = Some(operation.into());
        self.service = Some(service.into());
        self.method = Some(method.into());
        self.streaming = streaming;
        self
    }

    /// A call the operation map does not know: the one fixed operation and
    /// its path (as sent; tests use short paths without a query string).
    pub fn unknown(mut self, path: &str) -> Self {
        self.operation = Some("unknown".into());
        self.url_path = Some(path.into());
        self
    }

    /// The JSON object, keys in order, omitted keys absent.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let on = |g: &str| self.groups.contains(&g);
        let s = |m: &mut Map<String, Value>, k: &str, v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                m.insert(k.into(), Value::String(v.clone()));
            }
        };
        let n = |m: &mut Map<String, Value>, k: &str, v: u64| {
            m.insert(k.into(), Value::Number(v.into()));
        };
        m.insert(
            "wirelens.protocol".into(),
            Value::String(self.protocol.into()),
        );
        s(&mut m, "wirelens.operation", &self.operation);
        s(&mut m, "rpc.service", &self.service);
        s(&mut m, "rpc.method", &self.method);
        s(
            &mut m,
            "wirelens.streaming",
            &self.streaming.map(String::from),
        );
        s(&mut m, "http.route", &self.route);
        s(&mut m, "url.path", &self.url_path);
        if let Some(c) = self.grpc_status {
            n(&mut m, "rpc.grpc.status_code", c);
        }
        if on("grpc_message") {
            s(&mut m, "wirelens.grpc.message", &self.grpc_message);
        }
        n(&mut m, "wirelens.request.header.size", self.req_headers);
        n(&mut m, "wirelens.response.header.size", self.resp_headers);
        n(&mut m, "wirelens.response.trailer.size", self.resp_trailers);
        n(&mut m, "http.request.body.size", self.req_body);
        n(&mut m, "http.response.body.size", self.resp_body);
        if let Some((rq, rs)) = &self.frames {
            n(&mut m, "wirelens.request.messages", rq.messages);
            n(&mut m, "wirelens.response.messages", rs.messages);
            if on("message_sizes") {
                for (d, p) in [(rq, "request"), (rs, "response")] {
                    n(&mut m, &format!("wirelens.{p}.message.bytes"), d.bytes);
                    if let (Some(lo), Some(hi)) = (d.min, d.max) {
                        n(&mut m, &format!("wirelens.{p}.message.min"), lo);
                        n(&mut m, &format!("wirelens.{p}.message.max"), hi);
                    }
                }
            }
            if on("framing") {
                n(&mut m, "wirelens.request.framing.bytes", rq.framing);
                n(&mut m, "wirelens.response.framing.bytes", rs.framing);
            }
            if on("compression") {
                n(
                    &mut m,
                    "wirelens.request.compressed_messages",
                    rq.compressed,
                );
                n(
                    &mut m,
                    "wirelens.response.compressed_messages",
                    rs.compressed,
                );
            }
        }
        if let Some(t) = self.ttfb_us {
            n(&mut m, "wirelens.time_to_first_byte_us", t);
        }
        if let Some(t) = self.duration_us {
            n(&mut m, "wirelens.duration_us", t);
        }
        if let (Some(t), true) = (self.req_duration_us, on("request_duration")) {
            n(&mut m, "wirelens.request.duration_us", t);
        }
        n(&mut m, "wirelens.malformed", self.malformed as u64);
        if let Some(r) = self.sample_rate {
            m.insert(
                "wirelens.sample_rate".into(),
                Value::Number(Number::from_f64(r).unwrap()),
            );
        }
        m
    }
}

/// Parses a published record (format 2: values by position, filters/README.md
/// "The record object"), keyed by attribute name; its operation map key as
/// `wirelens.opmap.key` ([`assert_record`] expects it in place of the four
/// labels it stands for).
pub fn parse_record(raw: &[u8]) -> Map<String, Value> {
    use wirelens_core::names::published;
    let text = std::str::from_utf8(raw).expect("record is UTF-8");
    assert!(
        !text.starts_with('{'),
        "published as format 1 (JSON): {text}"
    );
    assert!(
        !text.ends_with(','),
        "trailing empty values are left off: {text}"
    );
    let decoded = wirelens_core::record::decode_published(text, &wirelens_core::OpMap::empty());
    decoded
        .into_iter()
        .map(|(k, v)| {
            let name = if k == published::KEY {
                published::KEY_ATTRIBUTE
            } else {
                wirelens_core::names::attribute_name(&k)
                    .unwrap_or_else(|| panic!("unknown short name {k} in {text}"))
            };
            (name.to_string(), v)
        })
        .collect()
}

/// The expectation as published: `rpc.service`, `rpc.method`,
/// `wirelens.streaming` and `http.route` are constant per operation and rule,
/// so the record carries their key instead (the Collector restores them).
pub fn as_published(mut want: Map<String, Value>) -> Map<String, Value> {
    let text = |want: &mut Map<String, Value>, k: &str| match want.remove(k) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    };
    let service = text(&mut want, "rpc.service");
    let method = text(&mut want, "rpc.method");
    let streaming = text(&mut want, "wirelens.streaming");
    let route = text(&mut want, "http.route");
    if let Some(Value::String(op)) = want.get("wirelens.operation") {
        if op != "unknown" {
            let key = wirelens_core::opmap::labels_key(op, &service, &method, &streaming, &route);
            want.insert("wirelens.opmap.key".into(), Value::String(key));
        }
    }
    want
}

/// No whitespace outside strings; inside strings, every control character
/// escaped as `\u00XX` (README: `\"`, `\\`, U+0000–U+001F as `\u00XX`).
pub fn assert_compact(text: &str) {
    let mut in_string = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    let e = chars.next().unwrap();
                    assert!(matches!(e, '"' | '\\' | 'u'), "escape \\{e} in {text}");
                    if e == 'u' {
                        let hex: String = chars.by_ref().take(4).collect();
                        let v = u32::from_str_radix(&hex, 16).unwrap();
                        assert!(
                            v < 0x20,
                            "\\u{hex} for a character that needs no escape in {text}"
                        );
                    }
                }
                '"' => in_string = false,
                c => assert!(c >= ' ', "raw control character in {text}"),
            }
        } else {
            assert!(!c.is_whitespace(), "whitespace outside strings: {text}");
            if c == '"' {
                in_string = true;
            }
        }
    }
}

/// Compares a record with the expectation, key by key.
pub fn assert_record(got: &Map<String, Value>, want: &Expect) {
    let want = as_published(want.to_json());
    for (k, w) in &want {
        match got.get(k) {
            Some(g) => assert_eq!(
                g, w,
                "key {k}: got {g}, want {w}\n got: {got:?}\nwant: {want:?}"
            ),
            None => panic!("key {k} missing (want {w})\n got: {got:?}\nwant: {want:?}"),
        }
    }
    for k in got.keys() {
        assert!(
            want.contains_key(k),
            "unexpected key {k} = {}\n got: {got:?}\nwant: {want:?}",
            got[k]
        );
    }
    // The order is the record's positions (decode_published follows them).
    assert_eq!(
        got.keys().collect::<std::collections::BTreeSet<_>>(),
        want.keys().collect::<std::collections::BTreeSet<_>>(),
        "keys"
    );
}

/// Checks the one `set_property` call of a publication (name, count, the
/// context) and returns the parsed record.
pub fn check_publication(props: &[Property], ctx: u32) -> Map<String, Value> {
    let names: Vec<&[u8]> = props.iter().map(|p| p.path.as_slice()).collect();
    assert_eq!(
        names,
        [&b"wirelens.record"[..]],
        "exactly one set_property call (a single-segment path, no NUL)"
    );
    let p = &props[0];
    assert_eq!(p.segments().len(), 1);
    assert_eq!(p.context_id, ctx, "published in the stream's own context");
    parse_record(&p.value)
}

/// Asserts nothing unexpected happened at the host: no unimplemented import
/// called, no map/buffer read outside its phase, no WASI output, no exit.
pub fn assert_clean(vm: &Vm) {
    let h = vm.host();
    assert!(
        h.unimplemented_calls.is_empty(),
        "unimplemented imports called: {:?}",
        h.unimplemented_calls
    );
    assert!(
        h.out_of_phase_reads.is_empty(),
        "reads outside their phase: {:?}",
        h.out_of_phase_reads
    );
    assert!(h.fd_output.is_empty(), "WASI output: {:?}", h.fd_output);
    assert!(h.proc_exits.is_empty());
}

/// Runs `f` and asserts it published nothing.
pub fn silent(vm: &mut Vm, f: impl FnOnce(&mut Vm)) {
    let before = vm.host().properties.len();
    f(vm);
    assert_eq!(vm.host().properties.len(), before, "published too early");
}

/// Runs `f` (the callback that ends the response) and returns the
/// property it published.
pub fn publishes(vm: &mut Vm, f: impl FnOnce(&mut Vm)) -> Vec<Property> {
    let before = vm.host().properties.len();
    f(vm);
    let props = vm.host().properties[before..].to_vec();
    assert_eq!(props.len(), 1, "this callback must publish: {props:?}");
    props
}

/// Host calls made during `f`.
pub fn calls_during(vm: &mut Vm, f: impl FnOnce(&mut Vm)) -> Vec<HostCall> {
    let before = vm.host().calls.len();
    f(vm);
    vm.host().calls[before..].to_vec()
}

pub fn h(pairs: &[(&str, &str)]) -> Headers {
    wirelens_abi::headers(pairs)
}

/// Splits `data` into chunks whose sizes cycle through `sizes`.
pub fn chunks<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut off = 0;
    let mut i = 0;
    while off < data.len() {
        let n = sizes[i % sizes.len()].max(1).min(data.len() - off);
        out.push(&data[off..off + n]);
        off += n;
        i += 1;
    }
    out
}

/// Deterministic pseudo-random bytes (xorshift).
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A gRPC request's headers as grpc-go sends them through Envoy.
pub fn grpc_request(path: &str, content_type: &str) -> Headers {
    h(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "localhost:10000"),
        ("content-type", content_type),
        ("te", "trailers"),
        ("grpc-timeout", "5S"),
        ("user-agent", "grpc-go/1.70.0"),
        ("x-forwarded-proto", "http"),
        ("x-request-id", "6f1c9a2e-1b7d-4c51-9f0e-6b9d8e2a4c11"),
    ])
}
