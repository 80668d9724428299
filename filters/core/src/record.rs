//! The per-call state machine and the record it publishes.
//!
//! The adapter feeds a [`Call`] with what the host reports (header maps,
//! body chunk sizes, body bytes through a [`BodySource`], the clock) and,
//! once the response is complete (or in the log phase for aborted streams),
//! publishes the [`Record`]: one compact JSON object ([`Record::write_json`])
//! as the single filter-state property [`PROPERTY_RECORD`].

use crate::base64::Base64Decoder;
use crate::classify::{accepts_protobuf, classify, Protocol};
use crate::config::{Fields, Options};
use crate::frame::{parse_status, FrameParser, FrameStats, GrpcTrailer};
use crate::json::{cut_utf8, ObjectWriter};
use crate::opmap::{strip_query, OpMap, Streaming, UNKNOWN_OPERATION};
use crate::percent::decode_grpc_message;
use std::rc::Rc;

/// Most bytes fetched from the host per body read. Bounds the memory one
/// read costs regardless of chunk size; message payloads beyond a window
/// are skipped without being read.
pub const DEFAULT_READ_WINDOW: usize = 16 * 1024;

/// The first read of binary frames fetches this much: a whole small unary
/// message, or the prefix of a large one without copying 16 KiB of payload
/// the parser would only skip.
const FIRST_BINARY_READ: usize = 256;

/// Most bytes of `url.path` published (UTF-8, before JSON escaping): enough
/// to tell which unknown paths were hit, bounded whatever a client sends.
pub const URL_PATH_MAX_BYTES: usize = 128;

/// The one filter-state property published per call (Envoy prefixes it
/// with `wasm.`): one host call, and one object for the access log and the
/// span to carry.
pub const PROPERTY_RECORD: &str = "wirelens.record";

/// The keys of the `wirelens.record` JSON object.
pub mod keys {
    pub const PROTOCOL: &str = "wirelens.protocol";
    pub const OPERATION: &str = "wirelens.operation";
    pub const RPC_SERVICE: &str = "rpc.service";
    pub const RPC_METHOD: &str = "rpc.method";
    pub const STREAMING: &str = "wirelens.streaming";
    pub const ROUTE: &str = "http.route";
    pub const URL_PATH: &str = "url.path";
    pub const GRPC_STATUS: &str = "rpc.grpc.status_code";
    pub const GRPC_MESSAGE: &str = "wirelens.grpc.message";
    pub const REQ_HEADER_SIZE: &str = "wirelens.request.header.size";
    pub const RESP_HEADER_SIZE: &str = "wirelens.response.header.size";
    pub const RESP_TRAILER_SIZE: &str = "wirelens.response.trailer.size";
    pub const REQ_BODY_SIZE: &str = "http.request.body.size";
    pub const RESP_BODY_SIZE: &str = "http.response.body.size";
    pub const REQ_MESSAGES: &str = "wirelens.request.messages";
    pub const RESP_MESSAGES: &str = "wirelens.response.messages";
    pub const REQ_MESSAGE_BYTES: &str = "wirelens.request.message.bytes";
    pub const REQ_MESSAGE_MIN: &str = "wirelens.request.message.min";
    pub const REQ_MESSAGE_MAX: &str = "wirelens.request.message.max";
    pub const RESP_MESSAGE_BYTES: &str = "wirelens.response.message.bytes";
    pub const RESP_MESSAGE_MIN: &str = "wirelens.response.message.min";
    pub const RESP_MESSAGE_MAX: &str = "wirelens.response.message.max";
    pub const REQ_FRAMING_BYTES: &str = "wirelens.request.framing.bytes";
    pub const RESP_FRAMING_BYTES: &str = "wirelens.response.framing.bytes";
    pub const REQ_COMPRESSED: &str = "wirelens.request.compressed_messages";
    pub const RESP_COMPRESSED: &str = "wirelens.response.compressed_messages";
    pub const TTFB_US: &str = "wirelens.time_to_first_byte_us";
    pub const DURATION_US: &str = "wirelens.duration_us";
    pub const REQ_DURATION_US: &str = "wirelens.request.duration_us";
    pub const MALFORMED: &str = "wirelens.malformed";
    pub const SAMPLE_RATE: &str = "wirelens.sample_rate";
}

