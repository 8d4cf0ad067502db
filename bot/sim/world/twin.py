"""A twin of a real cluster: a scenario written from one of the bot's stored snapshots.

The snapshot is plain data (the bot hands it over as decoded JSON; the simulator imports nothing of
the bot). What it records, the twin keeps: the node groups (size, kubelet version, instance type,
allocatable capacity, taints, the labels all their nodes share, each node's zone), the namespaces,
the APIs served, the Deployments, StatefulSets and DaemonSets with the pod templates the snapshot
recorded (selector, labels, annotations, containers, placement, drain-relevant volumes), an
injector per workload for what a webhook added to its pods (sidecars, init containers, volumes),
its pods' nodes (`placements`) and states (faults: not ready, crash-looping, failing to pull,
waiting for an IP), the disruption budgets (their healthy minimum), the Services, webhooks, CRDs and
certificates the checks read, the workloads that ran on Fargate (a profile each), and what the
removed-API and log-reading checks read: the clients of old APIs the apiserver metric counted
(`callers`), the Helm releases and the objects applied on an old API version, and the log lines the
rules match (container behaviours that write them). A snapshot
from before templates were recorded gives a twin made up as the header says: labels `app: NAME`,
a nodeSelector on the group most of the workload's pods ran on, the sidecars in the template.
`upgrade-bot sim fidelity` measures how true a twin is.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import yaml

from bot.sim.apiserver.resources import GA_VERSIONS, KINDS, KNOWN_DEPRECATED_BY_GV
from bot.sim.controllers.nodes import NODE_GROUP_LABEL, group_label
from bot.sim.world.cloud import FIRST_HOST, platform_nodes

Obj = dict[str, Any]
_BASE = {"default", "kube-system", "kube-public", "kube-node-lease"}
#: A version in a gitVersion or a kubelet's version, with GKE's build when it has one
#: (`v1.29.8-gke.1031000`: the twin serves it as GKE does; EKS's `-eks-…` is the platform's own).
_VERSION = re.compile(r"v?(\d+\.\d+\.\d+(?:-gke\.\d+)?)")
_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
#: Images of containers a webhook injects: seen in the pods, not in the workload's template.
_SIDECARS = ("proxyv2", "vault", "envoy", "linkerd")


def _pods(snap: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    fields = snap.get("pod_fields") or []
    for row in snap.get("pods") or []:
        yield dict(zip(fields, row, strict=False))


def _fargate(node: Mapping[str, Any]) -> bool:
    return node.get("group") == "fargate" or str(node.get("name", "")).startswith("fargate-")


def _container_name(image: str, taken: set[str]) -> str:
    base = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    name = re.sub(r"[^a-z0-9-]", "-", base.lower()).strip("-")[:50] or "main"
    if "proxyv2" in image:
        name = "istio-proxy"
    candidate, i = name, 1
    while candidate in taken:
        i += 1
        candidate = f"{name}-{i}"
    taken.add(candidate)
    return candidate


def _taint(text: str) -> Obj:
    key_value, _, effect = text.rpartition(":")
    key, _, value = key_value.partition("=")
    taint: Obj = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _own_label(key: str) -> bool:
    """A node label the simulator writes itself (hostname, zone, instance type, its group's)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return (
        domain.endswith(("kubernetes.io", "k8s.io", "amazonaws.com"))
        or domain.startswith(("topology.", "failure-domain."))
        or domain == "alpha.eksctl.io"
    )


