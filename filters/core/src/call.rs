//! The per-call state machine, driven by its host.
//!
//! A [`Call`] is one HTTP stream. The adapter forwards each callback of the
//! stream with a [`Host`], and the call decides what to ask of it: the
//! clock, a header map's entries or only its size, body bytes in windows,
//! and, once the response is complete (or in the log phase for streams
//! that never completed), the one publication of its [`Record`] as compact
//! JSON. The host calls per callback are the filter's cost, documented in
//! filters/README.md ("Host calls per call") and asserted by
//! `filters/abi/tests/vm.rs`.

use crate::body::{mode_for, BodyMode, Direction, DEFAULT_READ_WINDOW};
use crate::classify::{accepts_protobuf, classify, Protocol};
use crate::config::{Fields, Options};
use crate::counterfactual::estimate::{Estimate, RequestHeaders};
use crate::frame::{parse_status, GrpcTrailer};
use crate::headers::HeaderEntries;
use crate::host::{Body, HeaderMap, Host};
use crate::json::cut_utf8;
use crate::opmap::{OpMap, UNKNOWN_OPERATION};
use crate::percent::decode_grpc_message;
use crate::record::{url_path, Frames, Record};
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Resolved {
    /// Request headers not seen yet.
    None,
    /// Operation from the map; for REST also the matched rule.
    Known { op: usize, rule: Option<usize> },
    /// A call the map does not know: its path, bounded ([`url_path`]).
    Unknown { path: String },
}

/// How far the response has come, and whether the record went out: the
/// one state behind every "has it happened yet" of a call's response.
///
/// Callbacks may come in any order (a host in trouble, a local reply, the
/// fuzz target `call_sequence`), so the response can end before its
/// headers arrive, and the record can be published (log phase) before the
/// response ends; each such state is one variant here. What cannot happen
/// cannot be written: header entries deferred before the headers arrived,
/// or still deferred once the record is out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Response {
    /// Waiting for the response headers. `ended`: the response ended
    /// before them (a body's end of stream, or trailers, came first).
    AwaitingHeaders { ended: bool },
    /// Headers arrived; waiting for the rest of the response (body,
    /// trailers). `deferred`: gRPC headers known only by their size
    /// (trailers were expected); their entries are read at publication if
    /// the response ends without trailers.
    Open { deferred: bool },
    /// Headers arrived and the response ended; the record is not published
    /// yet: with `deferred` entries it waits for the log phase, which reads
    /// them; otherwise for the request headers (none came yet).
    Ended { deferred: bool },
    /// The record was published (once). Later callbacks still count into
    /// the call's state, which [`Call::record`] shows.
    Published { headers: bool, ended: bool },
}

impl Response {
    /// Headers arrived (the first time), their entries deferred or not.
    fn headers_arrived(self, deferred: bool) -> Self {
        match self {
            Response::AwaitingHeaders { ended: false } => Response::Open { deferred },
            Response::AwaitingHeaders { ended: true } => Response::Ended { deferred },
            Response::Published { ended, .. } => Response::Published {
                headers: true,
                ended,
            },
            open_or_ended => open_or_ended,
        }
    }

    /// The response ended (the first time).
    fn ended(self) -> Self {
        match self {
            Response::AwaitingHeaders { .. } => Response::AwaitingHeaders { ended: true },
            Response::Open { deferred } | Response::Ended { deferred } => {
                Response::Ended { deferred }
            }
            Response::Published { headers, .. } => Response::Published {
                headers,
                ended: true,
            },
        }
    }

    fn headers_seen(self) -> bool {
        match self {
            Response::AwaitingHeaders { .. } => false,
            Response::Open { .. } | Response::Ended { .. } => true,
            Response::Published { headers, .. } => headers,
        }
    }

    fn is_complete(self) -> bool {
        match self {
            Response::AwaitingHeaders { ended } | Response::Published { ended, .. } => ended,
            Response::Open { .. } => false,
            Response::Ended { .. } => true,
        }
    }

