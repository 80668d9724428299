//! wirelens as a native Envoy module (`envoy.filters.http.dynamic_modules`,
//! Envoy 1.40): the same host-free core as the Wasm build
//! (`wirelens_core::Call`), driven from Envoy's dynamic-module hooks with
//! [`host::EnvoyHost`], the core's `Host` over the module's callbacks. It
//! records what the Wasm build records and publishes it the same way: one
//! filter-state write, key `wasm.wirelens.record`
//! ([`wirelens_core::FILTER_STATE_RECORD`]), compact JSON, read by the
//! access log (`%FILTER_STATE(wasm.wirelens.record:PLAIN)%`) and the span.
//!
//! * The filter configuration (`filter_config`, the same JSON text as the
//!   Wasm plugin configuration) is parsed on Envoy's main thread into a
//!   [`Filter`] that every worker shares: `Arc<OpMap>`, plain options and
//!   [`SharedSampler`]s (atomic), so it is `Send + Sync` by construction.
//!   A configuration error is logged through Envoy, naming the field, and
//!   Envoy rejects the configuration.
//! * Each stream is sampled when Envoy creates its filter: an unsampled
//!   stream gets a shared marker and costs nothing more; a sampled one a
//!   [`Stream`] (its `Call`), dropped at `on_http_filter_destroy`, its
//!   allocation kept for the worker's next stream ([`SPARE_STREAMS`]).
//! * No panic crosses into Envoy: every hook runs under `catch_unwind`. A
//!   panic fails the stream open (every hook answers `Continue`; later ones
//!   leave it alone) and, when the stream completes, its record is still
//!   published if that can be done, marked `wirelens.malformed: 1`. Envoy's
//!   log says which hook panicked.
//!
//! Feature `panic-probe` (tests only): a request header
//! `x-wirelens-panic: <hook>` makes that hook panic (see [`probe`]).
//! Feature `conformance` (tests only): `conformance.rs` reports what every
//! callback answers in every hook, for the conformance test.

use std::ffi::c_char;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use wirelens_core::{Body, Call, Config, OpMap, Options, SharedSampler};

pub mod abi;
#[cfg(feature = "conformance")]
mod conformance;
pub mod host;

use host::{log, EnvoyHost, Scratch};

/// One filter configuration: made on the main thread, shared by every
/// worker's streams until `on_http_filter_config_destroy`, which Envoy
/// calls only once no stream uses it (its filters hold the config).
pub struct Filter {
    map: Arc<OpMap>,
    options: Options,
    sampler: SharedSampler,
    /// Which recorded calls are also estimated for the counterfactual;
    /// `None` when the map has no descriptors.
    counterfactual: Option<SharedSampler>,
}

const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Filter>();
};

impl Filter {
    /// Parses the configuration (the Wasm plugin configuration's JSON);
    /// the error names the offending field.
    pub fn from_json(config: &[u8], seed: u64) -> Result<Filter, String> {
        let config = Config::from_json(config).map_err(|e| e.to_string())?;
        let options = config.options;
        let map = config.map;
        Ok(Filter {
            sampler: SharedSampler::new(options.sample_rate(), seed),
            counterfactual: map.descriptors().map(|_| {
                SharedSampler::new(options.counterfactual_rate(), seed ^ 0xC0FF_EE00_D15E_A5E5)
            }),
            options,
            map: Arc::new(map),
        })
    }

    /// A new stream's state: `None` when it is not sampled.
    fn stream(&self) -> Option<Box<Stream>> {
        if !self.sampler.sample() {
            return None;
        }
        let counterfactual = self
            .counterfactual
            .as_ref()
            .is_some_and(SharedSampler::sample);
        let call = Call::new(Arc::clone(&self.map))
            .with_options(self.options)
            .with_counterfactual(counterfactual);
        Some(boxed(Stream { call, failed: None }))
    }
}

/// Most allocations of finished streams a worker keeps for its next ones.
const SPARE_STREAMS: usize = 64;

