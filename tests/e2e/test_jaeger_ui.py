"""Tracing one call in Jaeger as users do (issue 17): Jaeger's own UI, read in
headless Chromium, shows a known call's span named by its operation with the
wirelens record as typed tags (the DOM's tag table, not the API); the search
page finds the run's calls by tag and the failed calls by error=true; and a
trace written before a Jaeger restart is still there after it (Badger on disk).
The services trace themselves (issue 34): under Envoy's span the page shows the
service's SERVER span as its child, and a call with a client span (loadgen
-trace sampled) shows the three levels as a tree: client, proxy (with the
wirelens tags), service (jaeger-ui-grpc-web-trace-tree.png).

Needs Debian's chromium, `make web` (playwright-core in services/web) and
`make jaeger-ui` (build/jaeger-ui, which the stack serves through Jaeger).
The HTML report's and `wirelens trace`'s links open the call there.
Screenshots: test-artifacts/jaeger-ui-*.png (jaeger-ui-trace.png: the known call's span;
jaeger-ui-grpc-web-trace-tree.png: a gRPC-Web call's client, proxy and service spans).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, jaeger_trace, rows, stack, stack_on_free_ports
from tests.e2e.spans import only, spans_of
from wirelens_helpers.wait import wait_for
from wirelens_helpers import programs

CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = Path(__file__).with_name("jaeger_ui.mjs")
UI_DIR = ROOT / "build" / "jaeger-ui"
PAGE_DEADLINE_S = 60
SERVICE = "wirelens-envoy"
GRPC_SERVER, CLIENT = "wirelens-grpc-server", "wirelens-loadgen"
CALLS = 3  # per protocol
PROTOCOLS = ("rest", "grpc", "grpc-web")
# The tags the span must carry, named as the ClickHouse attributes, with the
# wirelens.requests column each one equals (None: checked separately).
INT_TAGS = {
    "http.request.body.size": "request_body_bytes",
    "http.response.body.size": "response_body_bytes",
    "wirelens.request.messages": "request_messages",
    "wirelens.response.messages": "response_messages",
    "rpc.grpc.status_code": "grpc_status",
    "http.response.status_code": "http_status",
}


def node() -> str:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `apt-get install -y chromium` (as root; or `make browser`)")
    if not (ROOT / "services" / "web" / "node_modules" / "playwright-core").exists():
        pytest.fail("services/web/node_modules/playwright-core is missing: run `make web`")
    if not (UI_DIR / "index.html").exists():
        pytest.fail(f"{UI_DIR}/index.html is missing: run `make jaeger-ui` before the stack starts")
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not on PATH (Node >= 20 drives Chromium through playwright-core)")
    return path


def proxy_and_service(operation: str, service_span: str) -> list[dict]:
    """The trace page's rows for a call without a client span: Envoy's span, the gRPC server's span under it."""
    return [{"service": SERVICE, "operation": operation, "depth": 0},
            {"service": GRPC_SERVER, "operation": service_span, "depth": 1}]


