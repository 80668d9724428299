"""The Collector gateway tier beside the local stack: gateway Collectors, one agent, logship sent to the agent.

    tier.py up [--gateways N]   start N gateway Collectors (collector/config.yaml) and one agent
                                (collector/agent.yaml) on free loopback ports, then re-point
                                logship from the stack's Collector to the agent
    tier.py down                logship back to the stack's Collector; stop the agent and the gateways
    tier.py status              each tier process: pid, ports, health, records it handled
    tier.py kill NAME           SIGKILL one of them (a crash), e.g. `tier.py kill collector-gateway-1`
    tier.py start NAME          start it again, with the same ports and the same persistent queue

    Envoy ─► access.jsonl ─► logship ─► agent (load_balancing by trace id) ─┬─► gateway 1 ─┬─► ClickHouse
                                                                            └─► gateway 2 ─┘

Needs the local stack running (`make up`: ClickHouse, Jaeger, logship, Envoy).
Each tier process is a stack component in the stack's state directory: pid file
(pids/NAME.pid), log (logs/NAME.log), persistent queue (NAME/storage); the
ports chosen by `up` are kept in collector-tier.json there. Stop the tier
(`down`) before `make down`: the stack does not know these processes.
Why the tier looks like this: collector/README.md, "Gateway tier".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path

from deploy.local import components, stack
from wirelens_helpers.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[1]

GATEWAY_CONFIG = ROOT / "collector" / "config.yaml"
AGENT_CONFIG = ROOT / "collector" / "agent.yaml"
AGENT = "collector-agent"
PORT_VARIABLES = ["WIRELENS_COLLECTOR_HEALTH_PORT", "WIRELENS_COLLECTOR_OTLP_PORT", "WIRELENS_COLLECTOR_METRICS_PORT"]


def gateway_name(index: int) -> str:
    return f"collector-gateway-{index}"


def _component(name: str) -> stack.Component:
    config = AGENT_CONFIG if name == AGENT else GATEWAY_CONFIG
    return stack.Component(
        name=name,
        # A gateway restores the record's labels from the operation map as the stack's Collector does.
        command=lambda s: [stack.require(stack.BIN / "otelcol-wirelens", "run `make collector`"),
                           "--config", str(config),
                           *(["--config", str(components.collector_opmap(s))] if config == GATEWAY_CONFIG else [])],
        ports=PORT_VARIABLES,
        ready=lambda s: stack.http_ok(f"http://127.0.0.1:{s['WIRELENS_COLLECTOR_HEALTH_PORT']}/"),
    )


@dataclasses.dataclass
class Tier:
    """The settings of each tier process: the stack's, with its own Collector ports and queue directory."""

    stack_settings: dict[str, str]
    members: dict[str, dict[str, str]]  # name -> settings; gateways first, the agent last

    @property
    def gateways(self) -> list[str]:
        return [name for name in self.members if name != AGENT]

    def otlp_endpoint(self, name: str) -> str:
        return f"127.0.0.1:{self.members[name]['WIRELENS_COLLECTOR_OTLP_PORT']}"

    def metrics_text(self, name: str) -> str:
        """The Collector's own metrics (Prometheus text); OSError if it does not answer."""
        status, body = stack.http_get(f"http://127.0.0.1:{self.members[name]['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
        if status != 200:
            raise OSError(f"{name}: metrics endpoint answered {status}")
        return body


def plan(stack_settings: dict[str, str], gateways: int, ports: list[int]) -> Tier:
    """Settings for `gateways` gateways and one agent; `ports` has 3 per process (health, OTLP, metrics)."""
    if gateways < 1:
        raise stack.StackError(f"--gateways {gateways}: the tier needs at least one gateway")
    names = [gateway_name(i) for i in range(1, gateways + 1)] + [AGENT]
    if len(ports) < 3 * len(names):
        raise stack.StackError(f"{len(names)} tier processes need {3 * len(names)} ports, got {len(ports)}")
    state = stack.state_dir(stack_settings)
    members: dict[str, dict[str, str]] = {}
    for index, name in enumerate(names):
        own = dict(zip(PORT_VARIABLES, map(str, ports[3 * index:3 * index + 3])))
        members[name] = {**stack_settings, **own, "WIRELENS_COLLECTOR_STORAGE_DIR": str(state / name / "storage")}
    endpoints = [f"127.0.0.1:{members[name]['WIRELENS_COLLECTOR_OTLP_PORT']}" for name in names[:-1]]
    members[AGENT]["WIRELENS_GATEWAY_ENDPOINTS"] = "[" + ", ".join(endpoints) + "]"  # a YAML list
    return Tier(stack_settings, members)


def _tier_file(stack_settings: dict[str, str]) -> Path:
    return stack.state_dir(stack_settings) / "collector-tier.json"


def load(stack_settings: dict[str, str]) -> Tier:
    """The tier `up` started (its ports are in the stack's state directory)."""
    try:
        members = json.loads(_tier_file(stack_settings).read_text())
    except FileNotFoundError:
        raise stack.StackError(f"no tier in {stack.state_dir(stack_settings)}: run `python -m collector.tier up` first") from None
    return Tier(stack_settings, {name: {**stack_settings, **own} for name, own in members.items()})


def start(tier: Tier, name: str) -> int:
    if name not in tier.members:
        raise stack.StackError(f"no tier process {name!r}; tier processes: {', '.join(tier.members)}")
    return stack.start(_component(name), tier.members[name])


def kill(tier: Tier, name: str) -> str:
    if name not in tier.members:
        raise stack.StackError(f"no tier process {name!r}; tier processes: {', '.join(tier.members)}")
    outcome = stack.kill(name, tier.members[name])
    # The process group is gone, but its listening sockets can outlive it for a
    # moment (seen here: the port still in LISTEN with no owner right after
    # SIGKILL). Done only once they are released, so a restart can bind them.
    for variable in PORT_VARIABLES:
        port = int(tier.members[name][variable])
        try:
            wait_for(f"port {port} to be released", lambda: not stack.port_holder(port), timeout_s=10.0,
                     interval_s=0.05)
        except WaitTimeout:
            raise stack.StackError(f"{name}: port {port} ({variable}) still taken by "
                                   f"{stack.port_holder(port)} 10s after SIGKILL") from None
    return outcome


def shipper_name(settings: dict[str, str]) -> str:
    """The stack's component that ships Envoy's access-log file: logship, or with
    WIRELENS_LOG_SHIPPER=filelog the filelog log agent (collector/filelog-agent.yaml)."""
    return "log-agent" if settings.get("WIRELENS_LOG_SHIPPER") == "filelog" else "logship"


def _restart_logship(settings: dict[str, str]) -> None:
    """Restart the shipper (logship or the filelog log agent) with these settings (its Collector OTLP port)."""
    name = shipper_name(settings)
    stack.stop(name, settings)
    stack.start(stack.BY_NAME[name], settings)


def up(tier: Tier, log=print) -> None:
    """Start the gateways, then the agent; then logship ships to the agent."""
    if not stack.read_pid(tier.stack_settings, shipper_name(tier.stack_settings)):
        raise stack.StackError(f"{shipper_name(tier.stack_settings)} is not running: start the local stack first (`make up`)")
    for name, settings in tier.members.items():  # fail before anything starts, not halfway
        for variable in PORT_VARIABLES:
            stack.check_port_free(int(settings[variable]), variable, name)
    started: list[str] = []
    try:
        for name in tier.members:
            t0 = time.monotonic()
            pid = start(tier, name)
            started.append(name)
            log(f"  {name:<20} pid {pid:<7} OTLP {tier.otlp_endpoint(name):<16} ready in {time.monotonic() - t0:.1f}s")
        _tier_file(tier.stack_settings).write_text(json.dumps(
            {name: {k: s[k] for k in (*PORT_VARIABLES, "WIRELENS_COLLECTOR_STORAGE_DIR", "WIRELENS_GATEWAY_ENDPOINTS")
                    if k in s} for name, s in tier.members.items()}, indent=2))
        # logship keeps its checkpoint: it resumes where it was, now towards the agent.
        _restart_logship({**tier.stack_settings, "WIRELENS_COLLECTOR_OTLP_PORT": tier.members[AGENT]["WIRELENS_COLLECTOR_OTLP_PORT"]})
        log(f"  {shipper_name(tier.stack_settings):<20} now ships to the agent ({tier.otlp_endpoint(AGENT)})")
    except BaseException:
        for name in reversed(started):
            stack.stop(name, tier.members[name])
        raise


def down(tier: Tier, log=print) -> None:
    """logship back to the stack's Collector (after it shipped what Envoy wrote), then stop the agent and the gateways.

    A graceful stop: what the agent's or a gateway's persistent queue still holds
    stays in its storage directory and is sent at its next start.
    """
    if stack.read_pid(tier.stack_settings, shipper_name(tier.stack_settings)):
        _restart_logship(tier.stack_settings)
        log(f"  {shipper_name(tier.stack_settings):<20} ships to the stack's Collector again")
    for name in reversed(list(tier.members)):
        log(f"  {name:<20} {stack.stop(name, tier.members[name])}")
    _tier_file(tier.stack_settings).unlink(missing_ok=True)


# ---------------------------------------------------------------- the Collectors' own metrics

_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (Prometheus text format).

    Counters match with or without the `_total` suffix (the Collector's Prometheus
    reader leaves it off; other scrapers add it).
    """
    total = 0.0
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match["name"] not in (name, name + "_total"):
            continue
        have = dict(_LABEL.findall(match["labels"] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(match["value"])
    return total


def records_handled(tier: Tier, name: str) -> dict[str, float]:
    """Access-log records a tier process took in, sent on, and holds in its queue; {} if it does not answer."""
    try:
        text = tier.metrics_text(name)
    except OSError:
        return {}
    exporter = "load_balancing/logs" if name == AGENT else "clickhouse/logs"
    return {
        "accepted": metric_sum(text, "otelcol_receiver_accepted_log_records"),
        "sent": metric_sum(text, "otelcol_exporter_sent_log_records", exporter=exporter),
        "send_failed": metric_sum(text, "otelcol_exporter_send_failed_log_records", exporter=exporter),
        "queue_size": metric_sum(text, "otelcol_exporter_queue_size", exporter=exporter, data_type="logs"),
    }


def status(tier: Tier, log=print) -> bool:
    healthy = True
    log(f"  {'process':<20} {'pid':<8} {'OTLP':<16} {'health':<7} log records (accepted / sent / queued)")
    for name, settings in tier.members.items():
        pid = stack.read_pid(settings, name)
        up_now = _component(name).ready(settings)()
        healthy &= bool(pid) and up_now
        records = records_handled(tier, name)
        counts = f"{records['accepted']:.0f} / {records['sent']:.0f} / {records['queue_size']:.0f}" if records else "-"
        log(f"  {name:<20} {str(pid or '-'):<8} {tier.otlp_endpoint(name):<16} {'up' if up_now else 'DOWN':<7} {counts}")
    return healthy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "kill", "start"])
    parser.add_argument("name", nargs="?", help=f"for kill and start: {gateway_name(1)}, {gateway_name(2)}, …, {AGENT}")
    parser.add_argument("--gateways", type=int, default=2, help="for up: how many gateway Collectors (default 2)")
    args = parser.parse_args(argv)
    if (args.command in ("kill", "start")) != bool(args.name):
        parser.error(f"{args.command} takes a tier process name" if args.name is None else f"{args.command} takes no name")
    try:
        settings = stack.load_settings()
        if args.command == "up":
            if _tier_file(settings).exists():
                raise stack.StackError(f"a tier is already up ({_tier_file(settings)}): `python -m collector.tier status`")
            up(plan(settings, args.gateways, stack.free_ports(3 * (args.gateways + 1))))
        elif args.command == "down":
            down(load(settings))
        elif args.command == "status":
            return 0 if status(load(settings)) else 1
        elif args.command == "kill":
            print(f"  {args.name:<20} {kill(load(settings), args.name)}")
        elif args.command == "start":
            tier = load(settings)
            pid = stack.read_pid(tier.members.get(args.name, settings), args.name)
            print(f"  {args.name:<20} " + (f"already running (pid {pid})" if pid else f"pid {start(tier, args.name)}"))
    except stack.StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
