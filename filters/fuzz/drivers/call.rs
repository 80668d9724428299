//! One whole call through `wirelens_core::Call`, driven the way the wasm
//! adapter (`filters/wasm/src/lib.rs`) drives it: request headers, body
//! chunks, trailers; response headers (entries or only their size, as
//! `response_headers_need_entries` says), body chunks, trailers; `on_log`;
//! one publication, with deferred response headers read first.
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
//! `http.response.body.size` are the bytes delivered and whose
//! `wirelens.malformed` is 0 or 1; and the record is the same when each body
//! arrives as one chunk read with the default window.

use std::rc::Rc;
use wirelens_core::headers::iter_serialized;
use wirelens_core::record::SliceSource;
use wirelens_core::{Call, OpMap, Options};

/// The operations the bad-input suite calls, as the local stack maps them.
const OPERATIONS: &[u8] = br#"{"operations": [
  {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello", "streaming": "unary",
   "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]},
  {"grpc_path": "/wirelens.v1.Echo/ServerStream", "operation": "echo.ServerStream", "streaming": "server"},
  {"grpc_path": "/wirelens.v1.Catalog/GetProduct", "operation": "catalog.GetProduct", "streaming": "unary",
   "http_rules": [{"method": "GET", "pattern": "/v1/products/{id}"}]}
]}"#;

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

fn section<'a>(data: &mut &'a [u8]) -> &'a [u8] {
    let Some((len, rest)) = data.split_first_chunk::<4>() else {
        let taken = *data;
        *data = &[];
        return &taken[..0];
    };
    let len = (u32::from_le_bytes(*len) as usize).min(rest.len());
    let (taken, rest) = rest.split_at(len);
    *data = rest;
    taken
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

/// The pieces a body arrives in: control bytes cycled, or the whole body.
fn pieces<'b>(body: &'b [u8], chunks: &[u8]) -> Vec<&'b [u8]> {
    if chunks.is_empty() || body.is_empty() {
        return vec![body];
    }
    let mut out = Vec::new();
    let mut rest = body;
    for &c in chunks.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (now, later) = rest.split_at((c as usize + 1).min(rest.len()));
        out.push(now);
        rest = later;
    }
    out
}

// A fixed clock per phase: both runs of a check read the same times.
const T_REQUEST: u64 = 1_000_000;
const T_RESPONSE_HEADERS: u64 = 2_000_000;
const T_RESPONSE_END: u64 = 3_000_000;
const T_LOG: u64 = 4_000_000;

/// Runs the call; returns its published records (one expected).
pub fn run(input: &Input, window: usize, chunks: &[u8]) -> Vec<String> {
    let map = Rc::new(OpMap::from_json(OPERATIONS).expect("the driver's operation map"));
    let options = Options::default().with_rest_transcoded(input.flags & REST_TRANSCODED != 0);
    let mut call = Call::new(map)
        .with_read_window(window)
        .with_options(options);
    let mut published = Vec::new();
    let mut publish = |call: &mut Call, now: Option<u64>| {
        if !call.claim_publish() {
            return;
        }
        if call.response_headers_deferred() {
            call.on_deferred_response_headers(iter_serialized(input.response_headers));
        }
        published.push(call.record(now).to_json());
    };

    let request_ends = input.flags & REQUEST_ENDS != 0;
    let request_trailers = request_ends && input.flags & REQUEST_TRAILERS != 0;
    let headers_end = request_ends && !request_trailers && input.request_body.is_empty();
    call.on_request_headers(
        iter_serialized(input.request_headers),
        headers_end,
        Some(T_REQUEST),
    );
    if !headers_end {
        let body = pieces(input.request_body, chunks);
        for (i, piece) in body.iter().enumerate() {
            let end = request_ends && !request_trailers && i + 1 == body.len();
            if piece.is_empty() && !end {
                continue;
            }
            call.on_request_body(piece.len(), end, &mut SliceSource::new(piece), || {
                Some(T_REQUEST)
            });
        }
        if request_trailers {
            call.on_request_trailers(|| Some(T_REQUEST));
        }
    }

    if input.flags & RESPONSE_HEADERS != 0 {
        let response_ends = input.flags & RESPONSE_ENDS != 0;
        let response_trailers = response_ends && input.flags & RESPONSE_TRAILERS != 0;
        let headers_end = response_ends && !response_trailers && input.response_body.is_empty();
        let complete = if call.response_headers_need_entries(headers_end) {
            call.on_response_headers(iter_serialized(input.response_headers), headers_end, || {
                Some(T_RESPONSE_HEADERS)
            })
        } else {
            let size: usize = iter_serialized(input.response_headers)
                .map(|(n, v)| n.len() + v.len())
                .sum();
            call.on_response_header_size(size as u64, headers_end, || Some(T_RESPONSE_HEADERS))
        };
        if complete {
            publish(&mut call, None);
        }
        if !headers_end {
            let body = pieces(input.response_body, chunks);
            for (i, piece) in body.iter().enumerate() {
                let end = response_ends && !response_trailers && i + 1 == body.len();
                if piece.is_empty() && !end {
                    continue;
                }
                if call.on_response_body(piece.len(), end, &mut SliceSource::new(piece), || {
                    Some(T_RESPONSE_END)
                }) && !call.response_headers_deferred()
                {
                    publish(&mut call, None);
                }
            }
            if response_trailers
                && call.on_response_trailers(iter_serialized(input.response_trailers), || {
                    Some(T_RESPONSE_END)
                })
            {
                publish(&mut call, None);
            }
        }
    }

    // on_log: publishes a call whose response never completed.
    if !call.published() {
        let now = if call.response_complete() {
            None
        } else {
            Some(T_LOG)
        };
        publish(&mut call, now);
    }
    published
}

fn number(record: &str, key: &str) -> Option<u64> {
    let at = record.find(&format!("\"{key}\":"))? + key.len() + 3;
    let digits: String = record[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Runs the input chunked as it says and whole; panics on a broken invariant.
pub fn check(data: &[u8]) {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let chunked = run(&input, input.window, input.chunks);
    assert_eq!(chunked.len(), 1, "one publication per call: {chunked:?}");
    let record = &chunked[0];
    assert!(
        record.starts_with("{\"wirelens.protocol\":\"") && record.ends_with('}'),
        "{record}"
    );
    let request_sent = input.request_body.len() as u64;
    assert_eq!(
        number(record, "http.request.body.size"),
        Some(request_sent),
        "{record}"
    );
    let response_sent = if input.flags & RESPONSE_HEADERS != 0 {
        input.response_body.len() as u64
    } else {
        0
    };
    assert_eq!(
        number(record, "http.response.body.size"),
        Some(response_sent),
        "{record}"
    );
    assert!(
        matches!(number(record, "wirelens.malformed"), Some(0 | 1)),
        "{record}"
    );

    let whole = run(&input, wirelens_core::record::DEFAULT_READ_WINDOW, &[]);
    assert_eq!(
        whole, chunked,
        "whole bodies vs chunked (window {})",
        input.window
    );
}