#: EKS never runs a DaemonSet's pods on a Fargate node (it is a VM of one pod): a twin's DaemonSets
#: keep away from them whatever their template says.
_NOT_FARGATE = {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate"]}


def _off_fargate(affinity: Mapping[str, Any]) -> Obj:
    out: Obj = json.loads(json.dumps(affinity))
    node = out.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    for term in terms:
        exprs = term.setdefault("matchExpressions", [])
        if _NOT_FARGATE not in exprs:
            exprs.append(dict(_NOT_FARGATE))
    return out


def _containers(pairs: list[tuple[str, str]], template: list[Obj]) -> list[Obj]:
    """The pod's containers as the snapshot saw them in the pods (names and images, sidecars that a
    webhook injected included), with what the template says of each (requests, readiness probe)."""
    by_name = {str(c.get("name", "")): c for c in template}
    out: list[Obj] = []
    for name, image in pairs:
        c: Obj = {"name": name, "image": image}
        known = by_name.get(name) or {}
        if known.get("resources"):
            c["resources"] = known["resources"]
        if known.get("env"):
            c["env"] = [dict(e) for e in known["env"]]
        if known.get("readiness_probe"):
            # Only that one is set: the checks read whether, not how (the sim's kubelet ignores it).
            c["readinessProbe"] = {"tcpSocket": {"port": 1}}
        out.append(c)
    return out


def _states(pods: list[dict[str, Any]], ns: str, wname: str) -> list[Obj]:
    """Faults that put the workload's containers back in the states the snapshot saw them in: not
    ready, crash-looping, failing to pull, waiting for an IP. A state every pod of the workload had
    matches them all; one that some pods had matches those on the same node."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for pod in pods:
        for entry in str(pod.get("unready") or "").split(","):
            if entry:
                container, _, reason = entry.partition(":")
                seen[container, reason].add(str(pod.get("node", "")))
        if str(pod.get("status", "")) == "ContainerCreating" and pod.get("node"):
            seen["", "ContainerCreating"].add(str(pod["node"]))
    faults: list[Obj] = []
    for (container, reason), nodes in sorted(seen.items()):
        kind = _FAULT_OF.get(reason)
        if kind is None:
            continue
        base: Obj = {"namespace": ns, "name_prefix": f"{wname}-"}
        if container:
            base["container"] = container
        everywhere = len(nodes) == len(pods)
        for node in [""] if everywhere else sorted(n for n in nodes if n):
            match = dict(base, **({"node": node} if node else {}))
            faults.append({"type": kind, "match": match})
    return faults


#: The fault that gives a container the state (its reason) the snapshot saw.
_FAULT_OF = {
    "": "not_ready",
    "Running": "not_ready",
    "CrashLoopBackOff": "crash_loop",
    "Error": "crash_loop",
    "OOMKilled": "crash_loop",
    "ImagePullBackOff": "image_pull_error",
    "ErrImagePull": "image_pull_error",
    "ContainerCreating": "no_ip",
}


def _node_groups(snap: Mapping[str, Any]) -> tuple[list[Obj], dict[str, str], set[str], bool, str]:
    version_text = str((snap.get("version") or {}).get("gitVersion", ""))
    found = _VERSION.search(version_text)
    version = found.group(1) if found else "1.29.4"
    groups: dict[str, Obj] = {}
    group_of: dict[str, str] = {}
    fargate_nodes: set[str] = set()
    eks = "eks" in version_text
    common: dict[str, dict[str, str]] = {}
    for node in snap.get("nodes") or []:
        node_name = str(node.get("name", ""))
        if _fargate(node):
            fargate_nodes.add(node_name)
            eks = True
            continue
        group = str(node.get("group") or "(none)")
        if group == "(none)":
            group = "ungrouped"
        group_of[node_name] = group
        spec = groups.setdefault(
            group, {"name": group, "count": 0, "_versions": Counter(), "_first": (1 << 16,)}
        )
        spec["count"] += 1
        spec["_first"] = min(spec["_first"], _node_order(node))
        kubelet = _VERSION.search(str(node.get("kubelet", "")))
        if kubelet:
            spec["_versions"][kubelet.group(1)] += 1
        if node.get("instance_type"):
            spec.setdefault("instance_type", str(node["instance_type"]))
        if node.get("allocatable"):
            spec.setdefault("capacity", {k: str(v) for k, v in node["allocatable"].items()})
        if node.get("taints"):
            spec.setdefault("taints", [_taint(str(t)) for t in node["taints"]])
        if "eks" in str(node.get("kubelet", "")):
            eks = True
        if "labels" in node:
            labels = {str(k): str(v) for k, v in (node.get("labels") or {}).items()}
            group_label = str(node.get("group_label") or "")
            if group_label and group_label != NODE_GROUP_LABEL:
                labels.pop(group_label, None)
                spec.setdefault("_group_label", {group_label: group})
            mine = {k: v for k, v in labels.items() if not _own_label(k)}
            if group in common:
                common[group] = {k: v for k, v in common[group].items() if mine.get(k) == v}
            else:
                common[group] = mine
    node_groups: list[Obj] = []
    # In the order their nodes were made (by address), which the sim makes them in again: the
    # snapshot lists nodes by name, and `ip-10-0-10-…` sorts before `ip-10-0-2-…` (a cluster of
    # more than 2,500 nodes would otherwise give its groups each other's addresses and zones).
    for name, spec in sorted(groups.items(), key=lambda item: item[1]["_first"]):
        del spec["_first"]
        versions: Counter[str] = spec.pop("_versions")
        if versions:
            most = versions.most_common(1)[0][0]
            if most != version:
                spec["version"] = most
        # Labels every node of the group had, that the sim does not write itself: those a
        # workload's nodeSelector or affinity may read (a group named by another label keeps it).
        labels = {**spec.pop("_group_label", {}), **common.get(name, {})}
        if labels:
            spec["labels"] = dict(sorted(labels.items()))
        node_groups.append(spec)
    return node_groups, group_of, fargate_nodes, eks, version


_Key = tuple[str, str, str]


def scenario_from_snapshot(snap: Mapping[str, Any], *, name: str | None = None) -> Obj:
    """The scenario (as the data a scenario file holds) of the cluster the snapshot recorded."""
    node_groups, group_of, fargate_nodes, eks, version = _node_groups(snap)
    placement, pods_of, on_fargate = _workload_pods(snap, group_of, fargate_nodes)
    taints_of = {g["name"]: g.get("taints") or [] for g in node_groups}
    # A GKE cluster's /version names GKE's build (`v1.29.8-gke.1031000`): its twin serves it so.
    # An AKS cluster's is plain (`v1.29.7`): its nodes' agent-pool labels say it is AKS.
    platform = "eks" if eks else "gke" if "-gke." in version else "aks" if _on_aks(snap) else "generic"
    made = _Workloads(
        pods_of,
        placement,
        on_fargate,
        group_of,
        taints_of,
        eks and bool(fargate_nodes),
        group_label(platform),
    )
    for w in snap.get("workloads") or []:
        made.add(w)
    objects = made.objects
    objects.extend(_budgets(snap, made.by_namespace, made.selectors))
    objects.extend(_kept_objects(snap))
    uses = snap.get("api_uses") or {}
    _applied(objects, uses.get("applied") or [])
    objects.extend({"helm_release": dict(release)} for release in uses.get("helm") or [])
    label = str(snap.get("label", ""))
    cluster = str(snap.get("cluster", ""))
    scenario: Obj = {
        "name": name or f"{cluster or 'cluster'}-twin",
        "description": (
            f"Twin of {cluster} from snapshot `{label}` taken {snap.get('taken_at', '')}: "
            f"{sum(g['count'] for g in node_groups)} nodes in {len(node_groups)} group(s), "
            f"{sum(1 for o in objects if o.get('kind') in _KINDS)} workloads."
        ),
        "cluster": {
            "version": version,
            "platform": platform,
            **_served(snap),
            **_placed(snap, node_groups, platform),
            "warmup": "2m",
        },
        # Served as it was snapshotted: its workloads written Running, not started one by one.
        "settled": True,
        "node_groups": node_groups,
    }
    if made.fargate_profiles:
        scenario["fargate_profiles"] = made.fargate_profiles
    scenario["namespaces"] = [str(n) for n in snap.get("namespaces") or [] if str(n) not in _BASE]
    if made.injectors:
        scenario["injectors"] = made.injectors
    if made.faults:
        scenario["faults"] = made.faults
    if made.placements:
        scenario["placements"] = made.placements
    restarts = _restarts(pods_of, group_of)
    if restarts:
        scenario["restarts"] = restarts
    logged = _logged(snap.get("logs") or [])
    if logged:
        scenario["containers"] = logged
    callers = _callers(uses.get("calls") or [])
    if callers:
        scenario["callers"] = callers
    aws = _aws(snap.get("provider") or {}, str((snap.get("version") or {}).get("gitVersion", "")))
    if aws is not None:
        # The cluster's EKS side as the snapshot read it, served on the twin's AWS facade.
        scenario["cluster"]["platform"] = "eks"
        region = str((snap.get("provider") or {}).get("region") or "")
        if region and "region" not in scenario["cluster"]:
            scenario["cluster"]["region"] = region
        scenario["aws"] = aws
    scenario["objects"] = objects
    return scenario


def _workload_pods(
    snap: Mapping[str, Any], group_of: Mapping[str, str], fargate_nodes: set[str]
) -> tuple[dict[_Key, Counter[str]], dict[_Key, list[dict[str, Any]]], set[_Key]]:
    """Where each workload's pods ran (a count by node group, or on Fargate), and the pods themselves
    (their containers, their states)."""
    placement: dict[_Key, Counter[str]] = defaultdict(Counter)
    pods_of: dict[_Key, list[dict[str, Any]]] = defaultdict(list)
    on_fargate: set[_Key] = set()
    for pod in _pods(snap):
        key = (str(pod.get("workload_kind", "")), str(pod.get("namespace", "")), str(pod.get("workload", "")))
        if key[0] not in _KINDS:
            continue
        node = str(pod.get("node", ""))
        if node in fargate_nodes:
            on_fargate.add(key)
        elif node in group_of:
            placement[key][group_of[node]] += 1
        pods_of[key].append(pod)
    return placement, pods_of, on_fargate


class _Workloads:
    """The twin's workloads as they are read one by one from the snapshot: their objects, and what
    the scenario says beside them (Fargate profiles, recorded faults and injectors, placements)."""

    def __init__(
        self,
        pods_of: Mapping[_Key, list[dict[str, Any]]],
        placement: Mapping[_Key, Counter[str]],
        on_fargate: set[_Key],
        group_of: Mapping[str, str],
        taints_of: Mapping[str, Any],
        fargate_cluster: bool,
        group_label: str = NODE_GROUP_LABEL,
    ) -> None:
        # Where the snapshot saw the pods (from `_workload_pods`) and what the node groups offer.
        self._pods_of, self._placement, self._on_fargate = pods_of, placement, on_fargate
        self._group_of, self._taints_of, self._fargate_cluster = group_of, taints_of, fargate_cluster
        #: The label the twin's nodes name their group with (its platform's).
        self._group_label = group_label
        self.objects: list[Obj] = []
        self.fargate_profiles: list[Obj] = []
        self.faults: list[Obj] = []
        self.injectors: list[Obj] = []
        self.placements: dict[str, list[str]] = {}
        self.by_namespace: dict[str, list[str]] = defaultdict(list)
        self.selectors: dict[tuple[str, str], Obj] = {}

    def add(self, w: Mapping[str, Any]) -> None:
        """One recorded workload: its pod as recorded (its template), or made up from its pods."""
        kind, ns, wname = str(w.get("kind", "")), str(w.get("namespace", "")), str(w.get("name", ""))
        if kind not in _KINDS or not wname:
            return
        key = (kind, ns, wname)
        self.by_namespace[ns].append(wname)
        template: Obj | None = w.get("template")
        pods = self._pods_of.get(key, [])
        if template is not None:
            pod_spec, labels, selector, injector = _recorded_pod(
                kind, ns, wname, template, pods, self._fargate_cluster
            )
            if injector is not None:
                self.injectors.append(injector)
            self.faults.extend(_states(pods, ns, wname))
            if kind != "DaemonSet":
                # StatefulSet pods by ordinal: the settled build places them in that order.
                ordered = (
                    sorted(pods, key=lambda p: _ordinal(str(p.get("name", ""))))
                    if kind == "StatefulSet"
                    else pods
                )
                nodes = [str(p["node"]) for p in ordered if p.get("node") in self._group_of]
                if nodes:
                    self.placements[f"{kind}/{ns}/{wname}"] = nodes
        else:
            pod_spec, labels, selector = _made_up_pod(
                kind,
                w,
                pods,
                key in self._on_fargate,
                self._placement.get(key),
                self._taints_of,
                self._group_label,
            )
        self.selectors[ns, wname] = selector
        if key in self._on_fargate and kind != "DaemonSet":
            self.fargate_profiles.append(
                {"name": wname, "namespace": ns, "labels": dict(selector.get("matchLabels") or labels)}
            )
        meta: Obj = {"labels": dict(labels)}
        if template is not None and template.get("annotations"):
            meta["annotations"] = dict(template["annotations"])
        body: Obj = {"selector": selector, "template": {"metadata": meta, "spec": pod_spec}}
        if kind != "DaemonSet":
            body["replicas"] = int(w.get("desired", 1) or 0)
        if kind == "StatefulSet":
            body["serviceName"] = wname
        self.objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": {"name": wname, "namespace": ns, "labels": dict(labels)},
                "spec": body,
            }
        )


def _budgets(
    snap: Mapping[str, Any], by_namespace: Mapping[str, list[str]], selectors: Mapping[tuple[str, str], Obj]
) -> list[Obj]:
    """The snapshot's disruption budgets, each over the workload it guards."""
    budgets: list[Obj] = []
    for pdb in snap.get("pdbs") or []:
        ns, pname = str(pdb.get("namespace", "")), str(pdb.get("name", ""))
        names = by_namespace.get(ns, [])
        # The snapshot keeps no selector: the budget guards the workload of its name, or the only one.
        target = pname if pname in names else (names[0] if len(names) == 1 else None)
        if target is None:
            continue
        budgets.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": pname, "namespace": ns},
                "spec": {
                    "minAvailable": int(pdb.get("desired_healthy", 0) or 0),
                    "selector": json.loads(json.dumps(selectors[ns, target])),
                },
            }
        )
    return budgets


