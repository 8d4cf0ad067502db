"""Known-issue rules as data: the rules file, its validation, and the engine that matches pods.

A rule is a known problem seen in past upgrades (the runbooks' "Known issues" sections): a stable
id, a match over what the cluster shows (container waiting/terminated reasons, container names,
labels and annotations, readiness, deletion on a NotReady node, events with their reasons and
messages, a regular expression over a bounded tail of a container's log), and what to tell people:
title, explanation, remediation (commands as text), links to the public evidence, and optionally
the versions that fixed it. The shipped rules are `templates/rules/known-issues.yaml`; a team adds
rules or overrides shipped ones by id through the `rules_files` setting (later files win).

The engine, `match_rules`, is a pure function over `PodState`s and `EventRecord`s, so `check`,
`diagnose` and the rollout stream share it. It yields one `RuleHit` per (rule, workload): pods of
one Deployment that all show the problem are one hit naming them, never one message per pod, and
nothing is keyed on text (a message that changes with a timestamp does not make a new hit).
`Episodes` turns repeated evaluations (the stream) into one report per (rule, workload, episode):
an episode ends when the rule stops matching that workload for `quiet` time.

Speed: rules are compiled once; each pod is looked at through a few dict and set lookups, and
the regular expressions only run on the pods that pass every cheaper test (150,000 pods in well
under a second; `benchmarks/bench_check.py` measures it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding
from bot.core.validation import YamlValidator, compose_document, read_document, shown
from bot.errors import ConfigError

#: A rules file is a few hundred rules at most.
MAX_RULES_BYTES = 512 * 1024
#: The most log lines a rule may ask for: logs are read per container, on demand.
MAX_LOG_LINES = 500
DEFAULT_LOG_LINES = 100
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*-?[0-9]{3}$")

# ----- what the engine looks at -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerView:
    """One container of a pod as a rule sees it; `log_tail` only when a rule asked for the log."""

    name: str
    image: str = ""
    ready: bool = True
    waiting: str = ""
    terminated: str = ""  # the current state's reason, else the last state's
    log_tail: str = ""


@dataclass(frozen=True, slots=True)
class PodState:
    namespace: str
    name: str
    workload: str  # "Deployment payments/payments-worker", or "Pod ns/name" without a controller
    node: str = ""
    phase: str = ""
    deleting: bool = False
    node_ready: bool = True
    #: a toleration with no key and operator Exists: the pod tolerates every taint, cordons included
    tolerates_all: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerView, ...] = ()


@dataclass(frozen=True, slots=True)
class EventRecord:
    namespace: str
    kind: str
    name: str
    reason: str
    message: str
    type: str = ""
    last_seen: str = ""


# ----- the rule ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LogMatch:
    regex: re.Pattern[str]
    lines: int = DEFAULT_LOG_LINES


@dataclass(frozen=True, kw_only=True)
class EventMatch:
    reasons: frozenset[str] = frozenset()
    message: re.Pattern[str] | None = None


@dataclass(frozen=True, kw_only=True)
class Match:
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()  # the workload's kind: Deployment, StatefulSet, DaemonSet, Pod…
    tolerates_all_taints: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)  # value "*": the key is there
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: frozenset[str] = frozenset()
    images: re.Pattern[str] | None = None
    waiting_reasons: frozenset[str] = frozenset()
    terminated_reasons: frozenset[str] = frozenset()
    not_ready: bool = False  # a matched container (any, without `containers`) is not ready
    deleting: bool = False
    node_not_ready: bool = False
    events: EventMatch | None = None
    log: LogMatch | None = None

    @property
    def container_level(self) -> bool:
        return bool(
            self.containers
            or self.images
            or self.waiting_reasons
            or self.terminated_reasons
            or self.not_ready
            or self.log
        )


@dataclass(frozen=True, kw_only=True)
class Rule:
    id: str
    title: str
    severity: str
    match: Match
    explanation: str
    remediation: str
    links: tuple[str, ...]
    fixed_in: tuple[str, ...] = ()
    source: str = ""  # file:line it came from

    def log_wanted(self, pod: PodState) -> tuple[str, ...]:
        """The containers of `pod` whose log tail this rule needs (empty: none, or not a candidate)."""
        if self.match.log is None or not _pod_level(self.match, pod):
            return ()
        return tuple(c.name for c in pod.containers if _container_ok(self.match, c, with_log=False))


@dataclass(frozen=True, kw_only=True)
class RuleHit:
    rule: Rule
    workload: str
    namespace: str
    pods: tuple[str, ...]
    evidence: str  # the first matched signal, for the report (never part of a key)

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule.id, self.workload)

    def finding(self) -> Finding:
        r = self.rule
        objects = (self.workload, *(f"Pod {self.namespace}/{p}" for p in self.pods[:5]))
        if len(self.pods) > 5:
            objects = (*objects, f"… and {len(self.pods) - 5} more pods")
        fix = r.remediation.strip()
        if r.fixed_in:
            fix += "\nFixed in: " + ", ".join(r.fixed_in)
        if r.links:
            fix += "\nEvidence: " + " ".join(r.links)
        return Finding(
            id=r.id,
            severity=r.severity,
            title=r.title,
            objects=objects,
            why=r.explanation.strip() + (f"\nSeen: {self.evidence}" if self.evidence else ""),
            fix=fix,
            source=f"known-issue rule {r.id} ({r.source})" if r.source else f"known-issue rule {r.id}",
        )


# ----- the engine -----------------------------------------------------------------------------------


def _pod_level(m: Match, pod: PodState) -> bool:
    if m.namespaces and pod.namespace not in m.namespaces:
        return False
    if m.kinds and pod.workload.split(" ", 1)[0] not in m.kinds:
        return False
    if m.tolerates_all_taints and not pod.tolerates_all:
        return False
    if m.deleting and not pod.deleting:
        return False
    if m.node_not_ready and pod.node_ready:
        return False
    for key, want in m.labels.items():
        have = pod.labels.get(key)
        if have is None or (want != "*" and have != want):
            return False
    for key, want in m.annotations.items():
        have = pod.annotations.get(key)
        if have is None or (want != "*" and have != want):
            return False
    return True


def _container_ok(m: Match, c: ContainerView, *, with_log: bool = True) -> bool:
    if m.containers and c.name not in m.containers:
        return False
    if m.images is not None and not m.images.search(c.image):
        return False
    if m.waiting_reasons and c.waiting not in m.waiting_reasons:
        return False
    if m.terminated_reasons and c.terminated not in m.terminated_reasons:
        return False
    if m.not_ready and c.ready:
        return False
    if with_log and m.log is not None:
        # One search over the tail's last lines (the pattern is compiled MULTILINE, and `.` does
        # not cross a newline, so a match is still within one line).
        return bool(c.log_tail) and m.log.regex.search(_last_lines(c.log_tail, m.log.lines)) is not None
    return True


def _last_lines(text: str, n: int) -> str:
    cut = len(text.rstrip("\n"))
    for _ in range(n):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return text
    return text[cut + 1 :]


def _event_ok(m: EventMatch, e: EventRecord) -> bool:
    if m.reasons and e.reason not in m.reasons:
        return False
    return m.message is None or bool(m.message.search(e.message))


def _first_log_line(m: Match, c: ContainerView) -> str:
    if m.log is None:
        return ""
    found = m.log.regex.search(_last_lines(c.log_tail, m.log.lines))
    if found is None:
        return ""
    text = found.string
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return f"{c.name} log: {text[start : end if end >= 0 else len(text)].strip()[:200]}"


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
        ready = sum(1 for x in pod.containers if x.ready)
        return f"{ready}/{len(pod.containers)} containers ready ({c.name} is not)"
    return ""


def match_rules(
    rules: Sequence[Rule],
    pod_states: Iterable[PodState],
    events: Iterable[EventRecord] = (),
    now: datetime | None = None,
) -> list[RuleHit]:
    """Every rule against every pod (and the events about them): one hit per (rule, workload).

    `now` is accepted for the stream's callers (episodes are theirs: see `Episodes`); matching
    itself looks only at the states given. Hits come back sorted by (rule id, workload).
    """
    del now
    pods = pod_states if isinstance(pod_states, list | tuple) else list(pod_states)
    event_rules = [r for r in rules if r.match.events is not None]
    by_pod: dict[tuple[str, str], list[EventRecord]] = {}
    if event_rules:
        for e in events:
            by_pod.setdefault((e.namespace, e.name), []).append(e)
    index = _Index(pods, rules, by_pod)
    known: set[tuple[str, str]] | None = None
    found: dict[tuple[str, str], tuple[Rule, str, list[str], str]] = {}
    for rule in rules:
        m = rule.match
        for pod in index.candidates(m):
            if not _pod_level(m, pod):
                continue
            evidence = ""
            if m.container_level:
                hit = next((c for c in pod.containers if _container_ok(m, c)), None)
                if hit is None:
                    continue
                evidence = _evidence(m, pod, hit)
            elif m.events is None:
                evidence = _evidence(m, pod, None)
            if m.events is not None:
                seen = next(
                    (e for e in by_pod.get((pod.namespace, pod.name), ()) if _event_ok(m.events, e)), None
                )
                if seen is None:
                    continue
                evidence = evidence or f"event {seen.reason}: {seen.message[:200]}"
            key = (rule.id, pod.workload)
            entry = found.get(key)
            if entry is None:
                found[key] = (rule, pod.namespace, [pod.name], evidence)
            else:
                entry[2].append(pod.name)
        if m.events is not None and by_pod and not m.container_level and not _has_pod_filters(m):
            # Events about objects that are not (or no longer) pods: a node, a PDB, a pod gone.
            if known is None:
                known = {(p.namespace, p.name) for p in pods}
            for (ns, name), evs in by_pod.items():
                if (ns, name) in known:
                    continue
                ev = next((e for e in evs if _event_ok(m.events, e)), None)
                if ev is None:
                    continue
                key = (rule.id, f"{ev.kind} {ns}/{name}" if ns else f"{ev.kind} {name}")
                if key not in found:
                    found[key] = (rule, ns, [], f"event {ev.reason}: {ev.message[:200]}")
    return [
        RuleHit(rule=r, workload=key[1], namespace=ns, pods=tuple(sorted(names)), evidence=ev)
        for key, (r, ns, names, ev) in sorted(found.items())
    ]


class _Index:
    """One pass over the pods, so that each rule looks only at the pods that can match it: those of
    its namespaces, with one of its containers, being deleted, tolerating everything, with a log
    tail read, with events, or carrying a label or annotation it names. The smallest applicable
    list is the rule's candidates; the full match then runs on those alone."""

    def __init__(
        self, pods: Sequence[PodState], rules: Sequence[Rule], events: Mapping[tuple[str, str], object]
    ) -> None:
        self.pods = pods
        label_keys = {k for r in rules for k in r.match.labels}
        annotation_keys = {k for r in rules for k in r.match.annotations}
        self.by_ns: dict[str, list[PodState]] = {}
        self.by_container: dict[str, list[PodState]] = {}
        self.by_label: dict[str, list[PodState]] = {k: [] for k in label_keys}
        self.by_annotation: dict[str, list[PodState]] = {k: [] for k in annotation_keys}
        self.deleting: list[PodState] = []
        self.tolerant: list[PodState] = []
        self.not_ready: list[PodState] = []
        self.waiting: list[PodState] = []
        self.terminated: list[PodState] = []
        self.logged: list[PodState] = []
        self.with_events: list[PodState] = []
        for p in pods:
            self.by_ns.setdefault(p.namespace, []).append(p)
            logged = not_ready = waiting = terminated = False
            for c in p.containers:
                named = self.by_container.setdefault(c.name, [])
                if not named or named[-1] is not p:
                    named.append(p)
                logged = logged or bool(c.log_tail)
                not_ready = not_ready or not c.ready
                waiting = waiting or bool(c.waiting)
                terminated = terminated or bool(c.terminated)
            if logged:
                self.logged.append(p)
            if not_ready:
                self.not_ready.append(p)
            if waiting:
                self.waiting.append(p)
            if terminated:
                self.terminated.append(p)
            if p.deleting:
                self.deleting.append(p)
            if p.tolerates_all:
                self.tolerant.append(p)
            for k in label_keys:
                if k in p.labels:
                    self.by_label[k].append(p)
            for k in annotation_keys:
                if k in p.annotations:
                    self.by_annotation[k].append(p)
            if events and (p.namespace, p.name) in events:
                self.with_events.append(p)

    def candidates(self, m: Match) -> Sequence[PodState]:
        options: list[Sequence[PodState]] = [self.pods]
        if m.namespaces:
            options.append([p for ns in sorted(m.namespaces) for p in self.by_ns.get(ns, ())])
        if m.containers:
            names = sorted(m.containers)
            if len(names) == 1:
                options.append(self.by_container.get(names[0], []))
            else:
                union = {id(p): p for n in names for p in self.by_container.get(n, ())}
                options.append(list(union.values()))
        if m.deleting:
            options.append(self.deleting)
        if m.tolerates_all_taints:
            options.append(self.tolerant)
        if m.log is not None:
            options.append(self.logged)
        if m.not_ready:
            options.append(self.not_ready)
        if m.waiting_reasons:
            options.append(self.waiting)
        if m.terminated_reasons:
            options.append(self.terminated)
        if m.events is not None:
            options.append(self.with_events)
        options.extend(self.by_label[k] for k in m.labels)
        options.extend(self.by_annotation[k] for k in m.annotations)
        return min(options, key=len)


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


