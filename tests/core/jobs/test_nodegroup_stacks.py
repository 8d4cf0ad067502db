"""CloudFormation as evidence on `wait-nodegroup` (issue 43 item 3): the real kube adapter on the
sim's API server and boto3's real `cloudformation` client on the sim's AWS APIs, a stack failure
planted through the sim's knob mid-wait."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.providers import eks as aws
from bot.core.jobs.eks import EksAccess
from bot.core.jobs.registry import default_jobs
from bot.core.jobs.waitgroup import WaitNodeGroupJob
from bot.records import ClusterConfig, EksProvider
from bot.sim import SimCluster
from tests.support.aws import EKS_NAME, REGION, aws_calls, aws_env, eks_scenario_in_step
from tests.support.jobs import JobDriver

LABELS = ("eks.amazonaws.com/nodegroup",)
REASON = (
    'Resource handler returned message: "[Issue(Code=AsgInstanceLaunchFailures, Message=Could not '
    "launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
    'm5.2xlarge capacity in the Availability Zone you requested (ap-northeast-1a).)]"'
)


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in aws_env(tmp_path).items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory(eks_scenario_in_step(), speed=0.0, seed=1)


@pytest.fixture
def kube(sim: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=sim_kubeconfig(sim), context="sim"))
    yield cluster
    cluster.close()


def access(sim: SimCluster) -> EksAccess:
    return EksAccess({"prod": EksProvider(name=EKS_NAME, region=REGION, endpoint_url=sim.aws_url)})


def sim_now(sim: SimCluster) -> Callable[[], datetime]:
    return lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)


def plant_stack_failure(sim: SimCluster, nodegroup: str, reason: str) -> None:
    request = urllib.request.Request(
        f"{sim.aws_url}/sim/stack-failure",
        data=json.dumps({"nodegroup": nodegroup, "reason": reason}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def test_boto3_reads_an_eksctl_node_group_stack_and_its_failing_event(sim: SimCluster) -> None:
    eks = aws.connect(EksProvider(name=EKS_NAME, region=REGION, endpoint_url=sim.aws_url))
    name = f"eksctl-{EKS_NAME}-nodegroup-istio"
    stack = eks.stack(name)
    assert stack is not None
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert isinstance(stack["CreationTime"], datetime)
    assert eks.stack("eksctl-runbook-prod-nodegroup-nonesuch") is None
    plant_stack_failure(sim, "istio", REASON)
    stack = eks.stack(name)
    assert stack is not None
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    events = eks.stack_events(name)
    assert events[0]["ResourceStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    failed = [e for e in events if e["ResourceStatus"] == "UPDATE_FAILED"]
    assert [e["ResourceStatusReason"] for e in failed] == [REASON]
    assert isinstance(failed[0]["Timestamp"], datetime)


def test_a_stack_failure_during_wait_nodegroup_appears_on_the_card_with_the_failing_event(
    sim: SimCluster, kube: Cluster
) -> None:
    job = default_jobs(LABELS, eks=access(sim)).get("wait-nodegroup")
    assert job is not None
    now = sim_now(sim)
    d = JobDriver(job, kube, {"nodegroup": "istio", "version": "1.25.16", "timeout": "30m"}, now=now)
    d.tick()
    assert d.last is not None
    assert not d.done
    assert f"CloudFormation eksctl-{EKS_NAME}-nodegroup-istio: CREATE_COMPLETE" in d.last.card
    assert not [k for k in d.posts if k.startswith("stack-failed:")]

    plant_stack_failure(sim, "istio", REASON)
    sim.control.advance(31)  # past the stack's read interval
    d.tick()
    card = "\n".join(d.last.card)
    assert f":x: CloudFormation eksctl-{EKS_NAME}-nodegroup-istio: UPDATE_ROLLBACK_COMPLETE" in card
    assert "failing event: ManagedNodeGroup (AWS::EKS::Nodegroup) UPDATE_FAILED: Resource handler" in card
    assert "InsufficientInstanceCapacity" in card
    assert not d.done  # evidence, not a verdict: the wait goes on
    thread = [t for k, t in d.posts.items() if k.startswith("stack-failed:")]
    assert len(thread) == 1
    assert "node group istio" in thread[0]
    assert "InsufficientInstanceCapacity" in thread[0]

    # Read again later: the same event is not said twice, the card still shows it.
    sim.control.advance(31)
    d.tick()
    assert len([k for k in d.posts if k.startswith("stack-failed:")]) == 1
    assert any("failing event:" in line for line in d.last.card)


def test_the_stack_is_read_at_most_every_30_seconds(sim: SimCluster, kube: Cluster) -> None:
    job = WaitNodeGroupJob(LABELS, stacks=access(sim))
    d = JobDriver(job, kube, {"nodegroup": "istio", "version": "1.25.16"}, now=sim_now(sim))
    for _ in range(3):
        d.tick()
    assert aws_calls(sim).get("DescribeStacks") == 1
    sim.control.advance(31)
    d.tick()
    assert aws_calls(sim).get("DescribeStacks") == 2


def test_a_cluster_without_an_eks_provider_shows_no_stack(sim: SimCluster, kube: Cluster) -> None:
    job = default_jobs(LABELS).get("wait-nodegroup")
    assert job is not None
    d = JobDriver(job, kube, {"nodegroup": "istio", "version": "1.25.16"}, now=sim_now(sim))
    d.tick()
    assert d.last is not None
    assert not [line for line in d.last.card if "CloudFormation" in line]
    assert "DescribeStacks" not in aws_calls(sim)


def test_a_named_stack_that_does_not_exist_shows_nothing(sim: SimCluster, kube: Cluster) -> None:
    job = WaitNodeGroupJob(LABELS, stacks=access(sim))
    d = JobDriver(
        job, kube, {"nodegroup": "istio", "version": "1.25.16", "stack": "terraform-istio"}, now=sim_now(sim)
    )
    d.tick()
    assert d.last is not None
    assert not [line for line in d.last.card if "CloudFormation" in line]
    # Asked once, not on every tick.
    d.tick()
    assert aws_calls(sim).get("DescribeStacks") == 1
