//! wirelens proxy-wasm HTTP filter: a thin adapter that feeds Envoy's
//! callbacks into [`wirelens_core::Call`] and publishes the record as one
//! filter-state property, `wirelens.record`: a compact JSON object.
//!
//! It exports the proxy-wasm ABI 0.2.1 functions itself (`exports`) instead
//! of going through the proxy-wasm SDK's dispatcher. The host calls into the
//! VM only for callbacks a module exports, and every such call costs Envoy
//! about 1.3–1.5k instructions (`make bench-instructions`): so the filter
//! exports exactly the callbacks it uses. Not `proxy_on_done` (a missing one
//! means "done", the answer the SDK's default gives), nor any network,
//! timer, queue or outgoing-call callback. Host calls go through [`host`],
//! which returns errors instead of panicking.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use wirelens_core::headers::iter_serialized;
use wirelens_core::{BodySource, Call, Config, OpMap, Options, Sampler, PROPERTY_RECORD};

mod host;

/// Initial capacity of the shared JSON buffer (a typical record is well
/// under this; a long `grpc-message` grows it once).
const JSON_CAPACITY: usize = 1024;

/// One plugin instance (a root context): its configuration and what every
/// stream of it shares. Replaced as a whole when it is configured again;
/// streams keep the instance they started with.
struct Plugin {
    map: Rc<OpMap>,
    options: Options,
    sampler: Cell<Sampler>,
    /// The record is serialized here (one VM is single-threaded and a
    /// publication never nests), so publishing does not allocate.
    json: RefCell<String>,
}

impl Plugin {
    fn new(map: OpMap, options: Options, seed: u64) -> Self {
        Plugin {
            map: Rc::new(map),
            sampler: Cell::new(Sampler::new(options.sample_rate(), seed)),
            options,
            json: RefCell::new(String::with_capacity(JSON_CAPACITY)),
        }
    }

    fn sample(&self) -> bool {
        let mut s = self.sampler.get();
        let keep = s.sample();
        self.sampler.set(s);
        keep
    }

