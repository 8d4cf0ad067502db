"""Loopback ports for tests."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A loopback port nothing listens on (bound once by the OS, then released): a cluster
    configured there refuses connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
