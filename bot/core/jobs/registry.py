"""The cluster jobs by kind, as plans name them: cordon, uncordon, drain, restart, wait-nodegroup."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.checks.rules import Rule
from bot.core.jobs.base import Job, JobRegistry
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.nodes import CordonJob, UncordonJob
from bot.core.jobs.restart import RestartJob
from bot.core.jobs.waitgroup import WaitNodeGroupJob


def default_jobs(node_group_labels: Sequence[str], rules: Sequence[Rule] = ()) -> JobRegistry:
    """Every job kind; `node_group_labels` are the settings' node-group label keys, in priority
    order (how `nodegroup: NAME` finds a group's nodes); `rules`, the known-issue rules a drain
    matches the eviction API's refusals against, and a restart or a drain names in its failure lines."""
    labels = tuple(node_group_labels)
    jobs: list[Job] = [
        CordonJob(labels),
        UncordonJob(labels),
        DrainJob(labels, rules),
        RestartJob(rules),
        WaitNodeGroupJob(labels),
    ]
    return JobRegistry(jobs={job.kind: job for job in jobs})
