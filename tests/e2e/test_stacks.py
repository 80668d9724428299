"""`make experiments STACK=...` in its quick size: E1 and E2 on the Go and the Python pair,
the "protocol versus stack" report from the proxy's rows (deploy/local/stacks.py)."""

from __future__ import annotations

import json

import conftest  # noqa: F401  (puts deploy/local on the path)
import stacks  # noqa: E402  (deploy/local/stacks.py)


def test_quick_protocol_versus_stack_report(local_stack, tmp_path):
    out = tmp_path / "stacks-quick.md"
    lines: list[str] = []
    assert stacks.run(local_stack, ["go", "python"], "quick", out, log=lines.append) == 0, "\n".join(lines)
    results = json.loads(out.with_suffix(".json").read_text())
    got = {(r["operation"], r["stack"]): r for r in results["rows"]}
    # every operation of E1 and E2 on both stacks, with both protocols and an interval around the ratio
    assert sorted(got) == sorted((op, st) for op in stacks.PUBLISHED for st in ("go", "python"))
    for key, row in got.items():
        assert int(row["n_rest"]) > 0 and int(row["n_grpc"]) > 0, key
        assert float(row["median_ci_low"]) <= float(row["median_ratio"]) <= float(row["median_ci_high"]), key
        # the same payloads on both stacks: the proxy counts the same gRPC reply bytes
    for op in stacks.PUBLISHED:
        assert got[(op, "go")]["resp_body_grpc_b"] == got[(op, "python")]["resp_body_grpc_b"] or \
            op == "math.CalculateFactorial", op  # factorial's time_taken float varies in size
    steps = {(s["stack"], s["operation"], s["protocol"]): s for s in results["steps"]}
    assert len(steps) == 12 and all(s["calls"] > 0 for s in steps.values())
    # E1's 10 s steps span many procmetrics samples: CPU per call for each stack's services
    for st in ("go", "python"):
        for protocol in ("rest", "grpc"):
            cpu = steps[(st, "math.CalculateFactorial", protocol)]["cpu"]
            assert cpu["service"] is not None and cpu["service"] > 0, (st, protocol, cpu)
    text = out.read_text()
    assert "## What follows the protocol, what follows the framework" in text
    assert "## CPU per call per stack" in text
