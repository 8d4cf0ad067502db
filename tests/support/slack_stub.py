"""A Slack Web API stub on 127.0.0.1: the real `slack_sdk.WebClient` talks to it over HTTP.

It answers the methods the bot uses, records every call (method, parameters, headers), serves
`response_url`s and file upload URLs, and answers with faults on demand: a 429 with Retry-After,
a 5xx, or a Slack error such as `channel_not_found`. Tests wait on recorded calls with a timeout,
never with a sleep.

Like Slack, it keeps the messages posted (with their `metadata`) and serves them back through
`conversations.history` and `conversations.replies`. A slow answer (`fail_next(..., delay=…)`
with no error) posts the message first and answers late, as Slack does when the network is slow:
the message exists even if the bot dies before reading the answer.

Every payload it receives for Slack to show (`chat.postMessage`, `chat.update`,
`chat.postEphemeral`, `views.open`, `response_url` posts) is validated with slack_sdk's own Block
Kit models, each nested element too. An invalid one is answered as Slack does (`invalid_blocks`,
or `invalid_arguments` for a view; nothing is posted) and recorded in `invalid` and in the
module's `INVALID_PAYLOADS`, which an autouse fixture in tests/conftest.py checks after each test.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

#: Every invalid payload any stub received in this process: "method: problem" (see conftest.py).
INVALID_PAYLOADS: list[str] = []

#: Slack's message-level limits the models do not check (they validate one block at a time).
MESSAGE_BLOCKS = 50
MESSAGE_TEXT = 40_000
#: The methods whose payloads Slack shows, and so validates.
SHOWN = frozenset({"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "response_url"})


def _validate_object(obj: JsonObject, where: str, problems: list[str]) -> None:
    """`validate_json` on the object and on every object nested in it: a block's own validation
    does not reach its elements (buttons, confirms, options, text objects)."""
    try:
        obj.validate_json()
    except SlackObjectFormationError as exc:
        problems.append(f"{where}: {exc}")
    for name in sorted(obj.attributes):
        value = getattr(obj, name, None)
        items = value if isinstance(value, (list, tuple)) else [value]
        for i, item in enumerate(items):
            if isinstance(item, JsonObject):
                _validate_object(
                    item, f"{where}.{name}[{i}]" if value is not item else f"{where}.{name}", problems
                )


def _loaded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def block_kit_problems(method: str, params: dict[str, Any]) -> list[str]:
    """What Slack would refuse in this payload, by slack_sdk's models (empty when valid)."""
    problems: list[str] = []
    if method == "views.open":
        view = _loaded(params.get("view"))
        if not isinstance(view, dict):
            return [f"view is not an object: {view!r:.80}"]
        try:
            parsed = View(**view)
        except (SlackObjectFormationError, TypeError, ValueError) as exc:
            return [f"view: {exc}"]
        _validate_object(parsed, "view", problems)
        return problems
    text = params.get("text")
    if isinstance(text, str) and len(text) > MESSAGE_TEXT:
        problems.append(f"text: {len(text)} characters (limit {MESSAGE_TEXT})")
    blocks = _loaded(params.get("blocks"))
    if blocks is None:
        return problems
    if not isinstance(blocks, list):
        return [*problems, f"blocks is not a list: {blocks!r:.80}"]
    if len(blocks) > MESSAGE_BLOCKS:
        problems.append(f"{len(blocks)} blocks (limit {MESSAGE_BLOCKS})")
    for i, raw in enumerate(blocks):
        try:
            block = Block.parse(raw) if isinstance(raw, dict) else None
        except (SlackObjectFormationError, TypeError, ValueError) as exc:
            problems.append(f"blocks[{i}]: {exc}")
            continue
        if block is None or type(block) is Block:
            problems.append(f"blocks[{i}]: not a known block: {raw!r:.80}")
            continue
        _validate_object(block, f"blocks[{i}]", problems)
    return problems


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)
    #: What the stub answered (filled in after the call is recorded).
    response: dict[str, Any] = field(default_factory=dict)
    #: The URL path a `response_url` call was POSTed to (which command it answers).
    path: str = ""


@dataclass
class Fault:
    status: int = 200
    error: str | None = None
    retry_after: int | None = None
    delay: float = 0.0
    #: Only calls whose parameters satisfy this take the fault (None: the next call, whatever it is).
    when: Callable[[dict[str, Any]], bool] | None = None


@dataclass
class Flaky:
    """A share of calls answered with 429 (with Retry-After) or a 5xx, chosen by a seeded RNG."""

    fraction: float
    rng: random.Random
    retry_after: int
    statuses: tuple[int, ...]
    methods: frozenset[str] | None


