"""Free loopback ports."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """Loopback ports nobody listens on now (bound together, so all distinct): for tests and side stacks."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """One loopback port nobody listens on now."""
    return free_ports(1)[0]
