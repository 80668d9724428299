"""The checkout's Python programs, importable by module name from anywhere.

The programs live beside what they serve (deploy/local/stack.py, envoy/render.py,
...) and use each other: a benchmark starts the local stack, a test renders
Envoy's config. PROGRAMS says where each lives; install() (run when
wirelens_helpers is imported) lets `import stack` find deploy/local/stack.py.
A program that moves changes one line here.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

from . import ROOT

PROGRAMS = {
    # deploy/local: the local stack
    "stack": "deploy/local/stack.py",
    "demo": "deploy/local/demo.py",
    "clickhouse_server": "deploy/local/clickhouse_server.py",
    "clickhouse_users": "deploy/local/clickhouse_users.py",
    # experiments: the reference experiments E1-E5
    "experiments": "experiments/experiments.py",
    "stacks": "experiments/stacks.py",
    "scenario_runs": "experiments/scenario_runs.py",
    "experiment_sections": "experiments/experiment_sections.py",
    "experiment_tables": "experiments/experiment_tables.py",
    "experiment_report": "experiments/experiment_report.py",
    "crosscheck": "experiments/crosscheck.py",
    # deploy/clickhouse-cluster, deploy/envoy-gateway
    "cluster": "deploy/clickhouse-cluster/cluster.py",
    "manifests": "deploy/envoy-gateway/manifests.py",
    "gateway": "deploy/envoy-gateway/gateway.py",
    # filters: the record's one definition (filters/record.yaml)
    "recordgen": "filters/recordgen.py",
    # envoy, proto, collector
    "render": "envoy/render.py",
    "inject": "envoy/inject.py",
    "opmap": "proto/opmap.py",
    "tier": "collector/tier.py",
    # queries
    "saved": "queries/saved.py",
    "rollup": "queries/rollup.py",
    "cluster_schema": "queries/schema/cluster/cluster_schema.py",
    # bench
    "benchlib": "bench/benchlib.py",
    "filter_cost": "bench/filter_cost.py",
    "filter_instructions": "bench/filter_instructions.py",
    "ingest": "bench/ingest.py",
    "query_speed": "bench/query_speed.py",
    "run_all": "bench/run_all.py",
    "soak": "bench/soak.py",
    "stream_memory": "bench/stream_memory.py",
    "envoy_kill": "bench/envoy_kill.py",
    # tests
    "bad_inputs": "tests/e2e/bad_inputs.py",
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        where = PROGRAMS.get(name) if path is None else None
        if where is None:
            return None
        return importlib.util.spec_from_file_location(name, ROOT / where)


def install() -> None:
    """Make PROGRAMS importable by name (ahead of sys.path, so a same-named file elsewhere never wins)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
