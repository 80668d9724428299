"""Zero loss: a known number of calls, exactly that many rows — also across crashes and outages.

Each test sends N calls at a steady rate (REST and gRPC, alternating) through
the real stack while it breaks one part of the pipeline mid-run, brings it
back, and then requires exactly N rows for the run in wirelens.requests
(FINAL): none missing, none extra, every request id once.

    Collector killed (SIGKILL) and restarted   Envoy keeps writing its access-log
                                               file; logship retries until the new
                                               Collector answers; what the old one
                                               had acknowledged waits in its
                                               persistent queue.
    ClickHouse down for 30 s (SIGKILL, then    the Collector's persistent queue
    started again)                             holds the records and retries.
    logship killed (SIGKILL) and restarted     it resumes from its checkpoint; a
                                               batch acknowledged but not yet
                                               checkpointed is sent twice and the
                                               ReplacingMergeTree keeps one. A kill
                                               rarely lands in that window, so the
                                               test then also rewinds the checkpoint
                                               to the run's first line: raw otel_logs
                                               rows must exceed the calls and
                                               requests FINAL must equal them.
    the access-log file rotated many times     logship drains each renamed file
                                               before it moves to Envoy's new one.

Spans are best effort (see collector/README.md) and are not counted here.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
import uuid

import grpc
import pytest
from ruamel.yaml import YAML

from tests.e2e.conftest import ROOT, rows, stack
from wirelens_helpers.wait import wait_for

from envoy import render, wiring


HELLO_REQUEST = b"\x0a\x08wirelens"  # HelloRequest{name: "wirelens"}
REST_REQUEST = b'{"name":"wirelens"}'
DRAIN_DEADLINE_S = 150.0


# -- helpers ------------------------------------------------------------------------------


class SteadyTraffic:
    """n calls at `rate` per second on a background thread, alternating REST and gRPC."""

    def __init__(self, settings, run_id: str, n: int, rate: float):
        self.settings, self.run_id, self.n, self.rate = settings, run_id, n, rate
        self.ok = {"rest": 0, "grpc": 0}
        self.errors: list[str] = []
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "SteadyTraffic":
        self.t0 = time.monotonic()
        self.thread.start()
        return self

    def wait_until_sent(self, calls: int, timeout_s: float = 120.0) -> None:
        wait_for(f"{calls} calls sent", lambda: self.sent >= calls or not self.thread.is_alive(),
                 timeout_s=timeout_s, interval_s=0.05, state=lambda: f"traffic stalled at {self.sent} calls")

    def join(self) -> None:
        self.thread.join(timeout=self.n / self.rate + 120)
        assert not self.thread.is_alive(), "traffic did not finish"
        assert not self.errors, f"{len(self.errors)} calls failed, e.g. {self.errors[:3]}"

    def _run(self) -> None:
        port = int(self.settings["WIRELENS_ENVOY_PORT"])
        rest = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        say_hello = channel.unary_unary("/wirelens.v1.Hello/SayHello")
        try:
            for i in range(self.n):
                delay = self.t0 + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing: a steady rate, so outages fall mid-run
                try:
                    if i % 2 == 0:
                        rest.request("POST", "/v1/hello", body=REST_REQUEST,
                                     headers={"content-type": "application/json", "x-wirelens-run": self.run_id})
                        response = rest.getresponse()
                        response.read()
                        assert response.status == 200, response.status
                        self.ok["rest"] += 1
                    else:
                        _, call = say_hello.with_call(HELLO_REQUEST, timeout=10,
                                                      metadata=[("x-wirelens-run", self.run_id)])
                        assert call.code() == grpc.StatusCode.OK
                        self.ok["grpc"] += 1
                except Exception as exc:  # noqa: BLE001 — recorded and reported by join()
                    self.errors.append(f"call {i}: {exc!r}")
                    rest.close()
                    rest = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                self.sent = i + 1
        finally:
            rest.close()
            channel.close()


def counts(settings, run_id: str) -> dict[str, int]:
    return {p: int(n) for p, n in rows(
        settings, f"SELECT protocol, count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol")}


def pipeline_state(settings, run_id: str) -> str:
    """What to print when rows are missing: where the records are."""
    parts = [f"logship: {stack.logship_progress(settings)}"]
    try:
        raw = rows(settings, f"SELECT count(), uniqExact(LogAttributes['wirelens.request_id']) FROM otel.otel_logs "
                             f"WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")
        parts.append(f"otel.otel_logs rows, distinct request ids: {raw}")
    except stack.StackError as exc:
        parts.append(f"ClickHouse: {exc}")
    try:
        _, metrics = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
        parts += [line for line in metrics.splitlines()
                  if line.startswith(("otelcol_exporter_queue_size{data_type=\"logs\"",
                                      "otelcol_exporter_send_failed_log_records",
                                      "otelcol_receiver_refused_log_records"))]
    except OSError as exc:
        parts.append(f"Collector metrics: {exc}")
    return "\n  ".join(parts)


def expect_exactly(settings, run_id: str, expected: dict[str, int]) -> None:
    """Wait until every call has its row, then require exactly that: no more, each request id once."""
    wait_for(f"a row for each call of run {run_id}: {expected}", lambda: counts(settings, run_id),
             lambda seen: all(seen.get(p, 0) >= n for p, n in expected.items()), timeout_s=DRAIN_DEADLINE_S,
             interval_s=0.5, retry_on=(stack.StackError,), state=lambda: pipeline_state(settings, run_id))
    assert counts(settings, run_id) == expected, pipeline_state(settings, run_id)
    (total, distinct), = rows(settings, "SELECT count(), uniqExact(request_id) FROM wirelens.requests FINAL "
                                        f"WHERE run_id = '{run_id}'")
    assert total == distinct == str(sum(expected.values())), (total, distinct)


def raw_log_rows(settings, run_id: str) -> tuple[int, int]:
    """The run's rows in otel.otel_logs, where every delivery lands, and its distinct request ids."""
    (raw, distinct), = rows(settings, "SELECT count(), uniqExact(LogAttributes['wirelens.request_id']) "
                                      f"FROM otel.otel_logs WHERE LogAttributes['wirelens.run_id'] = '{run_id}'")
    return int(raw), int(distinct)