def ui(mode: str, url: str, screenshot: Path, *extra: str) -> dict:
    """Run jaeger_ui.mjs: the page's DOM, as JSON (it reloads until the page shows it, under a deadline)."""
    screenshot.unlink(missing_ok=True)
    result = subprocess.run([node(), str(SCRIPT), mode, url, str(screenshot), str(PAGE_DEADLINE_S), *extra],
                            capture_output=True, text=True, timeout=PAGE_DEADLINE_S + 60)
    assert result.returncode == 0, f"{url} (screenshot: {screenshot}):\n{result.stderr}{result.stdout}"
    assert screenshot.exists(), f"no screenshot at {screenshot}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def search_url(jaeger: str, tags: dict[str, str], limit: int = 100) -> str:
    query = {"service": SERVICE, "tags": json.dumps(tags, separators=(",", ":")), "lookback": "1h",
             "limit": str(limit)}
    return f"{jaeger}/search?{urllib.parse.urlencode(query)}"


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    """A stack of its own (the restart test stops its Jaeger), CALLS calls of hello.SayHello per
    protocol and one failed gRPC-Web call under one run id, each call's row in ClickHouse."""
    node()
    with stack_on_free_ports(tmp_path_factory.mktemp("jaeger-ui"), "e2e-jaeger-ui") as settings:
        run_id = f"e2e-jaeger-ui-{uuid.uuid4().hex[:8]}"
        trace_ids: dict[str, list[str]] = {}
        for protocol in PROTOCOLS:
            ids = Path(settings["WIRELENS_STATE_DIR"]) / f"{protocol}.trace-ids"
            subprocess.run([str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}",
                            "-protocol", protocol, "-operation", "hello.SayHello", "-n", str(CALLS),
                            "-run-id", run_id, "-trace-ids", str(ids)], check=True, capture_output=True)
            trace_ids[protocol] = [line.split("\t")[1] for line in ids.read_text().splitlines()]
        # One gRPC-Web call with a client span (run id of its own: the searches below count the run's calls).
        ids = Path(settings["WIRELENS_STATE_DIR"]) / "tree.trace-ids"
        subprocess.run([str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}",
                        "-protocol", "grpc-web", "-operation", "hello.SayHello", "-n", "1", "-run-id", f"{run_id}-tree",
                        "-trace", "sampled", "-trace-ids", str(ids),
                        "-otlp-endpoint", f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}"],
                       check=True, capture_output=True)
        (tree,) = [line.split("\t")[1] for line in ids.read_text().splitlines()]
        failed = uuid.uuid4().hex
        grpc_web_not_found(settings, run_id, failed)
        n = len(PROTOCOLS) * CALLS + 1
        wait_for(f"{n} rows of run {run_id} in wirelens.requests",
                 lambda: rows(settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'"),
                 lambda r: int(r[0][0]) >= n)
        yield {"settings": settings, "run_id": run_id, "trace_ids": trace_ids, "failed": failed, "tree": tree,
               "jaeger": f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"}


def grpc_web_not_found(settings, run_id: str, trace_id: str) -> None:
    """catalog.GetProduct over gRPC-Web for an id that does not exist: grpc-status 5 (NOT_FOUND)."""
    payload = b"\x08" + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])  # id = 2^31 - 1
    conn = http.client.HTTPConnection("127.0.0.1", int(settings["WIRELENS_ENVOY_PORT"]), timeout=10)
    conn.request("POST", "/wirelens.v1.Catalog/GetProduct", body=b"\x00" + len(payload).to_bytes(4, "big") + payload,
                 headers={"content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-wirelens-run": run_id,
                          "traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"})
    response = conn.getresponse()
    response.read()
    assert response.getheader("grpc-status") == "5", response.getheaders()


def test_trace_page_shows_the_span_with_its_wirelens_tags(calls):
    settings, run_id = calls["settings"], calls["run_id"]
    trace_id = calls["trace_ids"]["grpc-web"][0]
    screenshot = ARTIFACTS / "jaeger-ui-trace.png"
    page = ui("trace", f"{calls['jaeger']}/trace/{trace_id}", screenshot, "2")

    # Envoy's span, named by the call's operation (not Envoy's "ingress"), from wirelens-envoy;
    # the gRPC server's own span (Envoy translated gRPC-Web to gRPC) its child.
    assert page["spans"] == proxy_and_service("hello.SayHello", "wirelens.v1.Hello/SayHello"), page["spans"]
    assert page["title"].startswith(f"{SERVICE}: hello.SayHello"), page["title"]
    tags = page["tags"]
    for key, value in (("wirelens.protocol", "grpc-web"), ("wirelens.operation", "hello.SayHello"),
                       ("wirelens.run_id", run_id), ("rpc.service", "wirelens.v1.Hello"), ("rpc.method", "SayHello")):
        assert tags.get(key) == {"value": value, "kind": "string"}, (key, tags.get(key))
    # The record's numbers are numbers in the page (typed tags), equal to the call's row.
    columns = list(INT_TAGS.values())
    (row,) = rows(settings, f"SELECT {', '.join(columns)} FROM wirelens.requests FINAL "
                            f"WHERE trace_id = '{trace_id}'")
    for (key, column), value in zip(INT_TAGS.items(), row):
        assert tags.get(key) == {"value": value, "kind": "number"}, (key, column, tags.get(key), value)
    assert tags["wirelens.request.messages"]["value"] == "1" and tags["rpc.grpc.status_code"]["value"] == "0"
    assert "error" not in tags, tags["error"]
    # Envoy's own duplicates of those tags are gone.
    assert not {"http.status_code", "http.method", "http.protocol", "grpc.status_code"} & tags.keys(), sorted(tags)


