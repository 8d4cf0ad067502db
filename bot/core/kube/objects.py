"""What a Kubernetes object says, read the way kubectl and people read it: a pod's health class
(`classify`, the watch card's groups), the workload a pod belongs to, a node's group, timestamps.

Pure: no I/O, no clock. The watch's status model folds these per event; the jobs use them on the
pods they evict and restart. Pod health classes, in the card's order: Error, CrashLoopBackOff,
ImagePullBackOff/ErrImagePull, Init stuck, Not ready, Pending/unschedulable stuck, Terminating
stuck; the last four are normal for a while (`TRANSIENT`). A pod once in CrashLoopBackOff stays in
that class until it is Ready or gone (`previous=`), so an episode does not end and start again at
each restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from bot.core.kube.wire import WPod

ERROR = "Error"
CRASHLOOP = "CrashLoopBackOff"
IMAGEPULL = "ImagePullBackOff/ErrImagePull"
INIT = "Init stuck"
NOT_READY = "Not ready"
PENDING = "Pending/unschedulable stuck"
TERMINATING = "Terminating stuck"
#: The card's order.
CLASSES: tuple[str, ...] = (ERROR, CRASHLOOP, IMAGEPULL, INIT, NOT_READY, PENDING, TERMINATING)
#: Classes that are normal for a while; unhealthy only after the spec's limit.
TRANSIENT = frozenset({INIT, NOT_READY, PENDING, TERMINATING})

_IMAGE_PULL = frozenset({"ImagePullBackOff", "ErrImagePull"})
#: Waiting reasons kubectl shows that will not fix themselves; shown as Error with the reason.
_WAITING_ERRORS = frozenset(
    {"CreateContainerConfigError", "CreateContainerError", "InvalidImageName", "RunContainerError"}
)

KUBE_SYSTEM = "kube-system"

#: A container's part in a pod, as kubectl's READY column counts it: a regular container (APP), a
#: sidecar (an init container with `restartPolicy: Always`, which keeps running beside the app
#: containers), or an init container that runs to its end before them (INIT, not counted).
APP = "app"
SIDECAR = "sidecar"
INIT = "init"


def sidecars(init_containers: Iterable[tuple[str, str | None]]) -> frozenset[str]:
    """The names of the sidecars among a pod's init containers, from (name, restartPolicy) pairs."""
    return frozenset(name for name, policy in init_containers if policy == "Always")


def ready_count(containers: Iterable[tuple[str, bool]]) -> tuple[int, int]:
    """(ready, total) of a pod's (kind, ready) containers, as `kubectl get pods` shows READY.

    kubectl counts the regular containers and, since 1.28, the sidecars; an init container that
    runs to its end is not counted (a pod with one init container and 3 containers, 2 of them
    ready, is 2/3 — never 2/4). The watch's card, its known-issue evidence and `check` all count
    with this function, so one pod reads the same everywhere.
    """
    ready = total = 0
    for kind, is_ready in containers:
        if kind == INIT:
            continue
        total += 1
        if is_ready:
            ready += 1
    return ready, total


def pod_ready_count(pod: WPod) -> tuple[int, int]:
    """`ready_count` of a pod as the watch decodes it (its spec names the sidecars)."""
    side = sidecars((c.name, c.restart_policy) for c in pod.spec.init_containers or ())
    return ready_count(
        [
            *(
                (SIDECAR if cs.name in side else INIT, bool(cs.ready))
                for cs in pod.status.init_container_statuses or ()
            ),
            *((APP, bool(cs.ready)) for cs in pod.status.container_statuses or ()),
        ]
    )


