"""The known-issue rules over a watch: the Warning events some rule may match, the log tails the
rules asked for, and one episode per (rule, workload), opened, numbered and closed each time the
state is summarised (one thread post per episode). A `WatchState` owns one `KnownIssues` and hands
it the candidate pods; the rules themselves are `bot.core.rules`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from bot.core.kube.wire import WInvolvedObject
from bot.core.rules import EventRecord, PodState, RuleHit, match_rules
from bot.core.rules.known import RuleNeeds, watch_key
from bot.core.watches.parts import _Episode, _Pod
from bot.core.watches.summary import LogRequest, RuleEpisode
from bot.errors import clip


class _RuleEpisode(_Episode):
    __slots__ = ("evidence", "remedy")

    def __init__(self) -> None:
        super().__init__()
        self.evidence = ""
        self.remedy = ""


class _RuleEvent:
    """A Warning event some rule may match, kept while it is recent (`RULE_EVENT_CURRENT`)."""

    __slots__ = ("pod_uid", "record", "seen")

    def __init__(self, record: EventRecord, pod_uid: str, seen: datetime) -> None:
        self.record = record
        self.pod_uid = pod_uid
        self.seen = seen


#: A known issue's filled remedy is kept (and posted) up to this long.
MAX_REMEDY = 2000
#: A matching Warning event keeps its rule's episode open this long after it was last seen.
RULE_EVENT_CURRENT = timedelta(minutes=5)
#: At most this many matching events are kept (an event storm is the same few problems).
RULE_EVENTS_KEPT = 5_000


class KnownIssues:
    """The rules' part of a watch's state (`WatchState` owns it; one driver thread owns both)."""

    def __init__(self, needs: RuleNeeds | None, *, version: str = "") -> None:
        self.needs = needs
        #: The upgrade's target minor ("1.25"), for a remedy's `{version}` (the watch's target).
        self.version = version
        self.events: dict[str, _RuleEvent] = {}
        self.episodes: dict[tuple[str, str], _RuleEpisode] = {}
        self._tails: dict[tuple[str, str], str] = {}  # (rules' workload, container) → log tail
        self._log_wanted: list[LogRequest] = []

    def seed(self, previous: Iterable[RuleEpisode]) -> None:
        """Carry the rules' episode numbers and open episodes over a restart."""
        for rep in previous:
            rstate = self.episodes.setdefault((rep.rule, rep.workload), _RuleEpisode())
            rstate.number = rep.number
            rstate.since = rep.since
            rstate.ended = rep.ended
            rstate.carried = rep.open
            rstate.evidence = rep.evidence
            rstate.remedy = rep.remedy

    def event(
        self,
        key: str,
        *,
        namespace: str | None,
        involved: WInvolvedObject | None,
        reason: str,
        message: str,
        seen: datetime,
    ) -> None:
        """A Warning event (`key`: its uid): kept while it is recent if some rule may match it."""
        needs = self.needs
        if (
            needs is not None
            and (key in self.events or len(self.events) < RULE_EVENTS_KEPT)
            and needs.event_wanted(reason, message)
        ):
            self.events[key] = _RuleEvent(
                EventRecord(
                    namespace=namespace or "",
                    kind=(involved.kind if involved else None) or "",
                    name=(involved.name if involved else None) or "",
                    reason=reason,
                    message=message,
                    type="Warning",
                ),
                (involved.uid if involved else None) or "",
                seen,
            )

    def logs_wanted(self) -> list[LogRequest]:
        """The container log tails the last summary's rules asked for and nobody read yet."""
        return list(self._log_wanted)

    def add_log_tail(self, workload: str, container: str, text: str) -> None:
        """A tail the driver read (or "" when it could not): kept for the workload while it stays a
        candidate, so its log is read once per candidacy, not at every summary."""
        self._tails[(workload, container)] = text
        self._log_wanted = [r for r in self._log_wanted if (r.workload, r.container) != (workload, container)]

    def _with_tails(self, pods: list[PodState]) -> list[PodState]:
        if not self._tails:
            return pods
        attached: set[tuple[str, str]] = set()
        out = []
        for pod in pods:
            changed = False
            containers = []
            for c in pod.containers:
                key = (pod.workload, c.name)
                tail = self._tails.get(key)
                if tail and key not in attached:
                    attached.add(key)  # one pod of the workload carries it: the hit is per workload
                    c = dataclasses.replace(c, log_tail=tail)
                    changed = True
                containers.append(c)
            out.append(dataclasses.replace(pod, containers=tuple(containers)) if changed else pod)
        return out

    def evaluate(
        self,
        pods: list[PodState],
        now: datetime,
        *,
        remembered: Mapping[str, _Pod],
        scoped: set[str] | None,
        scoped_nodes: set[str],
    ) -> None:
        """Match the rules against the candidates `pods` and the recent matching events; open and
        close the rules' episodes (one thread post per rule, workload and episode). `remembered`:
        the state's unhealthy pods by key; `scoped`: the pods in a node-group view (None: no such
        view), `scoped_nodes` that view's nodes."""
        assert self.needs is not None
        workloads = {p.workload for p in pods}
        # A workload that is no longer a candidate has its tails forgotten: read again next time.
        for key in [k for k in self._tails if k[0] not in workloads]:
            del self._tails[key]
        wanted: dict[tuple[str, str], LogRequest] = {}
        for pod in pods:
            for rule in self.needs.log_rules:
                assert rule.match.log is not None
                for container in rule.log_wanted(pod):
                    key = (pod.workload, container)
                    if key in self._tails:
                        continue
                    lines = rule.match.log.lines
                    have = wanted.get(key)
                    if have is None or have.lines < lines:
                        wanted[key] = LogRequest(
                            workload=pod.workload,
                            namespace=pod.namespace,
                            pod=pod.name,
                            container=container,
                            lines=max(lines, have.lines if have else 0),
                        )
        self._log_wanted = list(wanted.values())
        pods = self._with_tails(pods)
        candidates = {(p.namespace, p.name) for p in pods}
        events: list[EventRecord] = []
        for uid in [k for k, e in self.events.items() if now - e.seen > RULE_EVENT_CURRENT]:
            del self.events[uid]
        for ev in self.events.values():
            record = ev.record
            if scoped is not None and (
                (record.kind == "Pod" and ev.pod_uid not in scoped)
                or (record.kind == "Node" and record.name not in scoped_nodes)
            ):
                continue  # about a pod or node outside the node groups' view
            known = remembered.get(ev.pod_uid) if ev.pod_uid else None
            if known is not None and (record.namespace, record.name) not in candidates:
                # About a pod the watch remembers but the rules do not look at yet (a pod
                # ContainerCreating behind a Multi-Attach): the finding is its workload's.
                _ns, kind, name = known.workload.split("/", 2)
                record = dataclasses.replace(record, kind=kind, name=name)
            events.append(record)
        hits = match_rules(self.needs.rules, pods, events) if pods or events else []
        current: dict[tuple[str, str], tuple[int, RuleHit]] = {}
        for hit in hits:
            current[(hit.rule.id, watch_key(hit.workload))] = (len(hit.pods), hit)
        for key, (count, hit) in current.items():
            state = self.episodes.get(key)
            if state is None:
                state = self.episodes[key] = _RuleEpisode()
            state.pods = count
            if state.begin(now):
                state.evidence = hit.evidence
                # Its remedy with the pods, their nodes, the container and the target filled in, as
                # `check` and the drain give it (a watch post said `<pod>`, `<node>` before).
                state.remedy = clip(hit.remedy(version=self.version), MAX_REMEDY)
        for key, state in self.episodes.items():
            if key not in current:
                state.end(now)

    def summary(self) -> tuple[RuleEpisode, ...]:
        """The rules' episodes as the `Summary` carries them."""
        return tuple(
            RuleEpisode(
                rule=rule,
                workload=workload,
                number=s.number,
                since=s.since,
                open=s.open or s.carried,
                pods=s.pods,
                evidence=s.evidence,
                remedy=s.remedy,
                ended=s.ended,
            )
            for (rule, workload), s in sorted(self.episodes.items())
            if s.since is not None and s.number > 0
        )
