"""What a watch BOOKMARK looks like, and which kinds get bookmarks at all, as kube-apiserver does it.

A real bookmark is the kind's Go struct left empty but for `metadata.resourceVersion`, serialized
as Go does: fields without `omitempty` appear as zero values (`"spec":{"containers":null}` for a
Pod). The shapes below were captured from kube-apiserver 1.36 (the testbed); clients must only
read `metadata.resourceVersion`, but a client that trips on the rest should trip on the sim too.
Kinds not listed get just `metadata`, which is what the API server sends for ConfigMaps, Secrets,
ServiceAccounts and the like.

Bookmarks come from the API server's watch cache. Events are not cached, so their watches are
served straight from etcd: no bookmarks, and a compacted resourceVersion gets etcd's wording.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

_TEMPLATE: Obj = {"metadata": {}, "spec": {"containers": None}}

_SHAPES: dict[str, Obj] = {
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Node": {
        "spec": {},
        "status": {
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "",
                "containerRuntimeVersion": "",
                "kubeletVersion": "",
                "kubeProxyVersion": "",
                "operatingSystem": "",
                "architecture": "",
            },
        },
    },
    "Namespace": {"spec": {}, "status": {}},
    "Service": {"spec": {}, "status": {"loadBalancer": {}}},
    "PersistentVolumeClaim": {"spec": {"resources": {}}, "status": {}},
    "Lease": {"spec": {}},
    "Deployment": {
        "spec": {"replicas": 0, "selector": None, "template": _TEMPLATE, "strategy": {}},
        "status": {},
    },
    "ReplicaSet": {
        "spec": {"replicas": 0, "selector": None, "template": _TEMPLATE},
        "status": {"replicas": 0},
    },
    "StatefulSet": {
        "spec": {
            "replicas": 0,
            "selector": None,
            "template": _TEMPLATE,
            "serviceName": "",
            "updateStrategy": {},
        },
        "status": {"replicas": 0, "availableReplicas": 0},
    },
    "DaemonSet": {
        "spec": {"selector": None, "template": _TEMPLATE, "updateStrategy": {}},
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    },
    "Job": {"spec": {"template": _TEMPLATE}, "status": {}},
    "PodDisruptionBudget": {
        "spec": {},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    },
}

#: The DaemonSet strategy's defaulting runs even on the empty bookmark object.
_EXTRA_ANNOTATIONS = {"DaemonSet": {"deprecated.daemonset.template.generation": "0"}}

#: Kinds kube-apiserver serves without a watch cache (core/v1 and events.k8s.io/v1 Events).
UNCACHED = frozenset({"Event"})

#: etcd's answer, through the API server, to a watch from a compacted revision of an uncached kind.
UNCACHED_TOO_OLD = "The resourceVersion for the provided watch is too old."


def body(kind: str, resource_version: int, annotations: Obj | None = None) -> Obj:
    """The bookmark object after `kind`/`apiVersion`: metadata plus the kind's empty fields."""
    meta: Obj = {"resourceVersion": str(resource_version)}
    extra = {**_EXTRA_ANNOTATIONS.get(kind, {}), **(annotations or {})}
    if extra:
        meta["annotations"] = extra
    return {"metadata": meta, **copy.deepcopy(_SHAPES.get(kind, {}))}
