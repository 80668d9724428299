"""Does a 1 GiB gRPC stream through wirelens grow Envoy's memory? (part of `make bench-instructions`)

Target (issues 16 and 29): one 1 GiB gRPC stream through the filter grows
Envoy's RSS by at most 1 MiB more than the same stream through the same Envoy
without the filter, for each build: the Wasm filter and the native module.

Envoy runs natively (not under callgrind), in the pipeline shape of
filter_instructions.py (exporters on: file access log + OTel tracer, from
envoy/wiring.py; bench/harness.py builds it), one variant after the other, each a fresh Envoy:
none+exp, wirelens+exp and (when built) native+exp. Upstream: bin/grpc-server. After a warm-up (a
1,000-message stream and 200 unary calls), the script sends five
(1 + --warm-streams) /wirelens.v1.Echo/BiStream calls with h2load, one after
the other, each carrying 1 GiB of EchoRequest messages (64 KiB each; the
server echoes every one, so 1 GiB goes each way), while it samples
/proc/<pid>/status VmRSS every 50 ms. Per stream: the peak growth over the RSS
just before it. The first (cold) stream also raises the allocator's
high-water mark of Envoy's transit buffers (tens of MiB, varying by MiBs
between runs); the warm ones reuse it, so they show what one stream leaves
behind or holds. A leak grows every stream; the allocator's noise (0-11 MiB
on one stream) not every one. The verdict, per build: its smallest warm
growth minus none's, PASS when at most 1 MiB.

The 1 GiB request file goes to build/bench/stream_memory/ and is deleted
afterwards. Every step is bounded (Envoy start 60 s, the stream 600 s).
Standalone: writes build/bench/stream_memory.json; exit 0 whatever the
verdict, 1 when something broke.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import shutil
import sys
import threading
import time
from pathlib import Path

from bench import benchlib, harness
from bench.benchlib import ROOT


WORK_DIR = harness.OUT_DIR / "stream_memory"
JSON_OUT = harness.OUT_DIR / "stream_memory.json"
GIB = 1 << 30
MESSAGE_CONTENT_BYTES = 64 * 1024 - 9    # an EchoRequest frame of exactly 64 KiB (5 + 1 + 3 + content)
TARGET_EXTRA_KIB = 1024                  # wirelens' growth minus none's, at most 1 MiB
SAMPLE_S = 0.05
STREAM_TIMEOUT_S = 600.0
BASELINE = "none+exp"
# 1 + WARM_STREAMS streams per Envoy: the first (cold) also raises the allocator's
# high-water mark of Envoy's transit buffers, by an amount that varies by several MiB
# from run to run; the warm ones reuse it, so what they add is what a stream leaves
# behind or holds. A leak grows every stream, the allocator's noise (0-11 MiB seen on
# one warm stream, in every variant) not every one: the verdict uses the smallest
# warm growth. Two warm streams were too few (2026-11-27: a build whose RSS over all
# streams grew 4.5 MiB less than no filter's got +4.7 and +7.7 MiB on its two).
WARM_STREAMS = 4


def stream_runs(warm_streams: int = WARM_STREAMS) -> tuple[str, ...]:
    return ("cold", *(f"warm{i}" for i in range(1, warm_streams + 1)))


def vm_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


class RssSampler(threading.Thread):
    """Polls VmRSS of one pid every SAMPLE_S until stopped; keeps the peak and the sample count."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.samples = pid, 0, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            v = vm_rss_kib(self.pid)
            if v is not None:
                self.peak, self.samples = max(self.peak, v), self.samples + 1
            self._halt.wait(SAMPLE_S)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def write_stream_file(path: Path, total_bytes: int) -> int:
    """`total_bytes` (rounded down to whole frames) of EchoRequest frames; returns the message count."""
    frame = harness.grpc_frame(harness.echo_message(b"m" * MESSAGE_CONTENT_BYTES))
    count = total_bytes // len(frame)
    chunk = frame * 16
    with open(path, "wb") as f:
        for _ in range(count // 16):
            f.write(chunk)
        f.write(frame * (count % 16))
    return count


def one_stream(variant: str, label: str, env: harness.Envoy, port: int, big: Path) -> dict:
    """One stream of the big file through `env`; RSS before, peak while it runs, after."""
    before = vm_rss_kib(env.proc.pid)
    sampler = RssSampler(env.proc.pid)
    sampler.start()
    argv = ["h2load", "-n", "1", "-c", "1", "-m", "1", "-t", "1", "-d", str(big),
            "-H", "content-type: application/grpc", "-H", "te: trailers",
            "-T", str(int(STREAM_TIMEOUT_S)), "-N", "60", f"http://127.0.0.1:{port}{harness.STREAM_PATH}"]
    try:
        res = benchlib.run_tool(argv, timeout_s=STREAM_TIMEOUT_S + 30, tag="stream-memory")
    finally:
        sampler.stop()
    after = vm_rss_kib(env.proc.pid)
    if res.timed_out or res.returncode != 0:
        raise harness.Broken(f"{variant}: the {label} stream failed (exit {res.returncode}"
                        f"{', timed out' if res.timed_out else ''}):\n{res.stdout[-800:]}{res.stderr[-400:]}")
    done, _, problems = harness.parse_h2load(res.stdout)
    m_data = re.search(r"traffic: .*\((\d+)\) data", res.stdout)
    got = int(m_data.group(1)) if m_data else 0
    if done != 1 or problems or got < big.stat().st_size:
        raise harness.Broken(f"{variant}: the {label} stream did not complete: {done} done, {problems}, "
                        f"{got} of {big.stat().st_size} bytes echoed")
    if not env.alive():
        raise harness.Broken(f"{variant}: Envoy died; log {env.log_path}")
    peak = max(sampler.peak, after or 0)
    print(f"  {variant}: {label} stream: RSS {before / 1024:.1f} MiB before, peak {peak - before:+,} KiB "
          f"({res.wall_s:.1f} s, {sampler.samples} samples)", flush=True)
    return {"rss_before_kib": before, "rss_peak_kib": peak, "rss_after_kib": after,
            "growth_kib": peak - before, "samples": sampler.samples, "stream_s": round(res.wall_s, 2),
            "bytes_each_way": got}


def measure(variant: str, envoy_bin: Path, wasm: Path | None, plugin_config: str, ports: dict,
            big: Path, messages: int, small: Path, grpc_body: Path, warm_streams: int = WARM_STREAMS) -> dict:
    port, admin = benchlib.free_ports(2)
    log_path = WORK_DIR / f"access-{variant}.jsonl"
    if log_path.exists():
        log_path.unlink()
    cfg = harness.pipeline_config(wasm, plugin_config, "file", port, admin, ports["rest"], ports["grpc"],
                             ports["upstream"], log_path, f"wirelens-mem-{variant.replace('+', '-')}")
    env = harness.Envoy(f"mem-{variant}", cfg, port, admin, work_dir=WORK_DIR,
                        extra_args=("--file-flush-interval-msec", harness.FILE_FLUSH_MS))
    try:
        env.start(envoy_bin)
        env.wait_ready(60)
        harness.check_stream(port, small, harness.STREAM_MESSAGES, 60)
        res = benchlib.run_tool(harness.h2load_argv(port, 200, 1, 4, grpc_body), timeout_s=60)
        if res.returncode != 0 or harness.parse_h2load(res.stdout)[2]:
            raise harness.Broken(f"{variant}: warm-up unary calls failed:\n{res.stdout[-600:]}")
        runs = []
        for label in stream_runs(warm_streams):
            runs.append(one_stream(variant, label, env, port, big))
        bad = env.new_log_problems()
        if bad:
            raise harness.Broken(f"{variant}: Envoy log: {bad[0][:200]}")
        cold, *warm = runs
        return {"cold": cold, "warm": warm, "growth_kib": min(w["growth_kib"] for w in warm),
                # all streams together: the highest RSS seen over the RSS before the first
                "total_growth_kib": max(r["rss_peak_kib"] for r in runs) - cold["rss_before_kib"],
                # the warm streams together: RSS after the last over RSS before the first
                "warm_total_kib": (warm[-1]["rss_after_kib"] or 0) - warm[0]["rss_before_kib"],
                "rss_before_kib": cold["rss_before_kib"], "messages_each_way": messages}
    finally:
        env.stop()


def verdicts(variants: dict, target_kib: int = TARGET_EXTRA_KIB) -> dict:
    """Per build measured (NAME+exp): its smaller warm growth minus none+exp's, and PASS/FAIL."""
    out = {}
    none = variants.get(BASELINE)
    if not none:
        return out
    for variant, rec in variants.items():
        if variant == BASELINE:
            continue
        extra = rec["growth_kib"] - none["growth_kib"]
        out[variant.split("+")[0]] = {
            "extra_growth_kib": extra, "pass": extra <= target_kib,
            "cold_extra_kib": rec["cold"]["growth_kib"] - none["cold"]["growth_kib"],
            "total_extra_kib": rec["total_growth_kib"] - none["total_growth_kib"],
            "warm_total_extra_kib": rec.get("warm_total_kib", 0) - none.get("warm_total_kib", 0)}
    return out


def run(envoy_bin: Path, builds: dict[str, Path], plugin_config: str, quick: bool = False,
        total_bytes: int | None = None, infos: dict | None = None, warm_streams: int = WARM_STREAMS) -> dict:
    """none+exp, then each build (name -> pinned .wasm or .so) as NAME+exp; the result dict (problems
    listed, never raised)."""
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    total = total_bytes or (GIB // 4 if quick else GIB)
    out: dict = {"benchmark": "stream_memory", "date": _dt.datetime.now().isoformat(timespec="seconds"),
                 "stream_bytes": total, "message_bytes": MESSAGE_CONTENT_BYTES + 9,
                 "sample_ms": SAMPLE_S * 1000, "target_extra_kib": TARGET_EXTRA_KIB, "quick": quick,
                 "builds": infos or {}, "warm_streams": warm_streams, "variants": {}, "problems": []}
    big = WORK_DIR / "stream_request.bin"
    small = WORK_DIR / "small_stream.bin"
    grpc_body = WORK_DIR / "grpc_request.bin"
    free = shutil.disk_usage(WORK_DIR).free
    if free < total * 3:
        out["problems"].append(f"not enough disk for a {total >> 20} MiB request file ({free >> 20} MiB free)")
        return out
    small.write_bytes(harness.STREAM_FRAME * harness.STREAM_MESSAGES)
    grpc_body.write_bytes(harness.GRPC_REQUEST)
    p = benchlib.free_ports(4)
    ports = {"upstream": p[0], "rest": p[2], "grpc": p[3]}
    upstream = harness.Envoy("mem-upstream", harness.upstream_config(p[0], p[1]), p[0], p[1], work_dir=WORK_DIR)
    services = harness.Services(ports["rest"], ports["grpc"], WORK_DIR)
    t0 = time.monotonic()
    try:
        messages = write_stream_file(big, total)
        out["messages_each_way"] = messages
        upstream.start(envoy_bin)
        upstream.wait_ready()
        services.start()
        for variant, module in ((BASELINE, None), *((f"{name}+exp", path) for name, path in builds.items())):
            rec = measure(variant, envoy_bin, module, plugin_config, ports, big, messages, small, grpc_body,
                          warm_streams)
            out["variants"][variant] = rec
            if not services.alive():
                raise harness.Broken("a Go service died")
    except (harness.Broken, OSError) as exc:
        out["problems"].append(str(exc))
    finally:
        services.stop()
        upstream.stop()
        big.unlink(missing_ok=True)
        for log in WORK_DIR.glob("access-*.jsonl"):
            log.unlink()
    out["verdicts"] = verdicts(out["variants"])
    if "wirelens" in out["verdicts"]:  # as before issue 29 (the Wasm build's), for readers of older files
        out["extra_growth_kib"] = out["verdicts"]["wirelens"]["extra_growth_kib"]
        out["pass"] = out["verdicts"]["wirelens"]["pass"]
    out["elapsed_s"] = round(time.monotonic() - t0, 1)
    return out


def verdict_lines(mem: dict) -> list[str]:
    """One line per build: the memory verdict (also what `make bench`'s summary repeats)."""
    lines = []
    gib = mem["stream_bytes"] / GIB
    for name, v in mem.get("verdicts", {}).items():
        label = f"memory: {gib:.2f} GiB stream, {name}+exp - none+exp, warm growth"
        lines.append(f"{label:<72} {v['extra_growth_kib']:>+8,} KiB <= 1,024 KiB "
                     f"{'PASS' if v['pass'] else 'FAIL'}")
    return lines


def print_report(mem: dict) -> None:
    print(f"\nMemory: one {mem['stream_bytes'] / GIB:.2f} GiB BiStream ({mem.get('messages_each_way', 0):,} "
          f"messages of {mem['message_bytes'] // 1024} KiB, echoed: the same back), Envoy natively, "
          f"VmRSS every {mem['sample_ms']:.0f} ms{'  QUICK' if mem.get('quick') else ''}")
    print(f"  peak growth of VmRSS over the RSS just before each stream; {1 + mem.get('warm_streams', 2)} streams "
          "per Envoy: cold (the first),\n  then warm ones (Envoy's transit buffers already allocated): the "
          "verdict uses the smallest warm growth")
    for name, r in mem["variants"].items():
        warm = " ".join(f"{w['growth_kib']:+7,}" for w in r["warm"])
        print(f"  {name:<14} pre-stream {r['rss_before_kib'] / 1024:6.1f} MiB   cold {r['cold']['growth_kib']:+8,} KiB "
              f"({r['cold']['stream_s']:.1f} s)   warm {warm} KiB   after {r['warm'][-1]['rss_after_kib'] / 1024:6.1f} MiB")
    for line, (name, v) in zip(verdict_lines(mem), mem.get("verdicts", {}).items()):
        print(f"  {line}   (cold: {v['cold_extra_kib']:+,} KiB; all streams: {v['total_extra_kib']:+,} KiB; "
              f"warm ones together: {v.get('warm_total_extra_kib', 0):+,} KiB)")
    for p in mem.get("problems", []):
        print(f"  ! {p[:300]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 256 MiB stream instead of 1 GiB")
    ap.add_argument("--mib", type=int, help="stream size in MiB (default 1024)")
    ap.add_argument("--warm-streams", type=int, default=WARM_STREAMS,
                    help=f"streams after the first (cold) one, per Envoy (default {WARM_STREAMS})")
    ap.add_argument("--wasm", type=Path, default=harness.WIRELENS_WASM, help="the Wasm build")
    ap.add_argument("--native", type=Path, default=harness.WIRELENS_NATIVE,
                    help="the native build (skipped when missing; --native '' to skip)")
    ap.add_argument("--plugin-config", type=Path, default=harness.OPMAP)
    ap.add_argument("--json", type=Path, default=JSON_OUT)
    args = ap.parse_args(argv)
    benchlib.require_tools({"h2load": "nghttp2-client", "nghttp": "nghttp2-client"})
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    builds, infos = {}, {}
    for name, src in (("wirelens", args.wasm), ("native", args.native)):
        if str(src) in ("", ".") or not src.is_file():
            if name == "native" and str(src) not in ("", "."):
                print(f"native not measured: {src} is missing (`make native`)")
            continue
        builds[name] = harness.pin_module(src, WORK_DIR, name)
        infos[name] = harness.file_info(src, builds[name])
    mem = run(harness.find_envoy(), builds, args.plugin_config.read_text(), quick=args.quick,
              total_bytes=args.mib << 20 if args.mib else None, infos=infos, warm_streams=args.warm_streams)
    args.json.write_text(json.dumps(mem, indent=1))
    print_report(mem)
    return 1 if mem["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
