"""The AKS checks of `check`: the cloud's side of the upgrade, read through ARM (the provider port,
`bot/core/providers.py`, whose AKS adapter needs the optional `aks` extra), for a cluster whose
configuration says `provider: {aks: {subscription_id, resource_group, name, endpoint_url?}}`.

- AKS001 (Required) the control plane is not `Succeeded`, or its upgrade profile does not offer the
  target (`get_upgrade_profile`): AKS refuses an upgrade to a version it does not offer.
- AKS002 (Required) an agent pool that is not `Succeeded`, or whose version is further behind the
  target than Kubernetes' kubelet skew allows (2 minors, 3 from 1.28).
- AKS003 (Recommended) AKS's override of its deprecated-API block is set: AKS then upgrades past
  APIs the target removes; it should have an expiry, and nobody should leave it on.
The deprecated-API usage itself is what AKS blocks on: the API server's
`apiserver_requested_deprecated_apis`, which the removed-API check reads and reports as its own
findings. The planned maintenance configurations (windows and not-allowed spans) are notes: they
bound AKS's own upgrades, not the bot's. Without a provider, or without the SDK, the checks are
skipped and the notes say why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bot.core.checks.clouds import Extra, cloud_extra, control_plane_not_ready, pools_not_ready
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, FindingKind, declare
from bot.core.providers import Provider, ProviderConfig, said_span, said_time

Obj = dict[str, Any]
SOURCE = "AKS API"

FINDINGS = declare(
    __name__,
    FindingKind(
        id="AKS001",
        severity=REQUIRED,
        about="the AKS control plane is not ready, or the target is not offered",
    ),
    FindingKind(
        id="AKS002", severity=REQUIRED, about="agent pools not Succeeded or too far behind the target"
    ),
    FindingKind(id="AKS003", severity=RECOMMENDED, about="AKS's override of its deprecated-API block is set"),
)


def check_control_plane(cluster: Obj, offered: Sequence[str], target: str) -> list[Finding]:
    props = cluster.get("properties") or {}
    state = str(props.get("provisioningState", "?"))
    current = str(props.get("currentKubernetesVersion") or props.get("kubernetesVersion") or "")
    name = cluster.get("name", "?")
    why = control_plane_not_ready(
        not_ready=f"its provisioningState is {state}" if state != "Succeeded" else "",
        offered=f"its upgrade profile offers {', '.join(offered) or 'nothing'} from {current}",
        target_offered=current == target or any(_same(v, target) for v in offered),
        target=target,
    )
    if not why:
        return []
    fix = (
        "wait for the running operation to end (az aks show), or target a version the upgrade profile offers "
        "(az aks get-upgrades)"
    )
    title = f"AKS cluster {name} is not ready for {target}"
    objects = (f"managedClusters/{name}",)
    return [
        Finding(id="AKS001", severity=REQUIRED, title=title, objects=objects, why=why, fix=fix, source=SOURCE)
    ]


def check_pools(pools: Sequence[Obj], target: str) -> list[Finding]:
    bad = pools_not_ready(map(_pool_state, pools), target, ready="Succeeded")
    if not bad:
        return []
    return [
        Finding(
            id="AKS002",
            severity=REQUIRED,
            title=f"{len(bad)} agent pool(s) not ready for {target}",
            objects=tuple(f"agentPools/{b}" for b in bad),
            why="an agent pool must be Succeeded, and within the kubelet skew of the control plane (2 minors, 3 "
            "from 1.28), for its nodes to keep working once the control plane is on the target",
            fix="upgrade those pools first (aks-upgrade-nodepool), one minor at a time, or replace them",
            source=SOURCE,
        )
    ]


def _pool_state(pool: Obj) -> tuple[str, str, str]:
    """An agent pool as (name, version, provisioningState)."""
    props = pool.get("properties") or {}
    version = props.get("currentOrchestratorVersion") or props.get("orchestratorVersion") or ""
    return str(pool.get("name", "?")), str(version), str(props.get("provisioningState", "?"))


def check_override(cluster: Obj) -> list[Finding]:
    override = ((cluster.get("properties") or {}).get("upgradeSettings") or {}).get("overrideSettings") or {}
    if not override.get("forceUpgrade"):
        return []
    until = said_time(str(override.get("until") or "")) or "no expiry"
    return [
        Finding(
            id="AKS003",
            severity=RECOMMENDED,
            title="AKS's override of its deprecated-API block is set",
            objects=(f"managedClusters/{cluster.get('name', '?')}",),
            why=f"upgradeSettings.overrideSettings forceUpgrade is on (until {until}): AKS upgrades past calls to "
            "APIs the target removes, which then fail",
            fix="let the override expire, or clear it (az aks update --enable-force-upgrade false); the bot sets "
            "it only when two people choose it, with an expiry",
            source=SOURCE,
        )
    ]


def _same(offered: str, target: str) -> bool:
    """`1.26.6` offers `1.26.6`; a target given as a minor (`1.26`) is offered by any of its patches."""
    return offered == target or (target.count(".") == 1 and offered.startswith(target + "."))


def run_aks_checks(aks: Provider, target: str, notes: list[str]) -> list[Finding]:
    cluster = aks.control_plane()
    props = cluster.get("properties") or {}
    versions = aks.versions()
    notes.append(
        f"AKS cluster {aks.name}: {versions.current} ({props.get('provisioningState', '?')}); its upgrade profile "
        f"offers {', '.join(versions.offered) or 'nothing'}"
    )
    findings = check_control_plane(cluster, versions.offered, target)
    findings += check_pools(aks.node_pools(), target)
    findings += check_override(cluster)
    policy = aks.maintenance()
    if policy.windows or policy.exclusions:
        notes.append(
            "AKS planned maintenance (bounds AKS's own upgrades, not this one): "
            + "; ".join(
                [
                    *policy.windows,
                    *(f"not allowed {said_span(e.start, e.end)} ({e.name})" for e in policy.exclusions),
                ]
            )
        )
    notes.append(
        "AKS refuses a minor upgrade after calls to an API the target removes in the last 12 hours: "
        "the removed-API findings are what it sees (the job asks two people before it overrides)"
    )
    return findings


def aks_extra(
    provider: ProviderConfig | None, *, connect: Callable[[ProviderConfig], Provider] | None = None
) -> Extra:
    """The AKS checks as a `check` extra; without the SDK a note says they were skipped."""
    return cloud_extra(
        "AKS",
        provider,
        lambda aks, reader, target, notes: run_aks_checks(aks, target, notes),
        connect=connect,
    )
