"""Unit tests of bench/soak.py's bookkeeping: the RSS slope, process trees, restarts, the table."""

from __future__ import annotations

import os
from pathlib import Path

from bench import soak

ROOT = Path(__file__).resolve().parents[2]


def test_slope_fits_only_the_second_half_in_mib_per_minute():
    warm_up = [(t, 100.0 + t) for t in range(0, 60, 10)]       # steep growth while warming up
    flat = [(t, 200.0) for t in range(60, 120, 10)]
    assert soak.slope_mib_per_min(warm_up + flat) == 0.0
    assert soak.slope_mib_per_min([(t, 2.0 * t / 60) for t in range(0, 600, 30)]) == 2.0
    assert soak.slope_mib_per_min([(0, 5.0)]) == 0.0  # too few points: no slope


def test_process_tree_holds_the_root_and_its_descendants_only():
    table = {1: (0, 0, 0.0), 10: (1, 0, 0.0), 11: (10, 0, 0.0), 12: (11, 0, 0.0), 20: (1, 0, 0.0)}
    assert soak.process_tree(10, table) == [10, 11, 12]
    assert soak.process_tree(99, table) == []  # gone


def test_process_table_sees_this_process_with_memory_and_cpu():
    ppid, rss, cpu = soak.process_table()[os.getpid()]
    assert ppid == os.getppid() and rss > 1 << 20 and cpu > 0


def test_a_restart_is_a_new_pid_and_cpu_of_killed_processes_still_counts(monkeypatch, tmp_path):
    pids = iter([[100], [], [200], [200]])
    cpu = {100: 3.0, 200: 1.5}
    monkeypatch.setattr(soak.stack, "read_pid", lambda settings, name: 1)
    current: list[int] = []

    def table():
        current[:] = next(pids)
        return {p: (1, 4 << 20, cpu[p]) for p in current}

    monkeypatch.setattr(soak, "process_table", table)
    monkeypatch.setattr(soak, "process_tree", lambda root, t: sorted(t))
    sampler = soak.Sampler({}, ["collector"], 1.0, 0.0)
    for _ in range(4):
        sampler.sample()
    assert sampler.restarts == {"collector": 1}
    assert [s["components"]["collector"]["cpu_s"] for s in sampler.samples] == [3.0, 3.0, 4.5, 4.5]
    assert sampler.samples[1]["components"]["collector"]["rss_mib"] == 0  # down between kill and restart
