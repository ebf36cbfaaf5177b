"""Free local ports for the processes a test or the demo starts.

A port is found by binding port 0 and closing the socket. Drawn one at a time, the kernel may
hand the same port out twice: a three-node cluster's 15 listeners once got one port for two of
them, and the second broker died with "Address already in use" (a CI run, 2026-11-29; drawn one
at a time, 15 ports repeat one in about 1 run of 180). All of a cluster's ports are therefore
drawn while every probe is still open.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that were free a moment ago."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


def free_port() -> int:
    return free_ports(1)[0]
