//! Envoy's dynamic-module ABI, as far as wirelens uses it: the event hooks
//! the module exports and the callbacks it calls, nothing else.
//!
//! Pinned to **Envoy 1.40.0** (`9e5580933739775e8bce696a57a2e1bc99368f23`),
//! which expects the ABI version string [`ABI_VERSION`] (`v0.2.0`) from
//! `envoy_dynamic_module_on_program_init` (a mismatch only warns, so it
//! guards nothing: the signatures below are what matters).
//!
//! Written by hand from Envoy's C header
//! `source/extensions/dynamic_modules/abi/abi.h` (the revision carrying
//! `envoy_dynamic_module_on_http_filter_local_reply`, the buffer structs
//! passed by value and `http_get_body_chunks`; its version macro still
//! says `v0.1.0`) and checked against the 1.40.0 binary: every callback
//! here is exported by it (`nm -D envoy | grep envoy_dynamic_module_callback_`),
//! and its argument registers and return width match the disassembly
//! (`objdump -d --start-address=<nm address> envoy`: e.g.
//! `http_get_headers_size` reads only `rdi`/`esi` and returns `size_t`, not
//! the older `bool` with an out-pointer; `http_set_filter_state_bytes`
//! takes two `{ptr, len}` buffers in `rsi..r8`). The hooks are every
//! `envoy_dynamic_module_on_http_filter*` name the binary's strings hold
//! (`strings envoy | grep envoy_dynamic_module_on_`): Envoy refuses a module
//! that lacks one it looks up, naming it.
//!
//! To re-check against another Envoy: the same `nm`/`strings` listing, then
//! the conformance test (a pytest that starts Envoy with the built module
//! and one known request per callback; `/work/notes29/COMMON.md` lists what
//! each callback must answer), which is what proves the answers.
//! Envoy's Rust SDK is not used (not in the crate registry); nothing here is
//! copied from it.
//!
//! Each hook's signature is also a type here ([`OnHttpFilterNew`], ...):
//! `lib.rs` assigns every exported hook to its type, so a hook that drifts
//! from this file does not compile.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

/// The Envoy release this file is pinned to.
pub const ENVOY_VERSION: &str = "1.40.0";

/// What `envoy_dynamic_module_on_program_init` returns (NUL-terminated).
pub const ABI_VERSION: &[u8] = b"v0.2.0\0";

// ------------------------------------------------------------------ types

/// `envoy_dynamic_module_type_envoy_buffer`: bytes owned by Envoy, valid
/// until the end of the current hook.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EnvoyBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl Default for EnvoyBuffer {
    fn default() -> Self {
        EnvoyBuffer {
            ptr: std::ptr::null(),
            length: 0,
        }
    }
}

/// `envoy_dynamic_module_type_module_buffer`: bytes owned by the module,
/// passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ModuleBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl ModuleBuffer {
    pub fn of(bytes: &[u8]) -> Self {
        ModuleBuffer {
            ptr: bytes.as_ptr().cast(),
            length: bytes.len(),
        }
    }
}

/// `envoy_dynamic_module_type_envoy_http_header`: one entry of a header map,
/// both buffers pointing into Envoy's map.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EnvoyHttpHeader {
    pub key_ptr: *const c_char,
    pub key_length: usize,
    pub value_ptr: *const c_char,
    pub value_length: usize,
}

impl Default for EnvoyHttpHeader {
    fn default() -> Self {
        EnvoyHttpHeader {
            key_ptr: std::ptr::null(),
            key_length: 0,
            value_ptr: std::ptr::null(),
            value_length: 0,
        }
    }
}

/// `envoy_dynamic_module_type_http_filter_config_envoy_ptr`.
pub type HttpFilterConfigEnvoyPtr = *mut c_void;
/// `envoy_dynamic_module_type_http_filter_config_module_ptr`.
pub type HttpFilterConfigModulePtr = *const c_void;
/// `envoy_dynamic_module_type_http_filter_per_route_config_module_ptr`.
pub type HttpFilterPerRouteConfigModulePtr = *const c_void;
/// `envoy_dynamic_module_type_http_filter_envoy_ptr`.
pub type HttpFilterEnvoyPtr = *mut c_void;
/// `envoy_dynamic_module_type_http_filter_module_ptr`.
pub type HttpFilterModulePtr = *const c_void;

/// `envoy_dynamic_module_type_http_header_type` (a C enum: `int`).
pub type HttpHeaderType = u32;
pub const REQUEST_HEADER: HttpHeaderType = 0;
pub const REQUEST_TRAILER: HttpHeaderType = 1;
pub const RESPONSE_HEADER: HttpHeaderType = 2;
pub const RESPONSE_TRAILER: HttpHeaderType = 3;

