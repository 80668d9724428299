//! One call through `wirelens_core::Call` in any callback order, against a
//! `MemoryHost` that may refuse host calls: phases missing, repeated or out
//! of order (response before the request ends, no request headers, `on_log`
//! without a response, trailers without a body, a second end of stream),
//! as a host in trouble or a future Envoy might drive the filter. The
//! `call` target (`call.rs`) keeps Envoy's order; this one keeps only the
//! record honest.
//!
//! Shared by the `call_sequence` fuzz target and the native test that
//! replays its corpus (`filters/core/tests/fuzz_corpus.rs`), through `#[path]`.
//!
//! Input: `[flags] [refusals] [window] [script] [5 sections] [chunk control
//! bytes...]`. `script` and the sections are each a u32 little-endian length
//! and that many bytes (a truncated one is taken as far as it goes); the
//! sections are, in order: request header map, request body, response
//! header map, response body, response trailer map (header maps in the
//! proxy-wasm serialized format).
//!
//! `flags`: bit 0 the plugin has `rest_transcoded`. `refusals`: bit 0 no
//! request header map, bit 1 no response header map, bit 2 no response
//! trailer map (each refused for copies and sizes), bit 3 every map copy
//! refused, bit 4 every map size refused, bit 5 every body read refused,
//! bit 6 the clock refused, bit 7 the publication refused. `window`: the
//! read window is `(window + 1) * 8` bytes.
//!
//! Script: one callback per byte (at most [`MAX_STEPS`]), `byte & 7` mod 7
//! picks it, bit 3 is its end of stream: 0 request headers, 1 request body,
//! 2 request trailers, 3 response headers, 4 response body, 5 response
//! trailers, 6 `on_log`. A body callback delivers what is left of that
//! body (an empty chunk when nothing is), in pieces of `c + 1` bytes
//! (control bytes cycled), the end of stream on the last piece. After the
//! script, `on_log` as Envoy always ends a stream.
//!
//! Checks ([`check`]):
//! - never panics;
//! - a call whose request headers arrived attempts exactly one publication
//!   (none otherwise), and the host keeps it unless it refused it;
//! - the record's `qb`/`sb` are the body bytes delivered before it was
//!   published; `mf` is 0 or 1, and 1 when the host refused a header map,
//!   a size or a body read before publishing;
//! - frame keys only for the gRPC family, and then per direction (request
//!   `q…`, response `s…`): compressed ≤ messages; min/max present exactly
//!   when there are messages, min ≤ max, messages × min ≤ message bytes ≤
//!   messages × max, none without messages; framing ≥ 5 × messages
//!   (each message has its 5-byte prefix); message bytes + framing ≤ body
//!   bytes;
//! - bytes = framing + payload: when the record is not malformed and a
//!   direction was read in full (its headers first, all its bytes before its
//!   end, its end before publication), message bytes + framing = body bytes
//!   for binary frames (`grpc`, `grpc-web`), = the base64-decoded length for
//!   `grpc-web-text`, and 0 for a response that was not read (a non-gRPC
//!   `content-type`);
//! - the record is the same when each body arrives as one chunk read with
//!   the default window.
//!
//! And against the checker's own oracles (`oracles.rs`: base64 decoder,
//! header-map reader, classifier, frame walker written from the documents,
//! no product code), so a bug the product's own decoder, reader or
//! classifier has cannot hide:
//! - the protocol is the one the request `content-type` (and `accept`)
//!   documents;
//! - with no refusal, per direction read whole (or with no bytes): its
//!   frame statistics are exactly the oracles' walk of the bytes
//!   delivered (decoded by the oracle's base64 for `grpc-web-text`), its
//!   complete frames only when it ends inside a frame, and then the record
//!   is malformed; bad base64 or a trailer block that does not parse makes
//!   it malformed; when both directions are valid (or not read) and every
//!   `grpc-status` header is a number, the record is not malformed.

#[path = "oracles.rs"]
mod oracles;

