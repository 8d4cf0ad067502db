"""Builds the bot's parts from the settings: the one place production defaults are chosen.

Front doors call `build_services`; tests call it too and swap one argument (a stub's URL, a
registry with an extra subcommand) instead of patching anything.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.adapters.slack_budget import SlackStats
from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext, DiffSummary
from bot.core.announcements.service import AnnouncementService
from bot.core.checks import service as checks
from bot.core.checks.findings import Report
from bot.core.checks.rules import load_rules
from bot.core.checks.waivers import active_covers
from bot.core.coalesce import CoalescingPoster
from bot.core.command import Registry
from bot.core.delivery import Deliveries, Poster, new_owner
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.service import AFTER_ABORT, JobService
from bot.core.people import Directory, StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import FileUploader, RunCards
from bot.core.runs.dryrun import GateDryRuns
from bot.core.runs.service import RunService
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, ClusterReader
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.core.watches.service import WatchService
from bot.errors import UserError
from bot.records import ActionRequest, ClusterConfig, JobRow
from bot.router import Router
from bot.settings import Settings

if TYPE_CHECKING:
    from slack_sdk import WebClient


@dataclass(kw_only=True)
class Services:
    settings: Settings
    store: Store
    registry: Registry
    #: Posting exactly once, and settling posts a crash left unfinished (None without Slack).
    deliveries: Deliveries | None
    directory: Directory
    router: Router
    web_client: WebClient | None
    runs: RunService
    announcements: AnnouncementService
    #: Watches (issue 13): rows and publishing; the triggers front door drives them.
    watches: WatchService
    #: Cluster jobs (issue 15): cordon, drain, restart, node-group waits; driven by the triggers door.
    jobs: JobService
    #: Card edits coalesced per card; the front door starts its flusher and stops it (None without Slack).
    edits: CoalescingPoster | None = None
    #: Figures about the bot's Slack calls (calls by method and result, 429s, time waited).
    slack_stats: SlackStats | None = None
    #: This process's name: on the posts it claims, and as its replica name on the leader's lease.
    owner: str = ""
    #: Where the services record what they do (`bot.frontdoor.metrics.Metrics` when serving).
    telemetry: Telemetry = NO_TELEMETRY

    def close(self) -> None:
        if self.edits is not None:
            # The last state of every card goes out before the database closes.
            self.edits.stop()
        self.store.close()


def build_services(
    settings: Settings,
    *,
    registry: Registry | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    with_slack: bool = True,
    connect_cluster: Callable[[ClusterConfig], ClusterReader] | None = None,
    telemetry: Telemetry = NO_TELEMETRY,
) -> Services:
    from commands import build_registry

    store = Store.open(settings.database_url)
    registry = registry or build_registry()
    web_client = None
    directory: Directory = StaticDirectory()
    poster: Poster | None = None
    immediate: Poster | None = None
    edits: CoalescingPoster | None = None
    slack_stats = SlackStats()
    fetch_file = None
    uploader: FileUploader | None = None
    if with_slack and settings.secrets.bot_token:
        from bot.adapters.slack import SlackDirectory, SlackGateway, make_web_client
        from bot.adapters.slack_budget import BudgetConfig, SlackBudget

        on_call = telemetry.slack_call if telemetry is not NO_TELEMETRY else None
        web_client = make_web_client(
            settings.secrets.bot_token,
            settings.secrets.api_url,
            on_call=on_call,
            on_rate_limited=telemetry.slack_rate_limited if telemetry is not NO_TELEMETRY else None,
        )
        # The bot's own calls share one workspace budget, which alone retries them.
        budget = SlackBudget(
            BudgetConfig(
                updates_per_minute=settings.slack_updates_per_minute,
                posts_per_second=settings.slack_posts_per_second,
            ),
            stats=slack_stats,
        )
        budgeted = make_web_client(
            settings.secrets.bot_token, settings.secrets.api_url, sdk_retries=False, on_call=on_call
        )
        # Role checks keep the SDK's own retries: they must not queue behind card edits.
        directory = SlackDirectory(web_client)
        gateway = SlackGateway(budgeted, budget=budget)
        fetch_file = gateway.download_file
        uploader = gateway
        # Card edits: at most one per card per interval, the last state always delivered.
        edits = CoalescingPoster(
            gateway, interval=settings.slack_edit_interval.total_seconds(), clock=time.monotonic
        )
        if telemetry is not NO_TELEMETRY:
            edits.on_outcome = telemetry.card_update
        immediate, poster = gateway, edits
    from bot.adapters.kube import Cluster

    connect = connect_cluster or Cluster.connect
    # This process's name on the posts it claims: a claim left by a process that is gone is settled.
    owner = new_owner()
    cards = deliveries = None
    labels = settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS
    job_registry = default_jobs(labels, load_rules(settings.rules_paths()))
    if poster is not None:
        deliveries = Deliveries(store=store, poster=poster, clock=clock, owner=owner, immediate=immediate)
        if edits is not None:
            edits.on_gone = deliveries.repost_gone
            # Sends due card edits until `Services.close` stops it (and flushes what is left).
            edits.start()
        cards = RunCards(
            deliveries=deliveries,
            renderer=Renderer(settings.template_dirs()),
            clock=clock,
            operations_channel=settings.channels.operations,
            dry_runs=GateDryRuns(
                store=store,
                jobs=job_registry,
                connect=lambda name: connect(snapshots.pick_cluster(settings.clusters, name)),
                clock=clock,
            ),
            # The run's report goes into its thread when it ends (Slack's file upload).
            files=uploader,
        )
    watches = WatchService(
        store=store,
        deliveries=deliveries,
        renderer=Renderer(settings.template_dirs()),
        clock=clock,
        owner=owner,
        node_group_labels=settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS,
        rules=load_rules(settings.rules_paths()),
    )
    jobs = JobService(
        store=store,
        registry=job_registry,
        deliveries=deliveries,
        directory=directory,
        clock=clock,
        owner=owner,
    )
    runs = RunService(
        store=store,
        directory=directory,
        clock=clock,
        cards=cards,
        actions=default_registry(),
        action_context=action_context(
            settings=settings, store=store, connect_cluster=connect, clock=clock, watches=watches, jobs=jobs
        ),
    )
    announcements = AnnouncementService(
        store=store,
        clock=clock,
        poster=poster,
        templates_dir=settings.templates_dir,
        channel=settings.channels.announcements,
        offsets=settings.announcement_offsets,
        grace=settings.announcement_grace,
        owner=owner,
    )
    # The end of a scheduled run, and each step it asks to announce, from the transition itself.
    runs.on_ended = announcements.run_ended
    runs.on_step_succeeded = announcements.step_succeeded
    bind_jobs(runs, jobs)
    runs.owner = owner
    if not store.single_host:
        # Several replicas: a step another live replica runs is left to it at a takeover.
        runs.live_runners = lambda: store.live_replicas(settings.lease_duration) | {owner}
    runs.telemetry = announcements.telemetry = telemetry
    router = Router(
        registry=registry,
        settings=settings,
        store=store,
        directory=directory,
        clock=clock,
        connect_cluster=connect,
        runs=runs,
        fetch_file=fetch_file,
        announcements=announcements,
        watches=watches,
        jobs=jobs,
        telemetry=telemetry,
    )
    return Services(
        settings=settings,
        store=store,
        deliveries=deliveries,
        registry=registry,
        directory=directory,
        router=router,
        web_client=web_client,
        runs=runs,
        announcements=announcements,
        watches=watches,
        jobs=jobs,
        edits=edits,
        slack_stats=slack_stats,
        owner=owner,
        telemetry=telemetry,
    )


def action_context(
    *,
    settings: Settings,
    store: Store,
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime],
    watches: WatchService | None = None,
    jobs: JobService | None = None,
) -> ActionContext:
    """The capabilities a plan's actions use, bound to this bot's store and clusters."""
    labels = settings.node_group_labels or DEFAULT_NODE_GROUP_LABELS

    def take_snapshot(cluster: str, label: str, taken_by: str) -> tuple[int, str, Mapping[str, int]]:
        reader = connect_cluster(snapshots.pick_cluster(settings.clusters, cluster))
        with contextlib.closing(reader):
            stored = snapshots.take_and_store(
                store, reader, label=label, taken_by=taken_by, now=clock(), node_group_labels=labels
            )
        return stored.meta.id, stored.meta.label, stored.snap["counts"]

    def compare_snapshots(cluster: str, before: str, after: str) -> DiffSummary:
        def live() -> dict[str, Any]:
            raise UserError("the diff action compares two stored snapshots; name both")

        return snapshots.compare(
            store,
            before,
            after,
            cluster=snapshots.pick_cluster(settings.clusters, cluster),
            live=live,
            restart_threshold=settings.restart_threshold,
        )

    def run_check(cluster: str, target: str | None) -> Report:
        config = snapshots.pick_cluster(settings.clusters, cluster)
        reader = connect_cluster(config)
        with contextlib.closing(reader):
            return checks.run_check(
                reader,
                target=target,
                rules=load_rules(settings.rules_paths()),
                extras=checks.default_extras(now=clock().timestamp()),
                covers=active_covers(store, settings.check_ignores, cluster=config.name, now=clock()),
            )

    def start_watch(request: ActionRequest) -> str:
        from bot.core.actions.watch import target_and_stop, words

        assert watches is not None
        args = dict(request.call.args)
        target, stop = target_and_stop(args)
        cluster = snapshots.pick_cluster(settings.clusters, request.cluster)
        # A run's watch streams into the run's thread: the channel of the run's card.
        card = store.messages(request.run_id).get("card") if request.run_id else None
        row = watches.start(
            cluster=cluster.name,
            channel=(card.channel if card is not None and card.channel else "")
            or settings.channels.operations
            or "",
            started_by=f"run:{request.run_id}",
            nodegroups=target.nodegroups,
            namespaces=words(args.get("namespace", "")),
            target=target,
            stop=stop,
            run_id=request.run_id,
            step_id=request.step_id,
        )
        return f"watch {row.id} started on {cluster.name}; the step ends with its verdict"

    def start_job(request: ActionRequest) -> str:
        assert jobs is not None
        cluster = snapshots.pick_cluster(settings.clusters, request.cluster)
        return jobs.start(request, cluster=cluster.name)

    return ActionContext(
        take_snapshot=take_snapshot,
        compare_snapshots=compare_snapshots,
        run_check=run_check,
        start_watch=start_watch if watches is not None else None,
        start_job=start_job if jobs is not None else None,
    )


def bind_jobs(runs: RunService, jobs: JobService) -> None:
    """Tie the cluster jobs to the runs: a job's end commits its step, its progress shows in the
    run's card, a job whose driver died interrupts its step (people decide), and a restart
    never continues a job by itself (only a live watch resumes without people)."""
    store = runs.store

    def long_action_live(run_id: str, step_id: str) -> bool:
        watch = store.watch_of_step(run_id, step_id)
        return watch is not None and watch.state == "live"

    runs.long_action_live = long_action_live

    def job_live(run_id: str, step_id: str) -> bool:
        job = store.job_of_step(run_id, step_id)
        return job is not None and job.state == "live"

    runs.job_live = job_live

    def ended(row: JobRow, ok: bool, detail: str) -> None:
        if row.step_id != AFTER_ABORT:
            runs.finish_long(row.run_id, row.step_id, ok=ok, detail=f"{row.kind} job {row.id}: {detail}")

    def interrupted(row: JobRow) -> None:
        if row.step_id != AFTER_ABORT:
            runs.interrupt_step(row.run_id, row.step_id, epoch=row.epoch)

    jobs.on_ended = ended
    jobs.on_interrupted = interrupted
    jobs.publish_run = lambda run_id: runs.publish(runs.load(run_id))
    if runs.cards is not None:
        runs.cards.live = jobs.live_sections
    announce_end = runs.on_ended

    def run_ended(run: R.Run) -> None:
        if announce_end is not None:
            announce_end(run)
        if run.state is R.RunState.ABORTED:
            jobs.offer_after_abort(run.id, cluster=run.plan.cluster)

    runs.on_ended = run_ended
