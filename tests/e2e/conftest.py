"""Bring the local stack up on free ports for the end-to-end tests; always tear it down."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from deploy.local import stack
from wirelens_helpers.ports import free_ports  # noqa: F401  (the tests import it from here)

ROOT = Path(__file__).resolve().parents[2]

ARTIFACTS = ROOT / "test-artifacts"


def jaeger_trace(jaeger: str, trace_id: str) -> dict | None:
    """One trace from Jaeger's API at base URL jaeger, or None while it has no spans (404) or Jaeger does not answer."""
    try:
        with urllib.request.urlopen(f"{jaeger}/api/traces/{trace_id}", timeout=5) as response:
            data = json.load(response).get("data") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    except OSError:
        return None  # Jaeger starting or restarting
    return data[0] if data and data[0].get("spans") else None


def rows(settings, sql: str) -> list[list[str]]:
    """A query's result as TSV rows of strings."""
    out = stack.clickhouse_query(settings, sql + " FORMAT TSV")
    return [line.split("\t") for line in out.splitlines() if line]


@contextlib.contextmanager
def stack_on_free_ports(state_dir: Path, artifact_prefix: str, **overrides: str):
    """A local stack of its own on free ports in state_dir, with settings overridden;
    always torn down, its component logs kept in test-artifacts/<artifact_prefix>-*.log."""
    defaults = stack.load_settings({})
    port_names = [name for name in defaults if name.endswith("_PORT")]
    environ = dict(zip(port_names, map(str, free_ports(len(port_names)))))
    environ.update(WIRELENS_STATE_DIR=str(state_dir), WIRELENS_ENVOY_CONCURRENCY="1", **overrides)
    settings = stack.load_settings(environ)
    lines: list[str] = []
    try:
        stack.up(settings, log=lines.append)
        yield settings
    finally:
        stack.down(settings, log=lines.append)
        # Keep the logs of this run for whoever reads a failure.
        ARTIFACTS.mkdir(exist_ok=True)
        logs = Path(settings["WIRELENS_STATE_DIR"]) / "logs"
        for log in logs.glob("*.log") if logs.exists() else []:
            (ARTIFACTS / f"{artifact_prefix}-{log.name}").write_bytes(log.read_bytes())
        print("\n".join(lines), file=sys.stderr)


@pytest.fixture(scope="session")
def native_stack(tmp_path_factory):
    """The local stack (Go services) with the filter's native build, the Envoy dynamic module
    (WIRELENS_FILTER_MODULE=native): the exactness suites run on it as on the Wasm build's stacks
    (stack_for_module). Started once, by the first native test, and kept for the others."""
    with stack_on_free_ports(tmp_path_factory.mktemp("native-stack"), "e2e-native",
                             WIRELENS_FILTER_MODULE="native") as settings:
        yield settings


def stack_for_module(request, wasm_fixture: str) -> dict:
    """For a fixture parametrized over the filter's builds (envoy/wiring.py, MODULES): the stack
    of that build: the Wasm build's own fixture (wasm_fixture), or the shared native_stack."""
    return request.getfixturevalue(wasm_fixture if request.param == "wasm" else "native_stack")


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory):
    # Every pair of services: the golden tests cover the Python pair (test_local_stack.py) and
    # the JVM pair (test_jvm_stack.py) too.
    with stack_on_free_ports(tmp_path_factory.mktemp("stack"), "e2e", WIRELENS_STACKS="go,python,jvm") as settings:
        yield settings
    os.environ.pop("WIRELENS_STATE_DIR", None)
