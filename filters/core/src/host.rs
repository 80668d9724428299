//! What the core asks of its host, and an in-memory host for tests.
//!
//! [`Call`](crate::Call) is driven by its caller (sans-IO, in the manner of
//! quinn-proto's `Connection` or httparse): each callback of the stream
//! passes a [`Host`], and the call itself decides which host calls to make:
//! a header map's entries or only its size, body bytes at an offset, the
//! clock, and the one publication. The wasm adapter implements [`Host`]
//! over the proxy-wasm ABI (`filters/wasm/src/lib.rs`), the native one over
//! Envoy's dynamic-module ABI (`filters/native/src/host.rs`); tests, fuzz targets
//! and harnesses use [`MemoryHost`], so they run the code the filter runs.
//!
//! Every method is one host call in the wasm adapter (`proxy_get_...`,
//! `proxy_set_property`) except [`Host::record_buffer`], which is local.

use crate::headers::HeaderEntries;
#[cfg(any(test, feature = "test-support"))]
use crate::headers::Serialized;

/// The one filter-state property published per call (Envoy prefixes it
/// with `wasm.`): one host call, and one object for the access log and the
/// span to carry.
pub const PROPERTY_RECORD: &str = "wirelens.record";

/// The filter-state key the record ends up under in Envoy: the Wasm build's
/// [`PROPERTY_RECORD`] with Envoy's `wasm.` prefix. The native build writes
/// this key itself, so the access log and the span read the same object
/// from either build.
pub const FILTER_STATE_RECORD: &str = "wasm.wirelens.record";

/// A header map of the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderMap {
    RequestHeaders,
    ResponseHeaders,
    ResponseTrailers,
}

/// The current body chunk of one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    Request,
    Response,
}

/// The host calls a [`Call`](crate::Call) makes. A refusal is `None`: the
/// call carries on without the answer. A refused header map, header map
/// size or body read marks the record malformed (the map then counts as
/// empty, the size as 0, the body stops being read), so a record never
/// carries those zeros silently; a refused clock omits the durations that
/// need it.
///
/// What a host hands over may borrow from it until its next call (`'a` is
/// the borrow of the host): Envoy's dynamic-module ABI hands header entries
/// and body slices that point into Envoy's memory, valid during the
/// callback; the proxy-wasm ABI copies them into the module.
pub trait Host {
    /// A header map the host handed over, read in place ([`HeaderEntries`]):
    /// the proxy-wasm serialized layout (`headers::Serialized`) or the
    /// host's own entries.
    type Map<'a>: HeaderEntries
    where
        Self: 'a;

    /// A piece of a body the host handed over.
    type Bytes<'a>: AsRef<[u8]>
    where
        Self: 'a;

    /// The wall clock in nanoseconds (`proxy_get_current_time_nanoseconds`;
    /// a native host may read its own).
    fn now_ns(&mut self) -> Option<u64>;

    /// A whole header map, in one call (`proxy_get_header_map_pairs`).
    fn header_map(&mut self, map: HeaderMap) -> Option<Self::Map<'_>>;

    /// A header map's byte size, Σ(name length + value length), without
    /// copying it (`proxy_get_header_map_size`).
    fn header_map_size(&mut self, map: HeaderMap) -> Option<usize>;

    /// Up to `max` bytes of the current body chunk starting at `start`
    /// (`proxy_get_buffer_bytes`). A short answer is read and the next
    /// read starts after it; an empty one ends the chunk early.
    fn body_bytes(&mut self, body: Body, start: usize, max: usize) -> Option<Self::Bytes<'_>>;

    /// An empty buffer for the record's JSON. Hand out the one the last
    /// [`Host::publish`] received, and publishing does not allocate once it
    /// has grown.
    fn record_buffer(&mut self) -> String;

    /// Publishes the record, a compact JSON object, as the property
    /// [`PROPERTY_RECORD`] (`proxy_set_property`); at most once per call.
    /// A failure is the host's to ignore.
    fn publish(&mut self, record: String);
}

/// How many host calls of each kind a [`MemoryHost`] answered.
#[cfg(any(test, feature = "test-support"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCalls {
    pub clock: usize,
    pub map_copies: usize,
    pub map_sizes: usize,
    pub body_reads: usize,
    /// Body bytes handed out by all reads.
    pub body_bytes: usize,
    pub publications: usize,
    /// Header map copies, header map sizes and body reads answered `None`.
    pub refused_reads: usize,
}

