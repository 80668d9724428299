//! The per-call state machine and the record it publishes.
//!
//! The adapter feeds a [`Call`] with what the host reports (header maps,
//! body chunk sizes, body bytes through a [`BodySource`], the clock) and,
//! once the response is complete (or in the log phase for aborted streams),
//! emits the [`Record`] through [`Record::for_each`].

use crate::base64::Base64Decoder;
use crate::classify::{classify, Protocol};
use crate::frame::{parse_status, FrameParser, GrpcTrailer};
use crate::opmap::{derive_operation, split_grpc_path, strip_query, OpMap, Streaming};
use crate::percent::decode_grpc_message;
use std::rc::Rc;

/// Most bytes fetched from the host per body read. Bounds the memory one
/// read costs regardless of chunk size; message payloads beyond a window
/// are skipped without being read.
pub const DEFAULT_READ_WINDOW: usize = 16 * 1024;

/// The record keys, in publishing order (without the `wasm.` prefix Envoy
/// adds to filter state names).
pub const KEYS: [&str; 18] = [
    "wirelens.protocol",
    "wirelens.operation",
    "wirelens.rpc_service",
    "wirelens.rpc_method",
    "wirelens.streaming",
    "wirelens.route",
    "wirelens.req_header_bytes",
    "wirelens.resp_header_bytes",
    "wirelens.resp_trailer_bytes",
    "wirelens.req_body_bytes",
    "wirelens.resp_body_bytes",
    "wirelens.req_messages",
    "wirelens.resp_messages",
    "wirelens.grpc_status",
    "wirelens.grpc_message",
    "wirelens.ttfb_us",
    "wirelens.duration_us",
    "wirelens.malformed",
];

/// Random access to the current body chunk, as the host offers it.
pub trait BodySource {
    type Buf: AsRef<[u8]>;
    /// Up to `max` bytes of the current chunk starting at `start`. `None`
    /// when the host refuses; an empty or short buffer ends the chunk early.
    fn read(&mut self, start: usize, max: usize) -> Option<Self::Buf>;
}

/// A [`BodySource`] over a slice (tests, fuzzing, harnesses).
pub struct SliceSource<'a> {
    pub data: &'a [u8],
    /// Bytes handed out so far.
    pub bytes_read: usize,
    pub reads: usize,
}

impl<'a> SliceSource<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            bytes_read: 0,
            reads: 0,
        }
    }
}

impl<'a> BodySource for SliceSource<'a> {
    type Buf = &'a [u8];
    fn read(&mut self, start: usize, max: usize) -> Option<&'a [u8]> {
        let start = start.min(self.data.len());
        let end = start.saturating_add(max).min(self.data.len());
        self.reads += 1;
        self.bytes_read += end - start;
        Some(&self.data[start..end])
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyMode {
    /// Not parsed (REST, or a non-gRPC response).
    Ignore,
    /// Length-prefixed frames.
    Binary,
    /// Base64 text of length-prefixed frames.
    Text,
}

fn mode_for(protocol: Protocol) -> BodyMode {
    match protocol {
        Protocol::Grpc | Protocol::GrpcWeb => BodyMode::Binary,
        Protocol::GrpcWebText => BodyMode::Text,
        Protocol::Rest | Protocol::RestProto => BodyMode::Ignore,
    }
}

/// One direction of the body stream.
#[derive(Clone, Debug)]
struct Direction {
    mode: BodyMode,
    body_bytes: u64,
    frames: FrameParser,
    b64: Base64Decoder,
    ended: bool,
    read_failed: bool,
}

impl Direction {
    fn new() -> Self {
        Self {
            mode: BodyMode::Ignore,
            body_bytes: 0,
            frames: FrameParser::new(),
            b64: Base64Decoder::new(),
            ended: false,
            read_failed: false,
        }
    }

    fn wants_bytes(&self) -> bool {
        self.mode != BodyMode::Ignore && !self.read_failed && !self.ended
    }

