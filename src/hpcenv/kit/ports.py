"""A free TCP port, for MASTER_PORT and other rendezvous ports."""

from __future__ import annotations

import socket


def free_port(host: str = "") -> int:
    """A TCP port free on ``host`` now.

    The default, every interface, is the stricter test: a port free there is free on
    127.0.0.1 too, and other nodes of a job can reach it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
