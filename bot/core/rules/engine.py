"""The engine: every rule against every pod and the events about them, and episodes over repeated
evaluations.

`match_rules` is a pure function over `PodState`s and `EventRecord`s, so `check`, `diagnose` and
the rollout stream share it. It yields one `RuleHit` per (rule, workload): pods of one Deployment
that all show the problem are one hit naming them, never one message per pod, and nothing is keyed
on text (a message that changes with a timestamp does not make a new hit). Each rule's full test
runs only on its candidates (`bot.core.rules.signals`). `Episodes` turns repeated evaluations (the
stream) into one report per (rule, workload, episode): an episode ends when the rule stops matching
that workload for `quiet` time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from bot.core.kube.objects import ready_count
from bot.core.rules.model import (
    ContainerView,
    EventMatch,
    EventRecord,
    Match,
    PodState,
    Rule,
    RuleHit,
    _container_ok,
    _last_lines,
    _pod_level,
)
from bot.core.rules.patterns import MatchBudget
from bot.core.rules.signals import _Candidates
from bot.core.safetext import printable


def _event_ok(m: EventMatch, e: EventRecord) -> bool:
    if m.reasons and e.reason not in m.reasons:
        return False
    return m.message is None or m.message.search(e.message) is not None


def _first_event(
    m: EventMatch, events: Iterable[EventRecord], budget: MatchBudget, rule_id: str
) -> EventRecord | None:
    """The first of `events` that `m` matches; with a message pattern, the budget is asked between
    two events (a pod can have thousands), and a spent one ends the search as "none"."""
    for e in events:
        if m.message is not None and not budget.left():
            budget.cut.add(rule_id)
            return None
        if _event_ok(m, e):
            return e
    return None


def _first_log_line(m: Match, c: ContainerView) -> str:
    if m.log is None:
        return ""
    found = m.log.regex.search(_last_lines(c.log_tail, m.log.lines), keep_end=True)
    if found is None:
        return ""
    line, start = found.line, found.line_start
    if len(line.strip()) <= LOG_EVIDENCE:
        return f"{c.name} log: {line.strip()}"
    # A long line: at most LOG_EVIDENCE characters that end with what the pattern matched (a cut
    # at the 200th character left "…read-only f" and lost the match), in whole words, marked "…"
    # where cut.
    matched_from, matched_to = found.start - start, found.end - start
    upto = max(matched_to, LOG_EVIDENCE)
    if upto < len(line):
        space = line.rfind(" ", matched_to, upto)
        upto = space if space > 0 else upto
    since = max(0, upto - LOG_EVIDENCE)
    if since > 0:
        space = line.find(" ", since, max(matched_from, since))
        since = space + 1 if space >= 0 else since
    cut_before = "…" if since > 0 else ""
    cut_after = "…" if line[upto:].strip() else ""
    return f"{c.name} log: {cut_before}{line[since:upto].strip()}{cut_after}"


#: Characters of a log line shown as a finding's evidence.
LOG_EVIDENCE = 200


#: Characters of an event's message shown as a finding's evidence.
EVENT_EVIDENCE = 200


def _event_evidence(m: EventMatch, e: EventRecord) -> str:
    """`event REASON: message`, at most `EVENT_EVIDENCE` characters of it: the start, or — when
    the pattern matched further on (a CNI's "failed to assign an IP address" after a long
    "Failed to create pod sandbox: rpc error: …") — the part that ends with the match."""
    text = e.message
    if len(text) > EVENT_EVIDENCE and m.message is not None:
        found = m.message.search(text)
        if found is not None and found.text is text and found.end > EVENT_EVIDENCE:
            end = min(len(text), found.end + 40)
            return f"event {e.reason}: …{text[max(end - EVENT_EVIDENCE, 0) : end]}" + (
                "…" if end < len(text) else ""
            )
    return f"event {e.reason}: {text[:EVENT_EVIDENCE]}"


def _evidence(m: Match, pod: PodState, c: ContainerView | None) -> str:
    if c is None:
        return "deleting on a NotReady node" if m.node_not_ready else ""
    if m.log is not None:
        return _first_log_line(m, c)
    if m.waiting_reasons:
        return f"{c.name} waiting: {c.waiting}"
    if m.terminated_reasons:
        return f"{c.name} terminated: {c.terminated}"
    if m.not_ready:
        ready, total = ready_count((x.kind, x.ready) for x in pod.containers)
        return f"{ready}/{total} containers ready ({c.name} is not)"
    return ""


def match_rules(
    rules: Sequence[Rule],
    pod_states: Iterable[PodState],
    events: Iterable[EventRecord] = (),
    now: datetime | None = None,
    *,
    budget: MatchBudget | None = None,
) -> list[RuleHit]:
    """Every rule against every pod (and the events about them): one hit per (rule, workload).

    `now` is accepted for the stream's callers (episodes are theirs: see `Episodes`); matching
    itself looks only at the states given. Hits come back sorted by (rule id, workload); a hit's
    evidence is that of its first pod in the order given.

    The patterns' matching runs on `budget` (a fresh default one when None): between two pods or
    events a rule with a pattern asks it, and once it is spent the rule stops and is recorded in
    `budget.cut` (the caller reports it); rules without patterns always finish (they are cheap).
    """
    del now
    if budget is None:
        budget = MatchBudget()
    with budget.running():
        return _match_rules(rules, pod_states, events, budget)


def _has_pattern(m: Match) -> bool:
    return (
        m.images is not None or m.log is not None or (m.events is not None and m.events.message is not None)
    )


def _match_rules(
    rules: Sequence[Rule],
    pod_states: Iterable[PodState],
    events: Iterable[EventRecord],
    budget: MatchBudget,
) -> list[RuleHit]:
    pods = pod_states if isinstance(pod_states, list | tuple) else list(pod_states)
    by_pod: dict[tuple[str, str], list[EventRecord]] = {}
    if any(r.match.events is not None for r in rules):
        for e in events:
            by_pod.setdefault((e.namespace, e.name), []).append(e)
    candidates = _Candidates(pods, by_pod)
    #: (rule id, workload) → rule, namespace, pod → node, evidence, the matched container
    found: dict[tuple[str, str], tuple[Rule, str, dict[str, str], str, str]] = {}
    for rule in rules:
        m = rule.match
        patterned = _has_pattern(m)
        if patterned and not budget.left():
            budget.cut.add(rule.id)
            continue
        for pod in candidates.of(m):
            if not _pod_level(m, pod):
                continue
            if patterned and not budget.left():
                budget.cut.add(rule.id)
                break
            hit = None
            if m.container_level:
                hit = next((c for c in pod.containers if _container_ok(m, c)), None)
                if hit is None:
                    continue
            seen = None
            if m.events is not None:
                seen = _first_event(m.events, by_pod.get((pod.namespace, pod.name), ()), budget, rule.id)
                if seen is None:
                    continue
            key = (rule.id, pod.workload)
            entry = found.get(key)
            if entry is not None:
                entry[2][pod.name] = pod.node
                continue
            # The evidence is the first pod's (the others' is never shown).
            evidence = _evidence(m, pod, hit) if m.container_level or seen is None else ""
            if seen is not None and m.events is not None:
                evidence = evidence or _event_evidence(m.events, seen)
            found[key] = (rule, pod.namespace, {pod.name: pod.node}, evidence, hit.name if hit else "")
        if m.events is not None and by_pod and not m.container_level and not _has_pod_filters(m):
            # Events about objects that are not (or no longer) pods: a node, a PDB, a pod gone.
            known = candidates.with_events()
            for (ns, name), evs in by_pod.items():
                if (ns, name) in known:
                    continue
                if patterned and not budget.left():
                    budget.cut.add(rule.id)
                    break
                ev = _first_event(m.events, evs, budget, rule.id)
                if ev is None:
                    continue
                key = (rule.id, f"{ev.kind} {ns}/{name}" if ns else f"{ev.kind} {name}")
                if key not in found:
                    found[key] = (rule, ns, {}, _event_evidence(m.events, ev), "")
    return [
        RuleHit(
            rule=r,
            workload=key[1],
            namespace=ns,
            pods=tuple(sorted(placed)),
            # One line, whatever the cluster wrote: an event's message or a log line quoted as
            # evidence never opens lines of its own in a post ("*What to do*" of its own making).
            evidence=printable(ev, multiline=False),
            container=container,
            nodes=tuple(sorted((p, n) for p, n in placed.items() if n)),
        )
        for key, (r, ns, placed, ev, container) in sorted(found.items())
    ]


def _has_pod_filters(m: Match) -> bool:
    return bool(
        m.namespaces
        or m.kinds
        or m.tolerates_all_taints
        or m.labels
        or m.annotations
        or m.deleting
        or m.node_not_ready
    )


class Episodes:
    """One report per (rule, workload, episode) over repeated evaluations (the rollout stream).

    A (rule, workload) seen again within `quiet` of its last sighting is the same episode and is
    not reported again; one silent for longer has ended, and its next sighting starts a new one.
    """

    def __init__(self, quiet: timedelta = timedelta(minutes=10)) -> None:
        self.quiet = quiet
        self._last: dict[tuple[str, str], datetime] = {}
        self._started: dict[tuple[str, str], datetime] = {}

    def new(self, hits: Iterable[RuleHit], now: datetime) -> list[tuple[RuleHit, datetime]]:
        """The hits that open a new episode, each with the episode's start (its key's third part)."""
        out: list[tuple[RuleHit, datetime]] = []
        for hit in hits:
            last = self._last.get(hit.key)
            if last is None or now - last > self.quiet:
                self._started[hit.key] = now
                out.append((hit, now))
            self._last[hit.key] = now
        return out