def classify(pod: WPod, previous: str | None = None) -> tuple[str, str] | None:
    """The pod's health class and a short detail (kubectl's STATUS word), or None if healthy.

    `previous` is the class the pod had: a pod in CrashLoopBackOff stays there between restarts.
    """
    status = pod.status
    if pod.metadata.deletion_timestamp:
        return TERMINATING, "Terminating"
    phase = status.phase
    if phase == "Succeeded":
        return None
    if phase == "Failed":
        return ERROR, status.reason or "Failed"
    worst: tuple[str, str] | None = None
    inits = status.init_container_statuses or ()
    side = sidecars((c.name, c.restart_policy) for c in pod.spec.init_containers or ())
    init_done = True
    for cs in inits:
        state = cs.state
        waiting = state.waiting if state else None
        terminated = state.terminated if state else None
        if terminated is not None and terminated.exit_code == 0:
            continue
        if cs.name in side and waiting is None and terminated is None:
            continue  # a sidecar that has started runs beside the app containers (kubectl ≥ 1.28)
        init_done = False
        if waiting is not None and waiting.reason == "CrashLoopBackOff":
            return CRASHLOOP, "Init:CrashLoopBackOff"
        if waiting is not None and waiting.reason in _IMAGE_PULL:
            worst = (IMAGEPULL, f"Init:{waiting.reason}")
        elif terminated is not None and worst is None:
            worst = (
                (CRASHLOOP, "Init:CrashLoopBackOff")
                if previous == CRASHLOOP
                else (ERROR, f"Init:{terminated.reason or 'Error'}")
            )
    if worst is not None:
        return worst
    if not init_done:
        done = sum(
            1 for cs in inits if cs.state and cs.state.terminated and cs.state.terminated.exit_code == 0
        )
        return INIT, f"Init:{done}/{len(inits)}"
    all_ready = True
    restarted = False
    for cs in status.container_statuses or ():
        if not cs.ready:
            all_ready = False
        if cs.restart_count:
            restarted = True
        state = cs.state
        if state is None:
            continue
        waiting, terminated = state.waiting, state.terminated
        if waiting is not None and waiting.reason:
            reason = waiting.reason
            if reason == "CrashLoopBackOff":
                return CRASHLOOP, reason
            if reason in _IMAGE_PULL:
                worst = (IMAGEPULL, reason)
            elif reason in _WAITING_ERRORS and (worst is None or worst[0] == ERROR):
                worst = (ERROR, reason)
        elif (
            terminated is not None
            and (terminated.exit_code or terminated.reason == "Error")
            and worst is None
        ):
            worst = (ERROR, terminated.reason or "Error")
    if previous == CRASHLOOP and restarted and not all_ready and (worst is None or worst[0] == ERROR):
        # Between two back-offs the container runs (not Ready) or has just died: same episode.
        return CRASHLOOP, "CrashLoopBackOff"
    if worst is not None:
        return worst
    if phase == "Pending" or not phase:
        return PENDING, _pending_detail(pod)
    ready, total = pod_ready_count(pod)
    if phase == "Running" and (not all_ready or ready < total):
        return NOT_READY, f"{ready}/{total} containers ready"
    return None


def ready_since(pod: WPod) -> datetime | None:
    """When the pod's Ready condition last changed (for a pod not Ready: since when it is not)."""
    for cond in pod.status.conditions or ():
        if cond.type == "Ready":
            return parse_time(cond.last_transition_time)
    return None


def initialized_at(pod: WPod) -> datetime | None:
    """When the pod's Initialized condition last changed (its init containers done: about when
    it started)."""
    for cond in pod.status.conditions or ():
        if cond.type == "Initialized":
            return parse_time(cond.last_transition_time)
    return None


def _pending_detail(pod: WPod) -> str:
    if not pod.spec.node_name:
        for cond in pod.status.conditions or ():
            if cond.type == "PodScheduled" and cond.status == "False":
                return cond.reason or "Unschedulable"
        return "Unscheduled"
    for cs in pod.status.container_statuses or ():
        if cs.state and cs.state.waiting and cs.state.waiting.reason:
            return cs.state.waiting.reason
    return "ContainerCreating"


#: A workload back in CrashLoopBackOff (or an image pull loop) this soon after its episode ended is
#: in the same episode: a container that crashes 20 s after start may pass its readiness probe in
#: between, and the kubelet itself keeps its back-off until a container has run for 10 minutes.
EPISODE_REOPEN = timedelta(minutes=10)
#: A workload in CrashLoopBackOff (ImagePullBackOff/ErrImagePull) longer than this has failed: a
#: watch stops, a restart's rollout fails (each may be given its own limit).
CRASHLOOP_FAILS_AFTER = timedelta(minutes=5)
IMAGEPULL_FAILS_AFTER = timedelta(minutes=5)


# ----- names and times ---------------------------------------------------------------------------


def workload_of(pod: WPod) -> tuple[str, str]:
    """(kind, name) of the workload people know: a ReplicaSet's Deployment, a DaemonSet, …, or the pod."""
    meta = pod.metadata
    for ref in meta.owner_references or ():
        if not ref.controller:
            continue
        kind, name = ref.kind or "", ref.name or ""
        if kind == "ReplicaSet":
            template_hash = (meta.labels or {}).get("pod-template-hash", "")
            if template_hash and name.endswith("-" + template_hash):
                return "Deployment", name[: -len(template_hash) - 1]
            head, dash, _tail = name.rpartition("-")
            return ("Deployment", head) if dash else ("ReplicaSet", name)
        return kind, name
    return "Pod", meta.name


def workload_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"


def node_group(labels: Mapping[str, str] | None, group_labels: Sequence[str]) -> str:
    labels = labels or {}
    for key in group_labels:
        if labels.get(key):
            return labels[key]
    if labels.get("eks.amazonaws.com/compute-type") == "fargate":
        return "fargate"
    return "(none)"


def _from_iso(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp as the API writes them (with or without a zone); None for no text or
    a text that is no timestamp."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_iso(text: str | None) -> datetime | None:
    """`_from_iso`, aware: one without a zone is taken as UTC."""
    moment = _from_iso(text)
    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_time(value: str | None) -> datetime | None:
    """`_from_iso`, only with a zone (None without)."""
    moment = _from_iso(value)
    return moment if moment is not None and moment.tzinfo is not None else None
