"""Slack Web API adapter: the only module besides the Bolt wiring that imports `slack_sdk`.

Every call goes through one `WebClient` with retry handlers, so a 429 waits for `Retry-After` and
a dropped connection or a 5xx is tried again: a rate-limited post is delayed, not lost. Slack's own
error codes (`channel_not_found`, `not_in_channel`, …) become `SlackCallFailed` with the code, for
callers to turn into a short message.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.webhook import WebhookClient

from bot.adapters.blockkit import MESSAGE_TEXT, fit_message, fit_text, fit_view
from bot.adapters.slack_budget import (
    NO_BUDGET,
    OK,
    RATE_LIMITED,
    REFUSED,
    UNAVAILABLE,
    UNKNOWN,
    Outcome,
    SlackBudget,
)
from bot.errors import PermanentError, SlackCallFailed, SlackOutcomeUnknown, TemporaryError

log = logging.getLogger(__name__)

#: Calls that must not be made twice: sent without an answer, they are looked for, not repeated.
NOT_REPEATABLE = frozenset({"chat.postMessage"})
#: The calls that change what people see in Slack: made only inside this replica's lease.
GUARDED_METHODS = frozenset({"chat.postMessage", "chat.update", "chat.delete", "files.uploadV2"})
#: Requests inside one of those calls checked again right before they are sent: a file upload is
#: three requests, and only the last one shows the file, so each is checked for one timeout (a
#: lease could never hold all three timeouts at once) and the one that shows it once more.
GUARDED_REQUESTS = frozenset({"files.completeUploadExternal"})
#: `metadata.event_type` of the messages the bot posts by itself (see `bot.core.delivery`).
POST_EVENT_TYPE = "upgrade_bot_post"
#: Pages of history read to find one lost post (200 messages each).
FIND_PAGES = 5
#: Where Slack's Web API lives unless SLACK_API_URL says otherwise (tests, proxies, GovSlack).
DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_API_HOSTS = frozenset({"slack.com", "slack-gov.com"})
#: The only hosts the bot token is sent to when a file is downloaded (`url_private` links).
SLACK_FILE_HOSTS = frozenset({"files.slack.com", "files.slack-gov.com"})


_FRIENDLY = {
    "channel_not_found": "that channel does not exist or the bot cannot see it",
    "not_in_channel": "the bot is not in that channel; invite it with `/invite @upgrade-bot`",
    "is_archived": "that channel is archived",
    "user_not_found": "that Slack user does not exist",
    "no_such_subteam": "that user group does not exist",
    "missing_scope": "the Slack app lacks a scope this needs: add the scopes of the bot's manifest "
    "(`upgrade-bot init --slack-manifest` writes it) and reinstall the app",
    "invalid_auth": "the Slack token was refused",
    "invalid_url": "that is not a link to a file shared in Slack",
    "file_too_large": "that file is too large for a plan (the limit is 1 MB)",
    "file_not_found": "Slack did not hand over that file; check the link and that the bot can see it",
}


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are errors: a redirected request would carry the Authorization header along."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def retry_handlers(
    rate_limit_retries: int = 5, *, on_rate_limited: Callable[[float], None] | None = None
) -> list[Any]:
    return [
        _TimedRateLimitHandler(max_retry_count=rate_limit_retries, on_wait=on_rate_limited),
        ConnectionErrorRetryHandler(max_retry_count=3),
        ServerErrorRetryHandler(max_retry_count=2),
    ]


def make_web_client(
    token: str | None,
    api_url: str | None = None,
    *,
    timeout: float = 30,
    sdk_retries: bool = True,
    on_call: Callable[[str, str], None] | None = None,
    on_rate_limited: Callable[[float], None] | None = None,
    tenure: LeaseGuard | None = None,
) -> WebClient:
    """A WebClient; without `sdk_retries` it retries nothing itself (a `SlackBudget` decides).
    `on_call(method, result)` hears of every call's end and `on_rate_limited(seconds)` of every
    wait for Retry-After (the metrics; see `_RecordingWebClient`). With `tenure`, the requests of
    `GUARDED_REQUESTS` are made only while this replica's lease outlasts `timeout`."""
    base_url = api_url or DEFAULT_API_URL
    if not base_url.endswith("/"):
        base_url += "/"
    handlers = retry_handlers(on_rate_limited=on_rate_limited) if sdk_retries else []
    if on_call is not None or tenure is not None:
        return _RecordingWebClient(
            token=token,
            base_url=base_url,
            timeout=timeout,
            retry_handlers=handlers,
            on_call=on_call,
            tenure=tenure,
        )
    # slack_sdk annotates the timeout as int, but hands it to urllib, which takes seconds as a
    # float: the bot's own calls need fractions of a second inside a short lease.
    client = WebClient(token=token, base_url=base_url, timeout=timeout, retry_handlers=handlers)  # type: ignore[arg-type]
    return client


