"""Reading a watch's thread back from the Slack stub: every milestone line once, every known issue
once per (rule, workload) — a rule's explanation is the same text for each workload it names."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.adapters.kube import Cluster
from bot.core.watches.summary import Summary
from bot.records import ClusterConfig

KNOWN_ISSUE = ":mag: Known issue"
GROUP_LABELS = ("eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name")


def advance(sim: Any, steps: int, *, seconds: float = 60, watched: bool = True, timeout: float = 30) -> None:
    """Advance the sim's clock `steps` times by `seconds`. `watched`: after each step, wait until the
    sim has handed each change to every open watch (a bot's, in its own process) instead of sleeping
    a fixed time; the bot reads them from its streams as the upgrade goes on. `watched=False` while
    nobody watches (the bot is down): only time moves."""
    for _ in range(steps):
        sim.control.advance(seconds)
        deadline = time.monotonic() + timeout
        while watched and sim.control.watch_backlog():
            assert time.monotonic() < deadline, "the sim's watches were not sent the step's changes"
            time.sleep(0.01)


def node_uids(kubeconfig: Path) -> set[str]:
    """The uid of every node of the cluster now: a watch whose summary holds exactly these has read
    every join and removal so far (equal counts per group would not show it mid-replacement)."""
    cluster = Cluster.connect(ClusterConfig(name="truth", kubeconfig=kubeconfig))
    try:
        return {n["metadata"]["uid"] for n in cluster.get_json("/api/v1/nodes")["items"]}
    finally:
        cluster.close()


def summary_uids(summary_json: str) -> set[str]:
    """The node uids of a watch's published summary (JSON, "" before the first)."""
    return {n.uid for n in Summary.from_json(summary_json).nodes} if summary_json else set()


def node_groups(kubeconfig: Path) -> dict[str, int]:
    """The cluster's nodes per node group ("fargate" for Fargate's), read through the kube adapter:
    what a caught-up watch card counts."""
    cluster = Cluster.connect(ClusterConfig(name="truth", kubeconfig=kubeconfig))
    try:
        nodes = cluster.get_json("/api/v1/nodes")["items"]
    finally:
        cluster.close()
    out: Counter[str] = Counter()
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        group = next((labels[k] for k in GROUP_LABELS if k in labels), "")
        if not group and labels.get("eks.amazonaws.com/compute-type") == "fargate":
            group = "fargate"
        out[group] += 1
    return dict(out)


def milestone_lines_once(thread: Sequence[str]) -> list[str]:
    """The thread's milestone lines (known-issue posts left out), asserting none is repeated and no
    known issue is posted twice for the same workload."""
    rules = [text for text in thread if text.startswith(KNOWN_ISSUE)]
    heads = Counter("\n".join(text.splitlines()[:2]) for text in rules)
    assert [head for head, n in heads.items() if n > 1] == []
    lines = [line for text in thread if not text.startswith(KNOWN_ISSUE) for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    assert [line for line, n in Counter(lines).items() if n > 1] == []
    return lines
