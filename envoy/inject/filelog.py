"""`--agent filelog`: an agent Collector whose filelog receiver reads Envoy's access-log file
(collector/filelog-agent.yaml, issue 32). Rendered as the command that runs our Collector with
that pipeline and the environment it reads.
"""

from __future__ import annotations

from pathlib import Path

from .model import InjectError, Options

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "collector" / "filelog-agent.yaml"


def check() -> None:
    """InjectError unless this checkout has the filelog agent's pipeline."""
    if not PIPELINE.is_file():
        raise InjectError(f"--agent filelog: {PIPELINE} is missing (the filelog agent's pipeline); use --agent logship")
    raise InjectError("--agent filelog: not rendered yet (collector/filelog-agent.yaml's settings); use --agent logship")


def agent(path: str, attrs: dict[str, str], options: Options, admin: str | None, rotate: int, cap: int,
          notes: list[str]):
    from .agent import COLLECTOR, Agent  # noqa: PLC0415

    if not PIPELINE.is_file():
        raise InjectError(f"--agent filelog: {PIPELINE} is missing (the filelog agent's pipeline); use --agent logship")
    raise InjectError("--agent filelog: not rendered yet (collector/filelog-agent.yaml's settings); use --agent logship")