def _aws(provider: Mapping[str, Any], git_version: str) -> Obj | None:
    """The scenario's `aws:` from the snapshot's `provider` section (`bot/core/snapshots/provider.py`):
    the cluster's name, account and platform version, its subnets with their free addresses, the
    add-ons and the versions EKS offered of each, the upgrade insights, each node group's launch
    template versions, health issues and subnets, and the Auto Scaling groups no node group owns.
    None when the snapshot kept no EKS side (no provider, or another cloud's)."""
    if provider.get("kind") != "eks" or not provider.get("captured"):
        return None
    region = str(provider.get("region") or "")

    def zone(name: str) -> str:
        # The sim writes a zone as its region and a letter.
        return name[len(region) :] if region and name.startswith(region) else name[-1:]

    cluster = provider.get("cluster") or {}
    aws: Obj = {"cluster_name": str(provider.get("name") or cluster.get("name") or "")}
    if provider.get("account"):
        aws["account"] = str(provider["account"])
    if cluster.get("platform_version"):
        aws["platform_version"] = str(cluster["platform_version"])
    found = _VERSION.search(git_version)
    if found and cluster.get("version") and found.group(1).startswith(f"{cluster['version']}."):
        aws["patch_versions"] = {str(cluster["version"]): found.group(1)}
    aws["subnets"] = [
        {
            "id": str(s.get("id", "")),
            "zone": zone(str(s.get("zone", ""))),
            "cidr": str(s.get("cidr") or "10.0.0.0/24"),
            "free": int(s.get("free") or 0),
            "use": list(s.get("use") or ["nodes", "pods"]),
        }
        for s in provider.get("subnets") or []
    ]
    addons = []
    for a in provider.get("addons") or []:
        addon: Obj = {"name": str(a.get("name", "")), "version": str(a.get("version", ""))}
        if a.get("status") and a.get("status") != "ACTIVE":
            addon["status"] = str(a["status"])
        if a.get("issues"):
            addon["issues"] = [dict(i) for i in a["issues"]]
        addons.append(addon)
    aws["addons"] = addons
    aws["addon_versions"] = {
        str(name): [
            {
                "version": str(v["version"]),
                "clusters": list(v.get("clusters") or []),
                "default": list(v.get("default") or []),
            }
            for v in versions
        ]
        for name, versions in (provider.get("offered") or {}).items()
    }
    aws["insights"] = [
        {
            k: v
            for k, v in {
                "id": str(i.get("id", "")),
                "name": str(i.get("name", "")),
                "category": str(i.get("category") or "UPGRADE_READINESS"),
                "kubernetes_version": str(i.get("kubernetes_version", "")),
                "status": str(i.get("status", "")),
                "reason": str(i.get("reason", "")),
                "description": str(i.get("description", "")),
                "recommendation": str(i.get("recommendation", "")),
                "resources": [dict(r) for r in i.get("resources") or []],
                "deprecations": [json.loads(json.dumps(d)) for d in i.get("deprecations") or []],
            }.items()
            if v not in ("", [])
        }
        for i in provider.get("insights") or []
    ]
    groups = list(provider.get("node_groups") or [])
    templates = {
        str(g["name"]): {
            "versions": int(lt["latest"]),
            "used": int(lt["version"]),
            **{k: str(lt[k]) for k in ("id", "name") if lt.get(k)},
        }
        for g in groups
        if (lt := g.get("launch_template") or {}).get("latest") is not None
        and str(lt.get("version", "")).isdigit()
    }
    if templates:
        aws["launch_templates"] = templates
    issues = {str(g["name"]): [dict(i) for i in g["issues"]] for g in groups if g.get("issues")}
    if issues:
        aws["nodegroup_issues"] = issues
    subnets = {str(g["name"]): list(g["subnets"]) for g in groups if g.get("subnets")}
    if subnets:
        aws["nodegroup_subnets"] = subnets
    stale = [
        {
            "name": str(a.get("name", "")),
            "instances": int(a.get("instances") or 0),
            "desired": int(a.get("desired") or 0),
            **({"zones": [zone(str(z)) for z in a["zones"]]} if a.get("zones") else {}),
            **({"tags": dict(a["tags"])} if a.get("tags") else {}),
        }
        for a in provider.get("other_asgs") or []
    ]
    if stale:
        aws["stale_asgs"] = stale
    return aws


