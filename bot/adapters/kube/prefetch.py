"""Fetching a list's pages ahead of its reader: a helper thread (`_Prefetch`) or, on Linux, a forked
child (`_Forked`) that copies each page into memory shared with the parent."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import logging
import mmap
import os
import queue
import re
import signal
import struct
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from bot.adapters.kube.lean import _kubernetes
from bot.adapters.kube.transport import Transport
from bot.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    ContinueExpired,
)

log = logging.getLogger(__name__)


#: Where the list metadata (and its continue token) is looked for, ahead of the items.
HEAD_BYTES = 65536
_CONTINUE = re.compile(rb'"continue"\s*:\s*"((?:[^"\\]|\\.)*)"')


#: Pages fetched ahead of the caller: enough to keep the server busy, few enough to bound memory.
PREFETCH = 2


class _Prefetch:
    """A helper thread that fetches a list's raw pages back to back, following the head tokens.

    Iterating yields `(raw page, continue token from its head)`; an error of the fetch is raised
    where the page would have been. Leaving the `with` block stops the thread and waits for it.
    """

    _END = object()

    def __init__(
        self, cluster: Transport, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PREFETCH)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(cluster, path, query, limit, token),
            name=f"kube-list-{cluster.name}",
            daemon=True,
        )

    def __enter__(self) -> Iterator[tuple[bytes, str]]:
        self._thread.start()
        return self._pages()

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        while self._thread.is_alive():
            # Unblock a producer waiting for room, then let it see the stop.
            with contextlib.suppress(queue.Empty):
                self._queue.get_nowait()
            self._thread.join(timeout=0.05)

    def _pages(self) -> Iterator[tuple[bytes, str]]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(
        self, cluster: Transport, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        while not self._stop.is_set():
            try:
                raw = cluster.get_raw(path, _page_query(query, limit, token))
            except BaseException as exc:  # handed to the caller, raised where the page would be
                self._put(exc)
                return
            token = _continue_from_head(raw) or ""
            if not self._put((raw, token)) or not token:
                break
        self._put(self._END)


#: Lists longer than one page are fetched by a forked child process where fork is safe to use.
FORK_FETCH = sys.platform == "linux"
#: Pids of the fetching children alive now (see `fetching_ahead`).
_CHILDREN: set[int] = set()
#: A child's frame: kind (page in a shared slot, page in the pipe, error, failure, done) and
#: payload length.
_FRAME = struct.Struct("!cQ")
_SLOT, _PAGE, _ERROR, _FAILED, _DONE = b"S", b"P", b"E", b"X", b"D"
#: A slot frame's payload: which slot, how many bytes.
_SLOT_REF = struct.Struct("!IQ")
#: Pages the child may hold in shared memory at once: `PREFETCH` not yet taken, the one the parent
#: is decoding, and the one the child is filling. Pages larger than a slot go through the pipe.
SLOTS = PREFETCH + 2
SLOT_BYTES = 64 << 20
#: The errors a list request raises, rebuilt in the parent from a child's error frame by name.
_LIST_ERRORS: dict[str, type[ClusterError]] = {
    cls.__name__: cls for cls in (ClusterError, ClusterUnreachable, ClusterForbidden, ContinueExpired)
}


#: How much less CPU priority the list helper process takes than the served bot (see `os.nice`,
#: `Transport.niced_helpers`).
CHILD_NICENESS = 10


#: Held while a helper thread hands its work to the child it forked (see `fetching_ahead`).
_HELPERS = threading.Lock()


def fetching_ahead() -> int:
    """How many helpers (threads or child processes) are fetching list pages ahead right now."""
    with _HELPERS:
        threads = sum(1 for t in threading.enumerate() if t.name.startswith("kube-list-"))
        return threads + len(_CHILDREN)


class _Forked:
    """The first page here, then a forked child process that fetches the rest back to back.

    Why a process rather than `_Prefetch`'s thread: a thread reading the socket needs the
    interpreter lock back after every read (a few hundred KB each), and the decoder holds it for
    milliseconds at a time (msgspec decodes a page in one C call), so the reader waits behind each
    page and the server stalls on a full socket. Measured on the sim's `large` scenario: 806 MB of
    pod pages took 0.8 s to fetch alone and 4 to 7 s beside a decoding thread, so the thread bought
    almost nothing over fetching and decoding in turn. A child has an interpreter of its own: it
    fetches with a client of its own (a fresh connection pool over the same configuration: TLS,
    token, timeouts) and copies each page into a slot of memory shared with the parent (an
    anonymous shared mapping made before the fork; only the pages of it touched are resident),
    which the parent decodes in place: no copy through a pipe, which cost the parent a copy of every
    byte (800 MB at 150,000 pods).

    Frames go through a pipe, `_FRAME` headers and payloads: a page in a slot; a page in the pipe
    (larger than a slot); a ClusterError of the fetch (its class,
    message and status, raised again here where the page would have been); a failure of anything
    else (the parent fetches the rest itself from that page on, so nothing is lost); the end. The
    parent returns one byte per page taken, and the child stays at most `PREFETCH` pages ahead, as
    the thread does. Leaving the `with` block kills the child and reaps it.
    """

    def __init__(
        self, cluster: Transport, path: str, query: Mapping[str, Any] | None, limit: int, token: str
    ) -> None:
        self._cluster, self._path, self._query, self._limit, self._token = cluster, path, query, limit, token
        self._pid = 0
        self._pages_fd = self._credit_fd = -1
        # Pages that come through the pipe are read into one buffer, grown to the largest page:
        # the caller decodes a page before it asks for the next, and msgspec copies what it keeps,
        # so the buffer (or slot) is free by then. A fresh buffer per page would cost a zeroed
        # allocation and its page faults each time.
        self._buffer = bytearray()
        self._shared: mmap.mmap | None = None

    def __enter__(self) -> Iterator[tuple[bytes | memoryview, str]]:
        return self._pages()

    def __exit__(self, *_exc: object) -> None:
        for fd in (self._pages_fd, self._credit_fd):
            if fd >= 0:
                os.close(fd)
        self._pages_fd = self._credit_fd = -1
        # Not closed: the caller may still hold a view of a slot; the mapping goes with the last one.
        self._shared = None
        if self._pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
            _CHILDREN.discard(self._pid)
            self._pid = 0

    def _fetch(self, token: str) -> tuple[bytes, str]:
        raw = self._cluster.get_raw(self._path, _page_query(self._query, self._limit, token))
        return raw, _continue_from_head(raw) or ""

    def _pages(self) -> Iterator[tuple[bytes | memoryview, str]]:
        raw, token = self._fetch(self._token)
        if token:
            self._start(token)  # before the caller decodes this page, so the two overlap
        yield raw, token
        del raw
        while token and self._pid:
            kind, payload = self._receive()
            if kind in (_SLOT, _PAGE):
                with contextlib.suppress(OSError):  # a child that has ended needs no credit
                    os.write(self._credit_fd, b".")
                token = _continue_from_head(payload) or ""
                yield payload, token
                del payload
                continue
            if kind == _ERROR:
                raise _rebuild_error(payload, self._cluster.name)
            # The child failed outside the API (or died): fetch the rest here, from this token.
            log.warning(
                "cluster %s: the list helper for %s stopped; listing on", self._cluster.name, self._path
            )
            self.__exit__()
        while token:  # without a helper (none could be started, or it stopped): fetch them here
            raw, token = self._fetch(token)
            yield raw, token
            del raw

    def _start(self, token: str) -> None:
        try:
            self._shared = shared = mmap.mmap(-1, SLOTS * SLOT_BYTES)  # MAP_SHARED | MAP_ANONYMOUS
        except OSError as exc:  # a strict overcommit policy: the caller's process lists on
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            return
        pages_r, pages_w = os.pipe()
        credit_r, credit_w = os.pipe()
        with contextlib.suppress(OSError, AttributeError):
            # Fewer, larger reads of each page (Linux caps unprivileged pipes at 1 MB by default).
            fcntl.fcntl(pages_w, fcntl.F_SETPIPE_SZ, 1 << 20)
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:  # no process to spare (EAGAIN, ENOMEM): the caller's process lists on
            log.warning("cluster %s: no list helper for %s: %s", self._cluster.name, self._path, exc)
            for fd in (pages_r, pages_w, credit_r, credit_w):
                os.close(fd)
            self._shared = None
            return
        if pid == 0:  # pragma: no cover - the child; coverage does not follow a fork
            code = 1
            try:
                os.close(pages_r)
                os.close(credit_w)
                _die_with_parent(parent)
                # Below the bot's own threads: on a busy machine an ack must not wait for a page.
                if self._cluster.niced_helpers:
                    with contextlib.suppress(OSError):
                        os.nice(CHILD_NICENESS)
                code = _child_fetch(
                    self._cluster, self._path, self._query, self._limit, token, pages_w, credit_r, shared
                )
            finally:
                os._exit(code)
        os.close(pages_w)
        os.close(credit_r)
        self._pid, self._pages_fd, self._credit_fd = pid, pages_r, credit_w
        _CHILDREN.add(pid)

    def _receive(self) -> tuple[bytes, memoryview]:
        """The next frame's kind and payload (a view of the buffer, valid until the next call);
        kind `_FAILED` if the child is gone mid-way."""
        head = bytearray(_FRAME.size)
        if not _read_exactly(self._pages_fd, memoryview(head)):
            return _FAILED, memoryview(b"")
        kind, size = _FRAME.unpack(head)
        if kind == _SLOT and self._shared is not None:
            ref = bytearray(size)
            if not _read_exactly(self._pages_fd, memoryview(ref)):
                return _FAILED, memoryview(b"")
            slot, length = _SLOT_REF.unpack(ref)
            return kind, memoryview(self._shared)[slot * SLOT_BYTES : slot * SLOT_BYTES + length]
        if size > len(self._buffer):
            self._buffer = bytearray(size)
        payload = memoryview(self._buffer)[:size]
        if not _read_exactly(self._pages_fd, payload):
            return _FAILED, memoryview(b"")
        return kind, payload


#: prctl(2)'s option that signals a child when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:  # pragma: no cover - runs in the forked child
    """A list helper ends with the bot: killed with it (SIGKILL leaves no time to stop helpers),
    it would go on holding a request to the API server and the bot's stdout and stderr."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the bot died before the call above: nothing would signal it
        os._exit(1)


