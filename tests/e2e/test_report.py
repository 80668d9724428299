"""End to end: `wirelens report` and `wirelens trace` on the whole local stack.

Known traffic (loadgen, a few operations × protocols under one run id) goes
through the real Envoy into ClickHouse and Jaeger. Then the report for that
run must show a section for every saved query (queries/*.sql) with exact call
counts, and its HTML must hold one chart per known query with data in it and
render in headless Chromium (Debian's /usr/bin/chromium) to a non-blank
screenshot. `wirelens trace` must print a span of the run with its
wirelens.protocol tag.

The HTML and the screenshot stay in test-artifacts/ (report.html, report.png).
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import urllib.error
import urllib.request
import uuid
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, free_ports, stack
from tests.e2e.spans import ENVOY, spans_of
from wirelens_helpers.wait import wait_for

WIRELENS = ROOT / "bin" / "wirelens"
LOADGEN = ROOT / "bin" / "loadgen"
QUERIES = ROOT / "queries"
CHROMIUM = Path("/usr/bin/chromium")
REPORT_HTML = ARTIFACTS / "report.html"
REPORT_PNG = ARTIFACTS / "report.png"
DEADLINE_S = 60

# (operation, protocol, calls, extra loadgen flags)
TRAFFIC = [
    ("hello.SayHello", "rest", 20, []),
    ("hello.SayHello", "grpc", 20, []),
    ("hello.SayHello", "grpc-web", 20, []),
    ("catalog.GetProduct", "rest", 10, []),
    ("catalog.GetProduct", "grpc", 10, []),
    ("echo.ServerStream", "grpc", 4, ["-count", "10"]),
    ("echo.ServerStream", "grpc-web", 4, ["-count", "10"]),
]
EXPECTED = {(op, proto): n for op, proto, n, _ in TRAFFIC}
OPERATIONS = sorted({op for op, _ in EXPECTED})

# Series colors of the charts (cli/internal/report/chart.go), as RGB.
PROTOCOL_RGB = {"grpc": (0x4E, 0x79, 0xA7), "grpc-web": (0x59, 0xA1, 0x4F), "rest": (0xF2, 0x8E, 0x2B)}


def counts_by_operation_protocol(settings, run_id: str) -> dict[tuple[str, str], int]:
    out = stack.clickhouse_query(
        settings, f"SELECT operation, protocol, count() FROM wirelens.requests FINAL "
                  f"WHERE run_id = '{run_id}' GROUP BY operation, protocol FORMAT TSV")
    return {(op, proto): int(n) for op, proto, n in (line.split("\t") for line in out.splitlines() if line)}


def urls(settings) -> tuple[str, str]:
    return (f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
            f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}")


def wirelens(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    if not WIRELENS.exists():
        pytest.fail(f"{WIRELENS} is missing: run `make services` (go build -trimpath -o bin/ ./cli/cmd/wirelens)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    return subprocess.run([str(WIRELENS), *args], capture_output=True, text=True, timeout=timeout, env=env)


def question(path: Path) -> str:
    """The section title wirelens gives a saved query: its -- Question: text, first letter capitalized."""
    parts, inside = [], False
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text.startswith("--"):
            break
        comment = text[2:].strip()
        if not inside and not parts and comment.startswith("Question:"):
            inside = True
            parts.append(comment[len("Question:"):].strip())
        elif inside and comment and not comment.endswith(":"):
            parts.append(comment)
        elif inside:
            break
    title = " ".join(parts)
    return title[:1].upper() + title[1:] if title else path.stem


def tsv_sections(text: str) -> dict[str, list[dict[str, str]]]:
    """Parse `wirelens report --format tsv`: '# name<TAB>title', a header line, rows, a blank line."""
    sections: dict[str, list[dict[str, str]]] = {}
    name, header = None, None
    for line in text.splitlines():
        if not line:
            name, header = None, None
        elif line.startswith("# "):
            fields = line[2:].split("\t")
            if len(fields) == 2 and re.fullmatch(r"[A-Za-z0-9_.-]+", fields[0]):
                name, header = fields[0], None
                sections[name] = []
        elif name is not None and header is None:
            header = line.split("\t")
        elif name is not None:
            sections[name].append(dict(zip(header, line.split("\t"))))
    return sections


# -- PNG, decoded with zlib only ------------------------------------------------------------


def png_pixels(path: Path, max_rows: int) -> tuple[int, int, list[bytes], int]:
    """Width, height, the first max_rows rows of pixels (unfiltered), bytes per pixel."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, bytearray(), None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, color_type, _, _, interlace = header
    assert depth == 8 and color_type in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    bpp = 3 if color_type == 2 else 4
    raw = zlib.decompressobj().decompress(bytes(idat), (width * bpp + 1) * max_rows)
    stride = width * bpp
    rows, prev = [], bytes(stride)
    for y in range(min(height, max_rows, len(raw) // (stride + 1))):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif kind == 2:
            line = bytearray(map(lambda a, b: (a + b) & 255, line, prev))
        elif kind == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 255
        elif kind == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def colors(rows: list[bytes], bpp: int) -> Counter:
    counter: Counter = Counter()
    for row in rows:
        counter.update(row[i:i + 3] for i in range(0, len(row), bpp))
    return counter


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report_run(local_stack, tmp_path_factory):
    """Send the known traffic under one run id; wait until ClickHouse has every row."""
    settings = local_stack
    if not LOADGEN.exists():
        pytest.fail(f"{LOADGEN} is missing: run `make services`")
    run_id = f"e2e-report-{uuid.uuid4().hex[:8]}"
    ids_dir = tmp_path_factory.mktemp("trace-ids")
    trace_ids: dict[tuple[str, str], list[str]] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    for op, proto, n, extra in TRAFFIC:
        ids = ids_dir / f"{op}-{proto}.tsv"
        result = subprocess.run(
            [str(LOADGEN), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}", "-protocol", proto,
             "-operation", op, "-n", str(n), "-run-id", run_id, "-trace-ids", str(ids), "-timeout", "60s", *extra],
            capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, f"loadgen {op} over {proto}: {result.stderr}"
        assert json.loads(result.stdout.splitlines()[-1])["ok"] == n, result.stdout
        trace_ids[(op, proto)] = [line.split("\t")[1] for line in ids.read_text().splitlines() if line]
        assert len(trace_ids[(op, proto)]) == n
    wait_for(f"the rows of run {run_id}: {EXPECTED}", lambda: counts_by_operation_protocol(settings, run_id),
             lambda seen: all(seen.get(k, 0) >= n for k, n in EXPECTED.items()), timeout_s=DEADLINE_S)
    assert counts_by_operation_protocol(settings, run_id) == EXPECTED
    return {"settings": settings, "run_id": run_id, "trace_ids": trace_ids}


@pytest.fixture(scope="module")
def report(report_run):
    """`wirelens report --run` once as tables (with --html) and once as TSV."""
    clickhouse, jaeger = urls(report_run["settings"])
    ARTIFACTS.mkdir(exist_ok=True)
    REPORT_HTML.unlink(missing_ok=True)
    common = ["--run", report_run["run_id"], "--clickhouse-url", clickhouse, "--jaeger-url", jaeger]
    table = wirelens("report", *common, "--html", str(REPORT_HTML))
    (ARTIFACTS / "report.txt").write_text(table.stdout + table.stderr)
    tsv = wirelens("report", *common, "--format", "tsv")
    return {**report_run, "table": table, "tsv": tsv, "jaeger": jaeger}


# -- tests ----------------------------------------------------------------------------------


def test_report_has_every_query_and_exact_counts(report):
    table, tsv = report["table"], report["tsv"]
    failed = [line.strip() for line in table.stdout.splitlines() if line.startswith("==") or "ERROR:" in line]
    failed = [f"{head}\n    {err}" for head, err in zip(failed, failed[1:]) if "ERROR:" in err and head.startswith("==")]
    assert table.returncode == 0 and not failed, \
        f"wirelens report exited {table.returncode}; failed queries:\n" + "\n".join(failed) + f"\n{table.stderr}"
    assert tsv.returncode == 0, tsv.stderr
    assert f"wrote {REPORT_HTML}" in table.stderr
    assert f"run         {report['run_id']}" in table.stdout

    saved = sorted(QUERIES.glob("*.sql"))
    assert saved, f"no saved queries in {QUERIES}"
    flat = " ".join(table.stdout.split())
    for path in saved:
        assert f"[{path.name}]" in table.stdout, f"no section for {path.name}"
        assert " ".join(question(path).split()) in flat, f"section {path.name} is not titled by its question"

    # The aligned table: one line per operation and protocol with its calls.
    for (op, proto), n in EXPECTED.items():
        assert re.search(rf"^\s+{re.escape(op)}\s+{re.escape(proto)}\s+{n}\s", table.stdout, re.M), (op, proto, n)

    # Every section counting calls per operation and protocol counts exactly the traffic sent.
    sections = tsv_sections(tsv.stdout)
    assert {p.stem for p in saved} <= set(sections), sorted(sections)
    counted = []
    for name, rows in sections.items():
        if rows and {"operation", "protocol", "calls"} <= set(rows[0]):
            seen: dict[tuple[str, str], int] = defaultdict(int)
            for row in rows:
                seen[(row["operation"], row["protocol"])] += int(row["calls"])
            assert dict(seen) == EXPECTED, f"{name}: calls {dict(seen)}"
            counted.append(name)
    assert "latency_cdf" in counted and "latency_bytes_by_operation" in counted, counted
    if "throughput_per_second" in sections:
        per_protocol: dict[str, int] = defaultdict(int)
        for row in sections["throughput_per_second"]:
            per_protocol[row["protocol"]] += int(row["calls"])
            assert row.get("errors", "0") == "0", row
        expected_per_protocol: dict[str, int] = defaultdict(int)
        for (_, proto), n in EXPECTED.items():
            expected_per_protocol[proto] += n
        assert dict(per_protocol) == dict(expected_per_protocol)
    if "errors_by_status" in sections:
        assert sections["errors_by_status"] == [], "no call of the run failed"

    # The slowest calls are calls of this run, each with its trace id.
    all_ids = {i for ids in report["trace_ids"].values() for i in ids}
    slowest = sections["slowest_calls"]
    assert len(slowest) == 20
    assert all(row["trace_id"] in all_ids for row in slowest), slowest


def written(report) -> None:
    """The page is written even when a query fails (that is the first test's business)."""
    table = report["table"]
    assert table.returncode in (0, 1) and REPORT_HTML.exists(), f"exit {table.returncode}: {table.stderr}"


def test_report_html_has_charts_with_data(report):
    written(report)
    html = REPORT_HTML.read_text()
    assert "<script" not in html.lower() and " src=" not in html, "the page must be self-contained"
    charts = re.findall(r'<svg [^>]*class="chart ([a-z]+)"[^>]*>(.*?)</svg>', html, re.S)
    kinds = Counter(kind for kind, _ in charts)
    expected_kinds = {"cdf": len(OPERATIONS)}
    # what_if_protocol: the local stack sizes every call for the counterfactual, so each has an estimate
    bars = sum((QUERIES / f"{q}.sql").exists() for q in ("bytes_by_operation", "streaming_efficiency",
                                                          "what_if_protocol"))
    if bars:
        expected_kinds["bars"] = bars
    if (QUERIES / "throughput_per_second.sql").exists():
        expected_kinds["timeline"] = 1
    assert dict(kinds) == expected_kinds, kinds
    for kind, body in charts:
        # Lines (two points or more), dots (a run within one second has one point per protocol), bars.
        data = re.findall(r'<path class="series" data-series="[^"]+" d="M[\d. ]+L', body) + \
            re.findall(r'<circle class="point" ', body) + \
            re.findall(r'<rect class="bar" [^>]*width="(?!0")[\d.]+"', body)
        assert data, f"a {kind} chart without data"
        assert 'class="axis x-axis"' in body, f"a {kind} chart without an x axis"
    for op in OPERATIONS:
        cdf = next(body for kind, body in charts if kind == "cdf" and f"Latency CDF: {op}" in body)
        protocols = set(re.findall(r'<path class="series" data-series="([^"]+)"', cdf))
        assert protocols == {p for o, p in EXPECTED if o == op}, (op, protocols)

    # Slowest calls: a Jaeger link and an API link per trace, and the command to print it.
    jaeger = report["jaeger"]
    for trace_id in re.findall(r"wirelens trace ([0-9a-f]{32})", html):
        assert f'href="{jaeger}/trace/{trace_id}"' in html
        assert f'href="{jaeger}/api/traces/{trace_id}"' in html
    assert html.count('class="trace-link"') == 20


def test_report_html_renders_in_chromium(report, tmp_path):
    written(report)
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the report rendering test needs Debian's Chromium. "
                    f"Run `apt-get install -y chromium` (as root)")
    REPORT_PNG.unlink(missing_ok=True)
    result = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium'}", f"--screenshot={REPORT_PNG}", "--window-size=1400,3000",
         REPORT_HTML.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert REPORT_PNG.exists(), f"no screenshot (exit {result.returncode}):\n{result.stderr[-2000:]}"
    size = REPORT_PNG.stat().st_size
    assert size > 50_000, f"screenshot of {size} bytes: the page looks blank"

    # The top of the page holds the latency charts: many colors, and each protocol's own.
    width, height, rows, bpp = png_pixels(REPORT_PNG, max_rows=1600)
    assert (width, height) == (1400, 3000)
    seen = colors(rows, bpp)
    assert len(seen) >= 64, f"only {len(seen)} distinct colors in the top of the page"
    white = seen.get(bytes((255, 255, 255)), 0)
    assert white < 0.97 * sum(seen.values()), "the page is almost all white"
    for proto, rgb in PROTOCOL_RGB.items():
        assert seen.get(bytes(rgb), 0) >= 10, f"no {proto} series color {rgb} in the screenshot"


def jaeger_has(jaeger: str, trace_id: str) -> bool:
    """Whether Envoy's span of the trace is in Jaeger (the service's own span may come first: issue 34)."""
    try:
        with urllib.request.urlopen(f"{jaeger}/api/traces/{trace_id}", timeout=5) as response:
            return bool(spans_of((json.load(response).get("data") or [{}])[0]))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise


def test_trace_command_prints_the_span_with_its_protocol(report_run):
    _, jaeger = urls(report_run["settings"])
    trace_id = report_run["trace_ids"][("hello.SayHello", "grpc-web")][0]
    wait_for(f"Envoy's span of trace {trace_id} in Jaeger at {jaeger}", lambda: jaeger_has(jaeger, trace_id), bool,
             timeout_s=DEADLINE_S)
    result = wirelens("trace", trace_id, "--jaeger-url", jaeger)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"trace {trace_id}: "), out
    assert re.search(r"^└─ \S.*: \S+ .* at \+0 µs", out, re.M), out
    # Envoy's span's lines: from its line to the next span's (the service's span, its child, follows).
    blocks = re.split(r"^(?=[ │]*[├└]─ )", out, flags=re.M)
    (envoy,) = [b for b in blocks if re.match(rf"[ │]*[├└]─ {ENVOY}: ", b)]
    tags = dict(re.findall(r"^\s+(?:│\s+)?([a-z][\w.]+)\s{2,}(\S.*)$", envoy, re.M))
    assert tags.get("wirelens.protocol") == "grpc-web", out
    assert tags.get("wirelens.operation") == "hello.SayHello", out
    assert tags.get("wirelens.run_id") == report_run["run_id"], out
    assert tags.get("rpc.service") == "wirelens.v1.Hello", out
    assert list(tags) == sorted(tags), "tags are sorted by key"
    assert re.fullmatch(r"\d+", tags["wirelens.request.header.size"]), "whole numbers print as integers"

    missing = wirelens("trace", "0" * 31 + "1", "--jaeger-url", jaeger)
    assert missing.returncode == 1 and "not found in Jaeger" in missing.stderr, missing.stderr


def test_unreachable_clickhouse_is_a_clear_error():
    url = f"http://127.0.0.1:{free_ports(1)[0]}"
    result = wirelens("report", "--clickhouse-url", url)
    assert result.returncode == 1
    assert result.stderr == f"wirelens: ClickHouse is not reachable at {url}: connection refused\n"
    bad = wirelens("report", "--since", "soon")
    assert bad.returncode == 2 and "Usage: wirelens report" in bad.stderr
