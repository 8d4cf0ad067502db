"""The bot in-process: Bolt behind a real waitress server on a loopback port, wired to the Slack stub.

Requests go over HTTP, really signed, as Slack sends them; the bot's services (store, router, runs)
stay in reach for assertions. This is the one builder of an in-process front door; the bot as a
separate process is `tests/support/bot_process.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from bot.core.command import Registry
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.http import CONNECTION_LIMIT, HttpFrontDoor, ServerThread, make_server
from bot.frontdoor.slack import build_app
from bot.frontdoor.workers import WorkerPool
from bot.settings import Settings
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import (
    HttpResult,
    block_actions_body,
    post,
    signed_headers,
    slash_command_body,
    view_submission_body,
)
from tests.support.slack_stub import SlackStub

CARD = ":clipboard: *Upgrade run"


@dataclass
class Front:
    """A running in-process bot; `stop()` (or leaving its `with`) shuts it down."""

    url: str
    services: Services
    workers: WorkerPool
    stub: SlackStub
    app: Any
    server: Any = field(repr=False)
    thread: ServerThread = field(repr=False)
    requests: int = 0
    stopped: bool = False

    @property
    def events_url(self) -> str:
        return f"{self.url}/slack/events"

    def send(self, body: bytes, extra_headers: dict[str, str] | None = None) -> HttpResult:
        """POST `body` to the events endpoint, signed with the bot's signing secret."""
        return post(self.events_url, body, signed_headers(body, SIGNING_SECRET) | (extra_headers or {}))

    def command(
        self,
        text: str,
        user: str = "U0PRIMARY",
        *,
        response_url: str | None = None,
        trigger_id: str | None = None,
    ) -> HttpResult:
        """Send `/upgrade TEXT` from `user`; the ack (the reply goes to the stub's response URL)."""
        self.requests += 1
        body = slash_command_body(
            text,
            user=user,
            response_url=response_url or self.stub.response_url(),
            trigger_id=trigger_id or f"cmd-{self.requests}",
        )
        return self.send(body)

    def click(
        self,
        user: str,
        value: str,
        action: str = "gate_approve",
        *,
        response_url: str | None = None,
        message_ts: str = "",
    ) -> HttpResult:
        """Click a button carrying `value`; the ack."""
        self.requests += 1
        body = block_actions_body(
            user=user,
            value=value,
            action=action,
            response_url=response_url or self.stub.response_url(f"click-{self.requests}"),
            trigger_id=f"click-{self.requests}",
            message_ts=message_ts,
        )
        return self.send(body)

    def submit_view(
        self, user: str, *, callback_id: str, private_metadata: str, values: dict[str, Any]
    ) -> HttpResult:
        """Submit a modal; the HTTP answer (a modal's errors come back in it)."""
        self.requests += 1
        body = view_submission_body(
            user=user,
            callback_id=callback_id,
            private_metadata=private_metadata,
            values=values,
            trigger_id=f"view-{self.requests}",
        )
        return self.send(body)

    # -- reading what the bot posted ------------------------------------------------------------------

    def posts(self) -> list[dict[str, Any]]:
        return [c.params for c in self.stub.calls_to("chat.postMessage")]

    def cards(self) -> list[dict[str, Any]]:
        """Every run card posted (not edited): Slack's answers, with their `ts`."""
        return [
            c.response for c in self.stub.calls_to("chat.postMessage") if c.params["text"].startswith(CARD)
        ]

    def card(self) -> str:
        """The first card's text as Slack now shows it: its latest edit."""
        card_ts = self.cards()[0]["ts"]
        texts = [c.params["text"] for c in self.stub.calls_to("chat.update") if c.params["ts"] == card_ts]
        return str(texts[-1])

    def gate(self, step: str) -> str:
        """The button value on the newest gate message of `step` (other buttons, a finding's Fix…
        or an announcement's Verified, are passed over)."""
        for params in reversed(self.posts()):
            blocks = params.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
            for block in blocks:
                for el in block.get("elements", []) if block.get("type") == "actions" else []:
                    parts = str(el.get("value", "")).split("|")
                    if len(parts) > 1 and parts[1] == step:
                        return str(el["value"])
        raise AssertionError(f"no gate message for {step}")

    # -- lifetime -------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop serving, let the enqueued work finish, close the services; once."""
        if self.stopped:
            return
        self.stopped = True
        # Closes the server and joins its thread (without waitress's EBADF traceback on close).
        self.thread.close(timeout=5)
        self.workers.shutdown(wait=True)
        self.services.close()

    def __enter__(self) -> Front:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_front(
    settings: Settings,
    stub: SlackStub,
    *,
    registry: Registry | None = None,
    workers: int | WorkerPool = 8,
    threads: int = 16,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    connection_limit: int = CONNECTION_LIMIT,
    duty_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Front:
    """Build the bot's services from `settings` and serve them on a free loopback port (`clock`:
    the bot's time, e.g. a sim's; `connection_limit`: the server's, lowered to test it;
    `duty_options`: the duty kinds' driver options, `assemble`'s)."""
    services = assemble(settings, registry=registry, clock=clock, duty_options=duty_options)
    pool = workers if isinstance(workers, WorkerPool) else WorkerPool(workers)
    app = build_app(services, pool, signing_secret=SIGNING_SECRET, socket_mode=False, clock=clock)
    server = make_server(
        HttpFrontDoor(
            app, ready=services.store.ping, signing_secret=SIGNING_SECRET, posts=services.http_posts()
        ),
        host="127.0.0.1",
        port=0,
        threads=threads,
        loop_timeout=0.1,  # stopped within 0.1 s at each test's end, not waitress's 1 s
        connection_limit=connection_limit,
    )
    thread = ServerThread(server, name="front").start()
    return Front(
        url=f"http://127.0.0.1:{server.effective_port}",
        services=services,
        workers=pool,
        stub=stub,
        app=app,
        server=server,
        thread=thread,
    )