thread_local! {
    /// Allocations of this worker's finished streams, reused by its next
    /// streams: a sampled stream then costs Envoy's allocator nothing (a
    /// `malloc` and a `free`, about 200 instructions per call). Boxes, not
    /// values: each is the allocation Envoy holds a stream's pointer to.
    #[allow(clippy::vec_box)]
    static SPARE: std::cell::RefCell<Vec<Box<MaybeUninit<Stream>>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `stream` on the heap, in a spare allocation when this worker has one.
fn boxed(stream: Stream) -> Box<Stream> {
    let spare = SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten();
    match spare {
        Some(mut slot) => {
            slot.write(stream);
            // SAFETY: just initialized.
            unsafe { slot.assume_init() }
        }
        None => Box::new(stream),
    }
}

/// Drops a finished stream and keeps its allocation for the next one
/// (freed when the worker already keeps [`SPARE_STREAMS`]).
fn recycle(stream: Box<Stream>) {
    let raw = Box::into_raw(stream);
    // SAFETY: `raw` is a live, initialized `Stream` we own; after the drop
    // its allocation is a `MaybeUninit<Stream>` of the same layout.
    let slot = unsafe {
        std::ptr::drop_in_place(raw);
        Box::from_raw(raw.cast::<MaybeUninit<Stream>>())
    };
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.len() < SPARE_STREAMS {
                s.push(slot);
            }
        }
    });
}

/// One sampled stream.
pub struct Stream {
    call: Call,
    /// The hook that panicked: the stream is left alone from then on, and
    /// only its record is published (marked) at the end.
    failed: Option<Hook>,
}

/// The hooks that drive a stream, by the name `x-wirelens-panic` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    RequestHeaders,
    RequestBody,
    RequestTrailers,
    ResponseHeaders,
    ResponseBody,
    ResponseTrailers,
    StreamComplete,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::RequestHeaders => "request_headers",
            Hook::RequestBody => "request_body",
            Hook::RequestTrailers => "request_trailers",
            Hook::ResponseHeaders => "response_headers",
            Hook::ResponseBody => "response_body",
            Hook::ResponseTrailers => "response_trailers",
            Hook::StreamComplete => "stream_complete",
        }
    }
}

/// What `on_http_filter_new` answers for a stream that is not sampled (Envoy
/// closes a stream whose filter is null): the address of this static,
/// never dereferenced as a [`Stream`].
static UNSAMPLED: u8 = 0;

fn unsampled() -> abi::HttpFilterModulePtr {
    std::ptr::addr_of!(UNSAMPLED).cast()
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// Runs `f` with this worker's scratch (a fresh one if it is in use:
/// hooks do not nest, but nothing breaks if they ever do).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Drives one hook of a stream under `catch_unwind`. Unsampled streams and
/// streams that failed return at once.
///
/// # Safety
/// `envoy` and `module` are what Envoy passed to the running hook; `module`
/// came from [`envoy_dynamic_module_on_http_filter_new`].
unsafe fn drive(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
    hook: Hook,
    f: impl FnOnce(&mut Call, &mut EnvoyHost),
) -> abi::Status {
    if module.is_null() || module == unsampled() {
        return abi::CONTINUE;
    }
    // SAFETY: a live `Stream` of ours (module is neither null nor the
    // marker), used by this stream's worker thread only.
    let stream = &mut *(module as *mut Stream);
    if stream.failed.is_some() {
        if hook == Hook::StreamComplete {
            publish_marked(envoy, stream);
        }
        return abi::CONTINUE;
    }
    let call = &mut stream.call;
    let outcome = with_scratch(|scratch| {
        catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the hook's own filter pointer; the host lives only
            // for this closure.
            let mut host = EnvoyHost::new(envoy, scratch);
            probe(hook, &mut host);
            #[cfg(feature = "conformance")]
            conformance::observe(hook, envoy);
            f(call, &mut host);
        }))
    });
    if outcome.is_err() {
        stream.failed = Some(hook);
        log(
            abi::LOG_ERROR,
            &format!(
                "wirelens: panic in {}: the stream continues without the filter; its record, if still published, is marked wirelens.malformed",
                hook.name()
            ),
        );
        if hook == Hook::StreamComplete {
            publish_marked(envoy, stream);
        }
    }
    abi::CONTINUE
}

/// A failed stream's last act: its record as it stands, marked malformed,
/// unless it was published already. A stream that failed in its request
/// headers hook reads them now, so the call is still counted (the core
/// ignores a second reading of request headers). A second panic gives up
/// silently.
///
/// # Safety
/// As [`drive`].
unsafe fn publish_marked(envoy: abi::HttpFilterEnvoyPtr, stream: &mut Stream) {
    let call = &mut stream.call;
    let _ = with_scratch(|scratch| {
        catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: as in `drive`.
            let mut host = EnvoyHost::new(envoy, scratch);
            call.mark_malformed();
            call.on_request_headers(&mut host, false);
            call.on_log(&mut host);
        }))
    });
}