/// The short names the record is published under (`Record::write_json`),
/// one per entry of [`keys`]. Envoy pays for every byte of the record it
/// exports (the access-log line, the span tag): the attribute names were
/// two thirds of it (`docs/performance.md`). The Collector maps them back
/// (collector/config.yaml, `transform/wirelens_record`).
pub mod wire {
    pub const PROTOCOL: &str = "pr";
    pub const OPERATION: &str = "op";
    pub const RPC_SERVICE: &str = "sv";
    pub const RPC_METHOD: &str = "md";
    pub const STREAMING: &str = "sg";
    pub const ROUTE: &str = "rt";
    pub const URL_PATH: &str = "up";
    pub const GRPC_STATUS: &str = "gs";
    pub const GRPC_MESSAGE: &str = "gm";
    pub const REQ_HEADER_SIZE: &str = "qh";
    pub const RESP_HEADER_SIZE: &str = "sh";
    pub const RESP_TRAILER_SIZE: &str = "tr";
    pub const REQ_BODY_SIZE: &str = "qb";
    pub const RESP_BODY_SIZE: &str = "sb";
    pub const REQ_MESSAGES: &str = "qm";
    pub const RESP_MESSAGES: &str = "sm";
    pub const REQ_MESSAGE_BYTES: &str = "qmb";
    pub const REQ_MESSAGE_MIN: &str = "qmn";
    pub const REQ_MESSAGE_MAX: &str = "qmx";
    pub const RESP_MESSAGE_BYTES: &str = "smb";
    pub const RESP_MESSAGE_MIN: &str = "smn";
    pub const RESP_MESSAGE_MAX: &str = "smx";
    pub const REQ_FRAMING_BYTES: &str = "qf";
    pub const RESP_FRAMING_BYTES: &str = "sf";
    pub const REQ_COMPRESSED: &str = "qc";
    pub const RESP_COMPRESSED: &str = "sc";
    pub const TTFB_US: &str = "tt";
    pub const DURATION_US: &str = "du";
    pub const REQ_DURATION_US: &str = "qd";
    pub const MALFORMED: &str = "mf";
    pub const SAMPLE_RATE: &str = "sr";
}

/// Every key the record can hold, in the fixed order they appear in (keys
/// with an unknown value are omitted).
pub const KEYS: [&str; 31] = [
    keys::PROTOCOL,
    keys::OPERATION,
    keys::RPC_SERVICE,
    keys::RPC_METHOD,
    keys::STREAMING,
    keys::ROUTE,
    keys::URL_PATH,
    keys::GRPC_STATUS,
    keys::GRPC_MESSAGE,
    keys::REQ_HEADER_SIZE,
    keys::RESP_HEADER_SIZE,
    keys::RESP_TRAILER_SIZE,
    keys::REQ_BODY_SIZE,
    keys::RESP_BODY_SIZE,
    keys::REQ_MESSAGES,
    keys::RESP_MESSAGES,
    keys::REQ_MESSAGE_BYTES,
    keys::REQ_MESSAGE_MIN,
    keys::REQ_MESSAGE_MAX,
    keys::RESP_MESSAGE_BYTES,
    keys::RESP_MESSAGE_MIN,
    keys::RESP_MESSAGE_MAX,
    keys::REQ_FRAMING_BYTES,
    keys::RESP_FRAMING_BYTES,
    keys::REQ_COMPRESSED,
    keys::RESP_COMPRESSED,
    keys::TTFB_US,
    keys::DURATION_US,
    keys::REQ_DURATION_US,
    keys::MALFORMED,
    keys::SAMPLE_RATE,
];