def test_native_grpc_span_has_its_status_as_a_number(calls):
    """Native gRPC: an OK call's status may come from Envoy rather than the filter; either way one
    typed rpc.grpc.status_code tag, no error."""
    trace_id = calls["trace_ids"]["grpc"][0]
    page = ui("trace", f"{calls['jaeger']}/trace/{trace_id}", ARTIFACTS / "jaeger-ui-grpc.png", "2")
    tags = page["tags"]
    assert page["spans"] == proxy_and_service("hello.SayHello", "wirelens.v1.Hello/SayHello"), page["spans"]
    assert tags.get("wirelens.protocol") == {"value": "grpc", "kind": "string"}, tags.get("wirelens.protocol")
    assert tags.get("rpc.grpc.status_code") == {"value": "0", "kind": "number"}, tags.get("rpc.grpc.status_code")
    assert "grpc.status_code" not in tags and "error" not in tags, sorted(tags)


def test_failed_call_is_marked_and_found_by_error_true(calls):
    jaeger, failed = calls["jaeger"], calls["failed"]
    page = ui("trace", f"{jaeger}/trace/{failed}", ARTIFACTS / "jaeger-ui-error.png", "2")
    assert page["spans"] == proxy_and_service("catalog.GetProduct", "wirelens.v1.Catalog/GetProduct"), page["spans"]
    tags = page["tags"]
    assert tags.get("error") == {"value": "true", "kind": "bool"}, tags.get("error")
    assert tags.get("rpc.grpc.status_code") == {"value": "5", "kind": "number"}, tags.get("rpc.grpc.status_code")
    assert tags.get("otel.status_description", {}).get("value") == "grpc-status 5", tags

    found = ui("search", search_url(jaeger, {"error": "true", "wirelens.run_id": calls["run_id"]}),
               ARTIFACTS / "jaeger-ui-search-error.png", "1")
    assert [r["href"] for r in found["results"]] == [f"/trace/{failed}"], found


def test_search_page_finds_the_runs_calls_by_tag(calls):
    jaeger, run_id, trace_ids = calls["jaeger"], calls["run_id"], calls["trace_ids"]
    url = search_url(jaeger, {"wirelens.protocol": "grpc-web", "wirelens.run_id": run_id})
    # The run's gRPC-Web calls: the hello.SayHello ones and the failed catalog.GetProduct.
    found = ui("search", url, ARTIFACTS / "jaeger-ui-search.png", str(CALLS + 1))
    hrefs = sorted(r["href"] for r in found["results"])
    assert hrefs == sorted(f"/trace/{t}" for t in [*trace_ids["grpc-web"], calls["failed"]]), found
    # A result's title: "<service>: <operation>" followed by the trace id's first 7 digits.
    titles = sorted(r["title"].removesuffix(r["href"].removeprefix("/trace/")[:7]) for r in found["results"])
    assert titles == [f"{SERVICE}: catalog.GetProduct"] + [f"{SERVICE}: hello.SayHello"] * CALLS, found

    # The whole run: every protocol's calls and the failed one, nothing else.
    everything = ui("search", search_url(jaeger, {"wirelens.run_id": run_id}), ARTIFACTS / "jaeger-ui-search-run.png",
                    str(len(PROTOCOLS) * CALLS + 1))
    assert everything["count"] == len(PROTOCOLS) * CALLS + 1, everything


