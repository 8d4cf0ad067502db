"""Kubeconfigs for tests whose cluster is not the sim: one refusing connections, or a listener of
the test's own."""

from __future__ import annotations

import socket
from pathlib import Path


def closed_port() -> int:
    """A loopback port nothing listens on (bound once by the OS, then released): a cluster
    configured there refuses connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_kubeconfig(path: Path, server: str, *, context: str = "ctx") -> Path:
    """A kubeconfig at `path` whose current context, `context`, reaches `server` with a token."""
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{server}"}}
users:
- name: u
  user: {{token: t}}
contexts:
- name: {context}
  context: {{cluster: c, user: u}}
current-context: {context}
""")
    return path


def refusing_kubeconfig(path: Path, *, context: str = "ctx", scheme: str = "http") -> Path:
    """A kubeconfig at `path` whose cluster refuses connections (`closed_port`)."""
    return write_kubeconfig(path, f"{scheme}://127.0.0.1:{closed_port()}", context=context)
