"""Plays the job driver's part in-process, for tests of the cluster jobs (bot/core/jobs).

    driver = JobDriver(job, cluster, args)            # plan(), progress JSON round-tripped
    driver.tick(decision=None, crash=False)           # one tick; crash=True stores nothing
    driver.run(until=..., decide=..., crash_when=...) # tick until `until(driver)`, honouring `wait`
    run_job(job, cluster, args, …)                    # both in one call

What the real driver guarantees, checked here: the stored progress goes through JSON between
ticks (so it must be JSON-able), a post's key is made once (a repeated key fails the test), a
Choice stops the ticking until `decide` answers it, and a "crash" re-runs a tick from the
previously stored progress (the crashed tick's posts and progress are lost, its cluster writes are
not). `CountingCluster` wraps the bot's adapter and counts the writes a job makes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from bot.core.jobs.base import Choice, Decision, Job, Progress, Tick

TIMEOUT = 120.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def stored(progress: Progress) -> Progress:
    """What the database gives back: the progress through JSON (fails if it is not JSON-able)."""
    loaded: Progress = json.loads(json.dumps(progress, allow_nan=False))
    return loaded


class JobDriver:
    def __init__(
        self,
        job: Job,
        cluster: Any,
        args: Mapping[str, str] | None = None,
        *,
        now: Callable[[], datetime] = utcnow,
        progress: Progress | None = None,
    ) -> None:
        self.job = job
        self.cluster = cluster
        self.now = now
        self.progress: Progress = stored(
            progress if progress is not None else job.plan(cluster, args or {}, now=now())
        )
        self.posts: dict[str, str] = {}
        self.audit: list[tuple[str, str]] = []
        self.ticks: list[Tick] = []
        self.crashed: list[Tick] = []
        self.last: Tick | None = None

    @property
    def done(self) -> bool:
        return self.last is not None and self.last.done

    @property
    def choice(self) -> Choice | None:
        return self.last.choice if self.last is not None else None

    def tick(self, decision: Decision | None = None, *, crash: bool = False) -> Tick:
        result = self.job.tick(self.cluster, stored(self.progress), now=self.now(), decision=decision)
        stored(result.progress)  # JSON-able, or the driver could not store it
        if crash:
            # The process died before the tick's transaction: nothing of it is stored or posted.
            self.crashed.append(result)
            return result
        for post in result.posts:
            assert post.key not in self.posts, f"post key {post.key!r} made twice: {post.text!r}"
            self.posts[post.key] = post.text
        self.audit.extend(result.audit)
        self.ticks.append(result)
        self.progress = stored(result.progress)
        self.last = result
        return result

    def run(
        self,
        *,
        until: Callable[[JobDriver], bool] | None = None,
        decide: Callable[[Choice], Decision | None] | None = None,
        crash_when: Callable[[Tick], bool] | None = None,
        timeout: float = TIMEOUT,
        max_wait: float = 2.0,
    ) -> JobDriver:
        """Tick until `until(self)` (default: done, or a Choice nobody answers)."""
        deadline = time.monotonic() + timeout
        decision: Decision | None = None
        crashed = False
        while True:
            before, last = self.progress, self.last
            result = self.tick(decision)
            if crash_when is not None and not crashed and crash_when(result):
                # Killed before the tick's transaction: undo what the driver would have stored,
                # then the same tick runs again from the progress stored before it.
                self.ticks.pop()
                del self.audit[len(self.audit) - len(result.audit) :]
                for post in result.posts:
                    self.posts.pop(post.key, None)
                self.crashed.append(result)
                self.progress, self.last = before, last
                crashed = True
                continue
            decision = None
            if until is not None and until(self):
                return self
            if result.done:
                if until is None:
                    return self
                raise AssertionError(
                    f"the job ended before the test's condition: {result.detail} {result.card}"
                )
            if result.choice is not None:
                decision = decide(result.choice) if decide is not None else None
                if decision is None and until is None:
                    return self
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the job did not finish in {timeout:.0f}s: {result.card} {self.progress}"
                )
            pause(min(result.wait, max_wait))


def run_job(
    job: Job,
    cluster: Any,
    args: Mapping[str, str],
    *,
    now: Callable[[], datetime] = utcnow,
    until: Callable[[JobDriver], bool] | None = None,
    decide: Callable[[Choice], Decision | None] | None = None,
    crash_when: Callable[[Tick], bool] | None = None,
    timeout: float = TIMEOUT,
) -> JobDriver:
    driver = JobDriver(job, cluster, args, now=now)
    return driver.run(until=until, decide=decide, crash_when=crash_when, timeout=timeout)


def pause(seconds: float) -> None:
    """Wait for the job's next tick: an Event nobody sets, bounded — the only wait the driver has."""
    if seconds > 0:
        threading.Event().wait(seconds)


class CountingCluster:
    """The bot's kube adapter with every write counted by (method, target): the job's writes as
    the API server received them (a call that raised still counts)."""

    WRITES = ("cordon", "uncordon", "evict", "delete_pod", "restart_workload")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[tuple[str, str]] = Counter()
        self.accepted: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.WRITES:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            target = "/".join(str(a) for a in args)
            if kwargs.get("dry_run"):
                return attr(*args, **kwargs)
            with self._lock:
                self.calls[(name, target)] += 1
            result = attr(*args, **kwargs)
            if result is not False:
                with self._lock:
                    self.accepted[(name, target)] += 1
            return result

        return counted


def pod_versions(pods: Iterator[Any] | list[Any]) -> dict[str, tuple[str, str]]:
    """name → (uid, resourceVersion) of official-client pods: 'nothing changed' is these equal."""
    return {p.metadata.name: (p.metadata.uid, p.metadata.resource_version) for p in pods}