use super::common::{number, operation_map, pieces, protocol_text, section};
use oracles::{Frames, Verdict};
use wirelens_core::body::DEFAULT_READ_WINDOW;
use wirelens_core::names::wire;
use wirelens_core::{Call, MemoryHost, Options, Refusals};

pub const REST_TRANSCODED: u8 = 1;

pub const NO_REQUEST_HEADERS: u8 = 1;
pub const NO_RESPONSE_HEADERS: u8 = 2;
pub const NO_RESPONSE_TRAILERS: u8 = 4;
pub const REFUSE_MAP_COPIES: u8 = 8;
pub const REFUSE_MAP_SIZES: u8 = 16;
pub const REFUSE_BODY_READS: u8 = 32;
pub const REFUSE_CLOCK: u8 = 64;
pub const REFUSE_PUBLICATION: u8 = 128;

pub const REQUEST_HEADERS: u8 = 0;
pub const REQUEST_BODY: u8 = 1;
pub const REQUEST_TRAILERS: u8 = 2;
pub const RESPONSE_HEADERS: u8 = 3;
pub const RESPONSE_BODY: u8 = 4;
pub const RESPONSE_TRAILERS: u8 = 5;
pub const LOG: u8 = 6;
pub const END_OF_STREAM: u8 = 8;

/// Longest script run: enough for every phase several times over.
pub const MAX_STEPS: usize = 64;

pub struct Input<'a> {
    pub flags: u8,
    pub refusals: u8,
    pub window: usize,
    pub script: &'a [u8],
    pub request_headers: &'a [u8],
    pub request_body: &'a [u8],
    pub response_headers: &'a [u8],
    pub response_body: &'a [u8],
    pub response_trailers: &'a [u8],
    pub chunks: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let [flags, refusals, window, rest @ ..] = data else {
            return None;
        };
        let mut data = rest;
        let script = section(&mut data);
        Some(Input {
            flags: *flags,
            refusals: *refusals,
            window: (*window as usize + 1) * 8,
            script: &script[..script.len().min(MAX_STEPS)],
            request_headers: section(&mut data),
            request_body: section(&mut data),
            response_headers: section(&mut data),
            response_body: section(&mut data),
            response_trailers: section(&mut data),
            chunks: data,
        })
    }

    fn refuses(&self, bit: u8) -> bool {
        self.refusals & bit != 0
    }
}

/// What one direction went through, as the driver delivered it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Its headers arrived (the request's or the response's first).
    pub headers: bool,
    /// Body bytes delivered.
    pub bytes: u64,
    /// Bytes arrived before its headers or after its end: not all of the
    /// body was read as one stream.
    pub stray_bytes: bool,
    pub ended: bool,
    /// The response ended with trailers (native gRPC then keeps reading
    /// its body as frames whatever its `content-type`).
    pub trailers_ended: bool,
}

impl Seen {
    fn body(&mut self, size: usize) {
        self.bytes += size as u64;
        self.stray_bytes |= size > 0 && (!self.headers || self.ended);
    }
}

/// One run: what was published and what the driver delivered up to then.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub published: Vec<String>,
    pub attempts: usize,
    pub request_headers_delivered: bool,
    /// At the publication (if any): both directions and the host's
    /// refused reads so far.
    pub request: Seen,
    pub response: Seen,
    pub refused_reads: usize,
}

// A fixed clock per callback kind: both runs of a check read the same times.
fn clock(step: u8) -> u64 {
    (u64::from(step) + 1) * 1_000_000
}

