"""What each way of shipping the record loses across a Collector restart (`make bench-restart-loss`).

`wirelens inject` can carry the per-call record two ways (envoy/INJECT.md,
"The durable path"):

    otlp      Envoy's OpenTelemetry access logger sends each record to the
              Collector itself (--access-log otlp)
    logship   Envoy appends it to a JSON-lines file and logship beside Envoy
              ships it (--access-log file --agent logship: the default)
    filelog   the same file, read by an agent Collector's filelog receiver
              (--agent filelog), when this checkout has that agent

This starts the local stack on free ports in a temporary directory, injects
the same user config (tests/e2e/user_configs/front-proxy.yaml) once per path
with `python -m envoy.inject`, runs one Envoy per path (and the agent script
inject wrote), and sends every Envoy the same steady load at once (REST and
gRPC alternating, its own run id). After --kill-after calls the stack's
Collector is SIGKILLed; --down seconds later it is started again (same
ports, same persistent queue). Then it waits until each durable path has a
row for every call (deadline --deadline), and until the OTLP path has
settled: a marker call sent through it after the load has its row and the
Collector's logs queue is empty. Counted exactly: calls answered OK, calls
made while the Collector was down, rows in wirelens.requests FINAL, and
Envoy's own OTel access-logger counters. Prints a table and writes
build/bench/restart_loss.json. Exit 0 whatever the numbers, 1 when
something broke (a call failed, the stack did not start, a durable path
missed its deadline: that is a loss too, and is reported as one).

    python -m bench.restart_loss [--calls 1000] [--rate 40] [--kill-after 250] [--down 5] [--paths otlp,logship]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import grpc

from bench import benchlib
from bench.benchlib import ROOT
from deploy.local import stack
from envoy.inject import agent as inject_agent
from envoy.inject import filelog as inject_filelog
from wirelens_helpers import programs, supervise
from wirelens_helpers.wait import WaitTimeout, wait_for

JSON_OUT = ROOT / "build" / "bench" / "restart_loss.json"
USER_CONFIG = ROOT / "tests" / "e2e" / "user_configs" / "front-proxy.yaml"
DESCRIPTORS = ROOT / "build" / "proto" / "wirelens.pb"
WASM = ROOT / "build" / "wirelens_filter.wasm"
HELLO_REQUEST = b"\x0a\x08wirelens"  # HelloRequest{name: "wirelens"}
REST_REQUEST = b'{"name":"wirelens"}'
PATHS = ("otlp", "logship", "filelog")
OTLP_STATS = "access_logs.open_telemetry_access_log"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Traffic(threading.Thread):
    """n calls at `rate` per second through one Envoy, alternating REST and gRPC (the front proxy's hosts)."""

    def __init__(self, port: int, run_id: str, n: int, rate: float, t0: float):
        super().__init__(daemon=True)
        self.port, self.run_id, self.n, self.rate, self.t0 = port, run_id, n, rate, t0
        self.sent = self.answered = 0
        self.errors: list[str] = []
        self.outage: tuple[float, float] | None = None   # (killed at, healthy again at), monotonic
        self.during_outage = 0

    def run(self) -> None:
        rest = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", [("grpc.default_authority", "grpc.example.com")])
        say_hello = channel.unary_unary("/wirelens.v1.Hello/SayHello")
        try:
            for i in range(self.n):
                delay = self.t0 + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing: a steady rate, so the outage falls mid-run
                started = time.monotonic()
                try:
                    if i % 2 == 0:
                        rest.request("POST", "/v1/hello", body=REST_REQUEST,
                                     headers={"host": "rest.example.com", "content-type": "application/json",
                                              "x-wirelens-run": self.run_id})
                        response = rest.getresponse()
                        response.read()
                        assert response.status == 200, response.status
                    else:
                        _, call = say_hello.with_call(HELLO_REQUEST, timeout=10,
                                                      metadata=[("x-wirelens-run", self.run_id)])
                        assert call.code() == grpc.StatusCode.OK
                    self.answered += 1
                    outage = self.outage
                    if outage and outage[0] <= started and (outage[1] == 0 or started <= outage[1]):
                        self.during_outage += 1
                except Exception as exc:  # noqa: BLE001 — reported: every call must be answered
                    self.errors.append(f"call {i}: {exc!r}")
                    rest.close()
                    rest = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                self.sent = i + 1
        finally:
            rest.close()
            channel.close()


def rows(settings: dict, run_id: str) -> int:
    return int(stack.clickhouse_query(
        settings, f"SELECT count() FROM wirelens.requests FINAL WHERE run_id = '{run_id}'").strip())


def logs_queue(settings: dict) -> int | None:
    """The Collector's logs exporter queue size (None if it does not answer)."""
    try:
        _, text = stack.http_get(f"http://127.0.0.1:{settings['WIRELENS_COLLECTOR_METRICS_PORT']}/metrics")
    except OSError:
        return None
    sizes = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("otelcol_exporter_queue_size{") and 'data_type="logs"' in line]
    return int(sum(sizes)) if sizes else None


