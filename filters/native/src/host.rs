//! The core's [`Host`] over Envoy's dynamic-module callbacks ([`abi`]).
//!
//! Nothing Envoy hands over is copied: a header map is an array of
//! `{name, value}` buffers pointing into Envoy's map (the array itself is
//! reused, per worker thread), a body read is a slice of one of the current
//! chunk's buffers. Both are valid until the hook returns, which is as long
//! as an [`EnvoyHost`] lives. The clock is the module's own (the wall
//! clock, `CLOCK_REALTIME`, as proxy-wasm's is): no callback.
//!
//! Host calls per core call: a header map or its size is two callbacks
//! (`http_get_headers_size`, `http_get_headers`; Envoy reports a map's
//! entry count, not its bytes, so the size is summed here); the body's
//! slices are fetched once per hook at the first read (two callbacks);
//! publishing is one `http_set_filter_state_bytes`.

use crate::abi;
use wirelens_core::{Body, HeaderEntries, HeaderMap, Host, FILTER_STATE_RECORD};

/// What a worker thread reuses from hook to hook: the arrays Envoy fills,
/// the record's JSON buffer.
#[derive(Default)]
pub struct Scratch {
    headers: Vec<abi::EnvoyHttpHeader>,
    chunks: Vec<abi::EnvoyBuffer>,
    json: String,
}

/// Bytes Envoy owns, as a slice. Null or empty is the empty slice.
///
/// # Safety
/// `ptr` must be valid for `len` bytes for `'a` (Envoy's buffers are, until
/// the hook returns).
unsafe fn envoy_bytes<'a>(ptr: *const std::ffi::c_char, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr.cast(), len)
    }
}

/// A header map as Envoy handed it over: entries pointing into its map.
pub struct EnvoyHeaders<'a>(&'a [abi::EnvoyHttpHeader]);

impl HeaderEntries for EnvoyHeaders<'_> {
    fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.0.iter().map(|h| {
            // SAFETY: Envoy filled these for the current hook.
            unsafe {
                (
                    envoy_bytes(h.key_ptr, h.key_length),
                    envoy_bytes(h.value_ptr, h.value_length),
                )
            }
        })
    }
}

/// The host for one hook of one stream.
pub struct EnvoyHost<'s> {
    envoy: abi::HttpFilterEnvoyPtr,
    scratch: &'s mut Scratch,
    /// Whose slices `scratch.chunks` holds in this hook.
    chunks_of: Option<Body>,
}

fn header_type(map: HeaderMap) -> abi::HttpHeaderType {
    match map {
        HeaderMap::RequestHeaders => abi::REQUEST_HEADER,
        HeaderMap::ResponseHeaders => abi::RESPONSE_HEADER,
        HeaderMap::ResponseTrailers => abi::RESPONSE_TRAILER,
    }
}

fn body_type(body: Body) -> abi::HttpBodyType {
    match body {
        Body::Request => abi::RECEIVED_REQUEST_BODY,
        Body::Response => abi::RECEIVED_RESPONSE_BODY,
    }
}

impl<'s> EnvoyHost<'s> {
    /// # Safety
    /// `envoy` is the filter pointer Envoy passed to the running hook; the
    /// host must not outlive the hook.
    pub unsafe fn new(envoy: abi::HttpFilterEnvoyPtr, scratch: &'s mut Scratch) -> Self {
        EnvoyHost {
            envoy,
            scratch,
            chunks_of: None,
        }
    }

    /// The byte length of the current body chunk (one callback).
    pub fn chunk_size(&mut self, body: Body) -> usize {
        // SAFETY: a live filter pointer (`new`).
        unsafe {
            abi::envoy_dynamic_module_callback_http_get_body_size(self.envoy, body_type(body))
        }
    }

    /// Fills the scratch array with a map's entries; their number, or
    /// `None` when Envoy has no such map.
    fn fetch_headers(&mut self, map: HeaderMap) -> Option<usize> {
        let kind = header_type(map);
        // SAFETY: a live filter pointer; the array has room for `n` entries.
        unsafe {
            let n = abi::envoy_dynamic_module_callback_http_get_headers_size(self.envoy, kind);
            if n == 0 {
                return Some(0);
            }
            let headers = &mut self.scratch.headers;
            headers.clear();
            headers.resize(n, abi::EnvoyHttpHeader::default());
            abi::envoy_dynamic_module_callback_http_get_headers(
                self.envoy,
                kind,
                headers.as_mut_ptr(),
            )
            .then_some(n)
        }
    }

