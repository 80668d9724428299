"""bench/process_metrics.py's comparison, on synthetic points (the real run needs a stack: `python -m
bench.process_metrics`): the seconds both sources cover, the phase bound at a busy end, RSS of the living."""

from __future__ import annotations

import argparse

from bench import process_metrics as pm

ARGS = argparse.Namespace(cpu_abs=0.2, cpu_rel=0.05, rss_abs=2.0, rss_rel=0.05)


def cpu_series(source, component, pid, seconds, rate, offset, start=0.0):
    """Points at whole seconds of a process using `rate` cores, read `offset` s into each second."""
    out = []
    for t in seconds:
        total = start + rate * (t - seconds[0] + offset)
        out += [(source, component, pid, "user", t, total * 0.75), (source, component, pid, "system", t, total * 0.25)]
    return out


def rss(source, component, pid, seconds, mib):
    return [(source, component, pid, "", t, mib * pm.MIB) for t in seconds]


def test_a_steady_process_agrees_and_a_killed_busy_one_is_within_its_phase_bound():
    t0, t1 = 100, 130
    points = (cpu_series("procmetrics", "envoy", 7, range(98, 132), 0.1, 0.0)
              + cpu_series("hostmetrics", "envoy", 7, range(98, 132), 0.1, 0.6)
              # the Collector, 0.8 cores, killed at 110.9: procmetrics' last point delivered is 109,
              # hostmetrics (queued, retried) has 110 too, read 0.6 s later in each second
              + cpu_series("procmetrics", "collector", 8, range(98, 110), 0.8, 0.0)
              + cpu_series("hostmetrics", "collector", 8, range(98, 111), 0.8, 0.6)
              # its successor from 115
              + cpu_series("procmetrics", "collector", 9, range(115, 132), 0.3, 0.0)
              + cpu_series("hostmetrics", "collector", 9, range(116, 132), 0.3, 0.6))
    memory = (rss("procmetrics", "collector", 8, range(98, 110), 300) + rss("hostmetrics", "collector", 8,
                                                                             range(98, 111), 300)
              + rss("procmetrics", "collector", 9, range(115, 132), 100)
              + rss("hostmetrics", "collector", 9, range(116, 132), 101)
              + rss("procmetrics", "envoy", 7, range(98, 132), 150) + rss("hostmetrics", "envoy", 7, range(98, 132), 150))
    result = pm.compare(points, memory, t0, t1, ARGS)
    rows = {r["component"]: r for r in result["components"]}
    assert rows["envoy"]["cpu_diff_s"] == 0 and rows["envoy"]["agrees"], rows["envoy"]
    collector = rows["collector"]
    # pid 8 over 100..109 (the last second both have), pid 9 over 116..130
    assert collector["seconds_compared"] == {8: (100, 109), 9: (116, 130)}, collector
    assert abs(collector["cpu_s_procmetrics"] - (0.8 * 9 + 0.3 * 14)) < 1e-6
    assert collector["cpu_diff_s"] == 0  # same phase at both ends of each span: the deltas are equal
    assert collector["cpu_phase_bound_s"] >= 0.8 + 0.3, collector  # the killed one's busy ends
    assert collector["rss_mib_procmetrics"] == 100.0 and collector["rss_mib_hostmetrics"] == 101.0  # the living
    assert result["agree"], result


def test_a_real_difference_beyond_the_bound_is_reported():
    points = (cpu_series("procmetrics", "envoy", 7, range(98, 132), 0.1, 0.0)
              + cpu_series("hostmetrics", "envoy", 7, range(98, 132), 0.13, 0.0))  # 30 % more
    result = pm.compare(points, [], 100, 130, ARGS)
    envoy = result["components"][0]
    assert not envoy["agrees"] and "CPU differs" in envoy["problems"][0], envoy
    assert not result["agree"]


def test_the_wait_state_is_refused():
    points = cpu_series("hostmetrics", "envoy", 7, range(98, 132), 0.1, 0.0)
    points.append(("hostmetrics", "envoy", 7, "wait", 120, 0.5))
    try:
        pm.compare(points, [], 100, 130, ARGS)
    except pm.Broken as exc:
        assert "wait" in str(exc)
    else:
        raise AssertionError("a wait state must fail the comparison")
