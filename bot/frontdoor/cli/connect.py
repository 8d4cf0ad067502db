"""How every verb of the terminal reaches the outside: the store, a cluster, Slack's directory (and
a sim's AWS APIs, with credentials of its own).

The adapters are imported inside these functions, and only here: a verb that never opens the
store does not pay for sqlalchemy, nor one that never reads a cluster for the kubernetes client,
and `snapshot` opens the store on a thread while the cluster's lists are read, so sqlalchemy's
import (a tenth of a 150,000-pod snapshot) happens off the main thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.adapters.kube import Cluster
    from bot.adapters.slack import SlackDirectory
    from bot.adapters.store import Store
    from bot.core.snapshots.service import Stored
    from bot.records import ClusterConfig
    from bot.settings import Settings


def open_store(settings: Settings) -> Store:
    """The configured store, migrated to the current schema; the caller closes it."""
    from bot.adapters.store import Store

    return Store.open(settings.database_url)


def stored_snapshot(settings: Settings, cluster: str | None, ref: str) -> tuple[ClusterConfig, Stored]:
    """The configured `cluster` (the only one when None) and its stored snapshot `ref` (an id or
    a label); a cluster the configuration does not name is a usage error."""
    from bot.core.clusters import pick_cluster
    from bot.core.snapshots import service as snapshots
    from bot.errors import UsageError, UserError

    store = open_store(settings)
    try:
        try:
            picked = pick_cluster(settings.clusters, cluster)
        except UserError as exc:
            raise UsageError(exc.user_message) from None
        return picked, snapshots.resolve(store, ref, cluster=picked.name)
    finally:
        store.close()


def connect(cluster: ClusterConfig) -> Cluster:
    """A client for one configured cluster (no request is made yet); the caller closes it.

    It takes the cluster's configuration, not the settings: `--kubeconfig`/`--context` are already
    applied to it (`config.settings_for`), and a rehearsal has a cluster and no settings."""
    from bot.adapters.kube import Cluster

    # A terminal command has no Slack to answer meanwhile: its list helpers run at its own priority.
    return Cluster.connect(cluster, niced_helpers=False)


def kubeconfig_context(kubeconfig: str, context: str | None) -> str:
    """The context a kubeconfig (or a list of them) selects, as kubectl would choose it."""
    from bot.adapters.kube import kubeconfig_context

    return kubeconfig_context(kubeconfig, context)


def slack_directory(settings: Settings) -> SlackDirectory:
    """Slack's users and user groups, asked with the bot token from the settings' environment."""
    from bot.adapters.slack import SlackDirectory, make_web_client

    settings.secrets.require("SLACK_BOT_TOKEN")
    return SlackDirectory(make_web_client(settings.secrets.bot_token, settings.secrets.api_url))


def sim_aws(workdir: Path, key: str) -> None:
    """Credentials for a sim's AWS APIs, which take any (`key` as the access key and its secret):
    no session token or profile, and config files and instance metadata that cannot answer, so
    the team's real ones are neither sent to the sim nor needed."""
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(
        AWS_ACCESS_KEY_ID=key,
        AWS_SECRET_ACCESS_KEY=key,
        AWS_CONFIG_FILE=str(workdir / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(workdir / "no-aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
    )
