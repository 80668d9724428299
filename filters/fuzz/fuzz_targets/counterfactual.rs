//! The counterfactual's decoders and bounded capture on any input. Input
//! format and checks: `drivers/counterfactual.rs` (shared with the native
//! test that replays this target's corpus in `cargo test`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/counterfactual.rs"]
mod counterfactual;

fuzz_target!(|data: &[u8]| counterfactual::check(data));