    fn on_body<S: BodySource>(&mut self, size: usize, eos: bool, src: &mut S, window: usize) {
        self.body_bytes += size as u64;
        if self.wants_bytes() {
            let mut off = 0usize;
            while off < size {
                if self.mode == BodyMode::Binary {
                    let skip = self.frames.skippable().min((size - off) as u64);
                    if skip > 0 {
                        self.frames.skip(skip);
                        off += skip as usize;
                        continue;
                    }
                }
                if self.mode == BodyMode::Text && self.b64.is_malformed() {
                    break;
                }
                let want = window.min(size - off);
                let Some(buf) = src.read(off, want) else {
                    self.read_failed = true;
                    break;
                };
                let bytes = buf.as_ref();
                let bytes = &bytes[..bytes.len().min(want)];
                if bytes.is_empty() {
                    break;
                }
                match self.mode {
                    BodyMode::Binary => self.frames.feed(bytes),
                    BodyMode::Text => {
                        let frames = &mut self.frames;
                        self.b64.decode(bytes, |d| frames.feed(d));
                    }
                    BodyMode::Ignore => {}
                }
                off += bytes.len();
            }
        }
        if eos {
            self.end();
        }
    }

    fn end(&mut self) {
        if self.ended {
            return;
        }
        if self.mode != BodyMode::Ignore && !self.read_failed {
            if self.mode == BodyMode::Text {
                let frames = &mut self.frames;
                self.b64.finish(|d| frames.feed(d));
            }
            self.frames.finish();
        }
        self.ended = true;
    }

    fn messages(&self) -> u64 {
        self.frames.stats().messages
    }

    fn malformed(&self) -> bool {
        self.frames.is_malformed() || self.b64.is_malformed() || self.read_failed
    }
}

#[derive(Clone, Debug)]
enum Resolved {
    None,
    /// Operation from the map; for REST also the matched rule.
    Known {
        op: usize,
        rule: Option<usize>,
    },
    /// Unknown gRPC path: derived names.
    Derived {
        operation: String,
        service: String,
        method: String,
    },
}

/// State of one HTTP stream.
#[derive(Clone, Debug)]
pub struct Call {
    map: Rc<OpMap>,
    window: usize,
    protocol: Option<Protocol>,
    resolved: Resolved,
    start_ns: Option<u64>,
    resp_headers_ns: Option<u64>,
    end_ns: Option<u64>,
    req_header_bytes: u64,
    resp_header_bytes: u64,
    resp_trailer_bytes: u64,
    req: Direction,
    resp: Direction,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
    malformed: bool,
    response_headers_seen: bool,
    response_complete: bool,
    published: bool,
}

fn header_sum<'a>(
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    mut each: impl FnMut(&'a [u8], &'a [u8]),
) -> u64 {
    let mut total = 0u64;
    for (n, v) in headers {
        total += (n.len() + v.len()) as u64;
        each(n, v);
    }
    total
}

impl Call {
    pub fn new(map: Rc<OpMap>) -> Self {
        Self {
            map,
            window: DEFAULT_READ_WINDOW,
            protocol: None,
            resolved: Resolved::None,
            start_ns: None,
            resp_headers_ns: None,
            end_ns: None,
            req_header_bytes: 0,
            resp_header_bytes: 0,
            resp_trailer_bytes: 0,
            req: Direction::new(),
            resp: Direction::new(),
            grpc_status: None,
            grpc_message: None,
            malformed: false,
            response_headers_seen: false,
            response_complete: false,
            published: false,
        }
    }

    /// Sets the maximum bytes per body read (at least 1).
    pub fn with_read_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    pub fn protocol(&self) -> Option<Protocol> {
        self.protocol
    }

