"""End to end: independent load tools agree with the proxy, call for call.

ghz (gRPC, the x-wirelens-run metadata) and h2load (REST over HTTP/1.1, the
x-wirelens-run header) each send N calls of hello.SayHello through Envoy at
the same rate as loadgen's open model; wirelens.requests must then hold
exactly N rows for each tool's run id, and each run's medians must stand
in the order physics requires: client ≥ proxy ≥ Envoy's upstream exchange
(µs by Envoy's clock, never 0: the whole milliseconds of
x-envoy-upstream-service-time read 0 and made the last step hold by
itself). ghz comes from `make ghz` (Go module github.com/bojand/ghz,
pinned), h2load from Debian's nghttp2-client; a missing tool fails with the
way to get it.
"""

from __future__ import annotations


import pytest

from tests.e2e.conftest import ROOT

from experiments import crosscheck


CALLS, RATE = 300, 150


def test_ghz_and_h2load_counts_are_exact(local_stack, tmp_path):
    missing = []
    if not crosscheck.GHZ.exists():
        missing.append(f"ghz ({crosscheck.GHZ}: run `make ghz`)")
    if not crosscheck.which("h2load"):
        missing.append("h2load (apt-get install nghttp2-client)")
    if missing:
        pytest.fail("cross-check tools missing (make test-e2e builds/installs them): " + ", ".join(missing))
    rows, notes = crosscheck.run(local_stack, CALLS, RATE, log=lambda _line: None, workdir=tmp_path)
    assert not notes, notes
    tools = {(r["tool"].split()[0], r["protocol"]): r for r in rows}
    assert set(tools) == {("loadgen", "grpc"), ("ghz", "grpc"), ("loadgen", "rest"), ("h2load", "rest")}, tools
    for (tool, protocol), r in tools.items():
        assert r["calls"] == CALLS and r["ok"] == CALLS, r
        assert r["rows"] == CALLS and r["match"], f"{tool} over {protocol}: {r['rows']} rows for {CALLS} calls"
        assert r["proxy_p50_ms"] and r["p50_ms"], r
    # Comparable latency: every tool's median within an order of magnitude of loadgen's for the same protocol.
    for tool, protocol in (("ghz", "grpc"), ("h2load", "rest")):
        other, ours = tools[(tool, protocol)]["p50_ms"], tools[("loadgen", protocol)]["p50_ms"]
        assert ours / 10 < other < ours * 10, (tool, other, ours)
    # Per run, the medians in the order physics requires: client ≥ proxy ≥ Envoy's upstream exchange.
    violations = crosscheck.order_violations(rows)
    assert not violations, "\n".join(violations)
    assert all((r["latency_order"]["upstream_p50_ms"] or 0) > 0 for r in rows), \
        [(r["run_id"], r["latency_order"]) for r in rows]
    assert crosscheck.passed(rows)
    text = crosscheck.render(rows, notes, CALLS, RATE)
    assert text.count("| yes |") == 8 and "| NO |" not in text  # exact counts, then the order, per run
