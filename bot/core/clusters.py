"""Which configured cluster a command means: the named one, or the only one configured.

A module of its own so that front doors that only read a cluster (`upgrade-bot check`) pick it
without importing the snapshot service and, with it, the store.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.errors import UserError
from bot.records import ClusterConfig


def pick_cluster(clusters: Mapping[str, ClusterConfig], name: str | None) -> ClusterConfig:
    """The named cluster, or the only one configured; otherwise a usage error listing them."""
    configured = sorted(clusters)
    if not configured:
        raise UserError("no clusters are configured (add one under `clusters:` in the config file)")
    if name is None:
        if len(configured) == 1:
            return clusters[configured[0]]
        raise UserError(f"which cluster? use --cluster with one of: {', '.join(configured)}")
    if name not in clusters:
        raise UserError(f"no cluster named `{name}`; configured clusters: {', '.join(configured)}")
    return clusters[name]
