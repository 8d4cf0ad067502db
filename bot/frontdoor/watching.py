"""Driving watches: the threads behind `bot.core.watches.service` (started by the triggers door).

Watches run where the timers run, never on the command workers, so a hundred thousand events do not
delay an ack. `WatchDuty` is the watches' kind of long duty (`bot.core.duties`): the engine's scan
(a triggers interval job, and on demand when a watch is started or asked to end) claims every live
watch whose owner is gone (no heartbeat for `STALE_AFTER`; a live owner's watch is never taken)
and starts a `WatchDriver` thread for it.

A driver:
- opens the cluster and starts one `Stream` thread per kind of `KINDS` (typed structs; Warning
  events only), each running the kube adapter's `list_watch` (list, watch with bookmarks, a new
  list after 410) and feeding one queue; a stream that fails (5xx, connection refused) is started
  again from its last resourceVersion after a backoff, and a 410 there lists again; plus a
  `/version` poll for the control plane every `VERSION_SECONDS` (5 s; queued only when it changed);
- drains the queue into a `WatchState` (a SYNC replaces the kind's state), and once every kind
  has been listed, calls `publish` at most every `PUBLISH_SECONDS` (the trailing edge: what
  arrived meanwhile is in the next one, never dropped);
- reads, after a publish, the container log tails the known-issue rules asked for (`pods/log`
  with `tailLines`, at most `LOG_BYTES` each, once per workload and container while the workload
  stays a candidate, at most `LOG_READS_PER_MINUTE`), never in the fold: the next publish matches
  them;
- refreshes its heartbeat; stops when the watch ended (verdict, `unwatch`) or is no longer its own.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from bot.adapters.kube import Cluster, WatchEvent
from bot.core.checks.gather import LOGS_FORBIDDEN_NOTE
from bot.core.duties import Driver
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.core.watches.model import WatchState
from bot.core.watches.schema import KINDS
from bot.core.watches.service import HEARTBEAT_SECONDS, PUBLISH_SECONDS, WatchService
from bot.core.watches.spec import REDUCERS
from bot.errors import BotError, Fenced
from bot.frontdoor.serviceduty import ServiceDuty
from bot.records import WatchRow

log = logging.getLogger(__name__)

#: Server-side length of one watch stream (the adapter resumes from the last version after it).
STREAM_SECONDS = 30
#: How often the control plane's version is read: the card follows a control-plane upgrade within
#: seconds. `/version` is a few hundred bytes the API server answers from memory, read with the
#: adapter's bounded timeout on a thread of its own (a slow answer delays only the next poll).
VERSION_SECONDS = 5.0
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0
VERSION = "version"
#: The events queue's word for a stream that failed or is back (`Stream.failing`).
STREAM = "stream"
WATCHES = "watches"
#: Container log tails the known-issue rules may read per watch and minute, and their size cap.
LOG_READS_PER_MINUTE = 20
LOG_BYTES = 256 * 1024


#: What a watch reads from a cluster: the kube adapter (list_watch, get_json, close).
WatchSource = Cluster


def _query(kind: str) -> dict[str, str] | None:
    return {"fieldSelector": "type=Warning"} if kind == "event" else None


class Stream:
    """One kind's list + watch, for ever (until `stop`), into `out` as (kind, type, object)."""

    def __init__(
        self,
        source: WatchSource,
        kind: str,
        out: queue.Queue[tuple[str, str, Any]],
        stop: threading.Event,
        *,
        stream_seconds: int = STREAM_SECONDS,
    ) -> None:
        self.source = source
        self.kind = kind
        self.out = out
        self.stop = stop
        self.stream_seconds = stream_seconds
        self.resource_version = ""
        self.restarts = 0
        self.syncs = 0
        #: Failing since its last error (told to the watch as a STREAM event, and when it is back).
        self.failing = False
        self.thread = threading.Thread(target=self._run, name=f"watch-stream-{kind}", daemon=True)

    def start(self) -> Stream:
        self.thread.start()
        return self

    def _run(self) -> None:
        path, struct = KINDS[self.kind]
        delay = BACKOFF_FIRST
        event: WatchEvent[Any]
        while not self.stop.is_set():
            try:
                for event in self.source.list_watch(
                    path,
                    _query(self.kind),
                    resource_version=self.resource_version,
                    timeout_seconds=self.stream_seconds,
                    item_type=struct,
                    stop=self.stop,
                    reduce=REDUCERS.get(self.kind),
                ):
                    if self.stop.is_set():
                        return
                    if self.failing:
                        self.failing = False
                        self.out.put((STREAM, "BACK", self.kind))
                    if event.type == "SYNC":
                        self.syncs += 1
                        self.out.put((self.kind, "SYNC", event.object["items"]))
                    elif event.type != "BOOKMARK":
                        self.out.put((self.kind, event.type, event.object))
                    if event.resource_version:
                        self.resource_version = event.resource_version
                    delay = BACKOFF_FIRST
            except BotError as exc:
                if self.stop.is_set():
                    return  # the watch ended while this stream waited: the error is its closing
                # A 5xx, a refused connection, a shape the adapter refused: resume from the last
                # version after a backoff (a version too old for the server is listed again).
                self.restarts += 1
                self.failing = True
                self.out.put((STREAM, "FAILED", (self.kind, exc.user_message)))
                log.warning("watch stream %s failed (%s); again in %.1fs", self.kind, exc.user_message, delay)
                self.stop.wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, BACKOFF_MAX)
            except Exception:
                self.restarts += 1
                self.failing = True
                self.out.put((STREAM, "FAILED", (self.kind, "an unexpected error (in the bot's log)")))
                log.exception("watch stream %s failed unexpectedly; again in %.1fs", self.kind, delay)
                self.stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)


