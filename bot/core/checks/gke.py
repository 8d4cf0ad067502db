"""The GKE checks of `check`: the cloud's side of the upgrade, read through GKE's API (the provider
port, `bot/core/providers.py`, whose GKE adapter needs the optional `gke` extra), for a cluster
whose configuration says `provider: {gke: {project, location, name, endpoint_url?}}`.

- GKE001 (Required) the cluster is not RUNNING, or `get_server_config` does not offer the target
  as a master version: GKE refuses an upgrade to a version it does not offer.
- GKE002 (Required) a maintenance exclusion would block the window: one in force now or starting
  within `WINDOW_AHEAD`, whose scope covers this upgrade (NO_UPGRADES always; NO_MINOR_UPGRADES and
  NO_MINOR_OR_NODE_UPGRADES for a minor upgrade). GKE holds its own upgrades there and lets a
  manual one through: the exclusion is the team's freeze, which the bot does not override
  silently. The finding names the exclusion and its end.
- GKE003 (Required) a node pool that is not RUNNING, or whose version is further behind the target
  than Kubernetes' kubelet skew allows (2 minors, 3 from 1.28).
GKE's deprecation insights are the Recommender API's (`google.container.DiagnosisInsight`), which
the container API does not serve: a note says so, and the removed-API check (the API server's own
metric) reports the usage. Without a provider, or without the SDK, the checks are skipped and the
notes say why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.checks.clouds import Extra, cloud_extra, control_plane_not_ready, pools_not_ready
from bot.core.checks.findings import REQUIRED, Finding, FindingKind, declare
from bot.core.checks.preflight import minor_of
from bot.core.providers import MaintenanceExclusion, Provider, ProviderConfig, said_span, said_time
from bot.core.snapshots.projection import ClusterReader

Obj = dict[str, Any]
SOURCE = "GKE API"
#: How far ahead of the check an exclusion's start still blocks the window: a check runs on the
#: day, before the window; a freeze that begins later that day would fall inside it.
WINDOW_AHEAD = timedelta(hours=24)
#: The exclusion scopes that hold a minor upgrade; a patch upgrade only NO_UPGRADES holds.
MINOR_SCOPES = frozenset({"NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"})

FINDINGS = declare(
    __name__,
    FindingKind(
        id="GKE001", severity=REQUIRED, about="the GKE cluster is not ready, or the target is not offered"
    ),
    FindingKind(id="GKE002", severity=REQUIRED, about="a GKE maintenance exclusion would block the window"),
    FindingKind(id="GKE003", severity=REQUIRED, about="node pools not RUNNING or too far behind the target"),
)


def check_cluster(cluster: Obj, offered: Sequence[str], target: str) -> list[Finding]:
    status = str(cluster.get("status", "?"))
    current = str(cluster.get("currentMasterVersion", ""))
    name = cluster.get("name", "?")
    why = control_plane_not_ready(
        not_ready=f"its status is {status}" if status != "RUNNING" else "",
        offered=f"get_server_config offers {', '.join(offered) or 'nothing newer'} from {current}",
        target_offered=current == target or any(_same(v, target) for v in offered),
        target=target,
    )
    if not why:
        return []
    fix = (
        "wait for the running operation to end (gcloud container operations list), or target a version "
        "the server config offers (gcloud container get-server-config)"
    )
    title = f"GKE cluster {name} is not ready for {target}"
    return [
        Finding(
            id="GKE001",
            severity=REQUIRED,
            title=title,
            objects=(f"clusters/{name}",),
            why=why,
            fix=fix,
            source=SOURCE,
        )
    ]


def check_exclusions(
    exclusions: Sequence[MaintenanceExclusion], current: str, target: str, now: datetime
) -> list[Finding]:
    minor = (minor_of(target) or (0, 0)) > (minor_of(current) or (0, 0))
    out = []
    for e in exclusions:
        start, end = _time(e.start), _time(e.end)
        if start is None or end is None or end <= now or start > now + WINDOW_AHEAD:
            continue
        scope = e.scope or "NO_UPGRADES"
        if scope != "NO_UPGRADES" and not (minor and scope in MINOR_SCOPES):
            continue
        when = "is in force" if start <= now else f"begins at {said_time(e.start)}"
        ends = said_time(e.end)
        out.append(
            Finding(
                id="GKE002",
                severity=REQUIRED,
                title=f"maintenance exclusion {e.name} would block the window (until {ends})",
                objects=(f"maintenanceExclusions/{e.name}",),
                why=f"the cluster's maintenance exclusion {e.name} ({scope}) {when} and ends at {ends}: the team "
                f"froze {'minor ' if scope != 'NO_UPGRADES' else ''}upgrades on this cluster until then; GKE lets a "
                "manual upgrade through it, the bot does not",
                fix=f"move the window after {ends}, or end the exclusion early if the freeze no longer holds "
                f"(gcloud container clusters update --remove-maintenance-exclusion {e.name})",
                source=SOURCE,
            )
        )
    return out


def check_pools(pools: Sequence[Obj], target: str) -> list[Finding]:
    read = [(str(p.get("name", "?")), str(p.get("version", "")), str(p.get("status", "?"))) for p in pools]
    bad = pools_not_ready(read, target, ready="RUNNING")
    if not bad:
        return []
    return [
        Finding(
            id="GKE003",
            severity=REQUIRED,
            title=f"{len(bad)} node pool(s) not ready for {target}",
            objects=tuple(f"nodePools/{b}" for b in bad),
            why="a node pool must be RUNNING, and within the kubelet skew of the master (2 minors, 3 from 1.28), "
            "for its nodes to keep working once the master is on the target",
            fix="upgrade those pools first (gke-update-nodepool), one minor at a time, or replace them",
            source=SOURCE,
        )
    ]


def _same(offered: str, target: str) -> bool:
    """`1.30.4-gke.1348000` is offered as itself; `1.30.4` or `1.30` by any of its builds."""
    return offered == target or offered.startswith(target + ("-gke." if target.count(".") == 2 else "."))


def _time(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def run_gke_checks(gke: Provider, target: str, notes: list[str], *, now: datetime) -> list[Finding]:
    cluster = gke.control_plane()
    versions = gke.versions()
    notes.append(
        f"GKE cluster {gke.name}: {versions.current} ({cluster.get('status', '?')}); get_server_config offers "
        f"{', '.join(versions.offered) or 'nothing newer'}"
        + (f" (default {versions.default})" if versions.default else "")
    )
    findings = check_cluster(cluster, versions.offered, target)
    policy = gke.maintenance()
    findings += check_exclusions(policy.exclusions, versions.current, target, now)
    findings += check_pools(gke.node_pools(), target)
    if policy.windows or policy.exclusions:
        notes.append(
            "GKE maintenance policy: "
            + "; ".join(
                [
                    *policy.windows,
                    *(
                        f"exclusion {e.name} {said_span(e.start, e.end)} ({e.scope})"
                        for e in policy.exclusions
                    ),
                ]
            )
        )
    notes.append(
        "GKE's deprecation insights are the Recommender API's (not read here): the removed-API findings are "
        "what the API server itself saw"
    )
    return findings


def gke_extra(
    provider: ProviderConfig | None,
    *,
    now: float | None = None,
    connect: Callable[[ProviderConfig], Provider] | None = None,
) -> Extra:
    """The GKE checks as a `check` extra; without the SDK a note says they were skipped. `now`
    (Unix seconds) is when the exclusions are read against (the check's clock)."""

    def run(gke: Provider, reader: ClusterReader, target: str, notes: list[str]) -> list[Finding]:
        when = datetime.fromtimestamp(now, UTC) if now is not None else datetime.now(UTC)
        return run_gke_checks(gke, target, notes, now=when)

    return cloud_extra("GKE", provider, run, connect=connect)
