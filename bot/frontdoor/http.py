"""HTTP transport: Bolt's `/slack/events` endpoint plus the probes (`bot.frontdoor.probes`) and the
pipeline hooks (`bot.frontdoor.hooks`), under waitress.

Bolt's `app.start()` is a development server; waitress is a production WSGI server with its own
thread pool, pure Python, so the image needs no compiler. The sync Bolt App is WSGI-native, so no
ASGI bridge blocks an event loop.

Before Bolt sees a request, this front door guards it, in this order, so that nothing from an
unsigned sender is ever parsed: only POST; a body of at most `MAX_BODY` bytes, read whole; a
timestamp that is a whole number within Slack's five-minute replay window; a valid `v0=`
signature over the raw body (401 otherwise); then the body must be UTF-8 and, parsed as Bolt
parses it, of a shape Slack sends (`bot.frontdoor.payloads`: a slash command's form, an
interaction, an event — 400 otherwise), so no listener ever indexes a field that is not there. Each refusal is one log line; no traceback, no 500.

Under the guard, the server itself (`make_server`) holds the connections: a body larger than
`MAX_BODY` is refused by its Content-Length before a byte of it is read (a chunked one as soon as
it grows past it) and nothing is ever spooled to disk; a connection idle for `CHANNEL_TIMEOUT` is
closed, and at `CONNECTION_LIMIT` open connections the ones idle the longest are closed to make
room, so sockets that send nothing cannot keep Slack out. What a reverse proxy in front should do
is in docs/http-door.md.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask
from waitress.utilities import RequestEntityTooLarge

from bot.frontdoor import payloads
from bot.frontdoor.wsgi import plain

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
#: Slack's largest requests (a view submission with every input filled) are tens of KB.
MAX_BODY = 256 * 1024
#: Slack's replay window: a request signed longer ago than this is refused.
MAX_AGE_SECONDS = 5 * 60


class Refused(Exception):
    """A request the guard answers itself: `status` line and one short, safe reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SslCheck(Exception):
    """Slack checking the door's certificate (`ssl_check=1`, when a slash command's URL is saved):
    answered 200 with nothing, before any other check, as Bolt's own middleware answers it. It
    reaches nothing of the bot's."""