    /// Request headers arrived (the first callback of a stream).
    pub fn on_request_headers<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_of_stream: bool,
        now_ns: Option<u64>,
    ) {
        if self.protocol.is_some() {
            return;
        }
        self.start_ns = now_ns;
        let mut content_type = None;
        let mut path: &[u8] = b"";
        let mut method: &[u8] = b"";
        self.req_header_bytes = header_sum(headers, |n, v| {
            if n.eq_ignore_ascii_case(b"content-type") {
                content_type = Some(v);
            } else if n == b":path" {
                path = v;
            } else if n == b":method" {
                method = v;
            }
        });
        let protocol = classify(content_type);
        self.protocol = Some(protocol);
        self.req.mode = mode_for(protocol);
        self.resolved = self.resolve(protocol, method, path);
        if end_of_stream {
            self.req.end();
        }
    }

    fn resolve(&self, protocol: Protocol, method: &[u8], path: &[u8]) -> Resolved {
        if protocol.is_grpc_family() {
            if let Some(op) = self.map.lookup_grpc(path) {
                return Resolved::Known { op, rule: None };
            }
            let Ok(p) = std::str::from_utf8(strip_query(path)) else {
                return Resolved::None;
            };
            match split_grpc_path(p) {
                Some((service, method)) => Resolved::Derived {
                    operation: derive_operation(service, method),
                    service: service.to_string(),
                    method: method.to_string(),
                },
                None => Resolved::None,
            }
        } else {
            match self.map.match_rest(method, path) {
                Some((op, rule)) => Resolved::Known {
                    op,
                    rule: Some(rule),
                },
                None => Resolved::None,
            }
        }
    }

    /// True when the adapter should hand request body bytes over (gRPC family).
    pub fn wants_request_body(&self) -> bool {
        self.req.wants_bytes()
    }

    /// True when the adapter should hand response body bytes over.
    pub fn wants_response_body(&self) -> bool {
        self.response_headers_seen && self.resp.wants_bytes()
    }

    /// A request body chunk of `size` bytes (as the host reports it).
    pub fn on_request_body<S: BodySource>(
        &mut self,
        size: usize,
        end_of_stream: bool,
        src: &mut S,
    ) {
        self.req.on_body(size, end_of_stream, src, self.window);
    }

    /// Request trailers arrived: the request stream ended.
    pub fn on_request_trailers(&mut self) {
        self.req.end();
    }

    /// Sums a response header or trailer map, takes `grpc-status` and
    /// `grpc-message` from it and, for response headers (`is_headers`),
    /// decides how the response body is read. Returns the byte sum.
    fn absorb_response_map<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        is_headers: bool,
    ) -> u64 {
        let mut status: Option<&[u8]> = None;
        let mut message: Option<&[u8]> = None;
        let mut ct: Option<&[u8]> = None;
        let sum = header_sum(headers, |n, v| {
            if n.eq_ignore_ascii_case(b"grpc-status") {
                status = Some(v);
            } else if n.eq_ignore_ascii_case(b"grpc-message") {
                message = Some(v);
            } else if n.eq_ignore_ascii_case(b"content-type") {
                ct = Some(v);
            }
        });
        if let Some(s) = status {
            match parse_status(s) {
                Some(code) => self.grpc_status = Some(code),
                None => self.malformed = true,
            }
        }
        if let Some(m) = message {
            self.grpc_message = Some(decode_grpc_message(m));
        }
        if is_headers {
            // Response headers: decide how to read the response body. Only
            // for gRPC-family requests; by the response content-type when it
            // names a gRPC family type, else as the request was framed when
            // it has none, else (an error page, ...) not at all.
            let req_proto = self.protocol.unwrap_or(Protocol::Rest);
            self.resp.mode = if !req_proto.is_grpc_family() {
                BodyMode::Ignore
            } else {
                match ct {
                    None => mode_for(req_proto),
                    Some(ct) => match classify(Some(ct)) {
                        p if p.is_grpc_family() => mode_for(p),
                        _ => BodyMode::Ignore,
                    },
                }
            };
        }
        sum
    }

    fn absorb_trailer_frame(&mut self) {
        if let Some(GrpcTrailer { status, message }) = self.resp.frames.take_trailer() {
            if status.is_some() {
                self.grpc_status = status;
            }
            if message.is_some() {
                self.grpc_message = message;
            }
        }
    }

    fn complete(&mut self, now: impl FnOnce() -> Option<u64>) -> bool {
        if self.response_complete {
            return false;
        }
        self.resp.end();
        self.absorb_trailer_frame();
        self.response_complete = true;
        self.end_ns = now();
        true
    }

    /// Response headers arrived. Returns true when this completes the
    /// response (headers with end of stream): publish now.
    pub fn on_response_headers<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        end_of_stream: bool,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if self.response_headers_seen {
            return false;
        }
        self.resp_header_bytes = self.absorb_response_map(headers, true);
        self.response_headers_seen = true;
        let t = now();
        self.resp_headers_ns = t;
        if end_of_stream {
            self.complete(|| t)
        } else {
            false
        }
    }

    /// A response body chunk. Returns true when this completes the response.
    /// `now` is only called when it does.
    pub fn on_response_body<S: BodySource>(
        &mut self,
        size: usize,
        end_of_stream: bool,
        src: &mut S,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if self.response_complete {
            self.resp.body_bytes += size as u64;
            return false;
        }
        self.resp.on_body(size, false, src, self.window);
        self.absorb_trailer_frame();
        if end_of_stream {
            self.complete(now)
        } else {
            false
        }
    }

    /// Response trailers arrived. Returns true when this completes the
    /// response (it always does, unless already complete).
    pub fn on_response_trailers<'a>(
        &mut self,
        trailers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if self.response_complete {
            return false;
        }
        // Frames in the body end where trailers begin.
        self.resp.end();
        self.absorb_trailer_frame();
        self.resp_trailer_bytes = self.absorb_response_map(trailers, false);
        self.complete(now)
    }

    /// True once the response ended (headers/body with end of stream, or trailers).
    pub fn response_complete(&self) -> bool {
        self.response_complete
    }

    pub fn published(&self) -> bool {
        self.published
    }

    /// Claims the single publication: true the first time it is called on a
    /// call that saw request headers, false afterwards. Typical use: at the
    /// end of the response, and again (harmlessly) in the log phase.
    pub fn claim_publish(&mut self) -> bool {
        if self.published || self.protocol.is_none() {
            return false;
        }
        self.published = true;
        true
    }

    /// The record as of now. `now_ns` is used for the duration when the
    /// response has not completed (aborted streams).
    pub fn record(&self, now_ns: Option<u64>) -> Record<'_> {
        let (operation, rpc_service, rpc_method, streaming, route) = match &self.resolved {
            Resolved::None => ("", "", "", None, ""),
            Resolved::Known { op, rule } => {
                let o = self.map.operation(*op);
                let route = rule
                    .and_then(|r| self.map.rule(r))
                    .map_or("", |r| r.pattern.as_str());
                match o {
                    Some(o) => (
                        o.operation.as_str(),
                        o.rpc_service.as_str(),
                        o.rpc_method.as_str(),
                        o.streaming,
                        route,
                    ),
                    None => ("", "", "", None, ""),
                }
            }
            Resolved::Derived {
                operation,
                service,
                method,
            } => (
                operation.as_str(),
                service.as_str(),
                method.as_str(),
                None,
                "",
            ),
        };
        let us = |from: Option<u64>, to: Option<u64>| match (from, to) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) / 1000),
            _ => None,
        };
        Record {
            protocol: self.protocol,
            operation,
            rpc_service,
            rpc_method,
            streaming,
            route,
            req_header_bytes: self.req_header_bytes,
            resp_header_bytes: self.resp_header_bytes,
            resp_trailer_bytes: self.resp_trailer_bytes,
            req_body_bytes: self.req.body_bytes,
            resp_body_bytes: self.resp.body_bytes,
            req_messages: self.req.messages(),
            resp_messages: self.resp.messages(),
            grpc_status: self.grpc_status,
            grpc_message: self.grpc_message.as_deref().unwrap_or(""),
            ttfb_us: us(self.start_ns, self.resp_headers_ns),
            duration_us: us(self.start_ns, self.end_ns.or(now_ns)),
            malformed: self.malformed || self.req.malformed() || self.resp.malformed(),
        }
    }
}