    fn is_published(self) -> bool {
        matches!(self, Response::Published { .. })
    }

    /// Header entries still to be read at publication.
    fn is_deferred(self) -> bool {
        matches!(
            self,
            Response::Open { deferred: true } | Response::Ended { deferred: true }
        )
    }

    /// Trailers arrived: deferred header entries are not needed after all.
    fn undeferred(self) -> Self {
        match self {
            Response::Open { .. } => Response::Open { deferred: false },
            Response::Ended { .. } => Response::Ended { deferred: false },
            other => other,
        }
    }

    fn published(self) -> Self {
        Response::Published {
            headers: self.headers_seen(),
            ended: self.is_complete(),
        }
    }
}

/// State of one HTTP stream, and what it asks of its host.
#[derive(Clone, Debug)]
pub struct Call {
    map: Arc<OpMap>,
    options: Options,
    window: usize,
    protocol: Option<Protocol>,
    resolved: Resolved,
    start_ns: Option<u64>,
    resp_headers_ns: Option<u64>,
    end_ns: Option<u64>,
    req_end_ns: Option<u64>,
    req_header_bytes: u64,
    resp_header_bytes: u64,
    resp_trailer_bytes: u64,
    req: Direction,
    resp: Direction,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
    malformed: bool,
    response: Response,
    /// Sampled for the counterfactual (decided by the adapter).
    counterfactual: bool,
    /// Its estimate, from the request headers on.
    estimate: Option<Box<Estimate>>,
}

/// The largest trailers that cannot hold a `grpc-status` and a non-empty
/// `grpc-message` together: an OK call's `grpc-status: 0` with the empty
/// `grpc-message` grpc-go always sends (24 bytes), or the status alone.
const STATUS_WITHOUT_MESSAGE_MAX_BYTES: u64 =
    (b"grpc-status".len() + 1 + b"grpc-message".len()) as u64;

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

/// The entries of a header map the host answered; a refused map is empty
/// (and the record malformed: [`Call::answered`]).
fn entries<M: HeaderEntries>(map: &Option<M>) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
    map.iter().flat_map(HeaderEntries::entries)
}

impl Call {
    pub fn new(map: Arc<OpMap>) -> Self {
        Self {
            map,
            options: Options::default(),
            window: DEFAULT_READ_WINDOW,
            protocol: None,
            resolved: Resolved::None,
            start_ns: None,
            resp_headers_ns: None,
            end_ns: None,
            req_end_ns: None,
            req_header_bytes: 0,
            resp_header_bytes: 0,
            resp_trailer_bytes: 0,
            req: Direction::new(),
            resp: Direction::new(),
            grpc_status: None,
            grpc_message: None,
            malformed: false,
            response: Response::AwaitingHeaders { ended: false },
            counterfactual: false,
            estimate: None,
        }
    }

    /// Samples this call for the counterfactual (`docs/what-if.md`): its
    /// payloads are read, bounded, and their size in the other encoding
    /// recorded. Only when the map carries descriptors.
    pub fn with_counterfactual(mut self, on: bool) -> Self {
        self.counterfactual = on && self.map.descriptors().is_some();
        self
    }

    /// Sets the maximum bytes per body read (at least 1; the filter uses
    /// [`DEFAULT_READ_WINDOW`]).
    #[cfg(any(test, feature = "test-support"))]
    pub fn with_read_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    /// Sets the publishing options (default: [`Options::default`]).
    pub fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Marks the record malformed (`wirelens.malformed`: 1): the adapter's
    /// verdict on a call it can no longer vouch for (the native module
    /// after a panic in one of its hooks).
    pub fn mark_malformed(&mut self) {
        self.malformed = true;
    }

    // ----------------------------------------- inspection (tests, harnesses)

    #[cfg(any(test, feature = "test-support"))]
    pub fn options(&self) -> &Options {
        &self.options
    }

    #[cfg(any(test, feature = "test-support"))]
    pub fn protocol(&self) -> Option<Protocol> {
        self.protocol
    }