def _read_exactly(fd: int, into: memoryview) -> bool:
    """Fill `into` from `fd`; False if the pipe ends first."""
    got, size = 0, len(into)
    while got < size:
        n = os.readv(fd, [into[got:]])
        if n == 0:
            return False
        got += n
    return True


def _rebuild_error(payload: memoryview, cluster: str) -> ClusterError:
    fields = json.loads(bytes(payload))
    cls = _LIST_ERRORS.get(str(fields.get("class")), ClusterError)
    return cls(str(fields.get("message", "")), cluster=cluster, status=fields.get("status"))


def _child_fetch(
    cluster: Transport,
    path: str,
    query: Mapping[str, Any] | None,
    limit: int,
    token: str,
    out: int,
    credits: int,
    shared: mmap.mmap,
) -> int:  # pragma: no cover - runs in the forked child
    """The child's loop: fetch from `token` to the end, each page framed into `out`."""
    gc.disable()  # short-lived, and the parent's heap stays shared instead of copied on write
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    own = Transport(
        cluster.name,
        _kubernetes().client.ApiClient(cluster.api_client.configuration),
        timeout=cluster.timeout,
    )

    def send(kind: bytes, payload: bytes) -> None:
        view = memoryview(_FRAME.pack(kind, len(payload)) + payload) if len(payload) < 65536 else None
        if view is None:
            _write_all(out, memoryview(_FRAME.pack(kind, len(payload))))
            view = memoryview(payload)
        _write_all(out, view)

    ahead = sent = 0
    try:
        while True:
            while ahead >= PREFETCH:
                taken = os.read(credits, 4096)
                if not taken:
                    return 0  # the parent has gone
                ahead -= len(taken)
            slot = sent % SLOTS
            try:
                raw = own._get_into(
                    path,
                    _page_query(query, limit, token),
                    memoryview(shared)[slot * SLOT_BYTES :][:SLOT_BYTES],
                )
            except ClusterError as exc:
                error = {"class": type(exc).__name__, "message": exc.user_message, "status": exc.status}
                send(_ERROR, json.dumps(error).encode())
                return 0
            if isinstance(raw, int):  # read straight into the slot
                token = _continue_from_head(shared[slot * SLOT_BYTES : slot * SLOT_BYTES + HEAD_BYTES]) or ""
                send(_SLOT, _SLOT_REF.pack(slot, raw))
            else:
                token = _continue_from_head(raw) or ""
                if len(raw) <= SLOT_BYTES:
                    shared[slot * SLOT_BYTES : slot * SLOT_BYTES + len(raw)] = raw
                    send(_SLOT, _SLOT_REF.pack(slot, len(raw)))
                else:
                    send(_PAGE, raw)
            del raw
            ahead += 1
            sent += 1
            if not token:
                send(_DONE, b"")
                return 0
    except BrokenPipeError:
        return 0  # the parent stopped reading: it has what it wanted
    except BaseException:
        with contextlib.suppress(OSError):
            send(_FAILED, token.encode())
        return 1


def _write_all(fd: int, view: memoryview) -> None:  # pragma: no cover - runs in the forked child
    while view:
        view = view[os.write(fd, view) :]


def _page_query(query: Mapping[str, Any] | None, limit: int, token: str) -> dict[str, Any]:
    params = dict(query or {})
    params["limit"] = limit
    if token:
        params["continue"] = token
    return params


def _continue_from_head(raw: bytes | memoryview) -> str | None:
    """The list's continue token, found before `"items"` without parsing the page; None if absent.

    A wrong answer costs only speed: `list_pages` follows the decoded body when they differ."""
    start = bytes(raw[:HEAD_BYTES])
    items_at = start.find(b'"items"')
    head = start[: items_at if items_at >= 0 else 4096]
    match = _CONTINUE.search(head)
    if not match:
        return None
    return str(json.loads(b'"' + match.group(1) + b'"')) or None
