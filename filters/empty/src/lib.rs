//! The empty proxy-wasm filter: the baseline against which bench/filter_cost.py
//! measures the wirelens filter. It registers an HTTP context for every stream
//! and returns Continue from every callback, so Envoy still crosses into the V8
//! VM for each header, body and log event: what is left is the fixed price of
//! any proxy-wasm filter, not of wirelens' work.
//!
//! Built with one Cargo feature it is a host-call cost probe: the same filter
//! plus exactly one host call per HTTP call (Cargo.toml lists them). bench/filter_cost.py
//! --probes measures each next to the empty filter, so "probe − empty" is the
//! Envoy CPU of those calls alone. Results go through `black_box` so the
//! calls are not optimized away. Without features the helpers are not linked
//! in: the module has the size and imports of a filter written without them.

// Each probe build uses one of the helpers below; the plain empty filter none.
#![allow(dead_code, unused_imports, unused_variables)]

use std::hint::black_box;

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root) });
}}

#[link(wasm_import_module = "env")]
extern "C" {
    fn proxy_get_current_time_nanoseconds(time: *mut u64) -> u32;
    fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
    fn proxy_get_header_map_size(map: u32, size: *mut usize) -> u32;
    fn proxy_get_header_map_value(
        map: u32,
        key: *const u8,
        key_size: usize,
        data: *mut *mut u8,
        size: *mut usize,
    ) -> u32;
    fn proxy_get_buffer_bytes(
        buffer: u32,
        start: usize,
        max: usize,
        data: *mut *mut u8,
        size: *mut usize,
    ) -> u32;
    fn proxy_set_property(key: *const u8, key_size: usize, value: *const u8, size: usize) -> u32;
}

const REQUEST_HEADERS: u32 = 0;
const REQUEST_BODY: u32 = 0;
const RECORD: [u8; 600] = [b'x'; 600];

/// Frees a buffer the host allocated through `proxy_on_memory_allocate`.
unsafe fn free(data: *mut u8, size: usize) -> usize {
    if !data.is_null() {
        drop(Vec::from_raw_parts(data, size, size));
    }
    size
}

fn clock() -> u64 {
    let mut t = 0;
    unsafe { proxy_get_current_time_nanoseconds(&mut t) };
    t
}

fn map_pairs(map: u32) -> usize {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    unsafe {
        proxy_get_header_map_pairs(map, &mut data, &mut size);
        free(data, size)
    }
}

fn map_size(map: u32) -> usize {
    let mut size = 0;
    unsafe { proxy_get_header_map_size(map, &mut size) };
    size
}

fn map_value(map: u32, key: &str) -> usize {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    unsafe {
        proxy_get_header_map_value(map, key.as_ptr(), key.len(), &mut data, &mut size);
        free(data, size)
    }
}

fn body(buffer: u32) -> usize {
    let (mut data, mut size) = (std::ptr::null_mut(), 0);
    unsafe {
        proxy_get_buffer_bytes(buffer, 0, 256, &mut data, &mut size);
        free(data, size)
    }
}

fn set(key: &str, value: &[u8]) -> usize {
    unsafe { proxy_set_property(key.as_ptr(), key.len(), value.as_ptr(), value.len()) as usize }
}

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

// Every callback spelled out (the plain build returns the SDK's defaults) so
// the baseline is explicit: the same callbacks as the wirelens filter are
// invoked, each returns at once.
impl HttpContext for Stream {
    fn on_http_request_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        #[cfg(feature = "clock")]
        black_box(clock());
        #[cfg(feature = "map-pairs")]
        black_box(map_pairs(REQUEST_HEADERS));
        #[cfg(feature = "map-size")]
        black_box(map_size(REQUEST_HEADERS));
        #[cfg(feature = "map-value")]
        black_box(map_value(REQUEST_HEADERS, ":path"));
        Action::Continue
    }

    fn on_http_request_body(&mut self, body_size: usize, _end_of_stream: bool) -> Action {
        // Any chunk that holds bytes (the benchmarks' small bodies come as
        // one), not the end of stream: over HTTP/1.1 Envoy ends a body with
        // an empty chunk, and reading an empty chunk returns nothing.
        #[cfg(feature = "body")]
        if body_size > 0 {
            black_box(body(REQUEST_BODY));
        }
        Action::Continue
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, _end_of_stream: bool) -> Action {
        Action::Continue
    }

    fn on_http_response_body(&mut self, _body_size: usize, end_of_stream: bool) -> Action {
        #[cfg(feature = "property")]
        if end_of_stream {
            black_box(set("wirelens.record", &RECORD));
        }
        Action::Continue
    }

    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        Action::Continue
    }

    fn on_log(&mut self) {}
}
