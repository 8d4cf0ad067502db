"""Knowledge about the configured clusters that every door and duty shares, in one place: which
cluster a command means (the named one, or the only one configured), and which node labels name a
node's group (the settings' `snapshot.node_group_labels`, else the built-in list).

A module of its own so that front doors that only read a cluster (`upgrade-bot check`) pick it
without importing the snapshot service and, with it, the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.errors import UsageError, UserError
from bot.records import ClusterConfig

#: Labels that name a node's group, most specific first (EKS managed, eksctl, GKE, AKS, Karpenter).
DEFAULT_NODE_GROUP_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "karpenter.sh/nodepool",
    "node.kubernetes.io/nodegroup",
)


def group_labels(configured: Sequence[str] | None) -> tuple[str, ...]:
    """The node-group label keys in priority order: those configured (`snapshot.node_group_labels`,
    `Settings.node_group_labels`), or the built-in list when none are."""
    return tuple(configured) if configured else DEFAULT_NODE_GROUP_LABELS


def pick_cluster(clusters: Mapping[str, ClusterConfig], name: str | None) -> ClusterConfig:
    """The named cluster, or the only one configured; otherwise a usage error listing them."""
    configured = sorted(clusters)
    if not configured:
        raise UserError("no clusters are configured (add one under `clusters:` in the config file)")
    if name is None:
        if len(configured) == 1:
            return clusters[configured[0]]
        raise UsageError(f"which cluster? use --cluster with one of: {', '.join(configured)}")
    if name not in clusters:
        raise UsageError(f"no cluster named `{name}`; configured clusters: {', '.join(configured)}")
    return clusters[name]
