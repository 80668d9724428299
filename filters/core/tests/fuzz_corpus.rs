//! Replays the `call` fuzz target's committed corpus natively, so
//! `cargo test` checks every seed (among them the bad-input suite's
//! requests, `filters/fuzz/corpus/call/bad_*`) without cargo-fuzz.

#[path = "../../fuzz/drivers/call.rs"]
mod call;

use std::path::Path;

#[test]
fn call_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/call");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= 30,
        "only {} seeds in {}",
        seeds.len(),
        dir.display()
    );
    for seed in seeds {
        let data = std::fs::read(&seed).unwrap();
        let outcome = std::panic::catch_unwind(|| call::check(&data));
        assert!(
            outcome.is_ok(),
            "seed {} broke an invariant",
            seed.display()
        );
    }
}
