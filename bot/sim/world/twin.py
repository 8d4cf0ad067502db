"""A twin of a real cluster: a scenario written from one of the bot's stored snapshots.

The snapshot is plain data (the bot hands it over as decoded JSON; the simulator imports nothing of
the bot). What it records, the twin keeps: the node groups (size, kubelet version, instance type,
allocatable capacity, taints), the namespaces, the Deployments, StatefulSets and DaemonSets (replicas
and images), the disruption budgets (their healthy minimum), the sidecars seen in the pods (added to
the pod template, so the proxy versions lag as they did) and the workloads that ran on Fargate (a
profile each). What a snapshot does not record, the twin makes up and says so in its header: the
pod labels and selectors (`app: NAME`), the placement (a nodeSelector on the node group most of
the workload's pods ran on, and a toleration of that group's taints), no resource requests, no
Services, ConfigMaps or webhooks, and no faults.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from bot.sim.controllers.nodes import NODE_GROUP_LABEL

Obj = dict[str, Any]
_BASE = {"default", "kube-system", "kube-public", "kube-node-lease"}
_VERSION = re.compile(r"v?(\d+\.\d+\.\d+)")
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


def scenario_from_snapshot(snap: Mapping[str, Any], *, name: str | None = None) -> Obj:
    """The scenario (as the data a scenario file holds) of the cluster the snapshot recorded."""
    version_text = str((snap.get("version") or {}).get("gitVersion", ""))
    found = _VERSION.search(version_text)
    version = found.group(1) if found else "1.29.4"
    groups: dict[str, Obj] = {}
    group_of: dict[str, str] = {}
    fargate_nodes: set[str] = set()
    eks = "eks" in version_text
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
        spec = groups.setdefault(group, {"name": group, "count": 0, "_versions": Counter()})
        spec["count"] += 1
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
    node_groups: list[Obj] = []
    for spec in groups.values():
        versions: Counter[str] = spec.pop("_versions")
        if versions:
            common = versions.most_common(1)[0][0]
            if common != version:
                spec["version"] = common
        node_groups.append(spec)

    # Where each workload's pods ran, and the images its pods had (sidecars included).
    placement: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    pod_images: dict[tuple[str, str, str], list[str]] = {}
    on_fargate: set[tuple[str, str, str]] = set()
    for pod in _pods(snap):
        key = (str(pod.get("workload_kind", "")), str(pod.get("namespace", "")), str(pod.get("workload", "")))
        if key[0] not in _KINDS:
            continue
        node = str(pod.get("node", ""))
        if node in fargate_nodes:
            on_fargate.add(key)
        elif node in group_of:
            placement[key][group_of[node]] += 1
        pod_images.setdefault(key, [i for i in str(pod.get("images", "")).split(",") if i])

    taints_of = {g["name"]: g.get("taints") or [] for g in node_groups}
    objects: list[Obj] = []
    fargate_profiles: list[Obj] = []
    workloads_by_ns: dict[str, list[str]] = defaultdict(list)
    for w in snap.get("workloads") or []:
        kind, ns, wname = str(w.get("kind", "")), str(w.get("namespace", "")), str(w.get("name", ""))
        if kind not in _KINDS or not wname:
            continue
        key = (kind, ns, wname)
        workloads_by_ns[ns].append(wname)
        images = [str(i) for i in w.get("images") or [] if i]
        extra = [i for i in pod_images.get(key, []) if i not in images and any(s in i for s in _SIDECARS)]
        taken: set[str] = set()
        containers = [{"name": _container_name(i, taken), "image": i} for i in [*images, *extra]]
        if not containers:
            containers = [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]
        labels = {"app": wname}
        pod_spec: Obj = {"containers": containers}
        if kind == "DaemonSet":
            pod_spec["tolerations"] = [{"operator": "Exists"}]
        elif key in on_fargate:
            fargate_profiles.append({"name": wname, "namespace": ns, "labels": dict(labels)})
        elif placement.get(key):
            group = placement[key].most_common(1)[0][0]
            pod_spec["nodeSelector"] = {NODE_GROUP_LABEL: group}
            tolerations = [
                {k: v for k, v in {**t, "operator": "Equal"}.items() if k != "value" or v}
                for t in taints_of.get(group, [])
            ]
            if tolerations:
                pod_spec["tolerations"] = tolerations
        body: Obj = {
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        }
        if kind != "DaemonSet":
            body["replicas"] = int(w.get("desired", 1) or 0)
        if kind == "StatefulSet":
            body["serviceName"] = wname
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": {"name": wname, "namespace": ns, "labels": dict(labels)},
                "spec": body,
            }
        )
    for pdb in snap.get("pdbs") or []:
        ns, pname = str(pdb.get("namespace", "")), str(pdb.get("name", ""))
        names = workloads_by_ns.get(ns, [])
        # The snapshot keeps no selector: the budget guards the workload of its name, or the only one.
        target = pname if pname in names else (names[0] if len(names) == 1 else None)
        if target is None:
            continue
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": pname, "namespace": ns},
                "spec": {
                    "minAvailable": int(pdb.get("desired_healthy", 0) or 0),
                    "selector": {"matchLabels": {"app": target}},
                },
            }
        )
    label = str(snap.get("label", ""))
    cluster = str(snap.get("cluster", ""))
    scenario: Obj = {
        "name": name or f"{cluster or 'cluster'}-twin",
        "description": (
            f"Twin of {cluster} from snapshot `{label}` taken {snap.get('taken_at', '')}: "
            f"{sum(g['count'] for g in node_groups)} nodes in {len(node_groups)} group(s), "
            f"{len([o for o in objects if o['kind'] != 'PodDisruptionBudget'])} workloads."
        ),
        "cluster": {"version": version, "platform": "eks" if eks else "generic", "warmup": "2m"},
        # Served as it was snapshotted: its workloads written Running, not started one by one.
        "settled": True,
        "node_groups": node_groups,
    }
    if fargate_profiles:
        scenario["fargate_profiles"] = fargate_profiles
    scenario["namespaces"] = [str(n) for n in snap.get("namespaces") or [] if str(n) not in _BASE]
    scenario["objects"] = objects
    return scenario


HEADER = """\
# A twin of a real cluster, written by `upgrade-bot sim scenario --from-snapshot`.
# From the snapshot: node groups (size, version, instance type, capacity, taints), namespaces,
# Deployments/StatefulSets/DaemonSets (replicas, images, the sidecars seen in their pods), disruption
# budgets (their healthy minimum) and what ran on Fargate. Made up, as a snapshot does not record
# them: pod labels (`app: NAME`), placement (a nodeSelector on the group most of the pods ran on),
# resource requests (none), Services, ConfigMaps, webhooks and faults (none). `settled: true`: the
# sim writes the workloads Running on their groups' nodes (spread evenly) instead of starting them
# one by one. Edit freely; the format is in bot/sim/README.md ("Scenario files").
"""


def dump_scenario(scenario: Mapping[str, Any]) -> str:
    return HEADER + yaml.safe_dump(dict(scenario), sort_keys=False, width=110, allow_unicode=True)
