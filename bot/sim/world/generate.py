"""The `large` generator: a settled cluster at Kubernetes' scale envelope, built from numbers.

Objects are written straight into the store (no controllers, no events, no history) in the state
the controllers would have left them: nodes Ready, every pod Running and Ready on its node,
ReplicaSet/Deployment/DaemonSet statuses and PDB budgets that agree with the pods. Pods are shaped
like real ones — two containers (the app and an Istio sidecar), probes, resources, environment,
projected token volume, five conditions, container statuses — and padded to `pod_bytes` of JSON
(about 5 KB, as measured on real clusters). They are generated lazily and serialized one at a
time, so building 150,000 of them never holds 150,000 dicts.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from bot.sim.apiserver.api import Api
from bot.sim.apiserver.clock import rfc3339, rfc3339_micro
from bot.sim.apiserver.defaults import pod_spec
from bot.sim.apiserver.objects import parse_quantity, template_hash
from bot.sim.apiserver.resources import KINDS_BY_KEY
from bot.sim.apiserver.store import dumps
from bot.sim.controllers.kubelet import image_id
from bot.sim.controllers.scheduler import Scheduler
from bot.sim.world.cloud import Cloud, NodeGroupSpec

Obj = dict[str, Any]

TEAMS = ("payments", "search", "identity", "catalog", "checkout", "growth", "platform", "data", "ml", "ads")


class Generator:
    def __init__(self, api: Api, cloud: Cloud, scheduler: Scheduler, seed: int, spec: Obj) -> None:
        self.api = api
        self.cloud = cloud
        self.scheduler = scheduler
        self.nodes = int(spec.get("nodes", 5000))
        self.pods = int(spec.get("pods", 150000))
        self.groups = int(spec.get("node_groups", 10))
        self.namespaces = int(spec.get("namespaces", 300))
        self.deployments = int(spec.get("deployments", 3500))
        self.pod_bytes = int(spec.get("pod_bytes", 5000))
        self.daemonsets = [str(d) for d in spec.get("daemonsets", ["kube-proxy", "aws-node"])]
        self.pdb_every = int(spec.get("pdb_every", 4))
        self.rng = random.Random(seed)
        self.now = api.clock.now()
        self.node_names: list[str] = []
        self.node_ips: dict[str, str] = {}

    def _meta(self, name: str, namespace: str | None, created: float, **extra: Any) -> Obj:
        m: Obj = {"name": name}
        if namespace is not None:
            m["namespace"] = namespace
        m["uid"] = self.api.ids.uid()
        m.update(extra)
        m["creationTimestamp"] = rfc3339(created)
        return m

    def run(self) -> None:
        store = self.api.store
        cloud = self.cloud
        per_group = max(1, self.nodes // self.groups)
        nodes: list[Obj] = []
        for g in range(self.groups):
            count = per_group if g < self.groups - 1 else self.nodes - per_group * (self.groups - 1)
            group = NodeGroupSpec(
                name=f"ng-{g + 1:02d}",
                count=count,
                version=self.api.catalog.version,
                capacity={"cpu": "16", "memory": "64Gi", "pods": "110"},
                instance_type="m5.4xlarge",
            )
            cloud.groups[group.name] = group
            for _ in range(count):
                node = cloud.node_object(group, ready=True, now=self.now)
                created = self.now - self.rng.uniform(86400, 30 * 86400)
                node["metadata"] = {
                    **self._meta(node["metadata"]["name"], None, created),
                    **{k: v for k, v in node["metadata"].items() if k != "name"},
                }
                self.node_names.append(node["metadata"]["name"])
                self.node_ips[node["metadata"]["name"]] = node["status"]["addresses"][0]["address"]
                nodes.append(node)
        leases = [
            {
                "metadata": {
                    **self._meta(n["metadata"]["name"], "kube-node-lease", self.now),
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": n["metadata"]["name"],
                            "uid": n["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {
                    "holderIdentity": n["metadata"]["name"],
                    "leaseDurationSeconds": 40,
                    "renewTime": rfc3339_micro(self.now),
                },
            }
            for n in nodes
        ]
        store.load(KINDS_BY_KEY["nodes"], nodes)
        store.load(KINDS_BY_KEY["leases.coordination.k8s.io"], leases)
        del nodes, leases
        namespaces = [f"{TEAMS[i % len(TEAMS)]}-{i:03d}" for i in range(self.namespaces)]
        self.api.apply_manifests(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces]
        )
        ds_objs, rs_objs, deploy_objs, pdb_objs = [], [], [], []
        plans: list[tuple[Obj, Obj, int, str]] = []  # (owner, template spec, replicas, kind)
        for name in self.daemonsets:
            ds, template = self._daemonset(name)
            ds_objs.append(ds)
            plans.append((ds, template, len(self.node_names), "DaemonSet"))
        remaining = max(0, self.pods - len(self.daemonsets) * len(self.node_names))
        base, extra = divmod(remaining, max(1, self.deployments))
        for i in range(self.deployments):
            replicas = base + (1 if i < extra else 0)
            ns = namespaces[i % len(namespaces)]
            d, rs, template = self._deployment(f"svc-{i:04d}", ns, replicas)
            deploy_objs.append(d)
            rs_objs.append(rs)
            plans.append((rs, template, replicas, "ReplicaSet"))
            if self.pdb_every and i % self.pdb_every == 0:
                pdb_objs.append(self._pdb(d, replicas))
        store.load(KINDS_BY_KEY["daemonsets.apps"], ds_objs)
        store.load(KINDS_BY_KEY["deployments.apps"], deploy_objs)
        store.load(KINDS_BY_KEY["replicasets.apps"], rs_objs)
        store.load(KINDS_BY_KEY["poddisruptionbudgets.policy"], pdb_objs)
        store.load(KINDS_BY_KEY["pods"], self._pods(plans))

    # ---- workloads ------------------------------------------------------------------------------

    def _containers(self, app: str, image: str) -> list[Obj]:
        env = [
            {"name": "APP_NAME", "value": app},
            {"name": "LOG_LEVEL", "value": "info"},
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
        ]
        probe: Obj = {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        }
        app_c = {
            "name": "app",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": env,
            "resources": {
                "limits": {"cpu": "500m", "memory": "512Mi"},
                "requests": {"cpu": "100m", "memory": "256Mi"},
            },
            "readinessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/ready"}},
            "volumeMounts": [
                {
                    "name": "kube-api-access",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": True,
                }
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        proxy = {
            "name": "istio-proxy",
            "image": "docker.io/istio/proxyv2:1.19.3",
            "imagePullPolicy": "IfNotPresent",
            "args": [
                "proxy",
                "sidecar",
                "--domain",
                "$(POD_NAMESPACE).svc.cluster.local",
                "--proxyLogLevel=warning",
            ],
            "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
            "env": [
                {"name": "PILOT_CERT_PROVIDER", "value": "istiod"},
                {"name": "CA_ADDR", "value": "istiod.istio-system.svc:15012"},
                {"name": "ISTIO_META_CLUSTER_ID", "value": "Kubernetes"},
                {"name": "ISTIO_META_WORKLOAD_NAME", "value": app},
            ],
            "resources": {
                "limits": {"cpu": "2", "memory": "1Gi"},
                "requests": {"cpu": "10m", "memory": "40Mi"},
            },
            "volumeMounts": [
                {"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
                {"name": "istio-data", "mountPath": "/var/lib/istio/data"},
            ],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsUser": 1337,
                "runAsGroup": 1337,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
        return [app_c, proxy]

    def _pod_spec(self, app: str, image: str) -> Obj:
        return {
            "volumes": [
                {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
                {"name": "istio-data", "emptyDir": {}},
                {
                    "name": "kube-api-access",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                        ],
                    },
                },
            ],
            "containers": self._containers(app, image),
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": app,
            "serviceAccount": app,
            "securityContext": {"fsGroup": 1337},
            "schedulerName": "default-scheduler",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
        }

    def _deployment(self, name: str, ns: str, replicas: int) -> tuple[Obj, Obj, Obj]:
        team = ns.split("-")[0]
        image = f"123456789012.dkr.ecr.ap-northeast-1.amazonaws.com/{team}/{name}:v{self.rng.randint(1, 40)}.{self.rng.randint(0, 9)}.0"
        labels = {"app": name, "team": team, "version": "v1"}
        template: Obj = {
            "metadata": {
                "labels": dict(labels),
                "annotations": {
                    "prometheus.io/scrape": "true",
                    "prometheus.io/port": "15090",
                    "sidecar.istio.io/inject": "true",
                },
            },
            "spec": self._pod_spec(name, image),
        }
        pod_hash = template_hash(template)
        created = self.now - self.rng.uniform(3600, 20 * 86400)
        d = {
            "metadata": self._meta(
                name,
                ns,
                created,
                generation=1,
                labels=dict(labels),
                annotations={"deployment.kubernetes.io/revision": "1"},
            ),
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": template,
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                },
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600,
            },
            "status": {
                "observedGeneration": 1,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "terminatingReplicas": 0,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True",
                        "lastUpdateTime": rfc3339(created),
                        "lastTransitionTime": rfc3339(created),
                        "reason": "MinimumReplicasAvailable",
                        "message": "Deployment has minimum availability.",
                    },
                    {
                        "type": "Progressing",
                        "status": "True",
                        "lastUpdateTime": rfc3339(created),
                        "lastTransitionTime": rfc3339(created),
                        "reason": "NewReplicaSetAvailable",
                        "message": f'ReplicaSet "{name}-{pod_hash}" has successfully progressed.',
                    },
                ],
            },
        }
        rs_template = copy.deepcopy(template)
        rs_template["metadata"]["labels"]["pod-template-hash"] = pod_hash
        rs = {
            "metadata": self._meta(
                f"{name}-{pod_hash}",
                ns,
                created,
                generation=1,
                labels={**labels, "pod-template-hash": pod_hash},
                annotations={
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                    "deployment.kubernetes.io/max-replicas": str(replicas + (replicas + 3) // 4),
                    "deployment.kubernetes.io/revision": "1",
                },
                ownerReferences=[
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": name,
                        "uid": d["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            ),
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name, "pod-template-hash": pod_hash}},
                "template": rs_template,
            },
            "status": {
                "replicas": replicas,
                "fullyLabeledReplicas": replicas,
                "readyReplicas": replicas,
                "availableReplicas": replicas,
                "observedGeneration": 1,
                "terminatingReplicas": 0,
            },
        }
        return d, rs, rs_template

    def _daemonset(self, name: str) -> tuple[Obj, Obj]:
        image = {
            "kube-proxy": "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/eks/kube-proxy:v1.29.0-minimal-eksbuild.1",
            "aws-node": "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/amazon-k8s-cni:v1.16.0-eksbuild.1",
        }.get(name, f"registry.k8s.io/{name}:v1.0.0")
        labels = {"k8s-app": name}
        template: Obj = {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "containers": [
                    {
                        "name": name,
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "resources": {"requests": {"cpu": "25m", "memory": "64Mi"}},
                        "securityContext": {"privileged": True},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                    }
                ],
                "hostNetwork": True,
                "priorityClassName": "system-node-critical",
                "restartPolicy": "Always",
                "serviceAccountName": name,
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "schedulerName": "default-scheduler",
                "tolerations": [{"operator": "Exists"}],
            },
        }
        # As the API server stores it: a template it would default on the DaemonSet's first write
        # (its controller writes status) would change hash there and roll the set over every node.
        pod_spec(template["spec"])
        current = template_hash(template)
        n = len(self.node_names)
        created = self.now - 40 * 86400
        ds = {
            "metadata": self._meta(
                name,
                "kube-system",
                created,
                generation=1,
                labels=dict(labels),
                annotations={"deprecated.daemonset.template.generation": "1"},
            ),
            "spec": {
                "selector": {"matchLabels": labels},
                "template": template,
                "revisionHistoryLimit": 10,
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0},
                },
            },
            "status": {
                "currentNumberScheduled": n,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": n,
                "numberReady": n,
                "observedGeneration": 1,
                "updatedNumberScheduled": n,
                "numberAvailable": n,
            },
        }
        tmpl = copy.deepcopy(template)
        tmpl["metadata"]["labels"].update(
            {"controller-revision-hash": current, "pod-template-generation": "1"}
        )
        return ds, tmpl

    def _pdb(self, d: Obj, replicas: int) -> Obj:
        created = self.now - 86400
        return {
            "metadata": self._meta(d["metadata"]["name"], d["metadata"]["namespace"], created, generation=1),
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": d["metadata"]["name"]}}},
            "status": {
                "observedGeneration": 1,
                "disruptionsAllowed": 1 if replicas > 1 else 0,
                "currentHealthy": replicas,
                "desiredHealthy": max(0, replicas - 1),
                "expectedPods": replicas,
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": "True" if replicas > 1 else "False",
                        "observedGeneration": 1,
                        "lastTransitionTime": rfc3339(created),
                        "reason": "SufficientPods" if replicas > 1 else "InsufficientPods",
                        "message": "",
                    }
                ],
            },
        }

    # ---- pods -----------------------------------------------------------------------------------

    def _pods(self, plans: list[tuple[Obj, Obj, int, str]]) -> Iterator[Obj]:
        ids = self.api.ids
        scheduler = self.scheduler
        cursor = 0
        used: set[tuple[str, str]] = set()
        for owner, template, replicas, kind in plans:
            om = owner["metadata"]
            ns = om["namespace"]
            spec_base = template["spec"]
            daemon = kind == "DaemonSet"
            ref = [
                {
                    "apiVersion": "apps/v1",
                    "kind": kind,
                    "name": om["name"],
                    "uid": om["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
            containers = spec_base["containers"]
            cpu = sum(_cores(c) for c in containers)
            mem = sum(_bytes(c) for c in containers)
            padding: list[Obj] | None = None
            created = (self.now - self.rng.uniform(600, 5 * 86400)) if not daemon else (self.now - 30 * 86400)
            for i in range(replicas):
                node = self.node_names[i] if daemon else self.node_names[cursor % len(self.node_names)]
                if not daemon:
                    cursor += 1
                name = f"{om['name']}-{ids.suffix(5)}"
                while (ns, name) in used:
                    # Random suffixes collide now and then at this scale; the API server would retry too.
                    name = f"{om['name']}-{ids.suffix(5)}"
                used.add((ns, name))
                uid = ids.uid()
                pod = self._running_pod(template, om, name, uid, node, daemon, created, ref)
                spec = pod["spec"]
                if padding is None:
                    # Size the filler once per workload so every pod lands near pod_bytes of JSON.
                    missing = self.pod_bytes - len(dumps(copy.deepcopy(pod)))
                    padding = _filler(missing)
                if padding:
                    pod["spec"] = {
                        **spec,
                        "containers": [
                            {**containers[0], "env": containers[0].get("env", []) + padding},
                            *containers[1:],
                        ],
                    }
                scheduler.remember_requests(uid, cpu, mem)
                yield pod

    def _running_pod(
        self,
        template: Obj,
        om: Obj,
        name: str,
        uid: str,
        node: str,
        daemon: bool,
        created: float,
        ref: list[Obj],
    ) -> Obj:
        """One pod of a workload, Running and Ready on `node` since `created`, as its controller and
        the kubelet would have written it (a Deployment's or StatefulSet's with Istio's sidecar)."""
        ids = self.api.ids
        start = rfc3339(created)
        labels = template["metadata"]["labels"]
        annotations = dict(template["metadata"].get("annotations") or {})
        if not daemon:
            annotations["sidecar.istio.io/status"] = _ISTIO_STATUS
        spec = dict(template["spec"])
        spec["nodeName"] = node
        if daemon:
            spec["affinity"] = _on_node(node)
        host_ip = self.node_ips[node]
        pod_ip = host_ip if daemon else ids.pod_ip()
        return {
            "metadata": {
                "name": name,
                "generateName": f"{om['name']}-",
                "namespace": om["namespace"],
                "uid": uid,
                "generation": 1,
                "creationTimestamp": start,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": ref,
            },
            "spec": spec,
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": start}
                    for t in (
                        "PodReadyToStartContainers",
                        "Initialized",
                        "Ready",
                        "ContainersReady",
                        "PodScheduled",
                    )
                ],
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": start,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "state": {"running": {"startedAt": start}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": c["image"],
                        "imageID": image_id(c["image"]),
                        "containerID": f"containerd://{ids.hex(64)}",
                        "started": True,
                    }
                    for c in spec["containers"]
                ],
                "qosClass": "Burstable",
            },
        }


# The status Istio's injector writes on the pods it gave a sidecar.
_ISTIO_STATUS = (
    '{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["workload-socket",'
    '"credential-socket","workload-certs","istio-envoy","istio-data","istio-podinfo","istio-token",'
    '"istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}'
)


def _on_node(node: str) -> Obj:
    """The node affinity the DaemonSet controller gives each of its pods: that one node, by name."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }


def _cores(container: Obj) -> float:
    return parse_quantity(((container.get("resources") or {}).get("requests") or {}).get("cpu"))


def _bytes(container: Obj) -> float:
    return parse_quantity(((container.get("resources") or {}).get("requests") or {}).get("memory"))


def _filler(missing: int) -> list[Obj]:
    """Environment variables worth about `missing` bytes of JSON (feature flags, as real apps carry)."""
    out: list[Obj] = []
    i = 0
    while missing > 60:
        value = "enabled;rollout=" + "x" * max(0, min(120, missing - 60))
        item = {"name": f"FEATURE_FLAG_{i:02d}", "value": value}
        out.append(item)
        missing -= len(dumps(item)) + 1
        i += 1
    return out