    fn configure(root_id: u32, plugin_configuration_size: usize) -> Result<Plugin, ()> {
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

/// The current request or response body chunk, read through the host.
struct HostBody(u32);

impl BodySource for HostBody {
    type Buf = Vec<u8>;
    fn read(&mut self, start: usize, max: usize) -> Option<Vec<u8>> {
        host::buffer(self.0, start, max)
    }
}

/// One HTTP stream. Exists only for sampled streams: an unsampled stream
/// (or one whose request headers never reached the filter) has no state and
/// does nothing in any callback.
struct Stream {
    call: Call,
    plugin: Rc<Plugin>,
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
                self.call
                    .on_deferred_response_headers(iter_serialized(&map));
            }
        }
        let record = self.call.record(now_ns);
        // A failure (e.g. no stream info) is ignored by design.
        let set = |json: &mut String| {
            record.write_json(json);
            let _ = host::set_property(PROPERTY_RECORD, json.as_bytes());
        };
        match self.plugin.json.try_borrow_mut() {
            Ok(mut buf) => set(&mut buf),
            // Unreachable in a single-threaded VM; never panic anyway.
            Err(_) => set(&mut String::new()),
        }
    }

    fn on_request_body(&mut self, body_size: usize, end_of_stream: bool) {
        self.call.on_request_body(
            body_size,
            end_of_stream,
            &mut HostBody(host::BUFFER_REQUEST_BODY),
            host::now_ns,
        );
    }

    fn on_request_trailers(&mut self) {
        self.call.on_request_trailers(host::now_ns);
    }

    fn on_response_headers(&mut self, end_of_stream: bool) {
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
    }

    fn on_response_body(&mut self, body_size: usize, end_of_stream: bool) {
        if self.call.on_response_body(
            body_size,
            end_of_stream,
            &mut HostBody(host::BUFFER_RESPONSE_BODY),
            host::now_ns,
        ) && !self.call.response_headers_deferred()
        {
            self.publish(None);
        }
    }

    fn on_response_trailers(&mut self) {
        let map = host::header_map(host::MAP_RESPONSE_TRAILERS).unwrap_or_default();
        if self
            .call
            .on_response_trailers(iter_serialized(&map), host::now_ns)
        {
            self.publish(None);
        }
    }

    fn on_log(&mut self) {
        if !self.call.published() {
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

/// Context ids are small distinct integers: a multiplicative hash spreads
/// them well, and costs less than SipHash on every callback.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ById<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// Every context of the VM.
#[derive(Default)]
struct Filter {
    /// Root contexts by id. `None` until configured (or when the
    /// configuration was refused): its streams then do nothing.
    plugins: ById<Option<Rc<Plugin>>>,
    /// Sampled HTTP streams by context id.
    streams: ById<Stream>,
    /// Streams whose request headers have not arrived yet (the sampling
    /// decision), with the root they belong to.
    pending: ById<u32>,
}

thread_local! {
    static FILTER: RefCell<Filter> = RefCell::default();
}

/// Runs `f` on the filter state; a re-entrant call (impossible: host calls
/// never call back into these exports) is skipped rather than panicking.
fn with_filter<R: Default>(f: impl FnOnce(&mut Filter) -> R) -> R {
    FILTER.with(|filter| match filter.try_borrow_mut() {
        Ok(mut filter) => f(&mut filter),
        Err(_) => R::default(),
    })
}

fn with_stream(context_id: u32, f: impl FnOnce(&mut Stream)) {
    with_filter(|filter| {
        if let Some(stream) = filter.streams.get_mut(&context_id) {
            f(stream);
        }
    })
}

/// The proxy-wasm ABI 0.2.1 functions the host calls. HTTP callbacks
/// always answer `Continue` (0).
mod exports {
    use super::*;

    const CONTINUE: u32 = 0;

    #[no_mangle]
    pub extern "C" fn proxy_abi_version_0_2_1() {}

    /// WASI reactor entry point; nothing to initialize.
    #[no_mangle]
    pub extern "C" fn _initialize() {}

    /// Memory the host fills with the bytes a host call returns; `host`
    /// takes ownership of it as a `Vec` of exactly `size` bytes.
    #[no_mangle]
    pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
        let mut buffer = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(size));
        buffer.as_mut_ptr()
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_vm_start(_root_id: u32, _vm_configuration_size: usize) -> bool {
        true
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_context_create(context_id: u32, root_id: u32) {
        with_filter(|filter| {
            if root_id == 0 {
                filter.plugins.insert(context_id, None);
            } else {
                filter.pending.insert(context_id, root_id);
            }
        })
    }

    /// Parses and indexes the plugin configuration; false (Envoy refuses
    /// the plugin) with one log line naming the bad field.
    #[no_mangle]
    pub extern "C" fn proxy_on_configure(root_id: u32, plugin_configuration_size: usize) -> bool {
        match Plugin::configure(root_id, plugin_configuration_size) {
            Ok(plugin) => with_filter(|filter| {
                filter.plugins.insert(root_id, Some(Rc::new(plugin)));
                true
            }),
            Err(()) => false,
        }
    }

    /// Decides sampling and, for a sampled stream, captures everything
    /// needed from the request headers with one copy of the map.
    #[no_mangle]
    pub extern "C" fn proxy_on_request_headers(
        context_id: u32,
        _num_headers: usize,
        end_of_stream: bool,
    ) -> u32 {
        with_filter(|filter| {
            let Some(root_id) = filter.pending.remove(&context_id) else {
                return;
            };
            let Some(Some(plugin)) = filter.plugins.get(&root_id) else {
                return;
            };
            if !plugin.sample() {
                return;
            }
            let mut call = Call::new(Rc::clone(&plugin.map)).with_options(plugin.options);
            let now = host::now_ns();
            let map = host::header_map(host::MAP_REQUEST_HEADERS).unwrap_or_default();
            call.on_request_headers(iter_serialized(&map), end_of_stream, now);
            let plugin = Rc::clone(plugin);
            filter.streams.insert(context_id, Stream { call, plugin });
        });
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_request_body(
        context_id: u32,
        body_size: usize,
        end_of_stream: bool,
    ) -> u32 {
        with_stream(context_id, |s| s.on_request_body(body_size, end_of_stream));
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_request_trailers(context_id: u32, _num_trailers: usize) -> u32 {
        with_stream(context_id, Stream::on_request_trailers);
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_response_headers(
        context_id: u32,
        _num_headers: usize,
        end_of_stream: bool,
    ) -> u32 {
        with_stream(context_id, |s| s.on_response_headers(end_of_stream));
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_response_body(
        context_id: u32,
        body_size: usize,
        end_of_stream: bool,
    ) -> u32 {
        with_stream(context_id, |s| s.on_response_body(body_size, end_of_stream));
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_response_trailers(context_id: u32, _num_trailers: usize) -> u32 {
        with_stream(context_id, Stream::on_response_trailers);
        CONTINUE
    }

    #[no_mangle]
    pub extern "C" fn proxy_on_log(context_id: u32) {
        with_stream(context_id, Stream::on_log);
    }

    /// The end of a context (after `on_log` for streams).
    #[no_mangle]
    pub extern "C" fn proxy_on_delete(context_id: u32) {
        with_filter(|filter| {
            if filter.streams.remove(&context_id).is_none()
                && filter.pending.remove(&context_id).is_none()
            {
                filter.plugins.remove(&context_id);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    //! The adapter against the native fake host (`host::abi::HOST`).
    use super::*;
    use host::abi::{FakeHost, HOST};
    use wirelens_core::frame::encode_frame;
    use wirelens_core::headers::serialize;

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

    /// A fresh VM (this test thread's filter state and fake host) with one
    /// root context, id 1, configured with `config`; returns what
    /// `proxy_on_configure` answered.
    fn configure(config: &str) -> bool {
        reset(config);
        FILTER.with(|f| *f.borrow_mut() = Filter::default());
        exports::proxy_on_vm_start(ROOT, 0);
        exports::proxy_on_context_create(ROOT, 0);
        exports::proxy_on_configure(ROOT, config.len())
    }

    const ROOT: u32 = 1;

    /// Context ids of the streams, as the host hands them out.
    fn next_stream_id() -> u32 {
        thread_local!(static NEXT: Cell<u32> = const { Cell::new(2) });
        NEXT.with(|n| {
            let id = n.get();
            n.set(id + 1);
            id
        })
    }

    /// Creates a stream context of the root.
    fn stream() -> u32 {
        let id = next_stream_id();
        exports::proxy_on_context_create(id, ROOT);
        id
    }

    /// The end of a stream, in Envoy's order (there is no `proxy_on_done`).
    fn finish(id: u32) {
        exports::proxy_on_log(id);
        exports::proxy_on_delete(id);
    }

    fn live_streams() -> usize {
        FILTER.with(|f| {
            let f = f.borrow();
            f.streams.len() + f.pending.len()
        })
    }

    const CONFIG: &str = r#"{"operations": [{"grpc_path": "/wirelens.v1.Hello/SayHello",
        "operation": "hello.SayHello", "streaming": "unary"}]}"#;

    /// One unary gRPC call through every callback; returns the host calls
    /// made by the stream.
    fn grpc_call(complete: bool) -> usize {
        grpc_call_answered(complete, "application/grpc")
    }

    /// A unary gRPC call whose response carries `response_content_type`;
    /// with trailers when `complete`. Returns the host calls it made.
    fn grpc_call_answered(complete: bool, response_content_type: &str) -> usize {
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
        let s = stream();
        exports::proxy_on_request_headers(s, 3, false);
        exports::proxy_on_request_body(s, body.len(), true);
        exports::proxy_on_response_headers(s, 2, false);
        exports::proxy_on_response_body(s, body.len(), false);
        if complete {
            exports::proxy_on_response_trailers(s, 1);
        }
        finish(s);
        host(|h| h.calls) - before
    }

    fn take_properties() -> Vec<(String, Vec<u8>)> {
        host(|h| std::mem::take(&mut h.properties))
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
        grpc_call_answered(true, "text/html");
        assert_eq!(response_messages(&take_properties()[0].1), "1");
        // No trailers: the headers are copied at publication and their
        // content type shows the body was not gRPC.
        grpc_call_answered(false, "text/html");
        assert_eq!(response_messages(&take_properties()[0].1), "0");
        grpc_call_answered(false, "application/grpc");
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
        assert!(record.contains(r#""rpc.grpc.status_code":0,"#), "{record}");
        assert!(record.contains(r#""wirelens.request.messages":1,"wirelens.response.messages":1,"#));
        // Clock: start 1 ms, request end 2 ms, response headers 3 ms, end 4 ms.
        assert!(record.ends_with(r#""wirelens.time_to_first_byte_us":2000,"wirelens.duration_us":3000,"wirelens.request.duration_us":1000,"wirelens.malformed":0}"#), "{record}");
    }

    #[test]
    fn rest_response_headers_are_sized_not_copied() {
        configure(
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
        let s = stream();
        exports::proxy_on_request_headers(s, 3, false);
        exports::proxy_on_request_body(s, 15, true);
        exports::proxy_on_response_headers(s, 2, false);
        exports::proxy_on_response_body(s, 30, true);
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
                h.maps[host::MAP_REQUEST_HEADERS as usize] =
                    Some(serialize(&[(":method", "GET"), (":path", path)]));
                h.maps[host::MAP_RESPONSE_HEADERS as usize] =
                    Some(serialize(&[(":status", "404")]));
            });
            let before = host(|h| h.calls);
            let s = stream();
            exports::proxy_on_request_headers(s, 2, true);
            exports::proxy_on_response_headers(s, 1, true);
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
        let transcoded = FILTER.with(|f| {
            f.borrow().plugins[&ROOT]
                .as_ref()
                .is_some_and(|p| p.options.rest_transcoded)
        });
        assert!(transcoded);
    }

    #[test]
    fn every_context_is_freed_at_delete() {
        configure(CONFIG);
        for _ in 0..50 {
            grpc_call(true);
            grpc_call(false);
        }
        // Headers never reached the filter: Envoy creates the context in
        // the log phase.
        let s = stream();
        finish(s);
        assert_eq!(live_streams(), 0);
        configure(r#"{"sample_rate": 0}"#);
        grpc_call(true);
        assert_eq!(live_streams(), 0);
        // The root itself.
        exports::proxy_on_delete(ROOT);
        assert!(FILTER.with(|f| f.borrow().plugins.is_empty()));
    }

    #[test]
    fn streams_of_a_refused_or_unknown_root_do_nothing() {
        assert!(!configure(r#"{"sample_rate": 2}"#));
        assert_eq!(grpc_call(true), 0);
        assert!(take_properties().is_empty());
        // A stream whose root the filter never saw.
        let before = host(|h| h.calls);
        exports::proxy_on_context_create(999, 998);
        exports::proxy_on_request_headers(999, 3, true);
        exports::proxy_on_response_headers(999, 2, true);
        finish(999);
        assert_eq!(host(|h| h.calls), before);
        assert_eq!(live_streams(), 0);
    }
}
