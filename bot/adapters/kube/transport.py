"""`Transport`: one cluster's API server through the official client's `ApiClient`, on raw bodies.

Every call carries a `(connect, read)` timeout, shortened inside `within`; failures become the
bot's error tree (unreachable, forbidden, expired continue token, eviction blocked). `remembering`
keeps whole lists for a second reader (see `pages`)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import urllib3

from bot.adapters.kube.errors import _retry_after, _status_cause, _status_message, _what_happened
from bot.adapters.kube.lean import _kubernetes
from bot.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    ContinueExpired,
    EvictionBlocked,
)

log = logging.getLogger(__name__)


MEMO_BYTES = 64 * 1024 * 1024

#: Told of each API request: (verb, result, seconds) — `get`/`list`… as the HTTP method
#: lower-cased (`watch` for a watch), the HTTP status or `unreachable`, time to the headers.
RequestObserver = Callable[[str, str, float], None]

#: Inside `Cluster.within`: the monotonic time by which every request must have ended.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("kube_deadline", default=None)


class Transport:
    """One cluster's API server, reached through the official client's transport."""

    def __init__(
        self,
        name: str,
        api_client: Any,
        *,
        timeout: float,
        context: str = "",
        observe: RequestObserver | None = None,
        niced_helpers: bool = True,
    ) -> None:
        self.name = name
        self.context = context
        self.api_client = api_client
        self.timeout = timeout
        #: Told of every API request (verb, result, seconds): the front door's metrics.
        self.observe = observe
        #: Whether the processes that fetch and decode lists for this client (`prefetch`, `pages`)
        #: run below its own priority: in the served bot, so that its threads answer Slack first;
        #: not in a terminal command, whose helpers are the work it waits for.
        self.niced_helpers = niced_helpers
        #: Inside `remembering`: whole lists read so far, (path, query, limit) → their raw pages.
        self._memo: dict[tuple[str, str, int], list[bytes]] | None = None
        self._memo_left = 0
        self._memo_paths: frozenset[str] | None = None

    @contextlib.contextmanager
    def remembering(
        self, paths: Collection[str] | None = None, *, max_bytes: int = MEMO_BYTES
    ) -> Iterator[None]:
        """Within the block a list is read from the cluster once: a second `list_pages` of the same
        path and query (another check decoding the same objects into another shape: the checks'
        workloads and the removed-API signals' managedFields) decodes the pages kept from the
        first. Only whole lists of `paths` (None: any) are kept, `max_bytes` of them at most (what
        does not fit is read again); the pages are dropped when the block ends. Not for watches or
        pods' `map_pages`."""
        self._memo, self._memo_left = {}, max_bytes
        self._memo_paths = frozenset(paths) if paths is not None else None
        try:
            yield
        finally:
            self._memo, self._memo_left, self._memo_paths = None, 0, None

    @contextlib.contextmanager
    def within(self, seconds: float) -> Iterator[None]:
        """Within the block every request (this thread's) ends `seconds` from now at the latest,
        connect retry included: a job's write checked against this replica's lease is bounded by
        the figure checked (`bot.core.tenure.GuardedCalls`), not by the read timeout of 60 s."""
        token = _DEADLINE.set(time.monotonic() + seconds)
        try:
            yield
        finally:
            _DEADLINE.reset(token)

    @property
    def server(self) -> str:
        return str(self.api_client.configuration.host)

    def close(self) -> None:
        self.api_client.close()

    def _request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        read_timeout: float | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json"}
        read = read_timeout or max(self.timeout, 60.0)
        if body is not None:
            headers["Content-Type"] = content_type
        if self.observe is None:
            return self._call(method, path, query, headers, body, read)
        verb = (
            "watch"
            if method == "GET" and str((query or {}).get("watch", "")).lower() in ("1", "true")
            else method.lower()
        )
        began, result = time.monotonic(), "unreachable"
        try:
            resp = self._call(method, path, query, headers, body, read)
            result = str(getattr(resp, "status", "") or "200")
            return resp
        except ClusterError as exc:
            if exc.status:
                result = str(exc.status)
            raise
        finally:
            self.observe(verb, result, time.monotonic() - began)

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        headers: dict[str, str],
        body: Any,
        read: float,
    ) -> Any:
        try:
            return self.api_client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=self._timeouts(read),
            )
        except _kubernetes().ApiException as exc:
            raise self._api_error(exc, method, path) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # The error below says what happened in words; urllib3's "HTTPConnectionPool … Max
            # retries exceeded …" is for whoever debugs (the caller logs the error with its cause).
            log.debug("cluster %s unreachable at %s: %s", self.name, self.server, exc)
            raise ClusterUnreachable(
                f"cluster {self.describe()} {_what_happened(exc, self.timeout, read)} at {self.server}",
                cluster=self.name,
            ) from exc

    def _timeouts(self, read: float) -> tuple[float, float]:
        """(connect, read) seconds for one request: the cluster's, or inside `within` what is left
        of its time — a fifth to connect, three fifths to read, so the one connect retry of
        `connect` included the request ends in time."""
        deadline = _DEADLINE.get()
        if deadline is None:
            return (self.timeout, read)
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClusterUnreachable(
                f"cluster {self.describe()}: no time left for the request inside this replica's lease",
                cluster=self.name,
            )
        return (min(self.timeout, left / 5), min(read, left * 3 / 5))

    def describe(self) -> str:
        """`prod`, `prod (context admin@prod)` or `prod (in-cluster)`: how messages name it."""
        if not self.context:
            return self.name
        if self.context == "in-cluster":
            return f"{self.name} (in-cluster)"
        return f"{self.name} (context {self.context})"

    def _api_error(self, exc: Any, method: str, path: str) -> ClusterError:
        status = int(exc.status or 0)
        reason = _status_message(exc.body) or exc.reason or "error"
        # A GET of something that is not there is an answer (checks look for optional objects), not
        # a fault worth a warning on every check; nor is an eviction a disruption budget refuses
        # (429): the drain retries it every few seconds and says so once in the run's thread.
        expected = (status == 404 and method == "GET") or (status == 429 and path.endswith("/eviction"))
        level = logging.INFO if expected else logging.WARNING
        log.log(level, "cluster %s: %s %s → %s %s", self.name, method, path, status, reason)
        if status == 403:
            return ClusterForbidden(
                f"cluster {self.name}: the bot is not allowed to {method} {path} ({reason})",
                cluster=self.name,
                status=status,
            )
        if status == 410:
            return ContinueExpired(f"cluster {self.name}: {reason}", cluster=self.name, status=status)
        if status == 429 and path.endswith("/eviction"):
            cause = _status_cause(exc.body)
            return EvictionBlocked(
                f"cluster {self.name}: {reason}" + (f" ({cause})" if cause else ""),
                cluster=self.name,
                retry_after=_retry_after(exc.headers),
            )
        return ClusterError(
            f"cluster {self.name}: {method} {path} failed: {status} {reason}",
            cluster=self.name,
            status=status,
        )

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        # Single objects and discovery documents are small: a server silent for longer than the
        # cluster's timeout (at least 10 s) is not going to answer.
        resp = self._request("GET", path, query, read_timeout=max(self.timeout, 10.0))
        try:
            data = resp.data
        finally:
            resp.release_conn()
        loaded = json.loads(data)
        return loaded if isinstance(loaded, dict) else {}

    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes:
        resp = self._request("GET", path, query)
        try:
            return bytes(resp.data)
        finally:
            resp.release_conn()

    def _get_into(self, path: str, query: Mapping[str, Any], into: memoryview) -> int | bytes:
        """`get_raw`, but a body that fits is read straight into `into` (its length is returned).

        For the list helper's shared slots: reading a 2.7 MB page into a fresh bytes object and
        copying it into the slot cost a zeroed allocation and a copy per page, 0.15 s of CPU at
        150,000 pods. Only a plain body of known length is read so (through the standard library's
        response under urllib3's, whose own `readinto` copies); anything else comes back as bytes.
        """
        resp = self._request("GET", path, query)
        try:
            length = resp.headers.get("Content-Length")
            plain = resp.headers.get("Content-Encoding", "identity") == "identity"
            fp = getattr(resp, "_fp", None)
            if not (plain and length and length.isdigit() and int(length) <= len(into) and fp is not None):
                return bytes(resp.data)
            size, got = int(length), 0
            try:
                while got < size:
                    n = fp.readinto(into[got:size])
                    if not n:
                        break
                    got += n
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ClusterUnreachable(
                    f"cluster {self.describe()} {_what_happened(exc, self.timeout, self.timeout)} at {self.server}",
                    cluster=self.name,
                ) from exc
            if got != size:
                raise ClusterUnreachable(
                    f"cluster {self.describe()} dropped the connection at {self.server}", cluster=self.name
                )
            return size
        finally:
            resp.release_conn()

    def send_json(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        content_type: str = "application/json",
        query: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A write (POST, PUT, PATCH) with a JSON body; returns the server's JSON answer."""
        resp = self._request(method, path, query, body=body, content_type=content_type)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        loaded = json.loads(data) if data else {}
        return loaded if isinstance(loaded, dict) else {}

    def _shape_error(self, path: str, exc: Exception) -> ClusterError:
        """A body that is not JSON, or a field of an unexpected type: the server is not what we
        expect (a proxy's error page, a newer API); stop and say where, rather than guess."""
        log.warning("cluster %s: GET %s: unexpected body: %s", self.name, path, exc)
        return ClusterError(
            f"cluster {self.name}: GET {path} returned an unexpected body ({exc})", cluster=self.name
        )
