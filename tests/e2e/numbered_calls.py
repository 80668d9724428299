"""Numbered calls through a live change: a bounded background sender, and the exact check of their rows.

Each call carries its number in its W3C trace id (`traceparent: 00-<16 hex of the run><16 hex number>-<span>-01`).
Envoy keeps a client's trace context, the access-log record carries it (otel.otel_logs TraceId) and so does the
row (wirelens.requests trace_id): a row names the call it came from, and a missing or doubled row names its
number. The sender sends one call at a time (a new connection each), paced at `rate_per_s`, at most `max_calls`,
and records which calls were answered as expected.

A change (a module upgrade, a new operation map, a new sample rate) is made inside `calls.change(name, rate)`:
the block writes the new config and returns once Envoy runs it (the test's known point: an ECDS stat, the
config dump). The calls then fall in three groups:
  - started before the block (numbers < first_maybe): they met the old config;
  - started after the known point, and after the next call was answered (numbers >= first_sure): the new one.
    One call of margin: the first call started after the known point may reach Envoy's worker in the same
    event-loop turn as the update the main thread posted to it; its answer took more turns, so the worker has
    run the update before the next call starts (the sender sends one call at a time);
  - in between (the call in flight when the block began, those sent while Envoy took the change, one more):
    either config.
The rows each call must have follow from the sample rate(s) it may have met: rate 1, exactly one row; rate 0,
none; a window between two rates, none or one, and in order: Envoy's one worker (the tests run concurrency 1)
switches once, so the calls that met the old rate come first. A call without a row before a 1 -> 0 window's last
recorded call, or after a 0 -> 1 window's first, is named lost. A change that keeps rate 1 (the upgrade, the
map) allows no loss at all, also for the calls in flight while it happens.

Every call is answered, and every call, recorded or not, has an access-log record (Envoy logs each call; a batch
the pipeline re-sends repeats records in the raw table, which FINAL makes one row). The rows are a materialized view
over those records, but a ClickHouse insert is not atomic with its views: the check waits for all records of the
run, then for a row for every record that carries the filter's record, then checks the rows per call.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.e2e.conftest import rows
from wirelens_helpers.wait import WaitTimeout, wait_for


@dataclass
class Change:
    name: str
    sample_rate: float   # the rate after the change
    first_maybe: int     # the first call that may meet the new config
    first_sure: int      # the first call that must meet it
    live_after_s: float  # from the start of the block to the known point


def spans(numbers: Iterable[int]) -> str:
    """Numbers as runs: 3, 7..12, 40."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = previous = None
    for n in ordered + [None]:
        if start is not None and n == previous + 1:
            previous = n
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}..{previous}")
        start = previous = n
    return ", ".join(parts)


def logged_records(settings: dict, trace_ids: list[str]) -> str:
    """What Envoy's access log said of these calls (otel.otel_logs): whether it carries the filter's record
    (its protocol and sample_rate; none: the filter published nothing), the log time. For a failure message."""
    if not trace_ids:
        return "none"
    found = rows(settings, "SELECT TraceId, Timestamp, LogAttributes['wirelens.protocol'], "
                           "LogAttributes['wirelens.sample_rate'] FROM otel.otel_logs WHERE lower(TraceId) IN ("
                           + ", ".join(f"'{t.lower()}'" for t in trace_ids) + ") ORDER BY Timestamp")
    return "; ".join(f"{trace} at {at}: " + (f"record of protocol {protocol}, sample_rate {rate!r}" if protocol
                                             else "no filter record")
                     for trace, at, protocol, rate in found) or "no access-log record"


