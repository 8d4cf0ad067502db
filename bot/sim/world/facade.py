"""What the sim's cloud facades (`aws.py`, `gke.py`, `azure.py`) share: the base of each provider's
world (its scenario section checked, the cloud it acts on, its calls counted), the base of their
errors, and the test hooks every facade's wire answers (`sim/hold`, `sim/release`, `sim/calls`)."""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from bot.sim.controllers.engine import Engine
from bot.sim.world.cloud import Cloud

Obj = dict[str, Any]

#: The longest a held answer (`POST …/sim/hold`) waits for its release, in real seconds.
HOLD_LIMIT = 120.0


class FacadeError(Exception):
    """A cloud API's refusal: the HTTP status, the cloud's code for it and the message. Each facade
    raises its own subclass and writes it in its cloud's wire shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class ProviderWorld:
    """A cloud provider's side of the simulated cluster, built from its scenario section."""

    def __init__(
        self,
        section: str,
        known: Collection[str],
        cloud: Cloud,
        engine: Engine,
        spec: Obj,
        *,
        default_name: str,
    ) -> None:
        if not isinstance(spec, dict):
            raise ValueError(f"{section}: expected a mapping")
        bad = set(spec) - set(known)
        if bad:
            raise ValueError(
                f"{section}: unknown key(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(known))}"
            )
        self.cloud = cloud
        self.engine = engine
        #: The store's lock: the engine runs the cloud's operations under it too.
        self.lock = cloud.api.store.lock
        self.name = str(spec.get("cluster_name") or default_name)
        #: Operation → how often it was called (`GET …/sim/calls`).
        self.calls: Counter[str] = Counter()
        #: Operation → the Event its held answers wait on (`POST …/sim/hold`).
        self.holds: dict[str, threading.Event] = {}
        self._ids = itertools.count(1)


def answer(
    world: ProviderWorld, method: str, rest: str, body: bytes, call: Callable[[], tuple[int, Any]]
) -> tuple[int, Any]:
    """A facade's answer to `rest` (its path below the facade's prefix): `call()` under the store's
    lock, or one of the test hooks. `POST sim/hold {"operation": …}` is a test's kill -9 "mid-call":
    the operation is done, its answer held back until `POST sim/release` (or HOLD_LIMIT), so the
    caller can die after the cloud acted, before it heard. `GET sim/calls` counts the calls."""
    with world.lock:
        if rest == "sim/hold" and method == "POST":
            world.holds[str(json.loads(body or b"{}").get("operation", ""))] = threading.Event()
            return 200, {}
        if rest == "sim/release" and method == "POST":
            for event in world.holds.values():
                event.set()
            world.holds.clear()
            return 200, {}
        if rest == "sim/calls" and method == "GET":
            return 200, dict(world.calls)
        before = Counter(world.calls)
        result = call()
        held = [event for op, event in world.holds.items() if world.calls[op] > before[op]]
    for event in held:
        event.wait(HOLD_LIMIT)
    return result
