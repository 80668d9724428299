"""Bring the local stack up on free ports for the end-to-end tests; always tear it down."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
import stack  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"


free_ports = stack.free_ports


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory):
    defaults = stack.load_settings({})
    port_names = [name for name in defaults if name.endswith("_PORT")]
    environ = dict(zip(port_names, map(str, free_ports(len(port_names)))))
    environ["WIRELENS_STATE_DIR"] = str(tmp_path_factory.mktemp("stack"))
    environ["WIRELENS_ENVOY_CONCURRENCY"] = "1"
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
            (ARTIFACTS / f"e2e-{log.name}").write_bytes(log.read_bytes())
        print("\n".join(lines), file=sys.stderr)
        os.environ.pop("WIRELENS_STATE_DIR", None)
