"""Known-issue rules on live pods (a watch's stream, a drain's refused evictions): what is kept for
them, computed once from the rules, and a known issue's thread post.

The rules (`bot.core.rules`) are data; the watch runs the same engine, `match_rules`, as
`check` and `diagnose`. To keep the fold O(1) per event and its memory proportional to the
unhealthy pods, `RuleNeeds` works out once, from the loaded rules, what a pod record must carry for
them: the label and annotation keys some rule names (a pod's other labels and annotations are not
kept), whether tolerations matter, and which Warning events some rule may match (by reason, else by
message). A Running pod not Ready is an unhealthy pod of its own class ("Not ready"), so the
readiness rules see it like any other.
Every container is kept (name, image, ready, reasons: a few words each), so that the evidence says
"2/3 containers ready" of the whole pod. `pod_view` builds that reduced `PodState` for one pod; the
watch's state (`bot.core.watches.model`) keeps it on the unhealthy pod's record and matches the
rules when it is summarised, never per event; a drain matches the pods whose eviction is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.core.kube.objects import APP, INIT, SIDECAR, sidecars
from bot.core.kube.wire import WContainerStatus, WPod
from bot.core.rendering import slack_escape
from bot.core.rules.model import ContainerView, EventMatch, PodState, Rule, fill_remediation

_EMPTY: Mapping[str, str] = {}
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class RuleNeeds:
    rules: tuple[Rule, ...]
    label_keys: frozenset[str]
    annotation_keys: frozenset[str]
    tolerations: bool
    event_rules: tuple[EventMatch, ...]
    event_reasons: frozenset[str] | None  # None: some event rule matches any reason (message only)
    log_rules: tuple[Rule, ...]

    @classmethod
    def of(cls, rules: Sequence[Rule]) -> RuleNeeds | None:
        """What the fold must keep for `rules`; None when there are none (the watch keeps nothing)."""
        if not rules:
            return None
        reasons: set[str] | None = set()
        events: list[EventMatch] = []
        for rule in rules:
            m = rule.match
            if m.events is not None:
                events.append(m.events)
                if m.events.reasons and reasons is not None:
                    reasons |= m.events.reasons
                elif not m.events.reasons:
                    reasons = None
        return cls(
            rules=tuple(rules),
            label_keys=frozenset(k for r in rules for k in r.match.labels),
            annotation_keys=frozenset(k for r in rules for k in r.match.annotations),
            tolerations=any(r.match.tolerates_all_taints for r in rules),
            event_rules=tuple(events),
            event_reasons=frozenset(reasons) if reasons is not None else None,
            log_rules=tuple(r for r in rules if r.match.log is not None),
        )

    def event_wanted(self, reason: str, message: str) -> bool:
        """Could some rule match this Warning event? (A set lookup first; a regex only when needed.)"""
        if not self.event_rules:
            return False
        if self.event_reasons is not None and reason not in self.event_reasons:
            return False
        for m in self.event_rules:
            if m.reasons and reason not in m.reasons:
                continue
            if m.message is None or m.message.search(message):
                return True
        return False


def _reason(cs: WContainerStatus) -> tuple[str, str]:
    state, last = cs.state, cs.last_state
    waiting = (state.waiting.reason or "") if state and state.waiting else ""
    terminated = ""
    if state is not None and state.terminated is not None:
        terminated = state.terminated.reason or ""
    elif last is not None and last.terminated is not None:
        terminated = last.terminated.reason or ""
    return waiting, terminated


#: What an unhealthy pod's record keeps for the rules, as a plain tuple (cheap to build at every
#: event; the `PodState` is built from it only when the rules look): name, node, phase, deleting,
#: tolerates every taint, labels and annotations (only the keys the rules name), and per container
#: (name, image, ready, waiting reason, terminated reason, kind: APP, SIDECAR or INIT).
Facts = tuple[
    str,
    str,
    str,
    bool,
    bool,
    Mapping[str, str],
    Mapping[str, str],
    tuple[tuple[str, str, bool, str, str, str], ...],
]


def _only(values: Mapping[str, str] | None, keys: frozenset[str]) -> Mapping[str, str]:
    if not values or not keys:
        return _EMPTY
    kept = {k: values[k] for k in keys if k in values}
    return kept or _EMPTY


def pod_facts(pod: WPod, needs: RuleNeeds) -> Facts:
    """The pod reduced to what the loaded rules read (see `Facts`)."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    side = (
        sidecars((c.name, c.restart_policy) for c in spec.init_containers or ())
        if spec.init_containers
        else _NONE
    )
    containers = (
        *((cs.name, cs.image, bool(cs.ready), *_reason(cs), SIDECAR if cs.name in side else INIT)
          for cs in status.init_container_statuses or ()),
        *((cs.name, cs.image, bool(cs.ready), *_reason(cs), APP) for cs in status.container_statuses or ()),
    )  # fmt: skip
    return (
        meta.name,
        spec.node_name or "",
        status.phase or "",
        bool(meta.deletion_timestamp),
        needs.tolerations
        and any(t.operator == "Exists" and not t.key and not t.effect for t in spec.tolerations or ()),
        _only(meta.labels, needs.label_keys),
        _only(meta.annotations, needs.annotation_keys),
        containers,
    )


