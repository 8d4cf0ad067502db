"""Server-side printing: the `Table` (meta.k8s.io/v1) kubectl asks for with `Accept: …;as=Table`.

Columns and cells follow kubectl's printers for the kinds the bot and runbooks look at (pods,
nodes, workloads, PDBs, events, services, namespaces, leases, …); other kinds get the generic
Name/Created At table. The server always sends every column — kubectl hides priority-1 columns
unless `-o wide`. AGE and similar cells are computed on the simulated clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from bot.sim.apiserver.clock import human_duration, parse_time
from bot.sim.apiserver.objects import condition, controller_ref
from bot.sim.apiserver.selectors import selector_to_string

Obj = dict[str, Any]


class Column(NamedTuple):
    """One of a table's columnDefinitions (a TableColumnDefinition)."""

    name: str
    description: str
    priority: int = 0
    type: str = "string"
    format: str = ""


#: A kind's columns and the function that makes an object's cells (on the simulated clock's now).
Table = tuple[list[Column], Callable[[Obj, float], list[Any]]]

_NAME = Column("Name", "Name must be unique within a namespace.", format="name")
_AGE = Column(
    "Age", "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _age(obj: Obj, now: float, field: str = "") -> str:
    stamp = obj.get(field) if field else (obj.get("metadata") or {}).get("creationTimestamp")
    when = parse_time(stamp)
    return "<unknown>" if when is None else human_duration(now - when)


def _none(value: Any) -> str:
    return str(value) if value not in (None, "", []) else "<none>"


# ---- pods ---------------------------------------------------------------------------------------


def pod_status_reason(pod: Obj) -> str:
    """The STATUS kubectl shows for a pod (Running, Pending, CrashLoopBackOff, Init:0/1, Terminating, …)."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    inits = (pod.get("spec") or {}).get("initContainers") or []
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif state.get("waiting", {}).get("reason") and state["waiting"]["reason"] != "PodInitializing":
            reason = "Init:" + state["waiting"]["reason"]
        else:
            reason = f"Init:{i}/{len(inits)}"
        initializing = True
        break
    init_done = condition(status, "Initialized")
    if not initializing or (init_done and init_done.get("status") == "True"):
        has_running = False
        error_reason = ""
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if state.get("waiting", {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif "terminated" in state:
                t = state["terminated"]
                reason = t.get("reason") or (
                    f"Signal:{t['signal']}" if t.get("signal") else f"ExitCode:{t.get('exitCode', 0)}"
                )
                if t.get("exitCode"):
                    error_reason = reason
            elif cs.get("ready") and "running" in state:
                has_running = True
        if reason == "Completed":
            ready = condition(status, "Ready")
            if has_running and ready and ready.get("status") == "True":
                reason = "Running"
            elif error_reason:
                reason = error_reason
            elif has_running:
                reason = "NotReady"
    m = pod.get("metadata") or {}
    if m.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif m.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return str(reason)


def _pod_row(pod: Obj, now: float) -> list[Any]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    total = len(spec.get("containers") or [])
    ready = sum(
        1
        for cs in status.get("containerStatuses") or []
        if cs.get("ready") and "running" in (cs.get("state") or {})
    )
    restarts = 0
    last_restart: float | None = None
    for cs in status.get("containerStatuses") or []:
        restarts += int(cs.get("restartCount", 0))
        finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        if finished is not None and (last_restart is None or finished > last_restart):
            last_restart = finished
    restart_cell = str(restarts)
    if restarts and last_restart is not None:
        restart_cell = f"{restarts} ({human_duration(now - last_restart)} ago)"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gate_cell = "<none>"
    if gates:
        true = sum(
            1 for g in gates if (condition(status, g.get("conditionType", "")) or {}).get("status") == "True"
        )
        gate_cell = f"{true}/{len(gates)}"
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        pod_status_reason(pod),
        restart_cell,
        _age(pod, now),
        ips[0]["ip"] if ips else "<none>",
        _none(spec.get("nodeName")),
        _none(status.get("nominatedNodeName")),
        gate_cell,
    ]


POD_COLUMNS: list[Column] = [
    _NAME,
    Column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", "The aggregate status of the containers in this pod."),
    Column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    _AGE,
    Column("IP", "IP address allocated to the pod. Routable at least within the cluster.", priority=1),
    Column("Node", "NodeName is a request to schedule this pod onto a specific node.", priority=1),
    Column(
        "Nominated Node",
        "nominatedNodeName is set when this pod preempts other pods on the node.",
        priority=1,
    ),
    Column(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        priority=1,
    ),
]

# ---- nodes ------------------------------------------------------------------------------------


def _node_row(node: Obj, now: float) -> list[Any]:
    status = node.get("status") or {}
    ready = condition(status, "Ready")
    words = []
    if ready is not None:
        words.append("Ready" if ready.get("status") == "True" else "NotReady")
    else:
        words.append("Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        words.append("SchedulingDisabled")
    roles = set()
    for k, v in ((node.get("metadata") or {}).get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]:
            roles.add(k.split("/", 1)[1])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []
    internal = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), "<none>")
    external = next((a["address"] for a in addresses if a.get("type") == "ExternalIP"), "<none>")
    kernel = info.get("kernelVersion") or "<unknown>"
    if info.get("architecture"):
        kernel += f" ({info['architecture']})"
    return [
        node["metadata"]["name"],
        ",".join(words),
        ",".join(sorted(roles)) or "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        internal,
        external,
        info.get("osImage") or "<unknown>",
        kernel,
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


NODE_COLUMNS: list[Column] = [
    _NAME,
    Column("Status", "The status of the node"),
    Column("Roles", "The roles of the node"),
    _AGE,
    Column("Version", "Kubelet Version reported by the node."),
    Column("Internal-IP", "List of addresses reachable to the node.", priority=1),
    Column("External-IP", "List of addresses reachable to the node.", priority=1),
    Column("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
    Column("Kernel-Version", "Kernel Version reported by the node from 'uname -r'.", priority=1),
    Column(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API.",
        priority=1,
    ),
]

# ---- workloads --------------------------------------------------------------------------------


_CONTAINERS = Column("Containers", "Names of each container in the template.", priority=1)
_IMAGES = Column("Images", "Images referenced by each container in the template.", priority=1)
_SELECTOR = Column("Selector", "The label selector of the workload.", priority=1)
#: What each workload's table ends with (kubectl's printers): its age and, wide, its template's
#: containers and images and its selector. A StatefulSet's has no selector.
_WORKLOAD_COLUMNS = [_AGE, _CONTAINERS, _IMAGES, _SELECTOR]


def _workload_cells(w: Obj, now: float) -> list[Any]:
    """The cells under _WORKLOAD_COLUMNS."""
    spec = w.get("spec") or {}
    cs = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        _age(w, now),
        ",".join(c.get("name", "") for c in cs),
        ",".join(c.get("image", "") for c in cs),
        selector_to_string(spec.get("selector")),
    ]


def _deploy_row(d: Obj, now: float) -> list[Any]:
    spec, st = d.get("spec") or {}, d.get("status") or {}
    return [
        d["metadata"]["name"],
        f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        st.get("updatedReplicas", 0),
        st.get("availableReplicas", 0),
        *_workload_cells(d, now),
    ]


def _rs_row(r: Obj, now: float) -> list[Any]:
    spec, st = r.get("spec") or {}, r.get("status") or {}
    return [
        r["metadata"]["name"],
        spec.get("replicas", 1),
        st.get("replicas", 0),
        st.get("readyReplicas", 0),
        *_workload_cells(r, now),
    ]


def _ds_row(d: Obj, now: float) -> list[Any]:
    st = d.get("status") or {}
    tspec = ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted((tspec.get("nodeSelector") or {}).items())) or "<none>"
    return [
        d["metadata"]["name"],
        st.get("desiredNumberScheduled", 0),
        st.get("currentNumberScheduled", 0),
        st.get("numberReady", 0),
        st.get("updatedNumberScheduled", 0),
        st.get("numberAvailable", 0),
        selector,
        *_workload_cells(d, now),
    ]


def _sts_row(s: Obj, now: float) -> list[Any]:
    spec, st = s.get("spec") or {}, s.get("status") or {}
    return [
        s["metadata"]["name"],
        f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        *_workload_cells(s, now)[:-1],
    ]


# ---- the rest ---------------------------------------------------------------------------------


def _pdb_row(p: Obj, now: float) -> list[Any]:
    spec, st = p.get("spec") or {}, p.get("status") or {}
    return [
        p["metadata"]["name"],
        str(spec["minAvailable"]) if spec.get("minAvailable") is not None else "N/A",
        str(spec["maxUnavailable"]) if spec.get("maxUnavailable") is not None else "N/A",
        int(st.get("disruptionsAllowed", 0)),
        _age(p, now),
    ]


def _event_row(e: Obj, now: float) -> list[Any]:
    ref = e.get("involvedObject") or {}
    src = e.get("source") or {}
    source = src.get("component", "")
    if src.get("host"):
        source += f", {src['host']}"
    last = parse_time(e.get("lastTimestamp")) or parse_time(e.get("eventTime"))
    first = parse_time(e.get("firstTimestamp")) or last
    return [
        human_duration(now - last) if last else "<unknown>",
        e.get("type", ""),
        e.get("reason", ""),
        f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}",
        ref.get("fieldPath", ""),
        source,
        str(e.get("message", "")).strip(),
        human_duration(now - first) if first else "<unknown>",
        str(e.get("count", 1)),
        e["metadata"]["name"],
    ]


def _service_row(s: Obj, now: float) -> list[Any]:
    spec = s.get("spec") or {}
    ports = ",".join(
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or []
    )
    lb = ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in lb) or (
        "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
    return [
        s["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        external,
        ports or "<none>",
        _age(s, now),
        selector,
    ]


def _endpoints_row(e: Obj, now: float) -> list[Any]:
    pairs = []
    for subset in e.get("subsets") or []:
        for a in subset.get("addresses") or []:
            for p in subset.get("ports") or [{"port": None}]:
                pairs.append(f"{a['ip']}:{p.get('port')}" if p.get("port") else a["ip"])
    text = ",".join(pairs[:3]) + (f" + {len(pairs) - 3} more..." if len(pairs) > 3 else "")
    return [e["metadata"]["name"], text or "<none>", _age(e, now)]


def _generic_row(o: Obj, now: float) -> list[Any]:
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]


def _hpa_row(h: Obj, now: float) -> list[Any]:
    spec, st = h.get("spec") or {}, h.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    targets = []
    for m in spec.get("metrics") or []:
        res = m.get("resource") or {}
        target = res.get("target") or {}
        if target.get("averageUtilization") is not None:
            targets.append(f"cpu: <unknown>/{target['averageUtilization']}%")
    if spec.get("targetCPUUtilizationPercentage") is not None:
        targets.append(f"<unknown>/{spec['targetCPUUtilizationPercentage']}%")
    return [
        h["metadata"]["name"],
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        ", ".join(targets) or "<none>",
        str(spec.get("minReplicas", 1)),
        str(spec.get("maxReplicas", 0)),
        str(st.get("currentReplicas", 0)),
        _age(h, now),
    ]


#: An admission webhook configuration's table, validating and mutating alike.
_WEBHOOKS: Table = (
    [_NAME, Column("Webhooks", "Webhooks is a list of webhooks.", type="integer"), _AGE],
    lambda o, now: [o["metadata"]["name"], len(o.get("webhooks") or []), _age(o, now)],
)

ROWS: dict[str, Table] = {
    "Pod": (POD_COLUMNS, _pod_row),
    "Node": (NODE_COLUMNS, _node_row),
    "Deployment": (
        [
            _NAME,
            Column("Ready", "Number of the pod with ready state"),
            Column(
                "Up-to-date",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                type="integer",
            ),
            Column(
                "Available", "Total number of available pods targeted by this deployment.", type="integer"
            ),
            *_WORKLOAD_COLUMNS,
        ],
        _deploy_row,
    ),
    "ReplicaSet": (
        [
            _NAME,
            Column("Desired", "Replicas is the number of desired replicas.", type="integer"),
            Column("Current", "Replicas is the most recently observed number of replicas.", type="integer"),
            Column("Ready", "The number of ready replicas for this replica set.", type="integer"),
            *_WORKLOAD_COLUMNS,
        ],
        _rs_row,
    ),
    "DaemonSet": (
        [
            _NAME,
            Column(
                "Desired", "The total number of nodes that should be running the daemon pod.", type="integer"
            ),
            Column("Current", "The number of nodes that are running at least 1 daemon pod.", type="integer"),
            Column(
                "Ready",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
                type="integer",
            ),
            Column(
                "Up-to-date", "The total number of nodes that are running updated daemon pod", type="integer"
            ),
            Column(
                "Available",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
                type="integer",
            ),
            Column(
                "Node Selector", "NodeSelector is a selector which must be true for the pod to fit on a node."
            ),
            *_WORKLOAD_COLUMNS,
        ],
        _ds_row,
    ),
    "StatefulSet": (
        [_NAME, Column("Ready", "Number of the pod with ready state"), *_WORKLOAD_COLUMNS[:-1]],
        _sts_row,
    ),
    "PodDisruptionBudget": (
        [
            _NAME,
            Column("Min Available", "The minimum number of pods that must be available."),
            Column("Max Unavailable", "The maximum number of pods that may be unavailable."),
            Column(
                "Allowed Disruptions",
                "Calculated number of pods that may be disrupted at this time.",
                type="integer",
            ),
            _AGE,
        ],
        _pdb_row,
    ),
    "Event": (
        [
            Column("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
            Column("Type", "Type of this event (Normal, Warning)."),
            Column("Reason", "This should be a short, machine understandable string."),
            Column("Object", "The object that this event is about."),
            Column("Subobject", "The field of the object the event is about.", priority=1),
            Column("Source", "The component reporting this event.", priority=1),
            Column("Message", "A human-readable description of the status of this operation."),
            Column("First Seen", "The time at which the event was first recorded.", priority=1),
            Column("Count", "The number of times this event has occurred.", priority=1),
            _NAME._replace(priority=1),
        ],
        _event_row,
    ),
    "Service": (
        [
            _NAME,
            Column("Type", "type determines how the Service is exposed."),
            Column("Cluster-IP", "clusterIP is the IP address of the service."),
            Column(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            Column("Port(s)", "The list of ports that are exposed by this service."),
            _AGE,
            Column(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
                priority=1,
            ),
        ],
        _service_row,
    ),
    "Endpoints": (
        [_NAME, Column("Endpoints", "Endpoints is the list of endpoints."), _AGE],
        _endpoints_row,
    ),
    "Namespace": (
        [_NAME, Column("Status", "The status of the namespace"), _AGE],
        lambda o, now: [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Active"), _age(o, now)],
    ),
    "ConfigMap": (
        [_NAME, Column("Data", "Data contains the configuration data."), _AGE],
        lambda o, now: [
            o["metadata"]["name"],
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            _age(o, now),
        ],
    ),
    "Secret": (
        [
            _NAME,
            Column("Type", "Used to facilitate programmatic handling of secret data."),
            Column("Data", "Data contains the secret data."),
            _AGE,
        ],
        lambda o, now: [
            o["metadata"]["name"],
            o.get("type", "Opaque"),
            len(o.get("data") or {}),
            _age(o, now),
        ],
    ),
    "Lease": (
        [
            _NAME,
            Column("Holder", "holderIdentity contains the identity of the holder of a current lease."),
            _AGE,
        ],
        lambda o, now: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""), _age(o, now)],
    ),
    "HorizontalPodAutoscaler": (
        [
            _NAME,
            Column("Reference", "The scale target."),
            Column("Targets", "The metrics and targets."),
            Column("MinPods", "The lower limit of replicas."),
            Column("MaxPods", "The upper limit of replicas."),
            Column("Replicas", "The current number of replicas."),
            _AGE,
        ],
        _hpa_row,
    ),
    "ValidatingWebhookConfiguration": _WEBHOOKS,
    "MutatingWebhookConfiguration": _WEBHOOKS,
    "ControllerRevision": (
        [
            _NAME,
            Column("Controller", "Controller of the object."),
            Column("Revision", "Revision indicates the revision of the state.", type="integer"),
            _AGE,
        ],
        lambda o, now: [
            o["metadata"]["name"],
            (lambda r: f"{str(r.get('kind', '')).lower()}.apps/{r.get('name', '')}" if r else "<none>")(
                controller_ref(o)
            ),
            o.get("revision", 0),
            _age(o, now),
        ],
    ),
    "PersistentVolumeClaim": (
        [
            _NAME,
            Column("Status", "The phase of the claim."),
            Column("Volume", "The bound volume."),
            Column("Capacity", "The capacity."),
            Column("Access Modes", "The access modes."),
            Column("StorageClass", "The storage class."),
            _AGE,
        ],
        lambda o, now: [
            o["metadata"]["name"],
            (o.get("status") or {}).get("phase", ""),
            (o.get("spec") or {}).get("volumeName", ""),
            ((o.get("status") or {}).get("capacity") or {}).get("storage", ""),
            ",".join(
                {
                    "ReadWriteOnce": "RWO",
                    "ReadOnlyMany": "ROX",
                    "ReadWriteMany": "RWX",
                    "ReadWriteOncePod": "RWOP",
                }.get(m, m)
                for m in (o.get("status") or {}).get("accessModes") or []
            ),
            (o.get("spec") or {}).get("storageClassName", ""),
            _age(o, now),
        ],
    ),
}

GENERIC: Table = ([_NAME, _AGE._replace(name="Created At", type="date")], _generic_row)


def column_definitions(kind: str) -> list[Obj]:
    columns, _ = ROWS.get(kind, GENERIC)
    return [
        {
            "name": c.name,
            "type": c.type,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }
        for c in columns
    ]


def partial_metadata(obj: Obj) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def rows(kind: str, objects: list[Obj], now: float, include: str, full: Callable[[Obj], Obj]) -> list[Obj]:
    """Table rows; `include` is the includeObject option (None, Metadata, Object)."""
    _, make = ROWS.get(kind, GENERIC)
    out = []
    for obj in objects:
        row: Obj = {"cells": make(obj, now)}
        if kind == "Pod":
            phase = (obj.get("status") or {}).get("phase")
            if phase == "Succeeded":
                row["conditions"] = [
                    {
                        "type": "Completed",
                        "status": "True",
                        "reason": "Succeeded",
                        "message": "The pod has completed successfully.",
                    }
                ]
            elif phase == "Failed":
                row["conditions"] = [
                    {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
                ]
        if include == "Object":
            row["object"] = full(obj)
        elif include != "None":
            row["object"] = partial_metadata(obj)
        out.append(row)
    return out
