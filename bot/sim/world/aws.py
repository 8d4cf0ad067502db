"""The AWS side of an EKS scenario, served on loopback under `/aws` for the bot's real boto3 clients.

A scenario's `aws:` section names the EKS cluster, its subnets, installed add-ons and the add-on
versions EKS offers per Kubernetes version, upgrade insights, launch templates and Auto Scaling
groups left over from earlier node groups. The rest is read from the simulated world as it is: the
control plane's version (the catalog), the managed node groups and their nodes (the `Cloud`), and
updates run through the cloud's own operations, so they take simulated time.

Served (the wire shapes follow botocore's service models, which parse every answer):
- EKS (REST-JSON): ListClusters, DescribeCluster, ListNodegroups, DescribeNodegroup, ListAddons, DescribeAddon,
  DescribeAddonVersions, ListInsights, DescribeInsight, UpdateClusterVersion, DescribeUpdate,
  ListUpdates, UpdateNodegroupVersion, UpdateAddon. Updates honour `clientRequestToken` (the same token returns
  the same update).
- EC2 (query, XML): DescribeSubnets, DescribeLaunchTemplateVersions.
- Auto Scaling (query, XML): DescribeAutoScalingGroups.
- CloudFormation (query, XML): DescribeStacks, DescribeStackEvents — eksctl's stack of each node
  group, `eksctl-<cluster>-nodegroup-<group>`, CREATE_COMPLETE unless a failure was planted: the
  scenario's `stack_failures: {GROUP: {reason, status?, resource?}}`, or
  `POST /aws/sim/stack-failure {"nodegroup": …, "reason": …}` mid-run (the stack's update fails on
  its node-group resource with that reason and rolls back; the events say so, newest first).
The endpoint for every client is `http://127.0.0.1:PORT/aws`; the query APIs are told apart by
their `Action`. Faults come from the scenario: an add-on whose installed version is not offered
for the target, a subnet short of free addresses, node-group health issues, and `fail_updates`
(an update of the control plane, a node group or an add-on that ends Failed; an add-on's failure
is a conflict with fields changed by hand, so an update with `resolveConflicts: OVERWRITE` passes),
and `insights_block: true` (UpdateClusterVersion refused with InvalidStateException while an
upgrade-readiness insight of the target is in ERROR, unless the call says `force`).
`GET /aws/sim/calls` answers how often each operation was called (for tests and rehearsals);
`POST /aws/sim/hold {"operation": "UpdateNodegroupVersion"}` makes that operation act but hold
its answer back until `POST /aws/sim/release` (a test kills the caller in between).
A node group's subnets are the node subnets of its zones, or those `nodegroup_subnets: {GROUP:
[ids]}` names (a twin of a cluster keeps the cluster's, `bot/sim/world/twin.py`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import urllib.parse
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from bot.sim.apiserver.resources import minor_of
from bot.sim.apiserver.server import Raw, SimHTTPServer
from bot.sim.controllers.engine import Engine
from bot.sim.world.cloud import Cloud, Operation
from bot.sim.world.facade import FacadeError, ProviderWorld, answer

Obj = dict[str, Any]

PREFIX = "/aws"
EC2_XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
ASG_XMLNS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
CFN_XMLNS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
#: The stack status a planted failure ends in (an update eksctl started, rolled back).
FAILED_STACK_STATUS = "UPDATE_ROLLBACK_COMPLETE"
#: How long an add-on update takes, in simulated seconds.
ADDON_UPDATE_SECONDS = 60.0
_KNOWN = {
    "cluster_name",
    "account",
    "platform_version",
    "patch_versions",
    "subnets",
    "addons",
    "addon_versions",
    "insights",
    "launch_templates",
    "stale_asgs",
    "nodegroup_issues",
    "fail_updates",
    "insights_block",
    "stack_failures",
    "nodegroup_subnets",
}


class AwsError(FacadeError):
    """EKS's error: its code goes in the `x-amzn-ErrorType` header (the REST API) or the XML body
    (the query APIs), its message in the body."""


@dataclass
class Subnet:
    id: str
    zone: str
    cidr: str
    free: int
    use: tuple[str, ...]  # control-plane, nodes, pods


@dataclass
class Addon:
    name: str
    version: str
    status: str = "ACTIVE"
    issues: list[Obj] = field(default_factory=list)
    created: float = 0.0
    modified: float = 0.0


@dataclass
class AddonVersion:
    version: str
    clusters: tuple[str, ...]
    default_for: tuple[str, ...] = ()


@dataclass
class LaunchTemplate:
    id: str
    name: str
    latest: int
    used: int
    created: float


@dataclass
class Update:
    id: str
    type: str  # VersionUpdate | AddonUpdate
    params: list[Obj]
    created: float
    nodegroup: str = ""
    addon: str = ""
    op: Operation | None = None
    status: str = "InProgress"
    errors: list[Obj] = field(default_factory=list)


@dataclass
class StackFailure:
    """A node-group stack's failed update (planted): when, on which resource, and AWS's reason."""

    at: float
    reason: str
    status: str = FAILED_STACK_STATUS
    resource: str = "ManagedNodeGroup"
    resource_type: str = "AWS::EKS::Nodegroup"


def _minor(version: str) -> str:
    """`1.24.17`, `v1.24.17-eks-…` → `1.24`."""
    parts = version.lstrip("v").split(".")
    return f"{parts[0]}.{minor_of(version)}"


def _strs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return (str(value),)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class AwsWorld(ProviderWorld):
    """The EKS cluster, its add-ons, insights, subnets, launch templates and Auto Scaling groups."""

    def __init__(self, cloud: Cloud, engine: Engine, spec: Obj, *, default_name: str) -> None:
        super().__init__("aws", _KNOWN, cloud, engine, spec, default_name=default_name)
        self.region = cloud.region
        self.account = str(spec.get("account", "123456789012"))
        self.platform_version = str(spec.get("platform_version", "eks.12"))
        self.patch_versions = {str(k): str(v) for k, v in (spec.get("patch_versions") or {}).items()}
        now = engine.clock.now()
        self.created = now - 400 * 86400
        self.vpc_id = "vpc-0" + self._hex("vpc", 16)
        self.subnets = [
            Subnet(
                id=str(s["id"]),
                zone=f"{self.region}{s['zone']}",
                cidr=str(s.get("cidr", "10.0.0.0/24")),
                free=int(s["free"]),
                use=_strs(s.get("use") or ["nodes", "pods"]),
            )
            for s in spec.get("subnets") or []
        ]
        self.addons = {
            str(a["name"]): Addon(
                name=str(a["name"]),
                version=str(a["version"]),
                status=str(a.get("status", "ACTIVE")),
                issues=[dict(i) for i in a.get("issues") or []],
                created=self.created,
                modified=self.created,
            )
            for a in spec.get("addons") or []
        }
        self.addon_versions: dict[str, list[AddonVersion]] = {
            str(name): [
                AddonVersion(
                    version=str(v["version"]),
                    clusters=_strs(v.get("clusters")),
                    default_for=_strs(v.get("default")),
                )
                for v in versions
            ]
            for name, versions in (spec.get("addon_versions") or {}).items()
        }
        self.insights = [dict(i) for i in spec.get("insights") or []]
        for i, insight in enumerate(self.insights):
            insight.setdefault("id", str(uuid.UUID(self._hex(f"insight-{i}", 32))))
        self.launch_templates: dict[str, LaunchTemplate] = {}
        lt_spec = spec.get("launch_templates") or {}
        for group in cloud.groups:
            s = lt_spec.get(group) or {}
            latest = int(s.get("versions", 1))
            self.launch_templates[group] = LaunchTemplate(
                # A twin keeps its cluster's (EKS006 names the template).
                id=str(s.get("id") or "lt-0" + self._hex(f"lt-{group}", 16)),
                name=str(s.get("name") or f"eks-{uuid.UUID(self._hex(f'lt-name-{group}', 32))}"),
                latest=latest,
                used=int(s.get("used", latest)),
                created=self.created,
            )
        self.stale_asgs = [dict(a) for a in spec.get("stale_asgs") or []]
        #: Node group → the subnets it names (a twin keeps its cluster's); by default the node
        #: subnets of the group's zones.
        self.nodegroup_subnets = {
            str(k): [str(i) for i in v] for k, v in (spec.get("nodegroup_subnets") or {}).items()
        }
        self.nodegroup_issues = {
            str(k): [dict(i) for i in v] for k, v in (spec.get("nodegroup_issues") or {}).items()
        }
        self.fail_updates = set(_strs(spec.get("fail_updates")))
        #: EKS refuses UpdateClusterVersion while an upgrade-readiness insight of the target is in
        #: ERROR, unless `force`; off unless the scenario asks, so the shipped runbooks update as before.
        self.insights_block = bool(spec.get("insights_block", False))
        #: Node group → its stack's planted failure (`stack_failures`, `POST /aws/sim/stack-failure`).
        self.stack_failures: dict[str, StackFailure] = {}
        for group, failure in (spec.get("stack_failures") or {}).items():
            self.fail_stack(str(group), **{str(k): str(v) for k, v in dict(failure).items()})
        self.updates: dict[str, Update] = {}
        self.tokens: dict[str, str] = {}

    def _hex(self, seed: str, n: int) -> str:
        text = hashlib.sha256(f"{self.region}/{seed}".encode()).hexdigest()
        return text[:n]

    # ---- the world, read -------------------------------------------------------------------------

    @property
    def arn(self) -> str:
        return f"arn:aws:eks:{self.region}:{self.account}:cluster/{self.name}"

    def version(self) -> str:
        return _minor(self.cloud.version)

    def _running(self, kind: str, target: str) -> Operation | None:
        return next(
            (
                op
                for op in self.cloud.operations
                if op.kind == kind and op.target == target and op.state == "InProgress"
            ),
            None,
        )

    def cluster(self) -> Obj:
        updating = self._running("ControlPlaneUpgrade", "control-plane") is not None
        return {
            "name": self.name,
            "arn": self.arn,
            "createdAt": self.created,
            "version": self.version(),
            "endpoint": "https://"
            + self._hex("endpoint", 32).upper()
            + f".gr7.{self.region}.eks.amazonaws.com",
            "roleArn": f"arn:aws:iam::{self.account}:role/{self.name}-cluster",
            "resourcesVpcConfig": {
                "subnetIds": [s.id for s in self.subnets if "control-plane" in s.use],
                "securityGroupIds": ["sg-0" + self._hex("sg", 16)],
                "clusterSecurityGroupId": "sg-0" + self._hex("cluster-sg", 16),
                "vpcId": self.vpc_id,
                "endpointPublicAccess": False,
                "endpointPrivateAccess": True,
            },
            "kubernetesNetworkConfig": {"serviceIpv4Cidr": "172.20.0.0/16", "ipFamily": "ipv4"},
            "status": "UPDATING" if updating else "ACTIVE",
            "platformVersion": self.platform_version,
            "tags": {},
            "health": {"issues": []},
        }

    def _group(self, name: str) -> Any:
        group = self.cloud.groups.get(name)
        if group is None:
            raise AwsError(404, "ResourceNotFoundException", f"No node group found for name: {name}.")
        return group

    def asg_name(self, group: str) -> str:
        return f"eks-{group}-{uuid.UUID(self._hex(f'asg-{group}', 32))}"

    def node_subnets(self) -> list[Subnet]:
        return [s for s in self.subnets if "nodes" in s.use]

    def nodegroup(self, name: str) -> Obj:
        group = self._group(name)
        nodes = self.cloud.nodes_of(name)
        updating = self._running("NodeGroupUpdate", name) is not None
        issues = self.nodegroup_issues.get(name, [])
        lt = self.launch_templates.get(name)
        out: Obj = {
            "nodegroupName": name,
            "nodegroupArn": f"arn:aws:eks:{self.region}:{self.account}:nodegroup/{self.name}/{name}/"
            + str(uuid.UUID(self._hex(f"ng-{name}", 32))),
            "clusterName": self.name,
            "version": _minor(group.version),
            "releaseVersion": f"{group.version}-20240129",
            "createdAt": self.created,
            "modifiedAt": self.created,
            "status": "UPDATING" if updating else ("DEGRADED" if issues else "ACTIVE"),
            "capacityType": "ON_DEMAND",
            "scalingConfig": {
                "minSize": 0,
                "maxSize": max(group.count * 2, 1),
                "desiredSize": len(nodes) if updating else group.count,
            },
            "instanceTypes": [group.instance_type],
            "subnets": self.nodegroup_subnets.get(name)
            or [
                s.id for s in self.node_subnets() if s.zone[len(self.region) :] in self.cloud.zones_of(group)
            ],
            "amiType": "AL2_x86_64",
            "nodeRole": f"arn:aws:iam::{self.account}:role/{self.name}-node",
            "labels": dict(group.labels),
            "resources": {"autoScalingGroups": [{"name": self.asg_name(name)}]},
            "health": {"issues": [dict(i) for i in issues]},
            "updateConfig": {"maxUnavailable": group.max_unavailable},
            "tags": {},
        }
        if lt is not None:
            out["launchTemplate"] = {"name": lt.name, "version": str(lt.used), "id": lt.id}
        return out

    def addon(self, name: str) -> Obj:
        a = self.addons.get(name)
        if a is None:
            raise AwsError(
                404, "ResourceNotFoundException", f"No addon: {name} found in cluster: {self.name}"
            )
        return {
            "addonName": a.name,
            "clusterName": self.name,
            "status": a.status,
            "addonVersion": a.version,
            "health": {"issues": [dict(i) for i in a.issues]},
            "addonArn": f"arn:aws:eks:{self.region}:{self.account}:addon/{self.name}/{a.name}/"
            + str(uuid.UUID(self._hex(f"addon-{a.name}", 32))),
            "createdAt": a.created,
            "modifiedAt": a.modified,
            "tags": {},
        }

    def addon_infos(self, name: str, kubernetes_version: str) -> list[Obj]:
        out = []
        for addon, versions in sorted(self.addon_versions.items()):
            if name and addon != name:
                continue
            listed = [v for v in versions if not kubernetes_version or kubernetes_version in v.clusters]
            if not listed:
                continue
            out.append(
                {
                    "addonName": addon,
                    "type": "networking" if addon in ("vpc-cni", "kube-proxy", "coredns") else "storage",
                    "owner": "aws",
                    "publisher": "eks",
                    "addonVersions": [
                        {
                            "addonVersion": v.version,
                            "architecture": ["amd64", "arm64"],
                            "compatibilities": [
                                {
                                    "clusterVersion": c,
                                    "platformVersions": ["*"],
                                    "defaultVersion": c in v.default_for,
                                }
                                for c in v.clusters
                            ],
                            "requiresConfiguration": False,
                        }
                        for v in listed
                    ],
                }
            )
        return out

    def insight_summary(self, insight: Obj) -> Obj:
        return {
            "id": insight["id"],
            "name": insight.get("name", ""),
            "category": insight.get("category", "UPGRADE_READINESS"),
            "kubernetesVersion": str(insight.get("kubernetes_version", "")),
            "lastRefreshTime": self.engine.clock.now() - 3600,
            "lastTransitionTime": self.created,
            "description": insight.get("description", ""),
            "insightStatus": {
                "status": insight.get("status", "PASSING"),
                "reason": insight.get("reason", ""),
            },
        }

    def insight(self, insight_id: str) -> Obj:
        insight = next((i for i in self.insights if i["id"] == insight_id), None)
        if insight is None:
            raise AwsError(404, "ResourceNotFoundException", f"No insight found with id {insight_id}")
        out = self.insight_summary(insight)
        out["recommendation"] = insight.get("recommendation", "")
        out["additionalInfo"] = {str(k): str(v) for k, v in (insight.get("additional_info") or {}).items()}
        out["resources"] = [
            {
                "insightStatus": {"status": r.get("status", out["insightStatus"]["status"]), "reason": ""},
                "kubernetesResourceUri": str(r.get("uri", "")),
            }
            for r in insight.get("resources") or []
        ]
        details = insight.get("deprecations") or []
        if details:
            out["categorySpecificSummary"] = {
                "deprecationDetails": [
                    {
                        "usage": str(d.get("usage", "")),
                        "replacedWith": str(d.get("replaced_with", "")),
                        "stopServingVersion": str(d.get("stop_serving", "")),
                        "startServingReplacementVersion": str(d.get("start_serving", "")),
                        "clientStats": [
                            {
                                "userAgent": str(c.get("user_agent", "")),
                                "numberOfRequestsLast30Days": int(c.get("requests", 0)),
                                "lastRequestTime": self.engine.clock.now() - 600,
                            }
                            for c in d.get("clients") or []
                        ],
                    }
                    for d in details
                ]
            }
        return out

    def asgs(self) -> list[Obj]:
        """Every Auto Scaling group of the cluster: one per managed node group (its instances are
        the group's nodes) and the stale ones the scenario names."""
        tag = f"kubernetes.io/cluster/{self.name}"
        out = []
        for name, group in self.cloud.groups.items():
            asg = self.asg_name(name)
            lt = self.launch_templates.get(name)
            instances = []
            for node in self.cloud.nodes_of(name):
                provider = str((node.get("spec") or {}).get("providerID", ""))
                zone, _, instance = provider.removeprefix("aws:///").partition("/")
                instances.append(
                    {
                        "InstanceId": instance,
                        "InstanceType": group.instance_type,
                        "AvailabilityZone": zone,
                        "LifecycleState": "InService",
                        "HealthStatus": "Healthy",
                        "ProtectedFromScaleIn": False,
                        **(
                            {
                                "LaunchTemplate": {
                                    "LaunchTemplateId": lt.id,
                                    "LaunchTemplateName": lt.name,
                                    "Version": str(lt.used),
                                }
                            }
                            if lt
                            else {}
                        ),
                    }
                )
            out.append(
                self._asg(
                    asg,
                    zones=[f"{self.region}{z}" for z in self.cloud.zones_of(group)],
                    desired=group.count,
                    instances=instances,
                    tags={tag: "owned", "eks:nodegroup-name": name, "eks:cluster-name": self.name},
                    lt=lt,
                )
            )
        for stale in self.stale_asgs:
            count = int(stale.get("instances", 0))
            zones = [f"{self.region}{z}" for z in stale.get("zones") or ["a", "b", "c"]]
            instances = [
                {
                    "InstanceId": "i-0" + self._hex(f"{stale['name']}-{i}", 16),
                    "InstanceType": str(stale.get("instance_type", "m5.xlarge")),
                    "AvailabilityZone": zones[i % len(zones)],
                    "LifecycleState": "InService",
                    "HealthStatus": "Healthy",
                    "ProtectedFromScaleIn": False,
                }
                for i in range(count)
            ]
            out.append(
                self._asg(
                    str(stale["name"]),
                    zones=zones,
                    desired=int(stale.get("desired", count)),
                    instances=instances,
                    tags={tag: "owned", **{str(k): str(v) for k, v in (stale.get("tags") or {}).items()}},
                    lt=None,
                )
            )
        return out

    def _asg(
        self,
        name: str,
        *,
        zones: list[str],
        desired: int,
        instances: list[Obj],
        tags: dict[str, str],
        lt: LaunchTemplate | None,
    ) -> Obj:
        asg: Obj = {
            "AutoScalingGroupName": name,
            "AutoScalingGroupARN": f"arn:aws:autoscaling:{self.region}:{self.account}:autoScalingGroup:"
            f"{uuid.UUID(self._hex(f'asg-arn-{name}', 32))}:autoScalingGroupName/{name}",
            "MinSize": 0,
            "MaxSize": max(desired * 2, 1),
            "DesiredCapacity": desired,
            "DefaultCooldown": 300,
            "AvailabilityZones": zones,
            "HealthCheckType": "EC2",
            "HealthCheckGracePeriod": 15,
            "Instances": instances,
            "CreatedTime": _iso(self.created),
            "VPCZoneIdentifier": ",".join(s.id for s in self.node_subnets() if s.zone in zones),
            "Tags": [
                {
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                }
                for k, v in tags.items()
            ],
            "NewInstancesProtectedFromScaleIn": False,
        }
        if lt is not None:
            asg["LaunchTemplate"] = {
                "LaunchTemplateId": lt.id,
                "LaunchTemplateName": lt.name,
                "Version": str(lt.used),
            }
        return asg

    # ---- CloudFormation: eksctl's node-group stacks ---------------------------------------------

    def stack_name(self, group: str) -> str:
        return f"eksctl-{self.name}-nodegroup-{group}"

    def fail_stack(
        self, nodegroup: str, *, reason: str, status: str = FAILED_STACK_STATUS, **more: str
    ) -> None:
        """Plant a failed update of `nodegroup`'s stack (it need not have joined yet: its stack is
        what failed to bring it)."""
        if not nodegroup or not reason:
            raise ValueError("a stack failure names its nodegroup and its reason")
        bad = set(more) - {"resource", "resource_type"}
        if bad:
            raise ValueError(f"stack failure: unknown key(s) {', '.join(sorted(bad))}")
        self.stack_failures[nodegroup] = StackFailure(
            at=self.engine.clock.now(), reason=reason, status=status, **more
        )

    def _stack_groups(self) -> list[str]:
        return sorted(set(self.cloud.groups) | set(self.stack_failures))

    def stack_id(self, group: str) -> str:
        return (
            f"arn:aws:cloudformation:{self.region}:{self.account}:stack/{self.stack_name(group)}/"
            f"{uuid.UUID(self._hex(f'stack-{group}', 32))}"
        )

    def stacks(self, name: str) -> list[Obj]:
        """DescribeStacks: the named stack (by name or id), or every node-group stack."""
        out = []
        for group in self._stack_groups():
            if name and name not in (self.stack_name(group), self.stack_id(group)):
                continue
            failure = self.stack_failures.get(group)
            stack: Obj = {
                "StackId": self.stack_id(group),
                "StackName": self.stack_name(group),
                "Description": "EKS Managed Nodes (SSH access: false) [created by eksctl]",
                "CreationTime": _iso(self.created),
                "StackStatus": failure.status if failure else "CREATE_COMPLETE",
                "DisableRollback": False,
                "Tags": [
                    {"Key": "alpha.eksctl.io/cluster-name", "Value": self.name},
                    {"Key": "alpha.eksctl.io/nodegroup-name", "Value": group},
                    {"Key": "alpha.eksctl.io/nodegroup-type", "Value": "managed"},
                ],
            }
            if failure:
                stack["LastUpdatedTime"] = _iso(failure.at)
            out.append(stack)
        if name and not out:
            raise AwsError(400, "ValidationError", f"Stack with id {name} does not exist")
        return out

    def stack_events(self, name: str) -> list[Obj]:
        """DescribeStackEvents, newest first: the stack's creation, then its failed update."""
        group = next(
            (g for g in self._stack_groups() if name in (self.stack_name(g), self.stack_id(g))), None
        )
        if group is None:
            raise AwsError(400, "ValidationError", f"Stack [{name}] does not exist")
        stack, stack_id = self.stack_name(group), self.stack_id(group)
        seq = itertools.count(1)

        def event(at: float, logical: str, kind: str, status: str, reason: str = "") -> Obj:
            n = next(seq)
            out: Obj = {
                "StackId": stack_id,
                "EventId": f"{logical}-{uuid.UUID(self._hex(f'event-{group}-{n}-{at}', 32))}",
                "StackName": stack,
                "LogicalResourceId": logical,
                "PhysicalResourceId": stack_id
                if kind == "AWS::CloudFormation::Stack"
                else f"{self.name}/{group}",
                "ResourceType": kind,
                "Timestamp": _iso(at),
                "ResourceStatus": status,
            }
            if reason:
                out["ResourceStatusReason"] = reason
            return out

        main = "AWS::CloudFormation::Stack"
        events = [
            event(self.created, stack, main, "CREATE_IN_PROGRESS", "User Initiated"),
            event(self.created + 1, "ManagedNodeGroup", "AWS::EKS::Nodegroup", "CREATE_IN_PROGRESS"),
            event(self.created + 300, "ManagedNodeGroup", "AWS::EKS::Nodegroup", "CREATE_COMPLETE"),
            event(self.created + 301, stack, main, "CREATE_COMPLETE"),
        ]
        failure = self.stack_failures.get(group)
        if failure is not None:
            t = failure.at
            events += [
                event(t - 600, stack, main, "UPDATE_IN_PROGRESS", "User Initiated"),
                event(t - 599, failure.resource, failure.resource_type, "UPDATE_IN_PROGRESS"),
                event(t - 1, failure.resource, failure.resource_type, "UPDATE_FAILED", failure.reason),
                event(
                    t,
                    stack,
                    main,
                    "UPDATE_ROLLBACK_IN_PROGRESS",
                    f"The following resource(s) failed to update: [{failure.resource}]. ",
                ),
                event(t, stack, main, failure.status),
            ]
        return list(reversed(events))

    def template_versions(self, lt_id: str, lt_name: str, versions: list[str]) -> list[Obj]:
        lt = next(
            (
                t
                for t in self.launch_templates.values()
                if (lt_id and t.id == lt_id) or (lt_name and t.name == lt_name)
            ),
            None,
        )
        if lt is None:
            raise AwsError(
                400,
                "InvalidLaunchTemplateId.NotFound"
                if lt_id
                else "InvalidLaunchTemplateName.NotFoundException",
                f"The specified launch template, with template {'ID' if lt_id else 'name'} {lt_id or lt_name}, does not exist.",
            )
        wanted: list[int] = []
        for v in versions or [str(n) for n in range(1, lt.latest + 1)]:
            if v == "$Latest":
                wanted.append(lt.latest)
            elif v == "$Default":
                wanted.append(lt.used)
            elif v.isdigit() and 1 <= int(v) <= lt.latest:
                wanted.append(int(v))
            else:
                raise AwsError(
                    400,
                    "InvalidLaunchTemplateId.VersionNotFound",
                    f"Could not find launch template version {v}",
                )
        group = next(g for g, t in self.launch_templates.items() if t is lt)
        ami = "ami-0" + self._hex(f"ami-{group}", 16)
        return [
            {
                "launchTemplateId": lt.id,
                "launchTemplateName": lt.name,
                "versionNumber": n,
                "createTime": _iso(lt.created + n * 86400),
                "createdBy": f"arn:aws:iam::{self.account}:role/eks-nodegroup",
                "defaultVersion": n == lt.used,
                "launchTemplateData": {
                    "imageId": ami,
                    "instanceType": self.cloud.groups[group].instance_type,
                },
            }
            for n in sorted(set(wanted))
        ]

    # ---- updates ---------------------------------------------------------------------------------

    def _new_update(
        self, type_: str, params: list[Obj], token: str, *, nodegroup: str = "", addon: str = ""
    ) -> Update:
        update = Update(
            id=str(uuid.UUID(self._hex(f"update-{next(self._ids)}", 32))),
            type=type_,
            params=params,
            created=self.engine.clock.now(),
            nodegroup=nodegroup,
            addon=addon,
        )
        self.updates[update.id] = update
        if token:
            self.tokens[token] = update.id
        return update

    def _by_token(self, token: str) -> Update | None:
        return self.updates.get(self.tokens[token]) if token in self.tokens else None

    def blocking_insights(self, version: str) -> list[Obj]:
        """The upgrade-readiness insights of `version` in ERROR: what EKS refuses an update over."""
        return [
            i
            for i in self.insights
            if str(i.get("kubernetes_version", "")) == version
            and i.get("status") == "ERROR"
            and i.get("category", "UPGRADE_READINESS") == "UPGRADE_READINESS"
        ]

    def update_cluster_version(self, version: str, token: str, force: bool = False) -> Update:
        known = self._by_token(token)
        if known is not None:
            return known
        current = self.version()
        if self._running("ControlPlaneUpgrade", "control-plane") is not None:
            raise AwsError(409, "ResourceInUseException", f"Cluster {self.name} has an update in progress")
        try:
            ok = _minor(version) == version and minor_of(version) == minor_of(current) + 1
        except (ValueError, IndexError):
            ok = False
        if not ok:
            raise AwsError(
                400,
                "InvalidParameterException",
                f"Unsupported Kubernetes minor version update from {current} to {version}",
            )
        behind = sorted(n for n, g in self.cloud.groups.items() if minor_of(g.version) < minor_of(current))
        if behind:
            raise AwsError(
                400,
                "InvalidRequestException",
                f"Nodegroup(s) {', '.join(behind)} must be updated to match cluster version {current} before updating the cluster version",
            )
        if self.insights_block and not force and self.blocking_insights(version):
            # EKS's own words (botocore's InvalidStateException documentation).
            raise AwsError(
                400,
                "InvalidStateException",
                "Amazon EKS detected upgrade readiness issues. Call the ListInsights API to view detected"
                " upgrade blocking issues. Pass the force flag when updating to override upgrade readiness errors.",
            )
        patch = self.patch_versions.get(version, f"{version}.0")
        update = self._new_update(
            "VersionUpdate",
            [
                {"type": "Version", "value": version},
                {"type": "PlatformVersion", "value": self.platform_version},
            ],
            token,
        )
        if "cluster" in self.fail_updates:
            update.op = self.cloud.fail_control_plane_upgrade(
                patch, "the control plane update failed (planted by the scenario)", "aws-update", update.id
            )
        else:
            update.op = self.cloud.upgrade_control_plane(patch)
        return update

    def update_nodegroup_version(self, name: str, version: str, force: bool, token: str) -> Update:
        known = self._by_token(token)
        if known is not None:
            return known
        group = self._group(name)
        if self._running("NodeGroupUpdate", name) is not None:
            raise AwsError(409, "ResourceInUseException", f"Nodegroup {name} has an update in progress")
        target = version or self.version()
        if minor_of(target) > minor_of(self.version()):
            raise AwsError(
                400,
                "InvalidParameterException",
                f"Requested Kubernetes version {target} is newer than the cluster version {self.version()}",
            )
        patch = self.patch_versions.get(
            _minor(target),
            group.version if _minor(group.version) == _minor(target) else f"{_minor(target)}.0",
        )
        update = self._new_update(
            "VersionUpdate",
            [
                {"type": "Version", "value": _minor(target)},
                {"type": "ReleaseVersion", "value": f"{patch}-20240129"},
            ],
            token,
            nodegroup=name,
        )
        if f"nodegroup:{name}" in self.fail_updates:
            update.op = self.cloud.fail_node_group_update(
                name,
                patch,
                "NodeCreationFailure: instances failed to join the cluster (planted by the scenario)",
                "aws-update",
                update.id,
            )
        else:
            update.op = self.cloud.replace_node_group(name, patch, force=force)
        return update

    def update_addon(self, name: str, version: str, token: str, resolve: str = "") -> Update:
        known = self._by_token(token)
        if known is not None:
            return known
        addon = self.addons.get(name)
        if addon is None:
            raise AwsError(
                404, "ResourceNotFoundException", f"No addon: {name} found in cluster: {self.name}"
            )
        offered = [v for v in self.addon_versions.get(name, []) if self.version() in v.clusters]
        if version and version not in {v.version for v in offered}:
            raise AwsError(
                400,
                "InvalidParameterException",
                f"Addon version {version} is not supported for addon {name} on Kubernetes {self.version()}",
            )
        target = version or next(
            (v.version for v in offered if self.version() in v.default_for), addon.version
        )
        update = self._new_update(
            "AddonUpdate", [{"type": "AddonVersion", "value": target}], token, addon=name
        )
        addon.status = "UPDATING"
        # A planted add-on failure is a conflict with fields changed by hand: EKS's OVERWRITE
        # policy takes the add-on's defaults over them, so only that policy gets past it.
        failing = f"addon:{name}" in self.fail_updates and resolve != "OVERWRITE"

        def done() -> None:
            with self.lock:
                addon.modified = self.engine.clock.now()
                if failing:
                    addon.status = "UPDATE_FAILED"
                    update.status = "Failed"
                    update.errors = [
                        {
                            "errorCode": "ConfigurationConflict",
                            "errorMessage": "Conflicts found when trying to apply. Will not continue due to resolve conflicts mode.",
                            "resourceIds": [name],
                        }
                    ]
                else:
                    addon.version = target
                    addon.status = "ACTIVE"
                    update.status = "Successful"

        self.engine.after(ADDON_UPDATE_SECONDS, done, key=("aws-update", update.id))
        return update

    def _updated(self, nodegroup: str, addon: str) -> None:
        """The node group or add-on ListUpdates and DescribeUpdate name is there: EKS answers
        ResourceNotFoundException for one that is not (not an empty list, not the update's 404)."""
        if nodegroup:
            self._group(nodegroup)
        if addon:
            self.addon(addon)

    def update_ids(self, nodegroup: str, addon: str) -> list[str]:
        """ListUpdates: the ids of the cluster's own updates, or a node group's or an add-on's."""
        self._updated(nodegroup, addon)
        return [u.id for u in self.updates.values() if u.nodegroup == nodegroup and u.addon == addon]

    def update(self, update_id: str, nodegroup: str, addon: str) -> Obj:
        self._updated(nodegroup, addon)
        update = self.updates.get(update_id)
        if update is None or update.nodegroup != nodegroup or update.addon != addon:
            raise AwsError(404, "ResourceNotFoundException", f"No update found for ID: {update_id}")
        if update.op is not None:
            update.status = update.op.state
            if update.op.state == "Failed":
                code = update.op.error.split(":", 1)[0] if ":" in update.op.error else "Unknown"
                update.errors = [
                    {
                        "errorCode": code
                        if code in ("PodEvictionFailure", "NodeCreationFailure")
                        else "Unknown",
                        "errorMessage": update.op.error,
                        "resourceIds": [update.nodegroup or self.name],
                    }
                ]
        return {
            "id": update.id,
            "status": update.status,
            "type": update.type,
            "params": update.params,
            "createdAt": update.created,
            "errors": update.errors,
        }


# ---- the wire ----------------------------------------------------------------------------------


def register(server: SimHTTPServer, world: AwsWorld) -> None:
    server.add_route(PREFIX, lambda method, path, query, body: handle(world, method, path, query, body))


def handle(world: AwsWorld, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    rest = path[len(PREFIX) :].strip("/")
    if rest == "sim/stack-failure" and method == "POST":
        knob = json.loads(body or b"{}")
        with world.lock:
            try:
                world.fail_stack(
                    str(knob.pop("nodegroup", "")),
                    reason=str(knob.pop("reason", "")),
                    **{k: str(v) for k, v in knob.items()},
                )
            except ValueError as exc:
                return 400, {"error": str(exc)}
        return 200, {}
    return answer(world, method, rest, body, lambda: _handle(world, method, rest, query, body))


def _handle(world: AwsWorld, method: str, rest: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    if rest == "" and method == "POST":
        return _query(world, body)
    try:
        return _rest(world, method, [urllib.parse.unquote(p) for p in rest.split("/")], query, body)
    except AwsError as exc:
        return exc.status, Raw(
            json.dumps({"message": exc.message}).encode(),
            "application/json",
            {"x-amzn-ErrorType": f"{exc.code}:http://internal.amazon.com/coral/com.amazonaws.eks/"},
        )


def _json(status: int, obj: Obj) -> tuple[int, Any]:
    return status, Raw(json.dumps(obj).encode(), "application/json", {"x-amzn-RequestId": str(uuid.uuid4())})


def _listed(key: str, items: list[Any], query: dict[str, str]) -> tuple[int, Any]:
    """A List call's answer: the page of `items` under `key` that `maxResults` and `nextToken` ask
    for, and the `nextToken` of the next page while there is one."""
    size = int(query.get("maxResults") or 100)
    start = int(query.get("nextToken") or 0)
    nxt = start + size
    return _json(200, {key: items[start:nxt], **({"nextToken": str(nxt)} if nxt < len(items) else {})})


def _rest(
    world: AwsWorld, method: str, parts: list[str], query: dict[str, str], body: bytes
) -> tuple[int, Any]:
    data: Obj = json.loads(body) if body else {}
    if parts == ["addons", "supported-versions"] and method == "GET":
        world.calls["DescribeAddonVersions"] += 1
        infos = world.addon_infos(query.get("addonName", ""), query.get("kubernetesVersion", ""))
        return _listed("addons", infos, query)
    if parts == ["clusters"] and method == "GET":
        # `aws eks list-clusters`, the first call anyone makes: the one cluster of the scenario.
        world.calls["ListClusters"] += 1
        return _listed("clusters", [world.name], query)
    if len(parts) < 2 or parts[0] != "clusters":
        raise AwsError(404, "UnknownOperationException", f"no operation for {method} /{'/'.join(parts)}")
    if parts[1] != world.name:
        raise AwsError(404, "ResourceNotFoundException", f"No cluster found for name: {parts[1]}.")
    match (method, *parts[2:]):
        case ("GET",):
            world.calls["DescribeCluster"] += 1
            return _json(200, {"cluster": world.cluster()})
        case ("GET", "node-groups"):
            world.calls["ListNodegroups"] += 1
            return _listed("nodegroups", sorted(world.cloud.groups), query)
        case ("GET", "node-groups", name):
            world.calls["DescribeNodegroup"] += 1
            return _json(200, {"nodegroup": world.nodegroup(name)})
        case ("POST", "node-groups", name, "update-version"):
            world.calls["UpdateNodegroupVersion"] += 1
            if "launchTemplate" in data or "releaseVersion" in data:
                raise AwsError(
                    400, "InvalidParameterException", "the simulator updates node groups by version only"
                )
            update = world.update_nodegroup_version(
                name,
                str(data.get("version") or ""),
                bool(data.get("force")),
                str(data.get("clientRequestToken") or ""),
            )
            return _json(200, {"update": world.update(update.id, name, "")})
        case ("GET", "addons"):
            world.calls["ListAddons"] += 1
            return _listed("addons", sorted(world.addons), query)
        case ("GET", "addons", name):
            world.calls["DescribeAddon"] += 1
            return _json(200, {"addon": world.addon(name)})
        case ("POST", "addons", name, "update"):
            world.calls["UpdateAddon"] += 1
            update = world.update_addon(
                name,
                str(data.get("addonVersion") or ""),
                str(data.get("clientRequestToken") or ""),
                str(data.get("resolveConflicts") or ""),
            )
            return _json(200, {"update": world.update(update.id, "", name)})
        case ("POST", "insights"):
            world.calls["ListInsights"] += 1
            flt = data.get("filter") or {}
            insights = [
                world.insight_summary(i)
                for i in world.insights
                if (
                    not flt.get("kubernetesVersions")
                    or str(i.get("kubernetes_version")) in flt["kubernetesVersions"]
                )
                and (not flt.get("statuses") or i.get("status", "PASSING") in flt["statuses"])
                and (not flt.get("categories") or i.get("category", "UPGRADE_READINESS") in flt["categories"])
            ]
            return _listed(
                "insights",
                insights,
                {
                    "maxResults": str(data.get("maxResults") or 100),
                    "nextToken": str(data.get("nextToken") or 0),
                },
            )
        case ("GET", "insights", insight_id):
            world.calls["DescribeInsight"] += 1
            return _json(200, {"insight": world.insight(insight_id)})
        case ("POST", "updates"):
            world.calls["UpdateClusterVersion"] += 1
            update = world.update_cluster_version(
                str(data.get("version") or ""),
                str(data.get("clientRequestToken") or ""),
                bool(data.get("force")),
            )
            return _json(200, {"update": world.update(update.id, "", "")})
        case ("GET", "updates"):
            world.calls["ListUpdates"] += 1
            ids = world.update_ids(query.get("nodegroupName", ""), query.get("addonName", ""))
            return _listed("updateIds", ids, query)
        case ("GET", "updates", update_id):
            world.calls["DescribeUpdate"] += 1
            return _json(
                200,
                {
                    "update": world.update(
                        update_id, query.get("nodegroupName", ""), query.get("addonName", "")
                    )
                },
            )
    raise AwsError(404, "UnknownOperationException", f"no operation for {method} /{'/'.join(parts)}")


# ---- the query APIs (EC2, Auto Scaling): form-encoded in, XML out -------------------------------


def _xml(tag: str, value: Any, member: str) -> str:
    if isinstance(value, dict):
        inner = "".join(_xml(k, v, member) for k, v in value.items() if v is not None)
        return f"<{tag}>{inner}</{tag}>"
    if isinstance(value, list):
        return f"<{tag}>" + "".join(_xml(member, v, member) for v in value) + f"</{tag}>"
    if isinstance(value, bool):
        return f"<{tag}>{'true' if value else 'false'}</{tag}>"
    return f"<{tag}>{escape(str(value))}</{tag}>"


def _numbered(form: dict[str, str], prefix: str) -> list[str]:
    """`Prefix.1`, `Prefix.2`… (EC2) → their values in order."""
    out: list[str] = []
    for i in itertools.count(1):
        if f"{prefix}.{i}" not in form:
            return out
        out.append(form[f"{prefix}.{i}"])
    return out


def _query(world: AwsWorld, body: bytes) -> tuple[int, Any]:
    form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
    action = form.get("Action", "")
    request_id = str(uuid.uuid4())
    try:
        if action == "DescribeSubnets":
            world.calls[action] += 1
            return 200, _ec2(
                action, request_id, {"subnetSet": [_subnet(world, s) for s in _subnets(world, form)]}
            )
        if action == "DescribeLaunchTemplateVersions":
            world.calls[action] += 1
            versions = world.template_versions(
                form.get("LaunchTemplateId", ""),
                form.get("LaunchTemplateName", ""),
                _numbered(form, "LaunchTemplateVersion"),
            )
            return 200, _ec2(action, request_id, {"launchTemplateVersionSet": versions})
        if action == "DescribeAutoScalingGroups":
            world.calls[action] += 1
            return 200, _autoscaling(action, request_id, {"AutoScalingGroups": _asgs(world, form)})
        if action == "DescribeStacks":
            world.calls[action] += 1
            stacks = world.stacks(form.get("StackName", ""))
            return 200, _autoscaling(action, request_id, {"Stacks": stacks}, CFN_XMLNS)
        if action == "DescribeStackEvents":
            world.calls[action] += 1
            events = world.stack_events(form.get("StackName", ""))
            return 200, _autoscaling(action, request_id, {"StackEvents": events}, CFN_XMLNS)
    except AwsError as exc:
        if action in ("DescribeAutoScalingGroups", "DescribeStacks", "DescribeStackEvents"):
            xmlns = ASG_XMLNS if action == "DescribeAutoScalingGroups" else CFN_XMLNS
            text = (
                f'<ErrorResponse xmlns="{xmlns}"><Error><Type>Sender</Type><Code>{escape(exc.code)}</Code>'
                f"<Message>{escape(exc.message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
            )
        else:
            text = (
                f"<Response><Errors><Error><Code>{escape(exc.code)}</Code><Message>{escape(exc.message)}</Message>"
                f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
            )
        return exc.status, Raw(('<?xml version="1.0" encoding="UTF-8"?>' + text).encode(), "text/xml")
    text = (
        f"<Response><Errors><Error><Code>InvalidAction</Code><Message>The action {escape(action)} is not "
        f"valid for this web service.</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>"
    )
    return 400, Raw(text.encode(), "text/xml")


def _ec2(action: str, request_id: str, fields: Obj) -> Raw:
    inner = "".join(_xml(k, v, "item") for k, v in fields.items())
    text = (
        f'<?xml version="1.0" encoding="UTF-8"?><{action}Response xmlns="{EC2_XMLNS}">'
        f"<requestId>{request_id}</requestId>{inner}</{action}Response>"
    )
    return Raw(text.encode(), "text/xml;charset=UTF-8")


def _autoscaling(action: str, request_id: str, fields: Obj, xmlns: str = ASG_XMLNS) -> Raw:
    """An awsquery answer with `member` lists (Auto Scaling's, and CloudFormation's with its xmlns)."""
    inner = "".join(_xml(k, v, "member") for k, v in fields.items())
    text = (
        f'<{action}Response xmlns="{xmlns}"><{action}Result>{inner}</{action}Result>'
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
    )
    return Raw(text.encode(), "text/xml")


def _subnets(world: AwsWorld, form: dict[str, str]) -> list[Subnet]:
    ids = _numbered(form, "SubnetId")
    known = {s.id for s in world.subnets}
    missing = [i for i in ids if i not in known]
    if missing:
        raise AwsError(400, "InvalidSubnetID.NotFound", f"The subnet ID '{missing[0]}' does not exist")
    chosen = [s for s in world.subnets if not ids or s.id in ids]
    for i in itertools.count(1):
        name = form.get(f"Filter.{i}.Name")
        if name is None:
            break
        values = set(_numbered(form, f"Filter.{i}.Value"))
        if name == "vpc-id":
            chosen = [s for s in chosen if world.vpc_id in values]
        elif name == "subnet-id":
            chosen = [s for s in chosen if s.id in values]
        elif name == "availability-zone":
            chosen = [s for s in chosen if s.zone in values]
        else:
            raise AwsError(400, "InvalidParameterValue", f"The filter '{name}' is invalid")
    return chosen


def _subnet(world: AwsWorld, s: Subnet) -> Obj:
    return {
        "subnetId": s.id,
        "subnetArn": f"arn:aws:ec2:{world.region}:{world.account}:subnet/{s.id}",
        "state": "available",
        "vpcId": world.vpc_id,
        "ownerId": world.account,
        "cidrBlock": s.cidr,
        "availableIpAddressCount": s.free,
        "availabilityZone": s.zone,
        "availabilityZoneId": f"apne1-az{ord(s.zone[-1]) - ord('a') + 1}",
        "defaultForAz": False,
        "mapPublicIpOnLaunch": False,
        "tagSet": [{"key": "Name", "value": f"{world.name}-{'-'.join(s.use)}-{s.zone}"}],
    }


def _asgs(world: AwsWorld, form: dict[str, str]) -> list[Obj]:
    names = _numbered(form, "AutoScalingGroupNames.member")
    groups = [g for g in world.asgs() if not names or g["AutoScalingGroupName"] in names]
    for i in itertools.count(1):
        name = form.get(f"Filters.member.{i}.Name")
        if name is None:
            break
        values = set(_numbered(form, f"Filters.member.{i}.Values.member"))

        def tagged(g: Obj, name: str = name, values: set[str] = values) -> bool:
            tags = {t["Key"]: t["Value"] for t in g["Tags"]}
            if name == "tag-key":
                return bool(values & set(tags))
            if name == "tag-value":
                return bool(values & set(tags.values()))
            if name.startswith("tag:"):
                return tags.get(name[4:]) in values
            raise AwsError(400, "ValidationError", f"Filter name {name} is not valid")

        groups = [g for g in groups if tagged(g)]
    return groups
