"""The steps `plan draft --style aks-managed|gke-managed` writes for a cloud that upgrades its node
pools in place: the control plane through the cloud's action (`aks-upgrade-control-plane`,
`gke-update-master`) and each pool through its own (`aks-upgrade-nodepool`, `gke-update-nodepool`)
with the pool's own upgrade settings, as `templates/plans/<cloud>-managed.yaml` does.

Each hop's version is one the cloud offers (`Provider.versions`: AKS's upgrade profile, GKE's
`get_server_config`), never a made-up one: where the cloud could not be asked, or offers none of
that minor yet (AKS lists only the next minor's patches), the step carries a placeholder that
`plan validate` refuses, and the header says why. `bot.core.runs.draftsteps.DraftWriter` calls these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.runs.draftfacts import POOL_CLOUDS, POOL_WORDS, VERSIONS_HOW, ProviderFacts

#: What each cloud's calls are, as the comments above the steps name them.
_CONTROL_CALL = {
    "aks": "PUT managedClusters with kubernetesVersion, every agent pool kept on its version",
    "gke": "update_master with masterVersion, the node pools kept on theirs",
}
_POOL_CALL = {
    "aks": "PUT agentPools with orchestratorVersion; AKS surges new nodes, drains and removes the old ones",
    "gke": "update_node_pool with nodeVersion; GKE surges or swaps (blue-green) the pool's nodes",
}
#: The action's arguments that change a pool's own settings.
_POOL_KNOBS = {"aks": "`max_surge`", "gke": "`strategy`, `max_surge`, `max_unavailable` or `soak`"}


def placeholder(kind: str, minor: str) -> str:
    """What stands for a version the cloud did not name: `plan validate` refuses it (it is not a
    version), so nobody loads a plan with a version nobody checked."""
    return f"<{minor}.x: set a version {kind.upper()} offers ({VERSIONS_HOW[kind]})>"


@dataclass(frozen=True, kw_only=True)
class PoolCloud:
    """The cloud whose actions a draft writes for the control plane and the pools (AKS, GKE)."""

    kind: str
    #: Kubernetes minor (`1.26`) → the version its steps name: the cloud's, or a placeholder.
    versions: Mapping[str, str]
    #: The minors whose version is a placeholder.
    unknown: Sequence[str] = ()
    #: Pool → its own upgrade settings ("max surge 33%"); every pool the draft upgrades.
    pools: Mapping[str, str] = field(default_factory=dict)
    #: The provider's answers, None when the cloud could not be asked.
    provider: ProviderFacts | None = None

    @property
    def cloud(self) -> str:
        return self.kind.upper()

    @property
    def word(self) -> str:
        return POOL_WORDS[self.kind]

    def version(self, to: str) -> str:
        """The version the steps to `to` (`1.26`, or people's `1.26.6`) name."""
        minor = _minor(to)
        return self.versions.get(minor) or placeholder(self.kind, minor)


def pool_cloud(
    kind: str,
    provider: ProviderFacts | None,
    *,
    current: str,
    hops: Sequence[str],
    target: str,
    snapshot_groups: Sequence[str],
) -> PoolCloud:
    """The versions and pools of a `kind` draft: the control plane's version now (`current`, as the
    cluster's /version writes it when the cloud was not asked), each hop's the cloud offers (the
    last hop's is `target` when people gave a patch), the cloud's pools (the snapshot's node
    groups when the cloud was not asked)."""
    now = provider.version if provider is not None and provider.version else current
    versions = {_minor(now): now} if now else {}
    unknown: list[str] = []
    for n, hop in enumerate(hops):
        chosen = target if n == len(hops) - 1 and target.count(".") >= 2 else ""
        chosen = chosen or (provider.hop_version(hop) if provider is not None else "")
        if chosen:
            versions[hop] = chosen
        else:
            unknown.append(hop)
    if provider is not None:
        pools = dict(provider.pool_settings)
    else:
        pools = {
            g: f"its own upgrade settings, which {kind.upper()} was not asked for" for g in snapshot_groups
        }
    return PoolCloud(kind=kind, versions=versions, unknown=unknown, pools=pools, provider=provider)


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split("-")[0].split(".")[:2])