/// Test builds (`--features panic-probe`): panics in `hook` when the request
/// carries `x-wirelens-panic: <hook name>`.
#[cfg(feature = "panic-probe")]
fn probe(hook: Hook, host: &mut EnvoyHost) {
    use wirelens_core::{HeaderEntries, HeaderMap, Host};
    let wanted = host.header_map(HeaderMap::RequestHeaders).is_some_and(|m| {
        m.entries().any(|(n, v)| {
            n.eq_ignore_ascii_case(b"x-wirelens-panic") && v == hook.name().as_bytes()
        })
    });
    if wanted {
        panic!("wirelens panic probe: {}", hook.name());
    }
}

#[cfg(not(feature = "panic-probe"))]
#[inline(always)]
fn probe(_: Hook, _: &mut EnvoyHost) {}

// ------------------------------------------------------------------ hooks

/// # Safety
/// Called by Envoy once, on the main thread, when it loads the module.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    abi::ABI_VERSION.as_ptr().cast()
}

/// # Safety
/// Called by Envoy on the main thread with buffers valid for the call.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    _config_envoy: abi::HttpFilterConfigEnvoyPtr,
    _name: abi::EnvoyBuffer,
    config: abi::EnvoyBuffer,
) -> abi::HttpFilterConfigModulePtr {
    // SAFETY: Envoy's buffer, valid during the hook.
    let text = if config.ptr.is_null() {
        &[][..]
    } else {
        std::slice::from_raw_parts(config.ptr.cast::<u8>(), config.length)
    };
    let parsed = catch_unwind(|| {
        // Seed: the wall clock mixed with an address (splitmix64 spreads it).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x5EED, |d| d.as_nanos() as u64);
        let seed = now ^ (text.as_ptr() as u64).rotate_left(32);
        Filter::from_json(text, seed)
    });
    match parsed {
        Ok(Ok(filter)) => Box::into_raw(Box::new(filter)).cast_const().cast(),
        Ok(Err(e)) => {
            log(
                abi::LOG_ERROR,
                &format!("wirelens: invalid plugin configuration: {e}"),
            );
            std::ptr::null()
        }
        Err(_) => {
            log(
                abi::LOG_ERROR,
                "wirelens: invalid plugin configuration: panic while parsing it",
            );
            std::ptr::null()
        }
    }
}

/// # Safety
/// `config` came from `on_http_filter_config_new`; no stream uses it any more.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(
    config: abi::HttpFilterConfigModulePtr,
) {
    if !config.is_null() {
        let filter = Box::from_raw(config as *mut Filter);
        let _ = catch_unwind(AssertUnwindSafe(move || drop(filter)));
    }
}

/// No per-route configuration: Envoy rejects one (null).
///
/// # Safety
/// Called by Envoy.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: abi::EnvoyBuffer,
    _config: abi::EnvoyBuffer,
) -> abi::HttpFilterPerRouteConfigModulePtr {
    log(
        abi::LOG_ERROR,
        "wirelens: there is no per-route configuration",
    );
    std::ptr::null()
}

/// # Safety
/// Never given anything (no per-route configuration is ever made).
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    _config: abi::HttpFilterPerRouteConfigModulePtr,
) {
}

/// Samples the stream: its [`Stream`], or the shared marker.
///
/// # Safety
/// `config` came from `on_http_filter_config_new`.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: abi::HttpFilterConfigModulePtr,
    _envoy: abi::HttpFilterEnvoyPtr,
) -> abi::HttpFilterModulePtr {
    if config.is_null() {
        return unsampled();
    }
    // SAFETY: a live configuration of ours (Envoy's filter holds it).
    let filter = &*(config as *const Filter);
    match catch_unwind(AssertUnwindSafe(|| filter.stream())) {
        Ok(Some(stream)) => Box::into_raw(stream).cast_const().cast(),
        _ => unsampled(),
    }
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
    end_of_stream: bool,
) -> abi::Status {
    drive(envoy, module, Hook::RequestHeaders, |c, h| {
        c.on_request_headers(h, end_of_stream)
    })
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
    end_of_stream: bool,
) -> abi::Status {
    drive(envoy, module, Hook::RequestBody, |c, h| {
        let size = h.chunk_size(Body::Request);
        c.on_request_body(h, size, end_of_stream)
    })
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
) -> abi::Status {
    drive(envoy, module, Hook::RequestTrailers, |c, h| {
        c.on_request_trailers(h)
    })
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
    end_of_stream: bool,
) -> abi::Status {
    drive(envoy, module, Hook::ResponseHeaders, |c, h| {
        c.on_response_headers(h, end_of_stream)
    })
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
    end_of_stream: bool,
) -> abi::Status {
    drive(envoy, module, Hook::ResponseBody, |c, h| {
        let size = h.chunk_size(Body::Response);
        c.on_response_body(h, size, end_of_stream)
    })
}

