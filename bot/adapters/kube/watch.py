"""`Watches`: one watch stream decoded line by line, and `list_watch`, the informer loop (list, watch
from the list's version with bookmarks, resume, list again after a 410)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, overload

import msgspec
import urllib3

from bot.adapters.kube.decoding import (
    _ERROR_EVENT,
    _VERSION_EVENT,
    Raw,
    T,
    WatchEvent,
    _Event,
    _event_decoder,
    _lines,
    _version_of,
)
from bot.adapters.kube.pages import Lists
from bot.errors import (
    ClusterError,
    ContinueExpired,
    WatchExpired,
)

log = logging.getLogger(__name__)


#: Server-side end of one watch stream; the client's read timeout is longer (see `watch`).
WATCH_SECONDS = 60


class Watches(Lists):
    """Lists, with watches."""

    @overload
    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
    ) -> Iterator[WatchEvent[Raw]]: ...

    @overload
    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
        item_type: type[T],
    ) -> Iterator[WatchEvent[T]]: ...

    def watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = WATCH_SECONDS,
        bookmarks: bool = True,
        item_type: Any = Raw,
    ) -> Iterator[WatchEvent[Any]]:
        """One watch stream from `resource_version`, until the server ends it; objects as `item_type`.

        The client's own `Watch` is not used: with `deserialize=False` it crashes on ERROR events and
        does not track the resourceVersion. An ERROR event with code 410 raises WatchExpired (list
        again); any other ERROR event raises ClusterError.
        """
        params = dict(query or {})
        params.update(watch="true", resourceVersion=resource_version, timeoutSeconds=timeout_seconds)
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        decode = _event_decoder(item_type).decode
        # The read timeout outlasts the server's own end of the stream, so a quiet watch is not cut.
        resp = self._request("GET", path, params, read_timeout=timeout_seconds + max(self.timeout, 10.0))
        try:
            for line in _lines(resp):
                # One pass in the common case: the event and its object, as the caller's type. An
                # ERROR carries a Status instead, which the caller's type may not fit (or may fit
                # by accident): either way the line is read again, as an ERROR.
                misfit: Exception | None = None
                event: _Event[Any] | None = None
                try:
                    event = decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    misfit = exc
                if event is None or event.type == "ERROR":
                    try:
                        error = _ERROR_EVENT.decode(line)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise self._shape_error(path, exc) from exc
                    if error.type != "ERROR":
                        raise self._shape_error(path, misfit or ValueError("no object")) from misfit
                    code = int(error.object.code or 0)
                    message = str(error.object.message or error.object.reason or "watch error")
                    if code == 410:
                        raise WatchExpired(f"cluster {self.name}: {message}", cluster=self.name, status=410)
                    raise ClusterError(
                        f"cluster {self.name}: watch {path} failed: {code} {message}",
                        cluster=self.name,
                        status=code or None,
                    )
                rv = _version_of(event.object)
                if rv is None:
                    rv = _VERSION_EVENT.decode(line).object.metadata.resource_version
                yield WatchEvent(type=event.type, object=event.object, resource_version=rv)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # A stream cut mid-way (proxy, server restart) ends this watch; the caller resumes it.
            log.info("cluster %s: watch %s ended: %s", self.name, path, exc)
        finally:
            resp.release_conn()

    @overload
    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[Raw]]: ...

    @overload
    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        item_type: type[T],
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[T]]: ...

    def list_watch(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        resource_version: str = "",
        timeout_seconds: int = WATCH_SECONDS,
        item_type: Any = Raw,
        stop: threading.Event | None = None,
        reduce: Callable[[Any], Any] | None = None,
    ) -> Iterator[WatchEvent[Any]]:
        """List, then watch for ever: the loop a live view of the cluster needs. Stop by closing it,
        or by setting `stop`: no new list or watch request is made once it is set (a stream that
        ended quietly is not opened again on a server that may be going away).

        Without `resource_version` it starts with a SYNC event (the full list); with one (say, a
        snapshot's) it watches from there. Bookmarks keep the version current, so a stream that ends
        resumes where it stopped without a list; a 410 (the version is older than the server's
        history) is answered by a new SYNC and a watch from that list's version.

        `reduce`, when given, maps each listed item and each ADDED/MODIFIED/DELETED object to what
        the caller keeps, page by page as they are decoded: a 150,000-pod list is then never held
        whole as `item_type` (each page is released once reduced).
        """
        rv = resource_version
        while stop is None or not stop.is_set():
            if not rv:
                items: list[Any] = []
                for page in self.list_pages(path, query, item_type=item_type):
                    items.extend(page.items if reduce is None else map(reduce, page.items))
                    rv = page.resource_version
                    del page
                yield WatchEvent(type="SYNC", object={"items": items}, resource_version=rv)
                del items
            try:
                for event in self.watch(
                    path, query, resource_version=rv, timeout_seconds=timeout_seconds, item_type=item_type
                ):
                    if event.resource_version:
                        rv = event.resource_version
                    if reduce is not None and event.type in ("ADDED", "MODIFIED", "DELETED"):
                        event = WatchEvent(event.type, reduce(event.object), event.resource_version)
                    yield event
            except (WatchExpired, ContinueExpired) as exc:
                # 410 comes as an ERROR event (WatchExpired) or, from some servers, as the status of
                # the watch request itself (ContinueExpired): either way the version is gone.
                log.info("%s; listing %s again", exc, path)
                rv = ""
