"""The durable path in Kubernetes: logship as a sidecar of each Envoy pod (deploy/kubernetes-tier/durable/sidecar).

The sidecar runs exactly the command `wirelens inject` renders for the agent
(agent.render_agent), for a pod: the access log on an emptyDir both
containers mount, the Collector as the node-local agent Service
(otel-collector.wirelens, internalTrafficPolicy Local), rotation through
Envoy's admin on the pod's loopback, the pod's name as node_name, and
/healthz on the pod IP for the kubelet's probes.

    .venv/bin/python -m envoy.inject.kubernetes            rewrite the committed files
    .venv/bin/python -m envoy.inject.kubernetes --check    exit 1 if they differ from the render
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ruamel.yaml import YAML

from . import agent
from .model import Options

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "deploy" / "kubernetes-tier" / "durable" / "sidecar"
LOG_DIR = "/var/log/wirelens"
ACCESS_LOG = f"{LOG_DIR}/access.jsonl"
COLLECTOR = ("otel-collector.wirelens.svc.cluster.local", 4317)
ENVOY_ADMIN_PORT = 9901             # the pod's Envoy admin, on the pod's loopback
AGENT_PORT = 13135
ROTATE_BYTES = 64 << 20
MAX_BYTES = 512 << 20               # the emptyDir's sizeLimit (1 GiB) holds it with room for one more file
VOLUME = "wirelens-access-log"
IMAGE = "wirelens/logship"          # deploy/kubernetes-tier/durable/sidecar/logship.Dockerfile; `kustomize edit set image`
HEADER = ("# Rendered by `python -m envoy.inject.kubernetes` from the agent `wirelens inject` renders\n"
          "# (envoy/inject/agent.py): edit the renderer, not this file.\n")


def logship_args() -> list[str]:
    """logship's flags in the pod: agent.render_agent's, with the pod's identity and address."""
    options = Options(wasm=None, collector_host=COLLECTOR[0], collector_port=COLLECTOR[1], access_log="file",
                      access_log_path=ACCESS_LOG, agent="logship", agent_port=AGENT_PORT, rotate_bytes=ROTATE_BYTES,
                      max_bytes=MAX_BYTES)
    bootstrap = {"node": {"id": "$(POD_NAME)"},
                 "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ENVOY_ADMIN_PORT}}}}
    argv = agent.render_agent(bootstrap, options).argv[1:]
    argv[argv.index("-listen") + 1] = f"$(POD_IP):{AGENT_PORT}"   # the kubelet probes the pod IP
    return argv


def sidecar_patch() -> dict:
    """A strategic-merge patch for a Deployment whose Envoy container is named `envoy`."""
    def probe(**timing: int) -> dict:
        return {"httpGet": {"path": "/healthz", "port": "logship"}, **timing}

    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "envoy"},  # the Component's target selects by label; the name is not used
        "spec": {"template": {"spec": {
            "volumes": [{"name": VOLUME, "emptyDir": {"sizeLimit": "1Gi"}}],
            "initContainers": [{
                "name": "wirelens-logship",
                "image": IMAGE,
                # A native sidecar (Kubernetes >= 1.29): started before Envoy, stopped after it.
                "restartPolicy": "Always",
                "args": logship_args(),
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "ports": [{"name": "logship", "containerPort": AGENT_PORT, "protocol": "TCP"}],
                "startupProbe": probe(periodSeconds=2, failureThreshold=30),
                "readinessProbe": probe(periodSeconds=10),
                "livenessProbe": probe(periodSeconds=10, failureThreshold=6),
                "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": VOLUME, "mountPath": LOG_DIR}],
            }],
            "containers": [{"name": "envoy", "volumeMounts": [{"name": VOLUME, "mountPath": LOG_DIR}]}],
        }}},
    }


def dump(document: dict) -> str:
    import io  # noqa: PLC0415

    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(document, out)
    return HEADER + out.getvalue()


def rendered() -> dict[Path, str]:
    return {OUT / "logship-sidecar.yaml": dump(sidecar_patch())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m envoy.inject.kubernetes", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file differs from the render")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered().items():
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"out of date (run python -m envoy.inject.kubernetes): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
