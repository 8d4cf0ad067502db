"""The contract suite's `backend` fixture: every test runs on the sim and on the real control plane.

`sim` is a fresh `small` sim at speed 20 per test; `real` is the session's testbed (marked
`testbed`, so `-m "not testbed"` runs the sim half alone) with a fresh namespace per test and the
bot's adapter authenticated as the ServiceAccount of deploy/rbac.yaml. See tests/support/backends.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.sim import SimCluster
from tests.support.backends import OPT_IN, Backend, RealBackend, SimBackend, bot_role_kubeconfig
from tests.support.testbed import RealCluster


@pytest.fixture(scope="session")
def bot_role(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig for the bot's ServiceAccount, bound to deploy/rbac.yaml's roles and its opt-in
    ones for pod logs and pod deletes (the drains' delete choice runs here)."""
    return bot_role_kubeconfig(
        real_cluster, tmp_path_factory.mktemp("bot-role") / "kubeconfig", opt_in=OPT_IN
    )


@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.testbed)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    chosen: Backend
    if request.param == "sim":
        start: Callable[..., SimCluster] = request.getfixturevalue("sim_factory")
        chosen = SimBackend(start("small", speed=20.0, seed=1), tmp_path)
    else:
        real: RealCluster = request.getfixturevalue("real_cluster")
        chosen = RealBackend(real, request.getfixturevalue("bot_role"), tmp_path)
    try:
        yield chosen
    finally:
        chosen.close()
