"""`Cluster`, the kube adapter as the bot uses it: the transport, lists, watches and writes of the
modules beside this one, built from a cluster's configuration by `connect`."""

from __future__ import annotations

import os

import urllib3

from bot.adapters.kube.kubeconfig import kubeconfig_context
from bot.adapters.kube.lean import _kubernetes
from bot.adapters.kube.transport import RequestObserver
from bot.adapters.kube.watch import Watches
from bot.adapters.kube.writes import Writes
from bot.errors import ConfigError
from bot.records import ClusterConfig


class Cluster(Writes, Watches):
    """One cluster's API server, reached through the official client's transport."""

    @classmethod
    def connect(
        cls, config: ClusterConfig, *, observe: RequestObserver | None = None, niced_helpers: bool = True
    ) -> Cluster:
        """Build a client for `config` (no request is made yet); `observe` is told of every
        request it makes (verb, result, seconds to the response's headers); `niced_helpers`: see
        `Transport.niced_helpers`."""
        kube = _kubernetes()
        configuration = kube.client.Configuration()
        if config.in_cluster:
            context = "in-cluster"
            _check_in_a_pod(config.name)
        else:
            # The context by name, or what is wrong with it in the configuration's words (the
            # client's "Expected object with name … in …/contexts list" names no entry).
            context = kubeconfig_context(str(config.kubeconfig), config.context, cluster=config.name)
        try:
            if config.in_cluster:
                kube.config.load_incluster_config(client_configuration=configuration)
            else:
                kube.config.load_kube_config(
                    config_file=str(config.kubeconfig),
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (kube.ConfigException, OSError, TypeError) as exc:
            where = "in-cluster config" if config.in_cluster else f"{config.kubeconfig} context {context}"
            raise ConfigError(f"cluster {config.name}: cannot load {where}: {exc}") from None
        # One quick retry for a reset connection; an unreachable server must fail within the timeout.
        configuration.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0)
        api_client = kube.client.ApiClient(configuration)
        return cls(
            config.name,
            api_client,
            timeout=config.request_timeout,
            context=context,
            observe=observe,
            niced_helpers=niced_helpers,
        )


def _check_in_a_pod(cluster: str) -> None:
    """`in_cluster: true` reads the pod's service account, and finds the API server by the
    variables Kubernetes sets in every pod; without them this process is not in one (the client
    says only "Service host/port is not set")."""
    if not (os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT")):
        raise ConfigError(
            f"clusters.{cluster}.in_cluster: this process is not running in a Kubernetes pod "
            "(KUBERNETES_SERVICE_HOST is not set); outside a pod, name a `kubeconfig` and `context` instead"
        )
