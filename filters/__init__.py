"""The wirelens filter (Rust: the host-free core, the proxy-wasm adapter, fuzzing, the ABI tests),
and the per-call record's one definition with its generator (record.yaml, recordgen.py)."""