    /// The current chunk's slices, fetched at the first read of the hook.
    fn chunks(&mut self, body: Body) -> Option<&[abi::EnvoyBuffer]> {
        if self.chunks_of != Some(body) {
            let kind = body_type(body);
            let chunks = &mut self.scratch.chunks;
            chunks.clear();
            // SAFETY: a live filter pointer; the array has room for `n`.
            unsafe {
                let n =
                    abi::envoy_dynamic_module_callback_http_get_body_chunks_size(self.envoy, kind);
                if n > 0 {
                    chunks.resize(n, abi::EnvoyBuffer::default());
                    if !abi::envoy_dynamic_module_callback_http_get_body_chunks(
                        self.envoy,
                        kind,
                        chunks.as_mut_ptr(),
                    ) {
                        chunks.clear();
                        return None;
                    }
                }
            }
            self.chunks_of = Some(body);
        }
        Some(&self.scratch.chunks)
    }
}

impl Host for EnvoyHost<'_> {
    type Map<'a>
        = EnvoyHeaders<'a>
    where
        Self: 'a;
    type Bytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn now_ns(&mut self) -> Option<u64> {
        wall_clock_ns()
    }

    fn header_map(&mut self, map: HeaderMap) -> Option<EnvoyHeaders<'_>> {
        let n = self.fetch_headers(map)?;
        Some(EnvoyHeaders(&self.scratch.headers[..n]))
    }

    fn header_map_size(&mut self, map: HeaderMap) -> Option<usize> {
        let n = self.fetch_headers(map)?;
        Some(
            self.scratch.headers[..n]
                .iter()
                .map(|h| h.key_length + h.value_length)
                .sum(),
        )
    }

    /// A slice of the one buffer of the chunk that holds `start`: at most
    /// `max` bytes, fewer at the buffer's end (the core reads on from there).
    fn body_bytes(&mut self, body: Body, start: usize, max: usize) -> Option<&[u8]> {
        let mut skip = start;
        for chunk in self.chunks(body)? {
            if skip < chunk.length {
                let len = (chunk.length - skip).min(max);
                // SAFETY: Envoy's slice of the current chunk, valid during
                // the hook; `skip + len <= chunk.length`.
                let bytes = unsafe { envoy_bytes(chunk.ptr, chunk.length) };
                return Some(&bytes[skip..skip + len]);
            }
            skip -= chunk.length;
        }
        Some(&[])
    }

    fn record_buffer(&mut self) -> String {
        std::mem::take(&mut self.scratch.json)
    }

    fn publish(&mut self, record: String) {
        // SAFETY: a live filter pointer; Envoy copies both buffers.
        // A refusal (no stream info) is ignored, as the Wasm build ignores
        // a refused `set_property`.
        unsafe {
            abi::envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.envoy,
                abi::ModuleBuffer::of(FILTER_STATE_RECORD.as_bytes()),
                abi::ModuleBuffer::of(record.as_bytes()),
            );
        }
        let mut record = record;
        record.clear();
        self.scratch.json = record;
    }
}

