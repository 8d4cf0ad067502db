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
`try_log` and `try_event` hold one line given by hand (a log line, an event's message) against
the rules' patterns, and say what else each matching rule needs of a pod: `upgrade-bot rules test`.

Speed: a rule can only match a pod that shows every *signal* it requires (being deleted, a
container not ready or waiting, a log tail read, events…; `required_signals`), and most pods show
none. `match_rules` runs each rule's full test only on the pods that show its rarest signal (one
comprehension over the pods per signal, shared by the rules), so the regular expressions run on
a few pods; the gatherer's `Screen` drops the pods no rule can match before a `PodState` is built
(150,000 pods' states in a tenth of a second; `benchmarks/bench_check.py` measures it).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path

import yaml

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding
from bot.core.checks.patterns import (
    MAX_PATTERN_CHARS,
    Found,
    MatchBudget,
    PatternError,
    SafePattern,
    compile_pattern,
)
from bot.core.kube.objects import APP, ready_count
from bot.core.validation import YamlValidator, compose_document, read_document, shown
from bot.errors import ConfigError
from bot.resources import BUILTIN_TEMPLATES

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
    #: APP, SIDECAR or INIT (bot.core.kube.objects): what kubectl's READY column counts
    kind: str = APP


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
    regex: SafePattern
    lines: int = DEFAULT_LOG_LINES


@dataclass(frozen=True, kw_only=True)
class EventMatch:
    reasons: frozenset[str] = frozenset()
    message: SafePattern | None = None


@dataclass(frozen=True, kw_only=True)
class Match:
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()  # the workload's kind: Deployment, StatefulSet, DaemonSet, Pod…
    tolerates_all_taints: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)  # value "*": the key is there
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: frozenset[str] = frozenset()
    images: SafePattern | None = None
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
class RuleFix:
    """`fix: {action: restart, args: {workloads: "{kind}/{namespace}/{name}"}}`: the cluster action
    (one of `FIX_ACTIONS`) a finding of the rule may be fixed with, its argument values templated
    from the finding. It never runs by itself: a click opens a one-step run gated like any action."""

    action: str
    args: Mapping[str, str]

    def args_for(self, *, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        """The arguments filled from a finding about workload `kind namespace/name`; None when the
        action does not apply to it (a kind it cannot act on, or a value the finding lacks)."""
        kinds = FIX_ACTIONS[self.action][1]
        if kinds and kind not in kinds:
            return None
        values = {"kind": kind.lower(), "namespace": namespace, "name": name}
        if any(not values[p] for text in self.args.values() for p in placeholders_in(text)):
            return None
        return {key: _PLACEHOLDER.sub(lambda m: values[m.group(1)], text) for key, text in self.args.items()}


#: The actions a rule's `fix` may name: the arguments it may give, and the workload kinds a finding
#: must be about (empty: any). Only actions that exist (`bot.core.actions.jobs`) and that a runbook
#: would have a person do for a finding; a test checks these against the action registry.
FIX_ACTIONS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    "restart": (
        frozenset({"workloads", "timeout", "crashloop_after", "imagepull_after"}),
        frozenset({"Deployment", "DaemonSet", "StatefulSet"}),
    ),
    # Never `allow_unmanaged`: deleting a pod nothing recreates is for people to ask by name.
    "delete-pod": (
        frozenset({"workload", "only", "force", "timeout"}),
        frozenset({"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "Pod"}),
    ),
    "set-image": (
        frozenset({"workload", "container", "timeout", "crashloop_after", "imagepull_after"}),
        frozenset({"DaemonSet"}),
    ),
}
#: The arguments a fix of each action must give (what it acts on, and for delete-pod which pods).
FIX_REQUIRED: Mapping[str, tuple[tuple[str, str], ...]] = {
    "restart": (("workloads", 'the workload, "{kind}/{namespace}/{name}"'),),
    "delete-pod": (
        ("workload", 'the workload, "{kind}/{namespace}/{name}"'),
        ("only", "which of its pods: terminating or not-ready"),
    ),
    "set-image": (("workload", 'the DaemonSet, "{kind}/{namespace}/{name}"'),),
}
#: What a fix's argument values may name: only what every finding (a watch's too) knows.
FIX_PLACEHOLDERS = ("namespace", "name", "kind")


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
    #: The one-click remedy a finding's post offers (a gated one-step run), if the rule names one.
    fix: RuleFix | None = None
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
    container: str = ""  # the container the first pod matched on (container-level rules)
    nodes: tuple[tuple[str, str], ...] = ()  # (pod, node) of the pods that have a node

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule.id, self.workload)

    def remedy(self, *, version: str = "") -> str:
        """The rule's remediation with this finding's names in it (see `fill_remediation`)."""
        kind, namespace, name = split_workload(self.workload)
        return fill_remediation(
            self.rule.remediation,
            kind=kind,
            namespace=namespace or self.namespace,
            name=name,
            pods=self.pods,
            nodes=dict(self.nodes),
            container=self.container,
            version=version,
        )

    def finding(self, *, version: str = "") -> Finding:
        r = self.rule
        objects = (self.workload, *(f"Pod {self.namespace}/{p}" for p in self.pods[:5]))
        if len(self.pods) > 5:
            objects = (*objects, f"… and {len(self.pods) - 5} more pods")
        fix = self.remedy(version=version)
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
            source=f"known-issue rule {r.id} ({shown_source(r.source)})"
            if r.source
            else f"known-issue rule {r.id}",
        )


