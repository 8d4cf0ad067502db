"""The EKS checks of `check`: the cloud's side of the upgrade, read through the EKS, EC2 and Auto
Scaling APIs (the provider port, `bot/core/providers.py`, whose EKS adapter needs the optional
`aws` extra), for a cluster whose configuration
says `provider: {eks: {name, region, endpoint_url?}}`.

Ids follow eksup's where they mean the same thing:
- EKS001 (Required) a control-plane subnet with fewer than 5 free IP addresses.
- EKS002 (Required) the control plane is not ACTIVE, reports health issues, or the target is not
  the next minor version.
- EKS003 (Required) a managed node group that is not ACTIVE or reports health issues.
- EKS004 (Required) an add-on that is not ACTIVE or reports health issues.
- EKS005 (Required) an add-on whose installed version EKS does not offer for the target.
- EKS006 (Recommended) a managed node group on an older version of its launch template.
- EKS008 (Required) a managed node group on an older minor than the control plane (EKS refuses
  the next control-plane update until the groups match).
- EKS009 (Recommended) an Auto Scaling group of the cluster with none of its instances a node.
- EKS010 EKS upgrade insights for the target: ERROR is Required, WARNING Recommended.
- AWS002 (Required) node/pod subnets with fewer free addresses than the pods the node-group
  replacements reschedule plus the new nodes.
Without a provider, or without boto3, the checks are skipped and the report's notes say why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import msgspec

from bot.core.checks.clouds import Extra, cloud_extra
from bot.core.checks.findings import NO_PROVIDER, RECOMMENDED, REQUIRED, Finding, FindingKind, declare, listed
from bot.core.checks.preflight import minor_of
from bot.core.providers import Provider, ProviderConfig
from bot.core.snapshots.projection import ClusterReader
from bot.errors import ClusterError

Obj = dict[str, Any]
SOURCE = "EKS API"
#: Free addresses EKS needs in each control-plane subnet for an update (eksup's EKS001).
MIN_CONTROL_PLANE_IPS = 5
NODE_GROUP_LABEL = "eks.amazonaws.com/nodegroup"
MAX_OBJECTS = 20

#: The ids these checks report (see `bot.core.checks.ids`; the module docstring says each one).
FINDINGS = declare(
    __name__,
    FindingKind(id="EKS001", severity=REQUIRED, about="control-plane subnets short of free IP addresses"),
    FindingKind(id="EKS002", severity=REQUIRED, about="the control plane is not ready for the update"),
    FindingKind(id="EKS003", severity=REQUIRED, about="managed node groups not ACTIVE or unhealthy"),
    FindingKind(id="EKS004", severity=REQUIRED, about="add-ons not ACTIVE or unhealthy"),
    FindingKind(id="EKS005", severity=REQUIRED, about="an add-on version EKS does not offer for the target"),
    FindingKind(id="EKS006", severity=RECOMMENDED, about="node groups on an older launch template version"),
    FindingKind(id="EKS008", severity=REQUIRED, about="node groups behind the control plane's minor"),
    FindingKind(id="EKS009", severity=RECOMMENDED, about="Auto Scaling groups with no nodes in them"),
    FindingKind(
        id="EKS010", severity=REQUIRED, about="an EKS upgrade insight (ERROR or WARNING)", varies=True
    ),
    FindingKind(id="AWS002", severity=REQUIRED, about="node and pod subnets short of free IP addresses"),
)


class EksReads(Provider, Protocol):
    """What the checks read of the cloud: the provider port, and EKS's own reads beside it (the
    insights and subnets as EKS describes them, launch templates, Auto Scaling groups) that only
    these checks know how to read (`bot.adapters.providers.eks.Eks` answers both)."""

    def insights(self, kubernetes_version: str) -> list[Obj]: ...
    def subnets(self, ids: list[str]) -> list[Obj]: ...
    def latest_template_version(self, template_id: str) -> int | None: ...
    def auto_scaling_groups(self) -> list[Obj]: ...


def _minor_text(version: str) -> str:
    m = minor_of(version)
    return f"{m[0]}.{m[1]}" if m else version


def _listed(objects: Sequence[str]) -> tuple[str, ...]:
    return listed(objects, MAX_OBJECTS)


def _issues(issues: Sequence[Obj]) -> str:
    return "; ".join(f"{i.get('code', '?')}: {i.get('message', '')}".strip() for i in issues)


# ----- the checks, each over what the APIs answered ---------------------------------------------------


def check_control_plane(cluster: Obj, target: str) -> list[Finding]:
    out: list[Finding] = []
    version = str(cluster.get("version", ""))
    status = str(cluster.get("status", ""))
    issues = list((cluster.get("health") or {}).get("issues") or [])
    name = f"EKS cluster {cluster.get('name', '')}"
    if status != "ACTIVE" or issues:
        out.append(
            Finding(
                id="EKS002",
                severity=REQUIRED,
                title=f"The control plane is {status or 'in an unknown state'}"
                + (" with health issues" if issues else ""),
                objects=(f"{name}: {status}" + (f" ({_issues(issues)})" if issues else ""),),
                why="EKS accepts a version update only for an ACTIVE cluster: UPDATING means another update"
                " is running; health issues (subnets, security groups, KMS key) make the update fail.",
                fix="Wait for the running update to end (aws eks list-updates), or fix what the health issues"
                " name, then check again.",
                source=SOURCE,
            )
        )
    have, want = minor_of(version), minor_of(target)
    if have and want and have[0] == want[0] and want[1] > have[1] + 1:
        out.append(
            Finding(
                id="EKS002",
                severity=REQUIRED,
                title=f"EKS updates one minor version at a time: {version} cannot go to {_minor_text(target)}",
                objects=(f"{name}: {version}",),
                why="UpdateClusterVersion accepts only the next minor version.",
                fix=f"Upgrade to {have[0]}.{have[1] + 1} first, then run the check for the next step.",
                source=SOURCE,
            )
        )
    return out


def check_nodegroups(groups: Sequence[Obj], cluster_version: str) -> list[Finding]:
    out: list[Finding] = []
    unhealthy = _not_active(groups, lambda g: f"Node group {g['nodegroupName']}")
    if unhealthy:
        out.append(
            Finding(
                id="EKS003",
                severity=REQUIRED,
                title="Managed node groups not ACTIVE or with health issues",
                objects=_listed(unhealthy),
                why="An update of a degraded group fails or stalls in the same way (missing launch template,"
                " instance limits, subnets without free addresses), and an UPDATING group is busy.",
                fix="Fix what the group's health issues name (aws eks describe-nodegroup), or wait for its"
                " running update to end, before the upgrade.",
                source=SOURCE,
            )
        )
    cp = minor_of(cluster_version)
    behind = [
        f"Node group {g['nodegroupName']}: {g.get('version', '?')}"
        for g in groups
        if cp and (m := minor_of(str(g.get("version", "")))) and m < cp
    ]
    if behind:
        out.append(
            Finding(
                id="EKS008",
                severity=REQUIRED,
                title=f"Managed node groups behind the control plane ({_minor_text(cluster_version)})",
                objects=_listed(behind),
                why="EKS refuses the next control-plane update until every managed node group is on the"
                " control plane's version.",
                fix=f"Update these groups to {_minor_text(cluster_version)} first (aws eks"
                " update-nodegroup-version, or the plan's node-group step).",
                source=SOURCE,
            )
        )
    return out


def _not_active(items: Sequence[Obj], named: Callable[[Obj], str]) -> list[str]:
    """The node groups or add-ons (as EKS describes them) not ACTIVE or with health issues, each
    as `named` and its status, with the issues EKS lists."""
    out = []
    for item in items:
        issues = (item.get("health") or {}).get("issues") or []
        if item.get("status") != "ACTIVE" or issues:
            out.append(
                f"{named(item)}: {item.get('status', '?')}" + (f" ({_issues(issues)})" if issues else "")
            )
    return out


def check_addons(addons: Sequence[Obj], offered: dict[str, list[Obj]], target: str) -> list[Finding]:
    out: list[Finding] = []
    unhealthy = _not_active(addons, lambda a: f"Add-on {a['addonName']} {a.get('addonVersion', '')}")
    if unhealthy:
        out.append(
            Finding(
                id="EKS004",
                severity=REQUIRED,
                title="Add-ons not ACTIVE or with health issues",
                objects=_listed(unhealthy),
                why="A degraded add-on (vpc-cni, coredns, kube-proxy) breaks networking or DNS for the pods the"
                " upgrade reschedules, and its own update may fail the same way.",
                fix="Look at the add-on's health issues (aws eks describe-addon) and fix them before the upgrade.",
                source=SOURCE,
            )
        )
    to = _minor_text(target)
    for a in addons:
        name, version = str(a["addonName"]), str(a.get("addonVersion", ""))
        versions = offered.get(name, [])
        if any(v.get("addonVersion") == version for v in versions):
            continue
        default = next(
            (
                str(v.get("addonVersion"))
                for v in versions
                for c in v.get("compatibilities") or []
                if c.get("clusterVersion") == to and c.get("defaultVersion")
            ),
            "",
        )
        latest = default or (str(versions[0].get("addonVersion")) if versions else "")
        out.append(
            Finding(
                id="EKS005",
                severity=REQUIRED,
                title=f"Add-on {name} {version} is not offered for Kubernetes {to}",
                objects=(
                    f"Add-on {name}: installed {version}" + (f", {to} default {latest}" if latest else ""),
                ),
                why=f"DescribeAddonVersions lists the versions EKS supports on {to}; {version} is not one of"
                " them. An add-on left on it can stop working after the control plane moves (kube-proxy on"
                " an old tag is the runbook's ImagePullBackOff).",
                fix=(
                    f"Update {name} to {latest} (aws eks update-addon --addon-name {name} --addon-version"
                    f" {latest} --resolve-conflicts PRESERVE --cluster-name CLUSTER) as the plan's step right"
                    f" after the control plane; until then {name} runs a version EKS does not support on {to}."
                    if latest
                    else f"EKS offers no version of {name} for {to}: find out whether it is still needed."
                ),
                source=SOURCE,
            )
        )
    return out


def check_insights(insights: Sequence[Obj], notes: list[str]) -> list[Finding]:
    out: list[Finding] = []
    for i in insights:
        status = str((i.get("insightStatus") or {}).get("status", "UNKNOWN"))
        reason = str((i.get("insightStatus") or {}).get("reason", ""))
        if status not in ("ERROR", "WARNING"):
            notes.append(f"EKS insight {i.get('name', i.get('id'))}: {status}")
            continue
        objects = [
            f"{d.get('usage', '')} (→ {d.get('replacedWith', '')}; "
            + ", ".join(
                f"{c.get('userAgent', '')} {c.get('numberOfRequestsLast30Days', 0)} requests in 30 days"
                for c in d.get("clientStats") or []
            )
            + ")"
            for d in (i.get("categorySpecificSummary") or {}).get("deprecationDetails") or []
        ]
        objects += [
            f"Add-on {c.get('name', '')} (compatible: {', '.join(c.get('compatibleVersions') or [])})"
            for c in (i.get("categorySpecificSummary") or {}).get("addonCompatibilityDetails") or []
        ]
        objects += [
            str(r.get("kubernetesResourceUri") or r.get("arn") or "") for r in i.get("resources") or []
        ]
        out.append(
            Finding(
                id="EKS010",
                severity=REQUIRED if status == "ERROR" else RECOMMENDED,
                title=f"EKS upgrade insight {status}: {i.get('name', '')}",
                objects=_listed(
                    [o for o in objects if o] or [f"EKS insight {i.get('name', '')} ({i.get('id', '')})"]
                ),
                why=" ".join(x for x in (reason, str(i.get("description", ""))) if x),
                fix=str(i.get("recommendation", "")) or "See the insight in the EKS console.",
                source=SOURCE,
            )
        )
    return out


def check_control_plane_subnets(subnets: Sequence[Obj]) -> list[Finding]:
    short = [
        f"Subnet {s['SubnetId']} ({s.get('AvailabilityZone', '')}): {s.get('AvailableIpAddressCount', 0)} free"
        for s in subnets
        if int(s.get("AvailableIpAddressCount", 0)) < MIN_CONTROL_PLANE_IPS
    ]
    if not short:
        return []
    return [
        Finding(
            id="EKS001",
            severity=REQUIRED,
            title=f"Control-plane subnets with fewer than {MIN_CONTROL_PLANE_IPS} free IP addresses",
            objects=_listed(short),
            why="EKS places new control-plane network interfaces in the cluster's subnets during the update;"
            f" it needs at least {MIN_CONTROL_PLANE_IPS} free addresses in each, or the update fails.",
            fix="Free addresses in these subnets (unused ENIs, load balancers), or add subnets to the"
            " cluster (aws eks update-cluster-config --resources-vpc-config), before the upgrade.",
            source=SOURCE,
        )
    ]


def check_node_subnets(subnets: Sequence[Obj], *, pods: int, nodes: int) -> list[Finding]:
    free = sum(int(s.get("AvailableIpAddressCount", 0)) for s in subnets)
    need = pods + nodes
    if not subnets or free >= need:
        return []
    return [
        Finding(
            id="AWS002",
            severity=REQUIRED,
            title=f"Node and pod subnets have {free} free IP addresses; the node-group updates need about {need}",
            objects=_listed(
                [
                    f"Subnet {s['SubnetId']} ({s.get('AvailabilityZone', '')}): {s.get('AvailableIpAddressCount', 0)} free"
                    for s in subnets
                ]
            ),
            why=f"Replacing the managed node groups starts {nodes} new nodes and reschedules {pods} pods, each"
            " taking an address from these subnets (the VPC CNI gives pods VPC addresses) before the old"
            " ones are released; short of addresses, pods stay Pending and the update stalls.",
            fix="Free addresses, add subnets (or a secondary CIDR for pods), or update the groups one at a"
            " time with a small maxUnavailable.",
            source=SOURCE,
        )
    ]


def check_launch_templates(groups: Sequence[Obj], latest: dict[str, int | None]) -> list[Finding]:
    drift = []
    for g in groups:
        lt = g.get("launchTemplate") or {}
        newest = latest.get(str(lt.get("id", "")))
        used = str(lt.get("version", ""))
        if newest is not None and used.isdigit() and int(used) < newest:
            drift.append(
                f"Node group {g['nodegroupName']}: launch template {lt.get('name', lt.get('id'))} version"
                f" {used}, latest {newest}"
            )
    if not drift:
        return []
    return [
        Finding(
            id="EKS006",
            severity=RECOMMENDED,
            title="Managed node groups on an older version of their launch template",
            objects=_listed(drift),
            why="Someone made a newer launch-template version that these groups do not use: either the"
            " change was never rolled out, or the group was changed outside its code. An update keeps the"
            " version the group names, so the newer settings stay unapplied.",
            fix="Find out what the newer version changes; roll it out (update-nodegroup-version"
            " --launch-template) or delete it, before the upgrade.",
            source=SOURCE,
        )
    ]


def check_asgs(asgs: Sequence[Obj], node_instances: set[str]) -> list[Finding]:
    empty = [
        f"Auto Scaling group {g['AutoScalingGroupName']}: {len(g.get('Instances') or [])} instances,"
        f" desired {g.get('DesiredCapacity', 0)}"
        for g in asgs
        if not any(i.get("InstanceId") in node_instances for i in g.get("Instances") or [])
    ]
    if not empty:
        return []
    return [
        Finding(
            id="EKS009",
            severity=RECOMMENDED,
            title="Auto Scaling groups of the cluster with no nodes in them",
            objects=_listed(empty),
            why="A group left behind when its node group was replaced (eksctl's rename, a Terraform"
            " move) still costs, can scale up old nodes again, and confuses the next upgrade.",
            fix="Confirm nothing uses it, then delete it (eksctl delete nodegroup, or its CloudFormation"
            " stack / Terraform resource).",
            source=SOURCE,
        )
    ]


# ----- reading the cluster's side: pods to reschedule, nodes, instances -----------------------------


class _Owner(msgspec.Struct, gc=False):
    kind: str | None = None


class _PodMeta(msgspec.Struct, rename="camel", gc=False):
    owner_references: tuple[_Owner, ...] | None = None
    annotations: dict[str, str] | None = None


class _PodSpec(msgspec.Struct, rename="camel", gc=False):
    node_name: str | None = None
    host_network: bool | None = None


class _Pod(msgspec.Struct, gc=False):
    metadata: _PodMeta = msgspec.field(default_factory=_PodMeta)
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


class _NodeMeta(msgspec.Struct, gc=False):
    name: str = ""
    labels: dict[str, str] | None = None


class _NodeSpec(msgspec.Struct, rename="camel", gc=False):
    provider_id: str | None = msgspec.field(default=None, name="providerID")


class _Node(msgspec.Struct, gc=False):
    metadata: _NodeMeta = msgspec.field(default_factory=_NodeMeta)
    spec: _NodeSpec = msgspec.field(default_factory=_NodeSpec)


def _cluster_side(reader: ClusterReader) -> tuple[set[str], int]:
    """(instance ids of all nodes, pods on nodes of managed groups that a replacement reschedules)."""
    instances: set[str] = set()
    managed: set[str] = set()
    for page in reader.list_pages("/api/v1/nodes", item_type=_Node):
        for node in page.items:
            if node.spec.provider_id:
                instances.add(node.spec.provider_id.rsplit("/", 1)[-1])
            if (node.metadata.labels or {}).get(NODE_GROUP_LABEL):
                managed.add(node.metadata.name)
    pods = 0
    query = {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
    for pod_page in reader.list_pages("/api/v1/pods", query, item_type=_Pod):
        for pod in pod_page.items:
            if pod.spec.node_name not in managed or pod.spec.host_network:
                continue
            owners = pod.metadata.owner_references or ()
            if any(o.kind == "DaemonSet" for o in owners) or "kubernetes.io/config.mirror" in (
                pod.metadata.annotations or {}
            ):
                continue
            pods += 1
    return instances, pods


# ----- the extra -----------------------------------------------------------------------------------


def run_eks_checks(eks: EksReads, reader: ClusterReader, target: str, notes: list[str]) -> list[Finding]:
    """Every EKS check over one cluster; what could not be read becomes a note."""
    cluster = eks.control_plane()
    version = str(cluster.get("version", ""))
    notes.append(
        f"EKS cluster {eks.name}: {version} ({cluster.get('platformVersion', '?')}), {cluster.get('status', '?')}"
    )
    to = _minor_text(target)
    findings = check_control_plane(cluster, target)
    groups = eks.node_pools()
    findings += check_nodegroups(groups, version)
    addons = eks.addons()
    offered = {str(a["addonName"]): eks.addon_versions(str(a["addonName"]), to) for a in addons}
    findings += check_addons(addons, offered, target)
    findings += check_insights(eks.insights(to), notes)
    vpc = cluster.get("resourcesVpcConfig") or {}
    findings += check_control_plane_subnets(eks.subnets(list(vpc.get("subnetIds") or [])))
    try:
        instances, pods = _cluster_side(reader)
    except ClusterError as exc:
        notes.append(
            f"EKS subnet and Auto Scaling checks without the cluster's pods and nodes: {exc.user_message}"
        )
        instances, pods = set(), -1
    node_subnets = sorted({s for g in groups for s in g.get("subnets") or []})
    if pods >= 0:
        new_nodes = sum(int((g.get("scalingConfig") or {}).get("desiredSize", 0)) for g in groups)
        findings += check_node_subnets(eks.subnets(node_subnets), pods=pods, nodes=new_nodes)
    latest = {
        str(lt["id"]): eks.latest_template_version(str(lt["id"]))
        for g in groups
        if (lt := g.get("launchTemplate") or {}).get("id")
    }
    findings += check_launch_templates(groups, latest)
    if pods >= 0:
        findings += check_asgs(eks.auto_scaling_groups(), instances)
    return findings


def eks_extra(
    provider: ProviderConfig | None, *, connect: Callable[[ProviderConfig], Provider] | None = None
) -> Extra:
    """The EKS checks as a `check` extra for a cluster's provider; a cluster without one, or a bot
    without the `aws` extra, gets a note saying the checks were skipped and why."""
    return cloud_extra(
        "EKS",
        provider,
        lambda eks, reader, target, notes: run_eks_checks(cast(EksReads, eks), reader, target, notes),
        connect=connect,
        # The default cloud's note, on every cluster without a provider: an AKS or GKE cluster's
        # people learn there which provider names their cloud's checks.
        unnamed=f"{NO_PROVIDER} (provider: {{eks: …}}, {{aks: …}} or {{gke: …}})",
    )
