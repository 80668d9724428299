//! One call through `wirelens_core::Call` in any callback order, with host
//! refusals: phases missing, repeated, out of order. Input format and
//! checks: `drivers/call_sequence.rs` (shared with the native test that
//! replays this target's corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/call_sequence.rs"]
mod call_sequence;
#[path = "../drivers/common.rs"]
mod common;

fuzz_target!(|data: &[u8]| call_sequence::check(data));