/// `envoy_dynamic_module_type_http_body_type`: the `Received*` bodies are
/// the chunk of the current body hook.
pub type HttpBodyType = u32;
pub const RECEIVED_REQUEST_BODY: HttpBodyType = 0;
pub const RECEIVED_RESPONSE_BODY: HttpBodyType = 2;

/// `envoy_dynamic_module_type_log_level`.
pub type LogLevel = u32;
pub const LOG_INFO: LogLevel = 2;
pub const LOG_ERROR: LogLevel = 4;

/// Every `envoy_dynamic_module_type_on_http_filter_*_status` and the local
/// reply status: `Continue` is 0 in each.
pub type Status = u32;
pub const CONTINUE: Status = 0;

/// `envoy_dynamic_module_type_http_callout_result` (unused hooks only).
pub type HttpCalloutResult = u32;
/// `envoy_dynamic_module_type_http_stream_reset_reason` (unused hooks only).
pub type HttpStreamResetReason = u32;

// ------------------------------------------------------------------ hooks
//
// Exported by `lib.rs` under these names (`#[no_mangle]`); the types make
// the compiler check each export against this file.

/// `envoy_dynamic_module_on_program_init`: the ABI version, or null to refuse.
pub type OnProgramInit = unsafe extern "C" fn() -> *const c_char;
/// `envoy_dynamic_module_on_http_filter_config_new`: null rejects the config.
pub type OnHttpFilterConfigNew = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    EnvoyBuffer, // filter_name
    EnvoyBuffer, // filter_config
) -> HttpFilterConfigModulePtr;
/// `envoy_dynamic_module_on_http_filter_config_destroy`.
pub type OnHttpFilterConfigDestroy = unsafe extern "C" fn(HttpFilterConfigModulePtr);
/// `envoy_dynamic_module_on_http_filter_per_route_config_new`: null rejects.
pub type OnHttpFilterPerRouteConfigNew =
    unsafe extern "C" fn(EnvoyBuffer, EnvoyBuffer) -> HttpFilterPerRouteConfigModulePtr;
/// `envoy_dynamic_module_on_http_filter_per_route_config_destroy`.
pub type OnHttpFilterPerRouteConfigDestroy =
    unsafe extern "C" fn(HttpFilterPerRouteConfigModulePtr);
/// `envoy_dynamic_module_on_http_filter_new`: null closes the stream.
pub type OnHttpFilterNew =
    unsafe extern "C" fn(HttpFilterConfigModulePtr, HttpFilterEnvoyPtr) -> HttpFilterModulePtr;
/// `envoy_dynamic_module_on_http_filter_request_headers` and
/// `..._response_headers`, `..._request_body`, `..._response_body`
/// (the `bool` is end of stream).
pub type OnHttpFilterEvent =
    unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr, bool) -> Status;
/// `envoy_dynamic_module_on_http_filter_request_trailers` and `..._response_trailers`.
pub type OnHttpFilterTrailers =
    unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr) -> Status;
/// `envoy_dynamic_module_on_http_filter_stream_complete` (before the access
/// log) and the two downstream watermark hooks.
pub type OnHttpFilterNotice = unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr);
/// `envoy_dynamic_module_on_http_filter_destroy`.
pub type OnHttpFilterDestroy = unsafe extern "C" fn(HttpFilterModulePtr);
/// `envoy_dynamic_module_on_http_filter_local_reply`.
pub type OnHttpFilterLocalReply = unsafe extern "C" fn(
    HttpFilterEnvoyPtr,
    HttpFilterModulePtr,
    u32,         // response_code
    EnvoyBuffer, // details
    bool,        // reset_imminent
) -> Status;
/// `envoy_dynamic_module_on_http_filter_scheduled`.
pub type OnHttpFilterScheduled = unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr, u64);
/// `envoy_dynamic_module_on_http_filter_http_callout_done`.
pub type OnHttpFilterHttpCalloutDone = unsafe extern "C" fn(
    HttpFilterEnvoyPtr,
    HttpFilterModulePtr,
    u64,
    HttpCalloutResult,
    *mut EnvoyHttpHeader,
    usize,
    *mut EnvoyBuffer,
    usize,
);
/// `envoy_dynamic_module_on_http_filter_http_stream_headers`.
pub type OnHttpFilterHttpStreamHeaders = unsafe extern "C" fn(
    HttpFilterEnvoyPtr,
    HttpFilterModulePtr,
    u64,
    *mut EnvoyHttpHeader,
    usize,
    bool,
);
/// `envoy_dynamic_module_on_http_filter_http_stream_data`.
pub type OnHttpFilterHttpStreamData = unsafe extern "C" fn(
    HttpFilterEnvoyPtr,
    HttpFilterModulePtr,
    u64,
    *const EnvoyBuffer,
    usize,
    bool,
);
/// `envoy_dynamic_module_on_http_filter_http_stream_trailers`.
pub type OnHttpFilterHttpStreamTrailers =
    unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr, u64, *mut EnvoyHttpHeader, usize);
