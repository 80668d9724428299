"""The Python pair's tracing switch (services/python/wirelens_py/tracing.py): on/off/unset, and off
loading no OpenTelemetry SDK at all. What the spans look like behind Envoy: tests/e2e/test_service_traces.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "services" / "python"))

from wirelens_py import tracing  # noqa: E402

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.parametrize("environ, expected", [
    ({"WIRELENS_SERVICE_TRACING": "on"}, "on"),
    ({"WIRELENS_SERVICE_TRACING": "off", **ENDPOINT}, "off"),
    ({"WIRELENS_SERVICE_TRACING": "OFF"}, "off"),
    ({}, "off"),  # started by hand, no endpoint: sends nothing to 127.0.0.1:4317
    (ENDPOINT, "on"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9"}, "on"),
])
def test_mode(environ, expected):
    assert tracing.mode(environ) == expected


def test_a_bad_value_or_protocol_is_refused():
    with pytest.raises(SystemExit, match="WIRELENS_SERVICE_TRACING='yes'"):
        tracing.mode({"WIRELENS_SERVICE_TRACING": "yes"})
    with pytest.raises(SystemExit, match="grpc only"):
        tracing.provider("x", {"WIRELENS_SERVICE_TRACING": "on", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})


def sdk_modules_after_import(environ: dict[str, str]) -> list[str]:
    """The opentelemetry.sdk modules a fresh interpreter holds after importing both servers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "WIRELENS_SERVICE_TRACING"))}
    env.update(environ, PYTHONPATH=os.pathsep.join([str(ROOT / "services" / "python"),
                                                     str(ROOT / "build" / "python" / "gen")]))
    code = ("import json, sys, wirelens_py.rest_server, wirelens_py.grpc_server\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_off_loads_no_sdk_and_on_does():
    gen = ROOT / "build" / "python" / "gen" / "wirelens" / "v1" / "hello_pb2.py"
    assert gen.exists(), "build/python/gen missing: make python-services builds it"
    assert sdk_modules_after_import({"WIRELENS_SERVICE_TRACING": "off", **ENDPOINT}) == []
    assert "opentelemetry.sdk.trace" in sdk_modules_after_import({"WIRELENS_SERVICE_TRACING": "on", **ENDPOINT})
