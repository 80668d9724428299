"""The cross-check's latency order (experiments/crosscheck.py): per run, client ≥ proxy ≥ upstream medians (the
upstream exchange in µs, Envoy's clock)."""

from experiments import crosscheck


def tool_run(tool: str, client_ms: float, proxy_rank_us: int, upstream_rank_us: int) -> dict:
    row = {"tool": tool, "protocol": "grpc", "run_id": f"xc-{tool}", "calls": 10, "rows": 10, "match": True,
           "p50_ms": client_ms, "p99_ms": client_ms, "send_p50_ms": client_ms, "rate": 10.0,
           "proxy_p50_ms": proxy_rank_us / 1000, "proxy_p99_ms": proxy_rank_us / 1000}
    row["latency_order"] = crosscheck.latency_order(row, {"p50_rank_us": proxy_rank_us,
                                                          "upstream_p50_rank_us": upstream_rank_us})
    return row


def test_medians_in_order_pass():
    rows = [tool_run("ghz", 1.25, 900, 310), tool_run("loadgen (open model)", 2.0, 2000, 2000)]
    assert crosscheck.order_violations(rows) == [] and crosscheck.passed(rows)


def test_a_run_out_of_order_fails_naming_the_run_and_its_three_medians():
    client_below_proxy = tool_run("ghz", 0.8, 900, 148)
    # Envoy's upstream exchange in µs: 901 µs against the proxy's 900 is out of order (in whole ms both read 0)
    proxy_below_upstream = tool_run("h2load", 3.0, 900, 901)
    violations = crosscheck.order_violations([tool_run("loadgen (open model)", 2.0, 1000, 1000),
                                              client_below_proxy, proxy_below_upstream])
    assert violations == [
        "run xc-ghz (ghz, grpc): medians client 0.800 ms ≥ proxy 0.900 ms ≥ upstream 0.148 ms: VIOLATED",
        "run xc-h2load (h2load, grpc): medians client 3.000 ms ≥ proxy 0.900 ms ≥ upstream 0.901 ms: VIOLATED"]
    assert not crosscheck.passed([client_below_proxy])
    text = crosscheck.render([client_below_proxy], [], 10, 10.0)
    assert "| ghz | grpc | `xc-ghz` | 0.800 | 0.900 | 0.148 | NO |" in text


def test_no_proxy_rows_is_a_violation():
    row = tool_run("ghz", 1.0, 500, 100)
    row["latency_order"] = crosscheck.latency_order(row, {})
    assert not row["latency_order"]["holds"] and crosscheck.order_violations([row])


def test_runs_recorded_before_the_check_render_without_it():
    row = tool_run("ghz", 1.0, 500, 100)
    del row["latency_order"]
    assert "client ≥ proxy ≥ upstream" not in crosscheck.render([row], [], 10, 10.0)


def test_a_run_without_an_upstream_split_is_a_violation():
    # rows written before the µs columns existed (or no upstream served the calls): the median is NULL
    row = tool_run("ghz", 1.0, 500, 100)
    row["latency_order"] = crosscheck.latency_order(row, {"p50_rank_us": 500, "upstream_p50_rank_us": None})
    assert not row["latency_order"]["holds"] and row["latency_order"]["upstream_p50_ms"] is None
