//! wirelens proxy-wasm HTTP filter: a thin adapter that feeds Envoy's
//! callbacks into [`wirelens_core::Call`] and publishes the record as one
//! filter-state property, `wirelens.record`: a compact JSON object.
//!
//! Host calls whose failure the SDK turns into a panic (reading header maps
//! and body bytes, the clock, `set_property`) go through [`host`], which
//! calls the same proxy-wasm ABI functions directly and returns errors
//! instead. Everything else (context dispatch, the allocator, `_initialize`)
//! is the proxy-wasm 0.2.5 SDK.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wirelens_core::headers::iter_serialized;
use wirelens_core::{BodySource, Call, Config, OpMap, Options, Sampler, PROPERTY_RECORD};

mod host;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|context_id| -> Box<dyn RootContext> {
        Box::new(Root {
            context_id,
            map: Rc::new(OpMap::empty()),
            options: Options::default(),
            shared: Rc::new(Shared::new(Sampler::new(1.0, 0))),
        })
    });
}}

/// Initial capacity of the shared JSON buffer (a typical record is well
/// under this; a long `grpc-message` grows it once).
const JSON_CAPACITY: usize = 1024;

/// Per plugin instance state every stream of it uses.
struct Shared {
    sampler: Cell<Sampler>,
    /// The record is serialized here (one VM is single-threaded and a
    /// publication never nests), so publishing does not allocate.
    json: RefCell<String>,
}

impl Shared {
    fn new(sampler: Sampler) -> Self {
        Shared {
            sampler: Cell::new(sampler),
            json: RefCell::new(String::with_capacity(JSON_CAPACITY)),
        }
    }

    fn sample(&self) -> bool {
        let mut s = self.sampler.get();
        let keep = s.sample();
        self.sampler.set(s);
        keep
    }
}