/// [`KEYS`] as published: `WIRE_KEYS[i]` is the short name of `KEYS[i]`.
pub const WIRE_KEYS: [&str; 31] = [
    wire::PROTOCOL,
    wire::OPERATION,
    wire::RPC_SERVICE,
    wire::RPC_METHOD,
    wire::STREAMING,
    wire::ROUTE,
    wire::URL_PATH,
    wire::GRPC_STATUS,
    wire::GRPC_MESSAGE,
    wire::REQ_HEADER_SIZE,
    wire::RESP_HEADER_SIZE,
    wire::RESP_TRAILER_SIZE,
    wire::REQ_BODY_SIZE,
    wire::RESP_BODY_SIZE,
    wire::REQ_MESSAGES,
    wire::RESP_MESSAGES,
    wire::REQ_MESSAGE_BYTES,
    wire::REQ_MESSAGE_MIN,
    wire::REQ_MESSAGE_MAX,
    wire::RESP_MESSAGE_BYTES,
    wire::RESP_MESSAGE_MIN,
    wire::RESP_MESSAGE_MAX,
    wire::REQ_FRAMING_BYTES,
    wire::RESP_FRAMING_BYTES,
    wire::REQ_COMPRESSED,
    wire::RESP_COMPRESSED,
    wire::TTFB_US,
    wire::DURATION_US,
    wire::REQ_DURATION_US,
    wire::MALFORMED,
    wire::SAMPLE_RATE,
];

/// The attribute name of a published short name.
pub fn attribute_name(wire: &str) -> Option<&'static str> {
    WIRE_KEYS.iter().position(|w| *w == wire).map(|i| KEYS[i])
}

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
        Protocol::Rest | Protocol::RestProto | Protocol::RestTranscoded => BodyMode::Ignore,
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
    /// Size of the next binary read: small after a read that ended in a
    /// payload larger than itself (only the next prefix is needed), else
    /// doubled (fewer host calls for streams of small messages).
    binary_read: usize,
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
            binary_read: FIRST_BINARY_READ,
        }
    }

    fn wants_bytes(&self) -> bool {
        self.mode != BodyMode::Ignore && !self.read_failed && !self.ended
    }

    /// Counts a chunk and feeds its bytes to the parser (the caller ends the
    /// direction on end of stream).
    fn on_body<S: BodySource>(&mut self, size: usize, src: &mut S, window: usize) {
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
                let want = match self.mode {
                    BodyMode::Binary => self.binary_read.min(window),
                    _ => window,
                }
                .min(size - off);
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
                    BodyMode::Binary => {
                        self.frames.feed(bytes);
                        self.binary_read = if self.frames.skippable() > self.binary_read as u64 {
                            FIRST_BINARY_READ
                        } else {
                            self.binary_read.saturating_mul(2)
                        };
                    }
                    BodyMode::Text => {
                        let frames = &mut self.frames;
                        self.b64.decode(bytes, |d| frames.feed(d));
                    }
                    BodyMode::Ignore => {}
                }
                off += bytes.len();
            }
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

    fn malformed(&self) -> bool {
        self.frames.is_malformed() || self.b64.is_malformed() || self.read_failed
    }
}

#[derive(Clone, Debug)]
enum Resolved {
    /// Request headers not seen yet.
    None,
    /// Operation from the map; for REST also the matched rule.
    Known { op: usize, rule: Option<usize> },
    /// A call the map does not know: its path, bounded ([`url_path`]).
    Unknown { path: String },
}

/// `url.path` of an unknown call: the request path without query string or
/// fragment, invalid UTF-8 replaced by U+FFFD, cut to at most
/// [`URL_PATH_MAX_BYTES`] on a character boundary. Only a bounded head of
/// `path` is looked at, whatever its length.
pub fn url_path(path: &[u8]) -> String {
    let path = strip_query(path);
    // Every input byte yields at least one output byte, so the kept prefix
    // comes from the first URL_PATH_MAX_BYTES input bytes; 3 more let a
    // character straddling the cut decode whole (and be dropped) rather
    // than turn into U+FFFD.
    let head = &path[..path.len().min(URL_PATH_MAX_BYTES + 3)];
    cut_utf8(&String::from_utf8_lossy(head), URL_PATH_MAX_BYTES).to_string()
}

