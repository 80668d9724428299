"""Bounded dimensions: 100,000 calls to distinct random paths add one operation, not 100,000.

A stack of its own, on free ports (100,000 rows would crowd the shared
stack's window reports). bin/pathflood sends CALLS calls through the real
Envoy, each to a path nobody configured: half REST over HTTP/1.1 keep-alive
connections (standard methods and PURGE in turn), half gRPC-shaped (POST /x.Y/<random>,
content-type application/grpc) over cleartext HTTP/2; one path of each kind
is LONG_PATH bytes. The upstream answers 404. Then, in ClickHouse:

- exactly CALLS rows for the run (uniqExact(request_id), and count() FINAL);
- distinct operation <= the operation map's size + 1 (build/opmap.json) — in
  fact exactly {'unknown'}; rpc_service, rpc_method, streaming, http_route
  empty; protocol, streaming and http_method within their closed sets;
- every url_path non-empty and at most 128 bytes; the two long paths cut to
  exactly 128;

and `wirelens report --run` over that run stays readable: every terminal line
at most REPORT_LINE_MAX characters (cli/internal/report/table.go cuts
cells), and neither it nor the HTML report shows a path pathflood made up;
the HTML report has a chart panel named "unknown", and compare_protocols
does not compare protocols over it.

On 2 shared cores (Envoy with one worker, the Collector and ClickHouse
ingesting meanwhile): 100,000 calls sent in 51-69 s (1,450-1,950 calls/s),
all rows in ClickHouse 65-78 s after the first call (three runs); the test
prints its own figures.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, rows, stack, stack_on_free_ports
from wirelens_helpers.wait import WaitTimeout, wait_for

PATHFLOOD = ROOT / "bin" / "pathflood"
WIRELENS = ROOT / "bin" / "wirelens"
OPMAP = ROOT / "build" / "opmap.json"
CALLS = 100_000
LONG_PATH = 8192
URL_PATH_MAX = 128  # filters/README.md, url.path
# Widest terminal line the report may print: cells are cut at 48 characters and
# the last column wrapped at 72 (table.go), so a line grows with the number of
# columns of a saved query, never with the data. Over this run the shipped
# queries print at most 229 characters (bytes_by_operation's columns).
REPORT_LINE_MAX = 300
STANDARD_METHODS = {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "_OTHER"}
PROTOCOLS = {"rest", "rest-proto", "rest-transcoded", "grpc", "grpc-web", "grpc-web-text"}
STREAMING = {"", "unary", "client", "server", "bidi"}
# What pathflood's invented paths look like (loadgen/cmd/pathflood: /r<n>-..., /x.Y/m<n>-...).
INVENTED_PATH = re.compile(r"/r[0-9a-z]+-|x\.Y/m[0-9a-z]+-")
INGEST_DEADLINE_S = 300.0


@pytest.fixture(scope="module")
def flood_stack(tmp_path_factory):
    with stack_on_free_ports(tmp_path_factory.mktemp("cardinality"), "e2e-cardinality") as settings:
        yield settings


def tool(path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make services`")
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def flood(flood_stack):
    """CALLS calls to distinct random paths, all of them rows in ClickHouse."""
    settings = flood_stack
    run_id = f"cardinality-{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    sent = tool(PATHFLOOD, "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}", "-calls", str(CALLS),
                "-run-id", run_id, "-long-path-bytes", str(LONG_PATH), timeout=600)
    assert sent.returncode == 0, f"pathflood exited {sent.returncode}: {sent.stdout}{sent.stderr}"
    summary = json.loads(sent.stdout.splitlines()[-1])
    assert summary["answered"] == CALLS and summary["errors"] == 0, summary

    where = f"run_id = '{run_id}'"

    def recorded() -> int:
        (count,), = rows(settings, f"SELECT uniqExact(request_id) FROM wirelens.requests WHERE {where}")
        return int(count)
    try:
        wait_for("every call as a row", recorded, lambda n: n >= CALLS, timeout_s=INGEST_DEADLINE_S, interval_s=1.0)
    except WaitTimeout as exc:
        pytest.fail(f"after {INGEST_DEADLINE_S:.0f}s, {exc.last_seen} of the {CALLS} calls of run {run_id} are rows "
                    f"in wirelens.requests (logship progress: {stack.logship_progress(settings)})")
    ingested_s = time.monotonic() - started
    print(f"\ncardinality: {CALLS} calls sent in {summary['elapsed_s']:.1f}s "
          f"({summary['calls_per_s']:.0f}/s; statuses {summary['statuses']}), all rows after {ingested_s:.1f}s")
    return {"settings": settings, "run_id": run_id, "where": where, "summary": summary}


def test_every_call_is_one_row(flood):
    (total, distinct), = rows(flood["settings"], "SELECT count(), uniqExact(request_id) FROM wirelens.requests "
                                                  f"FINAL WHERE {flood['where']}")
    assert (int(total), int(distinct)) == (CALLS, CALLS)
    by_protocol = dict(rows(flood["settings"], "SELECT protocol, count() FROM wirelens.requests FINAL "
                                                f"WHERE {flood['where']} GROUP BY protocol"))
    summary = flood["summary"]
    assert by_protocol == {"rest": str(summary["rest"]), "grpc": str(summary["grpc"])}


def test_dimensions_stay_bounded(flood):
    map_size = len(json.loads(OPMAP.read_text())["operations"])
    (operations, services, methods, streaming, routes, http_methods, protocols), = rows(
        flood["settings"],
        "SELECT groupUniqArray(operation), groupUniqArray(rpc_service), groupUniqArray(rpc_method), "
        "groupUniqArray(streaming), groupUniqArray(http_route), groupUniqArray(http_method), "
        f"groupUniqArray(protocol) FROM wirelens.requests WHERE {flood['where']}")
    operations = json.loads(operations.replace("'", '"'))
    assert len(operations) <= map_size + 1, operations[:5]
    assert operations == ["unknown"], "no invented path may become an operation"
    for name, values in [("rpc_service", services), ("rpc_method", methods), ("http_route", routes)]:
        assert values == "['']", f"{name}: {values[:200]}"
    assert set(json.loads(streaming.replace("'", '"'))) <= STREAMING
    assert set(json.loads(http_methods.replace("'", '"'))) <= STANDARD_METHODS
    # Exactly: pathflood's methods, PURGE (not an OpenTelemetry method) as _OTHER.
    sent = {("_OTHER" if m == "PURGE" else m): n for m, n in flood["summary"]["methods"].items()}
    recorded = {m: int(n) for m, n in rows(flood["settings"], "SELECT http_method, count() FROM wirelens.requests "
                                                               f"FINAL WHERE {flood['where']} GROUP BY http_method")}
    assert recorded == sent and "_OTHER" in recorded, (recorded, sent)
    assert set(json.loads(protocols.replace("'", '"'))) <= PROTOCOLS


def test_url_path_is_bounded(flood):
    (longest, empty, at_cap), = rows(
        flood["settings"], f"SELECT max(length(url_path)), countIf(url_path = ''), countIf(length(url_path) = "
                           f"{URL_PATH_MAX}) FROM wirelens.requests FINAL WHERE {flood['where']}")
    assert int(longest) <= URL_PATH_MAX
    assert int(empty) == 0, "every unknown call carries its path"
    # The two LONG_PATH paths; every other invented path is shorter than the cap.
    assert int(at_cap) == 2


def test_report_stays_readable(flood, tmp_path):
    settings = flood["settings"]
    html = tmp_path / "report.html"
    report = tool(WIRELENS, "report", "--run", flood["run_id"],
                  "--clickhouse-url", f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
                  "--jaeger-url", f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}",
                  "--html", str(html), timeout=300)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "cardinality-report.txt").write_text(report.stdout + report.stderr)
    assert report.returncode == 0, report.stderr
    widest = max(report.stdout.splitlines(), key=len)
    print(f"\ncardinality: report of {len(report.stdout.splitlines())} lines, widest {len(widest)} characters")
    assert len(widest) <= REPORT_LINE_MAX, f"a report line of {len(widest)} characters: {widest[:200]}…"
    assert not INVENTED_PATH.search(report.stdout), INVENTED_PATH.search(report.stdout)[0]
    # One operation for unrelated paths: its protocols are not compared.
    assert "note: unknown: calls to paths the operation map does not know" in report.stdout

    page = html.read_text()
    (ARTIFACTS / "cardinality-report.html").write_text(page)
    found = INVENTED_PATH.search(page)
    assert not found, f"the HTML report shows an invented path: …{page[max(found.start() - 80, 0):found.end() + 40]}…"
    # Every operation chart has its one panel for the unknown calls.
    assert 'data-panel="unknown"' in page