def shown_source(source: str) -> str:
    """A rule's "path:line" as a report shows it: a built-in file relative to the templates
    ("templates/rules/known-issues.yaml:117"), a team's file by its name ("our-rules.yaml:12"),
    never the bot host's absolute path (which means nothing to the reader and tells a stranger
    how the host is laid out)."""
    path, sep, line = source.rpartition(":")
    if not sep or not line.isdigit():
        path, line = source, ""
    where = Path(path)
    try:
        shown = f"templates/{where.resolve().relative_to(BUILTIN_TEMPLATES.resolve()).as_posix()}"
    except (ValueError, OSError):
        shown = where.name or path
    return f"{shown}:{line}" if line else shown


# ----- remediations filled from the finding ----------------------------------------------------------

#: The placeholders a remediation may use, filled from the finding: the workload's namespace, name
#: and kind (lower case, as kubectl takes it: `deployment`), a pod, the matched container, a pod's
#: node, and the target version (known to `check`, not to `diagnose` or a watch).
PLACEHOLDERS = ("namespace", "name", "kind", "pod", "container", "node", "version")
#: `{word}`: a placeholder. JSON in a remedy (`'{"spec": …}'`) never has a bare word in braces.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: A line about each pod (or node) is repeated for at most this many.
MAX_REMEDY_OBJECTS = 5


