"""The clouds' API facades, registered per provider: each serves one cloud's API on loopback for
that cloud's real SDK (EKS's for boto3, AKS's ARM surface for azure-mgmt-containerservice, GKE's
REST surface for google-cloud-container).

A facade is built from its scenario section (`aws:` for EKS) over the simulated world (the
`Cloud`'s control plane and node groups, the engine's clock), and served under its own prefix of
the sim's one HTTP server. A scenario may name several; one without a cloud section has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.sim.apiserver.server import SimHTTPServer
from bot.sim.controllers.engine import Engine
from bot.sim.world import aws, azure, gke
from bot.sim.world.cloud import Cloud

Obj = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Facade:
    """One cloud's facade: the provider it stands for (`eks`), the scenario section it is built
    from, the URL prefix it answers under, how it is built and how it is served."""

    provider: str
    section: str
    prefix: str
    build: Callable[[Cloud, Engine, Obj, str], Any]
    register: Callable[[SimHTTPServer, Any], None]


def _eks(cloud: Cloud, engine: Engine, spec: Obj, name: str) -> aws.AwsWorld:
    return aws.AwsWorld(cloud, engine, spec, default_name=name)


def _aks(cloud: Cloud, engine: Engine, spec: Obj, name: str) -> azure.AzureWorld:
    return azure.AzureWorld(cloud, engine, spec, default_name=name)


def _gke(cloud: Cloud, engine: Engine, spec: Obj, name: str) -> gke.GkeWorld:
    return gke.GkeWorld(cloud, engine, spec, default_name=name)


#: The facades the sim knows, one per provider.
FACADES: tuple[Facade, ...] = (
    Facade(provider="eks", section="aws", prefix=aws.PREFIX, build=_eks, register=aws.register),
    Facade(provider="aks", section="azure", prefix=azure.PREFIX, build=_aks, register=azure.register),
    Facade(provider="gke", section="gcp", prefix=gke.PREFIX, build=_gke, register=gke.register),
)
BY_PROVIDER = {f.provider: f for f in FACADES}