def collector_counters(port: int, names: tuple[str, ...]) -> dict[str, float]:
    """Sums of the named counters on a Collector's Prometheus endpoint (an agent's own telemetry)."""
    _, text = stack.http_get(f"http://127.0.0.1:{port}/metrics")
    out = {name: 0.0 for name in names}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.removesuffix("_total") in names:
            out[name.removesuffix("_total")] += float(line.rsplit(" ", 1)[1])
    return {name: int(value) for name, value in out.items()}


def agent_counters(port: int, names: tuple[str, ...]) -> dict:
    try:
        return collector_counters(port, names)
    except OSError as exc:
        return {"error": f"the agent's metrics: {exc}"}


def envoy_stats(admin_port: int, prefix: str) -> dict[str, int]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/stats?filter=^{prefix}", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


class Shipping:
    """One way of shipping: an injected Envoy (and the agent inject wrote), its ports and its run."""

    def __init__(self, name: str, base: Path, settings: dict, run: str):
        self.name, self.dir = name, base / name
        self.dir.mkdir(parents=True)
        self.listen, self.admin, self.agent_port, self.agent_metrics = benchlib.free_ports(4)
        self.run_id = f"{run}-{name}"
        self.processes: list[supervise.Supervised] = []
        source = self.dir / "envoy.yaml"
        source.write_text(string.Template(USER_CONFIG.read_text()).substitute(
            LISTEN_PORT=self.listen, ADMIN_PORT=self.admin, REST_PORT=settings["WIRELENS_REST_PORT"],
            GRPC_PORT=settings["WIRELENS_GRPC_PORT"], OTEL_PORT=settings["WIRELENS_COLLECTOR_OTLP_PORT"]))
        self.config = self.dir / "envoy-wirelens.yaml"
        flags = ["--access-log", "otlp"] if name == "otlp" else [
            "--access-log-path", str(self.dir / "logs" / "access.jsonl"), "--agent", name,
            "--agent-config", str(self.dir / "ship.sh"), "--agent-port", str(self.agent_port),
            *(["--agent-metrics-port", str(self.agent_metrics)] if name == "filelog" else [])]
        (self.dir / "logs").mkdir()
        result = subprocess.run([*programs.command("envoy.inject"), str(source), "-o", str(self.config),
                                 "--wasm", str(WASM), "--descriptor-set", str(DESCRIPTORS),
                                 "--collector", f"127.0.0.1:{settings['WIRELENS_COLLECTOR_OTLP_PORT']}", *flags],
                                env=programs.environment(), capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"inject for {name}: {result.stderr}")
        self.report = result.stderr

    def start(self) -> None:
        envoy = supervise.Supervised(f"Envoy ({self.name})", [
            str(stack.envoy_binary()), "-c", str(self.config), "--disable-hot-restart", "--concurrency", "1",
            "--log-level", "warn"], self.dir / "envoy.log")
        self.processes.append(envoy)
        envoy.start()
        envoy.wait_ready(supervise.http_ok(f"http://127.0.0.1:{self.admin}/ready", "LIVE"), timeout_s=90)
        if self.name != "otlp":
            shipper = supervise.Supervised(f"{self.name} ({self.name} path)", ["sh", str(self.dir / "ship.sh")],
                                           self.dir / "agent.log")
            self.processes.append(shipper)
            shipper.start()
            health = f"http://127.0.0.1:{self.agent_port}/" + ("" if self.name == "filelog" else "healthz")
            shipper.wait_ready(supervise.http_ok(health), timeout_s=90)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop(grace_s=20)


