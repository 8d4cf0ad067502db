"""An in-process Slack front door (Bolt + waitress) wired to the Slack stub."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.core.command import Registry
from bot.frontdoor.http import HttpFrontDoor, make_server
from bot.frontdoor.slack import build_app
from bot.frontdoor.wiring import Services, build_services
from bot.frontdoor.workers import WorkerPool
from bot.settings import Settings, load_settings
from commands import build_registry
from tests.support.secrets import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET
from tests.support.slack_stub import SlackStub


@dataclass
class Front:
    url: str
    services: Services
    workers: WorkerPool
    stub: SlackStub
    app: Any


@pytest.fixture
def settings_for_stub(write_config: Callable[..., Path], slack_stub: SlackStub) -> Settings:
    env = {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": slack_stub.api_url,
    }
    return load_settings(write_config(), env)


@pytest.fixture
def make_front(settings_for_stub: Settings, slack_stub: SlackStub) -> Iterator[Callable[..., Front]]:
    started: list[tuple[Any, threading.Thread, WorkerPool, Services]] = []

    def start(registry: Registry | None = None, workers: int = 8) -> Front:
        services = build_services(settings_for_stub, registry=registry or build_registry())
        pool = WorkerPool(workers)
        app = build_app(services, pool, signing_secret=SIGNING_SECRET, socket_mode=False)
        server = make_server(
            HttpFrontDoor(app, ready=services.store.ping, signing_secret=SIGNING_SECRET),
            host="127.0.0.1",
            port=0,
            threads=16,
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        started.append((server, thread, pool, services))
        return Front(
            url=f"http://127.0.0.1:{server.effective_port}",
            services=services,
            workers=pool,
            stub=slack_stub,
            app=app,
        )

    yield start
    for server, thread, pool, services in started:
        server.close()
        thread.join(timeout=5)
        pool.shutdown(wait=True)
        services.close()
