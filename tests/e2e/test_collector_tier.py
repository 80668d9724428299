"""The Collector gateway tier: kill -9 a gateway (or the agent) under load, every call is still exactly one row.

    Envoy ─► access.jsonl ─► logship ─► agent ──load_balancing (trace id)──┬─► gateway 1 ─┬─► ClickHouse
                                        (collector/agent.yaml,              └─► gateway 2 ─┘   (the stack's)
                                         persistent queue)       (collector/config.yaml each, own persistent queue)

The tier (collector/tier.py) runs beside the session's local stack on free
ports; the shipper (logship, or the filelog log agent with WIRELENS_LOG_SHIPPER=filelog: the fixture runs
the tests for both) is re-pointed from the stack's Collector to the agent for this
module and back afterwards. Each test sends N calls at a steady rate (REST and
gRPC alternating), crashes one tier process mid-run, keeps the calls coming,
starts it again (same ports, same persistent queue: what Kubernetes does when
a container dies), and requires exactly N rows for the run in
wirelens.requests (FINAL), each request id once.

The gateway is started again because the agent's static resolver keeps it in
the hash ring: the records that hash to it wait in the agent's persistent
queue until it is back, and what it had acknowledged waits in its own
(collector/README.md, "Gateway tier").
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, free_ports, rows, stack
from tests.e2e.test_filelog import RETRYING, agent_log_count, filelog_stack  # noqa: F401  (a fixture)
from tests.e2e.test_zero_loss import SteadyTraffic, counts
from wirelens_helpers.wait import wait_for

from collector import tier as collector_tier


GATEWAYS = 2
OUTAGE_S = 5.0
DRAIN_DEADLINE_S = 120.0


@pytest.fixture(scope="module", params=["logship", "filelog"])
def tier(request):
    """The tier in front of the session's stack (logship ships), or of a stack whose filelog log agent ships
    (WIRELENS_LOG_SHIPPER=filelog, tests/e2e/test_filelog.py's filelog_stack)."""
    stack_settings = request.getfixturevalue("local_stack" if request.param == "logship" else "filelog_stack")
    planned = collector_tier.plan(stack_settings, GATEWAYS, free_ports(3 * (GATEWAYS + 1)))
    lines: list[str] = []
    try:
        collector_tier.up(planned, log=lines.append)
        yield planned
    finally:
        collector_tier.down(planned, log=lines.append)
        print("\n".join(lines), file=sys.stderr)


# -- helpers ------------------------------------------------------------------------------


def sent_to_clickhouse(tier, name: str) -> float:
    return collector_tier.records_handled(tier, name).get("sent", 0.0)


def agent_export_failures(tier, gateway: str) -> float:
    """Export calls from the agent's load_balancing/logs to this gateway that failed (the exporter's own metric)."""
    try:
        text = tier.metrics_text(collector_tier.AGENT)
    except OSError:
        return 0.0
    return collector_tier.metric_sum(text, "otelcol_loadbalancer_backend_outcome",
                                     endpoint=tier.otlp_endpoint(gateway), success="false")


def shipper_failures(tier) -> float:
    """Failed exports of the shipper: logship's count, or the filelog agent's retry log lines."""
    if collector_tier.shipper_name(tier.stack_settings) == "logship":
        return stack.logship_progress(tier.stack_settings)["export_failures"]
    return agent_log_count(tier.stack_settings, RETRYING)


def tier_state(tier, run_id: str) -> str:
    """What to print when rows are missing: where the records are."""
    parts = [f"logship: {stack.logship_progress(tier.stack_settings)}"]
    for name in tier.members:
        pid = stack.read_pid(tier.members[name], name)
        parts.append(f"{name} (pid {pid}): {collector_tier.records_handled(tier, name) or 'no answer'}")
    try:
        (raw, distinct), = rows(tier.stack_settings,
                                "SELECT count(), uniqExact(LogAttributes['wirelens.request_id']) FROM otel.otel_logs "
                                f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")
        parts.append(f"otel.otel_logs: {raw} rows, {distinct} request ids")
    except stack.StackError as exc:
        parts.append(f"ClickHouse: {exc}")
    return "\n  ".join(parts)


def expect_exactly(tier, run_id: str, expected: dict[str, int]) -> float:
    """Wait until every call has its row, then require exactly that; returns the seconds it took."""
    settings, t0 = tier.stack_settings, time.monotonic()
    wait_for(f"a row for each call of run {run_id}: {expected}", lambda: counts(settings, run_id),
             lambda seen: all(seen.get(p, 0) >= n for p, n in expected.items()), timeout_s=DRAIN_DEADLINE_S,
             retry_on=(stack.StackError,), state=lambda: tier_state(tier, run_id))
    waited = time.monotonic() - t0
    assert counts(settings, run_id) == expected, tier_state(tier, run_id)
    (total, distinct), = rows(settings, "SELECT count(), uniqExact(request_id) FROM wirelens.requests FINAL "
                                        f"WHERE run_id = '{run_id}'")
    assert total == distinct == str(sum(expected.values())), (total, distinct)
    return waited


def raw_rows(tier, run_id: str) -> tuple[int, int]:
    """otel.otel_logs rows of the run and distinct request ids among them (rows > ids: re-sent records)."""
    (raw, distinct), = rows(tier.stack_settings,
                            "SELECT count(), uniqExact(LogAttributes['wirelens.request_id']) FROM otel.otel_logs "
                            f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")
    return int(raw), int(distinct)


def record(name: str, measurements: dict) -> None:
    """Keep the numbers of this run (test-artifacts/collector-tier.json) and show them with -s."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "collector-tier.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        saved = {}
    saved[name] = measurements
    path.write_text(json.dumps(saved, indent=2) + "\n")
    print(f"\n{name}: {json.dumps(measurements)}")


# -- the tests ----------------------------------------------------------------------------


def test_tier_is_wired(tier):
    """Two gateways in the agent's hash ring; logship ships to the agent, not to the stack's Collector."""
    text = tier.metrics_text(collector_tier.AGENT)
    # (The gauge carries no exporter label: the agent's three load_balancing exporters report the same series.)
    assert collector_tier.metric_sum(text, "otelcol_loadbalancer_num_backends", resolver="static") == GATEWAYS, text
    shipper = collector_tier.shipper_name(tier.stack_settings)
    pid = stack.read_pid(tier.stack_settings, shipper)
    if shipper == "logship":
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert tier.otlp_endpoint(collector_tier.AGENT).encode() in args, args
    else:  # the filelog agent's exporter reads its endpoint's port from its environment
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        port = tier.members[collector_tier.AGENT]["WIRELENS_COLLECTOR_OTLP_PORT"]
        assert f"WIRELENS_COLLECTOR_OTLP_PORT={port}".encode() in env, [e for e in env if b"OTLP_PORT" in e]


def test_gateway_killed_mid_run_every_call_is_one_row(tier):
    settings, run_id = tier.stack_settings, f"e2e-tier-gateway-{uuid.uuid4().hex[:8]}"
    victim, survivor = tier.gateways[:2]
    n, rate = 1000, 50.0  # 20 s of calls; the gateway is down for OUTAGE_S of them
    base = {g: sent_to_clickhouse(tier, g) for g in tier.gateways}
    failures_before = agent_export_failures(tier, victim)
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        # The load is spread: both gateways have written records to ClickHouse before the kill.
        wait_for("both gateways writing to ClickHouse",
                 lambda: all(sent_to_clickhouse(tier, g) > base[g] for g in tier.gateways), timeout_s=20)
        before_kill = {g: sent_to_clickhouse(tier, g) - base[g] for g in tier.gateways}
        survivor_at_kill = sent_to_clickhouse(tier, survivor)
        collector_tier.kill(tier, victim)
        killed_at, killed_t = traffic.sent, time.monotonic()
        rows_at_kill = sum(counts(settings, run_id).values())
        # The agent sees its exports to the dead gateway fail; they wait in its persistent queue.
        wait_for("the agent's exports to the killed gateway failing",
                 lambda: agent_export_failures(tier, victim) > failures_before, timeout_s=15)
        agent_queue_peak = 0.0
        while time.monotonic() - killed_t < OUTAGE_S:  # the outage itself: calls keep coming
            agent_queue_peak = max(agent_queue_peak, collector_tier.records_handled(tier, collector_tier.AGENT)["queue_size"])
            time.sleep(0.2)
        survivor_during_outage = sent_to_clickhouse(tier, survivor) - survivor_at_kill
        rows_before_restart = sum(counts(settings, run_id).values())
    finally:
        if not stack.read_pid(tier.members[victim], victim):
            collector_tier.start(tier, victim)  # same ports, same persistent queue
    restarted_at, restarted_t = traffic.sent, time.monotonic()
    # The backlog drains once the gateway is back: every call made before the restart has its row.
    wait_for("rows for every call made before the restart",
             lambda: sum(counts(settings, run_id).values()) >= restarted_at, timeout_s=DRAIN_DEADLINE_S)
    backlog_drained_s = time.monotonic() - restarted_t
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)  # the outage fell mid-run
    assert restarted_at - killed_at >= rate * OUTAGE_S * 0.5, (killed_at, restarted_at)  # calls made while it was down
    drain_s = expect_exactly(tier, run_id, traffic.ok)
    since_restart_s = time.monotonic() - restarted_t
    raw, distinct = raw_rows(tier, run_id)
    # The restarted gateway delivered its share: what waited for it in the agent's queue (and in its own).
    assert sent_to_clickhouse(tier, victim) > 0, tier_state(tier, run_id)
    wait_for("the agent's persistent queue empty",
             lambda: collector_tier.records_handled(tier, collector_tier.AGENT).get("queue_size") == 0, timeout_s=30)
    record("gateway_killed", {
        "calls": n, "rows": sum(counts(settings, run_id).values()), "otel_logs_rows": raw, "request_ids": distinct,
        "records_to_clickhouse_before_kill": {g: int(v) for g, v in before_kill.items()},
        "killed_after_calls": killed_at, "restarted_after_calls": restarted_at,
        "rows_at_kill": rows_at_kill, "rows_before_restart": rows_before_restart,
        "survivor_records_to_clickhouse_during_outage": int(survivor_during_outage),
        "agent_queue_peak_requests": int(agent_queue_peak),
        "victim_records_to_clickhouse_after_restart": int(sent_to_clickhouse(tier, victim)),
        "backlog_drained_after_restart_s": round(backlog_drained_s, 1),
        "all_rows_after_traffic_end_s": round(drain_s, 1), "all_rows_after_restart_s": round(since_restart_s, 1),
    })


def test_agent_killed_mid_run_every_call_is_one_row(tier):
    """The agent's persistent queue: records it acknowledged to logship but had not yet passed on survive kill -9."""
    settings, run_id = tier.stack_settings, f"e2e-tier-agent-{uuid.uuid4().hex[:8]}"
    n, rate = 600, 40.0
    before = shipper_failures(tier)
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        collector_tier.kill(tier, collector_tier.AGENT)
        killed_at, killed_t = traffic.sent, time.monotonic()
        wait_for(f"{collector_tier.shipper_name(settings)} failing to export to the dead agent",
                 lambda: shipper_failures(tier) > before, timeout_s=15)
        while time.monotonic() - killed_t < 3.0:  # the outage itself: calls keep coming
            time.sleep(0.2)
    finally:
        if not stack.read_pid(tier.members[collector_tier.AGENT], collector_tier.AGENT):
            collector_tier.start(tier, collector_tier.AGENT)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    drain_s = expect_exactly(tier, run_id, traffic.ok)
    raw, distinct = raw_rows(tier, run_id)
    record("agent_killed", {"calls": n, "rows": sum(counts(settings, run_id).values()), "otel_logs_rows": raw,
                            "request_ids": distinct, "all_rows_after_traffic_end_s": round(drain_s, 1)})


def test_gateway_down_then_agent_killed_the_backlog_survives(tier):
    """Two failures at once: while a gateway is dead, its share waits in the agent's queue; kill -9 the agent too.

    The agent acknowledged those records to logship long ago, so only its
    persistent queue has them. A queue in memory would lose them here.
    """
    settings, run_id = tier.stack_settings, f"e2e-tier-both-{uuid.uuid4().hex[:8]}"
    victim = tier.gateways[0]
    n, rate = 600, 40.0
    failures_before = agent_export_failures(tier, victim)
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        collector_tier.kill(tier, victim)
        killed_at = traffic.sent
        wait_for("the agent's exports to the killed gateway failing",
                 lambda: agent_export_failures(tier, victim) > failures_before, timeout_s=15)
        traffic.wait_until_sent(killed_at + int(rate * 2))  # two more seconds of calls pile up for the dead gateway
        collector_tier.kill(tier, collector_tier.AGENT)
        agent_killed_at = traffic.sent
        collector_tier.start(tier, collector_tier.AGENT)  # the dead gateway is still dead
        traffic.wait_until_sent(agent_killed_at + int(rate * 2))
    finally:
        for name in (collector_tier.AGENT, victim):
            if not stack.read_pid(tier.members[name], name):
                collector_tier.start(tier, name)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < agent_killed_at < restarted_at < n, (killed_at, agent_killed_at, restarted_at)
    drain_s = expect_exactly(tier, run_id, traffic.ok)
    raw, distinct = raw_rows(tier, run_id)
    record("gateway_down_then_agent_killed", {
        "calls": n, "rows": sum(counts(settings, run_id).values()), "otel_logs_rows": raw, "request_ids": distinct,
        "gateway_killed_after_calls": killed_at, "agent_killed_after_calls": agent_killed_at,
        "gateway_restarted_after_calls": restarted_at, "all_rows_after_traffic_end_s": round(drain_s, 1)})