def one_run(paths: list[str], calls: int, rate: float, kill_after: int, down_s: float, deadline_s: float,
            keep: bool) -> dict:
    """The measurement on a local stack of its own (free ports, a temporary directory), torn down after."""
    base = Path(tempfile.mkdtemp(prefix="wirelens-restart-loss-"))
    ports = [name for name in stack.load_settings({}) if name.endswith("_PORT")]
    environ = dict(zip(ports, map(str, benchlib.free_ports(len(ports)))))
    environ.update(WIRELENS_STATE_DIR=str(base / "stack"), WIRELENS_ENVOY_CONCURRENCY="1")
    settings = stack.load_settings(environ)
    try:
        log(f"local stack on free ports in {base}")
        stack.up(settings, log=lambda line: None)
        return measure(settings, base, paths, calls, rate, kill_after, down_s, deadline_s)
    finally:
        stack.down(settings, log=lambda line: None)
        if keep:
            log(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def measure(settings: dict, base: Path, paths: list[str], calls: int, rate: float, kill_after: int, down_s: float,
            deadline_s: float) -> dict:
    """The measurement on a running local stack (its Collector is killed and started again); the Envoys and
    agents live in base and are stopped before it returns."""
    run = f"restart-loss-{uuid.uuid4().hex[:8]}"
    shipping: list[Shipping] = []
    try:
        for name in paths:
            shipping.append(Shipping(name, base, settings, run))
        for path in shipping:
            path.start()
        log(f"{', '.join(paths)}: an Envoy each{' and its agent' if len(paths) > 1 else ''}; "
            f"{calls} calls at {rate:g}/s through each")
        t0 = time.monotonic() + 0.5
        traffic = {p.name: Traffic(p.listen, p.run_id, calls, rate, t0) for p in shipping}
        for thread in traffic.values():
            thread.start()
        wait_for(f"{kill_after} calls through every Envoy", lambda: min(t.sent for t in traffic.values()),
                 lambda sent: sent >= kill_after, timeout_s=calls / rate + 120, interval_s=0.05)
        killed = time.monotonic()
        for thread in traffic.values():
            thread.outage = (killed, 0)
        stack.kill("collector", settings)
        log(f"Collector SIGKILLed after {kill_after} calls; down for {down_s:g} s")
        try:
            time.sleep(down_s)  # the outage itself (a duration, not a synchronization)
        finally:
            stack.start_one("collector", settings)   # returns once it answers its health check
        healthy = time.monotonic()
        for thread in traffic.values():
            thread.outage = (killed, healthy)
        log(f"Collector healthy again {healthy - killed:.1f} s after the kill")
        for thread in traffic.values():
            thread.join(timeout=calls / rate + 120)
        broken = {name: t.errors[:3] for name, t in traffic.items() if t.errors or t.is_alive()}
        if broken:
            raise RuntimeError(f"calls failed or did not finish: {broken}")

        results = {}
        for path in shipping:
            if path.name == "otlp":
                continue
            want = traffic[path.name].answered
            try:
                wait_for(f"{want} rows of the {path.name} path (run {path.run_id})", lambda: rows(settings, path.run_id),
                         lambda seen: seen >= want, timeout_s=deadline_s, interval_s=0.5, retry_on=(stack.StackError,))
            except WaitTimeout as exc:
                log(f"{path.name}: {exc}")
        otlp = next((p for p in shipping if p.name == "otlp"), None)
        settled, otlp_stats = None, {}
        if otlp is not None:
            # The OTLP path can never reach every call: it has settled once a marker sent after the load is in
            # (Envoy flushed everything it had after the restart) and the Collector's logs queue is empty.
            # Envoy's counters of the run's records, before the marker adds its own (every record of the load
            # was written or dropped within Envoy's 0.2 s buffer, long before: the durable paths drained first).
            otlp_stats = envoy_stats(otlp.admin, OTLP_STATS)
            marker = Traffic(otlp.listen, f"{otlp.run_id}-marker", 1, 1.0, time.monotonic())
            marker.run()
            started = time.monotonic()
            try:
                wait_for("the OTLP path's marker row and an empty logs queue",
                         lambda: (rows(settings, marker.run_id), logs_queue(settings)),
                         lambda seen: seen[0] == 1 and seen[1] == 0, timeout_s=deadline_s, interval_s=0.5,
                         retry_on=(stack.StackError,))
                settled = round(time.monotonic() - started, 1)
            except WaitTimeout as exc:
                log(f"otlp: {exc}")
        for path in shipping:
            t = traffic[path.name]
            landed = rows(settings, path.run_id)
            entry = {"calls": t.n, "answered": t.answered, "during_outage": t.during_outage, "rows": landed,
                     "lost": t.answered - landed, "lost_pct": round(100.0 * (t.answered - landed) / t.answered, 1)}
            if path.name == "otlp":
                entry["envoy_stats"] = otlp_stats     # the load's records, without the marker's
                entry["settled_s"] = settled
            elif path.name == "logship":
                try:
                    entry["agent"] = json.loads(urllib.request.urlopen(
                        f"http://127.0.0.1:{path.agent_port}/progress", timeout=10).read())
                except OSError as exc:   # the agent died: its rows say what that cost
                    entry["agent"] = {"error": f"logship's /progress: {exc}"}
            else:   # the filelog agent's own counters: what it sent, what failed
                entry["agent_metrics"] = agent_counters(path.agent_metrics, (
                    "otelcol_receiver_accepted_log_records", "otelcol_exporter_sent_log_records",
                    "otelcol_exporter_send_failed_log_records", "otelcol_exporter_enqueue_failed_log_records"))
            results[path.name] = entry
        return {"run": run, "calls": calls, "rate": rate, "kill_after": kill_after, "down_s": down_s,
                "collector_unhealthy_s": round(healthy - killed, 1), "paths": results}
    finally:
        for path in shipping:
            path.stop()


def available_paths() -> list[str]:
    paths = ["otlp", "logship"]
    try:
        inject_filelog.check()
        paths.append("filelog")
    except Exception:  # noqa: BLE001 — not in this checkout: the run says so
        pass
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", help=f"comma-separated, of {', '.join(PATHS)} (default: every one this checkout has)")
    ap.add_argument("--calls", type=int, default=1000, help="calls through each Envoy (default 1000)")
    ap.add_argument("--rate", type=float, default=40, help="calls per second through each Envoy (default 40)")
    ap.add_argument("--kill-after", type=int, default=250, help="calls before the Collector is killed (default 250)")
    ap.add_argument("--down", type=float, default=5, help="seconds between the kill and the restart (default 5)")
    ap.add_argument("--deadline", type=float, default=180, help="seconds to wait for the rows (default 180)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, configs)")
    args = ap.parse_args(argv)
    paths = args.paths.split(",") if args.paths else available_paths()
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        ap.error(f"--paths: {', '.join(unknown)}: expected some of {', '.join(PATHS)}")
    if not 0 < args.kill_after < args.calls:
        ap.error(f"--kill-after {args.kill_after}: must be between 0 and --calls {args.calls}")
    problems = []
    try:
        result = one_run(paths, args.calls, args.rate, args.kill_after, args.down, args.deadline, args.keep)
    except (stack.StackError, supervise.SupervisorError, OSError, RuntimeError, ValueError) as exc:
        log(f"BROKEN: {exc}")
        result, problems = {}, [str(exc)]
    if result:
        print()
        print(f"Collector SIGKILLed after {result['kill_after']} calls, restarted {result['down_s']:g} s later "
              f"(healthy {result['collector_unhealthy_s']} s after the kill); {result['calls']} calls at "
              f"{result['rate']:g}/s per path")
        print(f"{'path':<9} {'answered':>9} {'in outage':>10} {'rows':>6} {'lost':>6} {'lost %':>7}  notes")
        for name, r in result["paths"].items():
            if name == "otlp":
                stats = r["envoy_stats"]
                notes = ", ".join(f"{k.rsplit('.', 1)[1]} {v}" for k, v in sorted(stats.items()))
            else:
                a = r.get("agent") or {}
                notes = (f"export_failures {a.get('export_failures')}, records_dropped {a.get('records_dropped')}"
                         if a else "")
                if name == "filelog":
                    notes = ", ".join(f"{k} {v}" for k, v in sorted((r.get("agent_metrics") or {}).items()))
            print(f"{name:<9} {r['answered']:>9} {r['during_outage']:>10} {r['rows']:>6} {r['lost']:>6} "
                  f"{r['lost_pct']:>6.1f}%  {notes}")
            if name != "otlp" and r["lost"]:
                problems.append(f"{name}: {r['lost']} of {r['answered']} calls have no row")
    JSON_OUT.parent.mkdir(parents=True, exist_ok=True)
    JSON_OUT.write_text(json.dumps({"result": result, "problems": problems}, indent=2) + "\n")
    print(f"JSON: {JSON_OUT}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