def view_of(facts: Facts, namespace: str, workload: str, *, node_ready: bool = True) -> PodState:
    """The `PodState` the rules match (`workload`: "Kind ns/name")."""
    name, node, phase, deleting, tolerates_all, labels, annotations, containers = facts
    return PodState(
        namespace=namespace,
        name=name,
        workload=workload,
        node=node,
        phase=phase,
        deleting=deleting,
        node_ready=node_ready,
        tolerates_all=tolerates_all,
        labels=labels,
        annotations=annotations,
        containers=tuple(
            ContainerView(name=c, image=i, ready=r, waiting=w, terminated=t, kind=k)
            for c, i, r, w, t, k in containers
        ),
    )


def pod_view(pod: WPod, workload: str, needs: RuleNeeds, *, node_ready: bool = True) -> PodState:
    """The pod as the rules see it, reduced to what `needs` names (`workload`: "Kind ns/name";
    `node_ready`: whether its node is Ready, when the caller knows)."""
    return view_of(pod_facts(pod, needs), pod.metadata.namespace, workload, node_ready=node_ready)


def rules_workload(key: str) -> str:
    """The watch's workload key "ns/Kind/name" as the rules' "Kind ns/name"."""
    namespace, kind, name = key.split("/", 2)
    return f"{kind} {namespace}/{name}"


def watch_key(workload: str) -> str:
    """The rules' "Kind ns/name" (or "Kind name") as the watch's workload key "ns/Kind/name"."""
    kind, _, rest = workload.partition(" ")
    namespace, _, name = rest.rpartition("/")
    return f"{namespace}/{kind}/{name}"


def known_issue_text(
    rule_id: str, rule: Rule | None, workload: str, *, pods: int, evidence: str, remedy: str = ""
) -> str:
    """A known issue's thread post (the watch's, the drain's): which rule, about which workload
    ("<ns>/<Kind>/<name>"), what was seen, and the rule's explanation, remediation (`remedy`, filled
    from the finding when given; else from the workload alone) and links."""
    namespace, kind, name = workload.split("/", 2)
    where = f"{kind} {_code_span(f'{namespace}/{name}' if namespace else name)}"
    if pods:
        where += f" ({pods} pod{'s' if pods != 1 else ''})"
    lines = [f":mag: Known issue *{slack_escape(rule_id)}*"]
    if rule is not None:
        lines[0] += f" — {slack_escape(rule.title)}"
    lines.append(where + (f" — seen: {slack_escape(evidence)}" if evidence else ""))
    if rule is not None:
        lines.append(slack_escape(rule.explanation.strip()))
        remedy = remedy or fill_remediation(rule.remediation, kind=kind, namespace=namespace, name=name)
        lines.append("*What to do*\n```" + slack_escape(remedy) + "```")
        if rule.fixed_in:
            lines.append("Fixed in: " + slack_escape(", ".join(rule.fixed_in)))
        if rule.links:
            lines.append("Evidence: " + " · ".join(f"<{link}>" for link in rule.links))
    return "\n".join(lines)


def _code_span(text: object) -> str:
    return f"`{slack_escape(text)}`"
