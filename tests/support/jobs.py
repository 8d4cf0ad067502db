"""Plays the job driver's part in-process, for tests of the cluster jobs (bot/core/jobs).

    driver = JobDriver(job, cluster, args)            # plan(), progress JSON round-tripped
    driver.tick(decision=None, crash=False)           # one tick; crash=True stores nothing
    driver.run(until=..., decide=..., crash_when=...) # tick until `until(driver)`, honouring `wait`
    run_job(job, cluster, args, …)                    # both in one call

What the real driver guarantees, checked here: the stored progress goes through JSON between
ticks (so it must be JSON-able), a post's key is made once (a repeated key fails the test), a
Choice stops the ticking until `decide` answers it, and a "crash" re-runs a tick from the
previously stored progress (the crashed tick's posts and progress are lost, its cluster writes are
not). `CountingCluster` wraps the bot's adapter and counts the writes a job makes; `FakeCluster`
is an in-memory cluster with the same job methods, for core tests with time passed in.

`wait` is honoured by waiting on an Event nobody sets, bounded by `max_wait`: the driver's own
pacing, not a wait for something to happen — what tests wait for is `until`, checked every tick,
under an overall `timeout`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.core.jobs.base import Choice, Decision, Job, Progress, Tick
from bot.core.rendering import inert_naming
from bot.errors import ClusterError, EvictionBlocked, RolloutRefused
from tests.support.kube_objects import FakePage

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
        #: Each post as the run's thread shows it (the driver's `_owed`): inert, its people mentions.
        self.shown: dict[str, str] = {}
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
            self.shown[post.key] = inert_naming(post.text, post.people)
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
                    self.shown.pop(post.key, None)
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


class FakeCluster:
    """An in-memory cluster with the adapter's job methods, for core tests of the jobs' logic.

    Nodes and pods are raw dicts (tests/support/kube_objects.py); `pdbs` by namespace; `workloads`
    by (kind, namespace, name). `blocked` holds "ns/name" keys whose eviction answers 429. Every
    accepted write is appended to `writes` as (method, target); evictions and deletes give the pod
    a deletionTimestamp (the pod stays listed until `finish(key)` removes it)."""

    def __init__(
        self,
        *,
        nodes: list[dict[str, Any]] | None = None,
        pods: list[dict[str, Any]] | None = None,
        pdbs: dict[str, list[dict[str, Any]]] | None = None,
        workloads: dict[tuple[str, str, str], dict[str, Any]] | None = None,
    ) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes or []}
        self.pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods or []}
        self.pdbs = pdbs or {}
        self.workloads = workloads or {}
        self.blocked: set[str] = set()
        #: "ns/name" → the error its eviction raises (a 500 when several budgets select the pod).
        self.refusals: dict[str, Exception] = {}
        self.writes: list[tuple[str, str]] = []
        #: Events by namespace (raw dicts), as `GET /api/v1/namespaces/NS/events` lists them.
        self.events: dict[str, list[dict[str, Any]]] = {}
        #: Events recorded on nodes, by name (not writes: a job's trail, not its work).
        self.node_events: dict[str, dict[str, str]] = {}

    def _missing(self, path: str) -> Exception:
        return ClusterError(f"{path} not found", status=404)

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        parts = path.strip("/").split("/")
        if path.startswith("/api/v1/nodes/"):
            if parts[-1] not in self.nodes:
                raise self._missing(path)
            return self.nodes[parts[-1]]
        if path.startswith("/api/v1/namespaces/") and len(parts) == 6 and parts[4] == "pods":
            key = f"{parts[3]}/{parts[5]}"
            if key not in self.pods:
                raise self._missing(path)
            return self.pods[key]
        if path.endswith("/poddisruptionbudgets"):
            return {"items": self.pdbs.get(parts[4], [])}
        if path.startswith("/api/v1/namespaces/") and path.endswith("/events"):
            return {"items": self.events.get(parts[3], [])}
        if path.startswith("/apis/apps/v1/namespaces/"):
            kind = {
                "deployments": "deployment",
                "daemonsets": "daemonset",
                "statefulsets": "statefulset",
                "replicasets": "replicaset",
            }[parts[5]]
            if len(parts) == 6:
                found = [w for (k, ns, _n), w in self.workloads.items() if k == kind and ns == parts[4]]
                return {"items": found}
            key = (kind, parts[4], parts[6])
            if key not in self.workloads:
                raise self._missing(path)
            return self.workloads[key]
        raise KeyError(path)

    def list_pages(self, path: str, query: Mapping[str, Any] | None = None) -> Iterator[Any]:
        if path == "/api/v1/nodes":
            yield FakePage(items=list(self.nodes.values()))
        elif path.startswith("/api/v1/namespaces/") and path.endswith("/pods"):
            namespace = path.split("/")[4]
            yield FakePage(items=[p for p in self.pods.values() if p["metadata"]["namespace"] == namespace])
        elif path == "/apis/policy/v1/poddisruptionbudgets":
            yield FakePage(items=[pdb for items in self.pdbs.values() for pdb in items])
        else:
            raise KeyError(path)

    def node_pods(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.pods.values() if p["spec"].get("nodeName") == node]

    def cordon(
        self, node: str, *, dry_run: bool = False, annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        if not dry_run:
            self.writes.append(("cordon", node))
            self.nodes[node].setdefault("spec", {})["unschedulable"] = True
            if annotations:
                self.nodes[node]["metadata"].setdefault("annotations", {}).update(annotations)
        return self.nodes[node]

    def uncordon(
        self, node: str, *, dry_run: bool = False, remove_annotations: Sequence[str] = ()
    ) -> dict[str, Any]:
        if not dry_run:
            self.writes.append(("uncordon", node))
            self.nodes[node].setdefault("spec", {}).pop("unschedulable", None)
            for key in remove_annotations:
                self.nodes[node]["metadata"].get("annotations", {}).pop(key, None)
        return self.nodes[node]

    def label_node(
        self, node: str, labels: Mapping[str, str | None], *, dry_run: bool = False
    ) -> dict[str, Any]:
        if not dry_run:
            have = self.nodes[node]["metadata"].setdefault("labels", {})
            for key, value in labels.items():
                self.writes.append(
                    ("label", f"{node} {key}={value}" if value is not None else f"{node} {key}-")
                )
                if value is None:
                    have.pop(key, None)
                else:
                    have[key] = value
        return self.nodes[node]

    def node_event(
        self, node: str, *, uid: str, name: str, reason: str, message: str, action: str, at: datetime
    ) -> bool:
        """Events by name, as the API keeps them: a second create of a name is refused (False)."""
        if name in self.node_events:
            return False
        self.node_events[name] = {
            "node": node,
            "uid": uid,
            "reason": reason,
            "message": message,
            "action": action,
        }
        return True

    def _current(self, namespace: str, name: str, uid: str) -> dict[str, Any] | None:
        pod = self.pods.get(f"{namespace}/{name}")
        if pod is None or (uid and pod["metadata"]["uid"] != uid):
            return None
        return pod

    def evict(self, namespace: str, pod: str, *, uid: str = "", dry_run: bool = False) -> bool:
        current = self._current(namespace, pod, uid)
        if current is None:
            return False
        if f"{namespace}/{pod}" in self.refusals:
            raise self.refusals[f"{namespace}/{pod}"]
        if f"{namespace}/{pod}" in self.blocked:
            raise EvictionBlocked("Cannot evict pod as it would violate the pod's disruption budget.")
        if not dry_run:
            self.writes.append(("evict", f"{namespace}/{pod}"))
            current["metadata"]["deletionTimestamp"] = "2026-11-24T07:00:00Z"
        return True

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, dry_run: bool = False, grace_seconds: int | None = None
    ) -> bool:
        current = self._current(namespace, name, uid)
        if current is None:
            return False
        if not dry_run:
            self.writes.append(("delete_pod", f"{namespace}/{name}"))
            current["metadata"]["deletionTimestamp"] = "2026-11-24T07:00:00Z"
        return True

    def finish(self, key: str) -> None:
        """The kubelet is done with a terminating pod: it leaves the API."""
        self.pods.pop(key)

    def restart_workload(
        self, kind: str, namespace: str, name: str, *, at: datetime, dry_run: bool = False
    ) -> dict[str, Any]:
        workload = self.workloads[(kind, namespace, name)]
        if workload.get("spec", {}).get("paused"):
            raise RolloutRefused(f"deployment {namespace}/{name} is paused")
        if dry_run:
            return workload
        self.writes.append(("restart_workload", f"{kind}/{namespace}/{name}"))
        template = workload.setdefault("spec", {}).setdefault("template", {})
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations["kubectl.kubernetes.io/restartedAt"] = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        workload["metadata"]["generation"] = int(workload["metadata"].get("generation", 1)) + 1
        return workload
