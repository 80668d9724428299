//! wirelens proxy-wasm HTTP filter: a thin adapter that feeds Envoy's
//! callbacks into [`wirelens_core::Call`] and publishes the record as
//! filter state (`set_property(["wirelens.<key>"], value)`).
//!
//! Host calls whose failure the SDK turns into a panic (reading header maps
//! and body bytes, the clock, `set_property`) go through [`host`], which
//! calls the same proxy-wasm ABI functions directly and returns errors
//! instead. Everything else (context dispatch, the allocator, `_initialize`)
//! is the proxy-wasm 0.2.5 SDK.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};
use std::rc::Rc;
use wirelens_core::headers::iter_serialized;
use wirelens_core::{BodySource, Call, OpMap};

mod host;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { map: Rc::new(OpMap::empty()) })
    });
}}

struct Root {
    map: Rc<OpMap>,
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
        match OpMap::from_json(&bytes) {
            Ok(map) => {
                self.map = Rc::new(map);
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
            call: Call::new(Rc::clone(&self.map)),
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
}

impl Stream {
    /// Publishes the record once (`now_ns` is the end time for streams
    /// whose response never completed).
    fn publish(&mut self, now_ns: Option<u64>) {
        if !self.call.claim_publish() {
            return;
        }
        self.call.record(now_ns).for_each(|key, value| {
            // A failure (e.g. no stream info) is ignored by design.
            let _ = host::set_property(key, value);
        });
    }
}

impl Context for Stream {}

impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let now = host::now_ns();
        let map = host::header_map(host::MAP_REQUEST_HEADERS).unwrap_or_default();
        self.call
            .on_request_headers(iter_serialized(&map), end_of_stream, now);
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.call.on_request_body(
            body_size,
            end_of_stream,
            &mut HostBody(host::BUFFER_REQUEST_BODY),
        );
        Action::Continue
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        self.call.on_request_trailers();
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let map = host::header_map(host::MAP_RESPONSE_HEADERS).unwrap_or_default();
        if self
            .call
            .on_response_headers(iter_serialized(&map), end_of_stream, host::now_ns)
        {
            self.publish(None);
        }
        Action::Continue
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.call.on_response_body(
            body_size,
            end_of_stream,
            &mut HostBody(host::BUFFER_RESPONSE_BODY),
            host::now_ns,
        ) {
            self.publish(None);
        }
        Action::Continue
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
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
        if !self.call.published() {
            let now = host::now_ns();
            self.publish(now);
        }
    }
}