class WatchDriver(Driver):
    """One watch, on its own thread: streams → state → publish (see the module docstring)."""

    noun = "watch"

    def __init__(
        self,
        service: WatchService,
        row: WatchRow,
        connect: Callable[[str], WatchSource],
        *,
        publish_seconds: float = PUBLISH_SECONDS,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        version_seconds: float = VERSION_SECONDS,
        stream_seconds: int = STREAM_SECONDS,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        super().__init__(row.id)
        self.service = service
        self.row = row
        self.telemetry = telemetry
        self.connect = connect
        self.publish_seconds = publish_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.version_seconds = version_seconds
        self.stream_seconds = stream_seconds
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self.streams: list[Stream] = []
        self.applied = 0
        self.published = 0
        self.ended = ""
        self.log_reads: list[float] = []  # monotonic times of the log tails read in the last minute
        #: The API refused a log read (pods/log is an opt-in role): no more are asked for.
        self.logs_forbidden = False
        #: Why a stream last failed ("" while none has): named if the watch ends before it could list.
        self.last_stream_error = ""
        self.on_publish: Callable[[int], None] | None = None  # benchmarks: events applied so far

    def log_fields(self) -> dict[str, str]:
        # A standalone watch has no run (""): its lines carry none.
        return {"run_id": self.row.run_id, "step": self.row.step_id}

    def drive(self) -> None:
        row = self.row
        service = self.service
        state = WatchState(service.spec(row), previous=service.previous(row), rules=service.rules)
        source = self.connect(row.cluster)
        with contextlib.closing(source):
            self.streams = [
                Stream(source, kind, self.events, self.stop, stream_seconds=self.stream_seconds).start()
                for kind in KINDS
            ]
            version = threading.Thread(
                target=self._versions, args=(source,), name=f"watch-{row.id}-version", daemon=True
            )
            version.start()
            service.catch_up(row)
            synced: set[str] = set()
            last_publish = 0.0
            last_beat = time.monotonic()
            while not self.stop.is_set():
                before = self.applied
                wait = service.publish_wait(row, last_publish, self.publish_seconds)
                self._drain(state, synced, timeout=min(0.2, wait))
                if self.applied > before:
                    self.telemetry.watch_events(self.applied - before)
                mono = time.monotonic()
                if mono - last_beat >= self.heartbeat_seconds:
                    last_beat = mono
                    if not service.heartbeat(row.id):
                        log.info("watch %s: no longer ours; stopping", row.id)
                        return
                if synced < KINDS.keys() and mono - last_publish >= self.publish_seconds:
                    # Not listed yet (the cluster is down): `unwatch` and the time limit still end it.
                    last_publish = mono
                    ended = service.end_unlisted(row, why=self.last_stream_error)
                    if ended:
                        self.ended = ended
                        log.info("watch %s ended: %s", row.id, ended)
                        return
                    continue
                if service.publish_wait(row, last_publish, self.publish_seconds) <= 0:
                    last_publish = mono
                    try:
                        result = service.publish(
                            row, state, paced=True, fresh=lambda: self._fold_new(state, synced)
                        )
                    except Fenced:
                        raise
                    except BotError as exc:
                        log.warning("watch %s: publish failed: %s", row.id, exc.user_message)
                        continue
                    self.published += 1
                    if self.on_publish is not None:
                        self.on_publish(self.applied)
                    if result.lost:
                        return
                    if result.ended:
                        self.ended = result.ended
                        log.info("watch %s ended: %s", row.id, result.ended)
                        return
                    self._read_logs(source, state)

    def _read_logs(self, source: WatchSource, state: WatchState) -> None:
        """The log tails the rules asked for, within the per-minute cap (the rest wait their turn)."""
        now = time.monotonic()
        self.log_reads = [t for t in self.log_reads if now - t < 60.0]
        for want in state.logs_wanted():
            if self.logs_forbidden:
                state.add_log_tail(want.workload, want.container, "")
                continue
            if len(self.log_reads) >= LOG_READS_PER_MINUTE or self.stop.is_set():
                return
            self.log_reads.append(now)
            try:
                raw = source.get_raw(
                    f"/api/v1/namespaces/{want.namespace}/pods/{want.pod}/log",
                    {"container": want.container, "tailLines": want.lines, "limitBytes": LOG_BYTES},
                )
                text = raw.decode("utf-8", "replace")
            except BotError as exc:
                if getattr(exc, "status", None) == 403:
                    self.logs_forbidden = True
                    log.warning("watch %s: container logs %s", self.row.id, LOGS_FORBIDDEN_NOTE)
                # A pod gone, a container not started: nothing to match; read again next candidacy.
                log.info("watch %s: no log for %s/%s %s: %s", self.row.id, want.namespace, want.pod,
                         want.container, exc.user_message)  # fmt: skip
                text = ""
            state.add_log_tail(want.workload, want.container, text)

    def _fold_new(self, state: WatchState, synced: set[str]) -> bool:
        """What arrived while a publish ran, folded in now (its card shows it): True if anything."""
        before = self.applied
        self._drain(state, synced, timeout=0.0)
        if self.applied > before:
            self.telemetry.watch_events(self.applied - before)
        return self.applied > before

    def _drain(self, state: WatchState, synced: set[str], *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                kind, kind_of_event, obj = (
                    self.events.get(timeout=max(left, 0.0)) if left > 0 else self.events.get_nowait()
                )
            except queue.Empty:
                return
            now = self.service.clock()
            if kind == VERSION:
                state.set_control_plane(str(obj))
            elif kind == STREAM:
                if kind_of_event == "FAILED":
                    state.stream_failed(obj[0], obj[1], now)
                    self.last_stream_error = obj[1]
                else:
                    state.stream_back(str(obj), now)
            elif kind_of_event == "SYNC":
                state.sync(kind, obj, now)
                synced.add(kind)
            else:
                state.apply(kind, kind_of_event, obj, now)
            self.applied += 1

    def _versions(self, source: WatchSource) -> None:
        last = None
        while not self.stop.is_set():
            try:
                version = str(source.get_json("/version").get("gitVersion", ""))
                if version != last:
                    self.events.put((VERSION, "", version))
                    last = version
            except BotError as exc:
                log.info("watch %s: /version: %s", self.row.id, exc.user_message)
            self.stop.wait(self.version_seconds)


class WatchDuty(ServiceDuty[WatchService, WatchSource]):
    """Watches as a kind of long duty: a watch without a live owner (no heartbeat for
    `STALE_AFTER`) is claimed and driven; a live owner's watch is never taken."""

    name = WATCHES

    def live(self) -> list[WatchRow]:
        return self.service.live()

    def stale(self, row: WatchRow) -> str | None:
        return None  # a watch only reads: the next leader takes it over instead

    def interrupt(self, row: WatchRow, reason: str) -> None:
        raise AssertionError("a watch is taken over, never interrupted")

    def claim(self, row: WatchRow) -> WatchDriver | None:
        if not self.service.claim(row):
            return None
        fresh = self.service.store.watch(row.id) or row
        log.info("driving watch %s on %s", row.id, row.cluster)
        return WatchDriver(self.service, fresh, self.connect, **self.driver_options)
