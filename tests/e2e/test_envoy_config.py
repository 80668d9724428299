"""Real Envoy 1.40 against the shipped config: it loads, and refuses a bad plugin configuration loudly."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import ROOT, stack

from envoy import render, wiring


DESCRIPTORS = ROOT / "build" / "proto" / "wirelens.pb"
OPMAP = ROOT / "build" / "opmap.json"


@pytest.fixture(params=wiring.MODULES)
def module(request) -> str:
    """Each test runs on both builds of the filter (envoy/wiring.py, MODULES)."""
    return request.param


def validate(tmp_path, plugin_config: str, module: str) -> subprocess.CompletedProcess:
    config = tmp_path / "envoy.yaml"
    config.write_text(render.render(stack.load_settings({}), wiring.MODULE_FILES[module], plugin_config, DESCRIPTORS,
                                    module=module))
    return subprocess.run([str(stack.envoy_binary()), "--mode", "validate", "-c", str(config),
                           "--disable-hot-restart", "--log-level", "error"],
                          capture_output=True, text=True, timeout=60)


def test_shipped_config_validates(tmp_path, module):
    result = validate(tmp_path, OPMAP.read_text(), module)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("bad_config, field", [
    ({"sample_rate": 2}, "sample_rate: must be a number in [0, 1], got 2"),
    ({"optional_fields": ["sizes"]}, "optional_fields[0]"),
    ({"operations": [{"grpc_path": "/a.B/C", "streaming": "uni"}]}, "operations[0].streaming"),
    ({"sampel_rate": 1}, "sampel_rate"),
])
def test_invalid_plugin_config_is_refused_naming_the_field(tmp_path, bad_config, field, module):
    result = validate(tmp_path, json.dumps(bad_config), module)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # Both builds in the same words: "wirelens: invalid plugin configuration: <field>: ...".
    assert "wirelens: invalid plugin configuration" in output and field in output, output