@dataclass(frozen=True, kw_only=True)
class PostedMessage:
    channel: str
    ts: str


class LeaseGuard(Protocol):
    """This replica's lease, as the gateway checks it (`bot.core.tenure.Tenure`)."""

    def may_act(self, timeout: float) -> None:
        """Return once a `timeout`-long call fits in the lease; raise `LeaseLapsed` when it cannot."""
        ...


class SlackGateway:
    """The Slack calls the bot makes, with errors translated into the bot's error tree."""

    def __init__(
        self, client: WebClient, *, budget: SlackBudget | None = None, tenure: LeaseGuard | None = None
    ) -> None:
        self.client = client
        #: With a budget, calls wait for room and it alone retries (give it a client made with
        #: `sdk_retries=False`, so 429s and 5xx are not retried in two places).
        self.budget = budget
        #: With a tenure, every call that changes what Slack shows is made only while this
        #: replica's lease outlasts the client's timeout — checked before each attempt, retries
        #: included (`bot.core.tenure`).
        self.tenure = tenure

    def send_timeout(self, method: str) -> float:
        """What the lease must still hold before a request of `method`: the client's own timeout
        (a file upload's requests are checked one by one, see `GUARDED_REQUESTS`)."""
        return float(self.client.timeout)

    def _guard(self, method: str) -> None:
        if self.tenure is not None and method in GUARDED_METHODS:
            self.tenure.may_act(self.send_timeout(method))

    def _call(self, method: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        if self.budget is None:
            self._guard(method)
            return self._call_once(method, fn, **kwargs)

        def attempt() -> Outcome:
            # Right before the request, after any wait for budget or Retry-After: the lease is
            # measured now, not when the call was queued.
            self._guard(method)
            return self._attempt(method, fn, kwargs)

        outcome = self.budget.call(method, kwargs.get("channel"), attempt)
        if outcome.kind == OK:
            return outcome.value
        if outcome.kind == NO_BUDGET:
            raise TemporaryError(f"Slack's budget for {method} is used up right now")
        if outcome.kind == UNKNOWN:
            log.warning("Slack %s got no answer after it was sent: %s", method, outcome.error)
            raise SlackOutcomeUnknown(f"Slack did not answer {method} in time") from outcome.error
        if outcome.kind == REFUSED and isinstance(outcome.error, SlackApiError):
            code = str(outcome.error.response.get("error", "unknown_error"))
            log.warning("Slack %s failed: %s", method, code)
            raise SlackCallFailed(method, code, _FRIENDLY.get(code)) from outcome.error
        log.warning("Slack %s failed after retries: %s", method, outcome.label)
        # The HTTP status stays in the message: a thread post set aside says "Slack 500" on its card.
        status = outcome.label.removeprefix("http_") if outcome.label.startswith("http_") else ""
        answer = f" (HTTP {status})" if status else ""
        raise TemporaryError(f"Slack is not answering {method} right now{answer}") from outcome.error

    @staticmethod
    def _attempt(method: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> Outcome:
        """One try, classified for the budget (which never sees slack_sdk's types)."""
        try:
            return Outcome(kind=OK, value=fn(**kwargs), label="ok")
        except SlackApiError as exc:
            resp = exc.response
            status = resp.status_code if resp is not None else 0
            if status == 429:
                raw = next((v for k, v in (resp.headers or {}).items() if k.lower() == "retry-after"), None)
                try:
                    retry_after = float(str(raw[0] if isinstance(raw, list) else raw))
                except (TypeError, ValueError):
                    retry_after = 1.0
                return Outcome(kind=RATE_LIMITED, error=exc, retry_after=retry_after, label=RATE_LIMITED)
            if status >= 500:
                return Outcome(kind=UNAVAILABLE, error=exc, label=f"http_{status}")
            code = str(resp.get("error", "unknown_error")) if resp is not None else "unknown"
            return Outcome(kind=REFUSED, error=exc, label=code)
        except (SlackClientError, OSError) as exc:
            if method in NOT_REPEATABLE and not _never_sent(exc):
                return Outcome(kind=UNKNOWN, error=exc, label="no_answer")
            return Outcome(kind=UNAVAILABLE, error=exc, label="unreachable")

    def _call_once(self, method: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except SlackApiError as exc:
            code = str(exc.response.get("error", "unknown_error")) if exc.response is not None else "unknown"
            status = exc.response.status_code if exc.response is not None else 0
            log.warning("Slack %s failed: %s (HTTP %s)", method, code, status)
            if status == 429 or status >= 500:
                raise TemporaryError(f"Slack is not answering {method} right now (HTTP {status})") from exc
            raise SlackCallFailed(method, code, _FRIENDLY.get(code)) from exc
        except (SlackClientError, OSError) as exc:
            log.warning("Slack %s failed: %s", method, exc)
            if method in NOT_REPEATABLE and not _never_sent(exc):
                raise SlackOutcomeUnknown(f"Slack did not answer {method} in time") from exc
            raise TemporaryError(f"could not reach Slack for {method}") from exc

    def post_message(
        self,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
        dedup_key: str | None = None,
    ) -> PostedMessage:
        # Every message leaves through here, `update_message`, `post_ephemeral`, `open_view` or
        # `respond_via_url`: each fits its payload to Slack's limits, which refuse a whole message
        # for one over-long button text.
        text, blocks = fit_message(text, blocks)
        kwargs: dict[str, Any] = {"channel": channel, "text": text}
        if blocks is not None:
            kwargs["blocks"] = list(blocks)
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
            kwargs["reply_broadcast"] = reply_broadcast
        if dedup_key:
            # Returned with the message by conversations.history/replies: how a post whose answer
            # was lost in a crash is found again instead of being posted twice.
            kwargs["metadata"] = {"event_type": POST_EVENT_TYPE, "event_payload": {"key": dedup_key}}
        resp = self._call("chat.postMessage", self.client.chat_postMessage, **kwargs)
        return PostedMessage(channel=str(resp["channel"]), ts=str(resp["ts"]))

    def find_posted(
        self, channel: str, dedup_key: str, *, thread_ts: str, oldest: datetime
    ) -> PostedMessage | None:
        """The bot's message carrying `dedup_key`, searched in the thread or the recent channel.

        One or two calls per lost claim (history is rate-limited hard for apps, so this runs only
        to settle a crash). A workspace without the history scopes cannot be searched: the claim
        is then treated as never posted (a possible repeat beats a run that goes dark).
        """
        method, fn = (
            ("conversations.replies", self.client.conversations_replies)
            if thread_ts
            else ("conversations.history", self.client.conversations_history)
        )
        cursor = ""
        # Newest first, page by page, until a page reaches back past the claim (a few pages at most).
        for _ in range(FIND_PAGES):
            kwargs: dict[str, Any] = {"channel": channel, "limit": 200, "include_all_metadata": True}
            if thread_ts:
                kwargs["ts"] = thread_ts
            if cursor:
                kwargs["cursor"] = cursor
            try:
                resp = self._call(method, fn, **kwargs)
            except SlackCallFailed as exc:
                log.warning(
                    "cannot search %s for a lost post (%s); it will be posted again", channel, exc.code
                )
                return None
            messages = resp.get("messages") or []
            for message in messages:
                meta = message.get("metadata") or {}
                payload = meta.get("event_payload") or {}
                if meta.get("event_type") == POST_EVENT_TYPE and payload.get("key") == dedup_key:
                    return PostedMessage(channel=channel, ts=str(message.get("ts", "")))
            cursor = str((resp.get("response_metadata") or {}).get("next_cursor") or "")
            reached_back = any(_ts_before(m.get("ts"), oldest) for m in messages)
            if not cursor or (reached_back and not thread_ts):
                break
        return None

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None:
        text, blocks = fit_message(text, blocks)
        kwargs: dict[str, Any] = {"channel": channel, "ts": ts, "text": text}
        if blocks is not None:
            kwargs["blocks"] = list(blocks)
        self._call("chat.update", self.client.chat_update, **kwargs)

    def post_ephemeral(self, channel: str, user: str, text: str) -> None:
        self._call(
            "chat.postEphemeral",
            self.client.chat_postEphemeral,
            channel=channel,
            user=user,
            text=fit_text(text, MESSAGE_TEXT),
        )

    def open_dm(self, user: str) -> str:
        resp = self._call("conversations.open", self.client.conversations_open, users=user)
        return str(resp["channel"]["id"])

    def upload_file(
        self,
        channel: str,
        filename: str,
        content: bytes,
        *,
        title: str = "",
        thread_ts: str | None = None,
        comment: str | None = None,
    ) -> str:
        """Upload a file (files_upload_v2) into the channel or thread; Slack's id for it."""
        kwargs: dict[str, Any] = {
            "channel": channel,
            "filename": filename,
            "content": content,
            "title": title or filename,
        }
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if comment:
            kwargs["initial_comment"] = comment
        resp = self._call("files.uploadV2", self.client.files_upload_v2, **kwargs)
        files = resp.get("files") or [resp.get("file") or {}]
        return str(files[0].get("id", "")) if files else ""

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        """Open a modal; Slack accepts a trigger_id only for 3 seconds after the click."""
        self._call("views.open", self.client.views_open, trigger_id=trigger_id, view=fit_view(view))

    def download_file(self, url: str, *, limit: int = 1_000_000) -> bytes:
        """Fetch a file shared in Slack (its `url_private`) with the bot token; at most `limit` bytes.

        The token goes only to Slack's file hosts (or to the host of a configured SLACK_API_URL, for
        tests and proxies), over HTTPS unless that configured host says otherwise, and redirects are
        not followed: a pasted link can never carry the token anywhere else.
        """
        if not self._trusted_file_url(url):
            raise SlackCallFailed("files.download", "invalid_url", _FRIENDLY.get("invalid_url"))
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.client.token}"})
        opener = urllib.request.build_opener(_NoRedirects)
        try:
            with opener.open(request, timeout=30) as resp:
                body: bytes = resp.read(limit + 1)
        except urllib.error.HTTPError as exc:
            log.warning("downloading a Slack file failed: HTTP %s", exc.code)
            raise SlackCallFailed(
                "files.download", "file_not_found", _FRIENDLY.get("file_not_found")
            ) from None
        except OSError as exc:
            raise TemporaryError("could not download the file from Slack") from exc
        if len(body) > limit:
            raise SlackCallFailed("files.download", "file_too_large", _FRIENDLY.get("file_too_large"))
        return body

    def _trusted_file_url(self, url: str) -> bool:
        target = urlsplit(url)
        if target.scheme == "https" and target.hostname in SLACK_FILE_HOSTS and target.port is None:
            return True
        # A configured API base (the test stub, a proxy) serves files from its own origin.
        api = urlsplit(self.client.base_url)
        if api.hostname in DEFAULT_API_HOSTS:
            return False
        return (target.scheme, target.hostname, target.port) == (api.scheme, api.hostname, api.port)

    def auth_test(self) -> dict[str, Any]:
        resp = self._call("auth.test", self.client.auth_test)
        return dict(resp.data) if isinstance(resp.data, dict) else {}


def _never_sent(exc: BaseException) -> bool:
    """Whether the request surely never reached Slack (refused, or no such host): safe to send again."""
    reason = getattr(exc, "reason", None)  # urllib's URLError wraps the socket's error
    return any(isinstance(error, (ConnectionRefusedError, socket.gaierror)) for error in (exc, reason))


def _ts_before(ts: Any, moment: datetime) -> bool:
    try:
        return float(ts) < moment.timestamp()
    except (TypeError, ValueError):
        return False


def respond_via_url(
    response_url: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None, ephemeral: bool = True
) -> None:
    """Answer through a command's `response_url` (works for ephemeral replies in any channel)."""
    client = WebhookClient(response_url, timeout=30, retry_handlers=retry_handlers())
    text, blocks = fit_message(text, blocks)
    try:
        resp = client.send(
            text=text,
            blocks=list(blocks) if blocks is not None else None,
            response_type="ephemeral" if ephemeral else "in_channel",
        )
    except (SlackClientError, OSError) as exc:
        raise TemporaryError("could not reach Slack to answer the command") from exc
    except ValueError as exc:
        # urllib's "unknown url type": a forged or mangled response_url, not worth a retry.
        raise PermanentError("the request's response_url is not a URL") from exc
    if resp.status_code != 200:
        log.warning("response_url answered HTTP %s: %s", resp.status_code, resp.body)
        raise TemporaryError(f"Slack refused the reply (HTTP {resp.status_code})")


class SlackDirectory:
    """User-group membership from `usergroups.users.list`, cached briefly.

    Membership changes rarely during an upgrade, and usergroups.users.list is Tier 2 (~20/min),
    so a short cache keeps role checks from eating the budget.
    """

    def __init__(
        self,
        client: WebClient,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        budget: SlackBudget | None = None,
    ) -> None:
        self.gateway = SlackGateway(client, budget=budget)
        self.ttl = ttl
        self.clock = clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def group_members(self, group_id: str) -> frozenset[str]:
        now = self.clock()
        with self._lock:
            hit = self._cache.get(group_id)
            if hit and now - hit[0] < self.ttl:
                return hit[1]
        try:
            resp = self.gateway._call(
                "usergroups.users.list", self.gateway.client.usergroups_users_list, usergroup=group_id
            )
            members = frozenset(str(u) for u in resp.get("users", []))
        except SlackCallFailed as exc:
            if exc.code not in {"no_such_subteam", "subteam_not_found"}:
                raise
            # A deleted group in the roster grants nobody anything; it must not break role checks.
            log.warning("user group %s in the roster does not exist", group_id)
            members = frozenset()
        with self._lock:
            self._cache[group_id] = (now, members)
        return members

    def _user(self, user_id: str) -> dict[str, Any] | None:
        """users.info's user (`{}` if it sends none), or None for `user_not_found`."""
        try:
            resp = self.gateway._call("users.info", self.gateway.client.users_info, user=user_id)
        except SlackCallFailed as exc:
            if exc.code == "user_not_found":
                return None
            raise
        return resp.get("user") or {}

    def user_exists(self, user_id: str) -> bool:
        """users.info: False for `user_not_found` and for deactivated accounts."""
        user = self._user(user_id)
        return user is not None and not bool(user.get("deleted", False))

    def display_name(self, user_id: str) -> str | None:
        """users.info: the profile's display name, else the real name, else the handle; None for
        `user_not_found`."""
        user = self._user(user_id)
        if user is None:
            return None
        profile = user.get("profile") or {}
        for name in (
            profile.get("display_name"),
            profile.get("real_name"),
            user.get("real_name"),
            user.get("name"),
        ):
            if isinstance(name, str) and name.strip():
                return name.strip()
        return None

    def group_exists(self, group_id: str) -> bool:
        """usergroups.users.list answers `no_such_subteam` for a group that does not exist."""
        try:
            self.gateway._call(
                "usergroups.users.list", self.gateway.client.usergroups_users_list, usergroup=group_id
            )
        except SlackCallFailed as exc:
            if exc.code in {"no_such_subteam", "subteam_not_found"}:
                return False
            raise
        return True


# ---------------------------------------------------------------------------------------------
# Metrics hooks: every Web API call goes through `api_call`, and every wait for Retry-After through
# the rate-limit handler's `prepare_for_next_attempt`, so both are recorded in one place each.


class _RecordingWebClient(WebClient):
    """A `WebClient` that reports each call's method and result (after its retries), and makes
    the requests of `GUARDED_REQUESTS` only inside this replica's lease."""

    def __init__(
        self,
        *,
        on_call: Callable[[str, str], None] | None,
        tenure: LeaseGuard | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._on_call = on_call or (lambda _method, _result: None)
        self._tenure = tenure

    def api_call(self, api_method: str, **kwargs: Any) -> Any:
        if self._tenure is not None and api_method in GUARDED_REQUESTS:
            self._tenure.may_act(float(self.timeout))
        result = "exception"
        try:
            response = super().api_call(api_method, **kwargs)
            result = "ok"
            return response
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            # Slack's error codes are a closed set of short words: safe as a label.
            result = error if isinstance(error, str) and error.isidentifier() else "error"
            raise
        finally:
            self._on_call(api_method, result)


class _TimedRateLimitHandler(RateLimitErrorRetryHandler):
    """slack_sdk's 429 handler (it sleeps Retry-After), telling how long it waited."""

    def __init__(self, *, on_wait: Callable[[float], None] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_wait = on_wait

    def prepare_for_next_attempt(self, **kwargs: Any) -> None:
        started = time.monotonic()
        super().prepare_for_next_attempt(**kwargs)
        if self._on_wait is not None:
            self._on_wait(time.monotonic() - started)
