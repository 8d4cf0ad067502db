"""The EKS checks' verdicts over what the EKS, EC2 and Auto Scaling APIs answer (botocore's shapes).

The end-to-end path (boto3 against the sim's AWS APIs, through `check`) is in
tests/acceptance/test_eks_checks_on_the_eks_scenario.py; these cover the states the scenario does
not plant: an updating control plane, a target two minors up, degraded groups and add-ons.
"""

from __future__ import annotations

from bot.core.checks import eks
from bot.core.checks.findings import RECOMMENDED, REQUIRED


def test_an_updating_control_plane_and_a_skipped_minor_are_required() -> None:
    cluster = {
        "name": "prod",
        "version": "1.24",
        "status": "UPDATING",
        "health": {"issues": [{"code": "SubnetNotFound", "message": "subnet-1 is gone"}]},
    }
    found = eks.check_control_plane(cluster, "1.26")
    assert [(f.id, f.severity) for f in found] == [("EKS002", REQUIRED), ("EKS002", REQUIRED)]
    assert found[0].objects == ("EKS cluster prod: UPDATING (SubnetNotFound: subnet-1 is gone)",)
    assert found[1].title == "EKS updates one minor version at a time: 1.24 cannot go to 1.26"
    assert eks.check_control_plane({**cluster, "status": "ACTIVE", "health": {"issues": []}}, "1.25") == []


def test_degraded_node_groups_and_add_ons_name_their_issues() -> None:
    groups = [
        {
            "nodegroupName": "ng-a",
            "version": "1.24",
            "status": "DEGRADED",
            "health": {"issues": [{"code": "Ec2LaunchTemplateNotFound", "message": "lt-1 not found"}]},
        },
        {"nodegroupName": "ng-b", "version": "1.24", "status": "ACTIVE", "health": {"issues": []}},
    ]
    (degraded,) = eks.check_nodegroups(groups, "1.24")
    assert (degraded.id, degraded.objects) == (
        "EKS003",
        ("Node group ng-a: DEGRADED (Ec2LaunchTemplateNotFound: lt-1 not found)",),
    )
    addons = [
        {"addonName": "vpc-cni", "addonVersion": "v1.12.6-eksbuild.2", "status": "DEGRADED", "health": {}}
    ]
    offered = {"vpc-cni": [{"addonVersion": "v1.12.6-eksbuild.2", "compatibilities": []}]}
    (addon,) = eks.check_addons(addons, offered, "1.25")
    assert (addon.id, addon.severity, addon.objects) == (
        "EKS004",
        REQUIRED,
        ("Add-on vpc-cni v1.12.6-eksbuild.2: DEGRADED",),
    )


def test_an_add_on_eks_offers_nothing_for_says_so() -> None:
    addons = [{"addonName": "old-thing", "addonVersion": "v1.0.0", "status": "ACTIVE"}]
    (finding,) = eks.check_addons(addons, {"old-thing": []}, "1.25")
    assert finding.id == "EKS005"
    assert finding.fix == "EKS offers no version of old-thing for 1.25: find out whether it is still needed."


def test_insights_by_status_and_passing_ones_as_notes() -> None:
    notes: list[str] = []
    insights = [
        {"id": "1", "name": "A", "insightStatus": {"status": "ERROR", "reason": "r"}, "recommendation": "do"},
        {"id": "2", "name": "B", "insightStatus": {"status": "WARNING", "reason": ""}},
        {"id": "3", "name": "C", "insightStatus": {"status": "UNKNOWN", "reason": ""}},
    ]
    found = eks.check_insights(insights, notes)
    assert [(f.severity, f.objects) for f in found] == [
        (REQUIRED, ("EKS insight A (1)",)),
        (RECOMMENDED, ("EKS insight B (2)",)),
    ]
    assert notes == ["EKS insight C: UNKNOWN"]


def test_subnets_asgs_and_launch_templates() -> None:
    subnets = [
        {"SubnetId": "subnet-a", "AvailabilityZone": "eu-west-1a", "AvailableIpAddressCount": 5},
        {"SubnetId": "subnet-b", "AvailabilityZone": "eu-west-1b", "AvailableIpAddressCount": 4},
    ]
    (short,) = eks.check_control_plane_subnets(subnets)
    assert short.objects == ("Subnet subnet-b (eu-west-1b): 4 free",)
    assert eks.check_node_subnets(subnets, pods=4, nodes=5) == []
    (few,) = eks.check_node_subnets(subnets, pods=5, nodes=5)
    assert few.title == "Node and pod subnets have 9 free IP addresses; the node-group updates need about 10"
    asgs = [
        {"AutoScalingGroupName": "live", "Instances": [{"InstanceId": "i-1"}], "DesiredCapacity": 1},
        {"AutoScalingGroupName": "orphan", "Instances": [{"InstanceId": "i-9"}], "DesiredCapacity": 1},
    ]
    (orphan,) = eks.check_asgs(asgs, {"i-1"})
    assert orphan.objects == ("Auto Scaling group orphan: 1 instances, desired 1",)
    groups = [
        {"nodegroupName": "a", "launchTemplate": {"id": "lt-1", "name": "t1", "version": "2"}},
        {"nodegroupName": "b", "launchTemplate": {"id": "lt-2", "name": "t2", "version": "3"}},
        {"nodegroupName": "c"},
    ]
    (drift,) = eks.check_launch_templates(groups, {"lt-1": 3, "lt-2": 3})
    assert drift.objects == ("Node group a: launch template t1 version 2, latest 3",)
