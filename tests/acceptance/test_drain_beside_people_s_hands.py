"""The drain job beside people changing the cluster by hand (a walk of upgrade day): a node
uncordoned while it is drained, a node deleted while it is drained, and an API server that stops
answering mid-drain. Against the simulated cluster over HTTP, with the person's real kubectl."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.restart import RESTARTED_AT, RestartJob
from bot.errors import ClusterUnreachable
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.support.backends import KUBECTL
from tests.support.jobs import JobDriver

LABELS = ("eks.amazonaws.com/nodegroup",)


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("small", speed=0.0, seed=1)


@pytest.fixture
def kubeconfig(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Path:
    return sim_kubeconfig(sim)


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    yield cluster
    cluster.close()


def kubectl(kubeconfig: Path, *args: str) -> str:
    done = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def busiest_worker(kube: Cluster) -> str:
    """The worker node with the most pods that a drain evicts (web's, with its budget)."""
    pods = kube.get_json("/api/v1/namespaces/default/pods")["items"]
    on = [
        p["spec"].get("nodeName", "") for p in pods if (p["metadata"].get("labels") or {}).get("app") == "web"
    ]
    return max(set(on), key=on.count)


def drain(sim: SimCluster, kube: Cluster, node: str) -> JobDriver:
    now = lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)  # noqa: E731
    return JobDriver(DrainJob(LABELS), kube, {"node": node, "timeout": "30m", "parallel": "1"}, now=now)


def evictions(sim: SimCluster) -> int:
    return len(sim.control.evictions())


def test_a_node_uncordoned_while_drained_is_not_evicted_from_until_it_is_cordoned_again(
    sim: SimCluster, kube: Cluster, kubeconfig: Path
) -> None:
    """Its evicted pods were scheduled straight back onto it and evicted again: 668 evictions in
    two minutes, the thread silent, until someone cordoned it by hand."""
    node = busiest_worker(kube)
    d = drain(sim, kube, node)
    d.tick()  # cordoned
    d.tick()  # its pods listed, intents stored
    kubectl(kubeconfig, "uncordon", node)
    before = evictions(sim)
    for _ in range(5):
        d.tick()
        sim.control.advance(5)
    assert evictions(sim) == before
    (said,) = [t for k, t in d.posts.items() if k.startswith("drain-uncordoned:")]
    assert said.startswith(f":warning: node {node} is schedulable again (uncordoned outside the bot)")
    assert f"nothing is evicted until it is cordoned again (`kubectl cordon {node}`)" in said
    kubectl(kubeconfig, "cordon", node)
    for _ in range(60):
        d.tick()
        if d.done:
            break
        sim.control.advance(5)
    assert d.done, d.last
    assert d.posts[f"drain-recordoned:{node}:1"] == f"node {node} is cordoned again: its drain goes on"
    assert d.posts[f"drained:{node}"].startswith(f"node {node} drained: ")
    assert evictions(sim) - before <= 3  # each web pod once, not over and over


def test_a_node_deleted_while_drained_is_not_reported_as_drained_by_the_bot(
    sim: SimCluster, kube: Cluster, kubeconfig: Path
) -> None:
    node = busiest_worker(kube)
    d = drain(sim, kube, node)
    d.tick()
    d.tick()
    kubectl(kubeconfig, "delete", "node", node)
    d.tick()
    assert d.done
    assert d.posts[f"drained:{node}"].startswith(
        f":warning: node {node} was deleted while it was being drained, not by the bot: "
    )
    assert d.posts[f"drained:{node}"].endswith(
        " pod(s) the bot had not evicted went with it, their disruption budgets not asked by the bot"
    )
    assert d.last is not None
    assert d.last.detail == f"drained 0 node(s); 1 removed outside the bot, not drained by it: {node}"


