"""`Cluster`, the kube adapter as the bot uses it: the transport, lists, watches and writes of the
modules beside this one, built from a cluster's configuration by `connect`."""

from __future__ import annotations

import urllib3

from bot.adapters.kube.kubeconfig import _current_context, check_kubeconfig
from bot.adapters.kube.lean import _kubernetes
from bot.adapters.kube.transport import RequestObserver
from bot.adapters.kube.watch import Watches
from bot.adapters.kube.writes import Writes
from bot.errors import ConfigError
from bot.records import ClusterConfig


class Cluster(Writes, Watches):
    """One cluster's API server, reached through the official client's transport."""

    @classmethod
    def connect(cls, config: ClusterConfig, *, observe: RequestObserver | None = None) -> Cluster:
        """Build a client for `config` (no request is made yet); `observe` is told of every
        request it makes (verb, result, seconds to the response's headers)."""
        kube = _kubernetes()
        configuration = kube.client.Configuration()
        if not config.in_cluster:
            check_kubeconfig(str(config.kubeconfig), cluster=config.name)
        try:
            if config.in_cluster:
                kube.config.load_incluster_config(client_configuration=configuration)
            else:
                kube.config.load_kube_config(
                    config_file=str(config.kubeconfig),
                    context=config.context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (kube.ConfigException, OSError, TypeError) as exc:
            where = (
                "in-cluster config" if config.in_cluster else f"{config.kubeconfig} context {config.context}"
            )
            raise ConfigError(f"cluster {config.name}: cannot load {where}: {exc}") from None
        # One quick retry for a reset connection; an unreachable server must fail within the timeout.
        configuration.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0)
        api_client = kube.client.ApiClient(configuration)
        context = config.context or ("in-cluster" if config.in_cluster else _current_context(config))
        return cls(config.name, api_client, timeout=config.request_timeout, context=context, observe=observe)