def replay_run_from_checkpoint(settings, run_id: str) -> int:
    """Once logship has delivered everything: SIGKILL it, move its checkpoint back to the run's first
    line in the checkpointed file, start it again. Returns how many of the run's lines it will re-send."""
    wait_for("logship to ship and checkpoint everything",
             lambda: stack.logship_progress(settings)["pending_bytes"] == 0, timeout_s=DRAIN_DEADLINE_S)
    stack.kill("logship", settings)
    checkpoint_path = stack.state_dir(settings) / "logship" / "checkpoint.json"
    try:
        checkpoint = json.loads(checkpoint_path.read_text())
        with open(checkpoint["path"], "rb") as shipped:
            delivered = shipped.read(checkpoint["offset"])
        first_line_offset, replayed, offset = None, 0, 0
        for line in delivered.splitlines(keepends=True):
            if json.loads(line)["attributes"]["wirelens.run_id"] == run_id:
                replayed += 1
                if first_line_offset is None:
                    first_line_offset = offset
            offset += len(line)
        assert first_line_offset is not None, (
            f"no line of run {run_id} before the checkpoint in {checkpoint['path']} (offset {checkpoint['offset']}): "
            "nothing to replay")
        checkpoint_path.write_text(json.dumps({**checkpoint, "offset": first_line_offset}) + "\n")
    finally:
        stack.start_one("logship", settings)
    return replayed


# -- the access-log sink: rendered as logship expects, accepted by real Envoy ------------------


