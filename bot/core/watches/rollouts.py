"""The rollouts a watch follows: each Deployment, DaemonSet and StatefulSet's verdict as its events
come (`bot.core.rollout`), which of them are rolling out a new spec, and the rollouts completed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from bot.core.kube.objects import workload_key
from bot.core.rollout import DONE
from bot.core.rollout import verdict as rollout_verdict
from bot.core.watches.summary import COMPLETED_KEPT, Completed, RolloutView, Summary


class _Workload:
    __slots__ = ("baseline", "generation", "kind", "message", "name", "namespace", "pending", "state")

    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        self.generation = 0
        self.baseline = -1  # the generation known to be rolled out
        self.pending = 0  # a spec rollout of this generation is in progress (0: none)
        self.state = DONE
        self.message = ""


class Rollouts:
    """The workloads' part of a watch's state (`WatchState` owns it; one driver thread owns both)."""

    def __init__(self) -> None:
        self.workloads: dict[str, _Workload] = {}
        self._rolling: dict[str, _Workload] = {}  # verdict not done
        self.completed: deque[Completed] = deque(maxlen=COMPLETED_KEPT)
        self._seed_pending: dict[str, int] = {}

    def seed(self, previous: Summary) -> None:
        """Carry the pending rollouts and the completed ones over a restart."""
        for roll in previous.rollouts:
            if roll.spec_change:
                self._seed_pending[roll.key] = roll.generation
        self.completed.extend(previous.completed)

    def sync(self, kind: str, seen: Iterable[str]) -> None:
        """After a full list of `kind`: the workloads of that kind not `seen` in it are gone."""
        listed = set(seen)
        for key in [k for k, w in self.workloads.items() if w.kind == kind and k not in listed]:
            self.drop(key)

    def apply(self, kind: str, event_type: str, obj: Any) -> None:
        """A workload of `kind` (Deployment, DaemonSet, StatefulSet) added, changed or deleted."""
        meta = obj.metadata
        key = workload_key(meta.namespace, kind, meta.name)
        if event_type == "DELETED":
            if key in self.workloads:
                self.drop(key)
            return
        raw = msgspec.to_builtins(obj)
        state, message = rollout_verdict(kind, raw)
        record = self.workloads.get(key)
        if record is None:
            record = self.workloads[key] = _Workload(kind, meta.namespace, meta.name)
            seeded = self._seed_pending.pop(key, None)
            if seeded is not None:
                record.baseline = seeded - 1
                record.pending = seeded
            else:
                # First sight: a rollout already under way counts; a mere availability dip does not.
                record.baseline = meta.generation if state == DONE or not _spec_change(kind, raw) else -1
        record.generation = meta.generation
        record.state, record.message = state, message
        if state == DONE:
            if record.pending and meta.generation >= record.pending:
                done = Completed(key=key, generation=meta.generation)
                if done not in self.completed:
                    self.completed.append(done)
            record.pending = 0
            record.baseline = max(record.baseline, meta.generation)
            self._rolling.pop(key, None)
            return
        if meta.generation > record.baseline and _spec_change(kind, raw):
            record.pending = meta.generation
        self._rolling[key] = record

    def drop(self, key: str) -> None:
        del self.workloads[key]
        self._rolling.pop(key, None)

    def summary(self) -> tuple[RolloutView, ...]:
        """The rollouts under way as the `Summary` carries them."""
        return tuple(
            RolloutView(
                key=key,
                kind=w.kind,
                namespace=w.namespace,
                name=w.name,
                generation=w.generation,
                state=w.state,
                message=w.message,
                spec_change=bool(w.pending),
            )
            for key, w in sorted(self._rolling.items())
        )


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _spec_change(kind: str, raw: Mapping[str, Any]) -> bool:
    """Is a new spec rolling out (rather than pods of the current spec being unavailable)?"""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    if _int(meta.get("generation")) > _int(status.get("observedGeneration")):
        return True
    if kind == "Deployment":
        updated = _int(status.get("updatedReplicas"))
        return updated < _int(spec.get("replicas", 1)) or _int(status.get("replicas")) > updated
    if kind == "DaemonSet":
        return _int(status.get("updatedNumberScheduled")) < _int(status.get("desiredNumberScheduled"))
    if kind == "StatefulSet":
        current, update = status.get("currentRevision"), status.get("updateRevision")
        return bool(update) and update != current
    return False
