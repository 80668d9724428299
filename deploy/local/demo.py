"""Drive known traffic through the running local stack and print the comparison.

Sends --calls calls of hello.SayHello over REST, gRPC and gRPC-Web through
Envoy with bin/loadgen, waits until every call is a row in wirelens.requests,
prints the saved query latency_bytes_by_operation for exactly those calls,
then what the same messages would take in each other encoding (the saved
query what_if_protocol: the filter's counterfactual sizes, docs/what-if.md),
and says where to look next. The stack keeps running.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

from deploy.local import clickhouse_users
from wirelens_helpers import clickhouse  # ClickHouse over HTTP
from deploy.local import stack
from wirelens_helpers.wait import WaitTimeout, wait_for

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# (protocol as the filter records it, loadgen's -protocol, the Envoy listener's port setting)
PROTOCOLS = (
    ("rest", "rest", "WIRELENS_ENVOY_PORT"),
    ("rest-transcoded", "rest", "WIRELENS_ENVOY_TRANSCODE_PORT"),
    ("grpc", "grpc", "WIRELENS_ENVOY_PORT"),
    ("grpc-web", "grpc-web", "WIRELENS_ENVOY_PORT"),
    ("grpc-web-text", "grpc-web-text", "WIRELENS_ENVOY_PORT"),
)


# The encodings what_if_protocol estimates: the name shown, the prefix of its columns.
WHAT_IF_ENCODINGS = (("rest", "rest"), ("rest-proto", "rest_proto"), ("grpc", "grpc"), ("grpc-web", "grpc_web"),
                     ("grpc-web-text", "grpc_web_text"))
WHAT_IF_CAVEAT = "Body bytes only: headers, trailers, URLs and time are not estimated."


def what_if_table(rows: list[dict[str, str]]) -> str:
    """what_if_protocol's rows (TabSeparatedWithNames, NULL as \\N) as an aligned table: per operation and
    measured protocol the body bytes per call in each encoding, x its ratio to the protocol's own (with the
    95 % interval when it is not one value at two decimals), then the calls without an estimate by reason."""
    def number(text: str) -> float | None:
        return None if text in ("\\N", "", "nan") else float(text)

    def size(value: float) -> str:
        return f"{value:,.0f} B" if value == round(value) else f"{value:,.1f} B"

    header = ["operation", "measured over", "calls", "estimated", "measured", *(name for name, _ in WHAT_IF_ENCODINGS)]
    lines, reasons = [header], []
    for row in rows:
        own = "rest" if row["protocol"] == "rest-transcoded" else row["protocol"]
        measured = number(row["measured_b"])
        cells = [row["operation"], row["protocol"], row["calls"], row["estimated_calls"],
                 "" if measured is None else size(measured)]
        for name, col in WHAT_IF_ENCODINGS:
            value, ratio = number(row[f"{col}_b"]), number(row[f"{col}_ratio"])
            low, high = number(row[f"{col}_ratio_low"]), number(row[f"{col}_ratio_high"])
            if value is None:
                cells.append("-")
            elif name == own:
                cells.append(size(value) + " (own)")
            elif ratio is None:
                cells.append(size(value))
            else:
                cell = f"{size(value)} ×{ratio:.2f}"
                if low is not None and high is not None and (f"{low:.2f}", f"{high:.2f}") != (f"{ratio:.2f}",) * 2:
                    cell += f" ({low:.2f}–{high:.2f})"
                cells.append(cell)
        lines.append(cells)
        if row["no_estimate"]:
            reasons.append(f"{row['operation']} over {row['protocol']}: {row['no_estimate']}")
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    numeric = {2, 3, 4}
    out = ["  " + "  ".join(cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i])
                            for i, cell in enumerate(line)).rstrip() for line in lines]
    out.insert(1, "  " + "  ".join("-" * w for w in widths))
    out.append("  ×: the ratio to the measured protocol's own encoding (messages and framing only; "
               "measured: the bodies as they crossed)")
    if not any(number(row["estimated_calls"]) for row in rows):
        out.append("  no call has an estimate: is the filter's counterfactual_rate 0 or are its descriptors missing? "
                   "(docs/what-if.md)")
    out += [f"  no estimate: {line}" for line in reasons]
    return "\n".join(out)


def send(settings: dict[str, str], protocol: str, port_setting: str, operation: str, calls: int, run_id: str) -> dict:
    argv = [str(ROOT / "bin" / "loadgen"), "-target", f"127.0.0.1:{settings[port_setting]}",
            "-protocol", protocol, "-operation", operation, "-n", str(calls), "-run-id", run_id,
            "-timeout", "120s",
            # The client starts each call's trace, as a traced application would: the links open client -> Envoy ->
            # service (README, "Tracing one call in Jaeger").
            "-trace", "sampled", "-otlp-endpoint", f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}"]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise stack.StackError(f"loadgen over {protocol} failed (exit {result.returncode}):\n{result.stderr.strip()}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def jaeger_search_url(jaeger: str, run_id: str, service: str = "wirelens-envoy") -> str:
    """Jaeger UI's search page for one run's calls (tag wirelens.run_id), as a user would fill it in."""
    query = {"service": service, "tags": json.dumps({"wirelens.run_id": run_id}, separators=(",", ":")),
             "lookback": "2h", "limit": "1500"}
    return f"{jaeger}/search?{urllib.parse.urlencode(query)}"


NO_SPAN = ("no span: Envoy did not sample these calls (span_sampled = false: the client's traceparent said "
           "not sampled, flags 00, or Envoy's tracing random_sampling left them out); their rows are complete")


def traces_to_link(settings: dict[str, str], run_id: str) -> dict[str, tuple[str, int]]:
    """Per protocol of the run: the trace id of one call whose span Envoy sent ('' if none did) and how many
    calls have no span (span_sampled = false), from wirelens.requests: only those with a span get a link."""
    sql = ("SELECT protocol, anyIf(trace_id, span_sampled AND trace_id != ''), countIf(NOT span_sampled) "
           f"FROM wirelens.requests FINAL WHERE run_id = '{run_id}' GROUP BY protocol FORMAT TSV")
    return {p: (trace_id, int(no_span)) for p, trace_id, no_span in
            (line.split("\t") for line in stack.clickhouse_query(settings, sql).splitlines() if line)}


def wait_for_rows(settings: dict[str, str], run_id: str, expected: dict[str, int], timeout_s: float = 60) -> None:
    """Poll ClickHouse until each protocol has its calls as rows, or say which are missing."""
    sql = ("SELECT protocol, count() FROM wirelens.requests FINAL "
           f"WHERE run_id = '{run_id}' GROUP BY protocol FORMAT TSV")

    def rows() -> dict[str, int]:
        return {p: int(n) for p, n in (line.split("\t") for line in
                                       stack.clickhouse_query(settings, sql).splitlines() if line)}
    try:
        wait_for("the demo's calls as rows", rows, lambda seen: all(seen.get(p, 0) >= n for p, n in expected.items()),
                 timeout_s=timeout_s, interval_s=0.25)
    except WaitTimeout as exc:
        seen = exc.last_seen
        missing = {p: f"{seen.get(p, 0)}/{n}" for p, n in expected.items() if seen.get(p, 0) < n}
        raise stack.StackError(f"calls still missing from wirelens.requests after {timeout_s:.0f}s "
                               f"(rows/sent): {missing}; check {stack.log_path(settings, 'collector')}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per protocol (default 300)")
    parser.add_argument("--operation", default="hello.SayHello")
    args = parser.parse_args(argv)
    try:
        settings = stack.load_settings()
        run_id = f"demo-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        started = dt.datetime.now(dt.timezone.utc)
        print(f"sending {args.calls} calls of {args.operation} per protocol through Envoy "
              f"(127.0.0.1:{settings['WIRELENS_ENVOY_PORT']}; transcoded REST on "
              f":{settings['WIRELENS_ENVOY_TRANSCODE_PORT']}), run id {run_id}")
        for recorded_as, protocol, port_setting in PROTOCOLS:
            summary = send(settings, protocol, port_setting, args.operation, args.calls, run_id)
            print(f"  {recorded_as:<15} {summary['ok']}/{summary['calls']} ok, client-side p50 "
                  f"{summary['p50_ms']:.2f} ms, p99 {summary['p99_ms']:.2f} ms")
        wait_for_rows(settings, run_id, {p: args.calls for p, _, _ in PROTOCOLS})
        traces = traces_to_link(settings, run_id)

        http_url = stack.clickhouse_url(settings)
        params = {**clickhouse.window(dt.datetime.now(dt.timezone.utc) - started + dt.timedelta(minutes=1)),
                  "run_id": run_id}
        # Read as the stack's read-only reporter, as users do (README, "Locked doors").
        credentials_file = clickhouse_users.credentials_path(stack.state_dir(settings))
        credentials = clickhouse_users.read_credentials(credentials_file)
        print("\nmeasured at the proxy (queries/latency_bytes_by_operation.sql):")
        print(clickhouse.run(http_url, clickhouse.saved_query("latency_bytes_by_operation"), params,
                        "PrettyCompactMonoBlock", user=credentials[clickhouse_users.READER_USER],
                             password=credentials[clickhouse_users.READER_PASSWORD]))
        print("what if: body bytes per call of the same messages in each encoding (queries/what_if_protocol.sql)")
        print(f"  {WHAT_IF_CAVEAT}")
        answer = clickhouse.run(http_url, clickhouse.saved_query("what_if_protocol"), {**params, "resamples": "200"},
                                "TabSeparatedWithNames", user=credentials[clickhouse_users.READER_USER],
                                password=credentials[clickhouse_users.READER_PASSWORD])
        header, *lines = answer.splitlines()
        print(what_if_table([dict(zip(header.split("\t"), line.split("\t"))) for line in lines]) + "\n")

        jaeger = f"http://127.0.0.1:{settings['WIRELENS_JAEGER_QUERY_PORT']}"
        print("where to look:")
        print(f"  ClickHouse HTTP   {http_url}/play  (user {credentials[clickhouse_users.READER_USER]}, "
              f"password in {credentials_file}; e.g. SELECT * FROM wirelens.requests LIMIT 10)")
        print(f"  saved query       set -a; . {credentials_file}; set +a")
        print(f"                    bin/wirelens query latency_bytes_by_operation --run {run_id} --clickhouse-url {http_url}")
        print(f"                    bin/wirelens query what_if_protocol --run {run_id} --clickhouse-url {http_url}"
              "  (docs/what-if.md)")
        print(f"  Jaeger UI         {jaeger}/search  (API: {jaeger}/api/services)")
        print("  one call per protocol, its trace in Jaeger's UI (only calls whose span Envoy sent):")
        for protocol, _, _ in PROTOCOLS:
            trace_id, no_span = traces.get(protocol, ("", 0))
            print(f"    {protocol:<15} {jaeger}/trace/{trace_id}" if trace_id else f"    {protocol:<15} {NO_SPAN}")
        if unlinked := {p: n for p, (_, n) in traces.items() if n}:
            print(f"  calls without a span, not linked: {unlinked} ({NO_SPAN})")
        print(f"  this run's calls  {jaeger_search_url(jaeger, run_id)}")
        if example := traces.get("grpc-web", ("", 0))[0] or next((t for t, _ in traces.values() if t), ""):
            print(f"  in the terminal:  bin/wirelens trace {example} --jaeger-url {jaeger}")
        print("  the other stacks:  make experiments STACK=python|jvm|all   "
              "(the same calls on FastAPI/grpcio and Spring/grpc-java, protocol versus stack)")
        print("  the stack keeps running: `make status`, `make down`")
    except (stack.StackError, clickhouse.QueryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
