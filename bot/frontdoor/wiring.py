"""Builds the bot's parts from the settings: the one place production defaults are chosen.

Front doors call `build_services`; tests call it too and swap one argument (a stub's URL, a
registry with an extra subcommand) instead of patching anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.adapters.store import Store
from bot.core.actions import default_registry
from bot.core.actions.base import ActionContext, DiffSummary
from bot.core.announcements.service import AnnouncementService
from bot.core.command import Registry
from bot.core.delivery import Deliveries, Poster, new_owner
from bot.core.people import Directory, StaticDirectory
from bot.core.rendering import Renderer
from bot.core.runs.cards import RunCards
from bot.core.runs.service import RunService
from bot.core.snapshots import service as snapshots
from bot.core.snapshots.projection import DEFAULT_NODE_GROUP_LABELS, ClusterReader
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.errors import UserError
from bot.records import ClusterConfig
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
    #: Where the services record what they do (`bot.frontdoor.metrics.Metrics` when serving).
    telemetry: Telemetry = NO_TELEMETRY

    def close(self) -> None:
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
    fetch_file = None
    if with_slack and settings.secrets.bot_token:
        from bot.adapters.slack import SlackDirectory, SlackGateway, make_web_client

        web_client = make_web_client(
            settings.secrets.bot_token,
            settings.secrets.api_url,
            on_call=telemetry.slack_call if telemetry is not NO_TELEMETRY else None,
            on_rate_limited=telemetry.slack_rate_limited if telemetry is not NO_TELEMETRY else None,
        )
        directory = SlackDirectory(web_client)
        gateway = SlackGateway(web_client)
        poster, fetch_file = gateway, gateway.download_file
    from bot.adapters.kube import Cluster

    connect = connect_cluster or Cluster.connect
    # This process's name on the posts it claims: a claim left by a process that is gone is settled.
    owner = new_owner()
    cards = deliveries = None
    if poster is not None:
        deliveries = Deliveries(store=store, poster=poster, clock=clock, owner=owner)
        cards = RunCards(
            deliveries=deliveries,
            renderer=Renderer(settings.template_dirs()),
            clock=clock,
            operations_channel=settings.channels.operations,
        )
    runs = RunService(
        store=store,
        directory=directory,
        clock=clock,
        cards=cards,
        actions=default_registry(),
        action_context=action_context(settings=settings, store=store, connect_cluster=connect, clock=clock),
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
        telemetry=telemetry,
    )


def action_context(
    *,
    settings: Settings,
    store: Store,
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime],
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

    return ActionContext(take_snapshot=take_snapshot, compare_snapshots=compare_snapshots)