#: A CRD version's schema, which the snapshot does not keep: anything goes.
_ANY_SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}


def _kept_objects(snap: Mapping[str, Any]) -> list[Obj]:
    """The Services, webhook configurations, CRDs, cert-manager Certificates and Istio root the
    snapshot kept (`projection.project_object`), as manifests."""
    out: list[Obj] = []
    for obj in snap.get("objects") or []:
        manifest: Obj = json.loads(json.dumps(obj))
        if manifest.get("kind") == "CustomResourceDefinition":
            for version in manifest.get("spec", {}).get("versions") or []:
                version.setdefault("schema", _ANY_SCHEMA)
        out.append(manifest)
    return out


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _applied(objects: list[Obj], records: list[Mapping[str, Any]]) -> None:
    """The objects whose last-applied configuration or managedFields named an old API version
    (`core/snapshots/apiuse.applied`): on the twin's own object of that kind and name when it has
    one (a workload, a budget), else as the snapshot kept it."""
    made = {
        (o.get("kind"), o["metadata"].get("namespace", ""), o["metadata"].get("name")): o
        for o in objects
        if "metadata" in o
    }
    for record in records:
        manifest: Obj = json.loads(json.dumps(record.get("manifest") or {}))
        meta = manifest.get("metadata") or {}
        key = (manifest.get("kind"), meta.get("namespace", ""), meta.get("name"))
        target = made.get(key)
        if target is None:
            target = manifest
            objects.append(target)
            made[key] = target
        meta = target.setdefault("metadata", {})
        head = record.get("last_applied")
        if head:
            # What the check reads of it: the apiVersion and kind it was applied with.
            text = json.dumps(
                {**head, "metadata": {k: v for k, v in meta.items() if k in ("name", "namespace")}},
                separators=(",", ":"),
                sort_keys=True,
            )
            meta.setdefault("annotations", {})[_LAST_APPLIED] = text + "\n"
        if record.get("managed_fields"):
            meta["managedFields"] = [
                {**m, "fieldsType": "FieldsV1", "fieldsV1": {}} for m in record["managed_fields"]
            ]


