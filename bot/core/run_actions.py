"""The built-in actions a plan step may run: `snapshot` and `diff`, on the run's cluster.

Each returns (ok, a line for the thread). A diff that finds regressions is a failed step, so the
run pauses there and people look before the completion announcement goes out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.adapters.store import Store
from bot.core import snapshots
from bot.core.plans import ActionCall
from bot.core.runs import Run
from bot.core.snapshot import DEFAULT_NODE_GROUP_LABELS, ClusterReader
from bot.errors import UserError
from bot.settings import ClusterConfig, Settings


def builtin_runner(
    *,
    settings: Settings,
    store: Store,
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime],
) -> Callable[[Run, ActionCall], tuple[bool, str]]:
    labels = settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS

    def run_action(run: Run, call: ActionCall) -> tuple[bool, str]:
        cluster = snapshots.pick_cluster(settings, run.plan.cluster)
        if call.name == "snapshot":
            reader = connect_cluster(cluster)
            with contextlib.closing(reader):
                stored = snapshots.take_and_store(
                    store,
                    reader,
                    label=call.args["label"],
                    taken_by=f"run:{run.id}",
                    now=clock(),
                    node_group_labels=labels,
                )
            counts = stored.snap["counts"]
            return True, (
                f"snapshot #{stored.meta.id} `{stored.meta.label}`: {counts['nodes']} nodes, "
                f"{counts['pods']} pods, {counts['workloads']} workloads"
            )
        if call.name == "diff":

            def live() -> dict[str, Any]:
                raise UserError("the diff action compares two stored snapshots; name both")

            report = snapshots.compare(
                store,
                call.args["before"],
                call.args["after"],
                cluster=cluster,
                live=live,
                restart_threshold=settings.restart_threshold,
            )
            summary = (
                f"diff: {len(report.regressions)} regression(s), {len(report.expected)} expected change(s)"
            )
            if report.regressions:
                first = report.regressions[0]
                summary += f"; first: {first.category} — {first.subject}"
            return not report.has_regressions, summary
        raise UserError(f"the `{call.name}` action is not built into this bot")

    return run_action
