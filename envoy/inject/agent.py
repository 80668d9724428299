"""The agent beside Envoy that ships the access-log file to the Collector: what it needs, rendered.

With `--access-log file` (the default) Envoy appends one JSON line per call to
a local file and never depends on the Collector; an agent on the same host
reads the file and sends each line as an OTLP log record. Two agents:

    logship   collector/cmd/logship: moves its checkpoint only after the
              Collector has the batch in its persistent queue, retries
              forever, rotates the file through Envoy's admin
              (POST /reopen_logs) and caps its disk use, counting every drop
              (collector/README.md, "Delivery guarantees", "Backpressure").
              The default: it passes every guarantee test.
    filelog   the Collector's own filelog receiver in an agent Collector
              (collector/README.md says where it falls short).

render_agent() gives the command line (and for --agent-config FILE a small
shell script that runs it), from the bootstrap (node, admin address) and the
options; nothing here starts a process.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from envoy import wiring

from .model import InjectError, Options

AGENTS = ("logship", "filelog")
ROOT = Path(__file__).resolve().parents[2]
LOGSHIP = ROOT / "bin" / "logship"
COLLECTOR = ROOT / "bin" / "otelcol-wirelens"
DEFAULT_ACCESS_LOG_PATH = "/var/log/wirelens/access.jsonl"
DEFAULT_AGENT_PORT = 13135            # logship's /healthz and /progress (the local stack's WIRELENS_LOGSHIP_PORT)
DEFAULT_ROTATE_BYTES = 64 << 20       # as the local stack (WIRELENS_ACCESS_LOG_ROTATE_BYTES)
DEFAULT_MAX_BYTES = 1 << 30           # as the local stack (WIRELENS_ACCESS_LOG_MAX_BYTES)
ANY_ADDRESS = ("0.0.0.0", "::", "[::]", "")


@dataclasses.dataclass
class Agent:
    name: str                  # AGENTS
    argv: list[str]            # the command, binary first
    environment: dict[str, str]
    notes: list[str]

    @property
    def health_url(self) -> str:
        """Where the agent answers 200 once it runs (logship's /healthz, the Collector's health_check)."""
        listen = self.environment.get("WIRELENS_LOG_AGENT_HEALTH_PORT")
        if listen:
            return f"http://127.0.0.1:{listen}/"
        return f"http://{self.argv[self.argv.index('-listen') + 1]}/healthz"

    def command_line(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.environment.items())
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)

    def script(self) -> str:
        """A POSIX shell script that runs the agent in the foreground (exec): for a service manager or a container."""
        binary_variable = "LOGSHIP" if self.name == "logship" else "OTELCOL"
        lines = ["#!/bin/sh",
                 f"# The wirelens access-log agent ({self.name}), written by `wirelens inject` (envoy/INJECT.md,",
                 "# \"The durable path\"). Run it beside Envoy, on the same host, as a user that can read, rename",
                 "# and delete the access-log file and write its directory. "
                 f"${binary_variable} overrides the binary.",
                 *(f"# {note}" for note in self.notes),
                 "set -e"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.environment.items()]
        # One flag and its value per line.
        args, rest = [f'"${{{binary_variable}:-{self.argv[0]}}}"'], self.argv[1:]
        while rest:
            take = 2 if rest[0].startswith("-") and len(rest) > 1 and not rest[1].startswith("-") else 1
            args.append(" ".join(shlex.quote(a) for a in rest[:take]))
            rest = rest[take:]
        lines.append("exec " + " \\\n    ".join(args))
        return "\n".join(lines) + "\n"


def admin_url(bootstrap: dict) -> str | None:
    """http://HOST:PORT of the bootstrap's admin listener (0.0.0.0 -> 127.0.0.1), None without a TCP one."""
    address = (((bootstrap.get("admin") or {}).get("address") or {}).get("socket_address")) or {}
    port = address.get("port_value")
    if not isinstance(port, int) or port <= 0:
        return None
    host = str(address.get("address", ""))
    host = "127.0.0.1" if host in ANY_ADDRESS else host
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def resource(bootstrap: dict, options: Options) -> tuple[dict[str, str], list[str]]:
    """The records' resource, as Envoy's OTel access logger stamps it (service.name, log_name, node_name,
    cluster_name from the node), and notes when the bootstrap lacks the node."""
    node = bootstrap.get("node") or {}
    attrs = {"service.name": wiring.SERVICE_NAME, "log_name": "wirelens"}
    notes = []
    if node.get("id"):
        attrs["node_name"] = str(node["id"])
    if node.get("cluster"):
        attrs["cluster_name"] = str(node["cluster"])
    if not (node.get("id") and node.get("cluster")):
        notes.append("this bootstrap names no node id/cluster: node_name/cluster_name are left out of the records' "
                     "resource; add them to -resource as Envoy's --service-node/--service-cluster")
    return attrs, notes


def render_agent(bootstrap: dict, options: Options) -> Agent:
    if options.agent not in AGENTS:
        raise InjectError(f"--agent {options.agent}: expected one of {', '.join(AGENTS)}")
    path = options.access_log_path
    attrs, notes = resource(bootstrap, options)
    admin = admin_url(bootstrap)
    rotate, cap = options.rotate_bytes, options.max_bytes
    if admin is None and (rotate or cap):
        notes.append("no TCP admin address in this bootstrap: the agent cannot have Envoy reopen the file "
                     "(POST /reopen_logs), so it neither rotates nor caps it; add `admin:` (127.0.0.1) to have both")
        rotate = cap = 0
    if options.agent == "logship":
        argv = wiring.logship_argv(str(LOGSHIP), path, f"{path}.checkpoint",
                                   f"{options.collector_host}:{options.collector_port}", wiring.resource_flag(attrs),
                                   f"127.0.0.1:{options.agent_port}", rotate, cap,
                                   f"{admin}/reopen_logs" if rotate else None)
        return Agent("logship", argv, {}, notes)
    # The agent Collector with the filelog receiver (collector/README.md, "filelog as the log agent").
    from . import filelog  # noqa: PLC0415  (filelog imports Agent from here)

    return filelog.agent(path, attrs, options, admin, rotate, cap, notes)
