"""Why a job's workload failed, in the rules' words: a restart's or a drain's failure line names the
known-issue rule that matches what is left (the workload's pods as the rules see them, and the
Warning events about them) and its remedy — "rollout failed: … — KI004 vault sidecar not ready:
<remedy>" instead of a bare progress deadline.

The same engine as the watch and `check` (`bot.core.rules.match_rules`), over the pods the
failing job already looks at; events come from one bounded page of the namespace's Warning events.
Nothing here is a key: the text may change between ticks, the posts' keys do not.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from bot.core.jobs.common import JobCluster
from bot.core.kube.objects import workload_of
from bot.core.kube.wire import WEvent, WPod
from bot.core.rules import EventRecord, Rule, RuleHit, fill_remediation, match_rules
from bot.core.rules.known import RuleNeeds, pod_view
from bot.decoders import convert
from bot.errors import ClusterError

#: A failure line names at most this many rules (the rest are counted).
MAX_NAMED = 2
#: A remedy in a failure line is at most this long (the full text is in the rule's own post).
REMEDY_CHARS = 300
#: Warning events read to explain a failure: one page, no more.
EVENTS_LIMIT = 500


def remedy_line(remedy: str, limit: int = REMEDY_CHARS) -> str:
    """A remediation on one line (whole lines kept while they fit, then "…")."""
    lines = [" ".join(line.split()) for line in remedy.strip().splitlines() if line.strip()]
    out = ""
    for line in lines:
        joined = (f"{out} {line}" if out.endswith(":") else f"{out}; {line}") if out else line
        if len(joined) > limit:
            return (out + " …") if out else line[: limit - 1].rsplit(" ", 1)[0] + " …"
        out = joined
    return out


def named(hits: Sequence[RuleHit] | Sequence[Rule], *, remedy: bool = True) -> str:
    """` — KI004 Vault-injected pod …: <remedy>` for a failure line ("" when nothing matched)."""
    rules: list[Rule] = []
    remedies: dict[str, str] = {}
    for item in hits:
        rule = item.rule if isinstance(item, RuleHit) else item
        if rule.id not in {r.id for r in rules}:
            rules.append(rule)
            # A hit knows the workload and its pods: its remedy names them (a bare rule cannot).
            remedies[rule.id] = (
                item.remedy() if isinstance(item, RuleHit) else fill_remediation(rule.remediation)
            )
    if not rules:
        return ""
    parts = []
    for rule in rules[:MAX_NAMED]:
        text = f"{rule.id} {rule.title}"
        if remedy:
            text += f": {remedy_line(remedies[rule.id])}"
        parts.append(text)
    more = f" (+{len(rules) - MAX_NAMED} more known issues)" if len(rules) > MAX_NAMED else ""
    return " — " + " · ".join(parts) + more


def warning_events(cluster: JobCluster, namespace: str, pods: Iterable[str]) -> list[EventRecord]:
    """The namespace's Warning events about `pods` (one page; an error reads as none)."""
    names = set(pods)
    if not names:
        return []
    out: list[EventRecord] = []
    try:
        page = cluster.get_json(
            f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": "type=Warning", "limit": EVENTS_LIMIT}
        )
    except ClusterError:
        return []
    for raw in page.get("items") or ():
        event = convert(raw, WEvent)
        involved = event.involved_object
        if involved is None or involved.kind != "Pod" or involved.name not in names:
            continue
        out.append(
            EventRecord(
                namespace=namespace,
                kind="Pod",
                name=involved.name or "",
                reason=event.reason or "",
                message=event.message or "",
                type="Warning",
            )
        )
    return out


def explain(
    rules: Sequence[Rule],
    pods: Iterable[WPod],
    events: Iterable[EventRecord] = (),
    *,
    not_ready_nodes: Collection[str] = (),
) -> list[RuleHit]:
    """The rules matching these pods (all of one workload, or a node's) and their events;
    `not_ready_nodes`: the nodes known NotReady (pods stuck Terminating there are KI008's)."""
    needs = RuleNeeds.of(rules)
    if needs is None:
        return []
    states = []
    for pod in pods:
        kind, name = workload_of(pod)
        ready = (pod.spec.node_name or "") not in not_ready_nodes
        states.append(pod_view(pod, f"{kind} {pod.metadata.namespace}/{name}", needs, node_ready=ready))
    if not states:
        return []
    return match_rules(rules, states, list(events))


def typed_pods(raws: Iterable[Any]) -> list[WPod]:
    return [raw if isinstance(raw, WPod) else convert(raw, WPod) for raw in raws]
