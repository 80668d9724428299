//! wirelens proxy-wasm HTTP filter: a thin adapter that hands Envoy's
//! callbacks to [`wirelens_core::Call`] together with [`Envoy`], the
//! core's [`Host`] over the proxy-wasm ABI. The call decides which host
//! calls to make and publishes the record as one filter-state property,
//! `wirelens.record`: a compact JSON object.
//!
//! The proxy-wasm Rust SDK dispatches: its `main!` initializes the module
//! (`_initialize` runs the constructors, so the linker leaves the exports
//! unwrapped), its exports route every callback to a [`RootContext`] per
//! plugin and an [`HttpContext`] per stream, and its allocator answers
//! `proxy_on_memory_allocate`. The host calls the filter makes go through
//! [`host`], which returns errors instead of panicking as the SDK's
//! `hostcalls` do.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, MapType};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use wirelens_core::headers::Serialized;
use wirelens_core::{
    Body, Call, Config, HeaderMap, Host, OpMap, Options, Sampler, PROPERTY_RECORD,
};

mod host;

proxy_wasm::main! {{
    proxy_wasm::set_root_context(|context_id| -> Box<dyn RootContext> {
        Box::new(Root { context_id, plugin: None })
    });
}}

/// Initial capacity of the shared JSON buffer (a typical record is well
/// under this; a long `grpc-message` grows it once).
const JSON_CAPACITY: usize = 1024;

/// One plugin instance (a root context): its configuration and what every
/// stream of it shares. Replaced as a whole when it is configured again;
/// streams keep the instance they started with.
struct Plugin {
    map: Arc<OpMap>,
    options: Options,
    sampler: Cell<Sampler>,
    /// Which recorded calls are also estimated for the counterfactual;
    /// `None` when the map has no descriptors (nothing to estimate with).
    counterfactual: Option<Cell<Sampler>>,
    /// The record is serialized here (one VM is single-threaded and a
    /// publication never nests), so publishing does not allocate.
    json: Cell<String>,
}

impl Plugin {
    fn new(map: OpMap, options: Options, seed: u64) -> Self {
        Plugin {
            sampler: Cell::new(Sampler::new(options.sample_rate(), seed)),
            counterfactual: map.descriptors().map(|_| {
                Cell::new(Sampler::new(
                    options.counterfactual_rate(),
                    seed ^ 0xC0FF_EE00_D15E_A5E5,
                ))
            }),
            options,
            json: Cell::new(String::with_capacity(JSON_CAPACITY)),
            map: Arc::new(map),
        }
    }

    fn sample(&self) -> bool {
        draw(&self.sampler)
    }

    /// A recorded call is estimated too (no draw without descriptors, none
    /// at rate 0 or 1).
    fn sample_counterfactual(&self) -> bool {
        self.counterfactual.as_ref().is_some_and(draw)
    }

    fn configure(root_id: u32, plugin_configuration_size: usize) -> Result<Plugin, ()> {
        let bytes = if plugin_configuration_size == 0 {
            Vec::new()
        } else {
            match host::buffer(
                BufferType::PluginConfiguration,
                0,
                plugin_configuration_size,
            ) {
                Some(b) => b,
                None => {
                    host::log_error("wirelens: cannot read the plugin configuration");
                    return Err(());
                }
            }
        };
        match Config::from_json(&bytes) {
            Ok(config) => {
                // Seed: the host clock (no WASI random_get), mixed with the
                // root context id; splitmix64 spreads it.
                let seed = host::now_ns().unwrap_or(0x5EED) ^ (u64::from(root_id) << 48);
                Ok(Plugin::new(config.map, config.options, seed))
            }
            Err(e) => {
                host::log_error(&format!("wirelens: invalid plugin configuration: {e}"));
                Err(())
            }
        }
    }
}

fn draw(sampler: &Cell<Sampler>) -> bool {
    let mut s = sampler.get();
    let keep = s.sample();
    sampler.set(s);
    keep
}

/// The proxy-wasm host as the core sees it ([`Host`]): each method is one
/// call through [`host`]; the record's JSON is written into the plugin's
/// buffer, so publishing does not allocate once it has grown.
struct Envoy<'p> {
    json: &'p Cell<String>,
}

