"""filelog as the log agent (issue 32): logship's guarantee tests, run against the Collector's own reader.

A stack of its own with WIRELENS_LOG_SHIPPER=filelog: a second Collector, the log
agent (collector/filelog-agent.yaml: file_log receiver with its offsets in
file_storage, retry_on_failure without a time limit, an OTLP exporter with a
persistent queue, the Alpha gate stanza.synchronousLogEmitter), reads Envoy's
access-log file instead of logship. The crash and outage sequences are
test_zero_loss.py's (its SteadyTraffic, expect_exactly, raw_log_rows):

    records identical to logship's       the same Envoy lines shipped both ways:
                                         every otel.otel_logs column equal
    Collector killed and restarted       the agent's queue keeps what it read
    ClickHouse down 30 s                 the Collector's queue holds the records
    agent killed and restarted, then     the agent resumes from its stored offsets;
    its stored offsets rolled back       rolled back, it re-reads the run: raw rows
                                         grow, wirelens.requests FINAL stays exact
    the file renamed + /reopen_logs      the agent drains the renamed file and
    (Envoy's rotation) under load        follows the new one
    kill -9 of the agent at random       exactly one row per call (with the gate)
    moments over 20,000 calls

and what filelog cannot do (test_filelog_limits.py: the reproducers).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import stack, stack_on_free_ports
from tests.e2e.test_zero_loss import DRAIN_DEADLINE_S, SteadyTraffic, counts, expect_exactly, raw_log_rows
from wirelens_helpers.wait import wait_for

from envoy import wiring

AGENT = "log-agent"


@pytest.fixture(scope="module")
def filelog_stack(tmp_path_factory):
    with stack_on_free_ports(tmp_path_factory.mktemp("filelog"), "e2e-filelog",
                             WIRELENS_LOG_SHIPPER="filelog") as settings:
        yield settings


def agent_metrics(settings) -> dict[str, float]:
    """The agent's own counters (its Prometheus endpoint), summed over labels; {} if it does not answer."""
    try:
        status, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_LOG_AGENT_METRICS_PORT']}/metrics")
    except OSError:
        return {}
    totals: dict[str, float] = {}
    for line in text.splitlines() if status == 200 else []:
        if line and not line.startswith("#"):
            name, value = line.split("{")[0].split(" ")[0], line.rsplit(" ", 1)[-1]
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


def agent_log_count(settings, text: str) -> int:
    """How many lines of the agent's log (all its runs) hold `text`."""
    path = stack.log_path(settings, AGENT)
    return sum(text in line for line in path.read_text(errors="replace").splitlines()) if path.exists() else 0


RETRYING = "Exporting failed. Will retry the request"  # exporterhelper's retry sender (retries are not send_failed)


def agent_state(settings, run_id: str) -> str:
    m = agent_metrics(settings)
    keys = ("otelcol_receiver_accepted_log_records", "otelcol_receiver_refused_log_records",
            "otelcol_exporter_sent_log_records", "otelcol_exporter_send_failed_log_records",
            "otelcol_exporter_queue_size", "otelcol_exporter_enqueue_failed_log_records")
    return (f"agent: { {k.removeprefix('otelcol_'): m.get(k) for k in keys} }; "
            f"rows {counts(settings, run_id)}, raw otel_logs rows {raw_log_rows(settings, run_id)}")


def run_lines(settings, run_id: str) -> list[bytes]:
    """The run's lines in Envoy's access-log file (and any file renamed from it), in file order."""
    path = Path(settings["WIRELENS_ACCESS_LOG"])
    lines = []
    for f in sorted(path.parent.glob(path.name + "*")):
        for line in f.read_bytes().splitlines(keepends=True):
            if run_id.encode() in line and json.loads(line)["attributes"].get("wirelens.run_id") == run_id:
                lines.append(line)
    return lines


# -- the records ----------------------------------------------------------------------------------------