class NumberedCalls(threading.Thread):
    """Background calls, numbered from 0, one at a time until stop() or max_calls.

    send(number, traceparent) makes one call and returns None when it was answered as expected, else a short
    text saying what came back; an exception counts as not answered too."""

    def __init__(self, send: Callable[[int, str], str | None], *, sample_rate: float = 1, rate_per_s: float = 25,
                 max_calls: int = 3000, name: str = "numbered calls"):
        super().__init__(daemon=True, name=name)
        self.send, self.rate_per_s, self.max_calls = send, rate_per_s, max_calls
        self.initial_rate = sample_rate
        self.prefix = secrets.token_hex(8)   # 16 hex: the run's half of every trace id
        self.started = 0                      # calls started so far = the number the next call carries
        self.answered: set[int] = set()
        self.failed: dict[int, str] = {}
        self.changes: list[Change] = []
        self.stopping = threading.Event()
        self.exhausted = False
        self.rows_after_records_s = 0.0
        self.resent: list[int] = []

    # -- numbers and trace ids

    def trace_id(self, number: int) -> str:
        return f"{self.prefix}{number:016x}"

    def number_of(self, trace_id: str) -> int | None:
        trace_id = trace_id.lower()
        return int(trace_id[16:], 16) if len(trace_id) == 32 and trace_id.startswith(self.prefix) else None

    # -- sending

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stopping.is_set():
            number = self.started
            if number >= self.max_calls:
                self.exhausted = True
                return
            # Pacing, not synchronization: the next call's slot, or at once when behind.
            if self.stopping.wait(max(0.0, t0 + number / self.rate_per_s - time.monotonic())):
                return
            self.started = number + 1
            try:
                problem = self.send(number, f"00-{self.trace_id(number)}-{secrets.token_hex(8)}-01")
            except Exception as exc:   # noqa: BLE001 - any way a call can fail is a failed call
                problem = repr(exc)
            if problem is None:
                self.answered.add(number)
            else:
                self.failed[number] = problem

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)
        assert not self.is_alive(), f"{self.name}: call {self.started - 1} still running 60 s after stop()"

    def wait_answered(self, count: int, after: int = 0, timeout_s: float = 60) -> None:
        """Poll until `count` calls numbered `after` or above were answered (or failed)."""
        wait_for(f"{count} numbered calls from number {after} ({self.name}, {self.rate_per_s:g}/s)",
                 lambda: sum(1 for n in range(after, self.started)
                             if n in self.answered or n in self.failed),
                 lambda done: done >= count, timeout_s=timeout_s, interval_s=0.05)

    @contextmanager
    def change(self, name: str, sample_rate: float) -> Iterator[None]:
        """Bracket a live change: the block writes it and returns at the known point (Envoy runs it)."""
        assert sample_rate in (0, 1), "rows per call are exact only at sample rate 0 or 1"
        # A few calls before it, so that the change is made while calls flow.
        self.wait_answered(3, after=max(0, self.started - 1))
        first_maybe, t0 = max(0, self.started - 1), time.monotonic()   # the call in flight may meet either
        yield
        live_after_s = time.monotonic() - t0
        self.changes.append(Change(name, sample_rate, first_maybe, self.started + 1, live_after_s))
        # Calls after it, so that the new config is seen by sure calls too.
        self.wait_answered(3, after=self.started + 1)

    # -- the check

    def allowed_rows(self, number: int) -> set[int]:
        rates = {self.initial_rate}
        for change in self.changes:
            if number >= change.first_sure:
                rates = {change.sample_rate}
            elif number >= change.first_maybe:
                rates = rates | {change.sample_rate}
        return {int(rate) for rate in rates}   # rate 1: one row; rate 0: none

    def timeline(self) -> list[str]:
        lines = []
        for change in self.changes:
            lines.append(f"{change.name}: live after {change.live_after_s:.1f}s; calls "
                         f"{change.first_maybe}..{change.first_sure - 1} may meet either config, "
                         f"from {change.first_sure} on sample_rate {change.sample_rate:g}")
        return lines

    def check(self, settings: dict, run_id: str, timeout_s: float = 120) -> dict[int, int]:
        """Every call answered, every call one access-log record, and the rows each call must have (exactly).
        Returns rows per call number."""
        assert not self.is_alive(), "stop() the sender first"
        problems = []
        if self.exhausted:
            problems.append(f"the sender reached its bound of {self.max_calls} calls before stop()")
        if self.failed:
            problems.append(f"{len(self.failed)} of {self.started} calls not answered: calls "
                            f"{spans(self.failed)}; first: " + "; ".join(f"{n}: {what}" for n, what in
                                                                          sorted(self.failed.items())[:5]))
        sent = set(range(self.started))
        logged_query = (f"SELECT TraceId, count(), countIf(mapContains(LogAttributes, 'wirelens.protocol')) "
                        f"FROM otel.otel_logs WHERE LogAttributes['wirelens.run_id'] = '{run_id}' "
                        f"AND startsWith(lower(TraceId), '{self.prefix}') GROUP BY TraceId")
        recorded: dict[int | None, int] = {}

        def logged() -> dict[int | None, int]:
            found = rows(settings, logged_query)
            recorded.clear()
            recorded.update({self.number_of(trace): int(k) for trace, _, k in found if int(k)})
            return {self.number_of(trace): int(n) for trace, n, _ in found}

        try:
            records = wait_for(f"{self.started} access-log records of {run_id} in otel.otel_logs", logged,
                               lambda seen: set(seen) >= sent, timeout_s=timeout_s, interval_s=0.5)
        except WaitTimeout as exc:
            seen = exc.last_seen if isinstance(exc.last_seen, dict) else {}
            raise AssertionError(f"{run_id}: after {timeout_s:g}s no access-log record of calls "
                                 f"{spans(sent - set(seen))} ({len(seen)} of {self.started} calls logged)") from None
        if set(records) - sent:
            problems.append(f"access-log records of calls never sent: {sorted(set(records) - sent, key=str)[:10]}")
        # A record twice in otel.otel_logs is the pipeline re-sending a batch (the raw table keeps both; FINAL
        # makes them one row): not a fault, but said. A call recorded twice is two rows, checked below.
        self.resent = sorted(n for n, k in records.items() if k > 1)
        # The rows are a materialized view over those records, but an insert makes the records visible before
        # the view's rows (seen here: a test that read the rows the moment the last records were in missed
        # that batch's rows). Wait until every record the filter published (the view's condition: it carries
        # wirelens.protocol) is a row; a record that never becomes one is named.
        rows_query = (f"SELECT trace_id, count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}' "
                      f"GROUP BY trace_id")

        def by_number() -> dict[int | None, int]:
            return {self.number_of(trace): int(n) for trace, n in rows(settings, rows_query)}

        t0 = time.monotonic()
        try:
            found = wait_for(f"a row in wirelens.requests for each of the {len(recorded)} calls of {run_id} whose "
                             f"access-log record carries the filter's record", by_number,
                             lambda seen: all(n in seen for n in recorded), timeout_s=timeout_s, interval_s=0.5)
        except WaitTimeout as exc:
            found = exc.last_seen if isinstance(exc.last_seen, dict) else {}
            problems.append(f"calls {spans(n for n in recorded if n not in found)} carry the filter's record in "
                            f"otel.otel_logs but have no row after {timeout_s:g}s")
        self.rows_after_records_s = time.monotonic() - t0
        if set(found) - sent:
            problems.append(f"rows of calls never sent (trace ids not this sender's): "
                            f"{sorted(set(found) - sent, key=str)[:10]}")
        missing = [n for n in sorted(sent) if found.get(n, 0) == 0 and 0 not in self.allowed_rows(n)]
        doubled = [n for n in sorted(sent) if found.get(n, 0) > 1]
        unsampled = [n for n in sorted(sent) if found.get(n, 0) == 1 and self.allowed_rows(n) == {0}]
        if missing:
            problems.append(f"no row for calls {spans(missing)} (sample_rate 1)")
        # In a window between two rates the one worker (concurrency 1) switches once, and the sender sends one
        # call at a time: the calls that met the old rate come first, then those that met the new one. A call
        # without a row before the window's last recorded call (1 -> 0), or after its first (0 -> 1), was lost.
        window_lost: list[int] = []
        for change, old_rate in zip(self.changes, [self.initial_rate] + [c.sample_rate for c in self.changes]):
            window = [n for n in range(change.first_maybe, change.first_sure) if n in sent]
            recorded = [n for n in window if found.get(n, 0) == 1]
            if old_rate == change.sample_rate or not recorded:
                continue
            if old_rate == 1:
                last = max(recorded)
                lost = [n for n in window if n < last and found.get(n, 0) == 0]
                why = f"call {last}, later in the window, still met sample_rate 1"
            else:
                first = min(recorded)
                lost = [n for n in window if n > first and found.get(n, 0) == 0]
                why = f"call {first}, earlier in the window, already met sample_rate 1"
            window_lost += lost
            if lost:
                problems.append(f"{change.name}: no row for calls {spans(lost)} though {why}")
        if doubled:
            problems.append(f"more than one row for calls {spans(doubled)}: "
                            + ", ".join(f"{n}: {found[n]}" for n in doubled[:10]))
        if unsampled:
            problems.append(f"a row for calls {spans(unsampled)} made at sample_rate 0")
        if missing or window_lost:
            problems.append("what Envoy logged for the first calls without a row: " + logged_records(
                settings, [self.trace_id(n) for n in sorted(missing + window_lost)[:3]]))
        assert not problems, f"{run_id}, {self.started} numbered calls ({'; '.join(self.timeline())}):\n  " + \
            "\n  ".join(problems)
        return {n: found.get(n, 0) for n in sorted(sent)}

    def switches(self, counts: dict[int, int]) -> list[str]:
        """Where each change between two rates met the calls (from the rows)."""
        lines = []
        for change, old_rate in zip(self.changes, [self.initial_rate] + [c.sample_rate for c in self.changes]):
            if old_rate != change.sample_rate:
                window = range(change.first_maybe, change.first_sure)
                old = [n for n in window if counts.get(n, 0) == int(old_rate)]
                lines.append(f"{change.name}: calls {change.first_maybe}..{max(old, default=change.first_maybe - 1)} "
                             f"met sample_rate {old_rate:g}, from {max(old, default=change.first_maybe - 1) + 1} on "
                             f"{change.sample_rate:g}")
        return lines

    def summary(self, counts: dict[int, int]) -> str:
        windows = sum(1 for n in counts if len(self.allowed_rows(n)) > 1)
        return (f"{self.started} numbered calls at {self.rate_per_s:g}/s, {len(self.answered)} answered, "
                f"{self.started} calls logged" + (f" (records of calls {spans(self.resent)} re-sent)" if self.resent else "")
                + f", {sum(counts.values())} rows (complete "
                f"{self.rows_after_records_s:.2f}s after the records) "
                f"({sum(1 for n, k in counts.items() if self.allowed_rows(n) == {1})} calls that must have one row: "
                f"one each; {windows} calls in windows between two rates: "
                f"{sum(counts[n] for n in counts if len(self.allowed_rows(n)) > 1)} rows, in order)"
                + "".join(f"\n  {line}" for line in self.switches(counts)))
