"""The simulated kubelets: pod lifecycles on every live node, driven by container behaviours.

For each pod bound to a live node the kubelet pulls images, starts containers, flips readiness,
crashes and restarts them with CrashLoopBackOff back-off (10 s doubling to 5 min), cycles
ErrImagePull/ImagePullBackOff, waits for a ReadWriteOnce volume that is still attached elsewhere
("Multi-Attach error"), and stops containers when a pod is deleted — then confirms the deletion.
Pods on a dead node (NotReady) get none of this: they stay as they were, and deleted ones stay
Terminating, as on a real cluster. It writes the pod status and the events a real kubelet would,
and serves container logs from the behaviours' log rules.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.sim.apiserver.clock import parse_time, rfc3339, rfc3339_nano
from bot.sim.apiserver.errors import ApiError, bad_request
from bot.sim.apiserver.store import DELETED, Record
from bot.sim.controllers.behaviour import Behaviour, NodeFacts, RuleBook
from bot.sim.controllers.engine import Engine, Repeats
from bot.sim.controllers.events import Recorder

log = logging.getLogger(__name__)

Obj = dict[str, Any]
PodKey = tuple[str, str]

BACKOFF_START = 10.0
BACKOFF_MAX = 300.0
ATTACH_RETRY = 10.0
#: A readiness probe that fails is tried again (its Event counting one more) this often.
PROBE_SECONDS = 30.0
#: A sandbox the CNI failed to set up is retried this often (the kubelet backs off to about this).
SANDBOX_RETRY = 30.0
#: The attach/detach controller force-detaches a volume this long after its pod is gone from a dead node.
FORCE_DETACH_AFTER = 360.0
#: Detaching an EBS-style volume from a live node takes a while; a pod started elsewhere meanwhile
#: gets "Multi-Attach error" events until it is done.
DETACH_SECONDS = 20.0
MAX_LOG_LINES = 5000
ZONE_LABEL = "topology.kubernetes.io/zone"


def image_id(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()
    repo = image.split("@")[0].rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image.split("@")[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in repo.split("/")[0]:
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{digest}"


@dataclass
class ContainerRun:
    name: str
    image: str
    behaviour: Behaviour
    init: bool = False
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int = 0
    ready: bool = False
    restarts: int = 0
    last: Obj | None = None
    container_id: str = ""
    backoff: float = 0.0
    pulled: bool = False
    #: (start, end, crashed) of earlier runs, for `logs --previous`.
    history: list[tuple[float, float, bool]] = field(default_factory=list)


@dataclass
class PodRun:
    key: PodKey
    uid: str
    node: str
    ip: str = ""
    host_ip: str = ""
    started_at: float = 0.0
    inits: list[ContainerRun] = field(default_factory=list)
    containers: list[ContainerRun] = field(default_factory=list)
    stopping: bool = False
    waiting_volume: str = ""


class Kubelets:
    name = "kubelet"

    def __init__(
        self,
        engine: Engine,
        events: Recorder,
        rules: RuleBook,
        node_alive: Callable[[str], bool],
        node_facts: Callable[[str], NodeFacts],
        node_ip: Callable[[str], str],
    ) -> None:
        self.engine = engine
        self.api = engine.api
        self.events = events
        self.rules = rules
        self.node_alive = node_alive
        self.node_facts = node_facts
        self.node_ip = node_ip
        self.runs: dict[str, PodRun] = {}
        #: volume name → node it is attached to; and when its last user left a dead node.
        self.attachments: dict[str, str] = {}
        self._released_at: dict[str, float] = {}
        engine.add(self)

    # ---- controller protocol ------------------------------------------------------------------

    def on_change(self, record: Record) -> None:
        if record.entry.kind.key == "pods":
            if record.type == DELETED:
                run = self.runs.pop(record.entry.uid, None)
                if run is not None:
                    self._release_volumes(record.entry.obj(), run.node)
                return
            if record.entry.fields.get("spec.nodeName"):
                self.engine.enqueue(self.name, record.entry.key)
        elif record.entry.kind.key == "nodes" and record.type != DELETED and not record.heartbeat_only:
            for e in self.api.store.by_index("pods", record.entry.name):
                self.engine.enqueue(self.name, e.key)

    def sync(self, key: PodKey) -> None:
        entry = self.api.store.entry("pods", *key)
        if entry is None:
            return
        if entry.uid not in self.runs and entry.fields.get("status.phase") == "Running":
            view = entry.pod()
            if not view.deleting and view.node_name:
                # Written Running by the scenario (settled, generated): taken over when there is
                # something to do for it (deletion, a fault, its logs), not on every node change.
                return
        pod = entry.obj()
        node = (pod.get("spec") or {}).get("nodeName", "")
        if not node or not self.node_alive(node):
            return
        run = self.runs.get(entry.uid)
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp"):
            if run is None:
                run = self._adopt(pod)
            self._begin_stop(pod, run)
            return
        if phase in ("Succeeded", "Failed"):
            return
        if run is None:
            self._start(pod)

    # ---- lifecycle ------------------------------------------------------------------------------

    def _behaviour(self, pod: Obj, container: Obj) -> Behaviour:
        node = (pod.get("spec") or {}).get("nodeName", "")
        return self.rules.behaviour(pod, container, self.node_facts(node))

    def _new_run(self, pod: Obj) -> PodRun:
        spec = pod.get("spec") or {}
        m = pod["metadata"]
        node = spec.get("nodeName", "")
        run = PodRun((m.get("namespace", ""), m["name"]), m["uid"], node, started_at=self.engine.clock.now())
        run.host_ip = self.node_ip(node)
        run.inits = [
            ContainerRun(c["name"], c.get("image", ""), self._behaviour(pod, c), init=True)
            for c in spec.get("initContainers") or []
        ]
        run.containers = [
            ContainerRun(c["name"], c.get("image", ""), self._behaviour(pod, c))
            for c in spec.get("containers") or []
        ]
        if run.inits:
            for c in run.containers:
                c.reason = "PodInitializing"
        self.runs[run.uid] = run
        return run

    def _adopt(self, pod: Obj) -> PodRun:
        """Take over a pod whose status says it already runs (pre-generated scenarios)."""
        run = self._new_run(pod)
        status = pod.get("status") or {}
        run.ip = status.get("podIP", "")
        run.started_at = parse_time(status.get("startTime")) or run.started_at
        by_name = {s.get("name"): s for s in status.get("containerStatuses") or []}
        for c in run.containers:
            s = by_name.get(c.name) or {}
            state = s.get("state") or {}
            c.restarts = int(s.get("restartCount", 0))
            c.container_id = s.get("containerID", "")
            c.pulled = True
            if "running" in state:
                c.state, c.reason = "running", ""
                c.started_at = parse_time(state["running"].get("startedAt")) or run.started_at
                c.ready = bool(s.get("ready"))
            elif "terminated" in state:
                c.state = "terminated"
                c.exit_code = int(state["terminated"].get("exitCode", 0))
        for i in run.inits:
            i.state, i.reason, i.pulled = "terminated", "Completed", True
        return run

    def running_status(self, pod: Obj, host_ip: str) -> Obj:
        """The status this kubelet would have written for `pod` (bound, admitted) once every
        container started and turned Ready: what a scenario built settled stores for its pods.
        The kubelet takes such a pod over (`_adopt`) the first time it has to act on it."""
        spec = pod.get("spec") or {}
        m = pod["metadata"]
        now = self.engine.clock.now()
        run = PodRun((m.get("namespace", ""), m["name"]), m["uid"], spec.get("nodeName", ""), started_at=now)
        run.host_ip = host_ip
        run.ip = host_ip if spec.get("hostNetwork") else self.engine.ids.pod_ip()
        for c in spec.get("initContainers") or []:
            done = ContainerRun(c["name"], c.get("image", ""), Behaviour(), init=True, pulled=True)
            done.state, done.reason, done.started_at, done.finished_at = "terminated", "Completed", now, now
            done.container_id = _container_id(run.uid, c["name"])
            run.inits.append(done)
        for c in spec.get("containers") or []:
            running = ContainerRun(c["name"], c.get("image", ""), Behaviour(), pulled=True)
            running.state, running.reason, running.ready, running.started_at = "running", "", True, now
            running.container_id = _container_id(run.uid, c["name"])
            run.containers.append(running)
        return self._status(run, pod)

    def running_status_like(self, status: Obj, pod: Obj, host_ip: str) -> Obj:
        """`status` (what `running_status` gave a pod of the same template, at the same time) made
        `pod`'s: its own IPs and container IDs. Much cheaper than composing it again per pod."""
        uid = pod["metadata"]["uid"]
        ip = host_ip if (pod.get("spec") or {}).get("hostNetwork") else self.engine.ids.pod_ip()
        out = {**status, "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": ip, "podIPs": [{"ip": ip}]}
        for key in ("initContainerStatuses", "containerStatuses"):
            if key in status:
                out[key] = [{**c, "containerID": _container_id(uid, c["name"])} for c in status[key]]
        return out

    def _start(self, pod: Obj) -> None:
        run = self._new_run(pod)
        run.ip = self._pod_ip(pod, run)
        self._write(run)
        self._after(run, 0.5, "sandbox", lambda: self._sandbox_ready(run.uid))

    def _pod_ip(self, pod: Obj, run: PodRun) -> str:
        spec = pod.get("spec") or {}
        if spec.get("hostNetwork") or self.node_facts(run.node).fargate:
            return run.host_ip
        return self.engine.ids.pod_ip()

    def _after(
        self, run: PodRun, delay: float, what: str, fn: Callable[[], None], *, repeats: Repeats | None = None
    ) -> None:
        self.engine.after(delay, fn, key=("kubelet", run.uid, what), repeats=repeats)

    def _current(self, uid: str) -> tuple[PodRun, Obj] | None:
        run = self.runs.get(uid)
        if run is None:
            return None
        pod = self.api.store.get("pods", *run.key)
        if pod is None or pod["metadata"].get("uid") != uid or not self.node_alive(run.node):
            return None
        if run.stopping:
            return None
        return run, pod

    def _sandbox_ready(self, uid: str) -> None:
        got = self._current(uid)
        if got is None:
            return
        run, pod = got
        failed = next((c.behaviour.sandbox_error for c in run.containers if c.behaviour.sandbox_error), None)
        if failed:
            # What the kubelet reports when the CNI plugin fails (the VPC CNI out of addresses):
            # the sandbox is retried, the containers never start.
            self.events.emit(
                pod,
                "Pod",
                "Warning",
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for"
                f' sandbox "{run.uid[:12]}": plugin type="aws-cni" name="aws-cni" failed (add): {failed}',
                component="kubelet",
            )
            self._after(run, SANDBOX_RETRY, "sandbox", lambda: self._sandbox_ready(run.uid))
            return
        claim = self._blocked_volume(pod, run)
        if claim:
            return
        if run.inits:
            self._pull(run, pod, run.inits[0])
        else:
            for c in run.containers:
                self._pull(run, pod, c)

    # ---- volumes --------------------------------------------------------------------------------

    def _volumes(self, pod: Obj) -> list[str]:
        out = []
        ns = pod["metadata"].get("namespace", "")
        for v in (pod.get("spec") or {}).get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.api.store.get("persistentvolumeclaims", ns, claim)
            modes = ((pvc or {}).get("spec") or {}).get("accessModes") or ["ReadWriteOnce"]
            if "ReadWriteOnce" not in modes and "ReadWriteOncePod" not in modes:
                continue
            volume = ((pvc or {}).get("spec") or {}).get(
                "volumeName"
            ) or f"pvc-{hashlib.md5(f'{ns}/{claim}'.encode()).hexdigest()}"
            out.append(volume)
        return out

    def _blocked_volume(self, pod: Obj, run: PodRun) -> str:
        now = self.engine.clock.now()
        for volume in self._volumes(pod):
            holder = self.attachments.get(volume)
            if holder and holder != run.node:
                in_use = any(
                    volume in self._volumes(e.obj()) for e in self.api.store.by_index("pods", holder)
                )
                if not in_use and volume not in self._released_at:
                    self._released_at[volume] = now
                released = self._released_at.get(volume)
                # A terminated instance loses its volumes at once; a dead one keeps them until the
                # attach/detach controller gives up on it.
                gone = self.api.store.entry("nodes", "", holder) is None
                wait = DETACH_SECONDS if (gone or self.node_alive(holder)) else FORCE_DETACH_AFTER
                if not in_use and released is not None and now - released >= wait:
                    self.attachments.pop(volume, None)
                    self._released_at.pop(volume, None)
                else:
                    self.events.emit(
                        pod,
                        "Pod",
                        "Warning",
                        "FailedAttachVolume",
                        f'Multi-Attach error for volume "{volume}" Volume is already exclusively attached to one '
                        "node and can't be attached to another",
                        component="attachdetach-controller",
                    )
                    run.waiting_volume = volume
                    self._after(run, ATTACH_RETRY, "sandbox", lambda: self._sandbox_ready(run.uid))
                    return volume
            self.attachments[volume] = run.node
            self._released_at.pop(volume, None)
            self._pin_zone(pod, run.node)
            if run.waiting_volume == volume:
                run.waiting_volume = ""
                self.events.emit(
                    pod,
                    "Pod",
                    "Normal",
                    "SuccessfulAttachVolume",
                    f'AttachVolume.Attach succeeded for volume "{volume}"',
                    component="attachdetach-controller",
                )
        return ""

    def _pin_zone(self, pod: Obj, node: str) -> None:
        """A volume is created in the zone of the node it first attaches to, and stays there."""
        node_entry = self.api.store.entry("nodes", "", node)
        zone = node_entry.labels.get(ZONE_LABEL, "") if node_entry is not None else ""
        ns = pod["metadata"].get("namespace", "")
        for v in (pod.get("spec") or {}).get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            pvc = self.api.store.get("persistentvolumeclaims", ns, claim) if claim else None
            if pvc is None or not zone or (pvc["metadata"].get("labels") or {}).get(ZONE_LABEL):
                continue
            pvc["metadata"].setdefault("labels", {})[ZONE_LABEL] = zone
            pvc["metadata"].setdefault("annotations", {})["volume.kubernetes.io/selected-node"] = node
            self.api.write("persistentvolumeclaims", pvc)

    def _release_volumes(self, pod: Obj, node: str) -> None:
        now = self.engine.clock.now()
        for volume in self._volumes(pod):
            if self.attachments.get(volume) == node:
                # Still attached until the detach completes (DETACH_SECONDS, or a forced detach later).
                self._released_at[volume] = now

    # ---- containers -----------------------------------------------------------------------------

    def _field_path(self, c: ContainerRun) -> str:
        return f"spec.{'initContainers' if c.init else 'containers'}{{{c.name}}}"

    def _emit(
        self, pod: Obj, c: ContainerRun | None, kind: str, reason: str, message: str, *, times: int = 1
    ) -> None:
        node = (pod.get("spec") or {}).get("nodeName", "")
        self.events.emit(
            pod,
            "Pod",
            kind,
            reason,
            message,
            component="kubelet",
            host=node,
            field_path=self._field_path(c) if c else "",
            times=times,
        )

    def _pull(self, run: PodRun, pod: Obj, c: ContainerRun) -> None:
        self._reread(pod, c)
        if c.pulled:
            self._after(
                run, c.behaviour.start_seconds, f"start/{c.name}", lambda: self._started(run.uid, c.name)
            )
            return
        self._emit(pod, c, "Normal", "Pulling", f'Pulling image "{c.image}"')
        self._after(run, c.behaviour.pull_seconds, f"pull/{c.name}", lambda: self._pulled(run.uid, c.name))

    def _container(self, run: PodRun, name: str) -> ContainerRun | None:
        return next((c for c in [*run.inits, *run.containers] if c.name == name), None)

    def _current_container(
        self, uid: str, name: str, *, running: bool = False, reread: bool = False
    ) -> tuple[PodRun, Obj, ContainerRun] | None:
        """The pod's run, the pod and its container `name`, for a timer that fires on the container:
        None when the pod is gone or stopping, the container unknown, or (`running`) not running.
        With `reread`, the container's behaviour is read again first (`_reread`)."""
        got = self._current(uid)
        if got is None:
            return None
        run, pod = got
        c = self._container(run, name)
        if c is None or (running and c.state != "running"):
            return None
        if reread:
            self._reread(pod, c)
        return run, pod, c

    def _reread(self, pod: Obj, c: ContainerRun) -> None:
        """Give `c` its behaviour as the rules say now: a fault injected since it was last read (a
        crash loop, a failing probe, an image that cannot be pulled) changes what happens next."""
        c.behaviour = self._behaviour(pod, {"name": c.name, "image": c.image})

    def _pulled(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name, reread=True)
        if got is None:
            return
        run, pod, c = got
        if c.behaviour.pull_error:
            c.state, c.reason = "waiting", "ErrImagePull"
            detail = c.behaviour.pull_error
            c.message = f'failed to pull and unpack image "{c.image}": failed to resolve reference "{c.image}": {detail}'
            self._emit(
                pod,
                c,
                "Warning",
                "Failed",
                f'Failed to pull image "{c.image}": rpc error: code = NotFound desc = {c.message}',
            )
            self._emit(pod, c, "Warning", "Failed", "Error: ErrImagePull")
            self._write(run)
            c.backoff = min(max(c.backoff * 2, BACKOFF_START), BACKOFF_MAX)
            self._after(run, 1.0, f"pull/{c.name}", lambda: self._pull_backoff(uid, name))
            return
        c.pulled = True
        took = c.behaviour.pull_seconds
        self._emit(
            pod,
            c,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{c.image}" in {took:.3f}s ({took:.3f}s including waiting)',
        )
        self._after(run, c.behaviour.start_seconds, f"start/{c.name}", lambda: self._started(uid, name))

    def _pull_backoff(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name)
        if got is None:
            return
        run, pod, c = got
        c.reason = "ImagePullBackOff"
        c.message = f'Back-off pulling image "{c.image}": ErrImagePull: {c.message.split(": ", 1)[-1]}'
        self._emit(pod, c, "Normal", "BackOff", f'Back-off pulling image "{c.image}"')
        self._emit(pod, c, "Warning", "Failed", "Error: ImagePullBackOff")
        self._write(run)
        self._after(run, c.backoff, f"pull/{c.name}", lambda: self._pulled(uid, name))

    def _started(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name)
        if got is None:
            return
        run, pod, c = got
        now = self.engine.clock.now()
        c.state, c.reason, c.message = "running", "", ""
        c.started_at = now
        c.ready = False
        c.container_id = f"containerd://{self.engine.ids.hex(64)}"
        if c.restarts == 0:
            self._emit(pod, c, "Normal", "Created", f"Created container: {c.name}")
            self._emit(pod, c, "Normal", "Started", f"Started container {c.name}")
        b = c.behaviour
        if c.init:
            self._write(run)
            self._after(run, max(b.ready_after, 0.5), f"done/{c.name}", lambda: self._init_done(uid, name))
            return
        if b.never_ready is None:
            self._after(run, b.ready_after, f"ready/{c.name}", lambda: self._ready(uid, name))
        else:
            self._after(run, max(b.ready_after, 1.0), f"ready/{c.name}", lambda: self._unready(uid, name))
        if b.crash_after is not None:
            self._after(run, b.crash_after, f"crash/{c.name}", lambda: self._crash(uid, name))
        self._write(run)

    def _init_done(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name)
        if got is None:
            return
        run, pod, c = got
        c.state, c.reason, c.exit_code, c.finished_at = "terminated", "Completed", 0, self.engine.clock.now()
        pending = [i for i in run.inits if i.state != "terminated"]
        if pending:
            self._pull(run, pod, pending[0])
        else:
            for k in run.containers:
                k.reason = "ContainerCreating"
                self._pull(run, pod, k)
        self._write(run)

    def _ready(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name, running=True, reread=True)
        if got is None:
            return
        run, _, c = got
        if c.behaviour.never_ready is not None:
            self._unready(uid, name)
            return
        c.ready = True
        self._write(run)

    def _unready(self, uid: str, name: str, probes: int = 1) -> None:
        """The readiness probe fails (`probes` times in a row, the last now: time moved on at once)."""
        got = self._current_container(uid, name, running=True, reread=True)
        if got is None:
            return
        run, pod, c = got
        if c.behaviour.never_ready is None:
            self._ready(uid, name)
            return
        c.ready = False
        message = f"Readiness probe failed: {c.behaviour.never_ready}"
        self._emit(pod, c, "Warning", "Unhealthy", message, times=probes)
        self._write(run)
        # The probe keeps failing; its event repeats (aggregated into one Event with a count). Over
        # the hours an idle sim is brought forward at once (`advance`), the repeats are one write of
        # the Event at the last probe's time with all of them counted: that is all anyone reads.
        self._after(
            run,
            PROBE_SECONDS,
            f"ready/{c.name}",
            lambda: self._unready(uid, name),
            repeats=Repeats(PROBE_SECONDS, lambda n: self._unready(uid, name, probes=n)),
        )

    def _crash(self, uid: str, name: str) -> None:
        got = self._current_container(uid, name, running=True, reread=True)
        if got is None:
            return
        run, pod, c = got
        if c.behaviour.crash_after is None:
            return
        now = self.engine.clock.now()
        assert c.started_at is not None
        c.history.append((c.started_at, now, True))
        c.last = {
            "terminated": {
                "exitCode": c.behaviour.exit_code,
                "reason": "Error" if c.behaviour.exit_code else "Completed",
                "startedAt": rfc3339(c.started_at),
                "finishedAt": rfc3339(now),
                "containerID": c.container_id,
            }
        }
        c.restarts += 1
        c.ready = False
        c.backoff = min(BACKOFF_START * 2 ** (c.restarts - 1), BACKOFF_MAX)
        c.state, c.reason = "waiting", "CrashLoopBackOff"
        m = pod["metadata"]
        c.message = f"back-off {int(c.backoff)}s restarting failed container={c.name} pod={m['name']}_{m.get('namespace', '')}({m['uid']})"
        self._emit(
            pod,
            c,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {c.name} in pod {m['name']}_{m.get('namespace', '')}({m['uid']})",
        )
        self._write(run)
        self._after(run, c.backoff, f"start/{c.name}", lambda: self._started(uid, name))

    def refresh(self, pod_match: Callable[[Obj], bool]) -> None:
        """Re-read behaviours for running containers of matching pods (a fault was injected).
        Running pods this kubelet has not acted on yet (written settled by the scenario) are taken
        over first, so that the fault reaches them too."""
        for entry in self.api.store.entries("pods"):
            if entry.uid in self.runs or entry.fields.get("status.phase") != "Running":
                continue
            node = entry.fields.get("spec.nodeName", "")
            if not node or not self.node_alive(node):
                continue
            found = entry.obj()
            if not found["metadata"].get("deletionTimestamp") and pod_match(found):
                self._adopt(found)
        for uid, run in list(self.runs.items()):
            pod = self.api.store.get("pods", *run.key)
            if pod is None or pod["metadata"].get("uid") != uid or not pod_match(pod) or run.stopping:
                continue
            for c in run.containers:
                self._reread(pod, c)
                if c.state != "running":
                    if c.reason in ("ErrImagePull", "ImagePullBackOff") and not c.behaviour.pull_error:
                        self._after(run, 0.0, f"pull/{c.name}", functools.partial(self._pulled, uid, c.name))
                    continue
                if c.behaviour.crash_after is not None:
                    self._after(
                        run,
                        c.behaviour.crash_after,
                        f"crash/{c.name}",
                        functools.partial(self._crash, uid, c.name),
                    )
                if c.behaviour.never_ready is not None and c.ready:
                    self._after(run, 0.0, f"ready/{c.name}", functools.partial(self._unready, uid, c.name))
                if c.behaviour.never_ready is None and not c.ready:
                    self._after(run, 0.0, f"ready/{c.name}", functools.partial(self._ready, uid, c.name))

    # ---- stopping -------------------------------------------------------------------------------

    def _begin_stop(self, pod: Obj, run: PodRun) -> None:
        if run.stopping:
            return
        node = (pod.get("spec") or {}).get("nodeName", "")
        if self.rules.stuck_terminating(pod, self.node_facts(node)):
            return
        run.stopping = True
        grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        slowest = max([c.behaviour.stop_seconds for c in run.containers] or [0.0])
        for c in run.containers:
            if c.state == "running":
                self._emit(pod, c, "Normal", "Killing", f"Stopping container {c.name}")
        self.engine.after(
            min(float(grace), slowest), lambda: self._stopped(run.uid), key=("kubelet", run.uid, "stop")
        )

    def _stopped(self, uid: str) -> None:
        run = self.runs.get(uid)
        if run is None:
            return
        entry = self.api.store.entry("pods", *run.key)
        if entry is None or entry.uid != uid or not self.node_alive(run.node):
            return
        now = self.engine.clock.now()
        for c in run.containers:
            if c.state == "running" and c.started_at is not None:
                c.history.append((c.started_at, now, False))
            c.state, c.reason, c.exit_code, c.finished_at, c.ready = "terminated", "Completed", 0, now, False
        pod = entry.obj()
        pod["status"] = self._status(run, pod, terminal=True)
        with contextlib.suppress(ApiError):
            self.api.write("pods", pod, status=True)
        latest = self.api.store.entry("pods", *run.key)
        if latest is None:
            return
        obj = latest.obj()
        if obj["metadata"].get("finalizers"):
            # Finished, but a finalizer holds the object: its grace period is over (0) and it waits.
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            self.api.store.update(latest.kind, obj, latest)
            return
        self.api.remove_now("pods", *run.key)

    # ---- status ---------------------------------------------------------------------------------

    def _container_status(self, c: ContainerRun) -> Obj:
        if c.state == "running":
            state: Obj = {"running": {"startedAt": rfc3339(c.started_at or 0)}}
        elif c.state == "terminated":
            state = {
                "terminated": {
                    "exitCode": c.exit_code,
                    "reason": c.reason or "Completed",
                    "startedAt": rfc3339(c.started_at or 0),
                    "finishedAt": rfc3339(c.finished_at or 0),
                    "containerID": c.container_id,
                }
            }
        else:
            waiting: Obj = {"reason": c.reason}
            if c.message:
                waiting["message"] = c.message
            state = {"waiting": waiting}
        out: Obj = {
            "name": c.name,
            "state": state,
            "lastState": c.last or {},
            "ready": c.ready,
            "restartCount": c.restarts,
            "image": c.image,
            "imageID": image_id(c.image) if c.pulled or c.state != "waiting" else "",
        }
        if c.container_id:
            out["containerID"] = c.container_id
        out["started"] = c.state == "running"
        return out

    def _status(self, run: PodRun, pod: Obj, *, terminal: bool = False) -> Obj:
        now = self.engine.clock.now()
        old = pod.get("status") or {}
        status: Obj = {"phase": old.get("phase", "Pending")}
        kept = [
            c for c in old.get("conditions") or [] if c.get("type") in ("PodScheduled", "DisruptionTarget")
        ]
        inits_done = all(i.state == "terminated" for i in run.inits)
        all_ready = bool(run.containers) and all(c.ready for c in run.containers)
        unready = [c.name for c in run.containers if not c.ready]
        sandbox = bool(run.ip) and not terminal
        conds: list[tuple[str, bool, str, str]] = [
            ("PodReadyToStartContainers", sandbox, "", ""),
            (
                "Initialized",
                inits_done,
                "" if inits_done else "ContainersNotInitialized",
                ""
                if inits_done
                else f"containers with incomplete status: [{' '.join(i.name for i in run.inits if i.state != 'terminated')}]",
            ),
            (
                "Ready",
                all_ready,
                "" if all_ready else "ContainersNotReady",
                "" if all_ready else f"containers with unready status: [{' '.join(unready)}]",
            ),
            (
                "ContainersReady",
                all_ready,
                "" if all_ready else "ContainersNotReady",
                "" if all_ready else f"containers with unready status: [{' '.join(unready)}]",
            ),
        ]
        old_by_type = {c.get("type"): c for c in old.get("conditions") or []}
        conditions: list[Obj] = []
        for kind, ok, reason, message in conds:
            prev = old_by_type.get(kind) or {}
            value = "True" if ok else "False"
            c: Obj = {"type": kind}
            if kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
                c["observedGeneration"] = pod["metadata"].get("generation", 1)
            c.update(
                status=value,
                lastProbeTime=None,
                lastTransitionTime=prev.get("lastTransitionTime")
                if prev.get("status") == value
                else rfc3339(now),
            )
            if reason:
                c["reason"] = reason
                c["message"] = message
            conditions.append(c)
        status["conditions"] = conditions + kept
        status["hostIP"] = run.host_ip
        status["hostIPs"] = [{"ip": run.host_ip}]
        if run.ip:
            status["podIP"] = run.ip
            status["podIPs"] = [{"ip": run.ip}]
        status["startTime"] = old.get("startTime") or rfc3339(run.started_at)
        if run.inits:
            status["initContainerStatuses"] = [self._container_status(i) for i in run.inits]
        status["containerStatuses"] = [self._container_status(c) for c in run.containers]
        status["qosClass"] = old.get("qosClass", "BestEffort")
        if terminal:
            status["phase"] = "Succeeded" if all(c.exit_code == 0 for c in run.containers) else "Failed"
        elif any(c.state == "running" for c in run.containers) or (
            run.containers and all(c.state != "waiting" or c.restarts > 0 for c in run.containers)
        ):
            status["phase"] = "Running"
        return status

    def _write(self, run: PodRun) -> None:
        entry = self.api.store.entry("pods", *run.key)
        if entry is None or entry.uid != run.uid:
            return
        current = entry.view()
        status = self._status(run, current)
        if status == current.get("status"):
            # Nothing the kubelet reports has changed: a failing probe's repeat (every 30 s of
            # simulated time, its Event counts it), which the API server would find a no-op after
            # copying and checking the whole pod.
            return
        pod = {**current, "metadata": dict(current["metadata"]), "status": status}
        self.api.write("pods", pod, status=True)

    # ---- logs -----------------------------------------------------------------------------------

    def logs(
        self,
        pod: Obj,
        container: str,
        *,
        previous: bool = False,
        since_seconds: float | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> list[str]:
        """A container's log lines (newest last), or ApiError 400 as the kubelet answers it."""
        m = pod["metadata"]
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        inits = [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
        if not container:
            if len(names) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {m['name']}, choose one of: [{' '.join(str(n) for n in names)}]"
                    + (
                        f" or one of the init containers: [{' '.join(str(n) for n in inits)}]"
                        if inits
                        else ""
                    )
                )
            container = str(names[0])
        if container not in names and container not in inits:
            raise bad_request(f"container {container} is not valid for pod {m['name']}")
        run = self.runs.get(m["uid"])
        if run is None:
            run = self._adopt(pod) if (pod.get("status") or {}).get("containerStatuses") else None
        c = self._container(run, container) if run else None
        if c is None:
            raise bad_request(
                f'container "{container}" in pod "{m["name"]}" is waiting to start: ContainerCreating'
            )
        now = self.engine.clock.now()
        if previous:
            if not c.history:
                raise bad_request(
                    f'previous terminated container "{container}" in pod "{m["name"]}" not found'
                )
            start, end, crashed = c.history[-1]
            spans = [(start, end, crashed)]
        else:
            if c.state == "waiting" and c.started_at is None:
                detail = {
                    "ErrImagePull": "trying and failing to pull image",
                    "ImagePullBackOff": "trying and failing to pull image",
                }
                raise bad_request(
                    f'container "{container}" in pod "{m["name"]}" is waiting to start: '
                    f"{detail.get(c.reason, c.reason)}"
                )
            if c.state == "waiting" and c.history:
                spans = [c.history[-1]]
            else:
                spans = [
                    (
                        c.started_at or now,
                        c.finished_at if c.state == "terminated" and c.finished_at else now,
                        False,
                    )
                ]
        values = {
            "pod": m["name"],
            "namespace": m.get("namespace", ""),
            "node": run.node if run else "",
            "container": container,
            "image": c.image,
            "ip": run.ip if run else "",
        }
        lines: list[tuple[float, str]] = []
        # Only the last `kept` lines are answered, and each of a rule's times says one line or
        # more: a rule's older times cannot be among them (a tail of 50 made 5,000 lines a rule).
        kept = MAX_LOG_LINES if tail_lines is None else min(max(tail_lines, 0), MAX_LOG_LINES)
        for start, end, crashed in spans:
            for rule in c.behaviour.logs:
                base = max(start, rule.since) + rule.after
                if base > end:
                    continue
                if rule.every:
                    last = int((end - base) // rule.every)
                    first = max(0, last - kept)
                    times = [base + k * rule.every for k in range(first, last + 1)]
                else:
                    times = [base]
                for t in times:
                    lines.extend((t, _fill(line, values, t)) for line in rule.lines)
            if crashed:
                lines.extend((end, _fill(line, values, end)) for line in c.behaviour.crash_logs)
        lines.sort(key=lambda pair: pair[0])
        if since_seconds is not None:
            lines = [p for p in lines if p[0] >= now - since_seconds]
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        return [f"{rfc3339_nano(t)} {text}" if timestamps else text for t, text in lines[-MAX_LOG_LINES:]]


def _container_id(pod_uid: str, name: str) -> str:
    """A container ID derived from its pod's UID (drawing 64 random hex digits per container costs
    more than the rest of a settled pod)."""
    return f"containerd://{hashlib.sha256(f'{pod_uid}/{name}'.encode()).hexdigest()}"


def _fill(line: str, values: dict[str, str], when: float) -> str:
    for k, v in values.items():
        line = line.replace("{" + k + "}", v)
    # Formatted only where a line says it: most do not, and it cost more than the rest.
    return line.replace("{time}", rfc3339_nano(when)[:23] + "Z") if "{time}" in line else line