def test_records_are_identical_to_logships(filelog_stack, tmp_path):
    """The run's Envoy lines shipped by the agent and, again, by logship into the same Collector:
    per request id two otel.otel_logs rows with every column equal, and identical wirelens.requests rows."""
    settings, run_id = filelog_stack, f"e2e-fl-same-{uuid.uuid4().hex[:8]}"
    traffic = SteadyTraffic(settings, run_id, 40, 20.0).start()
    traffic.join()
    expect_exactly(settings, run_id, traffic.ok)
    lines = run_lines(settings, run_id)
    assert len(lines) == 40, f"{len(lines)} lines of run {run_id} in the access log"
    copy = tmp_path / "run.jsonl"
    copy.write_bytes(b"".join(lines))
    (port,) = stack.free_ports(1)
    logship = subprocess.Popen(
        [str(stack.BIN / "logship"), "-file", str(copy), "-checkpoint", str(tmp_path / "checkpoint.json"),
         "-endpoint", f"127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}", "-resource", wiring.resource_flag(),
         "-listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def shipped():
            status, body = stack.http_get(f"http://127.0.0.1:{port}/progress")
            return status == 200 and json.loads(body)
        wait_for("logship to ship the run's 40 lines", shipped,
                 lambda p: p and p["pending_bytes"] == 0 and p["records_shipped"] == 40,
                 timeout_s=60, retry_on=(OSError,), processes=[logship])
    finally:
        logship.kill()
        logship.wait()
    wait_for(f"two raw rows per call of run {run_id}", lambda: raw_log_rows(settings, run_id),
             lambda seen: seen == (80, 40), timeout_s=DRAIN_DEADLINE_S, interval_s=0.5)
    out = stack.clickhouse_query(settings, "SELECT * FROM otel.otel_logs WHERE LogAttributes['wirelens.run_id'] = "
                                           f"'{run_id}' FORMAT JSONEachRow")
    by_id: dict[str, list[dict]] = {}
    for line in out.splitlines():
        row = json.loads(line)
        by_id.setdefault(row["LogAttributes"]["wirelens.request_id"], []).append(row)
    assert len(by_id) == 40 and all(len(pair) == 2 for pair in by_id.values())
    columns = sorted(next(iter(by_id.values()))[0])
    for request_id, (a, b) in by_id.items():
        differ = {c: (a[c], b[c]) for c in columns if a[c] != b[c]}
        assert not differ, f"request {request_id}: otel.otel_logs columns differ between filelog and logship: {differ}"
    # wirelens.requests (the view's rows, before any merge collapses them): equal as well. The view's insert
    # commits after otel.otel_logs' own part, so wait for the view to have every request id first.
    wait_for(f"the view's rows for the 40 request ids of run {run_id}", lambda: stack.clickhouse_query(
        settings, f"SELECT uniqExact(request_id) FROM wirelens.requests WHERE run_id = '{run_id}'").strip(),
        lambda seen: seen == "40", timeout_s=DRAIN_DEADLINE_S, interval_s=0.2)
    out = stack.clickhouse_query(settings, f"SELECT * FROM wirelens.requests WHERE run_id = '{run_id}' "
                                           "FORMAT JSONEachRow")
    views: dict[str, set[str]] = {}
    for line in out.splitlines():
        row = json.loads(line)
        views.setdefault(row["request_id"], set()).add(json.dumps(row, sort_keys=True))
    assert len(views) == 40 and all(len(v) == 1 for v in views.values()), \
        {k: v for k, v in views.items() if len(v) != 1}
    print(f"\nfilelog vs logship: 40 calls, {len(columns)} otel.otel_logs columns equal per call "
          f"({', '.join(columns)}); wirelens.requests rows equal")


# -- crashes and outages mid-run (test_zero_loss.py's sequences) -----------------------------------------


def test_collector_killed_and_restarted_mid_run_loses_nothing(filelog_stack):
    settings, run_id = filelog_stack, f"e2e-fl-collector-{uuid.uuid4().hex[:8]}"
    n, rate = 1000, 40.0
    retries_before = agent_log_count(settings, RETRYING)
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        stack.kill("collector", settings)
        killed_at = traffic.sent
        time.sleep(3)  # the Collector stays down a few seconds, calls keep coming
    finally:
        restart("collector", settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    expect_exactly(settings, run_id, traffic.ok)
    # The agent saw the outage (its exports failed) and recovered by retrying.
    assert agent_log_count(settings, RETRYING) > retries_before, \
        f"the agent never retried: {agent_state(settings, run_id)}"


def test_clickhouse_down_30s_mid_run_everything_arrives_once_back(filelog_stack):
    settings, run_id = filelog_stack, f"e2e-fl-clickhouse-{uuid.uuid4().hex[:8]}"
    n, rate, outage_s = 1500, 30.0, 30.0
    ping = stack.http_ok(f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}/ping", "Ok.")
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 5)
        stack.kill("clickhouse", settings)
        killed_at, down_since = traffic.sent, time.monotonic()
        assert not ping(), "ClickHouse still answers after SIGKILL"
        while time.monotonic() - down_since < outage_s:
            time.sleep(1)  # the outage itself: 30 s of calls with no ClickHouse
    finally:
        stack.start_one("clickhouse", settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    expect_exactly(settings, run_id, traffic.ok)


def receiver_storage_files(settings) -> list[Path]:
    """The file_storage files of the agent's file_log receiver (its offsets), not the exporter's queue."""
    storage = Path(settings["WIRELENS_LOG_AGENT_STORAGE_DIR"])
    files = [f for f in storage.iterdir() if f.is_file() and f.name.startswith("receiver_")]
    assert files, f"no receiver file in {storage}: {sorted(f.name for f in storage.iterdir())}"
    return files


def test_agent_killed_and_restarted_then_offsets_rolled_back_resends_and_dedups(filelog_stack, tmp_path):
    """The agent SIGKILLed mid-run resumes from its stored offsets; then the filelog equivalent of logship's
    rewound checkpoint: the receiver's storage file as it was before the run is put back, so the agent reads
    the whole run again. Raw rows grow by the run; wirelens.requests FINAL stays one row per call."""
    settings, run_id = filelog_stack, f"e2e-fl-agent-{uuid.uuid4().hex[:8]}"
    # The offsets before the run, copied with the agent stopped (a consistent file).
    stack.stop(AGENT, settings)
    saved = tmp_path / "offsets"
    saved.mkdir()
    for f in receiver_storage_files(settings):
        shutil.copy2(f, saved / f.name)
    restart(AGENT, settings)
    n, rate = 600, 40.0
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        stack.kill(AGENT, settings)
        killed_at = traffic.sent
        time.sleep(3)
    finally:
        restart(AGENT, settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    expect_exactly(settings, run_id, traffic.ok)
    raw_after_outage, distinct = raw_log_rows(settings, run_id)
    assert distinct == n and raw_after_outage >= n, (raw_after_outage, distinct)

    stack.kill(AGENT, settings)
    for f in saved.iterdir():
        shutil.copy2(f, Path(settings["WIRELENS_LOG_AGENT_STORAGE_DIR"]) / f.name)
    restart(AGENT, settings)
    expected_raw = raw_after_outage + n
    raw, distinct = wait_for(
        f"the {n} re-read lines of run {run_id} in otel.otel_logs (raw rows {expected_raw})",
        lambda: raw_log_rows(settings, run_id), lambda seen: seen[0] >= expected_raw, timeout_s=DRAIN_DEADLINE_S,
        interval_s=0.5, state=lambda: agent_state(settings, run_id))
    assert raw == expected_raw, f"raw rows {raw}, expected {expected_raw}: {agent_state(settings, run_id)}"
    assert distinct == n, (raw, distinct)
    expect_exactly(settings, run_id, traffic.ok)
    print(f"\nrun {run_id}: {n} calls, {raw_after_outage - n} re-sent by the kill, {n} by the rollback, "
          f"{raw} raw rows, {n} rows in wirelens.requests FINAL")


def reopen_logs(settings) -> None:
    """POST /reopen_logs to Envoy's admin: it closes its access-log file and opens the path anew."""
    request = urllib.request.Request(f"http://127.0.0.1:{settings['WIRELENS_ENVOY_ADMIN_PORT']}/reopen_logs",
                                     method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200, response.status


def test_envoy_rotation_under_load_loses_nothing(filelog_stack):
    """Envoy's rotation as logship does it, by hand: rename access.jsonl to access.jsonl.<k>, POST
    /reopen_logs, five times mid-run. The agent reads each renamed file to its end (include glob, fingerprint)
    and the new one from its start: exactly one row per call. (Nothing removes the renamed files: see
    test_filelog_limits.py.)"""
    settings, run_id = filelog_stack, f"e2e-fl-rotate-{uuid.uuid4().hex[:8]}"
    path = Path(settings["WIRELENS_ACCESS_LOG"])
    traffic = SteadyTraffic(settings, run_id, 400, 50.0).start()
    rotated = []
    try:
        for k in range(5):
            traffic.wait_until_sent(60 * (k + 1))
            target = path.with_name(f"{path.name}.{uuid.uuid4().hex[:6]}")
            os.rename(path, target)
            rotated.append(target)
            reopen_logs(settings)
    finally:
        traffic.join()
    expect_exactly(settings, run_id, traffic.ok)
    raw, distinct = raw_log_rows(settings, run_id)
    assert distinct == 400, (raw, distinct)
    print(f"\nrotation: 5 renames + /reopen_logs under load; 400 calls, {raw} raw rows, 400 rows FINAL")


# -- kill -9 of the agent at random moments ---------------------------------------------------------------


def restart(component: str, settings) -> None:
    """Start the component again once the killed one's ports are free (polled: a process killed a moment ago
    may still hold its listening sockets while it exits)."""
    def ports_free():
        for variable in stack.BY_NAME[component].ports:
            try:
                stack.check_port_free(int(settings[variable]), variable, component)
            except stack.StackError as exc:
                return exc
        return True
    if stack.read_pid(settings, component):
        return
    wait_for(f"{component}'s ports free after the kill", ports_free, lambda v: v is True, timeout_s=60, interval_s=0.1)
    stack.start(stack.BY_NAME[component], settings)


def kill_agent_at_random_moments(settings, run_id: str, n: int, rate: float, seed: int,
                                 component: str = AGENT) -> tuple[SteadyTraffic, int]:
    """n calls at `rate`; meanwhile SIGKILL the shipper (the agent, or logship) every 1-4 s (a random moment,
    seeded) and start it again at once. Returns the traffic (finished) and the number of kills."""
    rng = random.Random(seed)
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    kills = 0
    try:
        while traffic.thread.is_alive():
            time.sleep(rng.uniform(1.0, 4.0))  # the random moment itself (not a synchronization)
            if not traffic.thread.is_alive():
                break
            stack.kill(component, settings)
            kills += 1
            restart(component, settings)
    finally:
        if not stack.read_pid(settings, component):
            restart(component, settings)
        traffic.join()
    return traffic, kills


# 5,000 calls in `make test` (about a dozen kills each, ~40 s); WIRELENS_FILELOG_KILL_CALLS=20000 is the full run
# the verdict rests on (collector/README.md: filelog 36 kills, logship 37, 20,000 of 20,000 rows each).
KILL_CALLS = int(os.environ.get("WIRELENS_FILELOG_KILL_CALLS", "5000"))


@pytest.mark.parametrize("shipper", ["filelog", "logship"])
def test_shipper_killed_at_random_moments_every_call_is_one_row(shipper, request):
    """kill -9 of the shipper every 1-4 s over KILL_CALLS calls at up to 200/s: exactly one row per call.
    filelog: the agent with stanza.synchronousLogEmitter (without it: test_filelog_limits.py); logship: the
    session's local stack, for the side-by-side table."""
    settings = request.getfixturevalue("filelog_stack" if shipper == "filelog" else "local_stack")
    component = AGENT if shipper == "filelog" else "logship"
    run_id = f"e2e-fl-kill9-{shipper}-{uuid.uuid4().hex[:8]}"
    if shipper == "filelog":
        assert "stanza.synchronousLogEmitter" in settings["WIRELENS_LOG_AGENT_FEATURE_GATES"]
    seed = int(os.environ.get("WIRELENS_FILELOG_KILL_SEED", str(random.randrange(1 << 30))))
    traffic, kills = kill_agent_at_random_moments(settings, run_id, KILL_CALLS, 200.0, seed, component)
    assert kills >= max(3, KILL_CALLS // 2000), f"only {kills} kills (seed {seed})"  # 10 for 20,000 calls
    expect_exactly(settings, run_id, traffic.ok)
    raw, _ = raw_log_rows(settings, run_id)
    print(f"\n{shipper} kill -9 x{kills} (seed {seed}): {KILL_CALLS} calls in {time.monotonic() - traffic.t0:.0f} s, "
          f"{raw} raw rows, {KILL_CALLS} rows FINAL")
