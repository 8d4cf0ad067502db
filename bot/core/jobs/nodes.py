"""The `cordon` and `uncordon` jobs: mark the selected nodes unschedulable, or schedulable again.

Arguments: `node` (comma-separated names) or `nodegroup`, and optional `version` (only nodes NOT on
that kubelet version). See `common.select_nodes`.

Progress (JSON):

    {"nodes": [{"name": "ip-10-0-1-7", "was": true, "state": "pending"}, …],
     "cordoned": ["ip-10-0-1-7", …]}          # "uncordoned" for uncordon

`was` is whether the node was already in the wanted state when the job was planned ("already
unschedulable" for cordon). `state`: pending → done (this job changed it) | already (it was so
before the job) | gone (the node was deleted meanwhile). `cordoned` lists the nodes THIS job
cordoned, so an abort can offer to uncordon exactly those.

The node says who did it: a cordon writes the `upgrade-bot.io/cordoned-*` annotations (the run,
step, job and approvers stored in `trail`) in the same patch and records an `UpgradeBotCordon`
Event on the node; an uncordon removes them and records `UpgradeBotUncordon` (bot.core.jobs.trail).
An uncordon also puts the node back into the cloud load balancers when the bot's drain took it out
(`depool`: the label `node.kubernetes.io/exclude-from-external-load-balancers=upgrade-bot`).

Never twice: the write is a patch whose effect is visible on the node. A tick re-run after a crash
sees a pending node already in the wanted state: if it was not when planned, this job made it so
(or someone else did, between two ticks: the same outcome) and it is counted as done, without a
second patch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.core.jobs import trail as tr
from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import (
    DEPOOL_LABEL,
    DEPOOL_VALUE,
    JobCluster,
    bar,
    few,
    node_name,
    select_nodes,
    unschedulable,
)
from bot.errors import ClusterError


class _NodeFlagJob:
    """Shared by cordon (`want_unschedulable`) and uncordon."""

    kind = ""
    want_unschedulable = True
    done_key = ""  # progress list of the nodes this job changed
    reason = ""  # of the Event recorded on each node this job changed

    def __init__(self, node_group_labels: Sequence[str] = ()) -> None:
        self.node_group_labels = tuple(node_group_labels)

    def _word(self) -> str:
        return "cordoned" if self.want_unschedulable else "uncordoned"

    def _states(self) -> tuple[str, str]:
        return (
            ("schedulable", "unschedulable") if self.want_unschedulable else ("unschedulable", "schedulable")
        )

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        nodes = select_nodes(cluster, args, self.node_group_labels)
        return {
            "nodes": [
                {
                    "name": node_name(n),
                    "was": unschedulable(n) == self.want_unschedulable,
                    "state": "pending",
                }
                for n in nodes
            ],
            self.done_key: [],
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        before, after = self._states()
        lines = []
        for entry in progress["nodes"]:
            name = entry["name"]
            node = cluster.get_json(f"/api/v1/nodes/{name}")
            if unschedulable(node) == self.want_unschedulable:
                lines.append(f"node {name} is already {after}: left as it is")
                continue
            self._write(cluster, name, progress, now=None, dry_run=True)
            lines.append(f"would {self.kind} node {name} ({before} → {after})")
        return lines

    def _write(
        self,
        cluster: JobCluster,
        name: str,
        progress: Progress,
        *,
        now: datetime | None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """The patch, with the annotations that say who cordoned the node (or their removal)."""
        if self.want_unschedulable:
            annotations = tr.cordon_annotations(progress.get(tr.TRAIL), now or datetime.now(UTC))
            return cluster.cordon(name, dry_run=dry_run, annotations=annotations)
        node = cluster.uncordon(name, dry_run=dry_run, remove_annotations=tr.ANNOTATIONS)
        if ((node.get("metadata") or {}).get("labels") or {}).get(DEPOOL_LABEL) == DEPOOL_VALUE:
            # A drain with `depool: keep` (or one aborted midway) left the node out of the load
            # balancers: schedulable again, it serves again. Another's label is left alone.
            node = cluster.label_node(name, {DEPOOL_LABEL: None}, dry_run=dry_run)
        return node

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        posts: list[Post] = []
        audit: list[tuple[str, str]] = []
        before, after = self._states()
        changed: list[str] = list(progress.get(self.done_key) or [])
        nodes = [dict(e) for e in progress["nodes"]]
        for entry in nodes:
            if entry["state"] != "pending":
                continue
            name = entry["name"]
            try:
                node = cluster.get_json(f"/api/v1/nodes/{name}")
            except ClusterError as exc:
                if exc.status != 404:
                    raise
                entry["state"] = "gone"
                posts.append(
                    Post(key=f"{self.kind}-gone:{name}", text=f"node {name} no longer exists: skipped")
                )
                continue
            if unschedulable(node) == self.want_unschedulable:
                # The effect is there: written by an earlier run of this tick, or already so at plan.
                entry["state"] = "already" if entry["was"] else "done"
            else:
                node = self._write(cluster, name, progress, now=now)
                entry["state"] = "done"
                audit.append((self.kind, f"node {name}: {before} → {after}"))
            if entry["state"] == "done":
                if name not in changed:
                    changed.append(name)
                # Again after a crash between the patch and the Event: the same name, not a second.
                tr.leave_event(
                    cluster,
                    node,
                    reason=self.reason,
                    verb=self._word(),
                    trail=progress.get(tr.TRAIL),
                    now=now,
                )
                posts.append(Post(key=f"{self.kind}:{name}", text=f"node {name} {self._word()}"))
            else:
                posts.append(
                    Post(
                        key=f"{self.kind}-already:{name}",
                        text=f"node {name} was already {after}: left as it is",
                    )
                )
        new: Progress = {"nodes": nodes, self.done_key: changed}
        total = len(nodes)
        settled = [e for e in nodes if e["state"] != "pending"]
        already = [e["name"] for e in nodes if e["state"] == "already"]
        gone = [e["name"] for e in nodes if e["state"] == "gone"]
        card = [bar(len(settled), total, f"nodes {self._word()}")]
        if already:
            card.append(f"already {after}: {few(already)}")
        if gone:
            card.append(f"gone: {few(gone)}")
        done = len(settled) == total
        detail = f"{len(changed)} node(s) {self._word()}" + (
            f", {len(already)} already {after}" if already else ""
        )
        if gone:
            detail += f", {len(gone)} gone"
        return Tick(progress=new, posts=tuple(posts), audit=tuple(audit), card=tuple(card), done=done,
                    detail=detail if done else "", wait=1.0)  # fmt: skip


class CordonJob(_NodeFlagJob):
    """`cordon`: the selected nodes become unschedulable (`SchedulingDisabled`)."""

    kind = "cordon"
    want_unschedulable = True
    done_key = "cordoned"
    reason = tr.CORDON_REASON


class UncordonJob(_NodeFlagJob):
    """`uncordon`: the selected nodes become schedulable again."""

    kind = "uncordon"
    want_unschedulable = False
    done_key = "uncordoned"
    reason = tr.UNCORDON_REASON