/// The wall clock in nanoseconds since the Unix epoch; `None` before it.
///
/// Linux: `clock_gettime(CLOCK_REALTIME)` read directly (the vDSO, as
/// `SystemTime::now` reads it) and combined in plain integer arithmetic:
/// the `SystemTime` → `Duration` → `u128` path cost about 50 instructions
/// more per read, and a call reads the clock four times.
#[cfg(target_os = "linux")]
fn wall_clock_ns() -> Option<u64> {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_REALTIME: i32 = 0;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for the duration of the call.
    if unsafe { clock_gettime(CLOCK_REALTIME, &mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

#[cfg(not(target_os = "linux"))]
fn wall_clock_ns() -> Option<u64> {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(t.as_nanos()).ok()
}

/// Logs through Envoy (`dynamic_modules` logger). Configuration time and
/// failures only; never on a call's normal path.
pub fn log(level: abi::LogLevel, message: &str) {
    // SAFETY: a live &str for the duration of the call; Envoy copies it.
    unsafe {
        abi::envoy_dynamic_module_callback_log(level, abi::ModuleBuffer::of(message.as_bytes()))
    }
}

/// `cargo test` and clippy link the module into an executable, where no
/// Envoy exports the callbacks: these fakes do, over a thread-local state
/// that the tests fill and inspect (the filter pointer is ignored).
#[cfg(test)]
#[allow(clippy::missing_safety_doc)]
pub mod fake {
    use crate::abi;
    use std::cell::RefCell;

    /// A header map's entries.
    pub type Map = Vec<(Vec<u8>, Vec<u8>)>;

    #[derive(Default)]
    pub struct FakeEnvoy {
        /// Header maps by `HttpHeaderType`; `None`: absent.
        pub maps: [Option<Map>; 4],
        /// The current chunk of each body (request, response) as slices.
        pub request_chunk: Option<Vec<Vec<u8>>>,
        pub response_chunk: Option<Vec<Vec<u8>>>,
        pub filter_state: Vec<(String, String)>,
        pub logs: Vec<(u32, String)>,
        /// Callbacks of any kind, and of the byte-handing kinds.
        pub calls: usize,
        pub header_fetches: usize,
        pub chunk_fetches: usize,
    }

    thread_local! {
        pub static ENVOY: RefCell<FakeEnvoy> = RefCell::default();
    }

    fn with<R>(f: impl FnOnce(&mut FakeEnvoy) -> R) -> R {
        ENVOY.with(|e| {
            let mut e = e.borrow_mut();
            e.calls += 1;
            f(&mut e)
        })
    }

    unsafe fn text(b: abi::ModuleBuffer) -> String {
        String::from_utf8_lossy(std::slice::from_raw_parts(b.ptr.cast::<u8>(), b.length))
            .into_owned()
    }

    fn chunk(e: &FakeEnvoy, body: abi::HttpBodyType) -> Option<&Vec<Vec<u8>>> {
        match body {
            abi::RECEIVED_REQUEST_BODY => e.request_chunk.as_ref(),
            abi::RECEIVED_RESPONSE_BODY => e.response_chunk.as_ref(),
            _ => None,
        }
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_log(
        level: abi::LogLevel,
        message: abi::ModuleBuffer,
    ) {
        let m = text(message);
        with(|e| e.logs.push((level, m)));
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_get_headers_size(
        _: abi::HttpFilterEnvoyPtr,
        header_type: abi::HttpHeaderType,
    ) -> usize {
        with(|e| e.maps[header_type as usize].as_ref().map_or(0, Vec::len))
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_get_headers(
        _: abi::HttpFilterEnvoyPtr,
        header_type: abi::HttpHeaderType,
        result: *mut abi::EnvoyHttpHeader,
    ) -> bool {
        with(|e| {
            e.header_fetches += 1;
            let Some(map) = e.maps[header_type as usize].as_ref() else {
                return false;
            };
            // The fake's vectors live as long as the test's state: the
            // pointers stay valid for the hook, as Envoy's do.
            for (i, (k, v)) in map.iter().enumerate() {
                *result.add(i) = abi::EnvoyHttpHeader {
                    key_ptr: k.as_ptr().cast(),
                    key_length: k.len(),
                    value_ptr: v.as_ptr().cast(),
                    value_length: v.len(),
                };
            }
            true
        })
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_get_body_size(
        _: abi::HttpFilterEnvoyPtr,
        body: abi::HttpBodyType,
    ) -> usize {
        with(|e| chunk(e, body).map_or(0, |c| c.iter().map(Vec::len).sum()))
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        _: abi::HttpFilterEnvoyPtr,
        body: abi::HttpBodyType,
    ) -> usize {
        with(|e| chunk(e, body).map_or(0, Vec::len))
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks(
        _: abi::HttpFilterEnvoyPtr,
        body: abi::HttpBodyType,
        result: *mut abi::EnvoyBuffer,
    ) -> bool {
        with(|e| {
            e.chunk_fetches += 1;
            let Some(c) = chunk(e, body) else {
                return false;
            };
            for (i, s) in c.iter().enumerate() {
                *result.add(i) = abi::EnvoyBuffer {
                    ptr: s.as_ptr().cast(),
                    length: s.len(),
                };
            }
            true
        })
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        _: abi::HttpFilterEnvoyPtr,
        key: abi::ModuleBuffer,
        value: abi::ModuleBuffer,
    ) -> bool {
        let (k, v) = (text(key), text(value));
        // Kept as a list, so a test sees a second write (Envoy 1.40 would
        // replace the value and answer true).
        with(|e| {
            e.filter_state.push((k, v));
            true
        })
    }
}
