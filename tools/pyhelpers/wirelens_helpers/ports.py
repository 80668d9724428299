"""Free loopback ports."""

from __future__ import annotations

import socket
import threading

# Ports this process has handed out. The kernel may give a port it gave a moment ago again once the probing
# socket is closed, and the caller's server binds it only later: two allocations before either binds (a
# ClickHouse cluster's ports, then the Collector's) could otherwise get the same port. CI lost a run to that.
_handed_out: set[int] = set()
_lock = threading.Lock()


def free_ports(count: int) -> list[int]:
    """Loopback ports nobody listens on now and that this process has not handed out before (all distinct):
    for tests and side stacks."""
    sockets = []
    ports: list[int] = []
    try:
        with _lock:
            while len(ports) < count:
                sock = socket.socket()
                sock.bind(("127.0.0.1", 0))
                sockets.append(sock)  # held open until the end, so the kernel cannot offer it twice here
                port = sock.getsockname()[1]
                if len(sockets) > count + 1000:
                    raise OSError(f"no free loopback port left that this process has not handed out already "
                                  f"({len(_handed_out)} handed out)")
                if port not in _handed_out:
                    ports.append(port)
            _handed_out.update(ports)
        return ports
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """One loopback port nobody listens on now."""
    return free_ports(1)[0]
