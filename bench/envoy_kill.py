"""How many calls does a SIGKILL of Envoy lose from its access-log buffer? (`make bench-envoy-kill`)

Envoy's file access logger buffers lines and flushes them every
--file-flush-interval-msec (the stack's WIRELENS_ENVOY_FILE_FLUSH_MS, default
200). A SIGKILL loses what is in that buffer: calls Envoy answered but never
wrote down. For each flush interval this starts the local stack on free ports
in a temporary directory, sends gRPC and REST calls at a steady rate, kills
Envoy's process group with SIGKILL mid-run, waits until logship has shipped
everything in the file, and compares the calls the clients saw answered OK
with the rows of the run in wirelens.requests (FINAL). Prints a table and
writes build/bench/envoy_kill.json. Exit 0 whatever the numbers, 1 when
something broke.

    python -m bench.envoy_kill [--flush-ms 10,200,1000] [--rate 400] [--repeat 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import grpc

from bench import benchlib
from bench.benchlib import ROOT
from deploy.local import stack
from wirelens_helpers.wait import WaitTimeout, wait_for


JSON_OUT = ROOT / "build" / "bench" / "envoy_kill.json"
HELLO_REQUEST = b"\x0a\x08wirelens"  # HelloRequest{name: "wirelens"}
REST_REQUEST = b'{"name":"wirelens"}'


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Traffic(threading.Thread):
    """Calls at `rate` per second until stopped, alternating REST and gRPC; counts the ones answered OK."""

    def __init__(self, port: int, run_id: str, rate: float):
        super().__init__(daemon=True)
        self.port, self.run_id, self.rate = port, run_id, rate
        self.answered = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        rest = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        say_hello = channel.unary_unary("/wirelens.v1.Hello/SayHello")
        t0, i = time.monotonic(), 0
        while not self.stopping.is_set():
            delay = t0 + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing: a steady rate
            try:
                if i % 2 == 0:
                    rest.request("POST", "/v1/hello", body=REST_REQUEST,
                                 headers={"content-type": "application/json", "x-wirelens-run": self.run_id})
                    response = rest.getresponse()
                    response.read()
                    ok = response.status == 200
                else:
                    _, call = say_hello.with_call(HELLO_REQUEST, timeout=2,
                                                  metadata=[("x-wirelens-run", self.run_id)])
                    ok = call.code() == grpc.StatusCode.OK
                self.answered += ok
            except Exception:  # noqa: BLE001 — after the kill every call fails; only answered ones count
                rest.close()
                rest = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            i += 1
        rest.close()
        channel.close()


def one_run(flush_ms: int, rate: float, seconds: float) -> dict:
    base = Path(tempfile.mkdtemp(prefix="wirelens-envoy-kill-"))
    ports = [name for name in stack.load_settings({}) if name.endswith("_PORT")]
    environ = dict(zip(ports, map(str, benchlib.free_ports(len(ports)))))
    environ.update(WIRELENS_STATE_DIR=str(base), WIRELENS_ENVOY_CONCURRENCY="1",
                   WIRELENS_ENVOY_FILE_FLUSH_MS=str(flush_ms))
    settings = stack.load_settings(environ)
    run_id = f"envoy-kill-{flush_ms}-{uuid.uuid4().hex[:8]}"
    try:
        stack.up(settings, log=lambda line: None)
        traffic = Traffic(int(settings["WIRELENS_ENVOY_PORT"]), run_id, rate)
        traffic.start()
        time.sleep(seconds)  # the load runs this long before the kill (a duration, not a synchronization)
        answered_before = traffic.answered
        stack.kill("envoy", settings)
        traffic.stopping.set()
        traffic.join(timeout=10)
        answered = traffic.answered
        # Everything Envoy wrote is in the file now; wait until logship shipped it and the rows are in.
        seen = {"rows": 0, "since": time.monotonic()}  # the row count and since when it has not changed

        def settled() -> bool:
            progress = stack.logship_progress(settings) or {}
            rows = int(stack.clickhouse_query(
                settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'").strip())
            if rows != seen["rows"]:
                seen.update(rows=rows, since=time.monotonic())
            return progress.get("pending_bytes", 1) == 0 and time.monotonic() - seen["since"] > 3
        try:
            wait_for("logship to ship everything and the rows to settle", settled, timeout_s=60, interval_s=0.2)
        except WaitTimeout:
            pass  # counted as lost below
        rows = seen["rows"]
        return {"flush_ms": flush_ms, "rate": rate, "answered": answered, "answered_before_kill": answered_before,
                "rows": rows, "lost": answered - rows, "lost_ms_of_traffic": (answered - rows) / rate * 1000}
    finally:
        stack.down(settings, log=lambda line: None)
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flush-ms", default="10,200,1000", help="comma-separated flush intervals (ms)")
    ap.add_argument("--rate", type=float, default=400, help="calls per second (default 400)")
    ap.add_argument("--seconds", type=float, default=5, help="load before the kill (default 5 s)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per interval (default 2)")
    ap.add_argument("--quick", action="store_true", help="one run at 200 ms")
    args = ap.parse_args(argv)
    intervals = [int(v) for v in args.flush_ms.split(",")]
    if args.quick:
        intervals, args.repeat = [200], 1
    results, problems = [], []
    for flush_ms in intervals:
        for _ in range(args.repeat):
            try:
                r = one_run(flush_ms, args.rate, args.seconds)
            except (stack.StackError, OSError, ValueError) as exc:
                problems.append(f"flush {flush_ms} ms: {exc}")
                log(f"flush {flush_ms} ms: BROKEN: {exc}")
                continue
            results.append(r)
            log(f"flush {flush_ms:>5} ms: {r['answered']} calls answered OK, {r['rows']} rows: "
                f"{r['lost']} lost ({r['lost_ms_of_traffic']:.0f} ms of traffic at {args.rate:.0f}/s)")
    print()
    print(f"{'flush ms':>8} {'answered':>9} {'rows':>6} {'lost':>5} {'lost, ms of traffic':>20}")
    for r in results:
        print(f"{r['flush_ms']:>8} {r['answered']:>9} {r['rows']:>6} {r['lost']:>5} {r['lost_ms_of_traffic']:>20.0f}")
    JSON_OUT.parent.mkdir(parents=True, exist_ok=True)
    JSON_OUT.write_text(json.dumps({"results": results, "problems": problems}, indent=2) + "\n")
    print(f"JSON: {JSON_OUT}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
