"""Waiting under a deadline: poll until a probe answers, or fail naming what was missing."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

Value = TypeVar("Value")


class WaitTimeout(AssertionError):
    """What was awaited did not come, or a process it needed exited; the message says what, and what was seen last.

    An AssertionError so that pytest reports it as the test's failure; programs catch it by name."""

    def __init__(self, message: str, last_seen: object) -> None:
        super().__init__(message)
        self.last_seen = last_seen


def wait_for(what: str, probe: Callable[[], Value], done: Callable[[Value], object] = bool, *,
             timeout_s: float = 60.0, interval_s: float = 0.25, state: Callable[[], object] | None = None,
             processes: Iterable[subprocess.Popen] = (),
             retry_on: tuple[type[BaseException], ...] = ()) -> Value:
    """Call probe() until done(its value) holds (by default: until the value is truthy); return that value.

    Raises WaitTimeout after timeout_s, or as soon as one of `processes` has exited (no point waiting
    for a dead server), naming `what`, the last value seen and state() (counters, log tails) if given.
    An exception of a type in retry_on counts as "not yet" (a server still starting) and is the value seen."""
    watched = list(processes)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = probe()
        except retry_on as exc:
            value = exc
        else:
            if done(value):
                return value
        exited = [process for process in watched if process.poll() is not None]
        if exited or time.monotonic() > deadline:
            why = (f"gave up waiting for {what}: "
                   + ", ".join(f"{_named(p)} exited with code {p.returncode}" for p in exited)
                   if exited else f"timed out after {timeout_s:g}s waiting for {what}")
            raise WaitTimeout(f"{why}; last seen: {value!r}" + (f"; {state()}" if state else ""), value)
        time.sleep(interval_s)  # polling interval under a deadline


def _named(process: subprocess.Popen) -> str:
    program = process.args[0] if isinstance(process.args, (list, tuple)) else str(process.args).split()[0]
    return f"{Path(str(program)).name} (pid {process.pid})"
