"""The cloud's side of a snapshot (`snap["provider"]`), read through the provider port when the
cluster's configuration names a provider (issue 42).

What it keeps is what the EKS checks and the draft read, and what a twin of the cluster serves on
its AWS facade (`bot/sim/world/twin.py` writes the scenario's `aws:` from it): the cluster (version,
platform version, status, health issues, control-plane subnets), the managed node groups (version,
status, health issues, desired size, subnets, launch template and its latest version), the add-ons
(version, status, health issues) and the versions EKS offers of each for the current minor and
the next `LATER_MINORS` (the draft's add-on steps need them for every hop), the upgrade insights
of those minors, the subnets with their free addresses, and the Auto Scaling groups that are no
managed group's. docs/snapshot-provider.md describes each field.

A snapshot without the section (taken before it existed, or of a cluster with no provider) is one
with no provider. A provider that cannot be read leaves a gap (`resource: provider`) and a section
that says why (`captured: false`); so does a cloud whose side is not captured yet (AKS, GKE).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bot.core import providers
from bot.core.kube.versions import parse_version
from bot.core.providers import Provider, ProviderConfig, ProviderError, ProviderUnavailable
from bot.errors import clip
from bot.records import ClusterConfig

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: The minors after the current one whose add-on versions and insights are kept: a draft of a
#: chained upgrade asks for each hop's, and EKS offers versions a few minors ahead.
LATER_MINORS = 3


def minors_from(version: Mapping[str, Any], later: int = LATER_MINORS) -> list[str]:
    """The cluster's minor (`1.24` of `v1.24.17-eks-…`) and the `later` ones after it."""
    parsed = parse_version(str(version.get("gitVersion", "")))
    if parsed is None or len(parsed) < 2:
        return []
    return [f"{parsed[0]}.{parsed[1] + i}" for i in range(later + 1)]


def provider_of(
    cluster: ClusterConfig, connect: Callable[[ProviderConfig], Provider] = providers.reading
) -> Callable[[], Provider] | None:
    """What `take_snapshot` connects to the cluster's provider with; None when it names none."""
    config: ProviderConfig | None = cluster.eks or cluster.aks or cluster.gke
    if config is None:
        return None
    chosen = config
    return lambda: connect(chosen)


def capture_provider(
    connect: Callable[[], Provider], version: Mapping[str, Any], gap: Callable[[str], None]
) -> Obj:
    """The snapshot's `provider` section. `connect` gives the cluster's provider (connecting may
    fail: no SDK); `version` is the snapshot's `version`; `gap(reason)` records what could not be
    read, as the snapshot's other gaps do."""
    kind, name = "", ""
    try:
        provider = connect()
        kind, name = provider.kind, provider.name
        described = provider.describe_for_snapshot(minors_from(version))
    except (ProviderUnavailable, ProviderError) as exc:
        log.warning("the provider's side of the snapshot could not be read: %s", exc)
        cause = clip(str(exc), 300)
        gap(cause)  # the gap's resource, `provider`, already says whose side it is
        reason = f"the provider's side could not be read: {cause}"
        return {"kind": kind, "name": name, "captured": False, "reason": reason}
    except Exception as exc:
        # The SDK's own errors on connecting (no application-default credentials for GKE, say)
        # are not the port's: the cluster's side of the snapshot is still worth keeping.
        log.exception("the provider's side of the snapshot failed")
        cause = clip(f"{type(exc).__name__}: {exc}", 300)
        gap(cause)
        reason = f"the provider's side could not be read: {cause}"
        return {"kind": kind, "name": name, "captured": False, "reason": reason}
    if described is None:
        return {
            "kind": kind,
            "name": name,
            "captured": False,
            "reason": f"the {kind.upper()} side is not captured by snapshots yet",
        }
    return {"kind": kind, "name": name, "captured": True, **project_eks(described, minors_from(version))}


def _issues(obj: Mapping[str, Any]) -> list[Obj]:
    return [
        {"code": str(i.get("code", "")), "message": str(i.get("message", ""))}
        for i in (obj.get("health") or {}).get("issues") or []
    ]


def _strs(values: Iterable[Any] | None) -> list[str]:
    return [str(v) for v in values or []]