def test_file_sink_config_carries_every_record_field_and_validates(tmp_path):
    settings = stack.load_settings({})
    config = tmp_path / "envoy.yaml"
    config.write_text(render.render(settings, ROOT / "build" / "wirelens_filter.wasm",
                                    (ROOT / "build" / "opmap.json").read_text(), ROOT / "build" / "proto" / "wirelens.pb",
                                    access_log="file", access_log_path=tmp_path / "access.jsonl"))
    text = config.read_text()
    assert "envoy.access_loggers.open_telemetry" not in text  # one path only: no double counting
    for listener in YAML(typ="safe").load(text)["static_resources"]["listeners"]:
        (log,) = listener["filter_chains"][0]["filters"][0]["typed_config"]["access_log"]
        line_format = log["typed_config"]["log_format"]["json_format"]
        assert set(line_format) == {"time", "trace_id", "span_id", "body", "attributes"}
        assert line_format["attributes"] == {name: fmt for name, fmt, _ in wiring.RECORD_FIELDS}
    result = subprocess.run([str(stack.envoy_binary()), "--mode", "validate", "-c", str(config),
                             "--disable-hot-restart", "--log-level", "error"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    with pytest.raises(ValueError, match="needs a path"):
        render.render(settings, ROOT / "x.wasm", "{}", ROOT / "d.pb", access_log="file")


# -- crashes and outages mid-run -----------------------------------------------------------


def test_collector_killed_and_restarted_mid_run_loses_nothing(local_stack):
    settings, run_id = local_stack, f"e2e-zl-collector-{uuid.uuid4().hex[:8]}"
    assert settings["WIRELENS_ACCESS_LOG_SINK"] == "file"
    n, rate = 1000, 40.0
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        before = stack.logship_progress(settings)["export_failures"]
        stack.kill("collector", settings)
        killed_at = traffic.sent
        time.sleep(3)  # the Collector stays down a few seconds, calls keep coming
    finally:
        stack.start_one("collector", settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)  # the outage fell mid-run
    expect_exactly(settings, run_id, traffic.ok)
    # logship saw the outage (its exports failed) and recovered by retrying.
    progress = stack.logship_progress(settings)
    assert progress["export_failures"] > before, progress
    assert progress["records_rejected"] == 0 and progress["malformed_lines"] == 0, progress


def test_clickhouse_down_30s_mid_run_everything_arrives_once_back(local_stack):
    settings, run_id = local_stack, f"e2e-zl-clickhouse-{uuid.uuid4().hex[:8]}"
    n, rate, outage_s = 1500, 30.0, 30.0
    ping = stack.http_ok(f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}/ping", "Ok.")
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 5)
        stack.kill("clickhouse", settings)  # supervisor and engine at once: nothing restarts it
        killed_at, down_since = traffic.sent, time.monotonic()
        assert not ping(), "ClickHouse still answers after SIGKILL"
        while time.monotonic() - down_since < outage_s:
            assert not ping(), "ClickHouse came back before the outage ended"
            time.sleep(1)  # the outage itself: 30 s of calls with no ClickHouse
    finally:
        stack.start_one("clickhouse", settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    assert restarted_at - killed_at >= rate * outage_s * 0.5  # hundreds of calls made while it was down
    expect_exactly(settings, run_id, traffic.ok)


def test_logship_killed_and_restarted_mid_run_resends_and_dedups(local_stack):
    settings, run_id = local_stack, f"e2e-zl-logship-{uuid.uuid4().hex[:8]}"
    n, rate = 600, 40.0
    traffic = SteadyTraffic(settings, run_id, n, rate).start()
    try:
        traffic.wait_until_sent(n // 4)
        stack.kill("logship", settings)
        killed_at = traffic.sent
        time.sleep(3)
    finally:
        stack.start_one("logship", settings)
    restarted_at = traffic.sent
    traffic.join()
    assert 0 < killed_at < restarted_at < n, (killed_at, restarted_at)
    expect_exactly(settings, run_id, traffic.ok)
    raw_after_outage, distinct = raw_log_rows(settings, run_id)
    assert distinct == n and raw_after_outage >= n, (raw_after_outage, distinct)

    # Whether the kill above caused re-sends is luck (it must land between an acknowledgement and the
    # checkpoint after it), so force them: replay every line of the run logship has already delivered.
    replayed = replay_run_from_checkpoint(settings, run_id)
    expected_raw = raw_after_outage + replayed
    raw, distinct = wait_for(
        f"the {replayed} replayed lines of run {run_id} in otel.otel_logs (raw rows {expected_raw})",
        lambda: raw_log_rows(settings, run_id), lambda seen: seen[0] >= expected_raw, timeout_s=DRAIN_DEADLINE_S,
        interval_s=0.5, state=lambda: pipeline_state(settings, run_id))
    assert raw == expected_raw, (
        f"after rewinding logship's checkpoint, {raw - raw_after_outage} of the {replayed} replayed lines of run "
        f"{run_id} reached otel.otel_logs (raw rows {raw}, expected {expected_raw})\n  {pipeline_state(settings, run_id)}")
    assert distinct == n, f"the replay brought {distinct} distinct request ids, the run made {n} calls"
    assert raw > n, f"no duplicate ever reached otel.otel_logs: {raw} raw rows for {n} calls"
    # At-least-once below, exactly-once in wirelens.requests: the re-sent records collapse under FINAL.
    expect_exactly(settings, run_id, traffic.ok)
    print(f"run {run_id}: {n} calls, {raw_after_outage - n} re-sent by the kill, {replayed} by the replay, "
          f"{raw} raw rows, {n} rows in wirelens.requests FINAL")


def test_access_log_rotation_under_load_loses_nothing(local_stack):
    """logship rotates Envoy's file (rename, POST /reopen_logs, drain, remove) many times mid-run."""
    settings, run_id = local_stack, f"e2e-zl-rotate-{uuid.uuid4().hex[:8]}"
    small = {**settings, "WIRELENS_ACCESS_LOG_ROTATE_BYTES": "60000"}  # ≈40 records per file
    stack.stop("logship", settings)
    stack.start(stack.BY_NAME["logship"], small)
    try:
        before = stack.logship_progress(settings)["rotations"]
        traffic = SteadyTraffic(settings, run_id, 400, 50.0).start()
        traffic.join()
        expect_exactly(settings, run_id, traffic.ok)
        progress = stack.logship_progress(settings)
        assert progress["rotations"] - before >= 5, progress
        assert progress["malformed_lines"] == 0, progress
        access_log = settings["WIRELENS_ACCESS_LOG"]
        wait_for("the last rotated file drained and removed",
                 lambda: not os.path.exists(access_log + ".1"), timeout_s=30)
    finally:
        stack.stop("logship", settings)
        stack.start(stack.BY_NAME["logship"], settings)


def test_stack_is_whole_again(local_stack):
    """The tests above restarted components: every one is up and healthy afterwards."""
    for component in stack.COMPONENTS:
        if component.enabled(local_stack):
            wait_for(f"{component.name} healthy", component.ready(local_stack), timeout_s=30)
            assert stack.read_pid(local_stack, component.name), component.name
    progress = stack.logship_progress(local_stack)
    wait_for("logship caught up", lambda: stack.logship_progress(local_stack)["pending_bytes"] == 0, timeout_s=30)
    assert progress["records_rejected"] == 0, progress