/// State of one HTTP stream.
#[derive(Clone, Debug)]
pub struct Call {
    map: Rc<OpMap>,
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
    response_headers_seen: bool,
    /// gRPC response headers known only by their size (trailers were
    /// expected): their entries are read only if the response ends without
    /// trailers ([`Call::response_headers_deferred`]).
    response_headers_deferred: bool,
    response_complete: bool,
    published: bool,
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

impl Call {
    pub fn new(map: Rc<OpMap>) -> Self {
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
            response_headers_seen: false,
            response_headers_deferred: false,
            response_complete: false,
            published: false,
        }
    }

    /// Sets the maximum bytes per body read (at least 1).
    pub fn with_read_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    /// Sets the publishing options (default: [`Options::default`]).
    pub fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    pub fn options(&self) -> &Options {
        &self.options
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
        let mut accept: &[u8] = b"";
        let mut path: &[u8] = b"";
        let mut method: &[u8] = b"";
        self.req_header_bytes = header_sum(headers, |n, v| {
            if n.eq_ignore_ascii_case(b"content-type") {
                content_type = Some(v);
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
        if end_of_stream {
            self.end_request(|| now_ns);
        }
    }

    /// The request stream ended (first time only): frames end, time noted.
    fn end_request(&mut self, now: impl FnOnce() -> Option<u64>) {
        if self.req.ended {
            return;
        }
        self.req.end();
        self.req_end_ns = now();
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

    /// True when the adapter should hand request body bytes over (gRPC family).
    pub fn wants_request_body(&self) -> bool {
        self.req.wants_bytes()
    }

    /// True when the adapter should hand response body bytes over.
    pub fn wants_response_body(&self) -> bool {
        self.response_headers_seen && self.resp.wants_bytes()
    }

    /// A request body chunk of `size` bytes (as the host reports it).
    /// `now` is only called when this ends the request (`end_of_stream`).
    pub fn on_request_body<S: BodySource>(
        &mut self,
        size: usize,
        end_of_stream: bool,
        src: &mut S,
        now: impl FnOnce() -> Option<u64>,
    ) {
        self.req.on_body(size, src, self.window);
        if end_of_stream {
            self.end_request(now);
        }
    }

    /// Request trailers arrived: the request stream ended. `now` is only
    /// called when the request had not ended already.
    pub fn on_request_trailers(&mut self, now: impl FnOnce() -> Option<u64>) {
        self.end_request(now);
    }

    /// True once the request ended (headers or body with end of stream, or trailers).
    pub fn request_complete(&self) -> bool {
        self.req.ended
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
        if self.response_complete {
            return false;
        }
        self.resp.end();
        self.absorb_trailer_frame();
        self.response_complete = true;
        self.end_ns = now();
        true
    }

    /// Whether the response headers' entries are needed, or only their byte
    /// size ([`Call::on_response_header_size`]), which a host can report
    /// without copying the map (Envoy: `proxy_get_header_map_size`).
    ///
    /// - REST: the size only.
    /// - Transcoded REST: entries (`grpc-status`).
    /// - gRPC-Web, both modes: entries (the content type decides how the
    ///   body is read; the trailers travel inside it).
    /// - gRPC: entries only for a trailers-only response (headers with end
    ///   of stream, carrying `grpc-status`). Otherwise trailers are due: the
    ///   body is read as gRPC frames, the trailers confirm that it was gRPC,
    ///   and only a response that ends without them needs its header entries
    ///   after all ([`Call::response_headers_deferred`]).
    pub fn response_headers_need_entries(&self, end_of_stream: bool) -> bool {
        match self.protocol {
            Some(Protocol::Grpc) => end_of_stream,
            Some(p) => p.is_grpc_family() || p == Protocol::RestTranscoded,
            None => false,
        }
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
        let bytes = self.absorb_response_map(headers, true);
        self.response_headers_arrived(bytes, end_of_stream, now)
    }

    /// Response headers arrived, known only by their byte size (the sum of
    /// name and value lengths) because their entries are not needed
    /// ([`Call::response_headers_need_entries`] is false). Returns true when
    /// this completes the response.
    pub fn on_response_header_size(
        &mut self,
        bytes: u64,
        end_of_stream: bool,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if self.response_headers_seen {
            return false;
        }
        if self.protocol == Some(Protocol::Grpc) && !end_of_stream {
            self.resp.mode = mode_for(Protocol::Grpc);
            self.response_headers_deferred = true;
        } else {
            self.resp.mode = BodyMode::Ignore;
        }
        self.response_headers_arrived(bytes, end_of_stream, now)
    }

    fn response_headers_arrived(
        &mut self,
        bytes: u64,
        end_of_stream: bool,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        self.resp_header_bytes = bytes;
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
        self.resp.on_body(size, src, self.window);
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
        if !self.trailers_arrived() {
            return false;
        }
        self.resp_trailer_bytes = self.absorb_response_map(trailers, false);
        self.complete(now)
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
        self.protocol != Some(Protocol::Grpc)
            || (self.options.fields.contains(Fields::GRPC_MESSAGE)
                && self.options.grpc_message_max_bytes > 0
                && bytes > STATUS_WITHOUT_MESSAGE_MAX_BYTES)
    }

    /// Response trailers arrived, known only by their byte size because
    /// their entries are not needed ([`Call::response_trailers_need_entries`]
    /// is false). Returns true when this completes the response.
    pub fn on_response_trailer_size(
        &mut self,
        bytes: u64,
        now: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if !self.trailers_arrived() {
            return false;
        }
        self.resp_trailer_bytes = bytes;
        self.complete(now)
    }

    /// What any trailers mean for the body: its frames end where they
    /// begin, and they make it a gRPC response, so deferred header entries
    /// are not needed. False when the response had already ended.
    fn trailers_arrived(&mut self) -> bool {
        if self.response_complete {
            return false;
        }
        self.response_headers_deferred = false;
        self.resp.end();
        self.absorb_trailer_frame();
        true
    }

    /// True when the record needs the response header entries that
    /// [`Call::on_response_header_size`] deferred: a gRPC response that
    /// ended (or was cut off) without trailers. Pass them to
    /// [`Call::on_deferred_response_headers`] before publishing.
    pub fn response_headers_deferred(&self) -> bool {
        self.response_headers_deferred
    }

    /// The deferred response header entries. They can carry `grpc-status`
    /// and `grpc-message`; and if their content type is not gRPC (an error
    /// page), the body was not gRPC after all: its frame statistics are
    /// dropped, as if it had been ignored from the start.
    pub fn on_deferred_response_headers<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        if !self.response_headers_deferred {
            return;
        }
        self.response_headers_deferred = false;
        self.absorb_response_map(headers, true);
        if self.resp.mode == BodyMode::Ignore {
            self.resp = Direction {
                body_bytes: self.resp.body_bytes,
                ended: true,
                ..Direction::new()
            };
        }
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
        let (operation, rpc_service, rpc_method, streaming, route, url_path) = match &self.resolved
        {
            Resolved::None => ("", "", "", None, "", ""),
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
                        "",
                    ),
                    None => ("", "", "", None, "", ""),
                }
            }
            Resolved::Unknown { path } => (UNKNOWN_OPERATION, "", "", None, "", path.as_str()),
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
        }
    }
}

