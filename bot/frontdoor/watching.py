"""Driving watches: the threads behind `bot.core.watches.service` (started by the triggers door).

Watches run where the timers run, never on the command workers, so a hundred thousand events do not
delay an ack. `WatchRunner.scan` (a triggers interval job, and on demand when a watch is started or
asked to end) claims every live watch whose owner is gone (no heartbeat for `STALE_AFTER`; a live
owner's watch is never taken) and starts a `WatchDriver` thread for it.

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
import contextvars
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.adapters.kube import Cluster, WatchEvent
from bot.core.checks.gather import LOGS_FORBIDDEN_NOTE
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.core.watches.model import REDUCERS, WatchState
from bot.core.watches.schema import KINDS
from bot.core.watches.service import HEARTBEAT_SECONDS, PUBLISH_SECONDS, WatchService
from bot.core.watches.verdict import TARGET_OPEN, TARGET_REACHED
from bot.errors import BotError, Fenced
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
#: How often the runner looks for watches without a live owner.
SCAN_SECONDS = 5.0
VERSION = "version"
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
                log.warning("watch stream %s failed (%s); again in %.1fs", self.kind, exc.user_message, delay)
                self.stop.wait(delay * (0.5 + random.random()))
                delay = min(delay * 2, BACKOFF_MAX)
            except Exception:
                self.restarts += 1
                log.exception("watch stream %s failed unexpectedly; again in %.1fs", self.kind, delay)
                self.stop.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX)


class WatchDriver:
    """One watch, on its own thread: streams → state → publish (see the module docstring)."""

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
        self.service = service
        self.row = row
        self.telemetry = telemetry
        self.connect = connect
        self.publish_seconds = publish_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.version_seconds = version_seconds
        self.stream_seconds = stream_seconds
        self.stop = threading.Event()
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self.streams: list[Stream] = []
        self.applied = 0
        self.published = 0
        self.ended = ""
        self.log_reads: list[float] = []  # monotonic times of the log tails read in the last minute
        #: The API refused a log read (pods/log is an opt-in role): no more are asked for.
        self.logs_forbidden = False
        self.on_publish: Callable[[int], None] | None = None  # benchmarks: events applied so far
        # The fence is a context variable: the driver thread runs in a copy of the context of the
        # job that created it (the triggers' fenced scan), so its every store write is fenced too.
        self._context = contextvars.copy_context()
        self.thread = threading.Thread(
            target=self._context.run, args=(self._run,), name=f"watch-{row.id}", daemon=True
        )

    def start(self) -> WatchDriver:
        self.thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def _run(self) -> None:
        try:
            self._drive()
        except Fenced as exc:
            # Deposed: the next leader takes the watch over through its owner/heartbeat claim.
            log.info("watch %s: fenced (%s); stopping", self.row.id, exc.user_message)
        except Exception:
            log.exception("watch %s: driver failed; another scan takes it again", self.row.id)
        finally:
            self.stop.set()

    def _drive(self) -> None:
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
                    ended = service.end_unlisted(row)
                    if ended:
                        self.ended = ended
                        log.info("watch %s ended: %s", row.id, ended)
                        return
                    continue
                if service.publish_wait(row, last_publish, self.publish_seconds) <= 0:
                    last_publish = mono
                    try:
                        result = service.publish(row, state, paced=True)
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


class WatchRunner:
    """Claims watches without a live owner and drives each on a thread of its own."""

    def __init__(
        self,
        service: WatchService,
        connect: Callable[[str], WatchSource],
        **driver_options: Any,
    ) -> None:
        self.service = service
        self.connect = connect
        self.driver_options = driver_options
        self.drivers: dict[int, WatchDriver] = {}
        # Re-entrant: a scan's fenced claim steps the replica down, which calls `stop_all`.
        self._lock = threading.RLock()
        self._closed = False
        #: Whether a scan may start drivers (False while the replica follows; see `stop_all`).
        self.leading: Callable[[], bool] = lambda: True
        #: The context a scan off a job's thread (`wake`) runs in: the triggers' `duty`.
        self.duty: Callable[[], contextlib.AbstractContextManager[bool]] = lambda: contextlib.nullcontext(
            True
        )

    def scan(self, _now: datetime | None = None) -> list[int]:
        """Start a driver for every live watch this process may take; the ids started."""
        started: list[int] = []
        with self._lock:
            if self._closed or not self.leading():
                return started
            for watch_id in [i for i, d in self.drivers.items() if not d.alive]:
                del self.drivers[watch_id]
            for row in self.service.live():
                if row.id in self.drivers:
                    continue
                if not self.service.claim(row):
                    continue
                fresh = self.service.store.watch(row.id) or row
                self.drivers[row.id] = WatchDriver(
                    self.service, fresh, self.connect, **self.driver_options
                ).start()
                started.append(row.id)
                log.info("driving watch %s on %s", row.id, row.cluster)
        return started

    def wake(self) -> None:
        """On demand (a watch started or asked to end): scan now, off the caller's thread."""
        threading.Thread(target=self._scan_quietly, name="watch-scan", daemon=True).start()

    def _scan_quietly(self) -> None:
        try:
            with self.duty() as ok:
                if ok:
                    self.scan()
        except Fenced as exc:
            log.info("watch scan fenced: %s", exc.user_message)
        except BotError as exc:
            log.warning("watch scan failed: %s", exc.user_message)

    def stop_all(self, timeout: float = 5.0) -> None:
        """Deposed: stop every driver now (their watches stay claimed until their heartbeats go
        stale, then the leader takes them over); a later scan, once leading again, starts them."""
        with self._lock:
            drivers = list(self.drivers.values())
            self.drivers.clear()
        for driver in drivers:
            driver.stop.set()
        for driver in drivers:
            if driver.thread is not threading.current_thread():  # a driver that was fenced itself
                driver.thread.join(timeout=timeout)

    def shutdown(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            drivers = list(self.drivers.values())
        for driver in drivers:
            driver.stop.set()
        for driver in drivers:
            driver.thread.join(timeout=timeout)


WATCHES = "watches"


def ends_its_step(runs: Any) -> Callable[[WatchRow, str], None]:
    """What a watch's end does to a plan step's watch: the step's `action_finished` (target
    reached: succeeded; reached with a known issue still open: as the step's `on_open_findings`
    says, failed by default; anything else: failed); nothing for a standalone watch."""

    def step_ended(row: WatchRow, reason: str) -> None:
        if not row.run_id:
            return
        ok = reason.startswith(TARGET_REACHED + ":")
        try:
            if reason.startswith(TARGET_OPEN + ":"):
                ok = runs.load(row.run_id).plan.step(row.step_id).on_open_findings == "succeed"
            runs.finish_long(row.run_id, row.step_id, ok=ok, detail=f"watch {row.id}: {reason}")
        except BotError as exc:
            log.warning("watch %s: step %s of run %s: %s", row.id, row.step_id, row.run_id, exc.user_message)

    return step_ended


def start_watching(services: Any, triggers: Any) -> WatchRunner:
    """Register the watch scan on the triggers front door (before `triggers.start`): every
    `SCAN_SECONDS`, and at once when a watch is started or asked to end."""
    from bot.core.snapshots.service import pick_cluster

    settings = services.settings

    def connect(name: str) -> WatchSource:
        return Cluster.connect(pick_cluster(settings.clusters, name))

    runner = WatchRunner(services.watches, connect, telemetry=services.telemetry)
    runner.leading = lambda: bool(triggers.leading)
    runner.duty = triggers.duty
    triggers.on_follow = runner.stop_all

    def scan(now: datetime) -> None:
        runner.scan(now)

    triggers.every(WATCHES, SCAN_SECONDS, scan)
    services.watches.on_change = runner.wake
    step_ended = ends_its_step(services.runs)
    services.watches.on_ended = step_ended
    # A step whose watch ended just before a crash, without its step committed: commit it now,
    # before the runs' recovery looks at running steps.
    for row in services.store.watches(live=False, limit=200):
        if row.run_id and row.state == "ended":
            step_ended(row, row.end_reason)
    return runner