def test_a_trace_survives_a_jaeger_restart(calls):
    settings, jaeger = calls["settings"], calls["jaeger"]
    trace_id = calls["trace_ids"]["rest"][0]
    wait_for(f"Envoy's span of trace {trace_id} in Jaeger before the restart", lambda: only(jaeger_trace(jaeger, trace_id)),
             lambda t: t is not None)
    storage = Path(settings["WIRELENS_JAEGER_STORAGE_DIR"])
    assert storage.is_relative_to(settings["WIRELENS_STATE_DIR"]) and any(storage.rglob("*")), storage

    assert stack.stop("jaeger", settings).startswith("stopped pid"), "Jaeger was not running"
    assert jaeger_trace(jaeger, trace_id) is None, "Jaeger still answers after its stop"
    assert stack.start_one("jaeger", settings).startswith("pid "), "Jaeger did not start again"

    trace = wait_for(f"Envoy's span of trace {trace_id} in Jaeger after its restart",
                     lambda: jaeger_trace(jaeger, trace_id), lambda t: spans_of(t), timeout_s=30)
    (span,) = spans_of(trace)
    assert span["operationName"] == "hello.SayHello", span
    tags = {t["key"]: t for t in span["tags"]}
    assert tags["wirelens.protocol"]["value"] == "rest" and tags["http.response.body.size"]["type"] == "int64", tags
    # And in the UI, as users would open it after the restart.
    page = ui("trace", f"{jaeger}/trace/{trace_id}", ARTIFACTS / "jaeger-ui-after-restart.png", "2")
    assert page["tags"].get("wirelens.protocol") == {"value": "rest", "kind": "string"}, page["tags"]


