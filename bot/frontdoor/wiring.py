"""Builds the bot's parts from the settings: the one place production defaults are chosen.

Front doors call `build_services`; tests call it too and swap one argument (a stub's URL, a
registry with an extra subcommand) instead of patching anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bot.adapters.store import Store
from bot.core.announcement_service import AnnouncementService
from bot.core.command import Registry
from bot.core.people import Directory, StaticDirectory
from bot.core.rendering import Renderer
from bot.core.run_actions import builtin_runner
from bot.core.run_service import Poster, RunService
from bot.core.snapshot import ClusterReader
from bot.router import Router
from bot.settings import ClusterConfig, Settings

if TYPE_CHECKING:
    from slack_sdk import WebClient


@dataclass(kw_only=True)
class Services:
    settings: Settings
    store: Store
    registry: Registry
    directory: Directory
    router: Router
    web_client: WebClient | None
    runs: RunService
    announcements: AnnouncementService

    def close(self) -> None:
        self.store.close()


def build_services(
    settings: Settings,
    *,
    registry: Registry | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    with_slack: bool = True,
    connect_cluster: Callable[[ClusterConfig], ClusterReader] | None = None,
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

        web_client = make_web_client(settings.secrets.bot_token, settings.secrets.api_url)
        directory = SlackDirectory(web_client)
        gateway = SlackGateway(web_client)
        poster, fetch_file = gateway, gateway.download_file
    from bot.adapters.kube import Cluster

    connect = connect_cluster or Cluster.connect
    runs = RunService(
        store=store,
        directory=directory,
        clock=clock,
        renderer=Renderer(settings.template_dirs()),
        poster=poster,
        operations_channel=settings.channels.operations,
        run_action=builtin_runner(settings=settings, store=store, connect_cluster=connect, clock=clock),
    )
    announcements = AnnouncementService(
        store=store,
        clock=clock,
        poster=poster,
        templates_dir=settings.templates_dir,
        channel=settings.channels.announcements,
        offsets=settings.announcement_offsets,
        grace=settings.announcement_grace,
    )
    # The end of a scheduled run, and each step it asks to announce, from the transition itself.
    runs.on_ended = announcements.run_ended
    runs.on_step_succeeded = announcements.step_succeeded
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
    )
    return Services(
        settings=settings,
        store=store,
        registry=registry,
        directory=directory,
        router=router,
        web_client=web_client,
        runs=runs,
        announcements=announcements,
    )