def header(pc: PoolCloud, cluster: str) -> list[str]:
    """What the header says of the cloud: its pools and the versions it offers, and the
    placeholders left where it named none."""
    out: list[str] = []
    provider = pc.provider
    if provider is not None:
        pools = ", ".join(f"{name} ({settings})" for name, settings in sorted(pc.pools.items())) or "(none)"
        offered = ", ".join(provider.offered_versions) or "nothing newer"
        out.append(
            f"The cloud's side from the {pc.cloud} provider ({pc.cloud} cluster {provider.name}): {pc.word}s "
            f"{pools}; the control plane is on {provider.version or '?'}, and {pc.cloud} offers {offered}"
            + (f" (its own pick: {provider.default_version})." if provider.default_version else ".")
        )
    else:
        out.append(
            f"{cluster}'s {pc.cloud} provider could not be asked (below): the {pc.word}s are the snapshot's "
            f"node groups ({', '.join(pc.pools) or 'none'}), each upgraded with its own settings."
        )
    if pc.unknown:
        hops = ", ".join(pc.unknown)
        if provider is None:
            why, when = f"{pc.cloud} could not be asked which versions of {hops} it offers", ""
        elif pc.kind == "aks":
            why = f"AKS offers this cluster no version of {hops} yet (its upgrade profile lists the next minor's only)"
            when = " once the cluster is on the minor before it"
        else:
            why, when = (
                f"GKE offers no version of {hops} in this location (get_server_config)",
                " when it does",
            )
        out.append(
            f"{why}: the steps for {hops} carry a placeholder (`{placeholder(pc.kind, pc.unknown[0])}`) that "
            f"`plan validate` refuses. Set the version {VERSIONS_HOW[pc.kind]} lists{when}."
        )
    return out


def other_style(cloud: str, cluster: str, style: str) -> str:
    """The header's line for an AKS or GKE cluster drafted in a style of people's steps."""
    return (
        f"{cluster}'s provider is {cloud.upper()}: --style {style} keeps the control plane and the "
        f"{POOL_WORDS[cloud]}s people's steps below; --style {cloud}-managed (the default for it) drafts "
        f"{cloud.upper()}'s own actions ({', '.join(POOL_CLOUDS[cloud])})."
    )


def control_plane(pc: PoolCloud, hop: str, *, step_id: str, gate: str) -> tuple[str, list[str]]:
    """The control plane to `hop` through the cloud's action: the comment above it and its lines."""
    version = pc.version(hop)
    name = f" {pc.provider.name}" if pc.provider is not None else ""
    why = (
        "The control plane goes first: kubelets may lag it, never lead it. The bot upgrades the control "
        f"plane of {pc.cloud} cluster{name} to {version} ({_CONTROL_CALL[pc.kind]}) and follows the "
        "operation until /version reports it."
    )
    if pc.kind == "aks":
        why += (
            "\nAKS refuses a minor upgrade after calls to APIs the target removes (in the last 12 hours): "
            "the bot then names them and asks two people to override (for `override_for`) or stop."
        )
        action = f"aks-upgrade-control-plane: {{version: {_q(version)}, override_for: 1h, timeout: 1h}}"
        title = f"Upgrade the AKS control plane to {version} (agent pools stay on their version)"
    else:
        why += "\nThe gate names any maintenance exclusion in force (the team's freeze)."
        action = f"gke-update-master: {{version: {_q(version)}, timeout: 1h}}"
        title = f"Upgrade the GKE master to {version} (node pools stay on their version)"
    return why, [
        f"- id: {step_id}",
        "phase: roll out",
        f"title: {_q(title)}",
        f"gate: {gate}",
        "timeout: 1h",
        "announce: step-complete",
        "actions:",
        f"  - {action}",
    ]


def pool_step(
    pc: PoolCloud, pool: str, to: str, *, step_id: str, gate: str, background: Sequence[str]
) -> tuple[str, list[str]]:
    """Pool `pool` to minor `to` through the cloud's action, with the pool's own settings: the
    comment's second part and the step's lines."""
    version = pc.version(to)
    settings = pc.pools.get(pool, "its own upgrade settings")
    why = (
        f"{pc.cloud} lists {pool} as a{'n' if pc.word[0] in 'aeiou' else ''} {pc.word}: the bot upgrades it "
        f"({_POOL_CALL[pc.kind]}) with its own settings ({settings}); {_POOL_KNOBS[pc.kind]} on the action would "
        "change them."
    )
    if pc.kind == "gke" and settings.startswith("blue-green"):
        why += " At the soak people let it finish, or roll back (rollback_node_pool_upgrade)."
    verb = "aks-upgrade-nodepool" if pc.kind == "aks" else "gke-update-nodepool"
    return why, [
        f"- id: {step_id}",
        "phase: roll out",
        f"title: {_q(f'Upgrade {pc.word} {pool} to {version} ({settings})')}",
        f"gate: {gate}",
        "actions:",
        f"  - {verb}: {{nodepool: {_q(pool)}, version: {_q(version)}}}",
        *background,
    ]


def yaml_scalar(value: object) -> str:
    """A YAML scalar: JSON strings are valid YAML and quote whatever a value holds."""
    return json.dumps(str(value), ensure_ascii=False)


_q = yaml_scalar
