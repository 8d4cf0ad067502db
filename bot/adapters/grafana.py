"""Grafana annotations of a run's steps (issue 44 item 6): a `StepObserver` of the run service.

A step entering running becomes a point annotation ("R1A2B3C step `drain-ng-shared` started
(cluster prod)"); a step that ended (succeeded, failed, skipped, interrupted) becomes a region
from its start to its end, with the outcome in the text and as a tag. Every annotation is tagged
`upgrade-bot`, the cluster, the run id and the step id, then the configured tags.

This is an optional side channel: the run service calls `step_changed` after its commit, which
only queues the annotation (a bounded queue; a full queue drops it with a warning). One daemon
thread posts `POST {url}/api/annotations`, retries a 5xx, a 429 or an unreachable Grafana a few
times with a growing pause, then drops the annotation with a warning. A slow or absent Grafana
never holds a run. The token is never logged; failures log the status and the step.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import urllib3

from bot.logsetup import log_context
from bot.records import GrafanaConfig, StepRun, StepState

log = logging.getLogger(__name__)

#: Annotations waiting to be posted; past this, new ones are dropped (Grafana is far behind).
QUEUE_SIZE = 1000
#: Tries of one annotation before it is dropped (the first and three retries).
ATTEMPTS = 4
_ENDED = (StepState.SUCCEEDED, StepState.FAILED, StepState.SKIPPED, StepState.INTERRUPTED)
# Grafana may recover from these; any other refusal (a bad token: 401) will not, so no retry.
_RETRIED = frozenset({429, 500, 502, 503, 504})


class _Plan(Protocol):
    @property
    def cluster(self) -> str: ...


class _Run(Protocol):
    """What of a run an annotation needs (the adapter does not import the core's run)."""

    @property
    def id(self) -> str: ...

    @property
    def plan(self) -> _Plan: ...


@dataclass(frozen=True, kw_only=True)
class Annotation:
    """One annotation as Grafana's HTTP API takes it (times in ms since the epoch)."""

    run_id: str
    step_id: str
    time: int
    time_end: int | None
    tags: tuple[str, ...]
    text: str

    def body(self) -> dict[str, object]:
        out: dict[str, object] = {"time": self.time, "tags": list(self.tags), "text": self.text}
        if self.time_end is not None:
            out["timeEnd"] = self.time_end
        return out


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def annotation_of(
    *, run_id: str, cluster: str, old: StepRun, new: StepRun, tags: tuple[str, ...] = ()
) -> Annotation | None:
    """What to post for the step's change `old` → `new`; None for a change Grafana is not told
    (pending, awaiting approval)."""
    base = ("upgrade-bot", cluster, run_id, new.step_id)
    where = f"(cluster {cluster})"
    if new.state is StepState.RUNNING and new.started_at is not None:
        return Annotation(
            run_id=run_id,
            step_id=new.step_id,
            time=_ms(new.started_at),
            time_end=None,
            tags=(*base, *tags),
            text=f"{run_id} step `{new.step_id}` started {where}",
        )
    if new.state in _ENDED and new.finished_at is not None and old.state is not new.state:
        outcome = str(new.state)
        # A step skipped before it ran has no start: a point at its end.
        start = new.started_at if old.state is StepState.RUNNING and new.started_at else new.finished_at
        end = _ms(new.finished_at)
        return Annotation(
            run_id=run_id,
            step_id=new.step_id,
            time=_ms(start),
            time_end=end if end > _ms(start) else None,
            tags=(*base, outcome, *tags),
            text=f"{run_id} step `{new.step_id}` {outcome} {where}",
        )
    return None


class GrafanaAnnotations:
    """Posts step annotations to Grafana from a queue, on its own daemon thread (started at the
    first annotation, so a front door that never runs a step starts none).

    `backoff` is the first pause between tries in seconds (doubled each time); `http` is the
    connection pool (a real one by default)."""

    def __init__(
        self,
        config: GrafanaConfig,
        *,
        backoff: float = 1.0,
        http: urllib3.PoolManager | None = None,
    ) -> None:
        self.config = config
        self.backoff = backoff
        self._http = http or urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=config.timeout, read=config.timeout),
            retries=False,
            maxsize=1,
        )
        self._queue: queue.Queue[Annotation | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- the run service's side: never blocks ---------------------------------------------------

    def step_changed(self, run: _Run, old: StepRun, new: StepRun) -> None:
        note = annotation_of(run_id=run.id, cluster=run.plan.cluster, old=old, new=new, tags=self.config.tags)
        if note is None or self._stopping.is_set():
            return
        try:
            self._queue.put_nowait(note)
        except queue.Full:
            log.warning("Grafana is %s annotations behind; dropped step %s's", QUEUE_SIZE, new.step_id)
            return
        self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._drain, name="grafana-annotations", daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Post what is queued (within `timeout`), then end the thread; later changes are ignored."""
        with self._lock:
            thread = self._thread
        self._stopping.set()
        if thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------------

    def _drain(self) -> None:
        while (note := self._queue.get()) is not None:
            with log_context(run_id=note.run_id, step=note.step_id):
                try:
                    self._deliver(note)
                except Exception:
                    # Never let one annotation end the thread (and silently drop all later ones).
                    log.exception("posting a Grafana annotation failed")

    def _deliver(self, note: Annotation) -> None:
        pause = self.backoff
        for attempt in range(1, ATTEMPTS + 1):
            status, why = self._post(note)
            if status is not None and 200 <= status < 300:
                if attempt > 1:
                    log.info("Grafana annotation for step %s delivered on try %s", note.step_id, attempt)
                return
            if status is not None and status not in _RETRIED:
                log.warning(
                    "Grafana refused the annotation for step %s (HTTP %s%s); dropped",
                    note.step_id,
                    status,
                    why,
                )
                return
            if attempt < ATTEMPTS:
                log.info(
                    "Grafana annotation for step %s: %s (try %s of %s); retrying in %.1fs",
                    note.step_id,
                    f"HTTP {status}{why}" if status is not None else why,
                    attempt,
                    ATTEMPTS,
                    pause,
                )
                # A stop cuts the pause short, so shutting down never waits for a dead Grafana.
                if self._stopping.wait(pause):
                    break
                pause *= 2
        log.warning("Grafana annotation for step %s dropped after %s tries", note.step_id, attempt)

    def _post(self, note: Annotation) -> tuple[int | None, str]:
        """(status, a short reason) of one POST; status None when Grafana could not be reached."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        try:
            r = self._http.request(
                "POST",
                f"{self.config.url}/api/annotations",
                body=json.dumps(note.body()).encode(),
                headers=headers,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return None, f"unreachable ({type(exc).__name__})"
        return r.status, _said(r.data)


def _said(data: bytes) -> str:
    """Grafana's `message`, cut short (it never echoes the token)."""
    try:
        message = json.loads(data).get("message", "") if data else ""
    except (ValueError, AttributeError):
        return ""
    text = " ".join(str(message).split())
    return f": {text[:160]}" if text else ""
