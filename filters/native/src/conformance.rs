//! Test builds only (feature `conformance`): what each callback `abi.rs`
//! declares answers in every hook of a stream, written for the conformance
//! test (`tests/e2e/test_native_conformance.py`) to hold against the call
//! it sent.
//!
//! In every hook the stream passes, every header map type is asked for its
//! size and its entries, and every body type for its size, its slice count
//! and its slices, straight through the declarations (not through
//! `EnvoyHost`, so a wrong declaration cannot be hidden by the adapter).
//! At `stream_complete` the filter-state write is tried twice on a key of
//! its own (the second must be refused: the object is read-only), then the
//! report is written as the filter-state key [`REPORT_KEY`]. Bytes travel
//! as hex, so the report is plain ASCII JSON whatever the headers hold.

use crate::abi;
use crate::Hook;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;

/// The filter-state key the report is written to.
pub const REPORT_KEY: &str = "wirelens.conformance";
/// The key the write-twice check uses.
pub const WRITE_TWICE_KEY: &str = "wirelens.conformance.write";

const HEADER_TYPES: [(abi::HttpHeaderType, &str); 4] = [
    (abi::REQUEST_HEADER, "request_headers"),
    (abi::REQUEST_TRAILER, "request_trailers"),
    (abi::RESPONSE_HEADER, "response_headers"),
    (abi::RESPONSE_TRAILER, "response_trailers"),
];
const BODY_TYPES: [(abi::HttpBodyType, &str); 2] = [
    (abi::RECEIVED_REQUEST_BODY, "request_body"),
    (abi::RECEIVED_RESPONSE_BODY, "response_body"),
];

thread_local! {
    /// Each stream's hook reports so far, by Envoy's filter pointer.
    static REPORTS: RefCell<HashMap<usize, Vec<String>>> = RefCell::default();
}

fn hex(bytes: &[u8], out: &mut String) {
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
}

/// # Safety
/// `ptr` is null or points at `len` bytes valid for the current hook.
unsafe fn bytes<'a>(ptr: *const std::ffi::c_char, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    }
}

/// One hook's answers, as a JSON object.
///
/// # Safety
/// `envoy` is the running hook's filter pointer.
unsafe fn hook_report(hook: Hook, envoy: abi::HttpFilterEnvoyPtr) -> String {
    let mut out = format!("{{\"hook\":\"{}\",\"headers\":{{", hook.name());
    for (i, (kind, name)) in HEADER_TYPES.iter().enumerate() {
        let size = abi::envoy_dynamic_module_callback_http_get_headers_size(envoy, *kind);
        let mut entries = vec![abi::EnvoyHttpHeader::default(); size.max(1)];
        let ok =
            abi::envoy_dynamic_module_callback_http_get_headers(envoy, *kind, entries.as_mut_ptr());
        let _ = write!(
            out,
            "{}\"{name}\":{{\"size\":{size},\"ok\":{ok},\"entries\":[",
            if i > 0 { "," } else { "" }
        );
        if ok {
            for (j, e) in entries.iter().take(size).enumerate() {
                out.push_str(if j > 0 { ",[\"" } else { "[\"" });
                hex(bytes(e.key_ptr, e.key_length), &mut out);
                out.push_str("\",\"");
                hex(bytes(e.value_ptr, e.value_length), &mut out);
                out.push_str("\"]");
            }
        }
        out.push_str("]}");
    }
    out.push_str("},\"bodies\":{");
    for (i, (kind, name)) in BODY_TYPES.iter().enumerate() {
        let size = abi::envoy_dynamic_module_callback_http_get_body_size(envoy, *kind);
        let chunks = abi::envoy_dynamic_module_callback_http_get_body_chunks_size(envoy, *kind);
        let mut slices = vec![abi::EnvoyBuffer::default(); chunks.max(1)];
        let ok = abi::envoy_dynamic_module_callback_http_get_body_chunks(
            envoy,
            *kind,
            slices.as_mut_ptr(),
        );
        let _ = write!(
            out,
            "{}\"{name}\":{{\"size\":{size},\"chunks\":{chunks},\"ok\":{ok},\"data\":\"",
            if i > 0 { "," } else { "" }
        );
        if ok {
            for s in slices.iter().take(chunks) {
                hex(bytes(s.ptr, s.length), &mut out);
            }
        }
        out.push_str("\"}");
    }
    out.push_str("}}");
    out
}

/// Records what every declared callback answers in `hook`; at
/// `stream_complete` also checks the filter-state write and publishes the
/// stream's report.
///
/// # Safety
/// `envoy` is the running hook's filter pointer.
pub unsafe fn observe(hook: Hook, envoy: abi::HttpFilterEnvoyPtr) {
    let report = hook_report(hook, envoy);
    let key = envoy as usize;
    REPORTS.with(|r| r.borrow_mut().entry(key).or_default().push(report));
    if hook != Hook::StreamComplete {
        return;
    }
    let hooks = REPORTS
        .with(|r| r.borrow_mut().remove(&key))
        .unwrap_or_default();
    let set = |k: &str, v: &[u8]| {
        abi::envoy_dynamic_module_callback_http_set_filter_state_bytes(
            envoy,
            abi::ModuleBuffer::of(k.as_bytes()),
            abi::ModuleBuffer::of(v),
        )
    };
    let first = set(WRITE_TWICE_KEY, b"first");
    let second = set(WRITE_TWICE_KEY, b"second");
    let doc = format!(
        "{{\"first_write\":{first},\"second_write\":{second},\"hooks\":[{}]}}",
        hooks.join(",")
    );
    set(REPORT_KEY, doc.as_bytes());
}
