"""Transport faults: the HTTP server answering 5xx/429 on a fraction of requests, slowly, or
cutting watches short, as a flaky load balancer in front of a real API server would.

The control API sets them (`set_transport`, the `transport` fault); the server applies them to
Kubernetes paths only.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass


@dataclass
class TransportFaults:
    """Misbehaviour of the HTTP transport for Kubernetes paths (never for the server's extra routes,
    such as /sim: the control API must stay reachable while it makes the API misbehave)."""

    error_rate: float = 0.0
    error_status: int = 500
    retry_after: int = 1
    latency: float = 0.0
    path_prefix: str = ""
    #: End each watch after this many real seconds (0 = never), as a flaky load balancer would.
    watch_drop_after: float = 0.0

    def __post_init__(self) -> None:
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    def seed(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def applies(self, path: str) -> bool:
        return path.startswith(self.path_prefix or "/")

    def roll(self) -> bool:
        if self.error_rate <= 0:
            return False
        with self._lock:
            return self._rng.random() < self.error_rate
