"""The watch card's context, for `templates/watch_card.txt.j2` (the text: notifications, the
terminal) and `templates/watch_card.blocks.json.j2` (Block Kit: the same parts as sections, the
Stop button, the times as context): bounded whatever the cluster's size.

Per node group a text progress bar (nodes on the target version and Ready, x/y), old nodes
cordoned and remaining, NotReady nodes, the kubelet versions present; the control-plane version;
unhealthy pods by class with counts and the top workloads (kube-system first), never pod names;
the workloads whose pods' readiness flaps (each spell too short to count as unhealthy);
the known-issue findings still open; workloads mid-rollout with kubectl's verdict; Warning events
by reason; "Updated at" as a Slack date token. Lists are cut at fixed sizes and the rest counted,
and each Block Kit section is fitted (`fit`: whole lines, "…and N more lines") under Slack's
3,000 characters, even with thousands of unhealthy pods or hundreds of node groups. `stop` (the
Stop button's value) is set by the service for a live standalone watch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.core.durations import format_duration, kubectl_age
from bot.core.kube.objects import KUBE_SYSTEM
from bot.core.rendering import slack_date
from bot.core.rollout import FAILED
from bot.core.watches.spec import WatchSpec
from bot.core.watches.summary import FLAP_SPELLS, FLAP_WINDOW, GroupView, Summary
from bot.core.watches.verdict import Verdict

BAR_WIDTH = 10
MAX_GROUPS = 12
MAX_ROLLOUTS = 8
MAX_EPISODES = 5
MAX_WARNINGS = 5

_STATE_ICONS = {
    "running": ":eyes:",
    "target_reached": ":white_check_mark:",
    "target_reached_with_open_findings": ":warning:",
    "stopped": ":octagonal_sign:",
    "timed_out": ":hourglass:",
}


def progress_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`▓▓▓▓░░░░░░` — full cells for done/total, rounded down (full only when all are done)."""
    if total <= 0:
        return "░" * width
    cells = min(width, done * width // total)
    return "▓" * cells + "░" * (width - cells)


#: Kubelet versions shown per node group (a group mid-upgrade has two; more is unusual).
MAX_VERSIONS = 4
_EPISODE_KINDS = {
    "crashloop": "CrashLoopBackOff",
    "imagepull": "ImagePullBackOff",
    "error": "Error",
    "init": "Init stuck",
}


def versions_text(versions: tuple[tuple[str, int], ...]) -> str:
    """`v1.24 ×3, v1.25 ×2` (oldest first; the rest counted, never cut)."""
    shown = [f"{v} ×{n}" for v, n in versions[:MAX_VERSIONS]]
    if len(versions) > MAX_VERSIONS:
        shown.append(f"+{len(versions) - MAX_VERSIONS} more")
    return ", ".join(shown)


def _group(group: GroupView, in_target: bool) -> dict[str, Any]:
    return {
        "versions": versions_text(group.versions),
        "name": group.name,
        "bar": progress_bar(group.on_target_ready, group.total),
        "on_target": group.on_target_ready,
        "total": group.total,
        "old_cordoned": group.old_cordoned,
        "old_remaining": group.old_remaining,
        "not_ready": group.not_ready,
        "in_target": in_target,
    }


def _workload_name(key: str) -> str:
    namespace, _kind, name = key.split("/", 2)
    return f"{namespace}/{name}" if namespace else name


def card_context(summary: Summary, spec: WatchSpec, verdict: Verdict, now: datetime) -> dict[str, Any]:
    target = spec.target
    target_groups = set(target.nodegroups) if target and target.nodegroups else None
    groups = sorted(
        summary.groups,
        key=lambda g: (target_groups is not None and g.name not in target_groups, g.name),
    )
    shown_groups = [_group(g, target_groups is None or g.name in target_groups) for g in groups[:MAX_GROUPS]]
    missing = sorted((target_groups or set()) - {g.name for g in summary.groups})

    unhealthy = []
    for group in summary.unhealthy:
        top = [
            {
                "workload": f"{w.namespace}/{w.name}",
                "kind": w.kind,
                "pods": w.pods,
                "detail": w.detail,
                "kube_system": w.namespace == KUBE_SYSTEM,
            }
            for w in group.top
        ]
        unhealthy.append(
            {
                "reason": group.reason,
                "pods": group.pods,
                "kube_system": group.kube_system,
                "workloads": group.workloads,
                "top": top,
                "more_workloads": max(group.workloads - len(top), 0),
            }
        )

    rollouts = sorted(
        summary.rollouts,
        key=lambda r: (r.state != FAILED, r.namespace != KUBE_SYSTEM, not r.spec_change, r.key),
    )
    episodes = sorted(
        # "Loops": the back-off loops (an Error or a stuck Init is in the unhealthy list already).
        (e for e in summary.episodes if e.open and e.kind in ("crashloop", "imagepull")),
        key=lambda e: (not e.workload.startswith(KUBE_SYSTEM + "/"), e.since, e.workload),
    )
    findings = [e for e in summary.rule_episodes if e.open]
    stop = spec.stop
    return {
        "cluster": spec.cluster,
        "state": verdict.state,
        "icon": _STATE_ICONS.get(verdict.state, ":eyes:"),
        "reason": verdict.reason,
        "final": verdict.final,
        "control_plane": summary.control_plane or "unknown",
        "scope": {
            "nodegroups": list(spec.nodegroups),
            "namespaces": list(spec.namespaces),
        },
        "target": None
        if target is None
        else {
            "nodegroups": list(target.nodegroups),
            "kubelet_version": target.kubelet_version,
            "no_old_nodes": target.no_old_nodes,
            "settle": format_duration(target.settle),
            "crashloop_after": format_duration(stop.crashloop_after),
            "imagepull_after": format_duration(stop.imagepull_after),
        },
        "groups": shown_groups,
        "more_groups": max(len(groups) - MAX_GROUPS, 0),
        "missing_groups": missing,
        "nodes": len(summary.nodes),
        "pods": summary.pods,
        "unhealthy": unhealthy,
        "unhealthy_total": summary.unhealthy_pods,
        "flapping": [
            {
                "workload": f"{f.namespace}/{f.name}",
                "pods": f.pods,
                "spells": f.spells,
                "kube_system": f.namespace == KUBE_SYSTEM,
            }
            for f in summary.flapping
        ],
        "flapping_pods": summary.flapping_pods,
        "flap_window": format_duration(FLAP_WINDOW),
        "flap_spells": FLAP_SPELLS,
        "episodes": [
            {
                "workload": e.workload.split("/", 2)[0] + "/" + e.workload.split("/", 2)[2],
                "kind": _EPISODE_KINDS.get(e.kind, e.kind),
                "age": kubectl_age(now - e.since),
                "number": e.number,
            }
            for e in episodes[:MAX_EPISODES]
        ],
        "more_episodes": max(len(episodes) - MAX_EPISODES, 0),
        "rollouts": [
            {
                "workload": f"{r.namespace}/{r.name}",
                "kind": r.kind,
                "state": r.state,
                "message": r.message,
            }
            for r in rollouts[:MAX_ROLLOUTS]
        ],
        "more_rollouts": max(len(rollouts) - MAX_ROLLOUTS, 0),
        "warnings": [{"reason": w.reason, "count": w.count} for w in summary.warnings[:MAX_WARNINGS]],
        "findings": [
            {"rule": e.rule, "workload": _workload_name(e.workload)} for e in findings[:MAX_EPISODES]
        ],
        "more_findings": max(len(findings) - MAX_EPISODES, 0),
        # The Stop button (`watch_stop`): the service sets it for a live standalone watch.
        "stop": None,
        "updated_at": slack_date(now),
        "started_at": slack_date(spec.started_at),
        "ends_at": slack_date(spec.deadline) if spec.deadline else None,
    }
