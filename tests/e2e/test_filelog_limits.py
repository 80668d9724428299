"""What filelog (the log agent, collector/filelog-agent.yaml) does NOT guarantee: reproducers.

Each test here ASSERTS THAT A LIMIT EXISTS. It fails the day the limit is gone
(an upstream fix, a new setting): then re-run the guarantee tests
(tests/e2e/test_filelog.py, test_backpressure.py) and re-decide whether filelog
replaces logship as the default shipper (issue 32; collector/README.md,
"filelog as the log agent").

1. No disk cap, no drop count. test_backpressure.py's case (ClickHouse down,
   caps of 128 KiB, 1,200 calls at 100/s): logship keeps the access log under
   WIRELENS_ACCESS_LOG_MAX_BYTES and counts exactly what it drops past it.
   The file_log receiver has no cap and counts nothing; it never rotates or
   removes Envoy's file (delete_after_read, behind the Alpha gate
   filelog.allowFileDeletion, removes a file once read to its end — Envoy's
   live file too). Its offsets sit in the agent's own bbolt file, locked while
   it runs, so no helper beside it can tell which lines it has not read yet:
   an exact drop count is out of reach for a stand-in too.
2. kill -9 of the agent loses records without the Alpha gate
   stanza.synchronousLogEmitter (the receiver's default in v0.161.0 with
   pkg/stanza v0.149.0): lines wait in an in-memory batch (100 lines or
   100 ms) after the reader moved on and stored its offsets.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.e2e.conftest import stack, stack_on_free_ports
from tests.e2e.test_backpressure import CALLS, DEADLINE_S, MAX_BYTES, QUEUE_BYTES, RATE, ROTATE_BYTES, DiskSampler
from tests.e2e.test_filelog import (AGENT, RETRYING, agent_log_count, agent_metrics, agent_state,
                                    kill_agent_at_random_moments, restart)
from tests.e2e.test_zero_loss import SteadyTraffic, counts, raw_log_rows
from wirelens_helpers.wait import wait_for


@pytest.fixture(scope="module")
def capped_filelog_stack(tmp_path_factory):
    with stack_on_free_ports(tmp_path_factory.mktemp("filelog-limits"), "e2e-filelog-limits",
                             WIRELENS_LOG_SHIPPER="filelog",
                             WIRELENS_ACCESS_LOG_ROTATE_BYTES=str(ROTATE_BYTES),
                             WIRELENS_ACCESS_LOG_MAX_BYTES=str(MAX_BYTES),
                             WIRELENS_COLLECTOR_QUEUE_BYTES=str(QUEUE_BYTES)) as settings:
        yield settings


def collector_logs_queue(settings) -> float:
    """The Collector's logs queue (clickhouse/logs), in its sizer's units; its other queues are not counted."""
    try:
        _, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
    except OSError:
        return 1.0  # not answering: not settled
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("otelcol_exporter_queue_size{") and 'data_type="logs"' in line)


def settled_rows(settings, run_id: str, quiet_s: float = 15.0) -> int:
    """The run's rows in wirelens.requests FINAL once nothing more arrives: the agent's and the Collector's
    logs queues empty and the count unchanged for quiet_s (polled). What is missing then is lost."""
    last: dict = {"n": -1, "since": time.monotonic()}

    def settled():
        n = sum(counts(settings, run_id).values())
        queues = agent_metrics(settings).get("otelcol_exporter_queue_size", 0) + collector_logs_queue(settings)
        if n != last["n"] or queues:
            last.update(n=n, since=time.monotonic())
        return time.monotonic() - last["since"] >= quiet_s and n

    wait_for(f"run {run_id}'s rows to stop changing", settled, timeout_s=DEADLINE_S + 120, interval_s=1.0,
             retry_on=(stack.StackError,), state=lambda: agent_state(settings, run_id))
    return last["n"]


def test_no_disk_cap_and_no_drop_count_with_clickhouse_down(capped_filelog_stack):
    """test_backpressure.py's run with filelog: the access log grows past the cap (+ the slack logship is
    allowed), nothing is dropped or counted; after ClickHouse is back every call arrives. The limit shown:
    disk use is bounded only by the calls made while the outage lasts."""
    settings, run_id = capped_filelog_stack, f"e2e-fl-bp-{uuid.uuid4().hex[:8]}"
    stack.stop("clickhouse", settings)
    sampler = DiskSampler(settings)
    traffic = SteadyTraffic(settings, run_id, CALLS, RATE).start()
    try:
        traffic.join()
        # The Collector's full queue refuses the agent, whose full queue refuses its receiver: filelog stops reading.
        wait_for("the agent's exporter to be refused by the full Collector", lambda: agent_log_count(settings, RETRYING),
                 timeout_s=DEADLINE_S, state=lambda: agent_state(settings, run_id))
    finally:
        peak = sampler.stop()
        stack.start_one("clickhouse", settings)
    record_bytes = peak / CALLS
    slack = 2 * RATE * record_bytes
    arrived = settled_rows(settings, run_id)
    counters = {k: v for k, v in agent_metrics(settings).items() if "drop" in k or "discard" in k}
    print(f"\nfilelog under test_backpressure's run: {CALLS} calls, {arrived} rows, access log peak {peak} bytes "
          f"(logship's cap {MAX_BYTES} + slack {slack:.0f}); the agent's drop counters: {counters or 'none'}")
    assert arrived == CALLS, f"filelog lost {CALLS - arrived} of {CALLS} calls: {agent_state(settings, run_id)}"
    assert peak > MAX_BYTES + slack, (
        f"LIMIT GONE? the access log stayed at {peak} bytes, under logship's cap {MAX_BYTES} + slack {slack:.0f}, "
        "with filelog: re-run test_backpressure.py with WIRELENS_LOG_SHIPPER=filelog and re-decide (issue 32)")


@pytest.fixture(scope="module")
def filelog_stack_for_kills(tmp_path_factory):
    """Default caps (the capped stack's 128 KiB queues are test_backpressure's case, not this one's)."""
    with stack_on_free_ports(tmp_path_factory.mktemp("filelog-kills"), "e2e-filelog-kills",
                             WIRELENS_LOG_SHIPPER="filelog") as settings:
        yield settings


def test_kill9_without_the_synchronous_emitter_loses_records(filelog_stack_for_kills):
    """The agent with the receiver's default emitter (WIRELENS_LOG_AGENT_FEATURE_GATES empty), SIGKILLed at
    random moments under 200 calls/s: calls go missing for good. Asserts the loss exists (missing > 0); with
    stanza.synchronousLogEmitter (the stack's default) test_filelog.py's kill test finds none."""
    settings, run_id = filelog_stack_for_kills, f"e2e-fl-async-{uuid.uuid4().hex[:8]}"
    no_gates = {**settings, "WIRELENS_LOG_AGENT_FEATURE_GATES": ""}
    stack.stop(AGENT, settings)
    restart(AGENT, no_gates)
    try:
        calls = 6000
        traffic, kills = kill_agent_at_random_moments(no_gates, run_id, calls, 200.0, seed=32)
        arrived = settled_rows(settings, run_id)
        raw, distinct = raw_log_rows(settings, run_id)
    finally:
        stack.stop(AGENT, settings)
        restart(AGENT, settings)
    missing = calls - arrived
    print(f"\nfilelog without stanza.synchronousLogEmitter: {kills} kills over {calls} calls: {arrived} rows, "
          f"{missing} calls lost ({raw} raw rows, {distinct} request ids)")
    assert arrived <= calls and distinct == arrived, (arrived, raw, distinct)
    assert missing > 0, (
        f"LIMIT GONE? no call lost in {kills} kills of the agent without stanza.synchronousLogEmitter: "
        "the receiver's default emitter may be synchronous now; re-decide (issue 32)")