# ----- the rules file ------------------------------------------------------------------------------

_RULE_KEYS = {"id", "title", "severity", "match", "explanation", "remediation", "links", "fixed_in"}
_MATCH_KEYS = {
    "namespaces",
    "kinds",
    "tolerates_all_taints",
    "labels",
    "annotations",
    "containers",
    "images",
    "waiting_reasons",
    "terminated_reasons",
    "not_ready",
    "deleting",
    "node_not_ready",
    "events",
    "log",
}


class _RulesValidator(YamlValidator):
    def regex(self, node: yaml.Node | None, key: str) -> re.Pattern[str] | None:
        text = self.string(node, key)
        if text is None:
            return None
        if len(text) > 500:
            self.error(node, key, "a pattern longer than 500 characters is not a sensible rule")
            return None
        try:
            return re.compile(text, re.MULTILINE)
        except re.error as exc:
            self.error(node, key, f"{shown(text)} is not a regular expression: {exc}")
            return None

    def string_map(self, node: yaml.Node, key: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, vnode in self.mapping(node, key, None).items():
            value = self.string(vnode, f"{key}.{name}")
            if value is not None:
                out[name] = value
        return out

    def string_list(self, node: yaml.Node, key: str) -> frozenset[str]:
        values = self.strings(node, key)
        if isinstance(node, yaml.SequenceNode) and not values and not node.value:
            self.error(node, key, "an empty list matches nothing; leave the key out")
        return frozenset(values)

    def match(self, node: yaml.Node, key: str) -> Match | None:
        m = self.mapping(node, key, _MATCH_KEYS)
        if not m and isinstance(node, yaml.MappingNode):
            self.error(node, key, "a rule must match something")
            return None
        events = None
        if "events" in m:
            ev = self.mapping(m["events"], f"{key}.events", {"reasons", "message"})
            events = EventMatch(
                reasons=self.string_list(ev["reasons"], f"{key}.events.reasons")
                if "reasons" in ev
                else frozenset(),
                message=self.regex(ev.get("message"), f"{key}.events.message"),
            )
            if not events.reasons and events.message is None:
                self.error(m["events"], f"{key}.events", "give `reasons`, `message` or both")
        log = None
        if "log" in m:
            lg = self.mapping(m["log"], f"{key}.log", {"regex", "lines"})
            regex = self.regex(lg.get("regex"), f"{key}.log.regex")
            if "regex" not in lg:
                self.error(m["log"], f"{key}.log.regex", "required")
            lines = self.integer(lg.get("lines"), f"{key}.log.lines", low=1, high=MAX_LOG_LINES)
            if regex is not None:
                log = LogMatch(regex=regex, lines=lines or DEFAULT_LOG_LINES)

        def flag(name: str) -> bool:
            return bool(self.boolean(m.get(name), f"{key}.{name}")) if name in m else False

        def names(name: str) -> frozenset[str]:
            return self.string_list(m[name], f"{key}.{name}") if name in m else frozenset()

        return Match(
            namespaces=names("namespaces"),
            kinds=names("kinds"),
            tolerates_all_taints=flag("tolerates_all_taints"),
            labels=self.string_map(m["labels"], f"{key}.labels") if "labels" in m else {},
            annotations=self.string_map(m["annotations"], f"{key}.annotations") if "annotations" in m else {},
            containers=names("containers"),
            images=self.regex(m.get("images"), f"{key}.images"),
            waiting_reasons=names("waiting_reasons"),
            terminated_reasons=names("terminated_reasons"),
            not_ready=flag("not_ready"),
            deleting=flag("deleting"),
            node_not_ready=flag("node_not_ready"),
            events=events,
            log=log,
        )


def parse_rules(text: str, *, source: str) -> list[Rule]:
    """The rules of one file; a ConfigError naming file and line lists every problem found."""
    node = compose_document(text, source)
    v = _RulesValidator(source)
    if node is None:
        raise ConfigError(f"{source}: the file is empty (expected `rules:` with a list of rules)")
    top = v.mapping(node, "", {"rules"})
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    items = top.get("rules")
    if items is None:
        v.error(node, "rules", "required")
    elif not isinstance(items, yaml.SequenceNode):
        v.error(items, "rules", "expected a list of rules")
    else:
        for i, item in enumerate(items.value):
            key = f"rules[{i}]"
            r = v.mapping(item, key, _RULE_KEYS)
            for required in ("id", "title", "match", "explanation", "remediation", "links"):
                if required not in r and isinstance(item, yaml.MappingNode):
                    v.error(item, f"{key}.{required}", "required")
            rid = v.string(r.get("id"), f"{key}.id")
            if rid is not None:
                if not RULE_ID.match(rid):
                    v.error(
                        r["id"], f"{key}.id", f"{shown(rid)} is not an id like ISTIO001 (capitals, 3 digits)"
                    )
                elif rid in seen:
                    v.error(r["id"], f"{key}.id", f"{rid} is also the id of rules[{seen[rid]}]")
                seen.setdefault(rid, i)
            severity = v.string(r.get("severity"), f"{key}.severity") or RECOMMENDED
            if severity not in (REQUIRED, RECOMMENDED):
                v.error(r["severity"], f"{key}.severity", f"expected {REQUIRED} or {RECOMMENDED}")
            match = v.match(r["match"], f"{key}.match") if "match" in r else None
            links = v.strings(r["links"], f"{key}.links") if "links" in r else ()
            for j, link in enumerate(links):
                if not link.startswith("https://"):
                    v.error(r["links"].value[j], f"{key}.links[{j}]", "links are https:// URLs")
            if "links" in r and not links:
                v.error(r["links"], f"{key}.links", "a rule needs at least one link to its evidence")
            fixed = v.strings(r["fixed_in"], f"{key}.fixed_in") if "fixed_in" in r else ()
            title = v.string(r.get("title"), f"{key}.title")
            explanation = v.string(r.get("explanation"), f"{key}.explanation")
            remediation = v.string(r.get("remediation"), f"{key}.remediation")
            if rid and title and explanation and remediation and match is not None:
                rules.append(
                    Rule(
                        id=rid,
                        title=title,
                        severity=severity,
                        match=match,
                        explanation=explanation,
                        remediation=remediation,
                        links=links,
                        fixed_in=fixed,
                        source=f"{source}:{item.start_mark.line + 1}",
                    )
                )
    v.raise_if_errors()
    return rules


def read_rules(path: Path, *, label: str | None = None) -> list[Rule]:
    text = read_document(path, what="rules file", limit=MAX_RULES_BYTES, label=label)
    return parse_rules(text, source=label or str(path))


def load_rules(paths: Sequence[Path]) -> list[Rule]:
    """The rules of every file in order; a later rule with the same id replaces the earlier one."""
    by_id: dict[str, Rule] = {}
    for path in paths:
        try:
            found = read_rules(path)
        except FileNotFoundError:
            raise ConfigError(f"{path}: rules file not found") from None
        for rule in found:
            by_id[rule.id] = rule
    return sorted(by_id.values(), key=lambda r: r.id)
