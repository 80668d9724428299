"""Process metrics: CPU time and memory of every stack component, as OTLP metrics in ClickHouse.

procmetrics (collector/cmd/procmetrics) samples /proc every second for each
component's process group and exports process.cpu.time (cumulative seconds,
state=user|system) into otel.otel_metrics_sum and process.memory.usage (RSS
bytes) into otel.otel_metrics_gauge, with resource attributes service.name
(the component) and process.pid. CPU per call = Δ process.cpu.time / calls.
"""

from __future__ import annotations

import json
import subprocess
import uuid


from tests.e2e.conftest import ROOT, rows, stack
from wirelens_helpers.wait import wait_for

SERVICES = ("envoy", "rest-service", "grpc-service", "collector")


def cpu_points(settings, service: str, pid: int, state: str = "user") -> list[tuple[str, float]]:
    """(time, seconds) of one process's CPU time in one state, oldest first.

    The exporter stores TimeUnix in whole seconds; procmetrics samples once a
    second at the start of each, and ties (if any) order by value.
    """
    return [(t, float(v)) for t, v in rows(
        settings, "SELECT TimeUnix, Value FROM otel.otel_metrics_sum "
                  f"WHERE MetricName = 'process.cpu.time' AND ServiceName = '{service}' "
                  f"AND ResourceAttributes['process.pid'] = '{pid}' AND Attributes['state'] = '{state}' "
                  "ORDER BY TimeUnix, Value")]


def test_cpu_time_of_envoy_and_grpc_service_grows_with_traffic(local_stack):
    settings = local_stack
    pids = {name: stack.read_pid(settings, name) for name in SERVICES}
    assert all(pids.values()), pids
    before = {}
    for name in ("envoy", "grpc-service"):
        points = wait_for(f"process.cpu.time points of {name} (pid {pids[name]})",
                          lambda: cpu_points(settings, name, pids[name]), lambda p: len(p) >= 1)
        before[name] = points[-1]

    result = subprocess.run(
        [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}",
         "-protocol", "grpc", "-operation", "hello.SayHello", "-n", "1500", "-concurrency", "4",
         "-run-id", f"e2e-procmetrics-{uuid.uuid4().hex[:8]}", "-timeout", "60s"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["ok"] == 1500

    for name in ("envoy", "grpc-service"):
        t0, v0 = before[name]
        points = wait_for(f"process.cpu.time of {name} above {v0}s (at {t0})",
                          lambda: cpu_points(settings, name, pids[name]),
                          lambda p: any(t > t0 and v > v0 for t, v in p))
        for state in ("user", "system"):
            values = [v for _, v in cpu_points(settings, name, pids[name], state)]
            assert values == sorted(values), f"{name} {state}: cumulative CPU time went down: {values}"

    # The shape: cumulative, monotonic seconds by state; RSS as a gauge; one resource per process.
    shape = rows(settings, "SELECT DISTINCT MetricUnit, AggregationTemporality, IsMonotonic, Attributes['state'] "
                           "FROM otel.otel_metrics_sum WHERE MetricName = 'process.cpu.time' "
                           f"AND ServiceName = 'envoy' AND ResourceAttributes['process.pid'] = '{pids['envoy']}' "
                           "ORDER BY 4")
    assert shape == [["s", "2", "true", "system"], ["s", "2", "true", "user"]], shape
    for name in SERVICES:
        rss = wait_for(f"process.memory.usage of {name}",
                       lambda: rows(settings, "SELECT max(Value), any(MetricUnit) FROM otel.otel_metrics_gauge "
                                              f"WHERE MetricName = 'process.memory.usage' AND ServiceName = '{name}' "
                                              f"AND ResourceAttributes['process.pid'] = '{pids[name]}'"),
                       lambda r: r and r[0][0] not in ("", "0", "nan"))
        assert float(rss[0][0]) > 1 << 20 and rss[0][1] == "By", (name, rss)
