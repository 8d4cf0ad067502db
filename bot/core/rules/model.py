"""What a known-issue rule is: the views of pods and events a rule looks at, the rule and its match,
a hit, and the remediation filled from a hit.

A rule is a known problem seen in past upgrades (the runbooks' "Known issues" sections): a stable
id, a match over what the cluster shows (container waiting/terminated reasons, container names,
labels and annotations, readiness, deletion on a NotReady node, events with their reasons and
messages, a regular expression over a bounded tail of a container's log), and what to tell people:
title, explanation, remediation (commands as text), links to the public evidence, and optionally
the versions that fixed it. The shipped rules are `templates/rules/known-issues.yaml`; a team adds
rules or overrides shipped ones by id through the `rules_files` setting (later files win; the file
is read by `bot.core.rules.loader`).

The per-pod tests of a match (`_pod_level`, `_container_ok`) live here too, since a rule asks them
itself (`Rule.log_wanted`); the engine over many pods is `bot.core.rules.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.kube.objects import APP
from bot.core.rules.patterns import SafePattern
from bot.resources import BUILTIN_TEMPLATES

#: The two severities a finding is reported with, a rule's included (a check's finding, in
#: `bot.core.checks.findings`, takes them from here: the rules sit below the checks).
REQUIRED = "required"
RECOMMENDED = "recommended"

#: The most log lines a rule may ask for: logs are read per container, on demand.
MAX_LOG_LINES = 500
DEFAULT_LOG_LINES = 100

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