def _logged(records: list[Mapping[str, Any]]) -> list[Obj]:
    """The log lines the snapshot kept (those the log-reading rules match), written by the same
    containers of the twin's pods: of the workload's pods (a Deployment's, a DaemonSet's, whose
    names a controller draws), or of the pod of that name."""
    lines: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for record in records:
        kind, workload = str(record.get("workload_kind") or ""), str(record.get("workload") or "")
        pod = str(record.get("pod") or "")
        prefix = f"{workload}-" if kind in ("Deployment", "DaemonSet") and workload else pod
        key = (str(record.get("namespace") or ""), prefix, str(record.get("container") or ""))
        lines[key].extend(line for line in record.get("lines") or [] if line not in lines[key])
    return [
        {
            "match": {"namespace": ns, "name_prefix": prefix, "container": container},
            "logs": [{"lines": kept}],
        }
        for (ns, prefix, container), kept in sorted(lines.items())
    ]


def _callers(samples: list[Mapping[str, Any]]) -> list[Obj]:
    """A client for each old API the apiserver metric counted a request to: the twin's metric
    counts the same (who called it, and how often, the metric does not say)."""
    out: list[Obj] = []
    for sample in samples:
        group, version = str(sample.get("group") or ""), str(sample.get("version") or "")
        caller: Obj = {"api": f"{group}/{version}" if group else version, "resource": str(sample["resource"])}
        if caller not in out:
            out.append(caller)
    return out


