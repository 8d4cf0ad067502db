"""What a run's actions can do, bound to this bot's store and clusters, and the ports between the
runs and their long actions (cluster jobs, watches).

`action_context` gives a plan's actions their capabilities (take a snapshot, compare two, run the
checks, start a watch or a job). `StepLongActions` is what the runs ask of the long actions
(`bot.core.live.LongActions`); the long actions report back through `bot.core.live.StepReports`,
which `RunService` implements. `AfterAbortOffer` listens to the runs: an aborted run that had
cordoned nodes is offered an uncordon job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from bot.adapters.store import Store
from bot.core.actions.base import ActionContext, DiffSummary
from bot.core.checks import service as checks
from bot.core.checks.findings import Cover, Report
from bot.core.checks.logprobe import log_probe
from bot.core.checks.waivers import active_waivers, seen_of
from bot.core.clusters import group_labels, pick_cluster
from bot.core.evidence.baseline import analysis_queries, take_baseline
from bot.core.evidence.baseline import summary as baseline_summary
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.apphealth import app_scope, unhealthy_now
from bot.core.jobs.common import JobCluster
from bot.core.jobs.service import JobService
from bot.core.live import LiveSection
from bot.core.rules import load_rules
from bot.core.runs import machine as R
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.projection import ClusterReader
from bot.core.snapshots.provider import provider_of
from bot.core.watches.service import WatchService
from bot.errors import ClusterError, EvidenceUnavailable, UserError
from bot.records import ActionCall, ActionRequest, ClusterConfig, ImageChecks


def watch_channel(store: Store, run_id: str, operations: str | None) -> str:
    """A run's watch streams into the run's thread: the channel of the run's card (else the
    operations channel)."""
    card = store.messages(run_id).get("card") if run_id else None
    return (card.channel if card is not None and card.channel else "") or operations or ""


def run_plan_calls(store: Store, run_id: str) -> list[ActionCall]:
    """Every action call of the run's plan, in plan order (none for a run the store lacks)."""
    from bot.core.runs.plans import parse_plan

    rows = store.run_rows(run_id) if run_id else None
    plan_row = store.plan_by_id(rows[0].plan_id) if rows is not None else None
    if plan_row is None:
        return []
    plan = parse_plan(plan_row.text, source=f"plan {plan_row.name}")
    return [call for step in plan.steps for call in (*step.actions, *step.background)]


def action_context(
    *,
    store: Store,
    clusters: Mapping[str, ClusterConfig],
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime],
    node_group_labels: Sequence[str] | None = None,
    restart_threshold: int,
    rules_paths: Sequence[Path],
    check_ignores: Sequence[Cover] = (),
    image_checks: ImageChecks | None = None,
    operations_channel: str | None = None,
    watches: WatchService | None = None,
    jobs: JobService | None = None,
    evidence: Evidence | None = None,
) -> ActionContext:
    """The capabilities a plan's actions use, bound to this bot's store and clusters (the
    settings' values: `bot.frontdoor.assemble` passes them)."""
    bound = _Capabilities(
        store=store,
        clusters=clusters,
        connect_cluster=connect_cluster,
        clock=clock,
        labels=group_labels(node_group_labels),
        restart_threshold=restart_threshold,
        rules_paths=rules_paths,
        check_ignores=check_ignores,
        image_checks=image_checks,
        operations_channel=operations_channel,
        watches=watches,
        jobs=jobs,
        evidence=evidence,
    )
    return ActionContext(
        take_snapshot=bound.take_snapshot,
        compare_snapshots=bound.compare_snapshots,
        run_check=bound.run_check,
        start_watch=bound.start_watch if watches is not None else None,
        start_job=bound.start_job if jobs is not None else None,
        record_baseline=bound.record_baseline if evidence is not None else None,
    )


