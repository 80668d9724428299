"""`--agent filelog`: an agent Collector whose file_log receiver reads Envoy's access-log file
(collector/filelog-agent.yaml, issue 32), rendered as the command that runs our Collector with that
pipeline, the environment the pipeline reads and the Collector endpoint as a second --config.

What it does not do (collector/filelog-agent.yaml, collector/README.md "filelog as the log agent"):
rotate Envoy's file (nothing renames it and calls /reopen_logs) or cap its disk use with counted
drops. The notes say so; the file grows until something else rotates it.
"""

from __future__ import annotations

from pathlib import Path

from .model import InjectError, Options

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "collector" / "filelog-agent.yaml"
FEATURE_GATES = "stanza.synchronousLogEmitter"   # without it a kill -9 loses the receiver's in-memory batch


def check() -> None:
    """InjectError unless this checkout has the filelog agent's pipeline."""
    if not PIPELINE.is_file():
        raise InjectError(f"--agent filelog: {PIPELINE} is missing (the filelog agent's pipeline); use --agent logship")


def agent(path: str, attrs: dict[str, str], options: Options, admin: str | None, rotate: int, cap: int,
          notes: list[str]):
    from .agent import COLLECTOR, Agent  # noqa: PLC0415

    check()
    metrics_port = options.agent_metrics_port or options.agent_port + 1
    environment = {
        "WIRELENS_ACCESS_LOG": path,
        "WIRELENS_LOG_AGENT_STORAGE_DIR": f"{path}.filelog-storage",
        "WIRELENS_LOG_AGENT_HEALTH_PORT": str(options.agent_port),
        "WIRELENS_LOG_AGENT_METRICS_PORT": str(metrics_port),
        "WIRELENS_COLLECTOR_OTLP_PORT": str(options.collector_port),
        "WIRELENS_ACCESS_LOG_SERVICE_NAME": attrs["service.name"],
    }
    if "node_name" in attrs:
        environment["WIRELENS_ACCESS_LOG_NODE_NAME"] = attrs["node_name"]
    if "cluster_name" in attrs:
        environment["WIRELENS_ACCESS_LOG_CLUSTER_NAME"] = attrs["cluster_name"]
    argv = [str(COLLECTOR), "--config", str(PIPELINE),
            "--config", f"yaml:exporters::otlp_grpc::endpoint: {options.collector_host}:{options.collector_port}",
            f"--feature-gates={FEATURE_GATES}"]
    notes = list(notes)
    if rotate or cap:
        notes.append("filelog neither rotates Envoy's file nor caps its disk use (no such setting): it grows until "
                     "something renames it and POSTs /reopen_logs; --agent logship does both and counts its drops")
    notes.append(f"health on http://127.0.0.1:{options.agent_port}/, the agent's metrics on port {metrics_port}")
    return Agent("filelog", argv, environment, notes)
