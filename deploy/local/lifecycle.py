"""Starting and stopping the local stack's components (through wirelens_helpers.supervise).

    up / down                   every component in dependency order / the reverse
    start_all                   the same for another list of components (Envoy Gateway's, Istio's)
    start / stop / kill         one component (kill: SIGKILL its process group, a crash)
    start_one                   start one if it is not running, for the command line

Each runs in its own session with its log in $WIRELENS_STATE_DIR/logs and its
pid file in pids/ (procmetrics reads them), so `down` stops exactly what `up`
started. Every port is checked before anything starts.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Callable

from deploy.local.components import BY_NAME, COMPONENTS, Component, component_named
from deploy.local.settings import READY_TIMEOUT_S, StackError, log_path, pid_path, read_pid
from wirelens_helpers import supervise

# "port P (VARIABLE) is already taken by pid N (command)", as StackError.
check_port_free = functools.partial(supervise.check_port_free, error=StackError)


def start(component: Component, settings: dict[str, str]) -> int:
    """Start the component and wait until it is ready (then its after_ready hook); its pid."""
    for variable in component.ports:
        check_port_free(int(settings[variable]), variable, component.name)
    if component.prepare:
        component.prepare(settings)
    process = supervise.Supervised(component.name, component.command(settings), log_path(settings, component.name),
                                   pid_file=pid_path(settings, component.name), cwd=component.cwd,
                                   env={**os.environ, **settings, **component.env(settings)}, log_mode="rotate")
    process.start()
    process.wait_ready(component.ready(settings), timeout_s=READY_TIMEOUT_S, interval_s=0.1,
                       detail=f"port {component.port(settings)}, {component.ports[0]}", error=StackError)
    if component.after_ready:
        component.after_ready(settings)
    return process.pid


def stop(name: str, settings: dict[str, str], grace_s: float = 20.0) -> str:
    """Stop the process group `up` started for this component (SIGTERM, SIGKILL after grace_s)."""
    component = BY_NAME.get(name)
    before_stop = component.before_stop if component else None
    return supervise.stop_pid_file(pid_path(settings, name), grace_s,
                                   (lambda: before_stop(settings)) if before_stop else None)


def kill(name: str, settings: dict[str, str], timeout_s: float = 20.0) -> str:
    """SIGKILL the component's whole process group at once (a crash: no shutdown code runs)."""
    return supervise.kill_pid_file(pid_path(settings, name), timeout_s, name)


def start_one(name: str, settings: dict[str, str]) -> str:
    component = component_named(name)
    pid = read_pid(settings, name)
    if pid:
        return f"already running (pid {pid})"
    if not component.enabled(settings):
        return "disabled by the settings"
    t0 = time.monotonic()
    pid = start(component, settings)
    return f"pid {pid} port {component.port(settings)} ready in {time.monotonic() - t0:.1f}s"


def start_all(components: list[Component], settings: dict[str, str], log: Callable[[str], None] = print,
              width: int = 13, explain: Callable[[Component], str | None] | None = None) -> None:
    """Start, in order, each enabled component that is not running yet. Every port is checked first: fail before
    anything starts, not halfway. On any failure stop what this call started, the component that never got
    ready too. `explain(component)` may add what its readiness lacked to the error."""
    components = [c for c in components if c.enabled(settings)]
    for component in components:
        if not read_pid(settings, component.name):
            for variable in component.ports:
                check_port_free(int(settings[variable]), variable, component.name)
    started: list[str] = []
    try:
        for component in components:
            pid = read_pid(settings, component.name)
            if pid:
                log(f"  {component.name:<{width}} already running (pid {pid})")
                continue
            t0 = time.monotonic()
            started.append(component.name)
            try:
                pid = start(component, settings)
            except StackError as exc:
                detail = explain(component) if explain else None
                if detail:
                    raise StackError(f"{exc}\n{detail}") from None
                raise
            log(f"  {component.name:<{width}} pid {pid:<7} port {component.port(settings):<6} "
                f"ready in {time.monotonic() - t0:.1f}s")
    except BaseException:
        for name in reversed(started):
            stop(name, settings)
        raise


def up(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    start_all(COMPONENTS, settings, log)


def down(settings: dict[str, str], log: Callable[[str], None] = print) -> None:
    for component in reversed(COMPONENTS):
        log(f"  {component.name:<13} {stop(component.name, settings)}")