#[cfg(any(test, feature = "test-support"))]
impl HostCalls {
    /// All host calls (what the adapter pays for).
    pub fn total(&self) -> usize {
        self.clock + self.map_copies + self.map_sizes + self.body_reads + self.publications
    }
}

/// Kinds of host call a [`MemoryHost`] refuses whatever it holds, as a
/// host in trouble might: reads answer `None`, a publication is dropped.
#[cfg(any(test, feature = "test-support"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    pub map_copies: bool,
    pub map_sizes: bool,
    pub body_reads: bool,
    pub publication: bool,
}

/// A [`Host`] in memory (tests, fuzz targets, harnesses): header maps in
/// the serialized layout, the current body chunk of each direction, a
/// clock; it counts every call and keeps the published records. A `None`
/// field answers as a refusing host would, as does every call of a kind
/// `refuse` names.
///
/// Test-only API (feature `test-support`), as are [`HostCalls`] and
/// [`Refusals`]: the filter itself never builds one.
#[cfg(any(test, feature = "test-support"))]
#[derive(Clone, Debug, Default)]
pub struct MemoryHost {
    /// Clock: each read answers it, then advances it by `tick`.
    pub now: Option<u64>,
    pub tick: u64,
    pub request_headers: Option<Vec<u8>>,
    pub response_headers: Option<Vec<u8>>,
    pub response_trailers: Option<Vec<u8>>,
    pub request_body: Option<Vec<u8>>,
    pub response_body: Option<Vec<u8>>,
    pub refuse: Refusals,
    pub calls: HostCalls,
    /// Every publication the host accepted, in order.
    pub published: Vec<String>,
}

#[cfg(any(test, feature = "test-support"))]
impl MemoryHost {
    fn map(&self, map: HeaderMap) -> Option<&Vec<u8>> {
        match map {
            HeaderMap::RequestHeaders => self.request_headers.as_ref(),
            HeaderMap::ResponseHeaders => self.response_headers.as_ref(),
            HeaderMap::ResponseTrailers => self.response_trailers.as_ref(),
        }
    }

    fn answer_read<T>(&mut self, answer: Option<T>) -> Option<T> {
        if answer.is_none() {
            self.calls.refused_reads += 1;
        }
        answer
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Host for MemoryHost {
    type Map<'a> = Serialized<Vec<u8>>;
    type Bytes<'a> = Vec<u8>;

    fn now_ns(&mut self) -> Option<u64> {
        self.calls.clock += 1;
        let t = self.now?;
        self.now = Some(t.saturating_add(self.tick));
        Some(t)
    }

    fn header_map(&mut self, map: HeaderMap) -> Option<Serialized<Vec<u8>>> {
        self.calls.map_copies += 1;
        let answer = self
            .map(map)
            .filter(|_| !self.refuse.map_copies)
            .cloned()
            .map(Serialized);
        self.answer_read(answer)
    }

    fn header_map_size(&mut self, map: HeaderMap) -> Option<usize> {
        self.calls.map_sizes += 1;
        let answer = self.map(map).filter(|_| !self.refuse.map_sizes).map(|map| {
            crate::headers::iter_serialized(map)
                .map(|(n, v)| n.len() + v.len())
                .sum()
        });
        self.answer_read(answer)
    }

    fn body_bytes(&mut self, body: Body, start: usize, max: usize) -> Option<Vec<u8>> {
        self.calls.body_reads += 1;
        let data = match body {
            Body::Request => self.request_body.as_ref(),
            Body::Response => self.response_body.as_ref(),
        }
        .filter(|_| !self.refuse.body_reads);
        let answer = data.map(|data| {
            let from = start.min(data.len());
            let to = from.saturating_add(max).min(data.len());
            data[from..to].to_vec()
        });
        self.calls.body_bytes += answer.as_ref().map_or(0, Vec::len);
        self.answer_read(answer)
    }

    fn record_buffer(&mut self) -> String {
        String::new()
    }

    fn publish(&mut self, record: String) {
        self.calls.publications += 1;
        if !self.refuse.publication {
            self.published.push(record);
        }
    }
}
