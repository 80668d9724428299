"""Supervising processes: one copy of how wirelens starts, watches, stops and kills its programs.

    Supervised      one program in its own session (process group), its output in a
                    log file, optionally a pid file; start, wait_ready, stop, kill, restart
    read_pid        a pid file's pid, if that process still runs what was started
    stop_pid_file   stop / kill what a pid file names, from another process
    kill_pid_file   (`stack down` after `stack up`)
    check_port_free fail before starting, saying which port is taken and by whom
    http_ok, tcp_open, http_get
                    readiness probes for wait_ready (and for status lines)

Readiness is wirelens_helpers.wait.wait_for: a probe polled under a deadline,
given up on as soon as the process exits; the failure says which program,
why (its exit status, or how long it was given), where its log is and the
log's last lines.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .wait import WaitTimeout, wait_for


class SupervisorError(RuntimeError):
    """A failure the user can act on; the message says what and where (a port's holder, a log's last lines)."""


# ---------------------------------------------------------------- probes


def http_get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body) of a GET; an HTTP error status is an answer too. OSError if nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def http_ok(url: str, expect: str | None = None) -> Callable[[], bool]:
    """A probe: the URL answers 200 (and its body holds `expect`, if given)."""
    def probe() -> bool:
        try:
            status, body = http_get(url)
        except (OSError, urllib.error.URLError):
            return False
        return status == 200 and (expect is None or expect in body)
    return probe


def tcp_open(port: int, host: str = "127.0.0.1") -> Callable[[], bool]:
    """A probe: something accepts TCP connections on host:port."""
    def probe() -> bool:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False
    return probe


def all_of(*probes: Callable[[], bool]) -> Callable[[], bool]:
    """A probe: every one of probes answers (in order; the first that does not stops the round)."""
    return lambda: all(probe() for probe in probes)


# ---------------------------------------------------------------- ports


def port_holder(port: int) -> str | None:
    """Who listens on 127.0.0.1:port (or any address), from /proc: 'pid N (cmdline)'."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(inode)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    cmdline = " ".join((proc / "cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
                    return f"pid {proc.name} ({cmdline[:120]})"
        except OSError:
            continue
    return "a process this user cannot inspect"


def check_port_free(port: int, variable: str, owner: str,
                    error: type[Exception] = SupervisorError) -> None:
    """Raise `error` naming the owner, the port, its setting and who holds it, if 127.0.0.1:port is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers do: connections in TIME_WAIT from an earlier run must not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            holder = port_holder(port) or "another process"
            raise error(
                f"{owner}: port {port} ({variable}) is already taken by {holder}. "
                f"Stop that process or choose another port: {variable}=NNNN make up") from None


# ---------------------------------------------------------------- process groups and pid files


def signal_group(pgid: int, sig: int) -> None:
    """Send sig to every process of the group (gone already: nothing to do)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """Any process of the group still running (zombies do not count)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(pgid: int, grace_s: float = 20.0) -> None:
    """SIGTERM the process group, SIGKILL it if any of it is still alive after grace_s."""
    signal_group(pgid, signal.SIGTERM)
    try:
        wait_for(f"process group {pgid} to exit", lambda: not group_alive(pgid), timeout_s=grace_s, interval_s=0.05)
    except WaitTimeout:
        signal_group(pgid, signal.SIGKILL)


def kill_group(pgid: int, timeout_s: float = 20.0, what: str = "") -> None:
    """SIGKILL the whole process group at once (a crash: no shutdown code runs) and wait until it is gone."""
    signal_group(pgid, signal.SIGKILL)
    try:
        wait_for(f"process group {pgid} to exit", lambda: not group_alive(pgid), timeout_s=timeout_s,
                 interval_s=0.05)
    except WaitTimeout:
        raise SupervisorError(f"{what or 'process group'}: process group {pgid} still alive "
                              f"{timeout_s:.0f}s after SIGKILL") from None


def write_pid(path: Path, pid: int, argv0: str) -> None:
    """A pid file: the pid and the program it runs (so that a reused pid is never taken for ours)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "argv0": argv0}))


