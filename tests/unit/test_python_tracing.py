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
# services/python is the servers' own PYTHONPATH, not a package of the checkout: the switch runs as the servers run it.
SERVICES_PATH = {"PYTHONPATH": os.pathsep.join([str(ROOT / "services" / "python"), str(ROOT / "build" / "python" / "gen")])}

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}


def run_tracing(expression: str, environ: dict[str, str]) -> subprocess.CompletedProcess:
    """Prints `expression` (over wirelens_py.tracing and the dict `environ`) evaluated in a fresh interpreter."""
    code = f"import json, sys\nfrom wirelens_py import tracing\nenviron = json.loads(sys.argv[1])\nprint(json.dumps({expression}))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "WIRELENS_SERVICE_TRACING"))}
    return subprocess.run([sys.executable, "-c", code, json.dumps(environ)], env={**env, **SERVICES_PATH},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("environ, expected", [
    ({"WIRELENS_SERVICE_TRACING": "on"}, "on"),
    ({"WIRELENS_SERVICE_TRACING": "off", **ENDPOINT}, "off"),
    ({"WIRELENS_SERVICE_TRACING": "OFF"}, "off"),
    ({}, "off"),  # started by hand, no endpoint: sends nothing to 127.0.0.1:4317
    (ENDPOINT, "on"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9"}, "on"),
])
def test_mode(environ, expected):
    result = run_tracing("tracing.mode(environ)", environ)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected


def test_a_bad_value_or_protocol_is_refused():
    bad_value = run_tracing("tracing.mode(environ)", {"WIRELENS_SERVICE_TRACING": "yes"})
    assert bad_value.returncode != 0 and "WIRELENS_SERVICE_TRACING='yes'" in bad_value.stderr, bad_value.stderr
    bad_protocol = run_tracing("bool(tracing.provider('x', environ))", {"WIRELENS_SERVICE_TRACING": "on",
                                                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    assert bad_protocol.returncode != 0 and "grpc only" in bad_protocol.stderr, bad_protocol.stderr


def sdk_modules_after_import(environ: dict[str, str]) -> list[str]:
    """The opentelemetry.sdk modules a fresh interpreter holds after importing both servers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "WIRELENS_SERVICE_TRACING"))}
    env.update(environ, **SERVICES_PATH)
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
