"""The per-stack part of collector/hostmetrics.yaml: which process is which component.

The hostmetrics receiver's process scraper picks processes by executable name
only (`include.names`), and knows nothing of pid files or process groups. So
this renders, for one local stack (its settings), a second --config file:

- `receivers::host_metrics::scrapers::process::include`: the executable names of
  the stack's commands (strict), so the scraper reads only those processes;
- `transform/hostmetrics_stack`: resource `service.name` = the component whose
  command line (as the stack started it, `deploy/local/components.py`) equals
  the process's `process.command_line` (argv joined by spaces, as the scraper
  builds it), plus the ClickHouse engine, a child of the supervisor, by the
  end of its command line (`clickhouse_server.py --engine --data-dir DIR`).

collector/hostmetrics.yaml's filter drops every process left unnamed (another
stack's, the host's). Two stacks whose component runs the very same command
line (Jaeger: `jaeger --config deploy/local/jaeger.yaml`, ports from the
environment) cannot be told apart: each stack's hostmetrics then reports
both under the one name. procmetrics, following pid files, has no such limit.

    python -m collector.hostmetrics STATE_DIR   # print the file for the stack in STATE_DIR (its ports.env settings)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from wirelens_helpers import ROOT

CONFIG = ROOT / "collector" / "hostmetrics.yaml"
STACK_CONFIG_NAME = "hostmetrics-stack.yaml"
NAME = "hostmetrics"  # this process, as a component of the stack (its pid file: pids/hostmetrics.pid)
ENGINE_SCRIPT = "clickhouse_server.py"


def command(settings: dict[str, str], binary: Path | None = None) -> list[str]:
    """The hostmetrics Collector's command line for the stack with these settings."""
    from deploy.local.settings import BIN, state_dir  # noqa: PLC0415

    return [str(binary or BIN / "otelcol-wirelens"), "--config", str(CONFIG),
            "--config", str(state_dir(settings) / STACK_CONFIG_NAME)]


def command_line(argv: list[str]) -> str:
    """/proc/PID/cmdline as the scraper reads it (gopsutil): the arguments joined by spaces."""
    while argv and argv[-1] == "":
        argv = argv[:-1]
    return " ".join(argv)


def ottl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def matchers(settings: dict[str, str], binary: Path | None = None) -> list[tuple[str, str, str]]:
    """(component, "equals" | "suffix", text) for every process of the stack, this one's own included."""
    from deploy.local.components import COMPONENTS  # noqa: PLC0415

    out: list[tuple[str, str, str]] = []
    for component in COMPONENTS:
        if not component.enabled(settings):
            continue
        argv = component.command(settings)
        out.append((component.name, "equals", command_line(argv)))
        if component.name == "clickhouse":
            data_dir = argv[argv.index("--data-dir") + 1]
            out.append((component.name, "suffix", f"/{ENGINE_SCRIPT} --engine --data-dir {data_dir}"))
    out.append((NAME, "equals", command_line(command(settings, binary))))
    return out


def executable_names(settings: dict[str, str], binary: Path | None = None) -> list[str]:
    """The executable (comm) names to scrape: the basename of each command."""
    from deploy.local.components import COMPONENTS  # noqa: PLC0415

    names = {os.path.basename(component.command(settings)[0])
             for component in COMPONENTS if component.enabled(settings)}
    names.add(os.path.basename(command(settings, binary)[0]))
    return sorted(names)


def render(settings: dict[str, str], binary: Path | None = None) -> str:
    statements = []
    for component, how, text in matchers(settings, binary):
        field = 'resource.attributes["process.command_line"]'
        condition = (f"{field} == {ottl_string(text)}" if how == "equals"
                     else f"HasSuffix({field}, {ottl_string(text)})")
        statements.append(f'set(resource.attributes["service.name"], {ottl_string(component)}) where {condition}')
    lines = ["# Rendered by collector/hostmetrics.py for one stack; do not edit.",
             "receivers:",
             "  host_metrics:",
             "    scrapers:",
             "      process:",
             "        include:",
             "          match_type: strict",
             "          names: " + json.dumps(executable_names(settings, binary)),
             "processors:",
             "  transform/hostmetrics_stack:",
             "    error_mode: ignore",
             "    metric_statements:",
             "      - context: resource",
             "        statements:"]
    lines += [f"          - {json.dumps(s)}" for s in statements]
    return "\n".join(lines) + "\n"


def write(settings: dict[str, str], binary: Path | None = None) -> Path:
    from deploy.local.settings import state_dir  # noqa: PLC0415

    path = state_dir(settings) / STACK_CONFIG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(settings, binary))
    tmp.replace(path)
    return path


def environment(settings: dict[str, str], health_port: int) -> dict[str, str]:
    return {"WIRELENS_COLLECTOR_OTLP_PORT": settings["WIRELENS_COLLECTOR_OTLP_PORT"],
            "WIRELENS_HOSTMETRICS_HEALTH_PORT": str(health_port)}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    from deploy.local import stack  # noqa: PLC0415

    settings = stack.load_settings({"WIRELENS_STATE_DIR": argv[0]})
    sys.stdout.write(render(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
