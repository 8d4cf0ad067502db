"""The bot's real kube adapter with container logs refused, as the API refuses them when the
opt-in `upgrade-bot-pod-logs` role is not bound (403); every other call goes to the adapter."""

from __future__ import annotations

from typing import Any

from bot.adapters.kube import Cluster
from bot.errors import ClusterForbidden


class LogsForbidden:
    def __init__(self, inner: Cluster) -> None:
        self.inner = inner
        self.log_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def get_raw(self, path: str, query: Any = None) -> bytes:
        if path.endswith("/log"):
            self.log_reads += 1
            raise ClusterForbidden(
                f"cluster {self.inner.name}: the bot is not allowed to GET {path} "
                '(pods "x" is forbidden: cannot get resource "pods/log")',
                cluster=self.inner.name,
                status=403,
            )
        raw: bytes = self.inner.get_raw(path, query)
        return raw