/// The published per-call record (see README for field definitions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub protocol: Option<Protocol>,
    pub operation: &'a str,
    pub rpc_service: &'a str,
    pub rpc_method: &'a str,
    pub streaming: Option<Streaming>,
    pub route: &'a str,
    pub req_header_bytes: u64,
    pub resp_header_bytes: u64,
    pub resp_trailer_bytes: u64,
    pub req_body_bytes: u64,
    pub resp_body_bytes: u64,
    pub req_messages: u64,
    pub resp_messages: u64,
    pub grpc_status: Option<u32>,
    pub grpc_message: &'a str,
    pub ttfb_us: Option<u64>,
    pub duration_us: Option<u64>,
    pub malformed: bool,
}

fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

impl Record<'_> {
    /// Calls `f(key, value)` for every key of [`KEYS`], in order. Values are
    /// UTF-8; integers in decimal; unknown values are empty. No allocation.
    pub fn for_each(&self, mut f: impl FnMut(&'static str, &[u8])) {
        let mut buf = [0u8; 20];
        let mut num = |k: &'static str, n: u64, f: &mut dyn FnMut(&'static str, &[u8])| {
            f(k, fmt_u64(n, &mut buf));
        };
        f(
            KEYS[0],
            self.protocol.map_or("", Protocol::as_str).as_bytes(),
        );
        f(KEYS[1], self.operation.as_bytes());
        f(KEYS[2], self.rpc_service.as_bytes());
        f(KEYS[3], self.rpc_method.as_bytes());
        f(
            KEYS[4],
            self.streaming.map_or("", Streaming::as_str).as_bytes(),
        );
        f(KEYS[5], self.route.as_bytes());
        num(KEYS[6], self.req_header_bytes, &mut f);
        num(KEYS[7], self.resp_header_bytes, &mut f);
        num(KEYS[8], self.resp_trailer_bytes, &mut f);
        num(KEYS[9], self.req_body_bytes, &mut f);
        num(KEYS[10], self.resp_body_bytes, &mut f);
        num(KEYS[11], self.req_messages, &mut f);
        num(KEYS[12], self.resp_messages, &mut f);
        match self.grpc_status {
            Some(s) => num(KEYS[13], s as u64, &mut f),
            None => f(KEYS[13], b""),
        }
        f(KEYS[14], self.grpc_message.as_bytes());
        match self.ttfb_us {
            Some(t) => num(KEYS[15], t, &mut f),
            None => f(KEYS[15], b""),
        }
        match self.duration_us {
            Some(t) => num(KEYS[16], t, &mut f),
            None => f(KEYS[16], b""),
        }
        f(KEYS[17], if self.malformed { b"1" } else { b"0" });
    }

    /// The record as (key, value) strings (tests, harnesses).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::with_capacity(KEYS.len());
        self.for_each(|k, val| v.push((k, String::from_utf8_lossy(val).into_owned())));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_formatting() {
        let mut b = [0u8; 20];
        assert_eq!(fmt_u64(0, &mut b), b"0");
        assert_eq!(fmt_u64(7, &mut b), b"7");
        assert_eq!(fmt_u64(1234567890, &mut b), b"1234567890");
        assert_eq!(fmt_u64(u64::MAX, &mut b), b"18446744073709551615");
    }

    #[test]
    fn keys_are_unique_and_complete() {
        let call = Call::new(Rc::new(OpMap::empty()));
        let pairs = call.record(None).to_pairs();
        assert_eq!(pairs.len(), KEYS.len());
        let mut ks: Vec<_> = pairs.iter().map(|p| p.0).collect();
        ks.dedup();
        assert_eq!(ks, KEYS);
    }
}
