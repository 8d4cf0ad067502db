"""The `wait-nodegroup` job: wait until every node of a node group is Ready and on a kubelet version
(the new nodes joined, the old ones are gone), or give up after a timeout. It writes nothing.

Arguments: `nodegroup` and `version` (required), `timeout` (default 1h), `replaces` (the old group
`nodegroup` replaces when a group is recreated under a new name, `others` → `others-1-25`: the old
group's nodes count as old nodes of the new one, and the job waits until none is left), `stack`
(the group's CloudFormation stack, when not eksctl's `eksctl-<cluster>-nodegroup-<group>`).

On a cluster with an EKS provider, the card and the thread also show the group's CloudFormation
stack: its status, and the events that failed in its last operation (`bot.core.jobs.stacks`).

A node counts as on target only when it is Ready, its kubelet is at or above `version`, it is not
being deleted (deletionTimestamp) and it is not cordoned (a cordoned node on the version is not
serving yet). Done (ok) when the group has at least one node and every node is on target; an old
node still in the group — cordoned, drained or not — keeps the job waiting.

Progress (JSON):

    {"nodegroup": "workers", "version": "1.30", "started": "2026-11-24T07:00:00Z", "timeout": 3600,
     "seen": {"total": 6, "on_target": 3, "not_ready": 1, "old": 3},
     "stack": {"name": "eksctl-prod-nodegroup-workers", "status": "CREATE_COMPLETE", …}}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    JobCluster,
    bar,
    duration_arg,
    iso,
    kubelet,
    list_nodes,
    ready,
    timer_start,
    unschedulable,
    version_arg,
)
from bot.core.jobs.stacks import read_stack, stack_card, stack_posts
from bot.core.kube.objects import node_group
from bot.core.kube.versions import on_version, parse_version
from bot.errors import UserError

DEFAULT_TIMEOUT = timedelta(hours=1)


def group_counts(nodes: Sequence[Mapping[str, Any]], version: str) -> dict[str, int]:
    """total, on_target, not_ready and old (not on the version) among a group's nodes."""
    target = parse_version(version)
    counts = {"total": 0, "on_target": 0, "not_ready": 0, "old": 0}
    for node in nodes:
        counts["total"] += 1
        is_ready = ready(node)
        current = on_version(kubelet(node), target)
        if not is_ready:
            counts["not_ready"] += 1
        if not current:
            counts["old"] += 1
        deleting = bool((node.get("metadata") or {}).get("deletionTimestamp"))
        if is_ready and current and not deleting and not unschedulable(node):
            counts["on_target"] += 1
    return counts


def _replaced(progress: Mapping[str, Any]) -> str:
    return str(progress.get("replaces") or "")


class WaitNodeGroupJob:
    """`wait-nodegroup`: see the module docstring."""

    kind = "wait-nodegroup"

    def __init__(
        self, node_group_labels: Sequence[str] = (), *, stacks: Callable[[str], Any] | None = None
    ) -> None:
        self.node_group_labels = tuple(node_group_labels)
        #: Cluster name → its EKS provider (the stack's reads), or a refusal: no stack shown.
        self.stacks = stacks

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        group = str(args.get("nodegroup", "")).strip()
        if not group:
            raise UserError("nodegroup: required (the node group to wait for)")
        version_arg(args, required=True)
        timeout = duration_arg(args, "timeout", DEFAULT_TIMEOUT)
        replaces = str(args.get("replaces", "")).strip()
        return {
            "replaces": replaces,
            "stack_name": str(args.get("stack", "")).strip(),
            "nodegroup": group,
            "version": str(args["version"]).strip(),
            "started": iso(now),
            "timeout": timeout.total_seconds(),
            "seen": {},
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        nodes, left = self._nodes(cluster, progress)
        counts = group_counts(nodes, progress["version"])
        old = _replaced(progress)
        return [
            f"would wait (up to {int(progress['timeout'])} s, writing nothing) until every node of group "
            f"{progress['nodegroup']} is Ready on {progress['version']}"
            + (f" and group {old}, which it replaces, has no node left" if old else "")
            + f": now {counts['on_target']}/{counts['total']} on target, {counts['not_ready']} NotReady, "
            f"{counts['old']} old" + (f", {left} node(s) left in {old}" if old else "")
        ]

    def _nodes(self, cluster: JobCluster, progress: Progress) -> tuple[list[dict[str, Any]], int]:
        """The group's nodes, and how many nodes the group it replaces still has."""
        mine, left = [], 0
        old = _replaced(progress)
        for n in list_nodes(cluster):
            group = node_group((n.get("metadata") or {}).get("labels"), self.node_group_labels)
            if group == progress["nodegroup"]:
                mine.append(n)
            elif old and group == old:
                left += 1
        return mine, left

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        group, version = progress["nodegroup"], progress["version"]
        nodes, left = self._nodes(cluster, progress)
        counts = group_counts(nodes, version)
        old = _replaced(progress)
        if old:
            counts["replaced_left"] = left
        stack = read_stack(
            self.stacks,
            str(getattr(cluster, "name", "")),
            group,
            str(progress.get("stack_name") or ""),
            progress.get("stack"),
            now=now,
        )
        new: Progress = {**progress, "seen": counts, "stack": stack}
        card = [bar(counts["on_target"], counts["total"], f"nodes of {group} Ready on {version}")]
        if counts["not_ready"]:
            card.append(f"{counts['not_ready']} NotReady")
        if counts["old"]:
            card.append(f"{counts['old']} old node(s) remaining")
        if left:
            card.append(f"{left} node(s) left in {old}, which {group} replaces")
        card += stack_card(stack)
        # Each failing event once: the tick after this one sees the same stack again.
        told = [str(k) for k in progress.get("stack_told") or []]
        stack_lines = tuple(p for p in stack_posts(stack, group) if p.key not in told)
        new["stack_told"] = told + [p.key for p in stack_lines]
        if counts["total"] and counts["on_target"] == counts["total"] and not left:
            text = f"node group {group}: all {counts['total']} node(s) Ready on {version}" + (
                f"; {old}, which it replaces, has no node left" if old else ""
            )
            return Tick(progress=new, posts=(*stack_lines, Post(key=f"nodegroup-ready:{group}:{version}", text=text)),
                        card=tuple(card), done=True, ok=True, detail=text, wait=0.0)  # fmt: skip
        started = timer_start(progress, progress["started"], now)
        if now - started >= timedelta(seconds=float(progress["timeout"])):
            text = (
                f"node group {group}: not all on {version} in time — {counts['on_target']}/{counts['total']} "
                f"on target, {counts['not_ready']} NotReady, {counts['old']} old"
                + (f", {left} node(s) left in {old}" if left else "")
            )
            return Tick(progress=new, posts=(*stack_lines, Post(key=f"nodegroup-timeout:{group}:{version}", text=text)),
                        card=tuple(card), done=True, ok=False, detail=text, wait=0.0)  # fmt: skip
        return Tick(progress=new, posts=stack_lines, card=tuple(card), wait=5.0)
