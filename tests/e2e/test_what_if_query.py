"""The what-if numbers end to end: queries/what_if_protocol.sql and the report's section over real calls.

A stack of its own (Go services, the filter sampling every call for the
counterfactual, as the local stack does) gets the same logical calls over
every protocol that serves them: hello.SayHello over REST, transcoded REST,
gRPC, gRPC-Web and gRPC-Web-text; catalog.GetProduct (one product) over REST,
REST with protobuf and gRPC, plus lookups of a product that does not exist;
server streams of echo.ServerStream over gRPC. Then, from the saved query as
`wirelens query` runs it:

- every operation and protocol has its calls, the OK ones estimated, the
  failed ones counted under no_estimate as not_ok;
- the twins agree: each encoding's bytes per call are the same whichever
  protocol carried the calls (the filter's counterfactual from one side, the
  measured bytes from the other);
- each protocol's own encoding is what it measured where the wire body is
  messages and framing only (REST, gRPC, REST with protobuf), and less than
  it measured for gRPC-Web and gRPC-Web-text (the trailer frame); its ratio
  is 1, and every ratio is that encoding's bytes over the own;
- a stream has no REST-with-protobuf size;

and `wirelens report` shows the section with its caveat, in the terminal and
as an HTML chart with a panel per operation and protocol.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import uuid

import grpc
import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, rows, stack_on_free_ports
from wirelens_helpers.wait import wait_for

WIRELENS = ROOT / "bin" / "wirelens"
LOADGEN = ROOT / "bin" / "loadgen"
CAVEAT = "Body bytes only: headers, trailers, URLs and time are not estimated."
N = 8          # OK calls per operation and protocol
MISSING = 2    # lookups of a product that does not exist, per protocol
# (operation, recorded protocol, loadgen -protocol, listener, loadgen flags, calls); then MISSING lookups
# of product 0 (none: HTTP 404, gRPC NOT_FOUND) over REST and gRPC, which loadgen does not send
TRAFFIC = [
    *(("hello.SayHello", p, lp, port, ["-name", "wirelens"], N) for p, lp, port in (
        ("rest", "rest", "WIRELENS_ENVOY_PORT"), ("rest-transcoded", "rest", "WIRELENS_ENVOY_TRANSCODE_PORT"),
        ("grpc", "grpc", "WIRELENS_ENVOY_PORT"), ("grpc-web", "grpc-web", "WIRELENS_ENVOY_PORT"),
        ("grpc-web-text", "grpc-web-text", "WIRELENS_ENVOY_PORT"))),
    *(("catalog.GetProduct", p, p, "WIRELENS_ENVOY_PORT", ["-id", "7"], N)
      for p in ("rest", "rest-proto", "grpc")),
    ("echo.ServerStream", "grpc", "grpc", "WIRELENS_ENVOY_PORT", ["-count", "5"], 3),
]
ENCODINGS = ("rest", "rest_proto", "grpc", "grpc_web", "grpc_web_text")


def send_missing(port: int, run_id: str) -> None:
    """MISSING lookups of product 0 over REST (404) and over gRPC (NOT_FOUND), as calls of the run."""
    rest = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    lookup = channel.unary_unary("/wirelens.v1.Catalog/GetProduct")
    try:
        for _ in range(MISSING):
            rest.request("GET", "/v1/products/0", headers={"x-wirelens-run": run_id})
            response = rest.getresponse()
            response.read()
            assert response.status == 404, response.status
            with pytest.raises(grpc.RpcError) as failed:
                lookup(b"", timeout=10, metadata=[("x-wirelens-run", run_id)])  # GetProductRequest{id: 0}
            assert failed.value.code() == grpc.StatusCode.NOT_FOUND, failed.value
    finally:
        rest.close()
        channel.close()


def number(text: str) -> float | None:
    return None if text == "\\N" else float(text)


@pytest.fixture(scope="module")
def what_if(tmp_path_factory):
    """The traffic through a stack of its own; the query's rows, the report's text and HTML."""
    with stack_on_free_ports(tmp_path_factory.mktemp("what-if"), "e2e-what-if",
                             WIRELENS_COUNTERFACTUAL_RATE="1") as settings:
        run_id = f"e2e-what-if-{uuid.uuid4().hex[:8]}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELENS_")}
        sent: dict[tuple[str, str], int] = {}
        for op, proto, lg_proto, port, flags, n in TRAFFIC:
            result = subprocess.run(
                [str(LOADGEN), "-target", f"127.0.0.1:{settings[port]}", "-protocol", lg_proto, "-operation", op,
                 "-n", str(n), "-run-id", run_id, "-timeout", "60s", *flags],
                capture_output=True, text=True, timeout=120, env=env)
            assert result.returncode == 0, f"loadgen {op} over {proto}: {result.stderr}"
            sent[(op, proto)] = n
        send_missing(int(settings["WIRELENS_ENVOY_PORT"]), run_id)
        for proto in ("rest", "grpc"):
            sent[("catalog.GetProduct", proto)] += MISSING

        def counts() -> dict[tuple[str, str], int]:
            return {(op, proto): int(n) for op, proto, n in rows(
                settings, f"SELECT operation, protocol, count() FROM wirelens.requests FINAL "
                          f"WHERE run_id = '{run_id}' GROUP BY operation, protocol")}
        wait_for(f"the rows of run {run_id}: {sent}", counts, lambda seen: seen == sent, timeout_s=60)

        clickhouse = f"http://127.0.0.1:{settings['WIRELENS_CLICKHOUSE_HTTP_PORT']}"
        query = subprocess.run([str(WIRELENS), "query", "what_if_protocol", "--run", run_id, "--clickhouse-url",
                                clickhouse, "--format", "TabSeparatedWithNames"],
                               capture_output=True, text=True, timeout=120, env=env)
        assert query.returncode == 0, query.stderr
        header, *lines = query.stdout.splitlines()
        answer = {(r["operation"], r["protocol"]): r
                  for r in (dict(zip(header.split("\t"), line.split("\t"))) for line in lines)}
        ARTIFACTS.mkdir(exist_ok=True)
        page = ARTIFACTS / "what-if-report.html"
        report = subprocess.run([str(WIRELENS), "report", "--run", run_id, "--clickhouse-url", clickhouse,
                                 "--html", str(page)], capture_output=True, text=True, timeout=300, env=env)
        (ARTIFACTS / "what-if-report.txt").write_text(report.stdout + report.stderr)
        yield {"sent": sent, "rows": answer, "report": report, "html": page.read_text() if page.exists() else ""}


def test_every_call_counted_and_the_ok_ones_estimated(what_if):
    got = what_if["rows"]
    assert set(got) == set(what_if["sent"])
    for key, row in got.items():
        ok = N if key[0] != "echo.ServerStream" else 3
        failed = what_if["sent"][key] - ok
        assert (int(row["calls"]), int(row["sampled_calls"]), row["sample_rate"], row["counterfactual_rate"]) \
            == (what_if["sent"][key], what_if["sent"][key], "1", "1"), (key, row)
        assert int(row["estimated_calls"]) == ok, (key, row)
        assert row["no_estimate"] == (f"not_ok: {failed}" if failed else ""), (key, row)


def test_the_twins_agree_on_every_encoding(what_if):
    for e in ENCODINGS:
        by_operation: dict[str, dict[str, str]] = {}
        for (op, proto), row in what_if["rows"].items():
            if row[f"{e}_b"] != "\\N":
                by_operation.setdefault(op, {})[proto] = row[f"{e}_b"]
        for op, sizes in by_operation.items():
            assert len(set(sizes.values())) == 1, f"{op}: the protocols disagree on what {e} takes: {sizes}"
    # GetProduct is a GET: over protobuf REST its request message is all in the URL, which the filter binds
    # into the gRPC message it sizes, so protobuf REST has the same gRPC size as the others (checked above)
    rest_proto = what_if["rows"][("catalog.GetProduct", "rest-proto")]
    grpc = what_if["rows"][("catalog.GetProduct", "grpc")]
    assert [rest_proto[f"{e}_b"] for e in ("grpc", "grpc_web", "grpc_web_text")] \
        == [grpc[f"{e}_b"] for e in ("grpc", "grpc_web", "grpc_web_text")], (rest_proto, grpc)
    assert all(row[f"{e}_b"] != "\\N" for row in what_if["rows"].values()
               for e in ("rest", "grpc", "grpc_web", "grpc_web_text")), what_if["rows"]


def test_each_protocols_own_encoding_and_the_ratios(what_if):
    own_of = {"rest": "rest", "rest-transcoded": "rest", "rest-proto": "rest_proto", "grpc": "grpc",
              "grpc-web": "grpc_web", "grpc-web-text": "grpc_web_text"}
    for (op, proto), row in what_if["rows"].items():
        own = own_of[proto]
        measured, own_b = number(row["measured_b"]), number(row[f"{own}_b"])
        if proto in ("grpc-web", "grpc-web-text"):
            # the response body carries the trailer frame too (base64 for -text)
            assert measured > own_b, (op, proto, row)
        else:
            assert measured == own_b, (op, proto, row)
        assert (row[f"{own}_ratio"], row[f"{own}_ratio_low"], row[f"{own}_ratio_high"]) == ("1", "1", "1"), row
        for e in ENCODINGS:
            size = number(row[f"{e}_b"])
            if size is None:
                assert row[f"{e}_ratio"] == "\\N"
                continue
            assert abs(float(row[f"{e}_ratio"]) - size / own_b) < 0.002, (op, proto, e, row)
            # identical calls: the interval is the ratio itself
            assert row[f"{e}_ratio_low"] == row[f"{e}_ratio"] == row[f"{e}_ratio_high"], (op, proto, e, row)
        # gRPC and gRPC-Web carry the same messages and prefixes
        assert row["grpc_b"] == row["grpc_web_b"]
    stream = what_if["rows"][("echo.ServerStream", "grpc")]
    assert stream["rest_proto_b"] == "\\N" and number(stream["rest_b"]) > 0


def test_the_report_shows_the_section_with_its_caveat_and_chart(what_if):
    report, html = what_if["report"], what_if["html"]
    assert report.returncode == 0, report.stdout + report.stderr
    section = report.stdout.split("[what_if_protocol.sql]", 1)[1].split("\n== ", 1)[0]
    assert section.lstrip("\n").startswith("  " + CAVEAT + "\n"), section
    assert re.search(r"^\s+hello\.SayHello\s+grpc\s+8\s+8\s+\S+\s+\S+ B ×\d\.\d\d\s+\S+ B ×\d\.\d\d\s+\S+ B \(own\)",
                     section, re.M), section
    assert "not_ok: 2" in section
    assert f'<p class="caveat">{CAVEAT}</p>' in html
    chart = re.search(r'<svg [^>]*class="chart bars"[^>]*><title>What if: .*?</svg>', html, re.S)
    assert chart, "no what-if chart"
    panels = re.findall(r'<g class="panel" data-panel="([^"]+)">', chart.group(0))
    assert sorted(panels) == sorted(f"{op} · measured over {proto} ({N if op != 'echo.ServerStream' else 3} "
                                    f"estimated calls)" for op, proto in what_if["sent"]), panels