def placeholders_in(text: str) -> list[str]:
    """The placeholder names `text` uses, in order (unknown ones included: the loader refuses them)."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(text)]


def split_workload(workload: str) -> tuple[str, str, str]:
    """ "Deployment ns/name" → ("Deployment", "ns", "name"); "Node n" → ("Node", "", "n")."""
    kind, _, rest = workload.partition(" ")
    namespace, _, name = rest.rpartition("/")
    return kind, namespace, name


def fill_remediation(
    text: str,
    *,
    kind: str = "",
    namespace: str = "",
    name: str = "",
    pods: tuple[str, ...] = (),
    nodes: Mapping[str, str] | None = None,
    container: str = "",
    version: str = "",
) -> str:
    """`text` with its placeholders filled from a finding, so the commands can be pasted.

    A line that names `{pod}` is repeated for each pod of the finding (with `{node}` that pod's
    node), one that names `{node}` alone for each of their nodes, at most `MAX_REMEDY_OBJECTS`
    times and then "# … and N more". A value the finding does not know (a watch knows no pod
    names; only `check` knows the target version) stays as a visible `<pod>`-style slot.
    """
    nodes = nodes or {}
    if kind == "Node" and name:
        nodes = nodes or {"": name}
    known = {
        "namespace": namespace,
        "name": name,
        "kind": kind.lower(),
        "container": container,
        "version": version,
    }

    def fill(line: str, pod: str = "", node: str = "") -> str:
        values = {**known, "pod": pod, "node": node}
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1)) or f"<{m.group(1)}>", line)

    out: list[str] = []
    for line in text.strip().splitlines():
        used = set(placeholders_in(line))
        if "pod" in used and pods:
            each: list[tuple[str, str]] = [(p, nodes.get(p, "")) for p in pods]
        elif "node" in used and nodes:
            each = [("", n) for n in sorted(set(nodes.values()))]
        else:
            out.append(fill(line))
            continue
        out.extend(fill(line, pod, node) for pod, node in each[:MAX_REMEDY_OBJECTS])
        if len(each) > MAX_REMEDY_OBJECTS:
            indent = line[: len(line) - len(line.lstrip())]
            more = len(each) - MAX_REMEDY_OBJECTS
            out.append(f"{indent}# … and {more} more {'pods' if 'pod' in used else 'nodes'}")
    return "\n".join(out)


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
    if m.images is not None and m.images.search(c.image) is None:
        return False
    if m.waiting_reasons and c.waiting not in m.waiting_reasons:
        return False
    if m.terminated_reasons and c.terminated not in m.terminated_reasons:
        return False
    if m.not_ready and c.ready:
        return False
    if with_log and m.log is not None:
        # One search over the tail's last lines (the pattern is compiled multi-line, and `.` does
        # not cross a newline, so a match is still within one line).
        return (
            bool(c.log_tail)
            and m.log.regex.search(_last_lines(c.log_tail, m.log.lines), keep_end=True) is not None
        )
    return True


def _last_lines(text: str, n: int) -> str:
    cut = len(text)
    while cut and text[cut - 1] == "\n":
        cut -= 1
    if text.count("\n", 0, cut) < n:
        return text  # the usual case: the tail was read with tailLines ≤ n
    for _ in range(n):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return text
    return text[cut + 1 :]


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
    text = found.text
    start = text.rfind("\n", 0, found.start) + 1
    end = text.find("\n", found.end)
    return f"{c.name} log: {text[start : end if end >= 0 else len(text)].strip()[:200]}"


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


# ----- which pods can match: signals ----------------------------------------------------------------

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


def required_signals(m: Match) -> int:
    """The signals a pod must show for `m` to match it (0: none can be told in advance)."""
    need = 0
    if m.deleting:
        need |= DELETING
    if m.node_not_ready:
        need |= NODE_NOT_READY
    if m.tolerates_all_taints:
        need |= TOLERATES_ALL
    if m.namespaces:
        need |= IN_NAMESPACE
    if m.kinds:
        need |= IN_KIND
    if m.labels:
        need |= LABELLED
    if m.annotations:
        need |= ANNOTATED
    if m.containers:
        need |= NAMED_CONTAINER
    if m.not_ready:
        need |= CONTAINER_NOT_READY
    # A reason list that holds "" also matches a container with no reason.
    if m.waiting_reasons and "" not in m.waiting_reasons:
        need |= WAITING
    if m.terminated_reasons and "" not in m.terminated_reasons:
        need |= TERMINATED
    if m.log is not None:
        need |= LOGGED
    if m.events is not None:
        need |= EVENTS
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
        if pod.deleting:
            out |= DELETING
        if not pod.node_ready:
            out |= NODE_NOT_READY
        if pod.tolerates_all:
            out |= TOLERATES_ALL
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
            if not c.ready:
                out |= CONTAINER_NOT_READY
            if c.waiting:
                out |= WAITING
            if c.terminated:
                out |= TERMINATED
            if c.log_tail:
                out |= LOGGED
        if (pod.namespace, pod.name) in events:
            out |= EVENTS
        return out & used


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
            evidence=ev,
            container=container,
            nodes=tuple(sorted((p, n) for p, n in placed.items() if n)),
        )
        for key, (r, ns, placed, ev, container) in sorted(found.items())
    ]


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
        if signal == LOGGED:
            return _once([p for p in self._troubled() for c in p.containers if c.log_tail])
        if signal == WAITING:
            return _once([p for p in self._troubled() for c in p.containers if c.waiting])
        if signal == TERMINATED:
            return _once([p for p in self._troubled() for c in p.containers if c.terminated])
        if signal == CONTAINER_NOT_READY:
            return _once([p for p in self._troubled() for c in p.containers if not c.ready])
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


# ----- one line against the rules (`upgrade-bot rules test`) -------------------------------------


@dataclass(frozen=True, kw_only=True)
class LineMatch:
    """A rule whose pattern matches a log line or an event message given by hand."""

    rule: Rule
    signal: str  # "log" | "event"
    #: The line the pattern matched in (the first 200 characters, as a finding's evidence).
    line: str
    matched: str
    #: The pattern's named groups that took part in the match (`(?P<field>…)`).
    fields: Mapping[str, str]
    #: What else the rule needs of the pod that a line cannot show ("container istio-proxy").
    also: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NearMiss:
    """A rule whose pattern matches, ruled out by what was said of the line (its container, the
    event's reason): worth saying, since that is usually why a rule "does not fire"."""

    rule: Rule
    why: str


def _listed(values: Iterable[str]) -> str:
    return " or ".join(sorted(values))


def _pod_conditions(m: Match, *, container_known: bool, signal: str) -> tuple[str, ...]:
    """What `m` needs besides the line: the pod's and container's conditions, in words."""
    out: list[str] = []
    if m.containers and not container_known:
        out.append(f"container {_listed(m.containers)}")
    if m.namespaces:
        out.append(f"namespace {_listed(m.namespaces)}")
    if m.kinds:
        out.append(f"a pod of a {_listed(m.kinds)}")
    out += [f"label {k}" + ("" if v == "*" else f"={v}") for k, v in sorted(m.labels.items())]
    out += [f"annotation {k}" + ("" if v == "*" else f"={v}") for k, v in sorted(m.annotations.items())]
    if m.images is not None:
        out.append(f"an image matching /{m.images.pattern}/")
    if m.waiting_reasons:
        out.append(f"a container waiting: {_listed(m.waiting_reasons)}")
    if m.terminated_reasons:
        out.append(f"a container terminated: {_listed(m.terminated_reasons)}")
    if m.not_ready:
        out.append("the container not ready")
    if m.deleting:
        out.append("the pod being deleted")
    if m.node_not_ready:
        out.append("its node NotReady")
    if m.tolerates_all_taints:
        out.append("a toleration of every taint")
    if signal == "log" and m.events is not None:
        out.append("an event about the pod too")
    if signal == "event" and m.log is not None:
        out.append(f"a log line matching /{m.log.regex.pattern}/ too")
    return tuple(out)


def _line_of(found: Found) -> str:
    text = found.text
    start = text.rfind("\n", 0, found.start) + 1
    end = text.find("\n", found.end)
    return text[start : end if end >= 0 else len(text)].strip()[:200]


def try_log(
    rules: Sequence[Rule], text: str, *, container: str | None = None
) -> tuple[list[LineMatch], list[NearMiss]]:
    """The rules whose log pattern matches `text` (one line, or a pasted tail: each rule looks at
    its last `lines` lines, as it does a container's log), and those ruled out only by `container`."""
    hits: list[LineMatch] = []
    misses: list[NearMiss] = []
    for rule in rules:
        m = rule.match
        if m.log is None:
            continue
        found = m.log.regex.search(_last_lines(text, m.log.lines), keep_end=True)
        if found is None:
            continue
        if container is not None and m.containers and container not in m.containers:
            misses.append(
                NearMiss(
                    rule=rule, why=f"its pattern matches, but it reads only {_listed(m.containers)}'s log"
                )
            )
            continue
        hits.append(
            LineMatch(
                rule=rule,
                signal="log",
                line=_line_of(found),
                matched=found.text[found.start : found.end],
                fields=found.groups,
                also=_pod_conditions(m, container_known=container is not None, signal="log"),
            )
        )
    return hits, misses


def try_event(
    rules: Sequence[Rule], message: str, *, reason: str | None = None
) -> tuple[list[LineMatch], list[NearMiss]]:
    """The rules whose event pattern matches `message` (and `reason`, when given: without it, a
    rule's reasons are listed as what it also needs), and those ruled out only by `reason`."""
    hits: list[LineMatch] = []
    misses: list[NearMiss] = []
    for rule in rules:
        ev = rule.match.events
        if ev is None:
            continue
        found = ev.message.search(message) if ev.message is not None else None
        if ev.message is not None and found is None:
            continue
        if ev.message is None and (reason is None or reason not in ev.reasons):
            continue  # a rule on reasons alone: a message says nothing to it
        if reason is not None and ev.reasons and reason not in ev.reasons:
            misses.append(
                NearMiss(
                    rule=rule, why=f"its pattern matches, but only events of reason {_listed(ev.reasons)}"
                )
            )
            continue
        also = _pod_conditions(rule.match, container_known=False, signal="event")
        if reason is None and ev.reasons:
            also = (f"the event's reason {_listed(ev.reasons)}", *also)
        hits.append(
            LineMatch(
                rule=rule,
                signal="event",
                line=message.strip()[:200] if found is None else _line_of(found),
                matched=(reason or "") if found is None else found.text[found.start : found.end],
                fields=found.groups if found is not None else {},
                also=also,
            )
        )
    return hits, misses


# ----- the rules file ------------------------------------------------------------------------------

_RULE_KEYS = {"id", "title", "severity", "match", "explanation", "remediation", "links", "fixed_in", "fix"}
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
    def regex(self, node: yaml.Node | None, key: str) -> SafePattern | None:
        text = self.string(node, key)
        if text is None:
            return None
        if len(text) > MAX_PATTERN_CHARS:
            self.error(
                node, key, f"a pattern longer than {MAX_PATTERN_CHARS} characters is not a sensible rule"
            )
            return None
        try:
            # The one way a rule's pattern is compiled: RE2, linear time (see patterns.py).
            return compile_pattern(text)
        except PatternError as exc:
            self.error(node, key, f"{shown(text)} is not a regular expression RE2 accepts: {exc}")
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

    def fix(self, node: yaml.Node, key: str) -> RuleFix | None:
        f = self.mapping(node, key, {"action", "args"})
        action = self.string(f.get("action"), f"{key}.action")
        if "action" not in f and isinstance(node, yaml.MappingNode):
            self.error(node, f"{key}.action", "required")
        if action is not None and action not in FIX_ACTIONS:
            self.error(
                f["action"],
                f"{key}.action",
                f"{shown(action)} is not an action a fix may run; one of: {', '.join(sorted(FIX_ACTIONS))}",
            )
            return None
        args = self.string_map(f["args"], f"{key}.args") if "args" in f else {}
        if "args" not in f and isinstance(node, yaml.MappingNode):
            self.error(node, f"{key}.args", "required (what the action acts on)")
        if action is None:
            return None
        allowed = FIX_ACTIONS[action][0]
        ok = True
        for name, text in args.items():
            where = f"{key}.args.{name}"
            if name not in allowed:
                self.error(f["args"], where, f"`{action}` takes {', '.join(sorted(allowed))}; not {name}")
                ok = False
                continue
            unknown = sorted({p for p in placeholders_in(text) if p not in FIX_PLACEHOLDERS})
            if unknown:
                self.error(
                    f["args"],
                    where,
                    f"unknown placeholder {', '.join('{' + p + '}' for p in unknown)}; "
                    f"a fix may use {', '.join('{' + p + '}' for p in FIX_PLACEHOLDERS)}",
                )
                ok = False
        for name, what in FIX_REQUIRED.get(action, ()):
            if "args" in f and name not in args:
                self.error(f["args"], f"{key}.args.{name}", f"required: {what}")
                ok = False
        return RuleFix(action=action, args=args) if ok and "args" in f else None

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
            fix = v.fix(r["fix"], f"{key}.fix") if "fix" in r else None
            title = v.string(r.get("title"), f"{key}.title")
            explanation = v.string(r.get("explanation"), f"{key}.explanation")
            remediation = v.string(r.get("remediation"), f"{key}.remediation")
            if remediation is not None:
                unknown = sorted({p for p in placeholders_in(remediation) if p not in PLACEHOLDERS})
                if unknown:
                    v.error(
                        r["remediation"],
                        f"{key}.remediation",
                        f"unknown placeholder {', '.join('{' + p + '}' for p in unknown)}; "
                        f"a remediation may use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                    )
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
                        fix=fix,
                        source=f"{source}:{item.start_mark.line + 1}",
                    )
                )
    v.raise_if_errors()
    return rules


def read_rules(path: Path, *, label: str | None = None) -> list[Rule]:
    text = read_document(path, what="rules file", limit=MAX_RULES_BYTES, label=label)
    return parse_rules(text, source=label or str(path))


def rules_problems(path: Path) -> tuple[list[Rule], list[str]]:
    """A rules file checked whole (`upgrade-bot rules check FILE`): its rules, and every problem
    found in it, each naming its file, line and key (no rules when there is any problem)."""
    try:
        return read_rules(path), []
    except FileNotFoundError:
        return [], [f"{path}: no such file"]
    except ConfigError as exc:
        return [], list(exc.problems)


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
