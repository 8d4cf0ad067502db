"""The provider port's adapters (`bot.core.providers`): one module per cloud, each importing its
cloud's SDK only when a cluster names that cloud (the SDK is the cloud's optional extra), and what
they share: why an SDK cannot be imported, an update call's timeouts, and what AKS and GKE leave
unanswered alike."""

from __future__ import annotations

import abc
import importlib
from collections.abc import Sequence
from typing import Any

from bot.errors import ProviderError
from bot.records import Operation, SubnetCapacity

Obj = dict[str, Any]


def not_importable(package: str, hint: str, *modules: str) -> str:
    """Why a cloud's SDK cannot be imported, for people ("" when it can): `package` is not
    installed (`hint`: the extra that installs it), as the first of `modules` that fails to import
    says — what the adapter's `connect` refuses with."""
    try:
        for module in modules:
            importlib.import_module(module)
    except ImportError as exc:
        return f"{package} is not installed ({hint}): {exc}"
    return ""


def call_timeouts(update_within: float | None, connect: float, read: float) -> tuple[float, float]:
    """The seconds a call may take to connect and to read its answer: the SDK's `connect` and
    `read`, or, for an update call that must end within `update_within` (the lease's figure,
    `bot.core.tenure`) in one attempt, connect and read adding up to no more than that: at most a
    quarter of it to connect."""
    if update_within is None:
        return connect, read
    connect_s = min(connect, update_within / 4)
    return connect_s, min(read, update_within - connect_s)


class FollowsControlPlane(abc.ABC):
    """What AKS and GKE answer alike where the port asks more of them than they say: their add-ons
    follow the control plane (none listed, none offered; reading or updating one is refused with
    the cloud's own error, `_managed`), the port's subnet capacity is not read from them (none), and
    a snapshot does not capture their side (None: the snapshot says its provider section is
    missing, `bot.core.snapshots.provider`, and its twin has no cloud side of its own)."""

    @abc.abstractmethod
    def _managed(self, addon: str) -> ProviderError:
        """The cloud's refusal of a call about `addon`, which it manages with its control plane."""

    def addons(self) -> list[Obj]:
        return []

    def addon(self, name: str) -> Obj:
        raise self._managed(name)

    def addon_versions(self, addon: str, kubernetes_version: str) -> list[Obj]:
        return []

    def update_addon_version(self, addon: str, *, version: str, conflicts: str, token: str) -> Operation:
        raise self._managed(addon)

    def capacity(self, subnet_ids: list[str]) -> list[SubnetCapacity]:
        return []

    def describe_for_snapshot(self, minors: Sequence[str]) -> Obj | None:
        return None
