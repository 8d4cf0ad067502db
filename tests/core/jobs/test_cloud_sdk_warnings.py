"""A plan whose actions call a cloud (eks-update-*, aks-upgrade-*, gke-update-*) on a bot without
that cloud's SDK extra: one line per cloud naming the SDK and the extra; the plan's checks and its
other actions are not counted (a check says itself what it did not see)."""

from __future__ import annotations

from bot.core.jobs.preflight import sdk_warnings
from bot.core.runs.plans import Plan, parse_plan, read_plan_file
from tests.support.plans import PLANS


def _plan(name: str) -> Plan:
    path = PLANS / f"{name}.yaml"
    return parse_plan(read_plan_file(path), source=path.name)


def test_a_plans_cloud_actions_without_their_sdk_name_the_extra_to_install() -> None:
    lacking = {"aks": "azure-mgmt-containerservice is not installed"}
    assert sdk_warnings(_plan("aks-managed"), missing=lambda cloud: lacking.get(cloud, "")) == [
        "the plan's AKS actions (aks-upgrade-control-plane, aks-upgrade-nodepool) need "
        "azure-mgmt-containerservice, which this bot does not have (pip install 'upgrade-bot[aks]')"
    ]
    (eks,) = sdk_warnings(_plan("eks-managed"), missing=lambda cloud: "no boto3")
    assert eks.startswith(
        "the plan's EKS actions (eks-update-nodegroup, eks-update-cluster, eks-update-addon)"
    )
    assert eks.endswith("need boto3, which this bot does not have (pip install 'upgrade-bot[aws]')")
    # With the SDK there is nothing to say.
    assert sdk_warnings(_plan("gke-managed"), missing=lambda cloud: "") == []


def test_checks_and_actions_that_need_no_cloud_are_not_warned_about() -> None:
    # eks-nodegroups has EKS checks and wait-nodegroup (which shows a CloudFormation stack when it
    # can), but no action that cannot run without boto3.
    assert sdk_warnings(_plan("eks-nodegroups"), missing=lambda cloud: "no SDK at all") == []
