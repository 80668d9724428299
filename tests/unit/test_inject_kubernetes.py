"""The durable path in Kubernetes (deploy/kubernetes-tier/durable): the logship sidecar runs what `wirelens inject`
renders for the agent, the committed files are the renderer's (envoy/inject/kubernetes.py), and the example overlay
builds and passes kubeconform -strict like every other manifest here (tools/validate-manifests)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from envoy.inject import kubernetes
from tests.unit.test_inject import FRONT_PROXY, run

ROOT = Path(__file__).resolve().parents[2]
DURABLE = ROOT / "deploy" / "kubernetes-tier" / "durable"


def test_committed_sidecar_is_the_render():
    for path, text in kubernetes.rendered().items():
        assert path.read_text() == text, f"{path} is out of date: run .venv/bin/python -m envoy.inject.kubernetes"


def test_sidecar_runs_the_agent_inject_renders_for_the_same_settings(tmp_path, capsys):
    """The same flags and values as `wirelens inject`'s logship for an Envoy with that admin and node,
    but the pod's own listen address (the kubelet probes the pod IP)."""
    source = tmp_path / "envoy.yaml"
    source.write_text("node: { id: $(POD_NAME) }\nadmin:\n  address:\n    socket_address: "
                      f"{{ address: 127.0.0.1, port_value: {kubernetes.ENVOY_ADMIN_PORT} }}\n" + FRONT_PROXY)
    wasm = tmp_path / "f.wasm"
    wasm.write_bytes(b"\0asm\1\0\0\0")
    code, _, err = run([str(source), "--wasm", str(wasm), "--access-log-path", kubernetes.ACCESS_LOG,
                        "--collector", ":".join(map(str, kubernetes.COLLECTOR)),
                        "--access-log-max-bytes", str(kubernetes.MAX_BYTES)], capsys)
    assert code == 0, err
    printed = shlex.split(err.split("ship the file with the agent beside Envoy")[1].splitlines()[1])
    (patch,) = [YAML(typ="safe").load(text) for text in kubernetes.rendered().values()]
    (sidecar,) = patch["spec"]["template"]["spec"]["initContainers"]
    args = sidecar["args"]
    listen = args.index("-listen") + 1
    assert args[listen] == f"$(POD_IP):{kubernetes.AGENT_PORT}"
    assert printed[1:] == [*args[:listen], f"127.0.0.1:{kubernetes.AGENT_PORT}", *args[listen + 1:]]
    # Envoy and logship see the file at the same path, on the volume they share.
    mounts = {c["name"]: c["volumeMounts"] for c in (sidecar, *patch["spec"]["template"]["spec"]["containers"])}
    assert mounts == {name: [{"name": kubernetes.VOLUME, "mountPath": kubernetes.LOG_DIR}]
                      for name in ("wirelens-logship", "envoy")}
    assert sidecar["restartPolicy"] == "Always"   # a native sidecar: it outlives Envoy


def test_example_overlay_builds_and_validates():
    tools = [ROOT / "bin" / name for name in ("kustomize", "kubeconform")]
    if not all(tool.exists() for tool in tools):
        pytest.fail(f"{', '.join(str(t) for t in tools)} missing: make manifest-tools builds them")
    result = subprocess.run([str(ROOT / "tools" / "validate-manifests"), "--json", str(DURABLE / "example")],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = json.loads(result.stdout)
    assert [c["check"] for c in checks if c["ok"]] == ["render", "kubeconform -strict: Deployment front-proxy (apps/v1)"]
    built = subprocess.run([str(ROOT / "bin" / "kustomize"), "build", str(DURABLE / "example")],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    (deployment,) = YAML(typ="safe").load_all(built)
    spec = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["wirelens-logship"]
    assert {v["name"] for v in spec["volumes"]} == {"envoy-config", kubernetes.VOLUME}
    (envoy,) = spec["containers"]
    assert {m["mountPath"] for m in envoy["volumeMounts"]} == {"/etc/envoy", kubernetes.LOG_DIR}
