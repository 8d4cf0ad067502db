"""The AWS APIs of the EKS scenario, as botocore's own clients see them on loopback.

The real boto3 clients serialise every request from botocore's service models and parse every
answer against them, so these tests check the facade's wire shapes as much as its answers.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from bot.sim import SimCluster
from bot.sim.world.scenario import load_scenario

CLUSTER = "runbook-prod"


def clients(sim: SimCluster) -> tuple[Any, Any, Any]:
    kw = {
        "region_name": "ap-northeast-1",
        "endpoint_url": sim.aws_url,
        "aws_access_key_id": "sim",
        "aws_secret_access_key": "sim",
    }
    return boto3.client("eks", **kw), boto3.client("ec2", **kw), boto3.client("autoscaling", **kw)


def calls(sim: SimCluster) -> dict[str, int]:
    with urllib.request.urlopen(f"{sim.aws_url}/sim/calls", timeout=10) as response:
        return dict(json.load(response))


def test_a_scenario_without_a_cloud_serves_no_aws(sim_factory: Callable[..., SimCluster]) -> None:
    assert sim_factory("small", speed=0.0).aws_url is None


def test_list_clusters_names_the_scenario_s_cluster_as_aws_eks_list_clusters_asks(
    sim_eks: SimCluster,
) -> None:
    eks, _, _ = clients(sim_eks)
    assert eks.list_clusters()["clusters"] == [CLUSTER]
    # Paged as EKS pages it: botocore's paginator follows nextToken.
    pages = list(eks.get_paginator("list_clusters").paginate(PaginationConfig={"PageSize": 1}))
    assert [c for page in pages for c in page["clusters"]] == [CLUSTER]
    assert calls(sim_eks)["ListClusters"] == 2


def test_node_groups_and_add_ons_come_a_page_at_a_time_as_eks_pages_them(sim_eks: SimCluster) -> None:
    eks, _, _ = clients(sim_eks)
    for operation, key in (("list_nodegroups", "nodegroups"), ("list_addons", "addons")):
        whole = getattr(eks, operation)(clusterName=CLUSTER)[key]
        assert len(whole) > 2, whole
        first = getattr(eks, operation)(clusterName=CLUSTER, maxResults=2)
        assert (first[key], first["nextToken"]) == (whole[:2], "2")
        pages = list(
            eks.get_paginator(operation).paginate(clusterName=CLUSTER, PaginationConfig={"PageSize": 2})
        )
        assert [page[key] for page in pages] == [whole[i : i + 2] for i in range(0, len(whole), 2)]
        # The last page says there is no next one.
        assert "nextToken" not in pages[-1]


def test_the_cluster_node_groups_and_add_ons_read_through_the_eks_client(sim_eks: SimCluster) -> None:
    eks, _, _ = clients(sim_eks)
    cluster = eks.describe_cluster(name=CLUSTER)["cluster"]
    assert (cluster["version"], cluster["status"], cluster["platformVersion"]) == ("1.24", "ACTIVE", "eks.12")
    assert cluster["resourcesVpcConfig"]["subnetIds"] == [
        "subnet-0c0a10000000000a1",
        "subnet-0c0a10000000000c1",
    ]
    groups = eks.list_nodegroups(clusterName=CLUSTER)["nodegroups"]
    assert groups == sorted(sim_eks.control.status()["nodeGroups"])
    others = eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName="others")["nodegroup"]
    assert (others["version"], others["status"], others["scalingConfig"]["desiredSize"]) == (
        "1.22",
        "ACTIVE",
        2,
    )
    shared = eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName="ng-shared")["nodegroup"]
    assert shared["launchTemplate"]["version"] == "2"
    assert eks.list_addons(clusterName=CLUSTER)["addons"] == [
        "aws-ebs-csi-driver",
        "coredns",
        "kube-proxy",
        "vpc-cni",
    ]
    proxy = eks.describe_addon(clusterName=CLUSTER, addonName="kube-proxy")["addon"]
    assert proxy["addonVersion"] == "v1.24.17-minimal-eksbuild.4"
    offered = eks.describe_addon_versions(kubernetesVersion="1.25", addonName="kube-proxy")["addons"]
    assert [v["addonVersion"] for a in offered for v in a["addonVersions"]] == ["v1.25.16-minimal-eksbuild.1"]
    assert offered[0]["addonVersions"][0]["compatibilities"][0]["defaultVersion"] is True
    every = eks.describe_addon_versions(kubernetesVersion="1.25")["addons"]
    assert {a["addonName"] for a in every} == {"aws-ebs-csi-driver", "coredns", "kube-proxy", "vpc-cni"}
    with pytest.raises(ClientError) as missing:
        eks.describe_addon(clusterName=CLUSTER, addonName="no-such-addon")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(eks.exceptions.ResourceNotFoundException):
        eks.describe_cluster(name="another-cluster")


def test_upgrade_insights_filter_by_version_and_status_and_describe_their_details(
    sim_eks: SimCluster,
) -> None:
    eks, _, _ = clients(sim_eks)
    insights = eks.list_insights(clusterName=CLUSTER, filter={"kubernetesVersions": ["1.25"]})["insights"]
    assert [i["insightStatus"]["status"] for i in insights] == ["ERROR", "WARNING", "PASSING"]
    failing = eks.list_insights(clusterName=CLUSTER, filter={"statuses": ["ERROR"]})["insights"]
    assert [i["name"] for i in failing] == ["Deprecated APIs removed in Kubernetes v1.25"]
    assert eks.list_insights(clusterName=CLUSTER, filter={"kubernetesVersions": ["1.26"]})["insights"] == []
    detail = eks.describe_insight(clusterName=CLUSTER, id=failing[0]["id"])["insight"]
    usage = detail["categorySpecificSummary"]["deprecationDetails"][0]
    assert usage["usage"] == "/apis/policy/v1beta1/poddisruptionbudgets"
    assert usage["clientStats"][0]["userAgent"] == "helm/v3.8.2"
    assert detail["recommendation"].startswith("Update manifests")


def test_subnets_launch_templates_and_auto_scaling_groups_read_through_the_query_clients(
    sim_eks: SimCluster,
) -> None:
    eks, ec2, autoscaling = clients(sim_eks)
    cluster = eks.describe_cluster(name=CLUSTER)["cluster"]
    subnets = ec2.describe_subnets(SubnetIds=cluster["resourcesVpcConfig"]["subnetIds"])["Subnets"]
    assert [(s["AvailabilityZone"], s["AvailableIpAddressCount"]) for s in subnets] == [
        ("ap-northeast-1a", 3),
        ("ap-northeast-1c", 9),
    ]
    in_vpc = ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [cluster["resourcesVpcConfig"]["vpcId"]]}]
    )
    assert len(in_vpc["Subnets"]) == 5
    with pytest.raises(ClientError) as missing:
        ec2.describe_subnets(SubnetIds=["subnet-0000000000000dead"])
    assert missing.value.response["Error"]["Code"] == "InvalidSubnetID.NotFound"

    template = eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName="ng-shared")["nodegroup"][
        "launchTemplate"
    ]
    latest = ec2.describe_launch_template_versions(LaunchTemplateId=template["id"], Versions=["$Latest"])
    assert [v["VersionNumber"] for v in latest["LaunchTemplateVersions"]] == [3]
    every = ec2.describe_launch_template_versions(LaunchTemplateName=template["name"])[
        "LaunchTemplateVersions"
    ]
    assert [(v["VersionNumber"], v["DefaultVersion"]) for v in every] == [(1, False), (2, True), (3, False)]

    groups = autoscaling.describe_auto_scaling_groups(
        Filters=[{"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{CLUSTER}"]}]
    )["AutoScalingGroups"]
    nodes = {
        str(e.obj()["spec"]["providerID"]).rsplit("/", 1)[-1]
        for e in sim_eks.core.store.entries("nodes")
        if "eks.amazonaws.com/nodegroup" in e.labels
    }
    assert {i["InstanceId"] for g in groups for i in g["Instances"]} == nodes
    stale = [g for g in groups if g["AutoScalingGroupName"].startswith("eksctl-")]
    assert [(g["DesiredCapacity"], g["Instances"]) for g in stale] == [(0, [])]
    named = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[stale[0]["AutoScalingGroupName"]])
    assert len(named["AutoScalingGroups"]) == 1


def test_updates_take_simulated_time_and_a_client_request_token_never_starts_a_second_one(
    sim_eks: SimCluster,
) -> None:
    eks, _, _ = clients(sim_eks)
    with pytest.raises(ClientError) as behind:
        eks.update_cluster_version(name=CLUSTER, version="1.25", clientRequestToken="job-1")
    assert behind.value.response["Error"]["Code"] == "InvalidRequestException"
    assert "others" in behind.value.response["Error"]["Message"]

    first = eks.update_nodegroup_version(
        clusterName=CLUSTER, nodegroupName="others", version="1.24", clientRequestToken="job-2"
    )["update"]
    again = eks.update_nodegroup_version(
        clusterName=CLUSTER, nodegroupName="others", version="1.24", clientRequestToken="job-2"
    )["update"]
    assert again["id"] == first["id"]
    assert len([op for op in sim_eks.control.operations() if op["target"] == "others"]) == 1
    assert (
        eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName="others")["nodegroup"]["status"]
        == "UPDATING"
    )
    for _ in range(60):
        sim_eks.control.advance(60)
        update = eks.describe_update(name=CLUSTER, updateId=first["id"], nodegroupName="others")["update"]
        if update["status"] != "InProgress":
            break
    assert (update["status"], update["errors"]) == ("Successful", [])
    kubelets = {
        e.obj()["status"]["nodeInfo"]["kubeletVersion"][:8]
        for e in sim_eks.core.store.entries("nodes")
        if e.labels.get("eks.amazonaws.com/nodegroup") == "others"
    }
    assert kubelets == {"v1.24.17"}

    cp = eks.update_cluster_version(name=CLUSTER, version="1.25", clientRequestToken="job-3")["update"]
    assert (
        eks.update_cluster_version(name=CLUSTER, version="1.25", clientRequestToken="job-3")["update"]["id"]
        == cp["id"]
    )
    assert eks.describe_cluster(name=CLUSTER)["cluster"]["status"] == "UPDATING"
    sim_eks.control.advance(60)
    assert eks.describe_update(name=CLUSTER, updateId=cp["id"])["update"]["status"] == "InProgress"
    sim_eks.control.advance(15 * 60)
    assert eks.describe_update(name=CLUSTER, updateId=cp["id"])["update"]["status"] == "Successful"
    assert eks.describe_cluster(name=CLUSTER)["cluster"]["version"] == "1.25"
    with urllib.request.urlopen(f"{sim_eks.url}/version", timeout=10) as response:
        assert json.load(response)["gitVersion"].startswith("v1.25.16")
    assert calls(sim_eks)["UpdateClusterVersion"] == 3  # one refused, one started, one answered by its token

    with pytest.raises(ClientError) as unknown_version:
        eks.update_addon(clusterName=CLUSTER, addonName="kube-proxy", addonVersion="v9.9.9-eksbuild.1")
    assert unknown_version.value.response["Error"]["Code"] == "InvalidParameterException"
    addon = eks.update_addon(
        clusterName=CLUSTER,
        addonName="kube-proxy",
        addonVersion="v1.25.16-minimal-eksbuild.1",
        resolveConflicts="OVERWRITE",
        clientRequestToken="job-4",
    )["update"]
    assert eks.describe_addon(clusterName=CLUSTER, addonName="kube-proxy")["addon"]["status"] == "UPDATING"
    sim_eks.control.advance(61)
    assert (
        eks.describe_update(name=CLUSTER, updateId=addon["id"], addonName="kube-proxy")["update"]["status"]
        == "Successful"
    )
    assert eks.describe_addon(clusterName=CLUSTER, addonName="kube-proxy")["addon"]["addonVersion"] == (
        "v1.25.16-minimal-eksbuild.1"
    )


def test_a_planted_failed_update_ends_failed_with_its_error(sim_factory: Callable[..., SimCluster]) -> None:
    scenario = load_scenario("eks-nodegroups")
    assert scenario.aws is not None
    scenario.aws = {**scenario.aws, "fail_updates": ["nodegroup:ng-shared", "addon:coredns"]}
    sim = sim_factory(scenario, speed=0.0, seed=1)
    eks, _, _ = clients(sim)
    update = eks.update_nodegroup_version(clusterName=CLUSTER, nodegroupName="ng-shared")["update"]
    addon = eks.update_addon(clusterName=CLUSTER, addonName="coredns", addonVersion="v1.8.7-eksbuild.3")[
        "update"
    ]
    sim.control.advance(15 * 60)
    failed = eks.describe_update(name=CLUSTER, updateId=update["id"], nodegroupName="ng-shared")["update"]
    assert failed["status"] == "Failed"
    assert failed["errors"][0]["errorCode"] == "NodeCreationFailure"
    addon_update = eks.describe_update(name=CLUSTER, updateId=addon["id"], addonName="coredns")["update"]
    assert (addon_update["status"], addon_update["errors"][0]["errorCode"]) == (
        "Failed",
        "ConfigurationConflict",
    )
    assert eks.describe_addon(clusterName=CLUSTER, addonName="coredns")["addon"]["status"] == "UPDATE_FAILED"


def test_updates_of_a_node_group_or_add_on_that_is_not_there_are_not_found_as_eks_answers(
    sim_eks: SimCluster,
) -> None:
    # EKS answers ListUpdates and DescribeUpdate for a missing node group or add-on with
    # ResourceNotFoundException naming it, not an empty list nor "no update found".
    eks, _, _ = clients(sim_eks)
    assert eks.list_updates(name=CLUSTER, nodegroupName="others")["updateIds"] == []
    update = eks.update_nodegroup_version(clusterName=CLUSTER, nodegroupName="others", version="1.24")[
        "update"
    ]
    for ask in (
        lambda: eks.list_updates(name=CLUSTER, nodegroupName="no-such-group"),
        lambda: eks.describe_update(name=CLUSTER, updateId=update["id"], nodegroupName="no-such-group"),
    ):
        with pytest.raises(eks.exceptions.ResourceNotFoundException) as missing:
            ask()
        assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        assert missing.value.response["Error"]["Message"] == "No node group found for name: no-such-group."
    for ask in (
        lambda: eks.list_updates(name=CLUSTER, addonName="no-such-addon"),
        lambda: eks.describe_update(name=CLUSTER, updateId=update["id"], addonName="no-such-addon"),
    ):
        with pytest.raises(eks.exceptions.ResourceNotFoundException) as missing:
            ask()
        assert (
            missing.value.response["Error"]["Message"]
            == f"No addon: no-such-addon found in cluster: {CLUSTER}"
        )
    # The group's own update is listed and described; another group's is not found under it.
    assert eks.list_updates(name=CLUSTER, nodegroupName="others")["updateIds"] == [update["id"]]
    with pytest.raises(eks.exceptions.ResourceNotFoundException) as elsewhere:
        eks.describe_update(name=CLUSTER, updateId=update["id"], nodegroupName="ng-shared")
    assert elsewhere.value.response["Error"]["Message"] == f"No update found for ID: {update['id']}"
