"""Small helpers shared by the wirelens benchmarks (bench/*.py).

Nothing here knows about a particular benchmark: free loopback ports, CPU time
of a process read from /proc, the machine's CPU use (to see how much of it
other programs took during a run), running a load tool with a time bound and
its own CPU time, starting and stopping processes by pid, medians.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from deploy.local import stack
from wirelens_helpers.wait import WaitTimeout, wait_for
from wirelens_helpers.ports import free_ports  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ ports

# Loopback ports nobody listens on now (benchlib.free_ports, for the benchmarks).


# ------------------------------------------------------------------ CPU accounting

def process_cpu_ns(pid: int) -> int:
    """CPU time (user+system) used so far by the whole process `pid`, in ns: its process CPU clock
    (clock_getcpuclockid, CPUCLOCK_SCHED; ns resolution, readable for any pid). Every thread counts, the
    exited ones included: summing the live threads' /proc/PID/task/*/schedstat lost a retired pool thread's
    time (a JVM's, a Python server's: 37 ms of 224 in one test). ProcessLookupError once it is gone."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        raise ProcessLookupError(pid) from None


def process_cpu_ticks_ns(pid: int) -> int:
    """utime+stime of /proc/PID/stat (all threads, including exited ones), in ns."""
    return sum(process_user_system_ns(pid))


def process_user_system_ns(pid: int) -> tuple[int, int]:
    """(user, system) CPU time of `pid` so far, all threads, in ns (clock-tick resolution).

    The system part is what the kernel did for the process: socket reads and
    writes, epoll, wake-ups. A proxy-wasm filter adds none itself, so a
    variant whose system time per call grows pays for handling fewer calls
    per wake-up (bench/README.md, "Known noise sources"), not for its code.
    """
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) * 1_000_000_000 // CLK_TCK,
            int(fields[12]) * 1_000_000_000 // CLK_TCK)


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds summed over all cores since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        parts = f.readline().split()
    values = [int(v) for v in parts[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    return (total - idle) / CLK_TCK, total / CLK_TCK


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ------------------------------------------------------------------ processes

@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float  # user+system CPU of the tool (from wait4's rusage)
    timed_out: bool


def run_tool(argv: Sequence[str], timeout_s: float, tag: str = "") -> ToolResult:
    """Run a load tool to completion (killed after timeout_s); return its output and CPU time.

    tag: a name for its output files, distinct for tools that run at the same time.
    """
    out_path = ROOT / "build" / "bench" / f".tool{tag and '.' + tag}.out"
    err_path = ROOT / "build" / "bench" / f".tool{tag and '.' + tag}.err"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        timed_out = False
        try:  # wait4: the tool's own CPU time (rusage) with its exit status
            _, status, rusage = wait_for(f"{argv[0]} to finish", lambda: os.wait4(proc.pid, os.WNOHANG),
                                         lambda waited: waited[0], timeout_s=timeout_s, interval_s=0.02)
        except WaitTimeout:
            timed_out = True
            proc.kill()
            _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    return ToolResult(proc.returncode, out_path.read_text(errors="replace"),
                      err_path.read_text(errors="replace"), wall,
                      rusage.ru_utime + rusage.ru_stime, timed_out)


def nghttp_grpc(port: int, path: str, body: Path, timeout_s: float, slack_s: float = 10.0) -> tuple[int, str]:
    """One gRPC call with nghttp -v (from nghttp2-client, like h2load) to 127.0.0.1:port/path with the
    framed body in file `body`: its exit status and its verbose output (frames, headers, trailers)."""
    out = subprocess.run(
        ["nghttp", "-v", "-n", "-t", f"{timeout_s:g}", "-d", str(body),
         "-H", "content-type: application/grpc", "-H", "te: trailers", f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, errors="replace", timeout=timeout_s + slack_s)
    return out.returncode, out.stdout + out.stderr


def require_tools(tools: dict[str, str]) -> None:
    """Exit with an install hint when a command-line tool is missing.

    tools: command -> the Debian package that provides it.
    """
    missing = {cmd: pkg for cmd, pkg in tools.items() if shutil.which(cmd) is None}
    if missing:
        pkgs = " ".join(sorted(set(missing.values())))
        print(f"missing load tools: {', '.join(sorted(missing))}\n"
              f"  install them with:  apt-get install -y {pkgs}\n"
              f"  (or run bench/install-tools as root, which does apt-get update first)",
              file=sys.stderr)
        sys.exit(1)


# ------------------------------------------------------------------ statistics

def median(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values: Sequence[float]) -> tuple[float, float] | None:
    values = [v for v in values if v is not None]
    return (min(values), max(values)) if values else None


def fmt_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def process_context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches so far of every live thread of `pid`."""
    total = 0
    for task in os.scandir(f"/proc/{pid}/task"):
        try:
            with open(f"{task.path}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total
