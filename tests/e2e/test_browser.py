"""End to end from a real browser: headless Chromium loads the wirelens page
from Envoy itself (GET /ui/), clicks "Run all", and every operation the page offers (pinned in
PAGE_OPERATIONS, checked against the page's source) must be called once each
way — REST with fetch, gRPC-Web binary, gRPC-Web text — succeed and land in
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

from tests.e2e.conftest import ARTIFACTS, ROOT, rows
from wirelens_helpers.wait import wait_for

CHROMIUM = Path("/usr/bin/chromium")
WEB_SRC = ROOT / "services" / "web"
WEB_OUT = ROOT / "build" / "web"
SCREENSHOT = ARTIFACTS / "browser.png"
PAGE_DEADLINE_S = 60
CLICKHOUSE_DEADLINE_S = 60
PROTOCOLS = ("rest", "grpc-web", "grpc-web-text")
# Every operation the page offers (SAMPLES in services/web/src/operations.js), pinned here so that an
# operation added to the page, dropped from it or left out of its descriptor fails this test by name.
PAGE_OPERATIONS = ("hello.SayHello", "catalog.GetProduct", "echo.Unary")


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


def offered_by_page_source(node: str) -> dict[str, list[str]]:
    """The operations and protocols services/web/src/operations.js offers, read by importing it."""
    result = subprocess.run(
        [node, "--input-type=module", "-e",
         "import { SAMPLES, PROTOCOLS } from './src/operations.js';"
         "console.log(JSON.stringify({ operations: Object.keys(SAMPLES), protocols: PROTOCOLS }));"],
        cwd=WEB_SRC, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"importing {WEB_SRC}/src/operations.js failed:\n{result.stderr}"
    return json.loads(result.stdout)


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

    offered = offered_by_page_source(node)
    assert offered == {"operations": list(PAGE_OPERATIONS), "protocols": list(PROTOCOLS)}, (
        f"the page's source offers {offered}; this test pins operations {PAGE_OPERATIONS} "
        f"and protocols {PROTOCOLS}: update PAGE_OPERATIONS with the page")
    every_call = [(operation, protocol) for operation in PAGE_OPERATIONS for protocol in PROTOCOLS]

    results = run_page(node, url)
    assert SCREENSHOT.exists(), f"no screenshot at {SCREENSHOT}"

    # The page: every operation three ways, each call exactly once, every call a success.
    made = collections.Counter((r["operation"], r["protocol"]) for r in results)
    not_made = [call for call in every_call if made[call] == 0]
    assert not not_made, f"the page did not make these calls (screenshot: {SCREENSHOT}): {not_made}"
    assert made == collections.Counter(every_call), \
        f"the page made calls other than each (operation, protocol) once: {dict(made)}"
    failed = [r for r in results if not r["ok"]]
    assert not failed, f"calls that failed on the page (screenshot: {SCREENSHOT}): {failed}"
    for r in results:
        assert r["status"] == (200 if r["protocol"] == "rest" else 0), r

    # ClickHouse: exactly one row per (protocol, operation) for this run id, each a success: HTTP 200,
    # and grpc-status 0 for gRPC-Web (REST calls carry no grpc-status).
    expected = {(protocol, operation): (1, 0 if protocol == "rest" else 1, 1) for operation, protocol in every_call}
    sql = (f"SELECT protocol, operation, count(), countIf(grpc_status = 0), countIf(http_status = 200) "
           f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol, operation "
           f"ORDER BY protocol, operation")

    def seen() -> dict[tuple[str, str], tuple[int, int, int]]:
        return {(p, op): (int(n), int(grpc_ok), int(http_ok)) for p, op, n, grpc_ok, http_ok in rows(settings, sql)}

    def without_rows() -> list[tuple[str, str]]:
        found = seen()
        return [key for key in expected if key not in found]

    wait_for(f"a row of run {run_id} in wirelens.requests for each (protocol, operation); still without one",
             without_rows, lambda keys: not keys, timeout_s=CLICKHOUSE_DEADLINE_S)
    # Reached: now it must be exact, nothing extra and no duplicates.
    found = seen()
    assert found == expected, (
        "rows per (protocol, operation) as (rows, grpc_status 0, HTTP 200) differ from one successful row per call: "
        f"{ {key: (found.get(key), want) for key, want in expected.items() if found.get(key) != want} }, "
        f"rows for calls the page did not make: { {key: n for key, n in found.items() if key not in expected} }")