impl Host for Envoy<'_> {
    type Map<'a>
        = Serialized<Vec<u8>>
    where
        Self: 'a;
    type Bytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn now_ns(&mut self) -> Option<u64> {
        host::now_ns()
    }

    fn header_map(&mut self, map: HeaderMap) -> Option<Serialized<Vec<u8>>> {
        host::header_map(map_type(map)).map(Serialized)
    }

    fn header_map_size(&mut self, map: HeaderMap) -> Option<usize> {
        host::header_map_size(map_type(map))
    }

    fn body_bytes(&mut self, body: Body, start: usize, max: usize) -> Option<Vec<u8>> {
        let buffer = match body {
            Body::Request => BufferType::HttpRequestBody,
            Body::Response => BufferType::HttpResponseBody,
        };
        host::buffer(buffer, start, max)
    }

    fn record_buffer(&mut self) -> String {
        self.json.take()
    }

    fn publish(&mut self, record: String) {
        // A failure (e.g. no stream info) is ignored by design.
        let _ = host::set_property(PROPERTY_RECORD, record.as_bytes());
        self.json.set(record);
    }
}

fn map_type(map: HeaderMap) -> MapType {
    match map {
        HeaderMap::RequestHeaders => MapType::HttpRequestHeaders,
        HeaderMap::ResponseHeaders => MapType::HttpResponseHeaders,
        HeaderMap::ResponseTrailers => MapType::HttpResponseTrailers,
    }
}

/// One sampled HTTP stream: its call and the plugin it started under. The
/// call decides every host call; this only hands it the host.
struct Stream {
    call: Call,
    plugin: Rc<Plugin>,
}

impl Stream {
    fn drive(&mut self, f: impl FnOnce(&mut Call, &mut Envoy)) {
        f(
            &mut self.call,
            &mut Envoy {
                json: &self.plugin.json,
            },
        );
    }
}

/// The plugin: one root context of the VM, configured (again) by Envoy.
/// Its plugin is `None` until configured or when the configuration was
/// refused: its streams then do nothing.
struct Root {
    context_id: u32,
    plugin: Option<Rc<Plugin>>,
}

impl Context for Root {}