class HttpFrontDoor:
    """A WSGI application routing Slack requests to Bolt and probes to health checks."""

    def __init__(
        self,
        app: App,
        *,
        ready: Callable[[], bool],
        signing_secret: str,
        clock: Callable[[], float] = time.time,
        routes: Mapping[str, Callable[[], tuple[str, bytes]]] | None = None,
        posts: Mapping[str, Callable[[WSGIEnvironment], tuple[str, bytes]]] | None = None,
    ) -> None:
        self.slack = SlackRequestHandler(app, path=EVENTS_PATH)
        self.ready = ready
        #: GET paths answered by a function (status line, body): the probes, /metrics.
        self.routes = dict(routes or {})
        #: Paths answered by a handler that guards its own requests (`bot.frontdoor.hooks`: the
        #: pipeline hooks, signed with their sources' secrets, not Slack's).
        self.posts = dict(posts or {})
        self.secret = signing_secret.encode()
        self.clock = clock

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        route = self.routes.get(path)
        if route is not None:
            status, body = route()
            return plain(start_response, status, body)
        post = self.posts.get(path)
        if post is not None:
            status, body = post(environ)
            return plain(start_response, status, body)
        if path == "/healthz":
            return plain(start_response, "200 OK", b"ok\n")
        if path == "/readyz":
            if self.ready():
                return plain(start_response, "200 OK", b"ready\n")
            return plain(start_response, "503 Service Unavailable", b"not ready\n")
        if path == EVENTS_PATH:
            try:
                body, signature = self.guard(environ)
            except SslCheck:
                log.info("answered Slack's certificate check (ssl_check) on %s", EVENTS_PATH)
                return plain(start_response, "200 OK", b"")
            except Refused as refused:
                log.warning("refused a request to %s: %s", EVENTS_PATH, refused.reason)
                return plain(start_response, refused.status, refused.reason.encode() + b"\n")
            # Bolt reads the body again: hand it the bytes already read and checked.
            environ = {
                **environ,
                "wsgi.input": io.BytesIO(body),
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_X_SLACK_SIGNATURE": signature,
            }
            return self.slack(environ, start_response)
        return plain(start_response, "404 Not Found", b"not found\n")

    def guard(self, environ: WSGIEnvironment) -> tuple[bytes, str]:
        """The request's body, once it is known to be Slack's, signed, fresh and well formed, as
        Bolt is to read it, and its signature."""
        if environ.get("REQUEST_METHOD", "GET") != "POST":
            raise Refused("405 Method Not Allowed", "only POST")
        body = _read_body(environ)
        if body.startswith(b"ssl_check=1") or b"&ssl_check=1" in body:
            fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
            if fields.get("ssl_check") == ["1"] and "command" not in fields:
                raise SslCheck
        timestamp = str(environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", ""))
        signature = str(environ.get("HTTP_X_SLACK_SIGNATURE", ""))
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            raise Refused("401 Unauthorized", "missing or malformed X-Slack-Request-Timestamp")
        if abs(self.clock() - int(timestamp)) > MAX_AGE_SECONDS:
            raise Refused("401 Unauthorized", "request timestamp outside the five-minute window")
        # Slack's v0 scheme: HMAC-SHA256 over "v0:{timestamp}:{raw body}", computed over the raw
        # bytes (slack_sdk's verifier decodes the body as UTF-8 first, and raises on anything else).
        if not hmac.compare_digest(self.sign(timestamp, body).encode(), signature.encode("utf-8", "replace")):
            raise Refused("401 Unauthorized", "invalid signature")
        if _check_shape(body, str(environ.get("CONTENT_TYPE", ""))) and b"payload" in body:
            # A slash command that mentions "payload" (`/upgrade plan load payload-fix`): Bolt
            # reads any form with that word in it as an interaction, and would find none. The same
            # form with the word's "a" percent-encoded decodes to the same fields and reads as the
            # command it is; signed again (the original's signature was checked just above), so
            # Bolt's own check of the body holds.
            body = body.replace(b"payload", b"p%61yload")
            return body, self.sign(timestamp, body)
        return body, signature

    def sign(self, timestamp: str, body: bytes) -> str:
        """Slack's `v0=` signature of `body` at `timestamp` with the signing secret."""
        mac = hmac.new(self.secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
        return f"v0={mac.hexdigest()}"


def _read_body(environ: WSGIEnvironment) -> bytes:
    raw_length = str(environ.get("CONTENT_LENGTH") or "0")
    if not raw_length.isdigit():
        raise Refused("400 Bad Request", "malformed Content-Length")
    length = int(raw_length)
    if length > MAX_BODY:
        raise Refused("413 Content Too Large", f"body larger than {MAX_BODY} bytes")
    stream = environ["wsgi.input"]
    body: bytes = stream.read(length) if length else b""
    return body


def _check_shape(body: bytes, content_type: str) -> bool:
    """Parse the body exactly as Bolt will (`slack_bolt.request.internals.parse_body`), then check
    what Bolt would dispatch against Slack's shapes (`bot.frontdoor.payloads`); whether it is a
    slash command's form."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("400 Bad Request", "body is not UTF-8") from None
    if not text:
        raise Refused("400 Bad Request", "empty body")
    form = False
    if content_type.split(";")[0] == "application/json" or text.startswith("{"):
        document = _json_object(text, "body")
    elif "payload" in text:
        fields = dict(urllib.parse.parse_qsl(text, keep_blank_values=True))
        if "payload" in fields:
            document = _json_object(fields["payload"], "payload")
        elif "command" in fields:
            # A slash command that mentions the word (its text, a channel's name): the door
            # re-encodes it so that Bolt reads it as the command it is (`HttpFrontDoor.guard`).
            document, form = fields, True
        else:
            raise Refused("400 Bad Request", "a form that mentions payload but has no payload field")
    else:
        document, form = dict(urllib.parse.parse_qsl(text, keep_blank_values=True)), True
    try:
        payloads.check(document, payloads.kind_of(document, form=form))
    except payloads.MalformedPayload as exc:
        raise Refused("400 Bad Request", f"not a shape Slack sends: {exc}") from None
    return form


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        raise Refused("400 Bad Request", f"{what} is not JSON") from None
    if not isinstance(document, dict):
        raise Refused("400 Bad Request", f"{what} is not a JSON object")
    return document


#: How many connections a server holds open at once. Past it the ones idle the longest are closed
#: to make room (`_DoorServer`), so idle or trickling sockets never stop the door; waitress's own
#: answer (stop accepting until one times out, 120 s later) is what let 100 idle sockets stop it.
CONNECTION_LIMIT = 1000
#: A connection with no request for this long is closed. Slack sends each request whole and waits
#: at most 3 s for the answer, so it never comes near; a reverse proxy reusing connections keeps
#: its own upstream idle timeout below it (docs/http-door.md: nginx's and an ALB's are 60 s).
CHANNEL_TIMEOUT = 75
#: How often idle connections are looked for: an idle one is closed within CHANNEL_TIMEOUT + this.
CLEANUP_INTERVAL = 5
#: Slack's request headers are under 2 KB; waitress's default allows 256 KB of them.
MAX_HEADER = 64 * 1024
#: Bytes of a request body waitress keeps in memory before it spools the rest to a temporary file:
#: above what it may read at all (`MAX_BODY`), so no body ever reaches the disk.
INBUF_OVERFLOW = 2 * MAX_BODY
#: The share of `CONNECTION_LIMIT` closed at once when the limit is reached.
SHED_SHARE = 20
#: How many waiting connections are accepted in one round of the loop.
ACCEPT_BATCH = 64
#: With every connection busy at the limit, how long before looking again for one gone idle.
FULL_RETRY = 0.5
#: How often, at most, the door logs that it closed idle connections to make room.
SHED_LOG_SECONDS = 10.0
#: How long `ServerThread.close` waits for the loop to close itself once woken, before it closes the
#: server from outside (the loop then ends at its poll()'s next timeout).
WAKE_GRACE_SECONDS = 2.0
#: After refusing a request it did not read (too large), how long the door reads and discards what
#: the client still sends before it closes (`_DoorChannel`); and how much it reads at a time.
LINGER_SECONDS = 2.0
LINGER_READ = 256 * 1024


def make_server(
    wsgi_app: Any,
    *,
    host: str,
    port: int,
    threads: int = 8,
    loop_timeout: float = 1.0,
    connection_limit: int = CONNECTION_LIMIT,
) -> Any:
    """A waitress server bound now (port 0 picks a free port: see `.effective_port`).

    `loop_timeout` is how long waitress's poll() waits before it looks again (waitress's default,
    1 s): a server closed from another thread stops within it. The tests' in-process doors pass
    0.1 s so that each test's teardown does not wait out a second.

    Waitress refuses a body larger than `MAX_BODY` itself, by its Content-Length before reading
    a byte of it, or as a chunked body grows past it (`max_request_body_size`; waitress refuses
    at that size and above, hence the + 1), so no body is read whole, let alone spooled to disk,
    before the front door's own checks. poll() rather than select(): select() cannot watch a
    socket numbered past 1024, and the connection limit is above that."""
    return _DoorServer(
        wsgi_app,
        loop_timeout=loop_timeout,
        host=host,
        port=port,
        threads=threads,
        ident="upgrade-bot",
        asyncore_use_poll=True,
        connection_limit=connection_limit,
        channel_timeout=CHANNEL_TIMEOUT,
        cleanup_interval=CLEANUP_INTERVAL,
        max_request_header_size=MAX_HEADER,
        max_request_body_size=MAX_BODY + 1,
        inbuf_overflow=INBUF_OVERFLOW,
    )


class _Refusal(ErrorTask):
    """Waitress's answer to a request it refused itself (too large, malformed headers): one log
    line, as the front door's own refusals, and the door's short reason as the body."""

    def execute(self) -> None:
        # types-waitress types the request as its error, and the headers as a read-only sequence.
        request: Any = self.request
        error = request.error
        path = str(getattr(request, "path", "") or "?")[:200]
        if not (path.isascii() and path.isprintable()):
            path = ascii(path)  # the client's bytes, never a control character, in the log
        if isinstance(error, RequestEntityTooLarge):
            status, reason = "413 Content Too Large", f"body larger than {MAX_BODY} bytes"
        else:
            status = f"{error.code} {error.reason}"
            reason = f"{error.reason.lower()}: {str(error.body)[:200]}"
        log.warning("refused a request to %s: %s", path, reason)
        # The body it refused may still be on its way: drained, not reset (`_DoorChannel`).
        channel: Any = self.channel
        channel.linger_until = time.monotonic() + LINGER_SECONDS
        body = reason.encode() + b"\n"
        self.status = status
        self.response_headers = [*self.response_headers, ("Content-Type", "text/plain; charset=utf-8")]
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class _DoorChannel(HTTPChannel):
    """Waitress's connection, which after a refusal of its own (a body too large, refused by its
    Content-Length before it arrives) drains what the client still sends for up to
    `LINGER_SECONDS`, and discards it, before closing: closed at once, with the body still
    arriving, the socket would answer the client with a reset, and a client still sending (Python's
    urllib, most) would see "connection reset" instead of the 413. Nothing drained is kept."""

    error_task_class = _Refusal
    #: Set by `_Refusal`: until when (monotonic) to drain once its answer is written.
    linger_until = 0.0
    lingering = False
    ended = False

    def handle_close(self) -> None:
        if self.ended:
            return  # asked again (poll's hang-up after the read that saw the end)
        if not self.lingering and self.connected and time.monotonic() < self.linger_until:
            try:
                sock: Any = self.socket
                sock.shutdown(socket.SHUT_WR)  # the answer is sent: FIN, then drain
            except OSError:
                pass
            else:
                self.lingering, self.will_close = True, False
                return
        self.ended, self.lingering = True, False
        super().handle_close()

    def readable(self) -> bool:
        return True if self.lingering else bool(super().readable())

    def writable(self) -> bool:
        if self.lingering:
            # To make room (`_DoorServer._shed`), or the drain's time is up: closed in handle_write.
            return self.will_close or time.monotonic() >= self.linger_until
        return bool(super().writable())

    def handle_write(self) -> None:
        if self.lingering:
            self.linger_until = 0.0
            self.handle_close()
            return
        super().handle_write()

    def handle_read(self) -> None:
        if not self.lingering:
            super().handle_read()
            return
        try:
            # wasyncore's recv closes the channel itself when the client is done (b"").
            self.recv(LINGER_READ)
        except OSError:
            self.linger_until = 0.0
            self.handle_close()
            return
        if time.monotonic() >= self.linger_until:
            self.linger_until = 0.0
            self.handle_close()


class _DoorServer(TcpWSGIServer):
    """Waitress's TCP server, but at its connection limit it closes the connections idle the
    longest instead of no longer accepting: a client that opens sockets and sends nothing (or a
    byte now and then) cannot keep Slack, or a probe, out. A connection with a request in the
    workers' hands or an answer still being written is never closed to make room."""

    channel_class = _DoorChannel
    _shed_logged = float("-inf")
    _shed_since_log = 0
    #: When every connection was found busy at the limit (monotonic): accepting waits a moment.
    _full_at: float | None = None

    def __init__(self, *args: Any, loop_timeout: float, **kwargs: Any) -> None:
        #: Connections asked to close to make room and not closed yet.
        self._marked: list[Any] = []
        self._loop_timeout = loop_timeout
        super().__init__(*args, **kwargs)

    def run(self) -> None:
        """Waitress's `run`, with poll()'s timeout in seconds as `make_server` was given it.
        Waitress reads `asyncore_loop_timeout` as a whole number of seconds (`int`): 0.1 became 0,
        and a loop that polls without waiting kept a core busy, and the interpreter lock, for as
        long as the door was up (every in-process door of the tests)."""
        server: Any = self  # types-waitress has no `asyncore` nor `_map`
        try:
            server.asyncore.loop(timeout=self._loop_timeout, map=server._map, use_poll=True)
        except (SystemExit, KeyboardInterrupt):
            self.task_dispatcher.shutdown()

    def readable(self) -> bool:
        """Whether to look for connections to accept in this round of the loop."""
        # types-waitress has the time in whole seconds and no `_map` (the loop's socket map).
        server: Any = self
        now = time.time()
        if now >= server.next_channel_cleanup:
            server.next_channel_cleanup = now + self.adj.cleanup_interval
            server.maintenance(now)  # waitress's: closes connections idle past CHANNEL_TIMEOUT
        if not self.accepting:
            return False
        if self._full_at is not None:
            # Every connection was busy: not polled (which would spin) until one closes, or a
            # moment has passed and one may have gone idle since.
            if (
                len(server._map) >= self.adj.connection_limit
                and time.monotonic() - self._full_at < FULL_RETRY
            ):
                return False
            self._full_at = None
        return True

    def handle_accept(self) -> None:
        """Accept up to `ACCEPT_BATCH` waiting connections (waitress accepts one a round, and a
        round walks every connection: a backlog of a thousand idle sockets would keep the next
        request waiting for seconds), making room at the limit."""
        server: Any = self
        marked = self._marked = [channel for channel in self._marked if channel.connected]
        room = self.adj.connection_limit - len(server._map) + len(marked)
        for _ in range(ACCEPT_BATCH):
            if room <= 0:
                room = self._shed()
                if room == 0:
                    self._full_at = time.monotonic()
                    return
            before = len(server._map)
            super().handle_accept()
            if len(server._map) == before:
                return  # none waiting
            room -= 1

    def _shed(self) -> int:
        """Close the connections idle the longest; how many."""
        channels: dict[int, Any] = self.active_channels  # type: ignore[assignment]  # a dict in waitress
        idle = [
            channel
            for channel in channels.values()
            if not (
                channel.requests
                or channel.total_outbufs_len
                or channel.will_close
                or channel.close_when_flushed
            )
        ]
        idle.sort(key=lambda channel: channel.last_activity)
        shed = idle[: max(1, self.adj.connection_limit // SHED_SHARE)]
        for channel in shed:
            # Closed by waitress's own loop in its next round (a channel asked to close is
            # writable, and closes itself when written to), so the map is never changed under it;
            # counted as room meanwhile (`_marked`).
            channel.will_close = True
        self._marked = [*self._marked, *shed]
        self._shed_since_log += len(shed)
        now = time.monotonic()
        if now - self._shed_logged >= SHED_LOG_SECONDS:
            self._shed_logged = now
            if self._shed_since_log:
                log.warning(
                    "open connections reached the limit of %s: closed %s idle the longest",
                    self.adj.connection_limit,
                    self._shed_since_log,
                )
            else:
                log.warning(
                    "open connections reached the limit of %s, every one busy: not accepting more",
                    self.adj.connection_limit,
                )
            self._shed_since_log = 0
        return len(shed)


class ServerThread:
    """Runs a waitress server in a daemon thread until `close()` (which joins it).

    `close()` has the loop close its sockets on its own thread (a thunk on waitress's trigger), so
    it ends at once, kept-alive connections and all. When the loop does not take the thunk, the
    sockets are closed under its poll(), which then fails with EBADF; after a close asked for, that
    is the loop's end, not an error worth a traceback on stderr. The worker
    threads are stopped first: one still finishing a request pulls the server's trigger, and
    waitress's own `close()` closes that trigger under it (EBADF in the worker, with a traceback).
    """

    def __init__(self, server: Any, *, name: str) -> None:
        self.server = server
        self.effective_port: int = server.effective_port
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._close_lock = threading.Lock()
        self._closed = False

    def start(self) -> ServerThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self.server.run()
        except (OSError, ValueError):
            if not self._closing.is_set():
                raise

    def close(self, timeout: float = 10) -> None:
        self._closing.set()
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=timeout)
        if self._thread.is_alive():
            # Closed on the loop's own thread, woken by waitress's trigger: the loop ends at once
            # rather than when its poll() next times out (`loop_timeout`, a second in production,
            # on every stop, and once more for the probes' server).
            try:
                self.server.trigger.pull_trigger(self._close_on_loop)
            except OSError as exc:
                # The trigger is closed already (EBADF): the loop cannot be woken, and the server
                # is closed from here as below, not left running with the error raised to a stop.
                log.debug("the server's trigger could not be pulled on close: %s", exc)
            else:
                self._thread.join(timeout=min(timeout, WAKE_GRACE_SECONDS))
        if self._close_once() or self._thread.is_alive():
            # The loop did not take the thunk (not started, or busy past the grace): closed from
            # here, under its poll(), which ends within `loop_timeout`.
            self._thread.join(timeout=timeout)
        # A connection the loop still held when it ended (a client's keep-alive) is closed here,
        # not left to the garbage collector (an unclosed-socket warning far from its cause).
        for channel in list(self.server.active_channels.values()):
            channel.close()

    def _close_on_loop(self) -> None:
        """On the loop's thread (a trigger's thunk): the listening socket, the trigger and every
        connection closed, so the loop's map is empty and `loop()` returns."""
        if self._close_once():
            for channel in list(self.server.active_channels.values()):
                channel.close()

    def _close_once(self) -> bool:
        """Close the server (its listening socket and trigger) unless done already; whether now."""
        with self._close_lock:
            if self._closed:
                return False
            self._closed = True
        self.server.close()
        return True