struct Root {
    context_id: u32,
    map: Rc<OpMap>,
    options: Options,
    shared: Rc<Shared>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, plugin_configuration_size: usize) -> bool {
        let bytes = if plugin_configuration_size == 0 {
            Vec::new()
        } else {
            match host::buffer(
                host::BUFFER_PLUGIN_CONFIGURATION,
                0,
                plugin_configuration_size,
            ) {
                Some(b) => b,
                None => {
                    host::log_error("wirelens: cannot read the plugin configuration");
                    return false;
                }
            }
        };
        match Config::from_json(&bytes) {
            Ok(config) => {
                // Seed: the host clock (no WASI random_get), mixed with the
                // root context id; splitmix64 spreads it.
                let seed = host::now_ns().unwrap_or(0x5EED) ^ (u64::from(self.context_id) << 48);
                self.map = Rc::new(config.map);
                self.options = config.options;
                self.shared = Rc::new(Shared::new(Sampler::new(
                    config.options.sample_rate(),
                    seed,
                )));
                true
            }
            Err(e) => {
                host::log_error(&format!("wirelens: invalid plugin configuration: {e}"));
                false
            }
        }
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Stream {
            call: Call::new(Rc::clone(&self.map)).with_options(self.options),
            shared: Rc::clone(&self.shared),
            sampled: false,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// The current request or response body chunk, read through the host.
struct HostBody(u32);

impl BodySource for HostBody {
    type Buf = Vec<u8>;
    fn read(&mut self, start: usize, max: usize) -> Option<Vec<u8>> {
        host::buffer(self.0, start, max)
    }
}

struct Stream {
    call: Call,
    shared: Rc<Shared>,
    /// Decided in `on_http_request_headers`; an unsampled (or headerless)
    /// stream does nothing at all in any callback.
    sampled: bool,
}

impl Stream {
    /// Publishes the record once (`now_ns` is the end time for streams
    /// whose response never completed): exactly one `set_property` call.
    fn publish(&mut self, now_ns: Option<u64>) {
        if !self.call.claim_publish() {
            return;
        }
        if self.call.response_headers_deferred() {
            // A gRPC response without trailers (errors, resets: rare). Envoy
            // shows response headers again only in the log phase, where this
            // publication then happens.
            if let Some(map) = host::header_map(host::MAP_RESPONSE_HEADERS) {
                self.call.on_deferred_response_headers(iter_serialized(&map));
            }
        }
        let record = self.call.record(now_ns);
        // A failure (e.g. no stream info) is ignored by design.
        let set = |json: &mut String| {
            record.write_json(json);
            let _ = host::set_property(PROPERTY_RECORD, json.as_bytes());
        };
        match self.shared.json.try_borrow_mut() {
            Ok(mut buf) => set(&mut buf),
            // Unreachable in a single-threaded VM; never panic anyway.
            Err(_) => set(&mut String::new()),
        }
    }
}

impl Context for Stream {}

impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        if self.sampled || !self.shared.sample() {
            return Action::Continue;
        }
        self.sampled = true;
        let now = host::now_ns();
        let map = host::header_map(host::MAP_REQUEST_HEADERS).unwrap_or_default();
        self.call
            .on_request_headers(iter_serialized(&map), end_of_stream, now);
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.sampled {
            self.call.on_request_body(
                body_size,
                end_of_stream,
                &mut HostBody(host::BUFFER_REQUEST_BODY),
                host::now_ns,
            );
        }
        Action::Continue
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        if self.sampled {
            self.call.on_request_trailers(host::now_ns);
        }
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        if !self.sampled {
            return Action::Continue;
        }
        let complete = if self.call.response_headers_need_entries(end_of_stream) {
            let map = host::header_map(host::MAP_RESPONSE_HEADERS).unwrap_or_default();
            self.call
                .on_response_headers(iter_serialized(&map), end_of_stream, host::now_ns)
        } else {
            let size = host::header_map_size(host::MAP_RESPONSE_HEADERS).unwrap_or(0);
            self.call
                .on_response_header_size(size as u64, end_of_stream, host::now_ns)
        };
        if complete {
            self.publish(None);
        }
        Action::Continue
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.sampled
            && self.call.on_response_body(
                body_size,
                end_of_stream,
                &mut HostBody(host::BUFFER_RESPONSE_BODY),
                host::now_ns,
            )
            && !self.call.response_headers_deferred()
        {
            self.publish(None);
        }
        Action::Continue
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        if !self.sampled {
            return Action::Continue;
        }
        let map = host::header_map(host::MAP_RESPONSE_TRAILERS).unwrap_or_default();
        if self
            .call
            .on_response_trailers(iter_serialized(&map), host::now_ns)
        {
            self.publish(None);
        }
        Action::Continue
    }

    fn on_log(&mut self) {
        if self.sampled && !self.call.published() {
            // The clock is needed only for a response that never completed.
            let now = if self.call.response_complete() {
                None
            } else {
                host::now_ns()
            };
            self.publish(now);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The adapter against the native fake host (`host::abi::HOST`).
    use super::*;
    use host::abi::{FakeHost, HOST};
    use wirelens_core::frame::encode_frame;
    use wirelens_core::headers::serialize;

    /// The SDK's own host-call imports must resolve for the native test
    /// binary to link. The adapter never reaches them (its host calls go
    /// through `host::abi`, the fake host); should anything do so, it gets
    /// `Unimplemented` (12). Arguments are ignored (the C calling
    /// convention lets the callee ignore them).
    macro_rules! unimplemented_imports {
        ($($name:ident),* $(,)?) => {$(
            #[no_mangle]
            extern "C" fn $name() -> u32 {
                12
            }
        )*};
    }
    unimplemented_imports!(
        proxy_add_header_map_value,
        proxy_call_foreign_function,
        proxy_close_stream,
        proxy_continue_stream,
        proxy_define_metric,
        proxy_dequeue_shared_queue,
        proxy_done,
        proxy_enqueue_shared_queue,
        proxy_get_buffer_bytes,
        proxy_get_current_time_nanoseconds,
        proxy_get_header_map_pairs,
        proxy_get_header_map_value,
        proxy_get_log_level,
        proxy_get_metric,
        proxy_get_property,
        proxy_get_shared_data,
        proxy_get_status,
        proxy_grpc_call,
        proxy_grpc_cancel,
        proxy_grpc_close,
        proxy_grpc_send,
        proxy_grpc_stream,
        proxy_http_call,
        proxy_increment_metric,
        proxy_log,
        proxy_record_metric,
        proxy_register_shared_queue,
        proxy_remove_header_map_value,
        proxy_replace_header_map_value,
        proxy_resolve_shared_queue,
        proxy_send_local_response,
        proxy_set_buffer_bytes,
        proxy_set_effective_context,
        proxy_set_header_map_pairs,
        proxy_set_property,
        proxy_set_shared_data,
        proxy_set_tick_period_milliseconds,
    );

    fn reset(config: &str) {
        HOST.with(|h| {
            *h.borrow_mut() = FakeHost {
                now: Some(1_000_000),
                tick: 1_000_000,
                ..FakeHost::default()
            };
            h.borrow_mut().buffers[host::BUFFER_PLUGIN_CONFIGURATION as usize] =
                Some(config.as_bytes().to_vec());
        });
    }

    fn host<R>(f: impl FnOnce(&mut FakeHost) -> R) -> R {
        HOST.with(|h| f(&mut h.borrow_mut()))
    }

    fn configure(config: &str) -> (Root, bool) {
        reset(config);
        let mut root = Root {
            context_id: 1,
            map: Rc::new(OpMap::empty()),
            options: Options::default(),
            shared: Rc::new(Shared::new(Sampler::new(1.0, 0))),
        };
        let ok = root.on_configure(config.len());
        (root, ok)
    }

    const CONFIG: &str = r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
        "operation": "hello.SayHello", "streaming": "unary"}]}"#;

    /// One unary gRPC call through every callback; returns the host calls
    /// made by the stream.
    fn grpc_call(root: &Root, complete: bool) -> usize {
        grpc_call_answered(root, complete, "application/grpc")
    }

    /// A unary gRPC call whose response carries `response_content_type`;
    /// with trailers when `complete`. Returns the host calls it made.
    fn grpc_call_answered(root: &Root, complete: bool, response_content_type: &str) -> usize {
        let req = serialize(&[
            (":method", "POST"),
            (":path", "/wirelens.v1.Hello/SayHello"),
            ("content-type", "application/grpc"),
        ]);
        let body = encode_frame(0, b"hi");
        host(|h| {
            h.maps[host::MAP_REQUEST_HEADERS as usize] = Some(req);
            h.maps[host::MAP_RESPONSE_HEADERS as usize] = Some(serialize(&[
                (":status", "200"),
                ("content-type", response_content_type),
            ]));
            h.maps[host::MAP_RESPONSE_TRAILERS as usize] = Some(serialize(&[("grpc-status", "0")]));
            h.buffers[host::BUFFER_REQUEST_BODY as usize] = Some(body.clone());
            h.buffers[host::BUFFER_RESPONSE_BODY as usize] = Some(body.clone());
        });
        let before = host(|h| h.calls);
        let mut s = root.create_http_context(2).unwrap();
        s.on_http_request_headers(3, false);
        s.on_http_request_body(body.len(), true);
        s.on_http_response_headers(2, false);
        s.on_http_response_body(body.len(), false);
        if complete {
            s.on_http_response_trailers(1);
        }
        s.on_log();
        host(|h| h.calls) - before
    }

    fn take_properties() -> Vec<(String, Vec<u8>)> {
        host(|h| std::mem::take(&mut h.properties))
    }

    fn response_messages(record: &[u8]) -> &str {
        let record = std::str::from_utf8(record).unwrap();
        let at = record.find(r#""wirelens.response.messages":"#).expect(record) + 29;
        &record[at..at + 1]
    }

    #[test]
    fn grpc_response_headers_are_copied_only_when_no_trailers_came() {
        let (root, _) = configure(CONFIG);
        // Trailers came: the headers were only sized, so their (odd) content
        // type was never seen and the body counts as one gRPC message.
        grpc_call_answered(&root, true, "text/html");
        assert_eq!(response_messages(&take_properties()[0].1), "1");
        // No trailers: the headers are copied at publication and their
        // content type shows the body was not gRPC.
        grpc_call_answered(&root, false, "text/html");
        assert_eq!(response_messages(&take_properties()[0].1), "0");
        grpc_call_answered(&root, false, "application/grpc");
        assert_eq!(response_messages(&take_properties()[0].1), "1");
    }

    #[test]
    fn publishes_exactly_one_property() {
        let (root, ok) = configure(CONFIG);
        assert!(ok);
        grpc_call(&root, true);
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
        assert!(record.contains(r#""rpc.grpc.status_code":0,"#), "{record}");
        assert!(record.contains(r#""wirelens.request.messages":1,"wirelens.response.messages":1,"#));
        // Clock: start 1 ms, request end 2 ms, response headers 3 ms, end 4 ms.
        assert!(record.ends_with(r#""wirelens.time_to_first_byte_us":2000,"wirelens.duration_us":3000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#), "{record}");
    }

    #[test]
    fn rest_response_headers_are_sized_not_copied() {
        let (root, _) = configure(
            r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
                "operation": "hello.SayHello", "streaming": "unary",
                "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]}]}"#,
        );
        host(|h| {
            h.maps[host::MAP_REQUEST_HEADERS as usize] = Some(serialize(&[
                (":method", "POST"),
                (":path", "/v1/hello"),
                ("content-type", "application/json"),
            ]));
            h.maps[host::MAP_RESPONSE_HEADERS as usize] = Some(serialize(&[
                (":status", "200"),
                ("content-type", "application/json"),
            ]));
        });
        let before = host(|h| h.calls);
        let mut s = root.create_http_context(2).unwrap();
        s.on_http_request_headers(3, false);
        s.on_http_request_body(15, true);
        s.on_http_response_headers(2, false);
        s.on_http_response_body(30, true);
        s.on_log();
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
    fn log_phase_fallback() {
        let (root, _) = configure(CONFIG);
        grpc_call(&root, false);
        let props = take_properties();
        assert_eq!(props.len(), 1);
        let record = std::str::from_utf8(&props[0].1).unwrap();
        // Start 1 ms, request end 2 ms, response headers 3 ms, on_log 4 ms.
        assert!(record.ends_with(r#""wirelens.time_to_first_byte_us":2000,"wirelens.duration_us":3000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#), "{record}");
        assert!(!record.contains("rpc.grpc.status_code"));
    }

    #[test]
    fn sample_rate_zero_does_nothing() {
        let (root, ok) = configure(r#"{"sample_rate": 0}"#);
        assert!(ok);
        for _ in 0..100 {
            assert_eq!(grpc_call(&root, true), 0, "host calls of an unsampled call");
        }
        assert!(take_properties().is_empty());
    }

    #[test]
    fn sample_rate_one_always_and_fraction_sometimes() {
        let (root, _) = configure(r#"{"sample_rate": 1}"#);
        for _ in 0..100 {
            grpc_call(&root, true);
        }
        assert_eq!(take_properties().len(), 100);

        let (root, _) = configure(r#"{"sample_rate": 0.25}"#);
        let n = 2000;
        for _ in 0..n {
            grpc_call(&root, true);
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
        let (_, ok) = configure(r#"{"sample_rate": 1.5}"#);
        assert!(!ok);
        assert_eq!(
            host(|h| h.logs.clone()),
            ["wirelens: invalid plugin configuration: sample_rate: must be a number in [0, 1], got 1.5"]
        );
        let (_, ok) = configure(r#"{"optional_fields": ["sizes"]}"#);
        assert!(!ok);
        let (root, ok) = configure(r#"{"optional_fields": [], "rest_transcoded": true}"#);
        assert!(ok);
        assert!(root.options.rest_transcoded);
    }
}
