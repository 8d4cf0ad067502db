"""Which pods can match a rule: the signals a pod shows, the `Screen` that drops the pods no rule
can match, and the candidates each rule's full test runs on.

Speed: a rule can only match a pod that shows every *signal* it requires (being deleted, a
container not ready or waiting, a log tail read, events…; `required_signals`), and most pods show
none. `match_rules` runs each rule's full test only on the pods that show its rarest signal (one
comprehension over the pods per signal, shared by the rules: `_Candidates`), so the regular
expressions run on a few pods; the gatherer's `Screen` drops the pods no rule can match before a
`PodState` is built (150,000 pods' states in a tenth of a second; `benchmarks/bench_check.py`
measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from functools import cached_property

from bot.core.rules.model import ContainerView, Match, PodState, Rule

#: What a pod shows that a rule may require, one bit each. A rule can match a pod only if the pod
#: shows every signal the rule requires (`required_signals`); a healthy pod shows almost none, so
#: the gatherer builds a `PodState` only for the pods a `Screen` lets through, and `match_rules`
#: runs each rule's full test only on the pods that show its most selective signal.
DELETING = 1 << 0
NODE_NOT_READY = 1 << 1
TOLERATES_ALL = 1 << 2
IN_NAMESPACE = 1 << 3  # in a namespace some rule names
LABELLED = 1 << 4  # carries a label key some rule names
ANNOTATED = 1 << 5  # carries an annotation key some rule names
NAMED_CONTAINER = 1 << 6  # has a container (status) some rule names
CONTAINER_NOT_READY = 1 << 7
WAITING = 1 << 8  # a container waiting with a reason
TERMINATED = 1 << 9  # a container terminated with a reason (now, else in its last state)
LOGGED = 1 << 10  # a container's log tail was read
EVENTS = 1 << 11  # there are events about the pod
#: Its workload's kind (Deployment, DaemonSet…) is one some rule names (`kinds`). Not in
#: `_RAREST_FIRST`: most pods have such a kind, so it only screens (10,000 DaemonSet pods that
#: tolerate every taint are no candidates for a rule about Deployments that do).
IN_KIND = 1 << 12
#: Every signal: `Screen.table` has an entry for each set of them.
ALL_SIGNALS = (1 << 13) - 1

#: The order in which `match_rules` picks a rule's signal to find its candidates: the rarest first
#: on a cluster where most pods are healthy.
_RAREST_FIRST = (
    DELETING,
    NODE_NOT_READY,
    TOLERATES_ALL,
    LOGGED,
    WAITING,
    TERMINATED,
    CONTAINER_NOT_READY,
    EVENTS,
    IN_NAMESPACE,
    ANNOTATED,
    LABELLED,
    NAMED_CONTAINER,
)


#: Each condition of a rule's match that a pod can only meet by showing a signal, and that signal.
_REQUIRES: tuple[tuple[int, Callable[[Match], object]], ...] = (
    (DELETING, lambda m: m.deleting),
    (NODE_NOT_READY, lambda m: m.node_not_ready),
    (TOLERATES_ALL, lambda m: m.tolerates_all_taints),
    (IN_NAMESPACE, lambda m: m.namespaces),
    (IN_KIND, lambda m: m.kinds),
    (LABELLED, lambda m: m.labels),
    (ANNOTATED, lambda m: m.annotations),
    (NAMED_CONTAINER, lambda m: m.containers),
    (CONTAINER_NOT_READY, lambda m: m.not_ready),
    # A reason list that holds "" also matches a container with no reason.
    (WAITING, lambda m: m.waiting_reasons and "" not in m.waiting_reasons),
    (TERMINATED, lambda m: m.terminated_reasons and "" not in m.terminated_reasons),
    (LOGGED, lambda m: m.log is not None),
    (EVENTS, lambda m: m.events is not None),
)
#: The signals a pod shows by itself, whatever the rules name, and the test of each.
_POD_SIGNALS: Mapping[int, Callable[[PodState], object]] = {
    DELETING: lambda p: p.deleting,
    NODE_NOT_READY: lambda p: not p.node_ready,
    TOLERATES_ALL: lambda p: p.tolerates_all,
}
#: The signals a pod shows when one of its containers does, and the test of each.
_CONTAINER_SIGNALS: Mapping[int, Callable[[ContainerView], object]] = {
    CONTAINER_NOT_READY: lambda c: not c.ready,
    WAITING: lambda c: c.waiting,
    TERMINATED: lambda c: c.terminated,
    LOGGED: lambda c: c.log_tail,
}


def required_signals(m: Match) -> int:
    """The signals a pod must show for `m` to match it (0: none can be told in advance)."""
    need = 0
    for signal, requires in _REQUIRES:
        if requires(m):
            need |= signal
    return need


class Screen:
    """Which pods are worth a `PodState` for these rules, told from a few cheap signals.

    `wants(signals)` is false only for a pod that no rule can match (it lacks a signal every
    rule requires), so dropping those pods changes no hit. `signals` is the reference over a
    `PodState`; the gatherer computes the same bits from the wire structs without building one.
    """

    def __init__(self, rules: Sequence[Rule]) -> None:
        matches = [r.match for r in rules]
        self.needs = tuple(sorted({required_signals(m) for m in matches}))
        #: Some rule requires nothing that can be told in advance: every pod is a candidate.
        self.every_pod = 0 in self.needs
        self.used = 0
        for need in self.needs:
            self.used |= need
        self.namespaces: frozenset[str] = frozenset().union(*(m.namespaces for m in matches))
        self.kinds: frozenset[str] = frozenset().union(*(m.kinds for m in matches))
        #: "Kind " of each of `kinds`: how a workload ("Deployment ns/name") starts when its kind is one.
        self.kind_prefixes: tuple[str, ...] = tuple(f"{k} " for k in sorted(self.kinds))
        self.label_keys: frozenset[str] = frozenset(k for m in matches for k in m.labels)
        self.annotation_keys: frozenset[str] = frozenset(k for m in matches for k in m.annotations)
        self.containers: frozenset[str] = frozenset().union(*(m.containers for m in matches))
        self._wanted: dict[int, bool] = {}

    @cached_property
    def table(self) -> bytes:
        """`wants` of every set of signals, indexed by it (a byte each): one index per pod where
        a call per pod costs more than the test. Built by marking the sets that hold each rule's
        required signals (each one's supersets, walked as the submasks of the other bits)."""
        table = bytearray(ALL_SIGNALS + 1)
        for need in self.needs:
            free = ALL_SIGNALS & ~need
            extra = free
            while True:
                table[need | extra] = 1
                if not extra:
                    break
                extra = (extra - 1) & free
        return bytes(table)

    def wants(self, signals: int) -> bool:
        """Whether some rule may match a pod showing `signals`."""
        known = self._wanted.get(signals)
        if known is None:
            known = self._wanted[signals] = any(need & signals == need for need in self.needs)
        return known

    def signals(self, pod: PodState, events: Container[tuple[str, str]] = ()) -> int:
        """The signals `pod` shows (only those some rule requires); `events` holds the
        (namespace, name) of the pods that have events."""
        used, out = self.used, 0
        for signal, shows in _POD_SIGNALS.items():
            if shows(pod):
                out |= signal
        if pod.namespace in self.namespaces:
            out |= IN_NAMESPACE
        if pod.workload.split(" ", 1)[0] in self.kinds:
            out |= IN_KIND
        if any(k in pod.labels for k in self.label_keys):
            out |= LABELLED
        if any(k in pod.annotations for k in self.annotation_keys):
            out |= ANNOTATED
        for c in pod.containers:
            if c.name in self.containers:
                out |= NAMED_CONTAINER
            for signal, container_shows in _CONTAINER_SIGNALS.items():
                if container_shows(c):
                    out |= signal
        if (pod.namespace, pod.name) in events:
            out |= EVENTS
        return out & used


class _Candidates:
    """For each rule, the pods that show its rarest required signal (see `_RAREST_FIRST`), in the
    order given: the full match then runs on those alone. Each list is one comprehension over the
    pods, built the first time a rule asks for it (the container signals share one pass over every
    container); a rule that requires no signal gets every pod."""

    def __init__(self, pods: Sequence[PodState], events: Mapping[tuple[str, str], object]) -> None:
        self.pods = pods
        self.events = events
        self._lists: dict[object, Sequence[PodState]] = {}
        self._with_events: set[tuple[str, str]] | None = None
        self._trouble: list[PodState] | None = None

    def of(self, m: Match) -> Sequence[PodState]:
        need = required_signals(m)
        signal = next((s for s in _RAREST_FIRST if need & s), 0)
        if not signal:
            return self.pods
        key: object = signal
        if signal == IN_NAMESPACE:
            key = m.namespaces
        elif signal == ANNOTATED:
            key = ("annotation", min(m.annotations))
        elif signal == LABELLED:
            key = ("label", min(m.labels))
        elif signal == NAMED_CONTAINER:
            key = ("containers", m.containers)
        return self._list(key, signal, m)

    def with_events(self) -> set[tuple[str, str]]:
        """The (namespace, name) of the pods given that have events."""
        if self._with_events is None:
            self._with_events = {(p.namespace, p.name) for p in self._list(EVENTS, EVENTS, None)}
        return self._with_events

    def _list(self, key: object, signal: int, m: Match | None) -> Sequence[PodState]:
        have = self._lists.get(key)
        if have is None:
            have = self._lists[key] = self._build(signal, m)
        return have

    def _build(self, signal: int, m: Match | None) -> Sequence[PodState]:
        # One comprehension per signal, its test inline: a call per pod would double the time of
        # a list over every pod (these run on every pod a rule may match, not only the troubled).
        pods = self.pods
        if signal == DELETING:
            return [p for p in pods if p.deleting]
        if signal == NODE_NOT_READY:
            return [p for p in pods if not p.node_ready]
        if signal == TOLERATES_ALL:
            return [p for p in pods if p.tolerates_all]
        if signal == EVENTS:
            events = self.events
            return [p for p in pods if (p.namespace, p.name) in events] if events else []
        container_shows = _CONTAINER_SIGNALS.get(signal)
        if container_shows is not None:
            # The troubled pods are few: one call per container of theirs costs nothing.
            return _once([p for p in self._troubled() for c in p.containers if container_shows(c)])
        assert m is not None
        if signal == IN_NAMESPACE:
            namespaces = m.namespaces
            return [p for p in pods if p.namespace in namespaces]
        if signal == ANNOTATED:
            key = min(m.annotations)
            return [p for p in pods if key in p.annotations]
        if signal == LABELLED:
            key = min(m.labels)
            return [p for p in pods if key in p.labels]
        names = m.containers
        return _once([p for p in pods for c in p.containers if c.name in names])

    def _troubled(self) -> list[PodState]:
        """The pods with a container not ready, waiting, terminated or with a log tail: one pass
        over every container, shared by the four container signals."""
        if self._trouble is None:
            self._trouble = _once(
                [
                    p
                    for p in self.pods
                    for c in p.containers
                    if not c.ready or c.waiting or c.terminated or c.log_tail
                ]
            )
        return self._trouble


def _once(pods: list[PodState]) -> list[PodState]:
    """`pods` without the repeats a per-container comprehension makes (they are adjacent)."""
    out: list[PodState] = []
    last: PodState | None = None
    for p in pods:
        if p is not last:
            out.append(p)
            last = p
    return out
