"""`make experiments STACK=...` in its quick size: E1 and E2 on the Go and the Python pair, E2, E3
and E4 on the JVM pair (E4's REST also on Spring Web MVC), the "protocol versus stack" report from
the proxy's rows and the CPU steps per stack (experiments/stacks.py)."""

from __future__ import annotations

import json

from experiments import stacks


EXPERIMENT = {"math.CalculateFactorial": "e1", "hello.SayHello": "e2", "hello.SayHelloBig": "e2",
              "people.Register": "e3", "catalog.GetProduct": "e4", "catalog.ListProducts": "e4"}
ALL = ["go", "python", "jvm"]


def test_quick_protocol_versus_stack_report(local_stack, tmp_path):
    out = tmp_path / "stacks-quick.md"
    lines: list[str] = []
    assert stacks.run(local_stack, ALL, "quick", out, log=lines.append) == 0, "\n".join(lines)
    results = json.loads(out.with_suffix(".json").read_text())
    got = {(r["operation"], r["stack"]): r for r in results["rows"]}
    # every operation on every stack that serves its experiment, both protocols, an interval around the ratio
    assert sorted(got) == sorted((op, st) for op in stacks.PUBLISHED for st in ALL
                                 if EXPERIMENT[op] in stacks.SERVES[st])
    assert {st for _, st in got} == set(ALL)
    for key, row in got.items():
        assert int(row["n_rest"]) > 0 and int(row["n_grpc"]) > 0, key
        assert float(row["median_ci_low"]) <= float(row["median_ratio"]) <= float(row["median_ci_high"]), key
    # the same payloads on every stack: the proxy counts the same gRPC reply and REST body bytes
    for op in ("hello.SayHello", "hello.SayHelloBig", "people.Register", "catalog.ListProducts"):
        sizes = {st: (got[(op, st)]["resp_body_grpc_b"], got[(op, st)]["resp_body_rest_b"])
                 for st in ALL if (op, st) in got}
        assert len(set(sizes.values())) == 1, (op, sizes)
    steps = {(s["exp"], s["stack"], s["name"]): s for s in results["steps"]}
    assert all(s["calls"] > 0 for s in steps.values())
    # E4's REST on Spring Web MVC too (stack jvm-mvc), with its latency at the proxy
    mvc = [s for s in results["steps"] if s["stack"] == "jvm-mvc"]
    assert mvc and {s["protocol"] for s in mvc} == {"rest"} and all(s["latency"]["n"] for s in mvc)
    # The CPU steps span many procmetrics samples: CPU per call for each stack's services and Envoy
    for st in ALL:
        for protocol in ("rest", "grpc"):
            cpu = steps[("cpu", st, f"cpu-{protocol}")]["cpu"]
            assert cpu["service"] is not None and cpu["service"] > 0 and cpu["envoy"], (st, protocol, cpu)
    text = out.read_text()
    assert "## What follows the protocol, what follows the framework" in text
    assert "## E4: Spring Web MVC, Spring WebFlux, grpc-java" in text
    assert "## CPU per call per stack" in text and "Service CPU per call, gRPC ÷ REST" in text