/// Runs the script with the given body window and chunking.
pub fn run(input: &Input, window: usize, chunks: &[u8]) -> Outcome {
    let options = Options::default().with_rest_transcoded(input.flags & REST_TRANSCODED != 0);
    let mut call = Call::new(operation_map())
        .with_read_window(window)
        .with_options(options);
    let map = |bytes: &[u8], refused: u8| (!input.refuses(refused)).then(|| bytes.to_vec());
    let mut host = MemoryHost {
        request_headers: map(input.request_headers, NO_REQUEST_HEADERS),
        response_headers: map(input.response_headers, NO_RESPONSE_HEADERS),
        response_trailers: map(input.response_trailers, NO_RESPONSE_TRAILERS),
        refuse: Refusals {
            map_copies: input.refuses(REFUSE_MAP_COPIES),
            map_sizes: input.refuses(REFUSE_MAP_SIZES),
            body_reads: input.refuses(REFUSE_BODY_READS),
            publication: input.refuses(REFUSE_PUBLICATION),
        },
        ..MemoryHost::default()
    };
    let mut request = Seen::default();
    let mut response = Seen::default();
    let mut request_left = input.request_body;
    let mut response_left = input.response_body;
    let mut response_headers_seen = false;
    let mut at_publication = None;

    let log = [LOG];
    for &byte in input.script.iter().chain(&log) {
        let step = (byte & 7) % 7;
        let end = byte & END_OF_STREAM != 0;
        host.now = (!input.refuses(REFUSE_CLOCK)).then(|| clock(step));
        match step {
            REQUEST_HEADERS => {
                // Only the first request headers count (and may end the request).
                if !request.headers {
                    request.headers = true;
                    request.ended |= end;
                }
                call.on_request_headers(&mut host, end);
            }
            REQUEST_BODY => {
                let body = pieces(std::mem::take(&mut request_left), chunks);
                for (i, piece) in body.iter().enumerate() {
                    let last = end && i + 1 == body.len();
                    host.request_body = Some(piece.to_vec());
                    request.body(piece.len());
                    request.ended |= last;
                    call.on_request_body(&mut host, piece.len(), last);
                }
            }
            REQUEST_TRAILERS => {
                request.ended = true;
                call.on_request_trailers(&mut host);
            }
            RESPONSE_HEADERS => {
                // Only the first response headers count; they decide how the
                // body is read only once the request's protocol is known and
                // while the response is open.
                if !response_headers_seen {
                    response_headers_seen = true;
                    response.headers = request.headers && !response.ended;
                    response.ended |= end;
                }
                call.on_response_headers(&mut host, end);
            }
            RESPONSE_BODY => {
                let body = pieces(std::mem::take(&mut response_left), chunks);
                for (i, piece) in body.iter().enumerate() {
                    let last = end && i + 1 == body.len();
                    host.response_body = Some(piece.to_vec());
                    response.body(piece.len());
                    response.ended |= last;
                    call.on_response_body(&mut host, piece.len(), last);
                }
            }
            RESPONSE_TRAILERS => {
                response.trailers_ended |= !response.ended;
                response.ended = true;
                call.on_response_trailers(&mut host);
            }
            _ => call.on_log(&mut host),
        }
        if at_publication.is_none() && host.calls.publications > 0 {
            at_publication = Some((request, response, host.calls.refused_reads));
        }
    }
    let (request, response, refused_reads) = at_publication.unwrap_or_default();
    Outcome {
        published: host.published,
        attempts: host.calls.publications,
        request_headers_delivered: input.script.iter().any(|b| (b & 7) % 7 == REQUEST_HEADERS),
        request,
        response,
        refused_reads,
    }
}

/// How a direction's body is read (README "How bodies are read").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Read {
    Binary,
    Text,
    Not,
    /// Read as binary frames, then dropped at publication (native gRPC
    /// answered with a non-gRPC `content-type` and no trailers).
    Dropped,
}

const GRPC_FAMILY: [&str; 3] = ["grpc", "grpc-web", "grpc-web-text"];

fn read_as(protocol: &str) -> Read {
    match protocol {
        "grpc" | "grpc-web" => Read::Binary,
        "grpc-web-text" => Read::Text,
        _ => Read::Not,
    }
}

