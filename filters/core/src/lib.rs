//! Host-free core of the wirelens proxy-wasm filter.
//!
//! Nothing in this crate talks to a proxy: the wasm adapter (`wirelens-filter`)
//! reads headers, bodies and the clock from the host and drives a [`Call`];
//! tests and fuzz targets drive the same types with plain bytes.
//!
//! * [`classify`]: protocol from the request `content-type`.
//! * [`frame`]: streaming gRPC / gRPC-Web length-prefixed frame parser and the
//!   gRPC-Web trailer-frame block parser.
//! * [`base64`]: incremental, allocation-free base64 decoder for grpc-web-text.
//! * [`percent`]: `grpc-message` percent-decoding.
//! * [`headers`]: reader for the proxy-wasm serialized header-map format.
//! * [`config`]: the plugin configuration (operation map + publishing options).
//! * [`opmap`]: operation map, `google.api.http` template matching.
//! * [`sample`]: the per-call sampling decision.
//! * [`record`]: the per-call state machine and the published record.
//! * [`json`]: the compact JSON writer the record is serialized with.

pub mod base64;
pub mod classify;
pub mod config;
pub mod frame;
pub mod headers;
pub mod json;
pub mod opmap;
pub mod percent;
pub mod record;
pub mod sample;

pub use classify::{classify, Protocol};
pub use config::{Config, Fields, Options};
pub use opmap::{ConfigError, OpMap, Streaming};
pub use record::{BodySource, Call, Record, KEYS, PROPERTY_RECORD, WIRE_KEYS};
pub use sample::Sampler;