/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
) -> abi::Status {
    drive(envoy, module, Hook::ResponseTrailers, |c, h| {
        c.on_response_trailers(h)
    })
}

/// Before the access log: the log phase of the Wasm build (`on_log`).
///
/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    envoy: abi::HttpFilterEnvoyPtr,
    module: abi::HttpFilterModulePtr,
) {
    drive(envoy, module, Hook::StreamComplete, |c, h| c.on_log(h));
}

/// # Safety
/// `module` came from `on_http_filter_new`; Envoy calls nothing for it after.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_destroy(
    module: abi::HttpFilterModulePtr,
) {
    if !module.is_null() && module != unsampled() {
        let stream = Box::from_raw(module as *mut Stream);
        let _ = catch_unwind(AssertUnwindSafe(move || recycle(stream)));
    }
}

/// A local reply goes on as Envoy decided (`Continue`).
///
/// # Safety
/// Envoy's arguments for this hook.
#[no_mangle]
pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _envoy: abi::HttpFilterEnvoyPtr,
    _module: abi::HttpFilterModulePtr,
    _response_code: u32,
    _details: abi::EnvoyBuffer,
    _reset_imminent: bool,
) -> abi::Status {
    abi::CONTINUE
}

/// Hooks Envoy 1.40 requires but wirelens never triggers (no callouts, no
/// scheduling) or has nothing to do in (watermarks): they do nothing.
mod unused {
    use crate::abi::*;

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
        _: HttpCalloutResult,
        _: *mut EnvoyHttpHeader,
        _: usize,
        _: *mut EnvoyBuffer,
        _: usize,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
        _: *mut EnvoyHttpHeader,
        _: usize,
        _: bool,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
        _: *const EnvoyBuffer,
        _: usize,
        _: bool,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
        _: *mut EnvoyHttpHeader,
        _: usize,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
        _: HttpFilterEnvoyPtr,
        _: HttpFilterModulePtr,
        _: u64,
        _: HttpStreamResetReason,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
        _: HttpCalloutResult,
        _: *mut EnvoyHttpHeader,
        _: usize,
        _: *mut EnvoyBuffer,
        _: usize,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
        _: *mut EnvoyHttpHeader,
        _: usize,
        _: bool,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
        _: *const EnvoyBuffer,
        _: usize,
        _: bool,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
        _: *mut EnvoyHttpHeader,
        _: usize,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
    ) {
    }

    #[no_mangle]
    pub unsafe extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
        _: HttpFilterConfigEnvoyPtr,
        _: HttpFilterConfigModulePtr,
        _: u64,
        _: HttpStreamResetReason,
    ) {
    }

    /// Each export against its declared type (`abi.rs`).
    const _: () = {
        let _: OnHttpFilterNotice =
            envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark;
        let _: OnHttpFilterNotice =
            envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark;
        let _: OnHttpFilterScheduled = envoy_dynamic_module_on_http_filter_scheduled;
        let _: OnHttpFilterHttpCalloutDone = envoy_dynamic_module_on_http_filter_http_callout_done;
        let _: OnHttpFilterHttpStreamHeaders =
            envoy_dynamic_module_on_http_filter_http_stream_headers;
        let _: OnHttpFilterHttpStreamData = envoy_dynamic_module_on_http_filter_http_stream_data;
        let _: OnHttpFilterHttpStreamTrailers =
            envoy_dynamic_module_on_http_filter_http_stream_trailers;
        let _: OnHttpFilterHttpStreamComplete =
            envoy_dynamic_module_on_http_filter_http_stream_complete;
        let _: OnHttpFilterHttpStreamReset = envoy_dynamic_module_on_http_filter_http_stream_reset;
        let _: OnHttpFilterConfigScheduled = envoy_dynamic_module_on_http_filter_config_scheduled;
        let _: OnHttpFilterConfigHttpCalloutDone =
            envoy_dynamic_module_on_http_filter_config_http_callout_done;
        let _: OnHttpFilterConfigHttpStreamHeaders =
            envoy_dynamic_module_on_http_filter_config_http_stream_headers;
        let _: OnHttpFilterConfigHttpStreamData =
            envoy_dynamic_module_on_http_filter_config_http_stream_data;
        let _: OnHttpFilterConfigHttpStreamTrailers =
            envoy_dynamic_module_on_http_filter_config_http_stream_trailers;
        let _: OnHttpFilterConfigHttpStreamComplete =
            envoy_dynamic_module_on_http_filter_config_http_stream_complete;
        let _: OnHttpFilterConfigHttpStreamReset =
            envoy_dynamic_module_on_http_filter_config_http_stream_reset;
    };
}