def test_report_and_trace_command_link_each_row_to_its_trace_in_the_ui(calls, tmp_path):
    """From a row to its trace: the HTML report's slowest calls link to Jaeger's UI, the link opens
    the call's span there; the terminal report keeps the trace ids; `wirelens trace` ends with the link."""
    settings, jaeger, run_id = calls["settings"], calls["jaeger"], calls["run_id"]
    wirelens = ROOT / "bin" / "wirelens"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
    common = ["--run", run_id, "--clickhouse-url", f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}",
              "--jaeger-url", jaeger]
    html_path = tmp_path / "report.html"
    text = subprocess.run([str(wirelens), "report", *common, "--html", str(html_path)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert text.returncode == 0, text.stderr
    all_ids = {t for ids in calls["trace_ids"].values() for t in ids} | {calls["failed"]}
    links = re.findall(r'<a class="trace-link" href="([^"]+)"', html_path.read_text())
    assert len(links) == len(all_ids) and {link.rsplit("/", 1)[1] for link in links} == all_ids, links
    assert all(link.startswith(f"{jaeger}/trace/") for link in links), links
    # The terminal report's slowest-calls rows keep their trace ids, and it says where they open.
    assert all_ids <= set(re.findall(r"\b[0-9a-f]{32}\b", text.stdout)), text.stdout
    assert f"In Jaeger's UI:  {jaeger}/trace/" in text.stdout, text.stdout

    # The slowest call's link, opened in the browser, shows that call's span.
    slowest = links[0].rsplit("/", 1)[1]
    page = ui("trace", links[0], ARTIFACTS / "jaeger-ui-from-report.png")
    (row,) = rows(settings, f"SELECT protocol, operation FROM wirelens.requests FINAL WHERE trace_id = '{slowest}'")
    proxy = [span for span in page["spans"] if span["service"] == SERVICE]
    assert page["tags"]["wirelens.protocol"]["value"] == row[0] and proxy[0]["operation"] == row[1], page

    printed = subprocess.run([str(wirelens), "trace", slowest, "--jaeger-url", jaeger],
                             capture_output=True, text=True, timeout=60, env=env)
    assert printed.returncode == 0 and printed.stdout.endswith(f"\nIn Jaeger's UI: {jaeger}/trace/{slowest}\n"), \
        printed.stdout + printed.stderr


def test_demo_prints_ui_links_that_open(calls):
    """`make demo`'s output: one UI link per protocol to its call's trace, and a search link for its run."""
    settings, jaeger = calls["settings"], calls["jaeger"]
    demo = subprocess.run(programs.command("deploy.local.demo", "--calls", "2"),
                          capture_output=True, text=True, timeout=300, env=programs.environment({**os.environ, **settings}))
    assert demo.returncode == 0, demo.stdout + demo.stderr
    (ARTIFACTS / "jaeger-ui-demo.txt").write_text(demo.stdout + demo.stderr)
    links = dict(re.findall(rf"^\s+(rest|rest-transcoded|grpc|grpc-web|grpc-web-text)\s+({re.escape(jaeger)}/trace/[0-9a-f]{{32}})$",
                            demo.stdout, re.M))
    assert set(links) == {"rest", "rest-transcoded", "grpc", "grpc-web", "grpc-web-text"}, demo.stdout
    (search,) = re.findall(rf"^\s+this run's calls\s+({re.escape(jaeger)}/search\?\S+)$", demo.stdout, re.M)

    page = ui("trace", links["grpc-web-text"], ARTIFACTS / "jaeger-ui-demo-trace.png", "2")
    # The demo's client starts the trace: its span, Envoy's under it, the service's under that.
    assert page["spans"] == [
        {"service": CLIENT, "operation": "hello.SayHello (grpc-web-text)", "depth": 0},
        {"service": SERVICE, "operation": "hello.SayHello", "depth": 1},
        {"service": GRPC_SERVER, "operation": "wirelens.v1.Hello/SayHello", "depth": 2},
    ], page["spans"]
    assert page["tags"]["wirelens.protocol"] == {"value": "grpc-web-text", "kind": "string"}, page["tags"]
    found = ui("search", search, ARTIFACTS / "jaeger-ui-demo-search.png", "10")
    assert found["count"] == 10, found  # 2 calls x 5 protocols
    assert {link.removeprefix(jaeger) for link in links.values()} <= {r["href"] for r in found["results"]}, found


def test_client_proxy_and_service_spans_as_a_tree(calls):
    """A gRPC-Web call with a client span (loadgen -trace sampled): the trace page shows the client's
    span as the root, Envoy's span under it with the wirelens tags, the gRPC server's span under that."""
    trace_id = calls["tree"]
    page = ui("trace", f"{calls['jaeger']}/trace/{trace_id}", ARTIFACTS / "jaeger-ui-grpc-web-trace-tree.png", "3")
    assert page["spans"] == [
        {"service": CLIENT, "operation": "hello.SayHello (grpc-web)", "depth": 0},
        {"service": SERVICE, "operation": "hello.SayHello", "depth": 1},
        {"service": GRPC_SERVER, "operation": "wirelens.v1.Hello/SayHello", "depth": 2},
    ], page["spans"]
    assert page["title"].startswith(f"{CLIENT}: hello.SayHello (grpc-web)"), page["title"]
    tags = page["tags"]  # the proxy span's, opened in the page
    for key, value in (("wirelens.protocol", "grpc-web"), ("wirelens.operation", "hello.SayHello"),
                       ("wirelens.run_id", f"{calls['run_id']}-tree"), ("rpc.service", "wirelens.v1.Hello")):
        assert tags.get(key) == {"value": value, "kind": "string"}, (key, tags.get(key))
    assert tags.get("http.response.body.size", {}).get("kind") == "number", tags.get("http.response.body.size")