def project_eks(described: Mapping[str, Any], minors: Sequence[str]) -> Obj:
    """EKS's descriptions (`Eks.describe_for_snapshot`) pruned to the fields kept (JSON data: no
    datetimes, which botocore gives for the times a snapshot does not keep)."""
    cluster = described.get("cluster") or {}
    arn = str(cluster.get("arn", ""))
    # arn:aws:eks:REGION:ACCOUNT:cluster/NAME
    arn_parts = arn.split(":")
    groups = list(described.get("node_pools") or [])
    latest = described.get("launch_templates") or {}
    control_subnets = _strs((cluster.get("resourcesVpcConfig") or {}).get("subnetIds"))
    group_subnets = {s for g in groups for s in _strs(g.get("subnets"))}
    managed_asgs = {
        str(a.get("name", ""))
        for g in groups
        for a in (g.get("resources") or {}).get("autoScalingGroups") or []
    }
    out: Obj = {
        "region": arn_parts[3] if len(arn_parts) > 5 else "",
        "account": arn_parts[4] if len(arn_parts) > 5 else "",
        "minors": list(minors),
        "cluster": {
            "name": str(cluster.get("name", "")),
            "version": str(cluster.get("version", "")),
            "platform_version": str(cluster.get("platformVersion", "")),
            "status": str(cluster.get("status", "")),
            "issues": _issues(cluster),
            "subnets": control_subnets,
        },
        "node_groups": [_node_group(g, latest) for g in groups],
        "addons": [
            {
                "name": str(a.get("addonName", "")),
                "version": str(a.get("addonVersion", "")),
                "status": str(a.get("status", "")),
                "issues": _issues(a),
            }
            for a in described.get("addons") or []
        ],
        "offered": {
            str(addon): _offered(by_minor, minors)
            for addon, by_minor in (described.get("addon_versions") or {}).items()
        },
        "insights": [_insight(i) for i in described.get("insights") or []],
        "subnets": [
            {
                "id": str(s.get("SubnetId", "")),
                "zone": str(s.get("AvailabilityZone", "")),
                "cidr": str(s.get("CidrBlock", "")),
                "free": int(s.get("AvailableIpAddressCount") or 0),
                "use": [
                    u
                    for u, used in (
                        ("control-plane", str(s.get("SubnetId", "")) in control_subnets),
                        ("nodes", str(s.get("SubnetId", "")) in group_subnets),
                        ("pods", str(s.get("SubnetId", "")) in group_subnets),
                    )
                    if used
                ],
            }
            for s in described.get("subnets") or []
        ],
        # The groups no managed node group owns (left behind by a replacement: EKS009 reads them).
        "other_asgs": [
            {
                "name": str(a.get("AutoScalingGroupName", "")),
                "instances": len(a.get("Instances") or []),
                "desired": int(a.get("DesiredCapacity") or 0),
                "zones": _strs(a.get("AvailabilityZones")),
                "tags": {
                    str(t.get("Key", "")): str(t.get("Value", ""))
                    for t in a.get("Tags") or []
                    # The cluster's own tag is written again by whoever serves the group.
                    if not str(t.get("Key", "")).startswith("kubernetes.io/cluster/")
                },
            }
            for a in described.get("auto_scaling_groups") or []
            if str(a.get("AutoScalingGroupName", "")) not in managed_asgs
        ],
    }
    return out


def _node_group(group: Mapping[str, Any], latest: Mapping[str, Any]) -> Obj:
    lt = group.get("launchTemplate") or {}
    newest = latest.get(str(lt.get("id", ""))) if lt.get("id") else None
    return {
        "name": str(group.get("nodegroupName", "")),
        "version": str(group.get("version", "")),
        "status": str(group.get("status", "")),
        "issues": _issues(group),
        "desired": int((group.get("scalingConfig") or {}).get("desiredSize") or 0),
        "subnets": _strs(group.get("subnets")),
        "launch_template": (
            {
                "id": str(lt.get("id", "")),
                "name": str(lt.get("name", "")),
                "version": str(lt.get("version", "")),
                "latest": int(newest) if newest is not None else None,
            }
            if lt
            else None
        ),
    }


def _offered(by_minor: Mapping[str, Sequence[Mapping[str, Any]]], minors: Sequence[str]) -> list[Obj]:
    """An add-on's versions over the minors asked: each with the minors it was offered for and
    those it is the default of, newest minor's list first (the order EKS lists them in)."""
    versions: dict[str, Obj] = {}
    for minor in reversed(list(minors)):
        for v in by_minor.get(minor) or []:
            entry = versions.setdefault(str(v.get("addonVersion", "")), {"clusters": [], "default": []})
            entry["clusters"].append(minor)
            if any(
                c.get("clusterVersion") == minor and c.get("defaultVersion")
                for c in v.get("compatibilities") or []
            ):
                entry["default"].append(minor)
    return [
        {
            "version": name,
            "clusters": sorted(e["clusters"], key=_minor_key),
            "default": sorted(e["default"], key=_minor_key),
        }
        for name, e in versions.items()
    ]


def _minor_key(minor: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in minor.split("."))


def _insight(insight: Mapping[str, Any]) -> Obj:
    status = insight.get("insightStatus") or {}
    summary = insight.get("categorySpecificSummary") or {}
    return {
        "id": str(insight.get("id", "")),
        "name": str(insight.get("name", "")),
        "category": str(insight.get("category", "")),
        "kubernetes_version": str(insight.get("kubernetesVersion", "")),
        "status": str(status.get("status", "")),
        "reason": str(status.get("reason", "")),
        "description": str(insight.get("description", "")),
        "recommendation": str(insight.get("recommendation", "")),
        "resources": [
            {
                "uri": str(r.get("kubernetesResourceUri") or r.get("arn") or ""),
                "status": str((r.get("insightStatus") or {}).get("status", "")),
            }
            for r in insight.get("resources") or []
        ],
        "deprecations": [
            {
                "usage": str(d.get("usage", "")),
                "replaced_with": str(d.get("replacedWith", "")),
                "stop_serving": str(d.get("stopServingVersion", "")),
                "start_serving": str(d.get("startServingReplacementVersion", "")),
                "clients": [
                    {
                        "user_agent": str(c.get("userAgent", "")),
                        "requests": int(c.get("numberOfRequestsLast30Days") or 0),
                    }
                    for c in d.get("clientStats") or []
                ],
            }
            for d in summary.get("deprecationDetails") or []
        ],
    }