/// Each export against its declared type (`abi.rs`).
const _: () = {
    let _: abi::OnProgramInit = envoy_dynamic_module_on_program_init;
    let _: abi::OnHttpFilterConfigNew = envoy_dynamic_module_on_http_filter_config_new;
    let _: abi::OnHttpFilterConfigDestroy = envoy_dynamic_module_on_http_filter_config_destroy;
    let _: abi::OnHttpFilterPerRouteConfigNew =
        envoy_dynamic_module_on_http_filter_per_route_config_new;
    let _: abi::OnHttpFilterPerRouteConfigDestroy =
        envoy_dynamic_module_on_http_filter_per_route_config_destroy;
    let _: abi::OnHttpFilterNew = envoy_dynamic_module_on_http_filter_new;
    let _: abi::OnHttpFilterEvent = envoy_dynamic_module_on_http_filter_request_headers;
    let _: abi::OnHttpFilterEvent = envoy_dynamic_module_on_http_filter_request_body;
    let _: abi::OnHttpFilterTrailers = envoy_dynamic_module_on_http_filter_request_trailers;
    let _: abi::OnHttpFilterEvent = envoy_dynamic_module_on_http_filter_response_headers;
    let _: abi::OnHttpFilterEvent = envoy_dynamic_module_on_http_filter_response_body;
    let _: abi::OnHttpFilterTrailers = envoy_dynamic_module_on_http_filter_response_trailers;
    let _: abi::OnHttpFilterNotice = envoy_dynamic_module_on_http_filter_stream_complete;
    let _: abi::OnHttpFilterDestroy = envoy_dynamic_module_on_http_filter_destroy;
    let _: abi::OnHttpFilterLocalReply = envoy_dynamic_module_on_http_filter_local_reply;
};

#[cfg(test)]
mod tests {
    //! The hooks against the fake callbacks (`host::fake`), as Envoy calls
    //! them; records compared with the core driven through `MemoryHost`
    //! (what the Wasm build's adapter hands it).
    use super::*;
    use crate::host::fake::{FakeEnvoy, Map, ENVOY};
    use serde_json::Value;
    use wirelens_core::frame::encode_frame;
    use wirelens_core::headers::serialize;
    use wirelens_core::{MemoryHost, FILTER_STATE_RECORD};