@dataclass(frozen=True, kw_only=True)
class _Capabilities:
    """`action_context`'s values, and the capabilities it hands out as bound methods."""

    store: Store
    clusters: Mapping[str, ClusterConfig]
    connect_cluster: Callable[[ClusterConfig], ClusterReader]
    clock: Callable[[], datetime]
    labels: Sequence[str]
    restart_threshold: int
    rules_paths: Sequence[Path]
    check_ignores: Sequence[Cover]
    image_checks: ImageChecks | None
    operations_channel: str | None
    watches: WatchService | None
    jobs: JobService | None
    evidence: Evidence | None

    def take_snapshot(
        self, cluster: str, label: str, taken_by: str
    ) -> tuple[int, str, Mapping[str, int], tuple[tuple[str, str], ...]]:
        config = pick_cluster(self.clusters, cluster)
        reader = self.connect_cluster(config)
        with contextlib.closing(reader):
            stored = snapshots.take_and_store(
                self.store,
                reader,
                label=label,
                taken_by=taken_by,
                now=self.clock(),
                node_group_labels=self.labels,
                logs=log_probe(load_rules(self.rules_paths)),
                provider=provider_of(config),
            )
        gaps = tuple((str(g["resource"]), str(g["reason"])) for g in stored.snap.get("gaps") or ())
        return stored.meta.id, stored.meta.label, stored.snap["counts"], gaps

    def compare_snapshots(
        self, cluster: str, before: str, after: str, replaces: Mapping[str, str]
    ) -> DiffSummary:
        def live() -> dict[str, Any]:
            raise UserError("the diff action compares two stored snapshots; name both")

        return snapshots.compare(
            self.store,
            before,
            after,
            cluster=pick_cluster(self.clusters, cluster),
            live=live,
            restart_threshold=self.restart_threshold,
            replaces=replaces,
        )

    def run_check(self, cluster: str, target: str | None) -> Report:
        config = pick_cluster(self.clusters, cluster)
        reader = self.connect_cluster(config)
        with contextlib.closing(reader):
            report = checks.check_cluster(
                reader,
                target=target,
                waivers=active_waivers(self.store, cluster=config.name),
                now=self.clock(),
                ignores=self.check_ignores,
                rules=load_rules(self.rules_paths),
                extras=checks.default_extras(
                    now=self.clock().timestamp(), cluster=config, images=self.image_checks
                ),
            )
        # The cluster's last check: a waiver asked after it is compared with what it found.
        self.store.save_check_seen(seen_of(report, cluster=config.name, at=self.clock()))
        return report

    def start_watch(self, request: ActionRequest) -> str:
        from bot.core.actions.watch import target_and_stop, words

        assert self.watches is not None
        args = dict(request.call.args)
        target, stop = target_and_stop(args)
        cluster = pick_cluster(self.clusters, request.cluster)
        row = self.watches.start(
            cluster=cluster.name,
            channel=watch_channel(self.store, request.run_id, self.operations_channel),
            started_by=f"run:{request.run_id}",
            nodegroups=target.nodegroups,
            namespaces=words(args.get("namespace", "")),
            target=target,
            stop=stop,
            run_id=request.run_id,
            step_id=request.step_id,
        )
        return f"watch {row.id} started on {cluster.name}; the step ends with its verdict"

    def record_baseline(self, request: ActionRequest, snapshot_id: int) -> str:
        assert self.evidence is not None
        config = pick_cluster(self.clusters, request.cluster)
        cluster = config.name
        alerts = metrics = None
        with contextlib.suppress(UserError):
            alerts = self.evidence.alerts(cluster)
        with contextlib.suppress(UserError):
            metrics = self.evidence.metrics(cluster)
        calls = run_plan_calls(self.store, request.run_id) if request.run_id else []
        scope = app_scope(calls)
        if not request.run_id or (alerts is None and metrics is None and scope is None):
            return ""

        def apps() -> Mapping[str, str]:
            assert scope is not None
            try:
                reader = self.connect_cluster(config)
                with contextlib.closing(reader):
                    return unhealthy_now(cast(JobCluster, reader), scope)
            except ClusterError as exc:
                raise EvidenceUnavailable(exc.user_message) from None

        now = self.clock()
        body = take_baseline(
            alerts=alerts,
            metrics=metrics,
            queries=analysis_queries(calls),
            now=now,
            apps=apps if scope is not None else None,
        )
        self.store.save_evidence_baseline(
            snapshot_id=snapshot_id, run_id=request.run_id, cluster=cluster, taken_at=now, body=body
        )
        return baseline_summary(body)

    def start_job(self, request: ActionRequest) -> str:
        assert self.jobs is not None
        cluster = pick_cluster(self.clusters, request.cluster)
        return self.jobs.start(request, cluster=cluster.name)


class StepLongActions:
    """The runs' view of their long actions (`bot.core.live.LongActions`), read from the store."""

    def __init__(self, store: Store, jobs: JobService) -> None:
        self.store = store
        self.jobs = jobs

    def live(self, run_id: str, step_id: str) -> bool:
        watch = self.store.watch_of_step(run_id, step_id)
        return watch is not None and watch.state == "live"

    def driven(self, run_id: str, step_id: str) -> bool:
        job = self.store.job_of_step(run_id, step_id)
        return job is not None and job.state == "live"

    def sections(self, run_id: str) -> Sequence[LiveSection]:
        return self.jobs.live_sections(run_id)


class AfterAbortOffer:
    """A run listener: an aborted run that cordoned nodes is offered an uncordon job."""

    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs

    def run_ended(self, run: R.Run) -> None:
        if run.state is R.RunState.ABORTED:
            self.jobs.offer_after_abort(run.id, cluster=run.plan.cluster)

    def step_succeeded(self, run: R.Run, step_id: str) -> None:
        pass
