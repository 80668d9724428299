//! One whole call through `wirelens_core::Call`, callback by callback as
//! Envoy calls the wasm adapter (`filters/wasm/src/lib.rs`): request
//! headers, body chunks, trailers; response headers, body chunks, trailers;
//! `on_log`. The host is a `MemoryHost`, so the call makes the same
//! decisions as in the filter (header entries or only their size, deferred
//! response headers, when to publish) and the record checked is the bytes
//! it published.
//!
//! Shared by the `call` fuzz target and the native test that replays its
//! corpus (`filters/core/tests/fuzz_corpus.rs`), through `#[path]`.
//!
//! Input: `[flags] [window] [5 sections] [chunk control bytes...]`; each
//! section is a u32 little-endian length and that many bytes, in order:
//! request header map, request body, response header map, response body,
//! response trailer map (header maps in the proxy-wasm serialized format).
//! A truncated section is taken as far as it goes.
//!
//! `flags`: bit 0 the request ends (clear: reset or client gone mid-body);
//! bit 1 request trailers end it; bit 2 response headers arrive; bit 3 the
//! response ends (clear: cut off, published in `on_log`); bit 4 response
//! trailers end it; bit 5 the plugin has `rest_transcoded`. `window`: the
//! read window is `(window + 1) * 8` bytes. Control bytes (cycled) cut the
//! bodies into chunks of `c + 1` bytes.
//!
//! Checks ([`check`]): never panics; a call whose request headers arrived
//! publishes exactly once, a JSON object whose `http.request.body.size` and
//! `http.response.body.size` (published as `qb`, `sb`) are the bytes
//! delivered and whose `wirelens.malformed` (`mf`) is 0 or 1; and the
//! record is the same when each body arrives as one chunk read with the
//! default window.

use super::common::{number, operation_map, pieces, protocol_text, section};
use wirelens_core::body::DEFAULT_READ_WINDOW;
use wirelens_core::names::wire;
use wirelens_core::{Call, MemoryHost, Options};

pub const REQUEST_ENDS: u8 = 1;
pub const REQUEST_TRAILERS: u8 = 2;
pub const RESPONSE_HEADERS: u8 = 4;
pub const RESPONSE_ENDS: u8 = 8;
pub const RESPONSE_TRAILERS: u8 = 16;
pub const REST_TRANSCODED: u8 = 32;

/// One call, as the input describes it.
pub struct Input<'a> {
    pub flags: u8,
    pub window: usize,
    pub request_headers: &'a [u8],
    pub request_body: &'a [u8],
    pub response_headers: &'a [u8],
    pub response_body: &'a [u8],
    pub response_trailers: &'a [u8],
    pub chunks: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn parse(mut data: &'a [u8]) -> Option<Self> {
        let [flags, window, rest @ ..] = data else {
            return None;
        };
        let (flags, window) = (*flags, (*window as usize + 1) * 8);
        data = rest;
        Some(Input {
            flags,
            window,
            request_headers: section(&mut data),
            request_body: section(&mut data),
            response_headers: section(&mut data),
            response_body: section(&mut data),
            response_trailers: section(&mut data),
            chunks: data,
        })
    }
}

// A fixed clock per phase: both runs of a check read the same times.
const T_REQUEST: u64 = 1_000_000;
const T_RESPONSE_HEADERS: u64 = 2_000_000;
const T_RESPONSE_END: u64 = 3_000_000;
const T_LOG: u64 = 4_000_000;

/// Runs the call; returns its published records (one expected).
pub fn run(input: &Input, window: usize, chunks: &[u8]) -> Vec<String> {
    let map = operation_map();
    let options = Options::default().with_rest_transcoded(input.flags & REST_TRANSCODED != 0);
    let mut call = Call::new(map)
        .with_read_window(window)
        .with_options(options);
    let mut host = MemoryHost {
        now: Some(T_REQUEST),
        request_headers: Some(input.request_headers.to_vec()),
        response_headers: Some(input.response_headers.to_vec()),
        response_trailers: Some(input.response_trailers.to_vec()),
        ..MemoryHost::default()
    };

    let request_ends = input.flags & REQUEST_ENDS != 0;
    let request_trailers = request_ends && input.flags & REQUEST_TRAILERS != 0;
    let headers_end = request_ends && !request_trailers && input.request_body.is_empty();
    call.on_request_headers(&mut host, headers_end);
    if !headers_end {
        let body = pieces(input.request_body, chunks);
        for (i, piece) in body.iter().enumerate() {
            let end = request_ends && !request_trailers && i + 1 == body.len();
            if piece.is_empty() && !end {
                continue;
            }
            host.request_body = Some(piece.to_vec());
            call.on_request_body(&mut host, piece.len(), end);
        }
        if request_trailers {
            call.on_request_trailers(&mut host);
        }
    }

    if input.flags & RESPONSE_HEADERS != 0 {
        let response_ends = input.flags & RESPONSE_ENDS != 0;
        let response_trailers = response_ends && input.flags & RESPONSE_TRAILERS != 0;
        let headers_end = response_ends && !response_trailers && input.response_body.is_empty();
        host.now = Some(T_RESPONSE_HEADERS);
        call.on_response_headers(&mut host, headers_end);
        host.now = Some(T_RESPONSE_END);
        if !headers_end {
            let body = pieces(input.response_body, chunks);
            for (i, piece) in body.iter().enumerate() {
                let end = response_ends && !response_trailers && i + 1 == body.len();
                if piece.is_empty() && !end {
                    continue;
                }
                host.response_body = Some(piece.to_vec());
                call.on_response_body(&mut host, piece.len(), end);
            }
            if response_trailers {
                call.on_response_trailers(&mut host);
            }
        }
    }

    // The log phase publishes a call that has not published yet.
    host.now = Some(T_LOG);
    call.on_log(&mut host);
    host.published
}

/// Runs the input chunked as it says and whole; panics on a broken invariant.
pub fn check(data: &[u8]) {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let chunked = run(&input, input.window, input.chunks);
    assert_eq!(chunked.len(), 1, "one publication per call: {chunked:?}");
    let record = &chunked[0];
    assert!(protocol_text(record).is_some(), "{record}");
    let request_sent = input.request_body.len() as u64;
    assert_eq!(
        number(record, wire::REQ_BODY_SIZE),
        Some(request_sent),
        "{record}"
    );
    let response_sent = if input.flags & RESPONSE_HEADERS != 0 {
        input.response_body.len() as u64
    } else {
        0
    };
    assert_eq!(
        number(record, wire::RESP_BODY_SIZE),
        Some(response_sent),
        "{record}"
    );
    assert!(
        matches!(number(record, wire::MALFORMED), Some(0 | 1)),
        "{record}"
    );

    let whole = run(&input, DEFAULT_READ_WINDOW, &[]);
    assert_eq!(
        whole, chunked,
        "whole bodies vs chunked (window {})",
        input.window
    );
}
