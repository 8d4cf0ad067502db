"""Builds the Slack front door's Bolt `App`: the de-duplication middleware, then each feature.

The features register themselves on the App they are given (bolt's `register(app, …)` habit);
this module is the one place that decides which, in which order, and with which parts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from slack_bolt import App, BoltResponse
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped

from bot.adapters.slack import SlackGateway, respond_via_url
from bot.adapters.store import Store, driver_words
from bot.errors import BotError, ConfigError, DatabaseUnwritable, SlackCallFailed, TemporaryError
from bot.frontdoor.assemble import Services
from bot.frontdoor.inbox import Inbox, tell_in_slack
from bot.frontdoor.slack import choices, commands, fallback, fixes, fleets, gates, paused, verified, watches
from bot.frontdoor.slack.keys import delivery_key
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import new_correlation_id

log = logging.getLogger(__name__)


class _ClientOnly(logging.Filter):
    """Drops Bolt's "As you gave `client` as well, `token` will be unused." — a false alarm here.

    The App is given only the client (it carries the token from the settings), but Bolt's
    constructor also reads SLACK_BOT_TOKEN from the environment by itself, which is where the
    settings took the token from, so it warns at every start that a token it found is unused. An
    explicit `token=None` cannot stop it (Bolt falls back to the environment), and the variable
    must stay set, so this one message, matched exactly, is dropped from Bolt's logger.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _bolt_logger() -> logging.Logger:
    logger = logging.getLogger("slack_bolt.App")
    if not any(isinstance(f, _ClientOnly) for f in logger.filters):
        logger.addFilter(_ClientOnly())
    return logger


#: Slack's answers to auth.test that say the token itself is bad (not that Slack is down).
TOKEN_REFUSED = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)


def verify_token(gateway: SlackGateway) -> None:
    """Refuse to start with a token Slack refuses; start when Slack does not answer. A Slack outage
    must not keep a restarted replica down (it would crash-loop until Slack came back, during an
    upgrade whose drains restart it): the requests are answered once Slack is back, and readiness
    (`/readyz`) says Slack is failing meanwhile."""
    try:
        gateway.auth_test()
    except SlackCallFailed as exc:
        if exc.code in TOKEN_REFUSED:
            raise ConfigError(
                f"environment: Slack refused SLACK_BOT_TOKEN ({exc.code}): check the bot token (xoxb-…) of "
                "this workspace's app"
            ) from None
        log.warning("Slack answered auth.test with %s: starting anyway", exc.code)
    except BotError as exc:  # not answering, unreachable, out of budget: an outage, not the token
        log.warning(
            "Slack did not answer auth.test (%s): starting anyway; it is asked again", exc.user_message
        )