impl RootContext for Root {
    /// Parses and indexes the plugin configuration; false (Envoy refuses
    /// the plugin) with one log line naming the bad field.
    fn on_configure(&mut self, plugin_configuration_size: usize) -> bool {
        self.plugin = Plugin::configure(self.context_id, plugin_configuration_size)
            .ok()
            .map(Rc::new);
        self.plugin.is_some()
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(match &self.plugin {
            Some(plugin) => HttpStream::AwaitingRequestHeaders(Rc::clone(plugin)),
            None => HttpStream::Ignored,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// One HTTP stream as the SDK sees it, through its lifecycle: created with
/// the plugin it started under, the request headers decide sampling, and a
/// sampled stream records its call from then on. Every callback answers
/// `Continue`.
// The SDK boxes every context (`Box<dyn HttpContext>`), so the small
// variants cost nothing; boxing `Stream` would allocate once more per call.
#[allow(clippy::large_enum_variant)]
enum HttpStream {
    /// Created; the request headers (which decide sampling) have not
    /// reached the filter. Holds the plugin until they do (or the stream
    /// is dropped: Envoy may create the context in the log phase only).
    AwaitingRequestHeaders(Rc<Plugin>),
    /// Sampled: its call, driven by every later callback.
    Recording(Stream),
    /// Does nothing in any callback: not sampled, or its plugin was not
    /// configured (or its configuration was refused).
    Ignored,
}

impl HttpStream {
    fn with_stream(&mut self, f: impl FnOnce(&mut Call, &mut Envoy)) -> Action {
        if let HttpStream::Recording(stream) = self {
            stream.drive(f);
        }
        Action::Continue
    }
}

impl Context for HttpStream {}

impl HttpContext for HttpStream {
    /// Decides sampling and, for a sampled stream, captures everything
    /// needed from the request headers with one copy of the map.
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        // Only the first request headers count.
        let HttpStream::AwaitingRequestHeaders(plugin) = self else {
            return Action::Continue;
        };
        if !plugin.sample() {
            *self = HttpStream::Ignored;
            return Action::Continue;
        }
        let call = Call::new(Arc::clone(&plugin.map))
            .with_options(plugin.options)
            .with_counterfactual(plugin.sample_counterfactual());
        let plugin = Rc::clone(plugin);
        // Replaces the state in place (the awaiting plugin reference drops).
        *self = HttpStream::Recording(Stream { call, plugin });
        if let HttpStream::Recording(stream) = self {
            stream.drive(|c, h| c.on_request_headers(h, end_of_stream));
        }
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.with_stream(|c, h| c.on_request_body(h, body_size, end_of_stream))
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        self.with_stream(|c, h| c.on_request_trailers(h))
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        self.with_stream(|c, h| c.on_response_headers(h, end_of_stream))
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.with_stream(|c, h| c.on_response_body(h, body_size, end_of_stream))
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        self.with_stream(|c, h| c.on_response_trailers(h))
    }

    fn on_log(&mut self) {
        self.with_stream(|c, h| c.on_log(h));
    }
}

#[cfg(test)]
mod tests {
    //! The adapter against the native fake host (`host::abi::HOST`).
    use super::*;
    use host::abi::{FakeHost, HOST};
    use std::cell::RefCell;
    use wirelens_core::frame::encode_frame;
    use wirelens_core::headers::serialize;
    use wirelens_core::{KEYS, WIRE_KEYS};

    fn reset(config: &str) {
        HOST.with(|h| {
            *h.borrow_mut() = FakeHost {
                now: Some(1_000_000),
                tick: 1_000_000,
                ..FakeHost::default()
            };
            h.borrow_mut().buffers[BufferType::PluginConfiguration as usize] =
                Some(config.as_bytes().to_vec());
        });
    }

    fn host<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
        HOST.with(|h| f(&mut h.borrow_mut()))
    }

    const ROOT: u32 = 1;

    thread_local! {
        /// This test thread's plugin, as the SDK would hold it.
        static PLUGIN: RefCell<Root> = const { RefCell::new(Root { context_id: ROOT, plugin: None }) };
    }

    /// A fresh plugin (root context `ROOT`) on a fresh fake host, configured
    /// with `config`; returns what `on_configure` answered.
    fn configure(config: &str) -> bool {
        reset(config);
        CONFIGURED.with(|c| *c.borrow_mut() = config.to_string());
        PLUGIN.with(|r| {
            let mut root = r.borrow_mut();
            *root = Root {
                context_id: ROOT,
                plugin: None,
            };
            root.on_vm_start(0) && root.on_configure(config.len())
        })
    }

    /// A new stream of the plugin, created as the SDK's dispatcher does.
    fn stream() -> Box<dyn HttpContext> {
        thread_local!(static NEXT: Cell<u32> = const { Cell::new(2) });
        let id = NEXT.with(|n| n.replace(n.get() + 1));
        PLUGIN
            .with(|r| r.borrow().create_http_context(id))
            .expect("an HTTP context")
    }

    /// The end of a stream, in Envoy's order: the log phase, then the
    /// dispatcher drops the context at `proxy_on_delete`.
    fn finish(mut s: Box<dyn HttpContext>) {
        s.on_log();
        assert!(s.on_done());
    }

    /// References to the configured plugin besides the root's own.
    fn plugin_references() -> usize {
        PLUGIN.with(|r| {
            r.borrow()
                .plugin
                .as_ref()
                .map_or(0, |p| Rc::strong_count(p) - 1)
        })
    }

    const CONFIG: &str = r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
        "operation": "hello.SayHello", "streaming": "unary"}]}"#;

    /// One unary gRPC call through every callback; returns the host calls
    /// made by the stream.
    fn grpc_call(complete: bool) -> usize {
        grpc_call_answered(complete, "application/grpc", &[("grpc-status", "0")])
    }

    /// A unary gRPC call whose response carries `response_content_type`;
    /// with trailers when `complete`. Returns the host calls it made.
    fn grpc_call_answered(
        complete: bool,
        response_content_type: &str,
        trailers: &[(&str, &str)],
    ) -> usize {
        let req = serialize(&[
            (":method", "POST"),
            (":path", "/wirelens.v1.Hello/SayHello"),
            ("content-type", "application/grpc"),
        ]);
        let body = encode_frame(0, b"hi");
        host(|h| {
            h.maps[MapType::HttpRequestHeaders as usize] = Some(req);
            h.maps[MapType::HttpResponseHeaders as usize] = Some(serialize(&[
                (":status", "200"),
                ("content-type", response_content_type),
            ]));
            h.maps[MapType::HttpResponseTrailers as usize] = Some(serialize(trailers));
            h.buffers[BufferType::HttpRequestBody as usize] = Some(body.clone());
            h.buffers[BufferType::HttpResponseBody as usize] = Some(body.clone());
        });
        let before = host(|h| h.calls);
        let mut s = stream();
        s.on_http_request_headers(3, false);
        s.on_http_request_body(body.len(), true);
        s.on_http_response_headers(2, false);
        s.on_http_response_body(body.len(), false);
        if complete {
            s.on_http_response_trailers(1);
        }
        finish(s);
        host(|h| h.calls) - before
    }

    thread_local! {
        /// The plugin configuration `configure` was last given: its map restores the labels.
        static CONFIGURED: RefCell<String> = const { RefCell::new(String::new()) };
    }

    /// The published properties, each record decoded as the Collector
    /// expands it (the labels restored from the configured map) and written
    /// as JSON under the attribute names in record order, so assertions read
    /// like rows.
    fn take_properties() -> Vec<(String, Vec<u8>)> {
        let config = CONFIGURED.with(|c| c.borrow().clone());
        let map = wirelens_core::OpMap::from_json(config.as_bytes()).unwrap_or_default();
        let expand = |record: Vec<u8>| {
            let text = String::from_utf8(record).unwrap();
            let decoded = wirelens_core::record::decode_published(&text, &map);
            let mut out = String::from("{");
            for (wire, attribute) in WIRE_KEYS.iter().zip(KEYS) {
                if let Some(v) = decoded.get(*wire) {
                    if out.len() > 1 {
                        out.push(',');
                    }
                    out.push_str(&format!("\"{attribute}\":{v}"));
                }
            }
            if let Some(v) = decoded.get(wirelens_core::names::published::KEY) {
                out.push_str(&format!(
                    ",\"{}\":{v}",
                    wirelens_core::names::published::KEY_ATTRIBUTE
                ));
            }
            out.push('}');
            out.into_bytes()
        };
        host(|h| std::mem::take(&mut h.properties))
            .into_iter()
            .map(|(name, value)| (name, expand(value)))
            .collect()
    }

    fn response_messages(record: &[u8]) -> &str {
        let record = std::str::from_utf8(record).unwrap();
        let at = record
            .find(r#""wirelens.response.messages":"#)
            .expect(record)
            + 29;
        &record[at..at + 1]
    }

    #[test]
    fn grpc_response_headers_are_copied_only_when_no_trailers_came() {
        configure(CONFIG);
        // Trailers came: the headers were only sized, so their (odd) content
        // type was never seen and the body counts as one gRPC message.
        grpc_call_answered(true, "text/html", &[("grpc-status", "0")]);
        assert_eq!(response_messages(&take_properties()[0].1), "1");
        // No trailers: the headers are copied at publication and their
        // content type shows the body was not gRPC.
        grpc_call_answered(false, "text/html", &[]);
        assert_eq!(response_messages(&take_properties()[0].1), "0");
        grpc_call_answered(false, "application/grpc", &[]);
        assert_eq!(response_messages(&take_properties()[0].1), "1");
    }

    #[test]
    fn publishes_exactly_one_property() {
        let ok = configure(CONFIG);
        assert!(ok);
        grpc_call(true);
        let props = take_properties();
        let names: Vec<&str> = props.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, [PROPERTY_RECORD]);
        let record = std::str::from_utf8(&props[0].1).unwrap();
        assert!(
            record.starts_with(
                r#"{"wirelens.protocol":"grpc","wirelens.operation":"hello.SayHello","#
            ),
            "{record}"
        );
        // `grpc-status: 0` alone (12 bytes) was only sized: Envoy's
        // %GRPC_STATUS% carries the status.
        assert!(!record.contains("rpc.grpc.status_code"), "{record}");
        assert!(record.contains(r#""wirelens.request.messages":1,"wirelens.response.messages":1,"#));
        // Clock: start 1 ms, request end 2 ms, response headers 3 ms, end 4 ms.
        assert!(record.ends_with(r#""wirelens.time_to_first_byte_us":2000,"wirelens.duration_us":3000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#), "{record}");
    }

    #[test]
    fn grpc_trailers_are_copied_only_when_they_can_carry_a_message() {
        configure(CONFIG);
        let sized = grpc_call(true);
        let ok = take_properties();
        assert!(!String::from_utf8_lossy(&ok[0].1).contains("rpc.grpc.status_code"));
        let error = [("grpc-status", "5"), ("grpc-message", "no such%20name")];
        // One host call more: the map's copy after its size.
        assert_eq!(
            grpc_call_answered(true, "application/grpc", &error),
            sized + 1
        );
        let props = take_properties();
        let record = std::str::from_utf8(&props[0].1).unwrap();
        assert!(
            record.contains(r#""rpc.grpc.status_code":5,"wirelens.grpc.message":"no such name","#),
            "{record}"
        );
        // Not publishing grpc-message: never copied.
        configure(
            r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello"}],
            "grpc_message_max_bytes": 0}"#,
        );
        assert_eq!(grpc_call(true), sized);
    }

    #[test]
    fn rest_response_headers_are_sized_not_copied() {
        configure(
            r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
                "operation": "hello.SayHello", "streaming": "unary",
                "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]}]}"#,
        );
        host(|h| {
            h.maps[MapType::HttpRequestHeaders as usize] = Some(serialize(&[
                (":method", "POST"),
                (":path", "/v1/hello"),
                ("content-type", "application/json"),
            ]));
            h.maps[MapType::HttpResponseHeaders as usize] = Some(serialize(&[
                (":status", "200"),
                ("content-type", "application/json"),
            ]));
        });
        let before = host(|h| h.calls);
        let mut s = stream();
        s.on_http_request_headers(3, false);
        s.on_http_request_body(15, true);
        s.on_http_response_headers(2, false);
        s.on_http_response_body(30, true);
        finish(s);
        // 4 clock reads, the request map, the response map's size, one set_property.
        assert_eq!(host(|h| h.calls) - before, 7);
        let props = take_properties();
        let record = std::str::from_utf8(&props[0].1).unwrap();
        assert!(
            record.contains(r#""wirelens.response.header.size":38,"#),
            "{record}"
        );
        assert!(record.contains(r#""http.route":"/v1/hello","#), "{record}");
    }

    #[test]
    fn unknown_path_is_one_operation_at_no_extra_host_call() {
        configure(
            r#"{"operations": [{"operation": "hello.SayHello",
                "http_rules": [{"method": "GET", "pattern": "/v1/hello"}]}]}"#,
        );
        // A REST call without bodies: its host calls and its record.
        let call = |path: &str| {
            host(|h| {
                h.maps[MapType::HttpRequestHeaders as usize] =
                    Some(serialize(&[(":method", "GET"), (":path", path)]));
                h.maps[MapType::HttpResponseHeaders as usize] =
                    Some(serialize(&[(":status", "404")]));
            });
            let before = host(|h| h.calls);
            let mut s = stream();
            s.on_http_request_headers(2, true);
            s.on_http_response_headers(1, true);
            finish(s);
            let props = take_properties();
            let record = String::from_utf8(props[0].1.clone()).unwrap();
            (host(|h| h.calls) - before, record)
        };
        let (known_calls, known) = call("/v1/hello");
        assert!(!known.contains("url.path"), "{known}");
        let long_path = format!("/x.Y/{}", "q".repeat(8000));
        let (unknown_calls, unknown) = call(&long_path);
        // The path was already in the request map: no host call more.
        assert_eq!(unknown_calls, known_calls);
        let want = format!(
            r#"{{"wirelens.protocol":"rest","wirelens.operation":"unknown","url.path":"{}","#,
            &long_path[..128]
        );
        assert!(unknown.starts_with(&want), "{unknown}");
    }

    #[test]
    fn log_phase_fallback() {
        configure(CONFIG);
        grpc_call(false);
        let props = take_properties();
        assert_eq!(props.len(), 1);
        let record = std::str::from_utf8(&props[0].1).unwrap();
        // Start 1 ms, request end 2 ms, response headers 3 ms, on_log 4 ms.
        assert!(record.ends_with(r#""wirelens.time_to_first_byte_us":2000,"wirelens.duration_us":3000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#), "{record}");
        assert!(!record.contains("rpc.grpc.status_code"));
    }

    #[test]
    fn sample_rate_zero_does_nothing() {
        let ok = configure(r#"{"sample_rate": 0}"#);
        assert!(ok);
        for _ in 0..100 {
            assert_eq!(grpc_call(true), 0, "host calls of an unsampled call");
        }
        assert!(take_properties().is_empty());
    }

    #[test]
    fn sample_rate_one_always_and_fraction_sometimes() {
        configure(r#"{"sample_rate": 1}"#);
        for _ in 0..100 {
            grpc_call(true);
        }
        assert_eq!(take_properties().len(), 100);

        configure(r#"{"sample_rate": 0.25}"#);
        let n = 2000;
        for _ in 0..n {
            grpc_call(true);
        }
        let props = take_properties();
        let published = props.len();
        assert!((400..600).contains(&published), "{published} of {n}");
        assert!(std::str::from_utf8(&props[0].1)
            .unwrap()
            .ends_with(r#","wirelens.sample_rate":0.25}"#));
    }

    #[test]
    fn invalid_configuration_is_refused_with_its_field() {
        let ok = configure(r#"{"sample_rate": 1.5}"#);
        assert!(!ok);
        assert_eq!(
            host(|h| h.logs.clone()),
            ["wirelens: invalid plugin configuration: sample_rate: must be a number in [0, 1], got 1.5"]
        );
        let ok = configure(r#"{"optional_fields": ["sizes"]}"#);
        assert!(!ok);
        let ok = configure(r#"{"grpc_message_max_bytes": 4096}"#);
        assert!(!ok);
        assert_eq!(
            host(|h| h.logs.clone()),
            ["wirelens: invalid plugin configuration: grpc_message_max_bytes: must be an integer in [0, 1024], got 4096"]
        );
        let ok = configure(r#"{"optional_fields": [], "rest_transcoded": true}"#);
        assert!(ok);
        let transcoded = PLUGIN.with(|r| {
            r.borrow()
                .plugin
                .as_ref()
                .is_some_and(|p| p.options.rest_transcoded)
        });
        assert!(transcoded);
    }

    #[test]
    fn every_stream_lets_go_of_its_plugin() {
        configure(CONFIG);
        for _ in 0..50 {
            grpc_call(true);
            grpc_call(false);
        }
        // Headers never reached the filter: Envoy creates the context in
        // the log phase.
        finish(stream());
        assert_eq!(plugin_references(), 0);
        configure(r#"{"sample_rate": 0}"#);
        grpc_call(true);
        assert_eq!(plugin_references(), 0);
        // A stream alive across a new configuration keeps the one it began with.
        configure(CONFIG);
        let mut s = stream();
        assert_eq!(plugin_references(), 1);
        PLUGIN.with(|r| r.borrow_mut().on_configure(CONFIG.len()));
        assert_eq!(plugin_references(), 0);
        s.on_http_request_headers(3, true);
        finish(s);
        assert_eq!(take_properties().len(), 1);
    }

    #[test]
    fn streams_of_a_refused_plugin_do_nothing() {
        assert!(!configure(r#"{"sample_rate": 2}"#));
        assert_eq!(grpc_call(true), 0);
        assert!(take_properties().is_empty());
    }
}
