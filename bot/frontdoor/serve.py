"""Serving Slack (`upgrade-bot run`): start-up recovery, the triggers, a transport, and shutdown.

Start-up, in order — nothing is served until the state on disk is brought up to date:

1. the secrets the chosen transport needs are checked, and SIGTERM/SIGINT ask for a shutdown;
2. the bot is assembled (`bot.frontdoor.assemble`), and delivery keys older than a week are
   forgotten when it leads;
3. the leader's lease is tried once (`bot.frontdoor.leadership`; one replica on SQLite always
   wins it). Only the leader does 4 and 5, fenced by its epoch; a follower goes straight to 6,
   and does 4 and 5 whenever it wins the lease later (a leader died, or handed over on SIGTERM);
4. runs are recovered: posts a crash cut off are settled (found in Slack, or posted now), an
   action that was running is marked interrupted (never re-run silently), and every live card,
   owed thread line and open gate message is brought up to date;
5. the triggers start: announcements that fell due while the bot was down are posted (or marked
   delayed, or skipped past the grace), then every timer is scheduled;
6. the Slack App is built; on the leader, commands and clicks acknowledged before a crash (the
   inbox) are handed to the workers (a follower starting leaves them: the leader may be working
   them off now); then it is served over HTTP (waitress) or Socket Mode.

Shutdown, in order — each part still has what it writes to when it stops:

1. the transport stops taking requests (HTTP server closed, Socket Mode connection closed), so
   nothing new is acked or queued;
2. the triggers stop, waiting for a job that is running (an announcement mid-post, a tick);
   then the lease is released, so another replica leads at once instead of after it expires;
3. the worker pool stops: commands and clicks still queued are dropped and running ones get
   `SHUTDOWN_GRACE`; every one is in the inbox, so what is cut short is worked off at the next
   start (a 10 MB command or a Slack outage cannot hold the shutdown past the pod's grace);
4. the database is closed, last, since everything above writes to it.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import os
import queue
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import FrameType

from slack_bolt import App
from slack_sdk.errors import SlackApiError

from bot.adapters import kube
from bot.adapters.slack import SlackGateway
from bot.core.gauges import read_now
from bot.core.rendering import Renderer
from bot.errors import ConfigError
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.inbox import Inbox, tell_in_slack
from bot.frontdoor.metrics import Metrics, MetricsRoute, route
from bot.frontdoor.probes import Probes
from bot.frontdoor.slack import build_app
from bot.frontdoor.workers import WorkerPool
from bot.logsetup import set_replica_id
from bot.settings import Settings

log = logging.getLogger(__name__)

#: How often the leader looks for inbox items a replica that is gone had acknowledged.
INBOX, INBOX_SECONDS = "inbox", 10.0
#: How long a shutdown waits for running commands: inside Kubernetes' default 30 s grace period.
SHUTDOWN_GRACE = timedelta(seconds=15)
#: How long a thread may hold the interpreter before one waiting for it is let in (CPython's
#: default is 5 ms). An ack needs the interpreter a few times (the socket, the inbox's commit);
#: with checks, snapshots or evidence polls busy on other threads, each of those waits took up to
#: the interval times the busy threads, and acks passed Slack's comfortable 0.1 s. A shorter turn
#: costs the busy threads a little throughput and keeps the door answering.
SWITCH_INTERVAL = 0.001


def serve(
    settings: Settings,
    *,
    http: bool,
    host: str = "0.0.0.0",
    port: int = 3000,
    health_port: int | None = None,
) -> None:
    """Serve Slack until SIGTERM or SIGINT: over HTTP on `host:port` with `http`, else Socket Mode.

    With `health_port`, `/healthz`, `/readyz` and `/metrics` are served on a small server of their
    own, on that port and thread (0 picks a free one): Kubernetes' probes and Prometheus' scrape
    then never queue behind Slack's traffic, or behind whoever else reaches the public port. Over
    HTTP they are also served on `port`, as before, for probes configured there."""
    _check_secrets(settings, http=http)
    stop = _stop_on_signals()
    # In a pod the host name is the pod's name: with the pid, which replica wrote a log line.
    set_replica_id(f"{socket.gethostname()}:{os.getpid()}")
    metrics = Metrics()
    workers = WorkerPool(settings.workers)
    metrics.bind_queue_depth(lambda: workers.depth)
    replays = _Replays()
    services = assemble(
        settings,
        telemetry=metrics,
        # The leader also works off requests a replica acknowledged and then died with, without
        # waiting for the next change of leader.
        timers=[(INBOX, INBOX_SECONDS, lambda _now: replays.orphans())],
        on_elected=[
            lambda fence: metrics.leadership(leading=True, epoch=fence.epoch),
            lambda _f: replays.elected(),
        ],
        on_deposed=[lambda epoch: metrics.leadership(leading=False, epoch=epoch)],
    )
    triggers, elector = services.triggers, services.elector
    # The Kubernetes client imported and the replies' and cards' templates compiled now, beside
    # the start-up, not in the first burst of watch events after it: 20 resumed watches
    # connecting and rendering their first cards at once held acks for 0.3-0.6 s.
    threading.Thread(target=_warm, args=(settings,), name="warm-up", daemon=True).start()
    metrics.bind_now(lambda: read_now(services.store, datetime.now(UTC)))
    # A step whose watch ended just before a crash, without its step committed: commit it now,
    # before the runs' recovery looks at running steps.
    services.watches.settle_ended_steps()
    health = None
    try:
        # Only the leader recovers and drives the timers; a follower serves commands and clicks.
        # On SQLite a process starting means the one before it is gone (one replica): it leads
        # at once, rather than after the dead one's lease expired; anything left is fenced off.
        if not elector.try_once(force=services.store.single_host):
            log.info("another replica leads; serving commands and clicks as a follower")
            triggers.follow()
        elector.start()
        inbox = Inbox(
            store=services.store,
            workers=workers,
            clock=lambda: datetime.now(UTC),
            notify=tell_in_slack(SlackGateway(services.web_client) if services.web_client else None),
            telemetry=services.telemetry,
            owner=services.owner,
            # Several replicas: an item a live replica accepted is its own to work off.
            live_owners=services.live_owners,
        )
        app = build_app(
            services,
            workers,
            signing_secret=settings.secrets.signing_secret,
            socket_mode=not http,
            inbox=inbox,
        )
        # Commands and clicks acknowledged before a crash are worked off now, before new ones.
        replays.ready(inbox, leading=elector.fence is not None)
        # Everything built so far lives as long as the process: keep the collector's full passes
        # from walking it again and again, which otherwise pauses acks while a snapshot allocates.
        gc.freeze()
        sys.setswitchinterval(SWITCH_INTERVAL)
        probes = Probes(store=services.store, slack_ping=_slack_ping(services), elector=elector, stop=stop)
        if http:
            assert settings.secrets.signing_secret is not None  # checked by _check_secrets
            _serve_http(
                app,
                services,
                host=host,
                port=port,
                stop=stop,
                signing_secret=settings.secrets.signing_secret,
                probes=probes,
                metrics=metrics,
                health_port=health_port,
            )
        else:
            assert settings.secrets.app_token is not None  # checked by _check_secrets
            if health_port is not None:
                probes.routes["/metrics"] = route(metrics)
                health = probes.serve(host=host, port=health_port)
            _serve_socket_mode(app, settings.secrets.app_token, stop=stop, on_ack=metrics.ack)
    finally:
        # No election from here on (one won now would start the timers again), then the timers.
        elector.halt()
        triggers.shutdown()
        # A job's driver finishes the tick in hand (its progress stored); the next leader's scan
        # interrupts the job, and people resume it from that progress.
        services.duties.shutdown()
        # After the last duty finished: the next leader starts from what this one wrote.
        elector.stop(release=True)
        if health is not None:
            health.close()
        # Every job on the pool is an inbox item: queued ones are dropped and a long one is not
        # waited for past the grace, since the next start works them off again.
        if not workers.stop(grace=SHUTDOWN_GRACE.total_seconds()):
            log.warning(
                "%s job(s) still running after %ss; they resume from the inbox at the next start",
                workers.depth,
                SHUTDOWN_GRACE.total_seconds(),
            )
            logging.shutdown()
            # A worker thread cannot be interrupted and would keep the interpreter alive.
            os._exit(0)
        services.close()


def _warm(settings: Settings) -> None:
    kube.preload()
    Renderer(settings.template_dirs()).warm()


def _check_secrets(settings: Settings, *, http: bool) -> None:
    if os.environ.get("SLACK_CLIENT_ID") and os.environ.get("SLACK_CLIENT_SECRET"):
        # Bolt silently switches to multi-workspace OAuth when both are set; this bot is not that.
        raise ConfigError(
            "environment: unset SLACK_CLIENT_ID/SLACK_CLIENT_SECRET (upgrade-bot is a "
            "single-workspace app; it uses SLACK_BOT_TOKEN)"
        )
    if http:
        settings.secrets.require("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")
    else:
        settings.secrets.require("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")


#: How often the main thread wakes while it waits for the shutdown. A SIGTERM the kernel hands to
#: another thread (any thread may take a process's signal, and does when the main one already has
#: one pending) only sets CPython's flag; the handler runs when the main thread next wakes, and an
#: untimed wait never did: the bot served on until killed.
STOP_POLL_SECONDS = 0.5


def _until_stopped(stop: threading.Event) -> None:
    """Block the main thread until `stop`, waking so that signal handlers run (see above)."""
    while not stop.wait(STOP_POLL_SECONDS):
        pass


def _stop_on_signals() -> threading.Event:
    """The event SIGTERM and SIGINT set. A Python signal handler runs on the main thread between
    two of its bytecodes, which may be inside `stop.wait` (`_until_stopped` wakes twice a second)
    while it holds the event's lock: `stop.set()` in the handler then waited for that lock forever,
    and the bot never stopped. The handler only puts the signal on a queue whose `put` may be
    re-entered (`queue.SimpleQueue`); a thread of its own says so, and sets `stop`."""
    stop = threading.Event()
    received: queue.SimpleQueue[int] = queue.SimpleQueue()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.put(signum)

    def stop_when_received() -> None:
        while True:
            signum = received.get()
            log.info("received signal %s; shutting down", signum)
            # A shutdown still going well past its grace writes every thread's stack to stderr
            # once, so a hang can be read instead of guessed at.
            faulthandler.dump_traceback_later(SHUTDOWN_GRACE.total_seconds() + 30, exit=False)
            stop.set()

    threading.Thread(target=stop_when_received, name="stop-on-signal", daemon=True).start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # `kill -USR1` writes every thread's stack to stderr and the bot goes on: what an operator
    # (or a test) needs when a shutdown or a duty seems stuck. In Python, on the main thread (it
    # wakes every STOP_POLL_SECONDS): faulthandler's own dump reads the other threads' frames
    # without the interpreter lock and took the process down (SIGSEGV) when one was ending a call.
    signal.signal(signal.SIGUSR1, _dump_stacks)
    return stop


def _dump_stacks(_signum: int, _frame: FrameType | None) -> None:
    """Every thread's stack to stderr, most recent call first, as faulthandler writes them."""
    names = {t.ident: t.name for t in threading.enumerate()}
    lines = []
    for ident, frame in sys._current_frames().items():
        lines.append(f"Thread {ident:#018x} [{names.get(ident, '?')}] (most recent call first):\n")
        lines.extend(reversed(traceback.format_stack(frame)))
        lines.append("\n")
    sys.stderr.write("".join(lines))
    sys.stderr.flush()