def build_app(
    services: Services,
    workers: WorkerPool,
    *,
    signing_secret: str | None,
    socket_mode: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    inbox: Inbox | None = None,
) -> App:
    """The App with every listener; acknowledged requests go through `inbox` (made here when not
    given: the serve lifecycle passes its own, to work off at start-up what a crash left)."""
    if services.web_client is None:
        raise ConfigError("environment: SLACK_BOT_TOKEN is not set (secrets come only from the environment)")
    gateway = SlackGateway(services.web_client)
    inbox = inbox or Inbox(
        store=services.store,
        workers=workers,
        clock=clock,
        notify=tell_in_slack(gateway),
        telemetry=services.telemetry,
    )
    verify_token(gateway)
    app = App(
        # Named here: without a name Bolt calls `inspect.stack()`, which reads the source of every
        # frame and looks up each frame's module across all of sys.modules — 1–4 s of every start.
        name="upgrade-bot",
        # `verify_token` asked already: Bolt's own auth.test at construction failed the start on
        # any Slack outage, calling a good token invalid.
        token_verification_enabled=False,
        client=services.web_client,
        signing_secret=signing_secret or "",
        # Socket Mode messages are not signed; HTTP requests always are.
        request_verification_enabled=not socket_mode,
        # Every listener stores the request, acks, and hands the work to the bot's own pool, so
        # the listener runs on the request's thread: no hand-over to Bolt's executor and its
        # 10 ms wait for ack() on the path of every ack (half the median ack under load).
        process_before_response=True,
        logger=_bolt_logger(),
    )
    app.middleware(deduplicate(services.store, clock, workers))
    commands.register(app, router=services.router, gateway=gateway, inbox=inbox)
    gates.register(
        app,
        gates.GateDoor(
            runs=services.runs,
            gateway=gateway,
            inbox=inbox,
            workers=workers,
            store=services.store,
            clock=clock,
        ),
    )
    paused.register(
        app,
        paused.PausedDoor(
            runs=services.runs,
            router=services.router,
            settings=lambda: services.settings,
            gateway=gateway,
            inbox=inbox,
            workers=workers,
            store=services.store,
            clock=clock,
            jobs=services.jobs,
        ),
    )
    choices.register(app, jobs=services.jobs, gateway=gateway, inbox=inbox)
    watches.register(
        app,
        watches=services.watches,
        roster=lambda: services.settings.roster,
        directory=services.directory,
        gateway=gateway,
        inbox=inbox,
        store=services.store,
        clock=clock,
    )
    fixes.register(
        app,
        fixes.FixDoor(
            watches=services.watches,
            router=services.router,
            roster=lambda: services.settings.roster,
            directory=services.directory,
            gateway=gateway,
            deliveries=services.deliveries,
            inbox=inbox,
            store=services.store,
            clock=clock,
        ),
    )
    verified.register(
        app,
        announcements=services.announcements,
        gateway=gateway,
        inbox=inbox,
        store=services.store,
        clock=clock,
    )
    fleets.register(app, fleets=services.fleets, gateway=gateway, inbox=inbox)
    # Last: Bolt tries listeners in the order they were registered, and this one takes any button.
    fallback.register(app, store=services.store, workers=workers, clock=clock)
    return app


#: How long a request's first write waits for a database another process has locked: the answer
#: ("nothing was done") must reach the person within Slack's 3 s, or Slack drops it.
ACK_DB_WAIT = 1.5


def deduplicate(
    store: Store, clock: Callable[[], datetime], workers: WorkerPool
) -> Callable[[dict[str, Any], Callable[[], None]], BoltResponse | None]:
    """A middleware that lets each user action through once, whichever listener it is for."""

    # Bolt passes middleware arguments by name: `body` and `next` must be called so.
    def deduplicate(body: dict[str, Any], next: Callable[[], None]) -> BoltResponse | None:
        key = delivery_key(body)
        try:
            claimed = key is None or store.claim_delivery(key, clock(), wait=ACK_DB_WAIT)
        except TemporaryError as exc:
            # The first write of every request: the database is down. Said to the person at once,
            # in one line (the log's too), rather than a 500 and Slack's "failed with the error".
            return _unavailable(body, exc, workers)
        if not claimed:
            # Acknowledge so Slack stops retrying, but never run the same action twice.
            log.info("ignoring duplicate delivery %s", key)
            return BoltResponse(status=200, body="")
        next()
        return None

    return deduplicate


def _unavailable(body: dict[str, Any], exc: TemporaryError, workers: WorkerPool) -> BoltResponse:
    """Answer a request the bot cannot take now: nothing was stored or done; try again."""
    cid = new_correlation_id()
    then = (
        "Tell whoever runs the bot: trying again will not help until it is mended."
        if isinstance(exc, DatabaseUnwritable)
        else "Try again in a minute."
    )
    text = f":warning: The bot cannot use its database right now ({exc.user_message}): nothing was done. {then} _(ref {cid})_"
    # The driver's own words ("database or disk is full"), for whoever reads the log.
    log.warning("request not taken [%s]: %s (%s)", cid, exc.user_message, driver_words(exc) or "no detail")
    if body.get("command"):  # a slash command: the answer is the acknowledgement's body
        return BoltResponse(
            status=200,
            body=json.dumps({"response_type": "ephemeral", "text": text}),
            headers={"content-type": ["application/json"]},
        )
    response_url = str(body.get("response_url") or "")
    if response_url:  # a click: answered beside the acknowledgement, on the bot's own workers
        workers.submit(
            lambda: respond_via_url(response_url, text, ephemeral=True), name="database unavailable"
        )
    return BoltResponse(status=200, body="")
