"""A write made inside this replica's lease ends within the figure the lease was checked against
(issue 38): the kube adapter's writes inside `Cluster.within`, and the EKS update calls of a client
built with `update_within` — not after the 60 s read timeout of a write, or botocore's 30 s.

Against the sim's API server made slow (the real kubernetes client), and a loopback server that
takes the request and never answers (botocore's own client)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.providers import call_timeouts
from bot.adapters.providers import eks as aws
from bot.errors import ClusterUnreachable
from bot.records import ClusterConfig, EksProvider
from bot.sim import SimCluster
from tests.support.aws import aws_env


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("small", speed=0.0, seed=1)


@pytest.fixture
def cluster(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim)))
    yield cluster
    cluster.close()


def first_node(cluster: Cluster) -> str:
    return str(cluster.get_json("/api/v1/nodes")["items"][0]["metadata"]["name"])


def test_a_write_inside_within_gives_up_by_its_deadline_not_the_read_timeout(
    sim: SimCluster, cluster: Cluster
) -> None:
    node = first_node(cluster)
    sim.control.set_transport(latency=4.0, path_prefix="/api/v1/nodes")
    try:
        began = time.monotonic()
        with pytest.raises(ClusterUnreachable), cluster.within(1.0):
            cluster.cordon(node)
        assert time.monotonic() - began < 2.5
        # Outside `within` the same slow write waits for its answer (the read timeout is 60 s).
        assert cluster.uncordon(node)["metadata"]["name"] == node
    finally:
        sim.control.set_transport()


def test_a_request_with_no_time_left_is_not_sent(sim: SimCluster, cluster: Cluster) -> None:
    node = first_node(cluster)
    with pytest.raises(ClusterUnreachable, match="no time left"), cluster.within(0.0):
        cluster.cordon(node)
    assert not (cluster.get_json(f"/api/v1/nodes/{node}").get("spec") or {}).get("unschedulable")


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback port that takes connections (the kernel's backlog) and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_an_eks_update_call_gives_up_within_the_figure_checked(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key, value in aws_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    provider = EksProvider(name="prod", region="eu-west-1", endpoint_url=silent_endpoint)
    eks = aws.connect(provider, update_within=1.0)
    began = time.monotonic()
    with pytest.raises(aws.AwsError):
        eks.update_nodegroup_version("ng-shared", version="1.25", force=False, token="t-1")
    assert time.monotonic() - began < 2.5


def test_an_update_call_connects_in_a_quarter_of_its_figure_at_most_and_reads_in_what_is_left() -> None:
    # The EKS and AKS clients' figures: 5 s to connect, 30 s to read.
    assert call_timeouts(None, 5.0, 30.0) == (5.0, 30.0)
    assert call_timeouts(8.0, 5.0, 30.0) == (2.0, 6.0)
    assert call_timeouts(20.0, 5.0, 30.0) == (5.0, 15.0)
    assert call_timeouts(120.0, 5.0, 30.0) == (5.0, 30.0)


def test_an_eviction_a_budget_refuses_is_no_warning_in_the_log(
    sim: SimCluster, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A drain retries a budget's 429 every few seconds and says so once in the run's thread: a
    warning for each one filled an interactive rehearsal's transcript and every operator's log.
    (The sim's transport answers the eviction 429, as the eviction API does for a budget at 0.)"""
    from bot.errors import EvictionBlocked

    pod = cluster.get_json("/api/v1/namespaces/default/pods")["items"][0]["metadata"]["name"]
    sim.control.set_transport(
        error_rate=1.0, error_status=429, path_prefix="/api/v1/namespaces/default/pods/"
    )
    try:
        with caplog.at_level("INFO", logger="bot.adapters.kube.transport"), pytest.raises(EvictionBlocked):
            cluster.evict("default", pod)
    finally:
        sim.control.set_transport()
    [said] = [r for r in caplog.records if "/eviction" in r.getMessage()]
    assert said.levelname == "INFO"
    assert "→ 429" in said.getMessage()