/// Frame statistics of both directions (gRPC family only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    /// The request body, as the client sent it (decoded for grpc-web-text).
    pub request: FrameStats,
    /// The response body, as the client receives it.
    pub response: FrameStats,
}

/// The per-call record (see README for the definition of every key).
/// Holds every value; [`Record::write_json`] applies `fields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub protocol: Option<Protocol>,
    pub operation: &'a str,
    pub rpc_service: &'a str,
    pub rpc_method: &'a str,
    pub streaming: Option<Streaming>,
    pub route: &'a str,
    /// Only for calls the map does not know ([`url_path`]).
    pub url_path: &'a str,
    pub grpc_status: Option<u32>,
    pub grpc_message: &'a str,
    pub req_header_bytes: u64,
    pub resp_header_bytes: u64,
    pub resp_trailer_bytes: u64,
    pub req_body_bytes: u64,
    pub resp_body_bytes: u64,
    /// `None` outside the gRPC family.
    pub frames: Option<Frames>,
    pub ttfb_us: Option<u64>,
    pub duration_us: Option<u64>,
    pub request_duration_us: Option<u64>,
    pub malformed: bool,
    /// Optional key groups to publish.
    pub fields: Fields,
    /// JSON text of the configured sample rate, when below 1.
    pub sample_rate: Option<&'a str>,
}