def _slack_ping(services: Services) -> Callable[[], object] | None:
    if services.web_client is None:
        return None
    from bot.adapters.slack import SlackGateway

    return SlackGateway(services.web_client).auth_test


class _Replays:
    """Works off the inbox's pending items once per leadership won, once the App can handle them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inbox: Inbox | None = None
        self._owed = False

    def ready(self, inbox: Inbox, *, leading: bool) -> None:
        with self._lock:
            self._inbox = inbox
            owed, self._owed = self._owed and leading, False
        if owed:
            inbox.replay()

    def elected(self) -> None:
        with self._lock:
            inbox, self._owed = self._inbox, self._inbox is None
        if inbox is not None:
            inbox.replay()

    def orphans(self) -> None:
        """Every `INBOX_SECONDS` on the leader: items whose replica is gone (none on one host)."""
        with self._lock:
            inbox = self._inbox
        if inbox is not None and inbox.live_owners is not None:
            inbox.replay()


def _serve_http(
    app: App,
    services: Services,
    *,
    host: str,
    port: int,
    stop: threading.Event,
    signing_secret: str,
    probes: Probes,
    metrics: Metrics | None = None,
    health_port: int | None = None,
) -> None:
    from bot.frontdoor.http import HttpFrontDoor, ServerThread, make_server

    front = HttpFrontDoor(
        app,
        ready=services.store.ping,
        signing_secret=signing_secret,
        routes=probes.routes,
        posts=services.http_posts(),
    )
    server = make_server(MetricsRoute(front, metrics) if metrics is not None else front, host=host, port=port)
    health: ServerThread | None = None
    thread: ServerThread | None = None
    try:
        if health_port is not None:
            if metrics is not None:
                probes.routes["/metrics"] = route(metrics)
            health = probes.serve(host=host, port=health_port)
        # Restart tests (and operators) read this first line of standard output for the address.
        print(f"listening on http://{host}:{server.effective_port}", flush=True)
        if health is not None:
            print(f"probes on http://{host}:{health.effective_port}", flush=True)
        log.info("serving Slack over HTTP on %s:%s", host, server.effective_port)
        thread = ServerThread(server, name="waitress").start()
        _until_stopped(stop)
    finally:
        # Slack's door first; the probes answer until the end (readiness fails from SIGTERM on).
        if thread is not None:
            thread.close(timeout=10)
        else:
            server.close()  # the probes' port could not be bound: release this one too
        if health is not None:
            health.close()


#: What Slack's refusal to open a Socket Mode connection (`apps.connections.open`) asks of people.
_SOCKET_REFUSALS = {
    "socket_mode_not_enabled": "Socket Mode is off in the app's settings: turn it on there, or serve "
    "over HTTP (`upgrade-bot run --http`)",
    "not_allowed_token_type": "SLACK_APP_TOKEN is not an app-level token: it starts with xapp-, made "
    "under Basic Information → App-Level Tokens",
    "missing_scope": "the app-level token lacks the connections:write scope: add it to the token",
}


def _app_token_refused(code: str) -> str:
    """One line for a Socket Mode connection Slack refused (its error code), naming what to fix."""
    what = _SOCKET_REFUSALS.get(code, "check the app-level token (xapp-…) of this workspace's app")
    return (
        f"environment: Slack refused to open a Socket Mode connection with SLACK_APP_TOKEN ({code}): {what}"
    )


def _serve_socket_mode(
    app: App, app_token: str, *, stop: threading.Event, on_ack: Callable[[float], None] | None = None
) -> None:
    from bot.frontdoor.socket_mode import make_handler

    handler = make_handler(app, app_token, on_ack=on_ack)
    try:
        handler.connect()  # type: ignore[no-untyped-call]
    except SlackApiError as exc:
        raise ConfigError(_app_token_refused(str(exc.response.get("error", "") or exc))) from None
    print("connected to Slack in Socket Mode", flush=True)
    log.info("serving Slack over Socket Mode")
    try:
        _until_stopped(stop)
    finally:
        handler.close()  # type: ignore[no-untyped-call]
