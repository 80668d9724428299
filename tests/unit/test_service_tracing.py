"""Unit tests of bench/service_tracing.py's parts: the CPU of a process tree (exited threads included), the
sink's span count, the warm-up's stop rule, the builds it checks first, the table (and make bench's summary of it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from bench import benchlib, run_all, service_tracing
from deploy.local import components
from wirelens_helpers.wait import wait_for

# A process that starts a child and burns ~0.2 s of CPU in a thread that then exits; the child burns as much
# (in its main thread) and says so.
BURN = "import sys,threading,time\nt=time.process_time()\nwhile time.process_time()-t<0.2: pass\n"
PARENT = (
    "import subprocess,sys,threading\n"
    f"child=subprocess.Popen([sys.executable,'-c',{BURN + 'print(1,flush=True)' + chr(10) + 'sys.stdin.read()'!r}],"
    "stdin=subprocess.PIPE,stdout=subprocess.PIPE,text=True)\n"
    f"th=threading.Thread(target=exec,args=({BURN!r},))\nth.start()\nth.join()\n"
    "child.stdout.readline()\nprint(child.pid,flush=True)\nsys.stdin.read()\n"
)


def test_tree_cpu_counts_exited_threads_and_children():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())  # both burns are over
        # Python's join returns before the OS thread is gone: wait until the parent has its main thread only.
        wait_for("the parent's burner thread to exit", lambda: os.listdir(f"/proc/{parent.pid}/task"),
                 lambda tasks: len(tasks) == 1, timeout_s=30, interval_s=0.01)
        total, processes = service_tracing.tree_cpu_ns(parent.pid)
        assert processes == 2
        assert total >= 0.4e9
        # the parent's exited burner thread still counts (the live threads' schedstat kept < 0.1 s of it)
        assert benchlib.process_cpu_ns(parent.pid) >= 0.2e9
        assert benchlib.process_cpu_ns(child) < total
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)


def test_spans_are_counted_per_service_name():
    def resource_spans(name: str | None, spans: int) -> trace_pb2.ResourceSpans:
        attributes = [] if name is None else [common_pb2.KeyValue(key="service.name",
                                                                   value=common_pb2.AnyValue(string_value=name))]
        return trace_pb2.ResourceSpans(resource=resource_pb2.Resource(attributes=attributes),
                                       scope_spans=[trace_pb2.ScopeSpans(spans=[trace_pb2.Span()] * spans)] * 2)

    request = trace_service_pb2.ExportTraceServiceRequest(
        resource_spans=[resource_spans("wirelens-py-rest", 3), resource_spans("wirelens-jvm-grpc", 1),
                        resource_spans("wirelens-py-rest", 1), resource_spans(None, 2)])
    assert service_tracing.spans_by_service(request.SerializeToString()) == {
        "wirelens-py-rest": 8, "wirelens-jvm-grpc": 2, "?": 4}


def test_warm_up_stops_when_steady_past_its_minimum_or_at_its_maximum():
    jvm = service_tracing.Warmup(2000, 20000, 40000)
    assert not service_tracing.settled([300.0, 301.0, 302.0], 18000, jvm)     # steady, minimum not reached
    assert service_tracing.settled([300.0, 301.0, 302.0], 20000, jvm)
    assert service_tracing.settled([150.0, 152.8, 150.3], 20000, jvm)
    assert not service_tracing.settled([400.0, 152.8, 150.3], 20000, jvm)     # two alike are not enough
    assert not service_tracing.settled([300.0, 250.0, 340.0], 38000, jvm)
    assert service_tracing.settled([300.0, 250.0, 340.0], 40000, jvm)         # the maximum ends it regardless


def test_a_missing_build_fails_naming_its_make_target(monkeypatch, tmp_path):
    settings = {mode: service_tracing.mode_settings(mode, 4317, tmp_path / mode) for mode in service_tracing.MODES}
    service_tracing.check_builds(["go", "python", "jvm"], settings)  # this checkout has them all built
    monkeypatch.setattr(components, "JVM_AGENT", tmp_path / "opentelemetry-javaagent.jar")
    with pytest.raises(SystemExit, match=r"stack jvm: .*opentelemetry-javaagent.jar is missing: run `make jvm-services`"):
        service_tracing.check_builds(["go", "jvm"], settings)
    monkeypatch.setattr(components, "BUILD", tmp_path)
    with pytest.raises(SystemExit, match=r"stack python: .* is missing: run `make python-services`"):
        service_tracing.check_builds(["python"], settings)
    monkeypatch.setattr(components, "BIN", tmp_path)
    with pytest.raises(SystemExit, match=r"stack go: .*rest-server is missing: run `make services`"):
        service_tracing.check_builds(["go"], settings)
    with pytest.raises(SystemExit, match="expected a comma-separated list of go, python, jvm"):
        service_tracing.parse_stacks("go,ruby")
    assert service_tracing.parse_stacks("jvm,go") == ["go", "jvm"]


def test_one_row_per_stack_and_protocol_and_make_bench_summarizes_them():
    runs = [{"server": server.label, "tracing": mode, "service_cpu_us_per_call": cpu, "p50_ms": 0.1 * cpu,
             "rate_per_s": 1000.0}
            for name in ("python", "jvm") for server in service_tracing.STACKS[name]
            for mode, cpu in (("off", 100.0), ("on", 150.0), ("off", 120.0), ("on", 170.0), ("off", 110.0))]
    spans = {"python rest": {"spans_per_call": 1.0}}
    table = service_tracing.summarize(runs, spans)
    assert list(table) == ["python rest", "python grpc", "jvm rest webflux", "jvm rest mvc", "jvm grpc"]
    row = table["python rest"]
    assert row["off"]["cpu_us_per_call"] == 110.0 and row["on"]["cpu_us_per_call"] == 160.0
    assert row["added_cpu_us_per_call"] == 50.0 and row["ratio"] == pytest.approx(160 / 110)
    assert row["spans_per_call"] == 1.0 and table["jvm grpc"]["spans_per_call"] is None
    result = {"quick": False, "calls": 5000, "reps": 3, "concurrency": 4, "exports": 9, "export_bytes": 1000,
              "table": table}
    rendered = service_tracing.render(result)
    assert "jvm rest mvc" in rendered and "+50.0" in rendered
    lines = run_all.service_tracing_summary(result)
    assert len(lines) == 1 + len(table) and "jvm rest webflux" in lines[3]
