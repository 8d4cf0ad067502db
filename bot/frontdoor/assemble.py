"""Assembles the bot from the settings: the one place its parts are built and tied together.

`assemble` builds this replica's standing first (`bot.core.leadership.Leadership`: starting, then
solo, leader or follower), then the store, the services, the duty engine (watches, cluster jobs),
the triggers and the elector, and ties them with constructor arguments: the engine, the triggers
and the elector are each given the one standing when built, and no part is given a callback or a
listener after it was built (tests/test_architecture.py checks it on the syntax tree). Every front door calls it — `serve` (Slack), the terminal's `exec`, `rehearse` (a text
poster and the sim as its cluster) — and so does the test harness, swapping one argument (a
stub's URL, a poster, a clock) instead of patching anything.

It lives in the front door because it picks the adapters (Slack, Kubernetes) and builds the
triggers and the elector, which are front-door parts; core never imports it.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.adapters.grafana import GrafanaAnnotations
from bot.adapters.slack_budget import SlackStats
from bot.adapters.store import Store, fencing
from bot.core import providers
from bot.core.actions import default_registry
from bot.core.announcements.service import AnnouncementService
from bot.core.clusters import group_labels, pick_cluster
from bot.core.coalesce import CoalescingPoster
from bot.core.command import Registry
from bot.core.delivery import Deliveries, FileUploader, Poster, new_owner
from bot.core.duties import Duties
from bot.core.evidence.view import StoredEvidence
from bot.core.fleets.card import FleetCards
from bot.core.fleets.evidence import AlertsSoak
from bot.core.fleets.service import FleetService, api_server_answers
from bot.core.jobs.alerts import Evidence
from bot.core.jobs.base import JobRegistry
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.service import JobService
from bot.core.leadership import Leadership
from bot.core.live import StepReports
from bot.core.people import Directory, StaticDirectory
from bot.core.providers import ProviderAccess, ProviderConfig
from bot.core.rendering import Renderer
from bot.core.rules import Rule, load_rules
from bot.core.runs.capabilities import AfterAbortOffer, StepLongActions, action_context
from bot.core.runs.cards import RunCards
from bot.core.runs.dryrun import GateDryRuns
from bot.core.runs.prs import PullRequests
from bot.core.runs.service import RunService
from bot.core.snapshots.projection import ClusterReader
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.core.tenure import AWS_UPDATES, KUBE_WRITES, GuardedCalls, Tenure, guard_silences
from bot.core.watches.service import WatchService
from bot.frontdoor.acting import JOBS, JobDuty
from bot.frontdoor.hooks import HOOKS_PATH, PipelineHookDoor
from bot.frontdoor.leadership import Elector
from bot.frontdoor.triggers import RUN_TICK_SECONDS, SYNC_SECONDS, Timer, Triggers
from bot.frontdoor.watching import WATCHES, WatchDuty
from bot.records import ClusterConfig, Fence
from bot.router import Router
from bot.settings import Settings

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

    from slack_sdk import WebClient

log = logging.getLogger(__name__)

#: The timeouts the lease check uses for a job's Kubernetes write when the client names none, and
#: for an AWS update call (botocore's connect and read timeouts in `bot.adapters.providers.eks.connect`);
#: each is fitted to the lease (`Tenure.fit`) and the call bounded to the figure fitted.
KUBE_CALL_TIMEOUT = 10.0
AWS_CALL_TIMEOUT = 35.0
#: An Alertmanager call's connect and read timeouts together (`bot.adapters.evidence_http`: 5 s each).
ALERTMANAGER_CALL_TIMEOUT = 10.0
#: The timer that drives the live fleet runs.
FLEET_TICKER = "fleet-ticker"
#: De-duplication keys only matter while Slack may still retry (minutes); a week is kept for audits.
DELIVERY_KEYS_KEPT = timedelta(days=7)


@dataclass(kw_only=True)
class Services:
    settings: Settings
    store: Store
    registry: Registry
    #: Posting exactly once, and settling posts a crash left unfinished (None without a poster).
    deliveries: Deliveries | None
    directory: Directory
    router: Router
    web_client: WebClient | None
    runs: RunService
    announcements: AnnouncementService
    #: Watches (issue 13): rows and publishing; driven by the duty engine.
    watches: WatchService
    #: Cluster jobs (issue 15): cordon, drain, restart, node-group waits; driven by the duty engine.
    jobs: JobService
    #: This replica's standing (starting → solo | leader | follower), built first and read by the
    #: duty engine, the triggers and the elector.
    leadership: Leadership
    #: The engine of long duties: the watches' and the jobs' drivers (started by the triggers).
    duties: Duties
    #: Fleet runs (issue 41): parents of child runs, driven by the fleet ticker.
    fleets: FleetService
    #: Every timer the bot has (not started: `serve` starts them, tests run them by hand).
    triggers: Triggers
    #: Who leads (not started: `serve` tries the lease).
    elector: Elector
    #: Card edits coalesced per card; started here, stopped by `close` (None without Slack).
    edits: CoalescingPoster | None = None
    #: Figures about the bot's Slack calls (calls by method and result, 429s, time waited).
    slack_stats: SlackStats | None = None
    #: This process's name: on the posts it claims, and as its replica name on the leader's lease.
    owner: str = ""
    #: The replicas alive now (several replicas on one database); None on one host.
    live_owners: Callable[[], set[str]] | None = None
    #: Where the services record what they do (`bot.frontdoor.metrics.Metrics` when serving).
    telemetry: Telemetry = NO_TELEMETRY
    #: Step annotations in Grafana (`grafana:` in the settings; None: off).
    grafana: GrafanaAnnotations | None = None
    #: `POST /hooks/pipeline` (`pipeline_hooks:` in the settings; None: off, the path is a 404).
    hooks: PipelineHookDoor | None = None

    def http_posts(self) -> dict[str, Callable[[WSGIEnvironment], tuple[str, bytes]]]:
        """The HTTP door's POST paths besides Slack's: the pipeline hooks, when configured."""
        return {HOOKS_PATH: self.hooks} if self.hooks is not None else {}

    def close(self) -> None:
        if self.grafana is not None:
            # What is queued gets a last chance; a Grafana that is down costs a few seconds at most.
            self.grafana.stop()
        if self.edits is not None:
            # The last state of every card goes out before the database closes.
            self.edits.stop()
        self.store.close()


def assemble(
    settings: Settings,
    *,
    poster: Poster | None = None,
    directory: Directory | None = None,
    connect_cluster: Callable[[ClusterConfig], ClusterReader] | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    registry: Registry | None = None,
    with_slack: bool = True,
    telemetry: Telemetry = NO_TELEMETRY,
    timers: Sequence[Timer] = (),
    on_elected: Sequence[Callable[[Fence], object]] = (),
    on_deposed: Sequence[Callable[[int], object]] = (),
    job_wait_scale: float = 1.0,
    job_registry: JobRegistry | None = None,
    duty_options: Mapping[str, Mapping[str, Any]] | None = None,
    fleet_children_in_turn: bool = False,
) -> Services:
    """The bot, built from `settings`. Slack (the poster and the directory) comes from the
    settings' bot token unless `poster`/`directory` are given (the rehearsal's text poster) or
    `with_slack` is False; `connect_cluster` defaults to the kube adapter. `timers` are extra
    interval timers; `on_elected` is told after this replica took over (recovered, timers
    running), `on_deposed` after it started following (with the epoch it had). `job_wait_scale`:
    real seconds per second a cluster job waits between ticks (a rehearsal's sim runs faster).
    `job_registry` replaces the cluster jobs the settings make (a test's own kinds of job);
    `duty_options` are each duty kind's driver options by kind (`{"jobs": {"heartbeat_seconds":
    0.5}}`: a test's shorter beats). `fleet_children_in_turn` is the fleets' `children_in_turn` (a
    rehearsal creates each child's run as it plays it; False: as the fleet starts it)."""
    from commands import build_registry

    store = Store.open(settings.database_url)
    registry = registry or build_registry()
    base = _base(
        settings,
        store,
        poster=poster,
        directory=directory,
        connect_cluster=connect_cluster,
        clock=clock,
        with_slack=with_slack,
        telemetry=telemetry,
        job_registry=job_registry,
    )
    directory, slack, leadership, owner = base.directory, base.slack, base.leadership, base.owner
    live_owners = base.live_owners
    edits = slack.edits if slack is not None else None
    deliveries = _deliveries(base)

    # The engine of long duties, reading the standing; the triggers below run its scans and start
    # it (a wake scans at once from then on).
    duties = Duties(leadership=leadership, started=False)
    # The one construction cycle: the runs start long actions (jobs, watches) and read their
    # live sections, and the long actions report back to the runs (a step finished or was
    # interrupted, a card to refresh). The long actions are built first, with a function that
    # reads `runs` below once it is bound: they call it when they report, and no long action
    # reports before a run started it.
    watches, jobs = _long_duties(base, deliveries, duties, lambda: runs, duty_options or {}, job_wait_scale)
    long_actions = StepLongActions(store, jobs)
    pull_requests = _pull_requests(settings)
    cards = _run_cards(base, deliveries, long_actions, pull_requests)
    # A schedule made or cut reaches the timers at once (`triggers` is built below, from these;
    # nothing is announced before the timers started).
    announcements = _announcements(base, on_change=lambda: triggers.changed())
    # Observed after each commit, on the replica that committed: once per change of a step.
    grafana = GrafanaAnnotations(settings.grafana) if settings.grafana is not None else None
    runs = _run_service(
        base,
        cards=cards,
        watches=watches,
        jobs=jobs,
        long_actions=long_actions,
        announcements=announcements,
        grafana=grafana,
        pull_requests=pull_requests,
    )
    fleets = _fleets(base, runs, deliveries, children_in_turn=fleet_children_in_turn)
    triggers = _triggers(base, announcements, runs, duties, fleets, timers)

    elector = _elector(base, leadership, runs, triggers, on_elected, on_deposed)
    router = _router(base, registry, runs, announcements, watches, jobs, fleets)
    return Services(
        settings=settings,
        store=store,
        deliveries=deliveries,
        registry=registry,
        directory=directory,
        router=router,
        web_client=slack.web_client if slack is not None else None,
        runs=runs,
        announcements=announcements,
        watches=watches,
        jobs=jobs,
        leadership=leadership,
        duties=duties,
        fleets=fleets,
        triggers=triggers,
        elector=elector,
        edits=edits,
        slack_stats=slack.stats if slack is not None else SlackStats(),
        owner=owner,
        live_owners=live_owners,
        telemetry=telemetry,
        grafana=grafana,
        hooks=_hooks(base, runs),
    )


@dataclass(frozen=True, kw_only=True)
class _Base:
    """What the services are built from: the settings, the store, this replica's name and lease,
    Slack (None without it), the clusters' connections, the rules and the evidence sources."""

    settings: Settings
    store: Store
    clock: Callable[[], datetime]
    owner: str
    live_owners: Callable[[], set[str]] | None
    telemetry: Telemetry
    tenure: Tenure
    directory: Directory
    slack: _Slack | None
    connect: Callable[[ClusterConfig], ClusterReader]
    connect_named: Callable[[str], Any]
    labels: tuple[str, ...]
    rules: Sequence[Rule]
    evidence: Evidence
    job_registry: JobRegistry
    leadership: Leadership
    #: Where the services post: the one given, else Slack's card edits (None: no Slack here).
    poster: Poster | None


def _base(
    settings: Settings,
    store: Store,
    *,
    poster: Poster | None,
    directory: Directory | None,
    connect_cluster: Callable[[ClusterConfig], ClusterReader] | None,
    clock: Callable[[], datetime],
    with_slack: bool,
    telemetry: Telemetry,
    job_registry: JobRegistry | None,
) -> _Base:
    """This replica's name, lease and standing, Slack, the clusters' connections, the rules, the
    clouds and the evidence sources: what every service is then built from."""
    store = Store.open(settings.database_url)
    # This process's name on the posts it claims: a claim left by a process that is gone is settled.
    owner = new_owner()
    # This replica's lease on its own clock, built first: every part that calls out (Slack,
    # Kubernetes writes of jobs, AWS updates) checks it right before the call (`bot.core.tenure`).
    # No call asks for more than the lease holds between two renewals in time.
    tenure = Tenure(room=(settings.lease_duration - settings.lease_renew).total_seconds())
    # This replica's standing, before every part that reads it: starting until the elector or
    # the timers decide (solo, leader or follower).
    leadership = Leadership(replica=owner, tenure=tenure, check_fence=store.check_fence)
    live_owners: Callable[[], set[str]] | None = None
    if not store.single_host:
        # Several replicas: a post, an inbox item or a step a live replica claimed is its own —
        # until its lease ran out plus the margin (its calls in flight have ended by then).
        def live_owners() -> set[str]:
            return store.live_replicas(settings.lease_duration + settings.lease_grace) | {owner}

    slack = _slack(settings, telemetry, tenure) if with_slack and poster is None else None
    directory = directory or (slack.directory if slack is not None else StaticDirectory())
    poster = poster or (slack.edits if slack is not None else None)
    from bot.adapters.kube import Cluster

    # Every Kubernetes API request counted and timed (`upgrade_bot_kube_requests_total`).
    connect = connect_cluster or (lambda config: Cluster.connect(config, observe=telemetry.kube_request))

    def connect_named(name: str) -> Any:
        return connect(pick_cluster(settings.clusters, name))

    labels = group_labels(settings.node_group_labels)
    rules = load_rules(settings.rules_paths())
    eks, aks, gke = _cloud_providers(settings, tenure)
    evidence = _evidence(settings, tenure)
    job_registry = job_registry or default_jobs(labels, rules, eks=eks, evidence=evidence, aks=aks, gke=gke)
    return _Base(
        settings=settings,
        store=store,
        clock=clock,
        owner=owner,
        live_owners=live_owners,
        telemetry=telemetry,
        tenure=tenure,
        directory=directory,
        slack=slack,
        connect=connect,
        connect_named=connect_named,
        labels=labels,
        rules=rules,
        evidence=evidence,
        job_registry=job_registry,
        leadership=leadership,
        poster=poster,
    )


def _announcements(b: _Base, *, on_change: Callable[[], object]) -> AnnouncementService:
    """The window announcements; `on_change` tells the timers of a schedule made or cut."""
    settings, store, clock, poster, owner = b.settings, b.store, b.clock, b.poster, b.owner
    telemetry, live_owners = b.telemetry, b.live_owners
    return AnnouncementService(
        store=store,
        clock=clock,
        poster=poster,
        templates_dir=settings.templates_dir,
        channel=settings.channels.announcements,
        offsets=settings.announcement_offsets,
        grace=settings.announcement_grace,
        owner=owner,
        telemetry=telemetry,
        live_owners=live_owners,
        listeners=[on_change],
    )


def _pull_requests(settings: Settings) -> PullRequests | None:
    # The PRs plan steps name (issue 43): githubkit is imported only when `github:` is configured.
    if settings.github is None:
        return None
    from bot.adapters.github import GitHubPullRequests

    return GitHubPullRequests(access=settings.github)


def _triggers(
    b: _Base,
    announcements: AnnouncementService,
    runs: RunService,
    duties: Duties,
    fleets: FleetService,
    timers: Sequence[Timer],
) -> Triggers:
    settings, store, leadership = b.settings, b.store, b.leadership
    # Fleets move as often as runs: a child's end is seen within one tick.
    timers = (*timers, (FLEET_TICKER, RUN_TICK_SECONDS, lambda _now: fleets.tick()))

    # With several replicas a schedule made on a follower reaches the leader by its sync: as
    # often as the lease is renewed, instead of every SYNC_SECONDS.
    sync = SYNC_SECONDS if store.single_host else min(SYNC_SECONDS, settings.lease_renew.total_seconds())
    # Every timer: announcements, the run ticker, the sync (the triggers' own), each kind of
    # long duty's scan, and the front door's `timers`.
    return Triggers(
        announcements=announcements,
        runs=runs,
        sync_seconds=sync,
        duties=duties,
        timers=timers,
        leadership=leadership,
    )


def _router(
    b: _Base,
    registry: Registry,
    runs: RunService,
    announcements: AnnouncementService,
    watches: WatchService,
    jobs: JobService,
    fleets: FleetService,
) -> Router:
    settings, store, directory, clock, connect = b.settings, b.store, b.directory, b.clock, b.connect
    telemetry, slack = b.telemetry, b.slack
    return Router(
        registry=registry,
        settings=settings,
        store=store,
        directory=directory,
        clock=clock,
        connect_cluster=connect,
        runs=runs,
        fetch_file=slack.gateway.download_file if slack is not None else None,
        announcements=announcements,
        watches=watches,
        jobs=jobs,
        telemetry=telemetry,
        fleets=fleets,
    )


def _hooks(b: _Base, runs: RunService) -> PipelineHookDoor | None:
    """`POST /hooks/pipeline`, when `pipeline_hooks:` is configured."""
    settings, store, clock = b.settings, b.store, b.clock
    if not settings.pipeline_hooks:
        return None
    return PipelineHookDoor(
        secrets=settings.pipeline_hooks, store=store, runs=runs, clock=lambda: clock().timestamp()
    )


def cluster_jobs(settings: Settings) -> JobRegistry:
    """The cluster actions with each cluster's cloud provider, for a terminal command that checks
    a plan's actions without starting a bot (`plan validate --check-cluster`): nothing is updated."""
    eks, aks, gke = _cloud_providers(settings, Tenure())
    return default_jobs(group_labels(settings.node_group_labels), eks=eks, aks=aks, gke=gke)


def _cloud_providers(
    settings: Settings, tenure: Tenure
) -> tuple[ProviderAccess, ProviderAccess, ProviderAccess]:
    """The EKS, AKS and GKE providers of the clusters that name one, their updates under the lease."""
    # Each cloud's actions reach it through each cluster's `provider: {eks|aks|gke: …}` (the cloud's
    # SDK only when one is used). An update call is made only while this replica leads with the
    # call's time left, and its client (which never retries it) gives up within that time.
    within = tenure.fit(AWS_CALL_TIMEOUT)

    def access(kind: str, configs: Mapping[str, ProviderConfig | None]) -> ProviderAccess:
        return ProviderAccess(
            configs,
            connect=functools.partial(providers.connect, update_within=within),
            kind=kind,
            guard=lambda client: GuardedCalls(
                client, guarded=AWS_UPDATES, check=tenure.may_lead, timeout=within
            ),
            elsewhere=named,
        )

    clusters = settings.clusters.values()
    # Each cluster's own cloud, where its configuration names one: the other clouds' refusals say it.
    named = {c.name: kind for c in clusters for kind in ("eks", "aks", "gke") if getattr(c, kind) is not None}
    return (
        access("eks", {c.name: c.eks for c in clusters}),
        access("aks", {c.name: c.aks for c in clusters}),
        access("gke", {c.name: c.gke for c in clusters}),
    )


def _evidence(settings: Settings, tenure: Tenure) -> Evidence:
    # The evidence gate's Alertmanagers (`clusters.NAME.alertmanager`), scoped by alert_matchers.
    from bot.adapters.alertmanager import Alertmanager
    from bot.adapters.prometheus import Prometheus

    # A silence is put or cut only while this replica leads with the call's time left (a paused
    # leader must not extend a silence its successor already cut), and the call ends within it.
    am_within = tenure.fit(ALERTMANAGER_CALL_TIMEOUT)

    return Evidence(
        {
            c.name: (
                guard_silences(
                    Alertmanager(c.alertmanager, timeout=am_within / 2), tenure, timeout=am_within
                ),
                c.alert_matchers,
            )
            for c in settings.clusters.values()
            if c.alertmanager is not None
        },
        {c.name: Prometheus(c.prometheus) for c in settings.clusters.values() if c.prometheus is not None},
    )


def _deliveries(b: _Base) -> Deliveries | None:
    """Posting exactly once (None without a poster); the card edits start here."""
    poster, edits = b.poster, b.slack.edits if b.slack is not None else None
    settings, store, clock, owner, slack = b.settings, b.store, b.clock, b.owner, b.slack
    live_owners, telemetry, tenure = b.live_owners, b.telemetry, b.tenure
    deliveries = None
    if poster is not None:
        deliveries = Deliveries(
            store=store,
            poster=poster,
            clock=clock,
            owner=owner,
            live_owners=live_owners,
            immediate=slack.gateway if slack is not None else None,
            telemetry=telemetry,
            tenure=tenure,
            send_timeout=slack.gateway.send_timeout("chat.postMessage") if slack is not None else 0.0,
            dead_after_failures=settings.outbox_dead_after_failures,
            dead_after=settings.outbox_dead_after,
        )
        if edits is not None:
            # Sends due card edits until `Services.close` stops it (and flushes what is left);
            # a card Slack says is gone is posted again through the deliveries, built just now.
            edits.start(on_gone=deliveries.repost_gone)

    return deliveries


def _long_duties(
    b: _Base,
    deliveries: Deliveries | None,
    duties: Duties,
    steps: Callable[[], StepReports],
    options: Mapping[str, Mapping[str, Any]],
    job_wait_scale: float,
) -> tuple[WatchService, JobService]:
    """The watches and the cluster jobs, each with its driver in the duty engine."""
    settings, store, clock, owner, telemetry = b.settings, b.store, b.clock, b.owner, b.telemetry
    labels, rules, directory, job_registry = b.labels, b.rules, b.directory, b.job_registry
    connect_named, tenure = b.connect_named, b.tenure
    watches = WatchService(
        store=store,
        deliveries=deliveries,
        renderer=Renderer(settings.template_dirs()),
        clock=clock,
        owner=owner,
        node_group_labels=labels,
        rules=rules,
        steps=steps,
        on_change=lambda: duties.wake(WATCHES),
        stale_after=settings.duty_stale_after,
    )
    jobs = JobService(
        store=store,
        registry=job_registry,
        deliveries=deliveries,
        directory=directory,
        clock=clock,
        owner=owner,
        steps=steps,
        on_change=lambda: duties.wake(JOBS),
        telemetry=telemetry,
        stale_after=settings.duty_stale_after,
    )
    # The settings' timing (`duties:`), which a test's `duty_options` may still override.
    scan_seconds = settings.duty_scan.total_seconds()
    beats = {"heartbeat_seconds": settings.duty_heartbeat.total_seconds()}
    duties.add(
        WatchDuty(
            watches,
            connect_named,
            scan_seconds=scan_seconds,
            telemetry=telemetry,
            **{**beats, **options.get(WATCHES, {})},
        )
    )

    def connect_for_jobs(name: str) -> Any:
        # A job writes to the cluster only while this replica leads with a request's time left.
        # The figure checked bounds the write itself (`Cluster.within`): a lease shorter than the
        # cluster's request timeout is met with a shorter write, not an endless wait.
        cluster = connect_named(name)
        timeout = tenure.fit(float(getattr(cluster, "timeout", KUBE_CALL_TIMEOUT)))
        within = getattr(cluster, "within", None)
        return GuardedCalls(
            cluster,
            guarded=KUBE_WRITES,
            check=tenure.may_lead,
            timeout=timeout,
            bound=within if callable(within) else None,
        )

    duties.add(
        JobDuty(
            jobs,
            connect_for_jobs,
            scan_seconds=scan_seconds,
            wait_scale=job_wait_scale,
            **{**beats, **options.get(JOBS, {})},
        )
    )
    return watches, jobs


def _run_cards(
    b: _Base, deliveries: Deliveries | None, long_actions: StepLongActions, pull_requests: PullRequests | None
) -> RunCards | None:
    """The run cards in Slack (None without a poster)."""
    settings, store, clock, slack, directory = b.settings, b.store, b.clock, b.slack, b.directory
    job_registry, connect_named = b.job_registry, b.connect_named
    cards = None
    if deliveries is not None:
        cards = RunCards(
            deliveries=deliveries,
            renderer=Renderer(settings.template_dirs()),
            clock=clock,
            operations_channel=settings.channels.operations,
            dry_runs=GateDryRuns(store=store, jobs=job_registry, connect=connect_named, clock=clock),
            # The run's report goes into its thread when it ends (Slack's file upload).
            files=slack.uploader if slack is not None else None,
            live=long_actions.sections,
            waive_roles=settings.action_approvers,
            directory=directory,
            # What a gate and the card's Now line show of the alerts (and analyses) a step waits on.
            evidence=StoredEvidence(store),
            pull_requests=pull_requests,
        )
    return cards


def _run_service(
    b: _Base,
    *,
    cards: RunCards | None,
    watches: WatchService,
    jobs: JobService,
    long_actions: StepLongActions,
    announcements: AnnouncementService,
    grafana: GrafanaAnnotations | None,
    pull_requests: PullRequests | None,
) -> RunService:
    """The runs, with the context their actions are given."""
    settings, store, clock, directory, connect = b.settings, b.store, b.clock, b.directory, b.connect
    labels, evidence, owner, live_owners, telemetry = (
        b.labels,
        b.evidence,
        b.owner,
        b.live_owners,
        b.telemetry,
    )
    return RunService(
        store=store,
        directory=directory,
        clock=clock,
        cards=cards,
        actions=default_registry(),
        action_context=action_context(
            store=store,
            clusters=settings.clusters,
            connect_cluster=connect,
            clock=clock,
            node_group_labels=labels,
            restart_threshold=settings.restart_threshold,
            rules_paths=settings.rules_paths(),
            check_ignores=settings.check_ignores,
            image_checks=settings.image_checks,
            operations_channel=settings.channels.operations,
            watches=watches,
            jobs=jobs,
            evidence=evidence,
        ),
        long_actions=long_actions,
        # The end of a run and each step it asks to announce, from the transition itself; then
        # the uncordon offer after an abort.
        listeners=(announcements, AfterAbortOffer(jobs)),
        owner=owner,
        # Several replicas: a step another live replica runs is left to it at a takeover.
        live_runners=live_owners,
        telemetry=telemetry,
        step_observers=(grafana,) if grafana is not None else (),
        pull_requests=pull_requests,
    )


def _fleets(
    b: _Base,
    runs: RunService,
    deliveries: Deliveries | None,
    *,
    children_in_turn: bool,
) -> FleetService:
    settings, store, clock, directory, connect = b.settings, b.store, b.clock, b.directory, b.connect
    evidence = b.evidence
    return FleetService(
        store=store,
        runs=runs,
        clusters=settings.clusters,
        directory=directory,
        clock=clock,
        fleet_dirs=[d / "fleets" for d in settings.template_dirs()],
        plan_dirs=[d / "plans" for d in settings.template_dirs()],
        judge=AlertsSoak(evidence),
        # Each cluster's API server is asked at its turn: an unreachable one is skipped
        # (`skip_unreachable`) or pauses the fleet, never a child run failing at its first call.
        reachable=lambda name: api_server_answers(connect, settings.clusters[name]),
        # The fleet card and its milestones, in the operations channel (None: no Slack here).
        listeners=(
            [FleetCards(deliveries=deliveries, channel=settings.channels.operations, clock=clock)]
            if deliveries is not None
            else []
        ),
        children_in_turn=children_in_turn,
    )


def _elector(
    b: _Base,
    leadership: Leadership,
    runs: RunService,
    triggers: Triggers,
    on_elected: Sequence[Callable[[Fence], object]],
    on_deposed: Sequence[Callable[[int], object]],
) -> Elector:
    """Who leads: taking over recovers what a crash left and drives the timers; following stops them."""
    settings, store, tenure = b.settings, b.store, b.tenure

    def elected(fence: Fence) -> None:
        _recover(store, runs, triggers, fence)
        for listener in on_elected:
            listener(fence)

    def deposed() -> None:
        triggers.follow()
        for listener in on_deposed:
            listener(elector.state.epoch)

    elector = Elector(
        store=store,
        leadership=leadership,
        duration=settings.lease_duration,
        renew=settings.lease_renew,
        on_elected=elected,
        on_deposed=deposed,
        tenure=tenure,
        grace=settings.lease_grace,
    )
    return elector


def _recover(store: Store, runs: RunService, triggers: Triggers, fence: Fence) -> None:
    """This replica now leads: settle what a crash (of any replica) left, then drive the timers.

    Interrupted actions are recovered only here: the replica that ran them no longer leads (it
    died, or handed over), so none is marked interrupted while a live leader runs it.
    """
    with fencing(fence):
        store.forget_deliveries_before(datetime.now(UTC) - DELIVERY_KEYS_KEPT)
        recovered = runs.recover_all()
    if recovered:
        log.info("resumed %s run(s): %s", len(recovered), ", ".join(recovered))
    caught_up = triggers.lead(fence)
    if caught_up:
        log.info(
            "announcements due while the bot was down: %s",
            ", ".join(f"{d.key} {d.action}" for d in caught_up),
        )


@dataclass(frozen=True, kw_only=True)
class _Slack:
    web_client: WebClient
    directory: Directory
    gateway: Any  # bot.adapters.slack.SlackGateway (imported only with a token)
    uploader: FileUploader
    edits: CoalescingPoster
    stats: SlackStats


def _slack(settings: Settings, telemetry: Telemetry, tenure: Tenure) -> _Slack | None:
    """The Slack adapters, from the settings' bot token (None without one)."""
    if not settings.secrets.bot_token:
        return None
    from bot.adapters.slack import SlackDirectory, SlackGateway, make_web_client
    from bot.adapters.slack_budget import BudgetConfig, SlackBudget

    measured = telemetry is not NO_TELEMETRY
    on_call = telemetry.slack_call if measured else None
    web_client = make_web_client(
        settings.secrets.bot_token,
        settings.secrets.api_url,
        on_call=on_call,
        on_rate_limited=telemetry.slack_rate_limited if measured else None,
    )
    stats = SlackStats()
    # The bot's own calls share one workspace budget, which alone retries them.
    budget = SlackBudget(
        BudgetConfig(
            updates_per_minute=settings.slack_updates_per_minute,
            posts_per_second=settings.slack_posts_per_second,
        ),
        stats=stats,
    )
    # The bot's own calls time out well inside the lease: each is made only while the lease
    # outlasts this timeout (`bot.core.tenure`), so a paused replica never sends after it ran out.
    budgeted = make_web_client(
        settings.secrets.bot_token,
        settings.secrets.api_url,
        sdk_retries=False,
        on_call=on_call,
        timeout=settings.slack_timeout,
        tenure=tenure,
    )
    gateway = SlackGateway(budgeted, budget=budget, tenure=tenure)
    return _Slack(
        web_client=web_client,
        # Role checks keep the SDK's own retries: they must not queue behind card edits.
        directory=SlackDirectory(web_client),
        gateway=gateway,
        uploader=gateway,
        # Card edits: at most one per card per interval, the last state always delivered.
        edits=CoalescingPoster(
            gateway,
            interval=settings.slack_edit_interval.total_seconds(),
            clock=time.monotonic,
            on_outcome=telemetry.card_update if measured else None,
        ),
        stats=stats,
    )