def _ordinal(name: str) -> tuple[int, str]:
    tail = name.rsplit("-", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


def _served(snap: Mapping[str, Any]) -> Obj:
    """The deprecated APIs and the extension kinds the cluster served (those the sim knows)."""
    served = set(snap.get("api_versions") or [])
    out: Obj = {}
    deprecated = sorted(gv for gv in served if gv in KNOWN_DEPRECATED_BY_GV)
    if deprecated:
        out["deprecated_apis"] = deprecated
    custom = sorted(
        k.key
        for k in KINDS
        if k.extension and any(f"{k.group}/{v}" in served for v in GA_VERSIONS.get(k.group, ()))
    )
    if custom:
        out["custom_resources"] = custom
    return out


def _when(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def _on_aks(snap: Mapping[str, Any]) -> bool:
    """Are the snapshot's nodes AKS's? Its agent pools label them (`kubernetes.azure.com/agentpool`,
    `kubernetes.azure.com/cluster`, …)."""
    return any(
        node.get("group_label") == group_label("aks")
        or any(str(k).startswith("kubernetes.azure.com/") for k in node.get("labels") or {})
        for node in snap.get("nodes") or []
    )


def _placed(snap: Mapping[str, Any], node_groups: list[Obj], platform: str) -> Obj:
    """The region the nodes' zones are in, each group's zones in the order its nodes were made
    (the sim draws a node's zone from its group's list by the node's number), and how old the
    cluster looked: its oldest node's age when the snapshot was taken (deadlines run from it).
    A zone is the region, the platform's joiner and one character (`ap-northeast-1a`,
    `westeurope-1`, `europe-west1-b`)."""
    out: Obj = {}
    nodes = [n for n in snap.get("nodes") or [] if not _fargate(n)]
    zones = [str(n.get("zone") or "") for n in nodes]
    joiner = platform_nodes(platform).joiner
    if zones and all(len(z) > 1 + len(joiner) for z in zones) and len({z[:-1] for z in zones}) == 1:
        out["region"] = zones[0][:-1].removesuffix(joiner)
        by_group: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for node in nodes:
            group = str(node.get("group") or "(none)")
            by_group["ungrouped" if group == "(none)" else group].append(node)
        offset = FIRST_HOST
        for spec in node_groups:
            members = sorted(by_group.get(spec["name"], []), key=_node_order)
            count = len(members)
            if count:
                letters = [""] * count
                for j, node in enumerate(members):
                    letters[(offset + j) % count] = str(node["zone"])[-1]
                spec["zones"] = letters
            offset += count
    taken = _when(snap.get("taken_at"))
    created = [c for c in (_when(n.get("created")) for n in nodes) if c is not None]
    if taken is not None and created:
        age = (taken - min(created)).total_seconds()
        if age > 3600:
            out["age"] = f"{int(age // 3600)}h"
    return out


def _restarts(
    pods_of: Mapping[tuple[str, str, str], list[dict[str, Any]]], group_of: Mapping[str, str]
) -> dict[str, dict[str, list[int]]]:
    """The restart counts of the workloads' pods, per node in the order the settled build places
    them there (StatefulSet pods by ordinal), for the workloads that have any."""
    out: dict[str, dict[str, list[int]]] = {}
    for (kind, ns, wname), pods in sorted(pods_of.items()):
        if kind == "StatefulSet":
            pods = sorted(pods, key=lambda p: _ordinal(str(p.get("name", ""))))
        placed = [p for p in pods if p.get("node") in group_of]
        if not any(int(p.get("restarts") or 0) for p in placed):
            continue
        by_node: dict[str, list[int]] = defaultdict(list)
        for pod in placed:
            by_node[str(pod["node"])].append(int(pod.get("restarts") or 0))
        out[f"{kind}/{ns}/{wname}"] = dict(by_node)
    return out


def _node_order(node: Mapping[str, Any]) -> tuple[int, ...]:
    """Nodes in the order they were made, as far as a snapshot tells: by internal address."""
    ip = str(node.get("internal_ip") or "")
    parts = ip.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return tuple(int(p) for p in parts)
    return (1 << 16,)


def _pairs(pods: list[dict[str, Any]], column: str) -> list[tuple[str, str]]:
    """The most common list of the pods' (name, image) pairs (containers or init containers), or
    of their (name, kind) volumes: what the pods ran with."""
    layouts: Counter[tuple[tuple[str, str], ...]] = Counter()
    for pod in pods:
        if column == "containers":
            names = str(pod.get("containers") or "").split(",")
            images = str(pod.get("images") or "").split(",")
            if names != [""] and len(names) == len(images):
                layouts[tuple(zip(names, images, strict=True))] += 1
        else:
            sep = "=" if column == "init_containers" else ":"
            entries = [e.partition(sep) for e in str(pod.get(column) or "").split(",") if e]
            layouts[tuple((n, i) for n, _, i in entries)] += 1
    return list(layouts.most_common(1)[0][0]) if layouts else []


def _recorded_pod(
    kind: str, ns: str, wname: str, template: Mapping[str, Any], pods: list[dict[str, Any]], fargate: bool
) -> tuple[Obj, Obj, Obj, Obj | None]:
    """The pod template as the snapshot recorded it (`projection.template_record`), and an injector
    of what the pods had besides (sidecars, init containers and volumes a webhook added)."""
    recorded = list(template.get("containers") or [])
    pairs = [(str(c.get("name", "")), str(c.get("image", ""))) for c in recorded]
    containers = _containers(pairs, recorded)
    if not containers:
        containers = [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]
    pod_spec: Obj = {"containers": containers}
    recorded_init = list(template.get("init_containers") or [])
    if recorded_init:
        init_pairs = [(str(c.get("name", "")), str(c.get("image", ""))) for c in recorded_init]
        pod_spec["initContainers"] = _containers(init_pairs, recorded_init)
    for field, key in (
        ("node_selector", "nodeSelector"),
        ("affinity", "affinity"),
        ("tolerations", "tolerations"),
        ("volumes", "volumes"),
        ("termination_grace_period_seconds", "terminationGracePeriodSeconds"),
        ("scheduler_name", "schedulerName"),
    ):
        if field in template:
            pod_spec[key] = json.loads(json.dumps(template[field]))
    if kind == "DaemonSet" and fargate:
        pod_spec["affinity"] = _off_fargate(pod_spec.get("affinity") or {})
    labels = dict(template.get("labels") or {})
    selector = json.loads(json.dumps(template.get("selector") or {})) or {"matchLabels": dict(labels)}

    # What the pods had that the template does not: injected by a webhook the twin does not have.
    names = {c["name"] for c in containers} | {c["name"] for c in pod_spec.get("initContainers") or []}
    volumes = {str(v.get("name", "")) for v in pod_spec.get("volumes") or []}
    injected: Obj = {}
    extra = [(n, i) for n, i in _pairs(pods, "containers") if n not in names]
    if extra:
        injected["containers"] = [{"name": n, "image": i} for n, i in extra]
    extra_init = [(n, i) for n, i in _pairs(pods, "init_containers") if n not in names]
    if extra_init:
        injected["init_containers"] = [{"name": n, "image": i} for n, i in extra_init]
    extra_volumes = [(n, k) for n, k in _pairs(pods, "volumes") if n not in volumes]
    if extra_volumes:
        injected["volumes"] = [
            {"name": n, **({"emptyDir": {}} if k == "emptyDir" else {"hostPath": {"path": f"/var/lib/{n}"}})}
            for n, k in extra_volumes
        ]
    injector = {"name": f"twin-{kind.lower()}-{ns}-{wname}", "owners": [f"{kind}/{ns}/{wname}"], **injected}
    return pod_spec, labels, selector, injector if injected else None


def _made_up_pod(
    kind: str,
    w: Mapping[str, Any],
    pods: list[dict[str, Any]],
    on_fargate: bool,
    placement: Counter[str] | None,
    taints_of: Mapping[str, list[Obj]],
    group_label: str,
) -> tuple[Obj, Obj, Obj]:
    """A snapshot taken before the bot recorded pod templates: labels `app: NAME`, placement on the
    group most of the pods ran on, and the sidecars seen in the pods added to the template."""
    wname = str(w.get("name", ""))
    images = [str(i) for i in w.get("images") or [] if i]
    seen = [i for i in str(pods[0].get("images", "")).split(",") if i] if pods else []
    extra = [i for i in seen if i not in images and any(s in i for s in _SIDECARS)]
    taken: set[str] = set()
    containers = [{"name": _container_name(i, taken), "image": i} for i in [*images, *extra]]
    if not containers:
        containers = [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]
    labels = {"app": wname}
    pod_spec: Obj = {"containers": containers}
    if kind == "DaemonSet":
        pod_spec["tolerations"] = [{"operator": "Exists"}]
    elif not on_fargate and placement:
        group = placement.most_common(1)[0][0]
        pod_spec["nodeSelector"] = {group_label: group}
        tolerations = [
            {k: v for k, v in {**t, "operator": "Equal"}.items() if k != "value" or v}
            for t in taints_of.get(group, [])
        ]
        if tolerations:
            pod_spec["tolerations"] = tolerations
    return pod_spec, labels, {"matchLabels": dict(labels)}


HEADER = """\
# A twin of a real cluster, written by `upgrade-bot sim scenario --from-snapshot`.
# From the snapshot: node groups (size, version, instance type, capacity, taints, labels, zones),
# namespaces, served APIs, Deployments/StatefulSets/DaemonSets with their pod templates, what webhooks
# injected into their pods (`injectors`, one per workload), their pods' nodes (`placements`) and
# states (`faults`), disruption budgets (their healthy minimum, on the workload of the same name), the
# Services, webhooks, CRDs and certificates the checks read, what ran on Fargate, the lines of the
# containers' logs the log-reading rules match (`containers`), the clients of old APIs the apiserver
# metric counted (`callers`), the Helm releases and objects that name an old API version, the pods'
# restart counts (`restarts`, for the pods written settled). Not kept: other logs, Secrets,
# ConfigMaps (but Istio's root), custom resources (but cert-manager's Certificates); a workload
# without a recorded template (an older snapshot) gets labels `app: NAME`
# and a nodeSelector on the group most of its pods ran on. `settled: true`: the sim writes the
# workloads Running on their nodes instead of starting them one by one. `upgrade-bot sim fidelity`
# measures how true it is. Edit freely; the format is in bot/sim/README.md ("Scenario files").
"""


def dump_scenario(scenario: Mapping[str, Any]) -> str:
    return HEADER + yaml.safe_dump(dict(scenario), sort_keys=False, width=110, allow_unicode=True)
