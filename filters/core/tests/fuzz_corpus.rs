//! Replays the committed corpora of the whole-call fuzz targets (`call`,
//! `call_sequence`) and of `counterfactual` natively, so `cargo test` checks every seed (among
//! them the bad-input suite's requests, `filters/fuzz/corpus/call/bad_*`)
//! without cargo-fuzz.

#[path = "../../fuzz/drivers/call.rs"]
mod call;
#[path = "../../fuzz/drivers/call_sequence.rs"]
mod call_sequence;
#[path = "../../fuzz/drivers/common.rs"]
mod common;
#[path = "../../fuzz/drivers/counterfactual.rs"]
mod counterfactual;

use std::path::Path;

#[test]
fn call_corpus_replays() {
    replay("call", 30, call::check);
}

#[test]
fn call_sequence_corpus_replays() {
    replay("call_sequence", 8, call_sequence::check);
}

#[test]
fn counterfactual_corpus_replays() {
    replay("counterfactual", 200, counterfactual::check);
}

fn replay(target: &str, at_least: usize, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= at_least,
        "only {} seeds in {}",
        seeds.len(),
        dir.display()
    );
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(
            outcome.is_ok(),
            "seed {} broke an invariant",
            seed.display()
        );
    }
}
