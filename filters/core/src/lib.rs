//! Host-free core of the wirelens proxy-wasm filter.
//!
//! Nothing in this crate talks to a proxy. A [`Call`] is driven by its
//! caller: each stream callback passes a [`Host`] (what the core asks of
//! the proxy: a header map's entries or size, body bytes at an offset, the
//! clock, one publication), and the call decides which of those to make.
//! The wasm adapter (`wirelens-filter`) implements [`Host`] over the
//! proxy-wasm ABI, the native one (`wirelens-native`) over Envoy's
//! dynamic-module ABI; tests, fuzz targets and harnesses drive the same
//! code through `MemoryHost`. Configuration and operation map are shared
//! by reference ([`std::sync::Arc`]), so the native module's configuration,
//! made on Envoy's main thread, serves every worker.
//!
//! Feature `test-support`: the API only tests, fuzz targets and harnesses
//! use (`MemoryHost`, `headers::serialize`, `frame::encode_frame`,
//! `OpMap::from_json`, the parsers' and the call's inspection methods, a
//! few builders). The filter's own build never enables it; this crate's
//! tests, `wirelens-filter`'s tests, `filters/fuzz` and `filters/abi` do.
//!
//! * [`classify`]: protocol from the request `content-type`.
//! * [`frame`]: streaming gRPC / gRPC-Web length-prefixed frame parser and the
//!   gRPC-Web trailer-frame block parser.
//! * [`base64`]: incremental, allocation-free base64 decoder for grpc-web-text.
//! * [`percent`]: `grpc-message` percent-decoding.
//! * [`headers`]: a header map as the core reads it ([`HeaderEntries`]), and
//!   the reader for the proxy-wasm serialized header-map format.
//! * [`config`]: the plugin configuration (operation map + publishing options).
//! * [`opmap`]: operation map, `google.api.http` template matching.
//! * [`sample`]: the per-call sampling decision (one thread's, or shared).
//! * [`host`]: the [`Host`] trait a call is driven with, and `MemoryHost`.
//! * [`call`]: the per-call state machine: what it asks of the host, when it
//!   publishes.
//! * [`body`]: how one direction of a body is read (windows, frame parser,
//!   base64).
//! * [`record`]: the published record and its JSON writer.
//! * [`names`]: the record's attribute names and the short names it is
//!   published under.
//! * [`json`]: the compact JSON object writer.
//! * `validate`: what the configuration's two parsers share ([`config`],
//!   [`opmap`]): [`ConfigError`], which names the offending field, and
//!   the JSON shape checks.

pub mod base64;
pub mod body;
pub mod call;
pub mod classify;
pub mod config;
pub mod counterfactual;
pub mod frame;
pub mod headers;
pub mod host;
pub mod json;
pub mod names;
pub mod opmap;
pub mod percent;
pub mod record;
pub mod sample;
mod validate;

pub use call::Call;
pub use classify::{classify, Protocol};
pub use config::{Config, Fields, Options};
pub use headers::{HeaderEntries, Serialized};
pub use host::{Body, HeaderMap, Host, FILTER_STATE_RECORD, PROPERTY_RECORD};
#[cfg(any(test, feature = "test-support"))]
pub use host::{HostCalls, MemoryHost, Refusals};
pub use names::{KEYS, WIRE_KEYS};
pub use opmap::{OpMap, Streaming};
pub use record::Record;
pub use sample::{Sampler, SharedSampler};
pub use validate::ConfigError;