/// `envoy_dynamic_module_on_http_filter_http_stream_complete`.
pub type OnHttpFilterHttpStreamComplete =
    unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr, u64);
/// `envoy_dynamic_module_on_http_filter_http_stream_reset`.
pub type OnHttpFilterHttpStreamReset =
    unsafe extern "C" fn(HttpFilterEnvoyPtr, HttpFilterModulePtr, u64, HttpStreamResetReason);
/// `envoy_dynamic_module_on_http_filter_config_scheduled`.
pub type OnHttpFilterConfigScheduled =
    unsafe extern "C" fn(HttpFilterConfigEnvoyPtr, HttpFilterConfigModulePtr, u64);
/// `envoy_dynamic_module_on_http_filter_config_http_callout_done`.
pub type OnHttpFilterConfigHttpCalloutDone = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    HttpFilterConfigModulePtr,
    u64,
    HttpCalloutResult,
    *mut EnvoyHttpHeader,
    usize,
    *mut EnvoyBuffer,
    usize,
);
/// `envoy_dynamic_module_on_http_filter_config_http_stream_headers`.
pub type OnHttpFilterConfigHttpStreamHeaders = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    HttpFilterConfigModulePtr,
    u64,
    *mut EnvoyHttpHeader,
    usize,
    bool,
);
/// `envoy_dynamic_module_on_http_filter_config_http_stream_data`.
pub type OnHttpFilterConfigHttpStreamData = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    HttpFilterConfigModulePtr,
    u64,
    *const EnvoyBuffer,
    usize,
    bool,
);
/// `envoy_dynamic_module_on_http_filter_config_http_stream_trailers`.
pub type OnHttpFilterConfigHttpStreamTrailers = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    HttpFilterConfigModulePtr,
    u64,
    *mut EnvoyHttpHeader,
    usize,
);
/// `envoy_dynamic_module_on_http_filter_config_http_stream_complete`.
pub type OnHttpFilterConfigHttpStreamComplete =
    unsafe extern "C" fn(HttpFilterConfigEnvoyPtr, HttpFilterConfigModulePtr, u64);
/// `envoy_dynamic_module_on_http_filter_config_http_stream_reset`.
pub type OnHttpFilterConfigHttpStreamReset = unsafe extern "C" fn(
    HttpFilterConfigEnvoyPtr,
    HttpFilterConfigModulePtr,
    u64,
    HttpStreamResetReason,
);

// -------------------------------------------------------------- callbacks
//
// What each answers in Envoy 1.40 (the conformance test checks these):
// see filters/native/README.md, "Callbacks".

extern "C" {
    /// Logs `message` under Envoy's `dynamic_modules` logger at `level`
    /// (shown when that logger's level allows; errors by default).
    pub fn envoy_dynamic_module_callback_log(level: LogLevel, message: ModuleBuffer);

    /// The number of entries (not bytes) of a header map; 0 when the map
    /// is absent (e.g. trailers that never came) or empty.
    pub fn envoy_dynamic_module_callback_http_get_headers_size(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        header_type: HttpHeaderType,
    ) -> usize;

    /// Fills `result_headers` (room for `http_get_headers_size` entries)
    /// with pointers into the map, in the map's order; false when the map
    /// is absent. Valid until the end of the hook.
    pub fn envoy_dynamic_module_callback_http_get_headers(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        header_type: HttpHeaderType,
        result_headers: *mut EnvoyHttpHeader,
    ) -> bool;

    /// The byte length of a body: of the current chunk for the `Received*`
    /// types (during a body hook; 0 outside one).
    pub fn envoy_dynamic_module_callback_http_get_body_size(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        body_type: HttpBodyType,
    ) -> usize;

    /// The number of slices the body is made of (0 when absent).
    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        body_type: HttpBodyType,
    ) -> usize;

    /// Fills `result_buffer_vector` (room for `http_get_body_chunks_size`
    /// entries) with the body's slices, in order, pointing into Envoy's
    /// buffer; false when the body is absent. Valid until the end of the hook.
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        body_type: HttpBodyType,
        result_buffer_vector: *mut EnvoyBuffer,
    ) -> bool;

    /// Stores `value` (copied) as the stream's filter state `key`: a
    /// `Router::StringAccessorImpl` (serialized as the string itself, so
    /// `%FILTER_STATE(key:PLAIN)%` prints it), life span `FilterChain` (the
    /// stream's, so the access log and the span finish read it). True with
    /// stream info, false without. A later write of the same key answers
    /// true too and replaces the value (the conformance test's finding in
    /// 1.40, despite the ReadOnly state type in the source); wirelens
    /// writes once per stream.
    pub fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter_envoy_ptr: HttpFilterEnvoyPtr,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
}