class SlackStub:
    def __init__(
        self,
        *,
        bot_user_id: str = "UBOT",
        team_id: str = "T0TEAM",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        #: Stamps each recorded call (`Call.at`); a test's fake clock makes budgets checkable fast.
        self.clock = clock
        self._flaky: Flaky | None = None
        #: (channel, ts) of messages someone deleted: `chat.update` answers `message_not_found`.
        self.deleted: set[tuple[str, str]] = set()
        self.bot_user_id = bot_user_id
        self.team_id = team_id
        self.calls: list[Call] = []
        #: Payloads Slack would have refused: "method: problem" (also in `INVALID_PAYLOADS`).
        self.invalid: list[str] = []
        self.responses: list[dict[str, Any]] = []  # bodies POSTed to response_urls
        self.uploads: dict[str, bytes] = {}
        #: Files shared in the workspace, served at `file_url(id)` to requests with the bot token.
        self.files: dict[str, str] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.socket_url: str | None = None
        #: Every message posted, in order: channel, ts, thread_ts, text, metadata (as Slack keeps them).
        self.messages: list[dict[str, Any]] = []
        self._faults: dict[str, list[Fault]] = {}
        self._lock = threading.Condition()
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # serve_forever looks at a shutdown request every poll_interval (0.5 s by default): each
        # test's stub stops within 0.05 s instead.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="slack-stub", daemon=True
        )

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> SlackStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SlackStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def file_url(self, file_id: str) -> str:
        """A file's `url_private`: like Slack's, it needs `Authorization: Bearer <bot token>`."""
        return f"{self.url}/files-pri/T0TEAM-{file_id}/plan.yaml"

    def response_url(self, name: str = "r") -> str:
        return f"{self.url}/response/{name}"

    # -- control -------------------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
        delay: float = 0.0,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """The next `times` calls of `method` (that satisfy `when`) answer with this fault."""
        with self._lock:
            self._faults.setdefault(method, []).extend(
                Fault(status=status, error=error, retry_after=retry_after, delay=delay, when=when)
                for _ in range(times)
            )

    def flaky(
        self,
        fraction: float,
        *,
        seed: int = 13,
        retry_after: int = 1,
        statuses: tuple[int, ...] = (429, 503),
        methods: set[str] | None = None,
    ) -> None:
        """From now on, `fraction` of the calls (of `methods`, default all) fail: 429 or 5xx.

        Deterministic for a seed; a failed call posts or edits nothing (as a real 429 does).
        `fraction=0` turns it off.
        """
        with self._lock:
            self._flaky = (
                Flaky(
                    fraction,
                    random.Random(seed),
                    retry_after,
                    statuses,
                    frozenset(methods) if methods else None,
                )
                if fraction > 0
                else None
            )

    def delete_message(self, channel: str, ts: str) -> None:
        """Someone deleted a message: it is gone from history and `chat.update` of it fails."""
        with self._lock:
            self.deleted.add((channel, ts))
            self.messages = [m for m in self.messages if not (m["channel"] == channel and m["ts"] == ts)]

    def counts(self, *, ok_only: bool = False) -> dict[str, int]:
        """Calls per method (only those answered `ok` with `ok_only`)."""
        with self._lock:
            out: dict[str, int] = {}
            for c in self.calls:
                if ok_only and not c.response.get("ok"):
                    continue
                out[c.method] = out.get(c.method, 0) + 1
            return out

    def most_in_window(
        self, method: str, window: float, *, where: Callable[[Call], bool] | None = None
    ) -> int:
        """The most calls of `method` (satisfying `where`) made within any `window` seconds."""
        stamps = sorted(c.at for c in self.calls_to(method) if where is None or where(c))
        most, first = 0, 0
        for last, at in enumerate(stamps):
            while at - stamps[first] >= window:
                first += 1
            most = max(most, last - first + 1)
        return most

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The messages Slack holds now (edits applied), oldest first."""
        with self._lock:
            return [dict(m) for m in self.messages if channel is None or m["channel"] == channel]

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until `predicate()` is truthy (re-checked on every recorded call); return it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out after {timeout}s waiting; calls: {self.summary()}")
                self._lock.wait(remaining)

    def wait_for_calls(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        return list(
            self.wait_for(lambda: len(self.calls_to(method)) >= count and self.calls_to(method), timeout)
        )

    def wait_for_responses(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        return list(self.wait_for(lambda: len(self.responses) >= count and list(self.responses), timeout))

    def summary(self) -> list[str]:
        return [c.method for c in self.calls]

    # -- request handling ----------------------------------------------------------------------------

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)
            self._lock.notify_all()

    def _check_payload(self, method: str, params: dict[str, Any]) -> bool:
        """Validate a shown payload; record and report (False) what Slack would refuse."""
        if method not in SHOWN:
            return True
        problems = block_kit_problems(method, params)
        if not problems:
            return True
        found = [f"{method}: {p}" for p in problems]
        with self._lock:
            self.invalid.extend(found)
            INVALID_PAYLOADS.extend(found)
        return False

    def _take_fault(self, method: str, params: dict[str, Any] | None = None) -> Fault | None:
        with self._lock:
            flaky = self._flaky
            if (
                flaky is not None
                and (flaky.methods is None or method in flaky.methods)
                and flaky.rng.random() < flaky.fraction
            ):
                status = flaky.rng.choice(flaky.statuses)
                return Fault(status=status, retry_after=flaky.retry_after if status == 429 else None)
            queue = self._faults.get(method) or []
            for i, fault in enumerate(queue):
                if fault.when is None or fault.when(params or {}):
                    return queue.pop(i)
            return None

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://stub.slack.test/",
                "team": "Stub",
                "user": "upgrade-bot",
                "team_id": self.team_id,
                "user_id": self.bot_user_id,
                "bot_id": "B0BOT",
            }
        if method == "chat.postMessage":
            ts = f"{1_700_000_000 + next(self._ts)}.000100"
            channel = str(params.get("channel", ""))
            metadata = params.get("metadata")
            if isinstance(metadata, str):
                metadata = json.loads(metadata)
            message = {
                "channel": channel,
                "ts": ts,
                "thread_ts": str(params.get("thread_ts") or ""),
                "text": params.get("text", ""),
                "metadata": metadata,
                "blocks": params.get("blocks"),
            }
            with self._lock:
                self.messages.append(message)
            return {
                "ok": True,
                "channel": channel,
                "ts": ts,
                "message": {"text": params.get("text", ""), "ts": ts},
            }
        if method in ("conversations.history", "conversations.replies"):
            return self._read(method, params)
        if method == "chat.update":
            with self._lock:
                if (str(params.get("channel")), str(params.get("ts"))) in self.deleted:
                    return {"ok": False, "error": "message_not_found"}
                for m in self.messages:
                    if m["channel"] == params.get("channel") and m["ts"] == params.get("ts"):
                        m["text"] = params.get("text", m["text"])
                        if params.get("blocks") is not None:
                            m["blocks"] = params.get("blocks")
            return {
                "ok": True,
                "channel": params.get("channel"),
                "ts": params.get("ts"),
                "text": params.get("text", ""),
            }
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"{1_700_000_000 + next(self._ts)}.000200"}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{next(self._ids):06d}", "type": "modal"}}
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": f"D0{params.get('users', 'X')}"}}
        if method == "conversations.info":
            return {"ok": True, "channel": {"id": params.get("channel"), "name": "stub-channel"}}
        if method == "users.info":
            user = self.users.get(str(params.get("user", "")))
            return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
        if method == "usergroups.users.list":
            group = str(params.get("usergroup", ""))
            if group not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": self.usergroups[group]}
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._ids):06d}"
            return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            files = params.get("files")
            if isinstance(files, str):
                files = json.loads(files)
            return {"ok": True, "files": [{"id": f["id"], "title": f.get("title", "")} for f in files or []]}
        if method == "apps.connections.open":
            if not self.socket_url:
                return {"ok": False, "error": "socket_mode_not_enabled"}
            return {"ok": True, "url": self.socket_url}
        return {"ok": False, "error": "unknown_method"}

    def _read(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel", ""))
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        with self._lock:
            mine = [m for m in self.messages if m["channel"] == channel]
        if method == "conversations.replies":
            parent = str(params.get("ts", ""))
            found = [m for m in mine if m["ts"] == parent or m["thread_ts"] == parent]
        else:
            oldest = float(params.get("oldest") or 0)
            # The channel's own messages; thread replies only when broadcast (not modelled: none).
            found = [m for m in mine if not m["thread_ts"] and float(m["ts"]) >= oldest]
            found.reverse()  # newest first, as Slack returns history
        limit = int(params.get("limit") or 100)
        shown = []
        for m in found[:limit]:
            item = {"type": "message", "ts": m["ts"], "text": m["text"]}
            if m["thread_ts"]:
                item["thread_ts"] = m["thread_ts"]
            if with_metadata and m["metadata"]:
                item["metadata"] = m["metadata"]
            shown.append(item)
        return {"ok": True, "messages": shown, "has_more": len(found) > limit}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: pytest shows the recorded calls on failure instead

            def _body(self) -> bytes | None:
                """The request's body, or None when the sender died part way through it (a bot
                killed mid-request): Slack never sees a request cut short, so neither does the stub."""
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if len(raw) < length:
                    self.close_connection = True
                    return None
                return raw

            def _send(
                self, status: int, payload: dict[str, Any] | str, headers: dict[str, str] | None = None
            ) -> None:
                body = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                except (BrokenPipeError, ConnectionResetError):
                    return
                ctype = "text/plain" if isinstance(payload, str) else "application/json; charset=utf-8"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                # The bot may have been killed while this (delayed) answer was on its way.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def do_POST(self) -> None:
                raw = self._body()
                if raw is None:
                    return
                path = urllib.parse.urlparse(self.path).path
                headers = {k.lower(): v for k, v in self.headers.items()}
                if path.startswith("/response/"):
                    fault = stub._take_fault("response_url")
                    if fault is not None and fault.status == 429:
                        stub._record(Call(method="response_url:429", params={}, headers=headers))
                        self._send(429, "rate limited", {"Retry-After": str(fault.retry_after or 1)})
                        return
                    payload = json.loads(raw or b"{}")
                    if not stub._check_payload("response_url", payload):
                        stub._record(Call(method="response_url", params=payload, headers=headers, path=path))
                        # What Slack answers a response_url post it cannot show.
                        self._send(400, "invalid_blocks")
                        return
                    with stub._lock:
                        stub.responses.append(payload)
                    stub._record(Call(method="response_url", params=payload, headers=headers, path=path))
                    self._send(200, "ok")
                    return
                if path.startswith("/files-pri/"):
                    file_id = path.split("/")[2].split("-", 1)[-1]
                    stub._record(Call(method="files-pri", params={"file_id": file_id}, headers=headers))
                    if not headers.get("authorization", "").startswith("Bearer xoxb-"):
                        self._send(302, "", {"Location": "https://stub.slack.test/login"})
                        return
                    if file_id not in stub.files:
                        self._send(404, "not found")
                        return
                    self._send(200, stub.files[file_id])
                    return
                if path.startswith("/upload/"):
                    file_id = path.rsplit("/", 1)[-1]
                    stub.uploads[file_id] = raw
                    stub._record(
                        Call(method="upload", params={"file_id": file_id, "size": len(raw)}, headers=headers)
                    )
                    self._send(200, "OK - " + str(len(raw)))
                    return
                if not path.startswith("/api/"):
                    self._send(404, {"ok": False, "error": "not_found"})
                    return
                method = path[len("/api/") :]
                params = _parse_params(raw, headers.get("content-type", ""))
                call = Call(method=method, params=params, headers=headers, at=stub.clock())
                stub._record(call)
                fault = stub._take_fault(method, params)
                if fault is not None:
                    if fault.delay and fault.status == 200 and not fault.error:
                        # Slow network, not a refusal: the message is posted now, the answer is late.
                        call.response = stub._answer(method, params)
                        time.sleep(fault.delay)
                        self._send(200, call.response)
                        return
                    if fault.delay:
                        time.sleep(fault.delay)
                    if fault.status == 429:
                        self._send(
                            429,
                            {"ok": False, "error": "ratelimited"},
                            {"Retry-After": str(fault.retry_after or 1)},
                        )
                        return
                    if fault.status >= 500:
                        self._send(fault.status, "upstream trouble")
                        return
                    if fault.error:
                        self._send(200, {"ok": False, "error": fault.error})
                        return
                if not stub._check_payload(method, params):
                    # Slack refuses the whole message (or modal) and posts nothing.
                    error = "invalid_arguments" if method == "views.open" else "invalid_blocks"
                    call.response = {"ok": False, "error": error}
                    self._send(200, call.response)
                    return
                call.response = stub._answer(method, params)
                self._send(200, call.response)

            do_GET = do_POST

        return Handler


def _parse_params(raw: bytes, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    if "json" in content_type:
        loaded = json.loads(raw)
        return loaded if isinstance(loaded, dict) else {"_": loaded}
    if "multipart" in content_type:
        return {"_multipart": len(raw)}
    return {k: v[0] if len(v) == 1 else v for k, v in urllib.parse.parse_qs(raw.decode()).items()}