/// A host's header map as the call sees it: empty when refused; `None`
/// when the oracle cannot say which pairs are seen.
fn pairs(input: &Input, map: &[u8], refused: u8) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if input.refuses(refused | REFUSE_MAP_COPIES) {
        Some(Vec::new())
    } else {
        oracles::header_pairs(map)
    }
}

/// How the response body is read (filters/README.md, "How bodies are
/// read"): as its `content-type` says, as the request when it has none,
/// not at all when it is not gRPC; native gRPC reads binary frames (and
/// drops them at publication for a non-gRPC type, unless trailers came).
/// `None` when the oracle cannot read the `content-type`.
fn response_read(input: &Input, request: &str, response: &Seen) -> Option<Read> {
    let map = pairs(input, input.response_headers, NO_RESPONSE_HEADERS)?;
    let by_type = match oracles::single(&map, "content-type")? {
        None => read_as(request),
        Some(ct) => match oracles::grpc_framing(ct) {
            Some(true) => Read::Text,
            Some(false) => Read::Binary,
            None => Read::Not,
        },
    };
    match (request, by_type) {
        ("grpc", Read::Not) if response.trailers_ended => Some(Read::Binary),
        ("grpc", Read::Not) => Some(Read::Dropped),
        ("grpc", Read::Text) => Some(Read::Binary),
        _ => Some(by_type),
    }
}