    const CONFIG: &str = r#"{"operations": [
        {"grpc_path": "/wirelens.v1.Hello/SayHello", "operation": "hello.SayHello",
         "rpc_service": "wirelens.v1.Hello", "rpc_method": "SayHello", "streaming": "unary",
         "http_rules": [{"method": "POST", "pattern": "/v1/hello"}]}]}"#;

    /// A filter pointer: the fakes ignore it, Envoy's is never null.
    fn envoy() -> abi::HttpFilterEnvoyPtr {
        std::ptr::NonNull::<u8>::dangling().as_ptr().cast()
    }

    fn buffer(bytes: &[u8]) -> abi::EnvoyBuffer {
        abi::EnvoyBuffer {
            ptr: bytes.as_ptr().cast(),
            length: bytes.len(),
        }
    }

    fn fake<R>(f: impl FnOnce(&mut FakeEnvoy) -> R) -> R {
        ENVOY.with(|e| f(&mut e.borrow_mut()))
    }

    fn map(pairs: &[(&str, &str)]) -> Map {
        pairs
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// A configuration made as Envoy makes it; null when refused.
    fn configure(config: &str) -> abi::HttpFilterConfigModulePtr {
        fake(|e| *e = FakeEnvoy::default());
        unsafe {
            envoy_dynamic_module_on_http_filter_config_new(
                std::ptr::null_mut(),
                buffer(b"wirelens"),
                buffer(config.as_bytes()),
            )
        }
    }

    /// One exchange: request headers (+ body chunks), response headers (+
    /// body chunks, + trailers), stream complete, destroy. Each chunk is
    /// handed over in `slices` pieces. Returns the published record.
    struct Exchange {
        request: Map,
        request_body: Vec<Vec<u8>>,
        response: Map,
        response_body: Vec<Vec<u8>>,
        trailers: Option<Map>,
    }

    fn split(chunk: &[u8], slices: usize) -> Vec<Vec<u8>> {
        let n = chunk.len().div_ceil(slices.max(1)).max(1);
        chunk.chunks(n).map(<[u8]>::to_vec).collect()
    }

    impl Exchange {
        fn run_native(
            &self,
            config: abi::HttpFilterConfigModulePtr,
            slices: usize,
        ) -> Option<String> {
            let e = envoy();
            unsafe {
                let m = envoy_dynamic_module_on_http_filter_new(config, e);
                fake(|f| f.maps[abi::REQUEST_HEADER as usize] = Some(self.request.clone()));
                let eos = self.request_body.is_empty();
                envoy_dynamic_module_on_http_filter_request_headers(e, m, eos);
                for (i, chunk) in self.request_body.iter().enumerate() {
                    fake(|f| f.request_chunk = Some(split(chunk, slices)));
                    envoy_dynamic_module_on_http_filter_request_body(
                        e,
                        m,
                        i + 1 == self.request_body.len(),
                    );
                    fake(|f| f.request_chunk = None);
                }
                fake(|f| f.maps[abi::RESPONSE_HEADER as usize] = Some(self.response.clone()));
                let eos = self.response_body.is_empty() && self.trailers.is_none();
                envoy_dynamic_module_on_http_filter_response_headers(e, m, eos);
                for (i, chunk) in self.response_body.iter().enumerate() {
                    fake(|f| f.response_chunk = Some(split(chunk, slices)));
                    let last = i + 1 == self.response_body.len() && self.trailers.is_none();
                    envoy_dynamic_module_on_http_filter_response_body(e, m, last);
                    fake(|f| f.response_chunk = None);
                }
                if let Some(t) = &self.trailers {
                    fake(|f| f.maps[abi::RESPONSE_TRAILER as usize] = Some(t.clone()));
                    envoy_dynamic_module_on_http_filter_response_trailers(e, m);
                }
                envoy_dynamic_module_on_http_filter_stream_complete(e, m);
                envoy_dynamic_module_on_http_filter_destroy(m);
            }
            published()
        }

        /// The same exchange through the core and `MemoryHost`.
        fn run_memory(&self) -> String {
            let config = wirelens_core::Config::from_json(CONFIG.as_bytes()).unwrap();
            let ser = |m: &Map| serialize(m);
            let mut host = MemoryHost {
                now: Some(1),
                tick: 1000,
                request_headers: Some(ser(&self.request)),
                response_headers: Some(ser(&self.response)),
                response_trailers: self.trailers.as_ref().map(ser),
                ..MemoryHost::default()
            };
            let mut call = Call::new(Arc::new(config.map)).with_options(config.options);
            call.on_request_headers(&mut host, self.request_body.is_empty());
            for (i, chunk) in self.request_body.iter().enumerate() {
                host.request_body = Some(chunk.clone());
                call.on_request_body(&mut host, chunk.len(), i + 1 == self.request_body.len());
            }
            let eos = self.response_body.is_empty() && self.trailers.is_none();
            call.on_response_headers(&mut host, eos);
            for (i, chunk) in self.response_body.iter().enumerate() {
                host.response_body = Some(chunk.clone());
                let last = i + 1 == self.response_body.len() && self.trailers.is_none();
                call.on_response_body(&mut host, chunk.len(), last);
            }
            if self.trailers.is_some() {
                call.on_response_trailers(&mut host);
            }
            call.on_log(&mut host);
            host.published.pop().expect("a record")
        }
    }

    fn published() -> Option<String> {
        fake(|f| {
            assert!(f.filter_state.len() <= 1, "one write per stream");
            let (key, value) = f.filter_state.pop()?;
            assert_eq!(key, FILTER_STATE_RECORD);
            Some(value)
        })
    }

    /// The record without its durations (each host has its own clock),
    /// decoded as the Collector reads it (format 2, the labels restored
    /// from [`CONFIG`]'s map), under the short names.
    fn timeless(record: &str) -> Value {
        let map = wirelens_core::OpMap::from_json(CONFIG.as_bytes()).unwrap();
        let mut o = wirelens_core::record::decode_published(record, &map);
        o.retain(|k, _| !["tt", "du", "qd"].contains(&k.as_str()));
        Value::Object(o)
    }

    fn grpc() -> Exchange {
        let mut body = encode_frame(0, b"\x0a\x06native");
        body.extend(encode_frame(0, b""));
        Exchange {
            request: map(&[
                (":method", "POST"),
                (":path", "/wirelens.v1.Hello/SayHello"),
                (":authority", "example"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ]),
            request_body: vec![body.clone(), encode_frame(0, &[7; 300])],
            response: map(&[(":status", "200"), ("content-type", "application/grpc")]),
            response_body: vec![encode_frame(0, b"\x0a\x0dHello, native")],
            trailers: Some(map(&[("grpc-status", "0"), ("grpc-message", "")])),
        }
    }

    fn rest() -> Exchange {
        Exchange {
            request: map(&[
                (":method", "POST"),
                (":path", "/v1/hello"),
                (":authority", "example"),
                ("content-type", "application/json"),
            ]),
            request_body: vec![br#"{"name":"native"}"#.to_vec()],
            response: map(&[(":status", "200"), ("content-type", "application/json")]),
            response_body: vec![br#"{"message":"Hello, native"}"#.to_vec()],
            trailers: None,
        }
    }

    #[test]
    fn records_what_the_core_records_through_memory_host() {
        let config = configure(CONFIG);
        assert!(!config.is_null());
        for exchange in [grpc(), rest()] {
            let want = timeless(&exchange.run_memory());
            for slices in [1, 2, 7] {
                let got = exchange.run_native(config, slices).expect("a record");
                assert_eq!(timeless(&got), want, "{slices} slices: {got}");
            }
        }
        let got = timeless(&grpc().run_native(config, 3).unwrap());
        assert_eq!(got["qm"], 3, "{got}");
        assert_eq!(got["sm"], 1, "{got}");
        assert_eq!(got["mf"], 0, "{got}");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn rest_bodies_are_counted_not_fetched() {
        let config = configure(CONFIG);
        let got = rest().run_native(config, 2).unwrap();
        assert_eq!(fake(|f| f.chunk_fetches), 0, "{got}");
        assert_eq!(timeless(&got)["qb"], 17, "{got}");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn a_configuration_error_names_the_field_and_is_refused() {
        let config = configure(r#"{"sample_rate": 2}"#);
        assert!(config.is_null());
        let logs = fake(|f| f.logs.clone());
        assert_eq!(logs.len(), 1, "{logs:?}");
        assert_eq!(logs[0].0, abi::LOG_ERROR);
        assert!(logs[0].1.contains("sample_rate"), "{logs:?}");
        let config = configure(r#"{"operations": [{"grpc_path": 3}]}"#);
        assert!(config.is_null());
        assert!(
            fake(|f| f.logs[0].1.contains("grpc_path")),
            "{:?}",
            fake(|f| f.logs.clone())
        );
    }

    #[test]
    fn unsampled_streams_are_left_alone() {
        let config = configure(r#"{"sample_rate": 0}"#);
        assert!(!config.is_null());
        let m = unsafe { envoy_dynamic_module_on_http_filter_new(config, envoy()) };
        assert_eq!(m, unsampled());
        assert!(grpc().run_native(config, 1).is_none());
        assert_eq!(fake(|f| f.calls), 0, "no callback for an unsampled stream");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn a_panic_fails_the_stream_open_and_marks_its_record() {
        let config = configure(CONFIG);
        let exchange = grpc();
        let e = envoy();
        unsafe {
            let m = envoy_dynamic_module_on_http_filter_new(config, e);
            fake(|f| f.maps[abi::REQUEST_HEADER as usize] = Some(exchange.request.clone()));
            assert_eq!(
                envoy_dynamic_module_on_http_filter_request_headers(e, m, false),
                abi::CONTINUE
            );
            // A hook that panics half-way (the probe's panic, without the feature).
            let status = drive(e, m, Hook::RequestBody, |_, _| panic!("test panic"));
            assert_eq!(status, abi::CONTINUE);
            let calls = fake(|f| f.calls);
            fake(|f| f.maps[abi::RESPONSE_HEADER as usize] = Some(exchange.response.clone()));
            assert_eq!(
                envoy_dynamic_module_on_http_filter_response_headers(e, m, true),
                abi::CONTINUE
            );
            assert_eq!(
                fake(|f| f.calls),
                calls,
                "later hooks leave the stream alone"
            );
            assert!(fake(|f| f.filter_state.is_empty()));
            envoy_dynamic_module_on_http_filter_stream_complete(e, m);
            envoy_dynamic_module_on_http_filter_destroy(m);
        }
        let record = published().expect("the marked record");
        let v = timeless(&record);
        assert_eq!(v["mf"], 1, "{record}");
        assert_eq!(v["op"], "hello.SayHello", "{record}");
        assert!(fake(|f| f
            .logs
            .iter()
            .any(|(_, m)| m.contains("panic in request_body"))));
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn a_panic_in_stream_complete_still_publishes_marked() {
        let config = configure(CONFIG);
        let e = envoy();
        unsafe {
            let m = envoy_dynamic_module_on_http_filter_new(config, e);
            fake(|f| f.maps[abi::REQUEST_HEADER as usize] = Some(rest().request));
            envoy_dynamic_module_on_http_filter_request_headers(e, m, true);
            drive(e, m, Hook::StreamComplete, |_, _| panic!("test panic"));
            envoy_dynamic_module_on_http_filter_destroy(m);
        }
        let record = published().expect("the marked record");
        assert_eq!(timeless(&record)["mf"], 1, "{record}");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn a_panic_in_request_headers_still_counts_the_call() {
        let config = configure(CONFIG);
        let e = envoy();
        unsafe {
            let m = envoy_dynamic_module_on_http_filter_new(config, e);
            fake(|f| f.maps[abi::REQUEST_HEADER as usize] = Some(rest().request));
            drive(e, m, Hook::RequestHeaders, |_, _| panic!("test panic"));
            envoy_dynamic_module_on_http_filter_stream_complete(e, m);
            envoy_dynamic_module_on_http_filter_destroy(m);
        }
        let record = timeless(&published().expect("the marked record"));
        assert_eq!(record["mf"], 1, "{record}");
        assert_eq!(record["op"], "hello.SayHello", "{record}");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn a_finished_streams_allocation_serves_the_next_stream() {
        let config = configure(CONFIG);
        let first = unsafe { envoy_dynamic_module_on_http_filter_new(config, envoy()) };
        unsafe { envoy_dynamic_module_on_http_filter_destroy(first) };
        let second = unsafe { envoy_dynamic_module_on_http_filter_new(config, envoy()) };
        assert_eq!(first, second, "the spare allocation is reused");
        unsafe { envoy_dynamic_module_on_http_filter_destroy(second) };
        // A reused allocation starts a fresh call: the same record as ever.
        let want = timeless(&rest().run_memory());
        for _ in 0..3 {
            assert_eq!(timeless(&rest().run_native(config, 1).unwrap()), want);
        }
        let kept = SPARE.with(|s| s.borrow().len());
        assert!((1..=SPARE_STREAMS).contains(&kept), "{kept}");
        unsafe { envoy_dynamic_module_on_http_filter_config_destroy(config) };
    }

    #[test]
    fn the_clock_is_the_wall_clock_in_nanoseconds() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mut scratch = Scratch::default();
        let now =
            wirelens_core::Host::now_ns(&mut unsafe { EnvoyHost::new(envoy(), &mut scratch) })
                .unwrap();
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(before <= now && now <= after, "{before} {now} {after}");
    }

    #[test]
    fn the_abi_version_is_v0_2_0() {
        let v = unsafe { std::ffi::CStr::from_ptr(envoy_dynamic_module_on_program_init()) };
        assert_eq!(v.to_str().unwrap(), "v0.2.0");
    }
}