impl Record<'_> {
    /// The record as a compact JSON object (keys in [`KEYS`] order, unknown
    /// values and disabled groups omitted), replacing the contents of `out`
    /// (reuse one buffer and publishing does not allocate once it has grown).
    pub fn write_json(&self, out: &mut String) {
        self.write_json_named(out, true);
    }

    /// The record as JSON, under the short names it is published with
    /// (`short`, [`wire`]) or under its attribute names ([`keys`]).
    pub fn write_json_named(&self, out: &mut String, short: bool) {
        let n = |attribute: &'static str, wire: &'static str| if short { wire } else { attribute };
        out.clear();
        let mut w = ObjectWriter::new(out);
        let text = |w: &mut ObjectWriter, k: &str, v: &str| {
            if !v.is_empty() {
                w.string(k, v);
            }
        };
        if let Some(p) = self.protocol {
            w.string(n(keys::PROTOCOL, wire::PROTOCOL), p.as_str());
        }
        text(&mut w, n(keys::OPERATION, wire::OPERATION), self.operation);
        text(
            &mut w,
            n(keys::RPC_SERVICE, wire::RPC_SERVICE),
            self.rpc_service,
        );
        text(
            &mut w,
            n(keys::RPC_METHOD, wire::RPC_METHOD),
            self.rpc_method,
        );
        if let Some(s) = self.streaming {
            w.string(n(keys::STREAMING, wire::STREAMING), s.as_str());
        }
        text(&mut w, n(keys::ROUTE, wire::ROUTE), self.route);
        text(&mut w, n(keys::URL_PATH, wire::URL_PATH), self.url_path);
        if let Some(code) = self.grpc_status {
            w.number(n(keys::GRPC_STATUS, wire::GRPC_STATUS), code as u64);
        }
        if self.fields.contains(Fields::GRPC_MESSAGE) {
            text(
                &mut w,
                n(keys::GRPC_MESSAGE, wire::GRPC_MESSAGE),
                self.grpc_message,
            );
        }
        w.number(
            n(keys::REQ_HEADER_SIZE, wire::REQ_HEADER_SIZE),
            self.req_header_bytes,
        );
        w.number(
            n(keys::RESP_HEADER_SIZE, wire::RESP_HEADER_SIZE),
            self.resp_header_bytes,
        );
        w.number(
            n(keys::RESP_TRAILER_SIZE, wire::RESP_TRAILER_SIZE),
            self.resp_trailer_bytes,
        );
        w.number(
            n(keys::REQ_BODY_SIZE, wire::REQ_BODY_SIZE),
            self.req_body_bytes,
        );
        w.number(
            n(keys::RESP_BODY_SIZE, wire::RESP_BODY_SIZE),
            self.resp_body_bytes,
        );
        if let Some(Frames { request, response }) = &self.frames {
            w.number(n(keys::REQ_MESSAGES, wire::REQ_MESSAGES), request.messages);
            w.number(
                n(keys::RESP_MESSAGES, wire::RESP_MESSAGES),
                response.messages,
            );
            if self.fields.contains(Fields::MESSAGE_SIZES) {
                let sizes = [
                    (
                        request,
                        [
                            n(keys::REQ_MESSAGE_BYTES, wire::REQ_MESSAGE_BYTES),
                            n(keys::REQ_MESSAGE_MIN, wire::REQ_MESSAGE_MIN),
                            n(keys::REQ_MESSAGE_MAX, wire::REQ_MESSAGE_MAX),
                        ],
                    ),
                    (
                        response,
                        [
                            n(keys::RESP_MESSAGE_BYTES, wire::RESP_MESSAGE_BYTES),
                            n(keys::RESP_MESSAGE_MIN, wire::RESP_MESSAGE_MIN),
                            n(keys::RESP_MESSAGE_MAX, wire::RESP_MESSAGE_MAX),
                        ],
                    ),
                ];
                for (st, [bytes, min, max]) in sizes {
                    w.number(bytes, st.message_bytes);
                    if st.messages > 0 {
                        w.number(min, st.message_min as u64);
                        w.number(max, st.message_max as u64);
                    }
                }
            }
            if self.fields.contains(Fields::FRAMING) {
                w.number(
                    n(keys::REQ_FRAMING_BYTES, wire::REQ_FRAMING_BYTES),
                    request.framing_bytes,
                );
                w.number(
                    n(keys::RESP_FRAMING_BYTES, wire::RESP_FRAMING_BYTES),
                    response.framing_bytes,
                );
            }
            if self.fields.contains(Fields::COMPRESSION) {
                w.number(
                    n(keys::REQ_COMPRESSED, wire::REQ_COMPRESSED),
                    request.compressed_messages,
                );
                w.number(
                    n(keys::RESP_COMPRESSED, wire::RESP_COMPRESSED),
                    response.compressed_messages,
                );
            }
        }
        if let Some(t) = self.ttfb_us {
            w.number(n(keys::TTFB_US, wire::TTFB_US), t);
        }
        if let Some(t) = self.duration_us {
            w.number(n(keys::DURATION_US, wire::DURATION_US), t);
        }
        if let Some(t) = self.request_duration_us {
            if self.fields.contains(Fields::REQUEST_DURATION) {
                w.number(n(keys::REQ_DURATION_US, wire::REQ_DURATION_US), t);
            }
        }
        w.number(n(keys::MALFORMED, wire::MALFORMED), self.malformed as u64);
        if let Some(rate) = self.sample_rate {
            w.raw(n(keys::SAMPLE_RATE, wire::SAMPLE_RATE), rate);
        }
        w.finish();
    }

    /// The record as a new JSON string under its attribute names, as the
    /// Collector expands it (tests, harnesses).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(512);
        self.write_json_named(&mut s, false);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique() {
        let mut ks = KEYS.to_vec();
        ks.sort_unstable();
        ks.dedup();
        assert_eq!(ks.len(), KEYS.len());
    }

    #[test]
    fn url_path_is_bounded() {
        assert_eq!(url_path(b"/v1/x?token=secret#frag"), "/v1/x");
        assert_eq!(url_path(b"/a\xffb"), "/a\u{FFFD}b");
        assert_eq!(url_path(b""), "");
        let long = vec![b'a'; 8192];
        assert_eq!(url_path(&long), "a".repeat(URL_PATH_MAX_BYTES));
        // A 3-byte character straddling byte 128 is dropped whole.
        let mut path = b"/".repeat(URL_PATH_MAX_BYTES - 1);
        path.extend_from_slice("€€".as_bytes());
        assert_eq!(url_path(&path), "/".repeat(URL_PATH_MAX_BYTES - 1));
        // Replacement characters (3 bytes each) count against the cut too.
        let u = url_path(&[0xff; 200]);
        assert_eq!(u, "\u{FFFD}".repeat(URL_PATH_MAX_BYTES / 3));
    }

    #[test]
    fn empty_call_record() {
        let call = Call::new(Rc::new(OpMap::empty()));
        assert_eq!(
            call.record(None).to_json(),
            r#"{"wirelens.request.header.size":0,"wirelens.response.header.size":0,"wirelens.response.trailer.size":0,"http.request.body.size":0,"http.response.body.size":0,"wirelens.malformed":0}"#
        );
    }
}
