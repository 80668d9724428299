"""End to end from a real browser: headless Chromium loads the wirelens page
from Envoy itself (GET /ui/), clicks "Run all", and every call it makes —
REST with fetch, gRPC-Web binary, gRPC-Web text — must succeed and land in
ClickHouse as exactly one row per call, under the run id of the page's URL.

Needs Debian's chromium (services/web/install-browser) and the page built
(`make web`: npm ci && npm run build in services/web -> build/web/).
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import ARTIFACTS, ROOT, poll, rows, stack

CHROMIUM = Path("/usr/bin/chromium")
WEB_SRC = ROOT / "services" / "web"
WEB_OUT = ROOT / "build" / "web"
SCREENSHOT = ARTIFACTS / "browser.png"
PAGE_DEADLINE_S = 60
CLICKHOUSE_DEADLINE_S = 60
PROTOCOLS = ("rest", "grpc-web", "grpc-web-text")


def check_prerequisites() -> str:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser test needs Debian's Chromium. "
                    f"Run `apt-get install -y chromium` (as root; or services/web/install-browser)")
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the browser test drives Chromium with playwright-core (Node ≥ 20)")
    if not (WEB_SRC / "node_modules" / "playwright-core").exists():
        pytest.fail(f"{WEB_SRC}/node_modules is missing: run `make web` (npm ci && npm run build in services/web)")
    for name in ("index.html", "app.js"):
        if not (WEB_OUT / name).exists():
            pytest.fail(f"{WEB_OUT / name} is missing: run `make web` before starting the stack")
    return node


def run_page(node: str, url: str) -> list[dict]:
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    result = subprocess.run(
        [node, str(WEB_SRC / "e2e" / "run-page.mjs"), url, str(SCREENSHOT), str(PAGE_DEADLINE_S)],
        cwd=WEB_SRC, capture_output=True, text=True, timeout=PAGE_DEADLINE_S + 60)
    assert result.returncode == 0, (
        f"the page at {url} did not finish (screenshot: {SCREENSHOT}):\n{result.stderr}{result.stdout}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report["results"]


def test_browser_page_calls_land_in_clickhouse(local_stack):
    settings = local_stack
    node = check_prerequisites()
    run_id = f"e2e-browser-{uuid.uuid4().hex[:8]}"
    url = f"http://127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}/ui/?run={run_id}"

    results = run_page(node, url)
    assert SCREENSHOT.exists(), f"no screenshot at {SCREENSHOT}"

    # The page: every operation three ways, every call a success.
    assert results, "the page made no call"
    assert {r["protocol"] for r in results} == set(PROTOCOLS), results
    operations = {r["operation"] for r in results}
    assert "hello.SayHello" in operations, results
    failed = [r for r in results if not r["ok"]]
    assert not failed, f"calls that failed on the page (screenshot: {SCREENSHOT}): {failed}"
    for r in results:
        assert r["status"] == (200 if r["protocol"] == "rest" else 0), r

    # ClickHouse: exactly the page's calls, per (protocol, operation), for this run id.
    expected = collections.Counter((r["protocol"], r["operation"]) for r in results)
    sql = (f"SELECT protocol, operation, count(), countIf(grpc_status = 0), countIf(http_status = 200) "
           f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol, operation "
           f"ORDER BY protocol, operation")

    def seen() -> dict[tuple[str, str], tuple[int, int, int]]:
        return {(p, op): (int(n), int(grpc_ok), int(http_ok)) for p, op, n, grpc_ok, http_ok in rows(settings, sql)}

    def missing(found) -> dict:
        return {key: f"{found.get(key, (0,))[0]} of {n}" for key, n in expected.items()
                if found.get(key, (0,))[0] < n}

    found = poll(f"rows of run {run_id} in wirelens.requests (expected per (protocol, operation): "
                 f"{dict(expected)})",
                 seen, lambda f: not missing(f), timeout_s=CLICKHOUSE_DEADLINE_S)
    # Reached: now it must be exact, nothing extra and no duplicates.
    found = seen()
    assert {key: n for key, (n, _, _) in found.items()} == dict(expected), \
        f"rows per (protocol, operation) differ from the page's calls: {found} vs {dict(expected)}"
    for (protocol, operation), (n, grpc_ok, http_ok) in found.items():
        assert http_ok == n, f"{protocol} {operation}: {n - http_ok} rows without HTTP 200"
        if protocol in ("grpc-web", "grpc-web-text"):
            assert grpc_ok == n, f"{protocol} {operation}: {n - grpc_ok} rows without grpc_status 0"
