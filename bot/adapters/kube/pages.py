"""`Lists`: consistent paged lists, fetched ahead of the caller (`prefetch`), decoded as the caller's
`item_type`, kept for a second reader inside `remembering`; and `MappedList`, the list helper
process of `map_pages`: a fork that lists, decodes and transforms every page, handing back bytes,
so a 150,000-pod list costs the caller's interpreter nothing."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, cast, overload

import msgspec

from bot.adapters.kube import prefetch
from bot.adapters.kube.decoding import MappedPage, Page, Raw, T, _page_decoder
from bot.adapters.kube.lean import _kubernetes
from bot.adapters.kube.prefetch import (
    _CHILDREN,
    _ERROR,
    _FAILED,
    _FRAME,
    _HELPERS,
    _continue_from_head,
    _die_with_parent,
    _Forked,
    _page_query,
    _Prefetch,
    _read_exactly,
    _rebuild_error,
    _write_all,
)
from bot.adapters.kube.transport import Transport
from bot.errors import ClusterError

log = logging.getLogger(__name__)

#: kubectl's page size; the API server's list cost is bounded per page.
PAGE_SIZE = 500


class Lists(Transport):
    """The transport, with paged lists."""

    @overload
    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = PAGE_SIZE
    ) -> Iterator[Page[Raw]]: ...

    @overload
    def list_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: type[T],
    ) -> Iterator[Page[T]]: ...

    def list_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: Any = Raw,
    ) -> Iterator[Page[Any]]:
        """Yield a consistent list page by page, items as `item_type`; raises ContinueExpired if the
        token runs out.

        Pages are fetched back to back, up to `PREFETCH` ahead of the caller: the server's work and
        the network overlap with decoding and projection, which matters at 300 pages of pods. The
        first page is fetched here; if the list has more, a forked child process fetches the rest
        (`_Forked`, on Linux; a helper thread, `_Prefetch`, elsewhere). The continue token is read
        from the head of each raw page (list metadata comes before the items), so the next fetch
        waits for no decoding.
        """
        if self._memo is None or (self._memo_paths is not None and path not in self._memo_paths):
            return self._list_from(path, query, limit, item_type, "")
        key = (path, json.dumps(sorted((query or {}).items()), default=str), limit)
        kept = self._memo.get(key)
        if kept is not None:
            return self._from_memo(path, kept, item_type)
        return self._list_keeping(path, query, limit, item_type, key, self._memo)

    def _from_memo(self, path: str, kept: list[bytes], item_type: Any) -> Iterator[Page[Any]]:
        decoder = _page_decoder(item_type)
        for raw in kept:
            try:
                body = decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise self._shape_error(path, exc) from exc
            yield Page(
                items=body.items or [],
                resource_version=body.metadata.resource_version,
                continue_token=body.metadata.continue_,
                remaining=body.metadata.remaining_item_count,
            )

    def _list_keeping(
        self,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        key: tuple[str, str, int],
        memo: dict[tuple[str, str, int], list[bytes]],
    ) -> Iterator[Page[Any]]:
        """`_list_from`, keeping the raw pages in `memo` once the whole list was read and fits."""
        keep: list[bytes] = []
        yield from self._list_from(path, query, limit, item_type, "", keep=keep)
        size = sum(len(raw) for raw in keep)
        if memo is self._memo and size <= self._memo_left:
            memo[key] = keep
            self._memo_left -= size

    def _list_from(
        self,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        token: str,
        *,
        keep: list[bytes] | None = None,
    ) -> Iterator[Page[Any]]:
        """`list_pages` from `token` on (the start of the list if empty); `keep` receives a copy of
        each raw page yielded (`remembering`)."""
        decoder = _page_decoder(item_type)
        guess = token
        ahead = _Forked if prefetch.FORK_FETCH else _Prefetch
        while True:
            with ahead(self, path, query, limit, token) as fetched:
                for raw, guess in fetched:
                    try:
                        body = decoder.decode(raw)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise self._shape_error(path, exc) from exc
                    if keep is not None:
                        keep.append(bytes(raw))
                    del raw
                    token = body.metadata.continue_
                    yield Page(
                        items=body.items or [],
                        resource_version=body.metadata.resource_version,
                        continue_token=token,
                        remaining=body.metadata.remaining_item_count,
                    )
                    if token != guess:
                        # The head scan disagreed with the decoded body: drop what was fetched
                        # ahead on the guess and follow the body.
                        break
            if not token or token == guess:
                return

    def map_pages(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        limit: int = PAGE_SIZE,
        item_type: type[T],
        transform: Callable[[list[T]], bytes],
    ) -> MappedList:
        """List `path` as `list_pages` does, `transform` turning each page's items into bytes, all of
        it in a helper process that starts now: the caller is free until it iterates the result.

        For the lists too large to decode in the caller's process (150,000 pods: 800 MB of JSON):
        decoding a page holds the interpreter lock for milliseconds at a time, which is what makes
        a Slack ack wait, and the caller has other lists to read meanwhile. The helper is a fork
        (`transform` and what it closes over come with it, nothing is pickled) that runs
        `list_pages` (which forks a fetcher of its own, so the server, the decoding and the caller
        each have a process) and hands back each page's bytes through an in-memory file. A
        ClusterError of the list is raised where its page would have been; if the helper cannot be
        started, or stops for any other reason, the caller's process lists the rest itself.
        Close the result (or leave its `with` block) to stop the helper if it is not iterated to the
        end.
        """
        return MappedList(self, path, query, limit, item_type, transform)


#: A mapping helper's frame for one page: its bytes are the next `length` of the in-memory file.
_MAPPED = b"M"
#: How much less CPU priority the mapping helper takes than the served bot (`niced_helpers`). The
#: bot's process does no decoding while it waits, so its threads answer Slack without waiting for
#: the interpreter lock; but on a machine busy with other work they still wait for a CPU behind the
#: helpers (an ack took 0.17 s with the helpers not niced, at most 0.034 s in quieter runs). A
#: little below the bot, not as far as the fetcher of a list the bot decodes itself: a helper
#: niced to 10 lost much of its share of a busy machine. Its own fetcher is not niced below it
#: (see `_child_map`). A terminal command's helpers are not niced: they are what it waits for, and
#: niced they waited for a CPU behind its own process's other lists.
MAPPER_NICENESS = 5


class MappedList:
    """`Cluster.map_pages`' result: iterate it for `MappedPage`s; close it to stop its helper.

    At construction an owner thread fetches the first page. Only if the list has more is the helper
    forked, from that thread, for the rest: a list of one page (every list of a small cluster) costs
    no fork, and a fork is not free in a long-lived bot (about 12 ms with the interpreter lock held
    at 180 MB, and copy-on-write faults after it). Twenty clusters checked at once forked twenty
    helpers, and an ack waited 0.17 s behind them. The first page is decoded and transformed in the
    caller's process when iterated; the helper works ahead on its own: it writes each page's bytes
    to an in-memory file (`memfd_create`), which has no back-pressure, so a caller busy elsewhere
    never stalls it, and a small frame per page to a pipe (`_FRAME`: a page's length, count,
    version and continue token as JSON; an error; a failure; the end). The owner thread waits until
    the list is closed: the helper dies with the thread that forked it (`_die_with_parent`). Where
    no helper can be had (not Linux, no process or memory to spare) the pages are listed and
    transformed in the caller's process when iterated.
    """

    def __init__(
        self,
        cluster: Lists,
        path: str,
        query: Mapping[str, Any] | None,
        limit: int,
        item_type: Any,
        transform: Callable[[list[Any]], bytes],
    ) -> None:
        self._cluster, self._path, self._query, self._limit = cluster, path, query, limit
        self._item_type, self._transform = item_type, transform
        self._pid = 0
        self._frames_fd = self._data_fd = -1
        self._offset = 0
        self._finished = False  # the helper sent the last page and is ending by itself
        self._lock = threading.Lock()  # the owner's fork against `close`
        self._closed = threading.Event()
        self._first: tuple[bytes, str] | BaseException | None = None
        self._first_ready = threading.Event()
        self._owner: threading.Thread | None = None
        if prefetch.FORK_FETCH:
            self._owner = threading.Thread(
                target=self._own, name=f"kube-list-map-{cluster.name}", daemon=True
            )
            self._owner.start()

    def __enter__(self) -> MappedList:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[MappedPage]:
        return self._pages()

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            self._stop_helper()
        owner = self._owner
        if owner is not None and owner is not threading.current_thread():
            owner.join()  # at most the first page's request, if it is still under way

    def _stop_helper(self) -> None:
        for fd in (self._frames_fd, self._data_fd):
            if fd >= 0:
                os.close(fd)
        self._frames_fd = self._data_fd = -1
        if self._pid:
            if not self._finished:
                # SIGTERM, not SIGKILL: the helper's own fetcher is stopped and reaped on its way out.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGTERM)
            os.waitpid(self._pid, 0)
            _CHILDREN.discard(self._pid)
            self._pid = 0

    def _own(self) -> None:
        """The owner thread: the first page; the helper forked for the rest if there is more; then
        wait for `close`, as the helper lives only as long as the thread that forked it."""
        token = ""
        try:
            raw = self._cluster.get_raw(self._path, _page_query(self._query, self._limit, ""))
            token = _continue_from_head(raw) or ""
            self._first = (raw, token)
        except BaseException as exc:  # raised to the caller where the first page would have been
            self._first = exc
        with self._lock:
            if token and not self._closed.is_set():
                self._start(token)
        self._first_ready.set()
        if self._pid:
            self._closed.wait()

    def _start(self, token: str) -> None:
        """Fork the helper that lists and transforms the pages from `token` on."""
        try:
            data_fd = os.memfd_create("kube-map", os.MFD_CLOEXEC)
        except (OSError, AttributeError) as exc:
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            return
        frames_r, frames_w = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:  # no process to spare: the caller's process lists when iterated
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            for fd in (data_fd, frames_r, frames_w):
                os.close(fd)
            return
        if pid == 0:  # pragma: no cover - the child; coverage does not follow a fork
            code = 1
            try:
                os.close(frames_r)
                _die_with_parent(parent)
                if self._cluster.niced_helpers:
                    with contextlib.suppress(OSError):
                        os.nice(MAPPER_NICENESS)
                code = _child_map(self, token, frames_w, data_fd)
            finally:
                os._exit(code)
        os.close(frames_w)
        self._pid, self._frames_fd, self._data_fd = pid, frames_r, data_fd
        with _HELPERS:  # counted once by `fetching_ahead`: the child now, no longer this thread
            _CHILDREN.add(pid)
            threading.current_thread().name = f"kube-map-owner-{self._cluster.name}"

    def _first_page(self) -> Iterator[MappedPage]:
        """The page the owner thread fetched, decoded and transformed here; none without an owner."""
        if self._owner is None:
            return
        self._first_ready.wait()
        first, self._first = self._first, None
        if isinstance(first, BaseException):
            raise first
        assert first is not None
        raw, guess = first
        try:
            body = _page_decoder(self._item_type).decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._cluster._shape_error(self._path, exc) from exc
        del raw, first
        token = body.metadata.continue_
        if token != guess:
            # The head scan disagreed with the decoded body: the helper started on the guess.
            with self._lock:
                self._stop_helper()
        items = body.items or []
        yield MappedPage(
            self._transform(items),
            len(items),
            body.metadata.resource_version,
            token,
            body.metadata.remaining_item_count,
        )

    def _pages(self) -> Iterator[MappedPage]:
        token, started = "", False
        try:
            for first in self._first_page():
                token, started = first.continue_token, True
                yield first
            if started and not token:
                return
            while self._pid:
                kind, payload = self._receive()
                if kind == _MAPPED:
                    meta = json.loads(payload)
                    length = int(meta["length"])
                    data = os.pread(self._data_fd, length, self._offset) if length else b""
                    if len(data) != length:
                        raise OSError(f"the list helper's file ended at {self._offset + len(data)}")
                    self._offset += length
                    token, started = str(meta["token"]), True
                    self._finished = not token
                    remaining = meta.get("remaining")
                    yield MappedPage(
                        data,
                        int(meta["count"]),
                        str(meta["version"]),
                        token,
                        None if remaining is None else int(remaining),
                    )
                    if not token:
                        return
                    continue
                if kind == _ERROR:
                    self._finished = True  # its last frame: the helper is on its way out by itself
                    raise _rebuild_error(memoryview(payload), self._cluster.name)
                # The helper failed outside the API (or died): the rest is listed here.
                log.warning(
                    "cluster %s: the list helper for %s stopped; listing on", self._cluster.name, self._path
                )
                break
        finally:
            self.close()
        if started and not token:
            return
        for page in self._cluster._list_from(self._path, self._query, self._limit, self._item_type, token):
            yield MappedPage(
                self._transform(page.items),
                len(page.items),
                page.resource_version,
                page.continue_token,
                page.remaining,
            )

    def _receive(self) -> tuple[bytes, bytes]:
        head = bytearray(_FRAME.size)
        if not _read_exactly(self._frames_fd, memoryview(head)):
            return _FAILED, b""
        kind, size = _FRAME.unpack(head)
        payload = bytearray(size)
        if not _read_exactly(self._frames_fd, memoryview(payload)):
            return _FAILED, b""
        return kind, bytes(payload)


def _ignore_stop() -> None:  # pragma: no cover - runs in the fork
    """The helper's last frame goes out next: a SIGTERM from here on must not raise SystemExit in
    whatever runs then — the finalizers of its HTTP pool as it returns, say, which would print a
    traceback on the command's stderr — the helper is ending by itself anyway."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _child_map(
    mapped: MappedList, token: str, out: int, data: int
) -> int:  # pragma: no cover - runs in the fork
    """The mapping helper: list from `token` on, transform each page, its bytes to `data` and a
    frame to `out`."""
    gc.disable()  # short-lived: what it builds is dropped page by page, and the parent's heap stays shared
    signal.signal(signal.SIGINT, signal.SIG_DFL)

    def stop(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    cluster = mapped._cluster
    own = Lists(
        cluster.name,
        _kubernetes().client.ApiClient(cluster.api_client.configuration),
        timeout=cluster.timeout,
        niced_helpers=False,  # its fetcher is not below it
    )

    def send(kind: bytes, payload: bytes) -> None:
        _write_all(out, memoryview(_FRAME.pack(kind, len(payload)) + payload))

    try:
        listed = own._list_from(mapped._path, mapped._query, mapped._limit, mapped._item_type, token)
        # Closed on the way out (a SIGTERM too), which stops and reaps the fetcher it forked.
        with contextlib.closing(cast(Generator[Page[Any], None, None], listed)) as pages:
            for page in pages:
                body = mapped._transform(page.items)
                _write_all(data, memoryview(body))
                meta = {
                    "length": len(body),
                    "count": len(page.items),
                    "version": page.resource_version,
                    "token": page.continue_token,
                    "remaining": page.remaining,
                }
                last = not page.continue_token
                del page, body
                if last:
                    _ignore_stop()
                send(_MAPPED, json.dumps(meta).encode())
        return 0
    except ClusterError as exc:
        error = {"class": type(exc).__name__, "message": exc.user_message, "status": exc.status}
        _ignore_stop()
        with contextlib.suppress(OSError):
            send(_ERROR, json.dumps(error).encode())
        return 0
    except BrokenPipeError:
        return 0  # the caller stopped reading: it has what it wanted
    except SystemExit:
        return 0
    except BaseException:
        log.exception("cluster %s: the list helper for %s failed", cluster.name, mapped._path)
        with contextlib.suppress(OSError):
            send(_FAILED, b"")
        return 1