/// What the oracles expect of one direction of a gRPC-family call.
#[derive(Debug)]
enum Direction {
    /// Read whole and valid: these exact statistics, not malformed.
    Frames(Frames),
    /// Read whole, valid up to an end inside a frame: these exact
    /// statistics (of the complete frames), malformed.
    Partial(Frames),
    /// Nothing delivered, or not read: no statistics, not malformed.
    Nothing,
    /// Read, then its statistics dropped: none, malformed or not.
    Dropped,
    /// Read whole and broken (bad base64, a bad trailer block): malformed.
    Broken(&'static str),
    /// The oracles cannot say.
    Unknown,
}

/// The oracles' walk of the bytes delivered, read as `read` says.
fn walk(read: Read, body: &[u8], trailers_allowed: bool) -> Direction {
    let stream = match read {
        Read::Not => return Direction::Nothing,
        Read::Dropped => return Direction::Dropped,
        Read::Binary => body.to_vec(),
        Read::Text => match oracles::base64_decode(body) {
            Verdict::Valid(decoded) => decoded,
            Verdict::Invalid(why) => return Direction::Broken(why),
            Verdict::Unsure => return Direction::Unknown,
        },
    };
    match oracles::walk_frames(&stream, trailers_allowed) {
        Verdict::Valid(w) if w.ends_inside => Direction::Partial(w.frames),
        Verdict::Valid(w) => Direction::Frames(w.frames),
        Verdict::Invalid(why) => Direction::Broken(why),
        Verdict::Unsure => Direction::Unknown,
    }
}

/// A direction read in full: its headers first, all its bytes before its
/// end, its end before publication.
fn read_whole(seen: &Seen) -> bool {
    seen.headers && seen.ended && !seen.stray_bytes
}

/// Every `grpc-status` in the response header and trailer maps is one the
/// oracle accepts as a number (a non-numeric one is malformed only when
/// the map is read, not only sized: the oracle does not decide that).
fn statuses_numeric(input: &Input) -> bool {
    [
        (input.response_headers, NO_RESPONSE_HEADERS),
        (input.response_trailers, NO_RESPONSE_TRAILERS),
    ]
    .into_iter()
    .all(|(map, refused)| {
        pairs(input, map, refused).is_some_and(|pairs| {
            pairs.iter().all(|(n, v)| {
                !n.eq_ignore_ascii_case(b"grpc-status")
                    || oracles::status_ok(v) == Verdict::Valid(())
            })
        })
    })
}

/// Frame statistics of one direction: `[messages, compressed, message
/// bytes, min, max, framing]` short names.
fn check_frames(record: &str, keys: [&str; 6], body_bytes: u64) {
    let [messages, compressed, message_bytes, min, max, framing] = keys.map(|k| number(record, k));
    let messages = messages.expect("messages of a gRPC-family record");
    let message_bytes = message_bytes.expect("message bytes (all fields enabled)");
    let framing = framing.expect("framing bytes (all fields enabled)");
    assert!(
        compressed.expect("compressed messages") <= messages,
        "{record}"
    );
    if messages == 0 {
        assert_eq!((min, max, message_bytes), (None, None, 0), "{record}");
    } else {
        let (min, max) = (min.expect("min"), max.expect("max"));
        assert!(min <= max, "{record}");
        let (n, total) = (u128::from(messages), u128::from(message_bytes));
        assert!(
            n * u128::from(min) <= total && total <= n * u128::from(max),
            "{record}"
        );
    }
    assert!(framing >= 5 * messages, "{record}");
    assert!(message_bytes + framing <= body_bytes, "{record}");
}

/// Runs the input chunked as it says and whole; panics on a broken invariant.
pub fn check(data: &[u8]) {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let chunked = run(&input, input.window, input.chunks);
    let expected_attempts = usize::from(chunked.request_headers_delivered);
    assert_eq!(
        chunked.attempts, expected_attempts,
        "publications attempted"
    );
    let kept = if input.refuses(REFUSE_PUBLICATION) {
        0
    } else {
        expected_attempts
    };
    assert_eq!(chunked.published.len(), kept, "{:?}", chunked.published);

    if let [record] = &chunked.published[..] {
        check_record(&input, &chunked, record);
    }

    let whole = run(&input, DEFAULT_READ_WINDOW, &[]);
    assert_eq!(
        whole.published, chunked.published,
        "whole bodies vs chunked (window {})",
        input.window
    );
}

fn check_record(input: &Input, outcome: &Outcome, record: &str) {
    let Outcome {
        request, response, ..
    } = outcome;
    let protocol = protocol_text(record).unwrap_or_else(|| panic!("no protocol: {record}"));
    // The protocol the documents give the request headers the call saw.
    if let Some(map) = pairs(input, input.request_headers, NO_REQUEST_HEADERS) {
        if let (Some(ct), Some(accept)) = (
            oracles::single(&map, "content-type"),
            oracles::single(&map, "accept"),
        ) {
            let want = oracles::protocol(ct, accept, input.flags & REST_TRANSCODED != 0);
            assert_eq!(protocol, want, "protocol (oracle classifier): {record}");
        }
    }
    assert_eq!(
        number(record, wire::REQ_BODY_SIZE),
        Some(request.bytes),
        "{record}"
    );
    assert_eq!(
        number(record, wire::RESP_BODY_SIZE),
        Some(response.bytes),
        "{record}"
    );
    let malformed = number(record, wire::MALFORMED);
    assert!(matches!(malformed, Some(0 | 1)), "{record}");
    if outcome.refused_reads > 0 {
        assert_eq!(malformed, Some(1), "a refused read is flagged: {record}");
    }

    let grpc_family = GRPC_FAMILY.contains(&protocol);
    let has_frames = number(record, wire::REQ_MESSAGES).is_some();
    assert_eq!(has_frames, grpc_family, "{record}");
    if !has_frames {
        return;
    }
    const REQUEST_KEYS: [&str; 6] = [
        wire::REQ_MESSAGES,
        wire::REQ_COMPRESSED,
        wire::REQ_MESSAGE_BYTES,
        wire::REQ_MESSAGE_MIN,
        wire::REQ_MESSAGE_MAX,
        wire::REQ_FRAMING_BYTES,
    ];
    const RESPONSE_KEYS: [&str; 6] = [
        wire::RESP_MESSAGES,
        wire::RESP_COMPRESSED,
        wire::RESP_MESSAGE_BYTES,
        wire::RESP_MESSAGE_MIN,
        wire::RESP_MESSAGE_MAX,
        wire::RESP_FRAMING_BYTES,
    ];
    check_frames(record, REQUEST_KEYS, request.bytes);
    check_frames(record, RESPONSE_KEYS, response.bytes);

    // The oracles' expectation per direction, from the bytes delivered.
    let expect = |seen: &Seen, body: &[u8], read: Option<Read>, trailers_allowed: bool| {
        if seen.bytes == 0 {
            Direction::Nothing
        } else if !read_whole(seen) {
            Direction::Unknown
        } else {
            match read {
                None => Direction::Unknown,
                Some(read) => walk(read, &body[..seen.bytes as usize], trailers_allowed),
            }
        }
    };
    // Trailer frames are documented for gRPC-Web responses only.
    let req = expect(request, input.request_body, Some(read_as(protocol)), false);
    let resp = expect(
        response,
        input.response_body,
        response_read(input, protocol, response),
        protocol != "grpc",
    );
    // bytes = framing + payload (record.yaml `qf`), whatever was refused:
    // a direction read whole in a record that is not malformed ends at a
    // frame boundary, so its complete frames are all of its (decoded) bytes.
    if malformed == Some(0) {
        let sides = [
            (
                request,
                input.request_body,
                Some(read_as(protocol)),
                REQUEST_KEYS,
                "request",
            ),
            (
                response,
                input.response_body,
                response_read(input, protocol, response),
                RESPONSE_KEYS,
                "response",
            ),
        ];
        for (seen, body, read, keys, name) in sides {
            let body = &body[..seen.bytes as usize];
            let stream_len = match read {
                _ if !read_whole(seen) => None,
                Some(Read::Binary) => Some(body.len() as u64),
                Some(Read::Text) => match oracles::base64_decode(body) {
                    Verdict::Valid(decoded) => Some(decoded.len() as u64),
                    _ => None,
                },
                Some(Read::Not | Read::Dropped) => Some(0),
                None => None,
            };
            if let Some(n) = stream_len {
                let framed =
                    number(record, keys[2]).unwrap_or(0) + number(record, keys[5]).unwrap_or(0);
                assert_eq!(
                    framed, n,
                    "{name} bytes = framing + payload ({read:?}): {record}"
                );
            }
        }
    }
    // Refusals: a refused read is flagged (above); nothing more here.
    if input.refusals & 0x3F != 0 {
        return;
    }
    let directions = [
        ("request", &req, REQUEST_KEYS),
        ("response", &resp, RESPONSE_KEYS),
    ];
    for (name, dir, keys) in &directions {
        let want = match dir {
            Direction::Frames(f) | Direction::Partial(f) => *f,
            Direction::Nothing | Direction::Dropped => Frames::default(),
            Direction::Broken(why) => {
                assert_eq!(
                    malformed,
                    Some(1),
                    "the oracles find the {name} broken ({why}) but the record is not malformed: {record}"
                );
                continue;
            }
            Direction::Unknown => continue,
        };
        if let Direction::Partial(_) = dir {
            assert_eq!(
                malformed,
                Some(1),
                "the oracles find the {name} ending inside a frame but the record is not malformed: {record}"
            );
        }
        let [messages, compressed, message_bytes, min, max, framing] =
            keys.map(|k| number(record, k));
        let got = Frames {
            messages: messages.unwrap_or(0),
            compressed: compressed.unwrap_or(0),
            message_bytes: message_bytes.unwrap_or(0),
            min,
            max,
            framing: framing.unwrap_or(0),
        };
        assert_eq!(
            got, want,
            "{name} frames (the oracles' walk, {dir:?}): {record}"
        );
    }
    let valid = directions
        .iter()
        .all(|(_, d, _)| matches!(d, Direction::Frames(_) | Direction::Nothing));
    if valid && statuses_numeric(input) {
        assert_eq!(
            malformed,
            Some(0),
            "the oracles find both directions valid ({req:?}, {resp:?}) but the record is malformed: {record}"
        );
    }
}
