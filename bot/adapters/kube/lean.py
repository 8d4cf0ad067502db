"""The lean import: the `kubernetes` package is imported on first use, whole, as a plain import does."""

from __future__ import annotations

import types
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class _Client:
    """The parts of the `kubernetes` package the adapter uses, once it is imported."""

    client: types.ModuleType
    config: types.ModuleType
    ApiException: type[Exception]
    ConfigException: type[Exception]


@cache
def _kubernetes() -> _Client:
    """`import kubernetes`, the first time a cluster is connected to or a kubeconfig read.

    Importing the package runs its __init__, which imports every API group and all 800 model
    classes: 0.22–0.25 s of CPU and 65 MB of resident memory (2026-11-30, 2 cores), for a transport
    that uses none of them (bodies stay raw, see above); 0.25–0.28 s and 69 MB where
    `kubernetes_validate` (a dev tool) is installed, because the package's dynamic client imports it
    when it can. A plain import deferred to first use is what the package supports, so a command
    that never reaches a cluster (help, rules, plan validation, the Slack door before its first
    cluster command) pays nothing, and no version-specific surgery on the package's modules can
    break with a new client release. The import lock makes concurrent first calls safe.
    """
    import kubernetes.client
    import kubernetes.config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException

    return _Client(kubernetes.client, kubernetes.config, ApiException, ConfigException)


def preload() -> None:
    """Import the package now. A served bot does it as it starts, in the background: the import
    holds the interpreter lock for long stretches (unmarshalling its modules' code), and a
    restarted bot whose watches all connect at once in their first burst of events would hold
    its acks behind it instead."""
    _kubernetes()