    /// True once the request ended (headers or body with end of stream, or trailers).
    #[cfg(any(test, feature = "test-support"))]
    pub fn request_complete(&self) -> bool {
        self.req.ended
    }

    /// True once the response ended (headers/body with end of stream, or trailers).
    #[cfg(any(test, feature = "test-support"))]
    pub fn response_complete(&self) -> bool {
        self.response.is_complete()
    }

    /// True once the record was published.
    #[cfg(any(test, feature = "test-support"))]
    pub fn published(&self) -> bool {
        self.response.is_published()
    }

    // ------------------------------------------------------------ callbacks

    /// Request headers (the first callback of a stream): the clock, then
    /// one copy of the map, from which everything the record needs of the
    /// request headers is taken. Only the first call counts.
    pub fn on_request_headers<H: Host>(&mut self, host: &mut H, end_of_stream: bool) {
        let now = host.now_ns();
        let map = self.answered(host.header_map(HeaderMap::RequestHeaders));
        self.request_headers(entries(&map), end_of_stream, now);
    }

    /// A request body chunk of `body_size` bytes: counted; read from the
    /// host only for the gRPC family. The clock is read only when this
    /// ends the request.
    pub fn on_request_body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: usize,
        end_of_stream: bool,
    ) {
        self.body_chunk(true, body_size, host);
        if end_of_stream {
            self.end_request(host);
        }
    }

    /// Request trailers: the request stream ended (the clock is read if it
    /// had not ended already).
    pub fn on_request_trailers<H: Host>(&mut self, host: &mut H) {
        self.end_request(host);
    }

    /// Response headers: their entries when the record needs them
    /// ([`Call::response_headers_need_entries`]), else only their size;
    /// then the clock. Publishes when they end the response.
    pub fn on_response_headers<H: Host>(&mut self, host: &mut H, end_of_stream: bool) {
        let complete = if self.response_headers_need_entries(end_of_stream) {
            let map = self.answered(host.header_map(HeaderMap::ResponseHeaders));
            let bytes = self.response_headers(&map);
            drop(map);
            bytes.is_some_and(|b| self.response_headers_arrived(b, false, end_of_stream, host))
        } else {
            let size = self
                .answered(host.header_map_size(HeaderMap::ResponseHeaders))
                .unwrap_or(0);
            self.response_header_size(size as u64, end_of_stream, host)
        };
        if complete {
            self.publish(host, None);
        }
    }

    /// A response body chunk: counted, read as the response headers said.
    /// Publishes when it ends the response, unless header entries were
    /// deferred: those are read in the log phase.
    pub fn on_response_body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: usize,
        end_of_stream: bool,
    ) {
        if self.response_body(body_size, end_of_stream, host) && !self.response.is_deferred() {
            self.publish(host, None);
        }
    }

    /// Response trailers: always sized; their entries copied only when the
    /// record needs them ([`Call::response_trailers_need_entries`]); then
    /// the clock. Publishes (they end the response).
    pub fn on_response_trailers<H: Host>(&mut self, host: &mut H) {
        let size = self
            .answered(host.header_map_size(HeaderMap::ResponseTrailers))
            .unwrap_or(0) as u64;
        let complete = if self.response_trailers_need_entries(size) {
            let map = self.answered(host.header_map(HeaderMap::ResponseTrailers));
            let arrived = self.response_trailers(entries(&map));
            drop(map);
            arrived && self.complete(|| host.now_ns())
        } else {
            self.response_trailer_size(size, host)
        };
        if complete {
            self.publish(host, None);
        }
    }

    /// The log phase: publishes a call that has not published yet (its
    /// response never completed, or its header entries were deferred). The
    /// clock is read only for a response that never completed: its end.
    pub fn on_log<H: Host>(&mut self, host: &mut H) {
        if !self.response.is_published() {
            let now = if self.response.is_complete() {
                None
            } else {
                host.now_ns()
            };
            self.publish(host, now);
        }
    }

    /// The single publication: nothing before request headers or a second
    /// time. Deferred response header entries are read first (Envoy shows
    /// response headers again only in the log phase, where this then
    /// happens).
    fn publish<H: Host>(&mut self, host: &mut H, now_ns: Option<u64>) {
        if self.response.is_published() || self.protocol.is_none() {
            return;
        }
        let deferred = self.response.is_deferred();
        self.response = self.response.published();
        if deferred {
            if let Some(map) = self.answered(host.header_map(HeaderMap::ResponseHeaders)) {
                self.deferred_response_headers(map.entries());
            }
        }
        let mut json = host.record_buffer();
        self.record(now_ns).write_published(&mut json);
        host.publish(json);
    }

    /// A host's answer to a header map or size read. A refusal marks the
    /// record malformed: the call carries on with an empty map or a size of
    /// 0, and those zeros must not pass for measurements.
    fn answered<T>(&mut self, answer: Option<T>) -> Option<T> {
        self.malformed |= answer.is_none();
        answer
    }

    // ------------------------------------------------------------ decisions

    /// Whether the response headers' entries are needed, or only their byte
    /// size, which a host can report without copying the map (Envoy:
    /// `proxy_get_header_map_size`).
    ///
    /// - REST: the size only.
    /// - Transcoded REST: entries (`grpc-status`).
    /// - gRPC-Web, both modes: entries (the content type decides how the
    ///   body is read; the trailers travel inside it).
    /// - gRPC: entries only for a trailers-only response (headers with end
    ///   of stream, carrying `grpc-status`). Otherwise trailers are due: the
    ///   body is read as gRPC frames, the trailers confirm that it was gRPC,
    ///   and only a response that ends without them needs its header entries
    ///   after all, read at publication.
    pub fn response_headers_need_entries(&self, end_of_stream: bool) -> bool {
        if self
            .estimate
            .as_ref()
            .is_some_and(|e| e.needs_response_headers())
        {
            return true;
        }
        match self.protocol {
            Some(Protocol::Grpc) => end_of_stream,
            Some(p) => p.is_grpc_family() || p == Protocol::RestTranscoded,
            None => false,
        }
    }

    /// Whether the response trailers' entries are needed, or only their
    /// byte size (the sum of name and value lengths), which Envoy reports
    /// without copying the map. Native gRPC needs them only when they can
    /// carry a status and a non-empty `grpc-message` the record publishes:
    /// Envoy reads `grpc-status` itself (`%GRPC_STATUS(NUMBER)%`, which the
    /// pipeline uses when the record has no status), so an OK call's
    /// trailers (`grpc-status: 0`, with or without an empty
    /// `grpc-message`: 12 or 24 bytes) are only sized.
    pub fn response_trailers_need_entries(&self, bytes: u64) -> bool {
        // A call sampled for the counterfactual needs its status.
        self.protocol != Some(Protocol::Grpc)
            || self.estimate.is_some()
            || (self.options.fields.contains(Fields::GRPC_MESSAGE)
                && self.options.grpc_message_max_bytes > 0
                && bytes > STATUS_WITHOUT_MESSAGE_MAX_BYTES)
    }

    // ---------------------------------------------------------------- state

    fn request_headers<'a>(
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
        let mut accept: &[u8] = b"";
        let mut path: &[u8] = b"";
        let mut method: &[u8] = b"";
        let mut content_encoding = None;
        let counterfactual = self.counterfactual;
        self.req_header_bytes = header_sum(headers, |n, v| {
            if n.eq_ignore_ascii_case(b"content-type") {
                content_type = Some(v);
            } else if counterfactual && n.eq_ignore_ascii_case(b"content-encoding") {
                content_encoding = Some(v);
            } else if n.eq_ignore_ascii_case(b"accept") {
                accept = v;
            } else if n == b":path" {
                path = v;
            } else if n == b":method" {
                method = v;
            }
        });
        let mut protocol = classify(content_type);
        if protocol == Protocol::Rest {
            if self.options.rest_transcoded {
                protocol = Protocol::RestTranscoded;
            } else if accepts_protobuf(accept) {
                protocol = Protocol::RestProto;
            }
        }
        self.protocol = Some(protocol);
        self.req.mode = mode_for(protocol);
        self.resolved = self.resolve(protocol, method, path);
        if counterfactual {
            let (op, rule) = match self.resolved {
                Resolved::Known { op, rule } => (Some(op), rule),
                _ => (None, None),
            };
            let headers = RequestHeaders {
                path,
                content_type,
                content_encoding,
            };
            let max = self.options.counterfactual_max_bytes as usize;
            self.estimate = Some(Box::new(Estimate::start(
                &self.map, protocol, op, rule, headers, max,
            )));
        }
        if end_of_stream && !self.req.ended {
            self.end_request_direction();
            self.req_end_ns = now_ns;
        }
    }

    /// The request stream ended (first time only): frames end, time noted.
    fn end_request<H: Host>(&mut self, host: &mut H) {
        if self.req.ended {
            return;
        }
        self.end_request_direction();
        self.req_end_ns = host.now_ns();
    }

    /// A body chunk of one direction, read as its mode says; a call
    /// sampled for the counterfactual also hands every byte to its estimate.
    fn body_chunk<H: Host>(&mut self, request: bool, size: usize, host: &mut H) {
        let window = self.window;
        let (direction, body) = if request {
            (&mut self.req, Body::Request)
        } else {
            (&mut self.resp, Body::Response)
        };
        match self.estimate.as_deref_mut().filter(|e| e.wants(request)) {
            Some(e) => {
                let mut tap = |b: &[u8]| e.bytes(request, b);
                direction.on_body(size, host, body, window, Some(&mut tap));
            }
            None => direction.on_body(size, host, body, window, None),
        }
    }

    /// Ends the request direction (and its estimate).
    fn end_request_direction(&mut self) {
        self.end_direction(true);
    }

    /// Ends the response direction (and its estimate).
    fn end_response_direction(&mut self) {
        self.end_direction(false);
    }

    fn end_direction(&mut self, request: bool) {
        let direction = if request {
            &mut self.req
        } else {
            &mut self.resp
        };
        match self.estimate.as_deref_mut() {
            Some(e) => {
                let mut tap = |b: &[u8]| e.bytes(request, b);
                direction.end_tapped(Some(&mut tap));
                e.end(request);
            }
            None => direction.end(),
        }
    }

    /// The operation comes only from the map: a client cannot add values
    /// to the record's dimensions by inventing paths.
    fn resolve(&self, protocol: Protocol, method: &[u8], path: &[u8]) -> Resolved {
        let known = if protocol.is_grpc_family() {
            self.map
                .lookup_grpc(path)
                .map(|op| Resolved::Known { op, rule: None })
        } else {
            self.map
                .match_rest(method, path)
                .map(|(op, rule)| Resolved::Known {
                    op,
                    rule: Some(rule),
                })
        };
        known.unwrap_or_else(|| Resolved::Unknown {
            path: url_path(path),
        })
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
            if self.options.fields.contains(Fields::GRPC_MESSAGE) {
                let max = usize::from(self.options.grpc_message_max_bytes);
                self.grpc_message = Some(decode_grpc_message(m, max));
            }
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
        if self.response.is_complete() {
            return false;
        }
        self.end_response_direction();
        self.absorb_trailer_frame();
        self.response = self.response.ended();
        self.end_ns = now();
        true
    }

    /// Response headers arrived with their entries (a refused map has
    /// none): their byte sum, or `None` when headers had arrived already.
    /// The caller then notes their arrival
    /// ([`Call::response_headers_arrived`]) once the map is dropped.
    fn response_headers<M: HeaderEntries>(&mut self, map: &Option<M>) -> Option<u64> {
        if self.response.headers_seen() {
            return None;
        }
        let bytes = self.absorb_response_map(entries(map), true);
        if let Some(e) = self.estimate.as_deref_mut() {
            e.response_headers(entries(map), self.resp.mode != BodyMode::Ignore);
        }
        Some(bytes)
    }

    /// Response headers arrived, known only by their byte size because
    /// their entries are not needed. True when this completes the response.
    fn response_header_size<H: Host>(
        &mut self,
        bytes: u64,
        end_of_stream: bool,
        host: &mut H,
    ) -> bool {
        if self.response.headers_seen() {
            return false;
        }
        let deferred = self.protocol == Some(Protocol::Grpc) && !end_of_stream;
        self.resp.mode = if deferred {
            mode_for(Protocol::Grpc)
        } else {
            BodyMode::Ignore
        };
        if let Some(e) = self.estimate.as_deref_mut() {
            e.response_headers(std::iter::empty(), self.resp.mode != BodyMode::Ignore);
        }
        self.response_headers_arrived(bytes, deferred, end_of_stream, host)
    }

    /// The response headers' arrival: their size, whether their entries
    /// are deferred to publication, the clock; completes the response on
    /// end of stream.
    fn response_headers_arrived<H: Host>(
        &mut self,
        bytes: u64,
        deferred: bool,
        end_of_stream: bool,
        host: &mut H,
    ) -> bool {
        self.resp_header_bytes = bytes;
        self.response = self.response.headers_arrived(deferred);
        let t = host.now_ns();
        self.resp_headers_ns = t;
        if end_of_stream {
            self.complete(|| t)
        } else {
            false
        }
    }

    /// A response body chunk. True when this completes the response (the
    /// clock is read only then).
    fn response_body<H: Host>(&mut self, size: usize, end_of_stream: bool, host: &mut H) -> bool {
        if self.response.is_complete() {
            self.resp.body_bytes += size as u64;
            return false;
        }
        self.body_chunk(false, size, host);
        self.absorb_trailer_frame();
        if end_of_stream {
            self.complete(|| host.now_ns())
        } else {
            false
        }
    }

    /// Response trailers arrived with their entries. True when the caller
    /// is to complete the response ([`Call::complete`], once the map is
    /// dropped): always, unless it had completed already.
    fn response_trailers<'a>(
        &mut self,
        trailers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> bool {
        if !self.trailers_arrived() {
            return false;
        }
        self.resp_trailer_bytes = self.absorb_response_map(trailers, false);
        true
    }

    /// Response trailers arrived, known only by their byte size.
    fn response_trailer_size<H: Host>(&mut self, bytes: u64, host: &mut H) -> bool {
        if !self.trailers_arrived() {
            return false;
        }
        self.resp_trailer_bytes = bytes;
        self.complete(|| host.now_ns())
    }

    /// What any trailers mean for the body: its frames end where they
    /// begin, and they make it a gRPC response, so deferred header entries
    /// are not needed. False when the response had already ended.
    fn trailers_arrived(&mut self) -> bool {
        if self.response.is_complete() {
            return false;
        }
        self.response = self.response.undeferred();
        self.end_response_direction();
        self.absorb_trailer_frame();
        true
    }

    /// The deferred response header entries, read at publication. They can
    /// carry `grpc-status` and `grpc-message`; and if their content type is
    /// not gRPC (an error page), the body was not gRPC after all: its frame
    /// statistics are dropped, as if it had been ignored from the start.
    fn deferred_response_headers<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        self.absorb_response_map(headers, true);
        if self.resp.mode == BodyMode::Ignore {
            self.resp = self.resp.unread();
        }
    }

    /// The record as of now. `now_ns` is used for the duration when the
    /// response has not completed (aborted streams).
    pub fn record(&self, now_ns: Option<u64>) -> Record<'_> {
        let (operation, rpc_service, rpc_method, streaming, route, opmap_key, url_path) =
            match &self.resolved {
                Resolved::None => ("", "", "", None, "", "", ""),
                Resolved::Known { op, rule } => {
                    let o = self.map.operation(*op);
                    let rule = rule.and_then(|r| self.map.rule(r));
                    match o {
                        Some(o) => (
                            o.operation.as_str(),
                            o.rpc_service.as_str(),
                            o.rpc_method.as_str(),
                            o.streaming,
                            rule.map_or("", |r| r.pattern.as_str()),
                            rule.map_or(o.key.as_str(), |r| r.key.as_str()),
                            "",
                        ),
                        None => ("", "", "", None, "", "", ""),
                    }
                }
                Resolved::Unknown { path } => {
                    (UNKNOWN_OPERATION, "", "", None, "", "", path.as_str())
                }
            };
        // Wall-clock deltas: a clock going backwards gives 0, not a wrap.
        let us = |from: Option<u64>, to: Option<u64>| match (from, to) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) / 1000),
            _ => None,
        };
        let frames = match self.protocol {
            Some(p) if p.is_grpc_family() => Some(Frames {
                request: self.req.frames.stats(),
                response: self.resp.frames.stats(),
            }),
            _ => None,
        };
        Record {
            protocol: self.protocol,
            operation,
            rpc_service,
            rpc_method,
            streaming,
            route,
            opmap_key,
            url_path,
            grpc_status: self.grpc_status,
            // A trailer frame's message was decoded before the options were
            // known to the parser: cut here too.
            grpc_message: cut_utf8(
                self.grpc_message.as_deref().unwrap_or(""),
                usize::from(self.options.grpc_message_max_bytes),
            ),
            req_header_bytes: self.req_header_bytes,
            resp_header_bytes: self.resp_header_bytes,
            resp_trailer_bytes: self.resp_trailer_bytes,
            req_body_bytes: self.req.body_bytes,
            resp_body_bytes: self.resp.body_bytes,
            frames,
            ttfb_us: us(self.start_ns, self.resp_headers_ns),
            duration_us: us(self.start_ns, self.end_ns.or(now_ns)),
            request_duration_us: us(self.start_ns, self.req_end_ns),
            malformed: self.malformed || self.req.malformed() || self.resp.malformed(),
            fields: self.options.fields,
            sample_rate: self.options.sample_rate_json(),
            counterfactual: self
                .estimate
                .as_ref()
                .map(|e| e.result(self.grpc_status))
                .unwrap_or_default(),
            counterfactual_rate: self
                .estimate
                .as_ref()
                .and_then(|_| self.options.counterfactual_rate_json()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::encode_frame;
    use crate::headers::serialize;
    use crate::host::MemoryHost;
    use crate::names::wire;

    #[test]
    fn empty_call_record() {
        let call = Call::new(Arc::new(OpMap::empty()));
        assert_eq!(
            call.record(None).to_json(),
            r#"{"wirelens.request.header.size":0,"wirelens.response.header.size":0,"wirelens.response.trailer.size":0,"http.request.body.size":0,"http.response.body.size":0,"wirelens.malformed":0}"#
        );
    }

    fn host(content_type: &str, response_content_type: &str) -> MemoryHost {
        MemoryHost {
            now: Some(0),
            request_headers: Some(serialize(&[
                (":method", "POST"),
                (":path", "/a.B/C"),
                ("content-type", content_type),
            ])),
            response_headers: Some(serialize(&[
                (":status", "200"),
                ("content-type", response_content_type),
            ])),
            response_trailers: Some(serialize(&[("grpc-status", "0")])),
            request_body: Some(encode_frame(0, b"hi")),
            response_body: Some(encode_frame(0, b"hello")),
            ..MemoryHost::default()
        }
    }

    /// A whole call: request in one chunk, response headers, one body
    /// chunk, then trailers when `trailers`; the log phase. Returns the
    /// records the host accepted.
    fn whole_call(host: &mut MemoryHost, trailers: bool) -> Vec<String> {
        let mut call = Call::new(Arc::new(OpMap::empty()));
        call.on_request_headers(host, false);
        call.on_request_body(host, 7, true);
        call.on_response_headers(host, false);
        call.on_response_body(host, 10, !trailers);
        if trailers {
            call.on_response_trailers(host);
        }
        call.on_log(host);
        std::mem::take(&mut host.published)
    }

    fn malformed(records: &[String]) -> bool {
        assert_eq!(records.len(), 1, "{records:?}");
        let record = decoded(&records[0]);
        let mf = record[wire::MALFORMED].as_u64();
        assert!(mf == Some(0) || mf == Some(1), "{record:?}");
        mf == Some(1)
    }

    fn decoded(record: &str) -> serde_json::Map<String, serde_json::Value> {
        crate::record::decode_published(record, &OpMap::empty())
    }

    #[test]
    fn answered_calls_are_not_malformed() {
        for (ct, trailers) in [
            ("application/grpc", true),
            ("application/grpc", false),
            ("application/grpc-web", false),
            ("application/json", false),
        ] {
            assert!(!malformed(&whole_call(&mut host(ct, ct), trailers)), "{ct}");
        }
    }

    #[test]
    fn refused_header_maps_and_sizes_mark_the_record_malformed() {
        // Request header map refused: an empty map (rest, unknown, 0 bytes), flagged.
        let mut h = host("application/grpc", "application/grpc");
        h.request_headers = None;
        let records = whole_call(&mut h, true);
        assert!(records[0].starts_with("rest,unknown,,0,"), "{records:?}");
        assert!(malformed(&records));

        // Response header size refused (REST: only sized).
        let mut h = host("application/json", "application/json");
        h.refuse.map_sizes = true;
        assert!(malformed(&whole_call(&mut h, false)));
        assert_eq!(h.calls.refused_reads, 1);

        // Response header entries refused (gRPC-Web: read for the body mode).
        let mut h = host("application/grpc-web", "application/grpc-web");
        h.response_headers = None;
        assert!(malformed(&whole_call(&mut h, false)));

        // gRPC trailers: their size refused, then their entries refused.
        let mut h = host("application/grpc", "application/grpc");
        h.refuse.map_sizes = true;
        assert!(malformed(&whole_call(&mut h, true)));
        let mut h = host("application/grpc", "application/grpc");
        h.response_trailers = Some(serialize(&[
            ("grpc-status", "13"),
            ("grpc-message", "went wrong"),
        ]));
        h.refuse.map_copies = true;
        let records = whole_call(&mut h, true);
        assert!(malformed(&records));
        assert_eq!(h.calls.refused_reads, 2, "request headers and trailers");

        // Deferred gRPC response headers refused in the log phase.
        let mut h = host("application/grpc", "text/plain");
        let mut call = Call::new(Arc::new(OpMap::empty()));
        call.on_request_headers(&mut h, true);
        call.on_response_headers(&mut h, false);
        call.on_response_body(&mut h, 10, true);
        h.refuse.map_copies = true;
        call.on_log(&mut h);
        assert!(malformed(&h.published));
    }

    #[test]
    fn a_refused_body_read_stays_malformed_when_the_body_is_dropped() {
        // The response turns out not to be gRPC (deferred headers say
        // text/plain), so its frame statistics are dropped; the refusal is not.
        let mut h = host("application/grpc", "text/plain");
        h.response_body = None;
        let records = whole_call(&mut h, false);
        assert_eq!(decoded(&records[0])[wire::RESP_MESSAGES], 0, "{records:?}");
        assert!(malformed(&records));
    }

    #[test]
    fn a_refused_clock_omits_durations_and_is_not_malformed() {
        let mut h = host("application/grpc", "application/grpc");
        h.now = None;
        let records = whole_call(&mut h, true);
        assert!(!malformed(&records));
        for key in [wire::TTFB_US, wire::DURATION_US, wire::REQ_DURATION_US] {
            assert!(!decoded(&records[0]).contains_key(key), "{records:?}");
        }
    }

    #[test]
    fn a_refused_publication_is_attempted_once() {
        let mut h = host("application/grpc", "application/grpc");
        h.refuse.publication = true;
        assert!(whole_call(&mut h, true).is_empty());
        assert_eq!(h.calls.publications, 1);
    }
}
