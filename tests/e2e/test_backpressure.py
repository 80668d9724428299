"""Backpressure that is never silent: ClickHouse down longer than the caps hold.

A stack of its own, on free ports, with small caps: the access-log file and
its rotated files at most WIRELENS_ACCESS_LOG_MAX_BYTES, each Collector queue
at most WIRELENS_COLLECTOR_QUEUE_BYTES. ClickHouse is stopped; N calls go
through Envoy. The Collector queues records until its logs queue is full, then
its receiver refuses them, so they wait in logship's file; past logship's cap
the oldest are dropped and counted. ClickHouse comes back and everything kept
arrives. Then, exactly:

    rows of the run + records logship dropped == N calls sent, drops > 0

and while it lasted, the access log's disk use stayed under its cap plus the
slack the cap allows: what Envoy writes between two of logship's checks
(every 0.5 s), bounded here by two seconds of this test's traffic to leave
room for a loaded machine. `make status` and the report show the counts.
"""

from __future__ import annotations

import re
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, rows, stack, stack_on_free_ports
from tests.e2e.test_zero_loss import SteadyTraffic, counts
from wirelens_helpers.wait import wait_for

ROTATE_BYTES = 32 << 10
MAX_BYTES = 128 << 10
QUEUE_BYTES = 128 << 10
CALLS = 1200
RATE = 100.0  # calls per second: the disk slack below is two seconds of them
DEADLINE_S = 150.0


@pytest.fixture(scope="module")
def capped_stack(tmp_path_factory):
    with stack_on_free_ports(tmp_path_factory.mktemp("backpressure"), "e2e-backpressure",
                             WIRELENS_ACCESS_LOG_ROTATE_BYTES=str(ROTATE_BYTES),
                             WIRELENS_ACCESS_LOG_MAX_BYTES=str(MAX_BYTES),
                             WIRELENS_COLLECTOR_QUEUE_BYTES=str(QUEUE_BYTES)) as settings:
        yield settings


def access_log_bytes(settings) -> int:
    """The access-log file and its rotated files (access.jsonl.<n>), as logship's cap counts them."""
    path = Path(settings["WIRELENS_ACCESS_LOG"])
    total = 0
    for entry in path.parent.iterdir() if path.parent.exists() else []:
        if entry.name == path.name or re.fullmatch(re.escape(path.name) + r"\.\d+", entry.name):
            try:
                total += entry.stat().st_size
            except FileNotFoundError:  # removed by logship between listing and stat
                pass
    return total


class DiskSampler:
    """The largest disk use of the access log seen, sampled every 20 ms on a thread."""

    def __init__(self, settings):
        self.settings, self.peak, self.stopped = settings, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(0.02):
            self.peak = max(self.peak, access_log_bytes(self.settings))

    def stop(self) -> int:
        self.stopped.set()
        self.thread.join()
        return self.peak


def test_clickhouse_down_past_the_caps_drops_are_counted_exactly_and_shown(capped_stack):
    settings, run_id = capped_stack, f"e2e-bp-{uuid.uuid4().hex[:8]}"
    stack.stop("clickhouse", settings)
    sampler = DiskSampler(settings)
    traffic = SteadyTraffic(settings, run_id, CALLS, RATE).start()
    traffic.join()
    sent = sum(traffic.ok.values())
    assert sent == CALLS

    # Everything Envoy wrote is either waiting in the capped file or counted as dropped.
    progress = wait_for("logship to drop past its cap", lambda: stack.logship_progress(settings),
                        lambda progress: progress["records_dropped"] > 0, timeout_s=DEADLINE_S, interval_s=0.2)
    peak = sampler.stop()
    record_bytes = progress["bytes_dropped"] / progress["records_dropped"]
    slack = 2 * RATE * record_bytes
    assert peak <= MAX_BYTES + slack, f"access log reached {peak} bytes, cap {MAX_BYTES} + slack {slack:.0f}"
    assert progress["max_disk_bytes"] == MAX_BYTES, progress
    collector = stack.collector_counters(settings)
    assert collector.get("otelcol_receiver_refused_log_records", 0) > 0, \
        f"the Collector's full logs queue should refuse (and logship keep) the records: " \
        f"{ {k: v for k, v in collector.items() if 'refused' in k or 'failed' in k} }"
    # Spans have no one to keep them: the full trace queue drops them, counted.
    assert collector.get("otelcol_exporter_enqueue_failed_spans", 0) > 0, collector

    stack.start_one("clickhouse", settings)
    # After recovery: every kept record arrives, and with the dropped ones they are all the calls.
    def accounted():
        progress = stack.logship_progress(settings)
        arrived = sum(counts(settings, run_id).values())
        return progress["pending_bytes"] == 0 and arrived + progress["records_dropped"] == CALLS and \
            (arrived, progress["records_dropped"])
    arrived, dropped = wait_for(f"rows + drops == {CALLS}", accounted, timeout_s=DEADLINE_S, interval_s=0.2,
                                state=lambda: (sum(counts(settings, run_id).values()), stack.logship_progress(settings)))
    assert dropped > 0 and arrived > 0, (arrived, dropped)
    (total, distinct), = rows(settings, f"SELECT count(), uniqExact(request_id) FROM wirelens.requests FINAL "
                                        f"WHERE run_id = '{run_id}'")
    assert int(total) == int(distinct) == arrived
    storage = Path(settings["WIRELENS_COLLECTOR_STORAGE_DIR"])
    queue_files = sum(f.stat().st_size for f in storage.iterdir() if f.is_file())
    # Four persistent queues (logs; traces and metrics to ClickHouse; traces to Jaeger), each file capped.
    assert queue_files <= 4 * int(settings["WIRELENS_COLLECTOR_STORAGE_MAX_BYTES"]), queue_files
    print(f"\nbackpressure: {CALLS} calls = {arrived} rows + {dropped} dropped by logship; access log peak "
          f"{peak} bytes (cap {MAX_BYTES}, slack {slack:.0f}); Collector queue files {queue_files} bytes; "
          f"Collector: {collector.get('otelcol_exporter_enqueue_failed_spans', 0):.0f} spans dropped, "
          f"{collector.get('otelcol_receiver_refused_log_records', 0):.0f} log-record refusals")

    # make status shows both sides' counts.
    lines: list[str] = []
    stack.status(settings, log=lines.append)
    shown = "\n".join(lines)
    assert f"logship: dropped {dropped} access-log records past the" in shown, shown
    assert re.search(r"collector: [1-9]\d* log-record refusals .*, [1-9]\d* spans dropped \(queue full\)", shown), shown

    # The report: the count reaches ClickHouse as logship's metric (sent every 10 s; an
    # earlier, smaller total may show first).
    url = f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}"
    expected = f"# dropped: {dropped:,} calls dropped past logship's disk cap"
    seen: list[str] = []
    def report_shows_the_count():
        out = subprocess.run([str(ROOT / "bin" / "wirelens"), "report", "--clickhouse-url", url, "--format", "tsv"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        seen[:] = [line for line in out.stdout.splitlines() if line.startswith("# dropped: ")]
        return bool(seen) and seen[0].startswith(expected)
    wait_for(f"the report's line {expected!r}", report_shows_the_count, timeout_s=DEADLINE_S, interval_s=2.0,
             state=lambda: f"the report's lines: {seen}")  # a report runs every query: poll it gently
