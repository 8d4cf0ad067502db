"""Defaults and admission the API server applies to new objects, so stored objects look real.

A Deployment created with three fields comes back with a RollingUpdate strategy of 25%/25%, a pod
gets `restartPolicy: Always`, the two 300-second NoExecute tolerations and its service-account
token volume, a Namespace its `kubernetes.io/metadata.name` label. Controllers and kubectl rely on
these (rollout status reads the strategy; drain ignores the projected token volume).
"""

from __future__ import annotations

from typing import Any

from bot.sim.apiserver.objects import Ids, parse_quantity

Obj = dict[str, Any]

TOLERATION_SECONDS = 300


def _fill(obj: Obj, **defaults: Any) -> Obj:
    """`obj` with each of `defaults` set where it is absent, in their order (the order of the keys
    a client reads back)."""
    for key, value in defaults.items():
        obj.setdefault(key, value)
    return obj


def _rolling(spec: Obj, key: str, **parameters: Any) -> None:
    """A workload's update strategy at `key`: RollingUpdate unless it says otherwise, and then the
    rolling update's `parameters` where absent."""
    strategy = spec.setdefault(key, {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _fill(strategy.setdefault("rollingUpdate", {}), **parameters)


def _container(c: Obj) -> None:
    image = str(c.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = (
            "Always" if (":" not in tag or tag.endswith(":latest")) and "@" not in image else "IfNotPresent"
        )
    _fill(c, resources={}, terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File")
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")


def pod_spec(spec: Obj) -> None:
    """Defaults shared by pods and pod templates."""
    for c in spec.get("containers") or []:
        _container(c)
    for c in spec.get("initContainers") or []:
        _container(c)
    _fill(
        spec,
        restartPolicy="Always",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        schedulerName="default-scheduler",
    )
    for v in spec.get("volumes") or []:
        if "emptyDir" in v and v["emptyDir"] is None:
            v["emptyDir"] = {}


def _template(obj: Obj) -> None:
    template = obj.setdefault("spec", {}).setdefault("template", {})
    template.setdefault("metadata", {})
    pod_spec(template.setdefault("spec", {}))


def qos_class(spec: Obj) -> str:
    requests_all, limits_all, any_set = True, True, False
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim:
                limits_all = False
            if parse_quantity(req.get(r, lim.get(r))) != parse_quantity(lim.get(r)):
                requests_all = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if limits_all and requests_all else "Burstable"


def admit_pod(pod: Obj, ids: Ids) -> None:
    """What admission adds to a new pod: tolerations, service account and its token volume."""
    spec = pod.setdefault("spec", {})
    pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    tolerations = list(spec.get("tolerations") or [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in ("NoExecute", None, "") for t in tolerations):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": TOLERATION_SECONDS,
                }
            )
    spec["tolerations"] = tolerations
    if spec.get("automountServiceAccountToken", True) and not any(
        str(v.get("name", "")).startswith("kube-api-access-") for v in spec.get("volumes") or []
    ):
        name = f"kube-api-access-{ids.suffix(5)}"
        spec["volumes"] = [*list(spec.get("volumes") or []), _token_volume(name)]
        for c in spec.get("containers") or []:
            mounts = list(c.get("volumeMounts") or [])
            mounts.append(
                {"name": name, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
            )
            c["volumeMounts"] = mounts
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def _token_volume(name: str) -> Obj:
    return {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def apply_defaults(kind: str, obj: Obj, ids: Ids, *, creating: bool) -> None:
    spec = obj.get("spec")
    if kind == "Pod":
        if creating:
            admit_pod(obj, ids)
        elif isinstance(spec, dict):
            pod_spec(spec)
    elif kind == "Deployment":
        spec = _fill(
            obj.setdefault("spec", {}), replicas=1, revisionHistoryLimit=10, progressDeadlineSeconds=600
        )
        _rolling(spec, "strategy", maxSurge="25%", maxUnavailable="25%")
        _template(obj)
    elif kind == "ReplicaSet":
        obj.setdefault("spec", {}).setdefault("replicas", 1)
        _template(obj)
    elif kind == "DaemonSet":
        spec = _fill(obj.setdefault("spec", {}), revisionHistoryLimit=10)
        _rolling(spec, "updateStrategy", maxUnavailable=1, maxSurge=0)
        _template(obj)
    elif kind == "StatefulSet":
        spec = _fill(
            obj.setdefault("spec", {}),
            replicas=1,
            podManagementPolicy="OrderedReady",
            revisionHistoryLimit=10,
        )
        _rolling(spec, "updateStrategy", partition=0)
        spec.setdefault(
            "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
        )
        _template(obj)
    elif kind == "Job":
        _fill(obj.setdefault("spec", {}), backoffLimit=6, completions=1, parallelism=1)
        _template(obj)
    elif kind == "CronJob":
        spec = _fill(
            obj.setdefault("spec", {}),
            concurrencyPolicy="Allow",
            suspend=False,
            successfulJobsHistoryLimit=3,
            failedJobsHistoryLimit=1,
        )
        job = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
        pod_spec(job.setdefault("template", {}).setdefault("spec", {}))
    elif kind == "Service":
        spec = _fill(obj.setdefault("spec", {}), type="ClusterIP", sessionAffinity="None")
        if creating and spec.get("clusterIP") in (None, ""):
            ip = ids.service_ip()
            spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip]
        _fill(spec, ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack", internalTrafficPolicy="Cluster")
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        if creating:
            obj["status"] = {"loadBalancer": {}}
    elif kind == "Namespace":
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        if creating:
            obj["status"] = {"phase": "Active"}
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")
    elif kind == "PodDisruptionBudget" and creating:
        obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    elif kind == "CustomResourceDefinition" and creating:
        # The API server records the storage version as stored, and accepts the names asked for.
        spec = obj.get("spec") or {}
        storage = [str(v.get("name")) for v in spec.get("versions") or [] if v.get("storage")]
        obj["status"] = {
            "storedVersions": storage,
            "acceptedNames": dict(spec.get("names") or {}),
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
        }
    elif kind == "PersistentVolumeClaim" and creating:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
