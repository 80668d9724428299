//! The empty proxy-wasm filter: the baseline against which bench/filter_cost.py
//! measures the wirelens filter. It registers an HTTP context for every stream
//! and returns Continue from every callback (the SDK's defaults), so Envoy still
//! crosses into the V8 VM for each header, body and log event: what is left is
//! the fixed price of any proxy-wasm filter, not of wirelens' work.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

struct Root;

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        true
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Stream))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Stream;

impl Context for Stream {}

// Spelled out (they are the SDK's defaults) so the baseline is explicit: the
// same callbacks as the wirelens filter are invoked, each returns at once.
impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        Action::Continue
    }
    fn on_http_request_body(&mut self, _body_size: usize, _end_of_stream: bool) -> Action {
        Action::Continue
    }
    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        Action::Continue
    }
    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        Action::Continue
    }
    fn on_http_response_body(&mut self, _body_size: usize, _end_of_stream: bool) -> Action {
        Action::Continue
    }
    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        Action::Continue
    }
    fn on_log(&mut self) {}
}