def read_pid(path: Path) -> int | None:
    """The pid a pid file names, if that process still runs the command that was started; else None."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    pid = record.get("pid")
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return None
    return pid if cmdline == record.get("argv0") else None


def stop_pid_file(path: Path, grace_s: float = 20.0,
                  before_stop: Callable[[], None] | None = None) -> str:
    """Stop the process group a pid file names (SIGTERM, SIGKILL after grace_s); what happened, for a status line."""
    pid = read_pid(path)
    if pid is None:
        path.unlink(missing_ok=True)
        return "not running"
    if before_stop:
        before_stop()
    stop_group(pid, grace_s)
    path.unlink(missing_ok=True)
    return f"stopped pid {pid}"


def kill_pid_file(path: Path, timeout_s: float = 20.0, what: str = "") -> str:
    """SIGKILL the process group a pid file names, wait until it is gone; what happened, for a status line."""
    pid = read_pid(path)
    if pid is None:
        path.unlink(missing_ok=True)
        return "not running"
    kill_group(pid, timeout_s, what or path.stem)
    path.unlink(missing_ok=True)
    return f"killed pid {pid}"


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a log ("(no log)" if there is none)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---------------------------------------------------------------- one supervised program


@dataclasses.dataclass
class Supervised:
    """One program: started with its output in `log`, watched until ready, stopped or killed.

    With new_session (the default) it leads its own process group, and stop/kill reach
    everything it started (a supervisor and its engine, valgrind and Envoy); without,
    only the process itself is signalled. log_mode: "rotate" keeps the previous run's
    log as NAME.log.1, "append" adds to it, "truncate" starts it empty."""

    name: str
    argv: Sequence[str]
    log: Path
    pid_file: Path | None = None
    cwd: Path | None = None
    env: Mapping[str, str] | None = None   # the whole environment (None: inherit ours)
    new_session: bool = True
    log_mode: str = "truncate"
    process: subprocess.Popen | None = dataclasses.field(default=None, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> subprocess.Popen:
        """Start the program (not waiting for it: wait_ready does)."""
        argv = [str(a) for a in self.argv]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.log_mode == "rotate" and self.log.exists():  # keep the previous run's log, one generation
            self.log.replace(self.log.with_suffix(".log.1"))
        with open(self.log, "ab" if self.log_mode == "append" else "wb") as out:
            self.process = subprocess.Popen(argv, cwd=self.cwd, env=None if self.env is None else dict(self.env),
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=self.new_session)
        if self.pid_file:
            write_pid(self.pid_file, self.process.pid, argv[0])
        return self.process

    def wait_ready(self, probe: Callable[[], object], *, timeout_s: float = 60.0, interval_s: float = 0.1,
                   detail: str = "", error: type[Exception] = SupervisorError) -> None:
        """Poll probe until it answers (wait_for); if the program exits first or the time runs out,
        raise `error`: the name, why, detail (e.g. its port), the log and its last lines."""
        try:
            wait_for(f"{self.name} to be ready", probe, timeout_s=timeout_s, interval_s=interval_s,
                     processes=[self.process] if self.process else ())
        except WaitTimeout:
            code = self.process.poll() if self.process else None
            why = f"exited with status {code}" if code is not None else f"not ready after {timeout_s:.0f}s"
            raise error(f"{self.name} {why}{f' ({detail})' if detail else ''}; log: {self.log}\n"
                        f"--- last lines of {self.log.name} ---\n{tail(self.log)}") from None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (its group), SIGKILL after grace_s; reaps it."""
        if self.process is None:
            return
        if self.new_session:
            stop_group(self.process.pid, grace_s)
        elif self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()
        if self.pid_file:
            self.pid_file.unlink(missing_ok=True)

    def kill(self, timeout_s: float = 20.0) -> None:
        """SIGKILL at once (a crash); reaps it."""
        if self.process is None:
            return
        if self.new_session:
            kill_group(self.process.pid, timeout_s, self.name)
        else:
            self.process.kill()
        self.process.wait()
        if self.pid_file:
            self.pid_file.unlink(missing_ok=True)

    def restart(self, probe: Callable[[], object] | None = None, grace_s: float = 20.0, **ready) -> None:
        """stop, start, and wait_ready(probe, **ready) if a probe is given."""
        self.stop(grace_s)
        self.start()
        if probe is not None:
            self.wait_ready(probe, **ready)