def test_an_api_server_that_stops_answering_mid_drain_is_the_cluster_unreachable(
    sim: SimCluster, kube: Cluster
) -> None:
    """Evictions refused at the connection were each one "evicting … refused …; retrying" line while
    the card, read from the watch cache, stayed silent: the tick now raises, and the job service
    says on the card and the thread that the cluster does not answer."""
    node = busiest_worker(kube)
    d = drain(sim, kube, node)
    d.tick()
    d.tick()
    sim.stop()
    with pytest.raises(ClusterUnreachable):
        d.tick()
    assert not [k for k in d.posts if k.startswith("drain-evict-error:")]


def test_a_second_budget_over_the_same_pods_is_named_and_the_question_says_waiting_does_not_help(
    sim: SimCluster, kube: Cluster, kubeconfig: Path, tmp_path: Path
) -> None:
    """A budget added by hand over pods another already selects: the eviction API answers 500 for
    as long as both do, and the thread and the stalled drain's question read as a plain budget wait."""
    strict = tmp_path / "strict.yaml"
    strict.write_text(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web-strict, namespace: default}\n"
        "spec: {maxUnavailable: 0, selector: {matchLabels: {app: web}}}\n"
    )
    kubectl(kubeconfig, "apply", "-f", str(strict))
    node = busiest_worker(kube)
    now = lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)  # noqa: E731
    d = JobDriver(DrainJob(LABELS), kube, {"node": node, "timeout": "5m", "parallel": "1"}, now=now)
    for _ in range(80):
        d.tick()
        if d.choice is not None:
            break
        sim.control.advance(10)
    said = [t for k, t in d.posts.items() if k.startswith("drain-evict-error:")]
    assert said, d.posts
    assert said[0].startswith(f":warning: {node}: default/web-")
    assert (
        " is selected by 2 PodDisruptionBudgets (default/web, default/web-strict): the eviction API "
        in said[0]
    )
    assert d.choice is not None
    assert "selected by several PodDisruptionBudgets" in d.choice.question
    assert "waiting alone does not help" in d.choice.question


def test_a_restart_someone_just_made_by_hand_is_followed_not_made_again(
    sim: SimCluster, kube: Cluster, kubeconfig: Path
) -> None:
    """`kubectl rollout restart` at the gate, then the approval: the bot restarted it again, every pod
    replaced twice, and the thread did not say so."""
    now = lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)  # noqa: E731
    kubectl(kubeconfig, "rollout", "restart", "deployment/web", "-n", "default")
    path = "/apis/apps/v1/namespaces/default/deployments/web"
    by_hand = kube.get_json(path)["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT]
    # kubectl stamps the wall clock's second, the job its plan's moment on the sim's clock: planned a
    # second or two after it (never in the same second, which would read as the job's own stamp).
    ahead = (datetime.fromisoformat(by_hand.replace("Z", "+00:00")) - now()).total_seconds()
    sim.control.advance(max(1.0, ahead + 1.5))
    job = RestartJob()
    d = JobDriver(job, kube, {"workloads": "deployment/default/web", "timeout": "15m"}, now=now)
    (line,) = job.dry_run(kube, d.progress)
    assert line == (
        f"would NOT restart deployment/default/web: restarted at {by_hand}, not by this step, and its rollout "
        "is recent; that rollout is followed instead"
    )
    for _ in range(60):
        d.tick()
        if d.done:
            break
        sim.control.advance(5)
    assert d.last is not None
    assert d.done
    assert d.last.ok, d.last
    assert d.posts["restarted:deployment/default/web"] == (
        f"deployment/default/web was restarted at {by_hand}, not by this step, and its rollout is recent: "
        "following that rollout, not restarting it again"
    )
    assert kube.get_json(path)["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT] == by_hand
    # Rolled out: a later restart step restarts it as asked.
    again = JobDriver(job, kube, {"workloads": "deployment/default/web"}, now=now)
    again.tick()
    assert kube.get_json(path)["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT] != by_hand
