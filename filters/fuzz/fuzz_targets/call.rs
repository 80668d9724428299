//! A whole call through `wirelens_core::Call` and a `MemoryHost`, as the
//! adapter drives it: request and response headers, bodies in chunks,
//! trailers, resets, the log phase. Input format and checks: `drivers/call.rs` (shared with the
//! native test that replays this target's corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/call.rs"]
mod call;
#[path = "../drivers/common.rs"]
mod common;

fuzz_target!(|data: &[u8]| call::check(data));
