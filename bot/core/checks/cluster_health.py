"""Checks of the cluster around the workloads: pod networking (VPC CNI), custom resource
definitions, the Istio install, certificates and the room to drain a node group.

Like `preflight.py`, pure functions over facts the gatherer read in its one pass (`HealthFacts`,
a part of `preflight.Facts`), so each is tested with a few lines of data. Ids:
CNI001 VPC CNI warm-IP settings (its out-of-IP events are the known-issue rule CNI002, in
`templates/rules/known-issues.yaml`), CRD001 stored versions no longer served, CRD002 stored
versions the CRD marks deprecated (the operator will drop them), ISTIO002 an
IstioOperator-based install, CERT001-003 certificates (webhook and CRD-conversion `caBundle`s,
the Istio root), CERT004 webhook serving certificates issued by cert-manager (the Certificate a
`cert-manager.io/inject-ca-from` annotation names, read from its status), CAP001-002 capacity to
drain a node group. Each finding names its evidence in `source`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, FindingKind, declare

#: The ids these checks report (see `bot.core.checks.ids`).
FINDINGS = declare(
    __name__,
    FindingKind(id="CNI001", severity=RECOMMENDED, about="VPC CNI warm-IP settings too thin for a drain"),
    FindingKind(id="CRD001", severity=RECOMMENDED, about="a CRD records a stored version no longer served"),
    FindingKind(
        id="CRD002",
        severity=REQUIRED,
        about="a CRD still stores versions it marks deprecated or no longer serves",
        varies=True,
    ),
    FindingKind(
        id="ISTIO002", severity=RECOMMENDED, about="Istio reconciled by the in-cluster IstioOperator"
    ),
    FindingKind(
        id="CERT001", severity=REQUIRED, about="a CA bundle or the Istio root expires inside the window"
    ),
    FindingKind(id="CERT002", severity=RECOMMENDED, about="a CA bundle or the Istio root expires soon"),
    FindingKind(id="CERT003", severity=RECOMMENDED, about="a certificate bundle that cannot be read"),
    FindingKind(
        id="CERT004",
        severity=REQUIRED,
        about="a cert-manager serving certificate expires before it is renewed",
        varies=True,
    ),
    FindingKind(id="CAP001", severity=REQUIRED, about="no room to drain a node of a node group"),
    FindingKind(id="CAP002", severity=RECOMMENDED, about="the cluster cannot hold a node group's pods"),
)

#: A certificate that expires before now + this fails the check (Required): the upgrade, its
#: soak and a rollback all happen inside it. Later than this but before `CERT_SOON`: Recommended.
CERT_WINDOW = timedelta(days=14)
CERT_SOON = timedelta(days=30)
#: The ConfigMap istiod publishes its root certificate in (in its own namespace and every other).
ISTIO_ROOT_CONFIGMAP = "istio-ca-root-cert"
ISTIO_ROOT_KEY = "root-cert.pem"
#: VPC CNI variables read from the aws-node DaemonSet.
CNI_ENV = (
    "WARM_IP_TARGET",
    "MINIMUM_IP_TARGET",
    "WARM_ENI_TARGET",
    "WARM_PREFIX_TARGET",
    "ENABLE_PREFIX_DELEGATION",
)

_CNI_SOURCE = "https://github.com/aws/amazon-vpc-cni-k8s/blob/master/docs/eni-and-ip-target.md"
_CRD_SOURCE = (
    "https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definition-versioning/"
    "#upgrade-existing-objects-to-a-new-stored-version ; Helm never upgrades CRDs: "
    "https://helm.sh/docs/chart_best_practices/custom_resource_definitions/"
)
_OPERATOR_SOURCE = "https://istio.io/latest/blog/2024/in-cluster-operator-deprecation-announcement/"
_WEBHOOK_CERT_SOURCE = "https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#contacting-the-webhook"
_SERVING_SOURCE = (
    "https://cert-manager.io/docs/usage/certificate/#renewal ; "
    "https://cert-manager.io/docs/concepts/ca-injector/"
)
_ISTIO_ROOT_SOURCE = "https://istio.io/latest/docs/ops/configuration/security/root-transition/"
_CAPACITY_SOURCE = (
    "https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/ ; "
    "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html"
)


# ----- facts -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CniFacts:
    """The aws-node DaemonSet's VPC CNI settings (its first container's env values given)."""

    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CrdFacts:
    name: str  # "certificates.cert-manager.io"
    versions: tuple[str, ...] = ()  # every version of spec.versions
    served: tuple[str, ...] = ()  # those with served: true
    storage: str = ""  # the one with storage: true
    stored: tuple[str, ...] = ()  # status.storedVersions
    deprecated: tuple[str, ...] = ()  # those marked `deprecated: true`: their removal is announced
    warnings: tuple[tuple[str, str], ...] = ()  # (version, its deprecationWarning) when given


@dataclass(frozen=True, kw_only=True)
class CertFacts:
    """A certificate the cluster depends on, or a bundle that could not be read (`error`)."""

    kind: str  # "webhook" | "conversion" | "istio-root"
    owner: str  # "ValidatingWebhookConfiguration x", "CustomResourceDefinition y", "ConfigMap ns/name"
    where: str  # "webhook z caBundle", "spec.conversion.webhook caBundle", "data.root-cert.pem"
    subject: str = ""
    not_after: datetime | None = None
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class ServingCert:
    """A cert-manager Certificate named by a webhook's or a CRD's `cert-manager.io/inject-ca-from`
    annotation: the serving certificate of that webhook, read from the Certificate's status only
    (never its Secret). `error` when it could not be read ("no such Certificate")."""

    ref: str  # "ledger/ledger-webhook-serving"
    users: tuple[str, ...]  # "MutatingWebhookConfiguration ledger-defaults", "CustomResourceDefinition x"
    not_after: datetime | None = None
    renewal: datetime | None = None  # status.renewalTime: when cert-manager renews it
    ready: str = ""  # the Ready condition's status: "True", "False", "" (none)
    message: str = ""  # the Ready condition's message
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class NodeRoom:
    """What a node offers and what its pods ask (requests; CPU in millicores, memory in bytes)."""

    name: str
    group: str
    schedulable: bool  # Ready and not cordoned: pods evicted elsewhere can land here
    allocatable: tuple[int, int, int]  # cpu, memory, pods
    used: tuple[int, int, int]  # every pod not finished (DaemonSets too: they stay)
    evict: tuple[int, int, int]  # the pods a drain evicts (not DaemonSet, not mirror)
    biggest: tuple[int, int] = (0, 0)  # the largest request of one pod to evict: cpu, memory


@dataclass(frozen=True, kw_only=True)
class HealthFacts:
    cni: CniFacts | None = None  # None: no aws-node DaemonSet (not the VPC CNI)
    crds: Sequence[CrdFacts] = ()
    #: The istio-operator controller Deployments ("Deployment ns/name (image tag)")
    istio_operators: Sequence[str] = ()
    #: Whether the IstioOperator CRD (istiooperators.install.istio.io) exists
    istio_operator_crd: bool = False
    certs: Sequence[CertFacts] = ()
    serving: Sequence[ServingCert] = ()
    rooms: Sequence[NodeRoom] = ()


# ----- quantities ------------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "m": 0.001,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def quantity(text: str | None, *, milli: bool = False) -> int:
    """A resource quantity ("100m", "2", "512Mi", "1e3") as an integer (millis with `milli`);
    0 for what is not a quantity."""
    if not text:
        return 0
    m = _QUANTITY.match(text.strip())
    if not m or m.group(2) not in _SUFFIX:
        return 0
    try:
        value = float(m.group(1)) * _SUFFIX[m.group(2)]
    except ValueError:
        return 0
    return round(value * 1000) if milli else round(value)


def _cpu(millis: int) -> str:
    return f"{millis / 1000:g} CPU" if millis % 1000 else f"{millis // 1000} CPU"


def _mem(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


# ----- checks ----------------------------------------------------------------------------------------


def check_cni(health: HealthFacts) -> list[Finding]:
    if health.cni is None:
        return []
    env = health.cni.env
    warm = env.get("WARM_IP_TARGET", "").strip()
    minimum = env.get("MINIMUM_IP_TARGET", "").strip()
    prefix = env.get("ENABLE_PREFIX_DELEGATION", "").strip().lower() == "true"
    if not warm or not warm.isdigit() or minimum or prefix:
        return []
    shown = ", ".join(f"{k}={env[k]}" for k in CNI_ENV if k in env)
    return [
        Finding(
            id="CNI001",
            severity=RECOMMENDED,
            title=f"VPC CNI keeps only WARM_IP_TARGET={warm} spare IPs per node, with no MINIMUM_IP_TARGET",
            objects=(f"DaemonSet kube-system/aws-node ({shown})",),
            why="A drain reschedules a node's pods onto the others at once. With a small WARM_IP_TARGET"
            " and no floor, each node holds only that many spare addresses, so the pods wait while ipamd"
            " asks EC2 for more (and EC2 throttles it across nodes): they stay ContainerCreating with"
            " FailedCreatePodSandBox 'failed to assign an IP address' (known issue CNI002).",
            fix="Check the subnets' free addresses (aws ec2 describe-subnets … AvailableIpAddressCount),"
            " then give the CNI a floor sized to a node's pods before the upgrade (or set it in the"
            " vpc-cni add-on's configuration values), or enable prefix delegation:\n"
            "  kubectl -n kube-system set env daemonset/aws-node MINIMUM_IP_TARGET=30 WARM_IP_TARGET=5",
            source=_CNI_SOURCE,
        )
    ]


def _migrate(crd: CrdFacts, keep: str) -> str:
    resource = crd.name.split(".", 1)[0]
    return (
        f"Rewrite every object in the storage version {keep}, then drop the old entries:\n"
        f"  kubectl get {resource} -A -o json | kubectl replace -f -\n"
        f"  kubectl patch crd {crd.name} --subresource=status --type=merge"
        f' -p \'{{"status":{{"storedVersions":["{keep}"]}}}}\'\n'
    )


def check_crds(health: HealthFacts) -> list[Finding]:
    out: list[Finding] = []
    for crd in sorted(health.crds, key=lambda c: c.name):
        keep = crd.storage or (crd.served[0] if crd.served else "")
        dropping = [v for v in crd.stored if v in crd.deprecated and v != keep]
        if dropping:
            out.append(_dropped_version(crd, dropping, keep))
        # A deprecated version is CRD002's: one finding per version, the more telling one.
        stale = [v for v in crd.stored if v not in crd.served and v not in dropping]
        if not stale:
            continue
        gone = [v for v in stale if v not in crd.versions]
        out.append(
            Finding(
                id="CRD001",
                severity=RECOMMENDED,
                title=f"CustomResourceDefinition {crd.name} still records stored version"
                f"{'s' if len(stale) > 1 else ''} {', '.join(stale)}, no longer served",
                objects=(
                    f"CustomResourceDefinition {crd.name} (storedVersions {', '.join(crd.stored)};"
                    f" served {', '.join(crd.served) or 'none'}; storage {crd.storage or '?'})",
                ),
                why="Objects written before the version changed may still be stored as "
                f"{', '.join(stale)}. The next chart or operator release that drops "
                f"{'that version' if len(stale) == 1 else 'those versions'} from the CRD is refused by the"
                " API server while status.storedVersions lists it — and Helm does not upgrade CRDs at all"
                " (crds/ is installed once), so the CRD silently stays old while its controller moves on."
                + (f" {', '.join(gone)} is already gone from spec.versions." if gone else ""),
                fix=_migrate(crd, keep)
                + "Apply CRD changes of a chart yourself (kubectl apply --server-side -f the chart's crds/)"
                " before upgrading its release.",
                source=_CRD_SOURCE,
            )
        )
    return out


def _dropped_version(crd: CrdFacts, dropping: Sequence[str], keep: str) -> Finding:
    """CRD002: objects may still be stored in a version whose removal the CRD itself announces."""
    unserved = [v for v in dropping if v not in crd.served]
    said = [f"{v}: “{w}”" for v, w in crd.warnings if v in dropping]
    listed = ", ".join(dropping)
    plural = "s" if len(dropping) > 1 else ""
    return Finding(
        id="CRD002",
        severity=REQUIRED if unserved else RECOMMENDED,
        title=f"CustomResourceDefinition {crd.name} still stores version{plural} {listed},"
        f" which its operator marks deprecated{' and no longer serves' if unserved else ''}",
        objects=(
            f"CustomResourceDefinition {crd.name} (storedVersions {', '.join(crd.stored)};"
            f" deprecated {', '.join(crd.deprecated)}; served {', '.join(crd.served) or 'none'};"
            f" storage {crd.storage or '?'})",
        ),
        why=f"The CRD marks {listed} `deprecated: true`: its operator has announced that a release will"
        f" drop {'them' if plural else 'it'}. That release's CRD is refused by the API server while"
        " status.storedVersions still lists the version (objects written before may still be stored"
        " in it), so the operator's upgrade fails half-way — or, installed by Helm, which never"
        " upgrades CRDs, the old CRD silently stays while the new controller expects the new one."
        + (
            f" {', '.join(unserved)} is no longer served: only the migration of the stored objects is"
            " left, and nothing reads them in that version any more."
            if unserved
            else ""
        )
        + (f" The CRD says: {'; '.join(said)}." if said else ""),
        fix=_migrate(crd, keep)
        + "Do it before upgrading the operator (and apply its new CRDs yourself: kubectl apply"
        " --server-side -f the chart's crds/).",
        source=_CRD_SOURCE,
    )


def check_istio_operator(health: HealthFacts) -> list[Finding]:
    if not health.istio_operators:
        return []
    return [
        Finding(
            id="ISTIO002",
            severity=RECOMMENDED,
            title="Istio is installed and reconciled by the in-cluster IstioOperator controller",
            objects=(
                *health.istio_operators,
                *(
                    ("CustomResourceDefinition istiooperators.install.istio.io",)
                    if health.istio_operator_crd
                    else ()
                ),
            ),
            why="The in-cluster operator is deprecated since Istio 1.23 and removed in 1.24: it gets no"
            " fixes for newer Kubernetes versions, and while it runs it reverts changes made to the"
            " control plane any other way (including an upgrade's).",
            fix="Move the install to istioctl or Helm before the upgrade: export the IstioOperator"
            " (kubectl get istiooperators -A -o yaml), install the same revision with"
            " `istioctl install -f FILE` or the Helm charts, then remove the operator"
            " (istioctl operator remove, or delete its Deployment) — not the IstioOperator resources"
            " first, which would make it uninstall Istio.",
            source=_OPERATOR_SOURCE,
        )
    ]


def _left(until: datetime, now: datetime) -> str:
    seconds = (until - now).total_seconds()
    if seconds <= 0:
        return f"expired {until:%Y-%m-%d %H:%M} UTC"
    if seconds < 2 * 86400:
        return f"expires in {round(seconds / 3600)} h ({until:%Y-%m-%d %H:%M} UTC)"
    return f"expires in {round(seconds / 86400)} days ({until:%Y-%m-%d} UTC)"


def check_certs(
    health: HealthFacts, *, now: datetime, window: timedelta = CERT_WINDOW, soon: timedelta = CERT_SOON
) -> list[Finding]:
    out: list[Finding] = []
    for cert in health.certs:
        obj = f"{cert.owner}: {cert.where}"
        if cert.error:
            out.append(
                Finding(
                    id="CERT003",
                    severity=RECOMMENDED,
                    title=f"A certificate bundle that cannot be read: {cert.owner}",
                    objects=(f"{obj} ({cert.error})",),
                    why="Its expiry cannot be checked; the API server (or the proxies) cannot use a bundle"
                    " that is not a PEM certificate either.",
                    fix="Look at it: kubectl get "
                    + _kubectl_ref(cert)
                    + " -o yaml, and regenerate it with whatever issues it.",
                    source=_WEBHOOK_CERT_SOURCE if cert.kind != "istio-root" else _ISTIO_ROOT_SOURCE,
                )
            )
            continue
        if cert.not_after is None or cert.not_after > now + soon:
            continue
        required = cert.not_after <= now + window
        name = f" (CN {cert.subject})" if cert.subject else ""
        left = _left(cert.not_after, now)
        if cert.kind == "istio-root":
            title = f"The Istio root certificate {left}"
            why = (
                "Every workload certificate istiod issues chains to this root; once it expires, mTLS"
                " between sidecars fails cluster-wide, and the upgrade's restarts make every proxy fetch"
                " new certificates at once."
            )
            fix = (
                "Rotate the root before the upgrade (Istio's root-transition procedure: a new"
                " istio-ca-secret or plug-in cacerts, restart istiod, then restart the workloads so their"
                " proxies trust the new root). Check it with:\n  kubectl -n "
                + cert.owner.split(" ", 1)[1].split("/", 1)[0]
                + f" get configmap {ISTIO_ROOT_CONFIGMAP} -o jsonpath='{{.data.root-cert\\.pem}}'"
                " | openssl x509 -noout -enddate"
            )
            source = _ISTIO_ROOT_SOURCE
        else:
            title = f"The CA bundle of {cert.owner} {left}"
            why = (
                "The API server checks the webhook's serving certificate against this bundle: once it"
                " expires every call fails TLS, and "
                + (
                    "the objects it intercepts can no longer be written (failurePolicy Fail) or pass"
                    " unchecked (Ignore)"
                    if cert.kind == "webhook"
                    else "the custom resources of this CRD can no longer be converted (read or written)"
                )
                + " — during the upgrade, when new nodes and pods need them."
            )
            fix = (
                "Renew it with what issues it (cert-manager's cainjector, the operator or chart that"
                " created it) and check the new expiry:\n  kubectl get "
                + _kubectl_ref(cert)
                + " -o jsonpath='{..caBundle}' | base64 -d | openssl x509 -noout -enddate"
            )
            source = _WEBHOOK_CERT_SOURCE
        out.append(
            Finding(
                id="CERT001" if required else "CERT002",
                severity=REQUIRED if required else RECOMMENDED,
                title=title,
                objects=(f"{obj}{name} {left}",),
                why=why
                + (
                    f" It expires inside the upgrade window (the next {window.days} days)."
                    if required
                    else f" It expires within {soon.days} days."
                ),
                fix=fix,
                source=source,
            )
        )
    return out


def _kubectl_ref(cert: CertFacts) -> str:
    kind, _, name = cert.owner.partition(" ")
    if kind == "ConfigMap":
        namespace, _, cm = name.partition("/")
        return f"-n {namespace} configmap {cm}"
    return f"{kind.lower()} {name}"


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _sub(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x - y for x, y in zip(a, b, strict=True))


def _free(room: NodeRoom) -> tuple[int, int, int]:
    (cpu, mem, pods), (used_cpu, used_mem, used_pods) = room.allocatable, room.used
    return max(cpu - used_cpu, 0), max(mem - used_mem, 0), max(pods - used_pods, 0)


def _short(need: tuple[int, ...], free: tuple[int, ...]) -> list[str]:
    """What `need` lacks in `free`, in words ("1.5 CPU more than the 0.4 CPU free")."""
    out = []
    for i, (n, f) in enumerate(zip(need, free, strict=True)):
        if n > f:
            shown = (_cpu, _mem, lambda v: f"{v} pods")[i]
            out.append(f"{shown(n)} requested, {shown(f)} free")
    return out


def check_capacity(health: HealthFacts) -> list[Finding]:
    """Per node group: can the rest of the cluster take the pods of its fullest node (CAP001,
    Required: any drain of the group leaves pods Pending), and the pods of the whole group
    (CAP002, Recommended: a drain of the whole group — the bot's `drain nodegroup=` cordons every
    node first — needs the new nodes in before it starts)?"""
    rooms = [r for r in health.rooms if r.allocatable[0] or r.allocatable[1]]
    groups: dict[str, list[NodeRoom]] = {}
    for room in rooms:
        groups.setdefault(room.group, []).append(room)
    # Each node's free room once, and the schedulable nodes' sum once (and per group): a group's
    # "others" and "outside" are that sum less its own, so 10 groups of 5,000 nodes cost one pass
    # over the nodes, not one per group.
    free = {r.name: _free(r) for r in rooms}
    schedulable = [r for r in rooms if r.schedulable]
    # Added up field by field: a tuple built per node and group costs more than the sums.
    cpu_all = mem_all = pods_all = 0
    sums: dict[str, list[int]] = {}
    for r in schedulable:
        cpu, mem, pods = free[r.name]
        cpu_all += cpu
        mem_all += mem
        pods_all += pods
        into = sums.get(r.group)
        if into is None:
            sums[r.group] = [cpu, mem, pods]
        else:
            into[0] += cpu
            into[1] += mem
            into[2] += pods
    free_all: tuple[int, ...] = (cpu_all, mem_all, pods_all)
    free_in: dict[str, tuple[int, ...]] = {group: tuple(v) for group, v in sums.items()}
    out: list[Finding] = []
    for group, members in sorted(groups.items()):
        label = f"node group {group}" if group else "nodes without a node-group label"
        fullest = max(members, key=lambda r: (r.evict[0], r.evict[1], r.name))
        if fullest.evict[2] == 0:
            continue
        others = len(schedulable) - (1 if fullest.schedulable else 0)
        free_others = _sub(free_all, free[fullest.name]) if fullest.schedulable else free_all
        short = _short(fullest.evict, free_others)
        big_cpu, big_mem = fullest.biggest
        biggest_fits = any(
            f[0] >= big_cpu and f[1] >= big_mem
            for r in schedulable
            if r.name != fullest.name
            for f in (free[r.name],)
        )
        if short or not biggest_fits:
            reasons = short or [
                f"its largest pod asks {_cpu(fullest.biggest[0])} and {_mem(fullest.biggest[1])},"
                " more than any other schedulable node has free"
            ]
            out.append(
                Finding(
                    id="CAP001",
                    severity=REQUIRED,
                    title=f"No room to drain a node of {label}",
                    objects=(
                        f"Node {fullest.name} ({fullest.evict[2]} pods to evict: {_cpu(fullest.evict[0])},"
                        f" {_mem(fullest.evict[1])} requested)",
                    ),
                    why="Draining this node (the fullest of its group) evicts pods whose requests the"
                    f" rest of the cluster cannot hold: its {others} other schedulable nodes have"
                    f" {_cpu(free_others[0])}, {_mem(free_others[1])} and {free_others[2]} pods free; "
                    + "; ".join(reasons)
                    + ". They would stay Pending, and a budget-guarded workload would stall the drain.",
                    fix="Add capacity before the drain: scale the node group up by a node (or let the"
                    " managed node group surge: maxSurge/maxUnavailable 1), or lower the requests"
                    " that are not needed; then run the check again.",
                    source=_CAPACITY_SOURCE,
                )
            )
            continue
        need: tuple[int, ...] = (0, 0, 0)
        for r in members:
            need = _add(need, r.evict)
        outside = len(schedulable) - sum(1 for r in members if r.schedulable)
        free_outside = _sub(free_all, free_in.get(group, (0, 0, 0)))
        short = _short(need, free_outside)
        if short:
            out.append(
                Finding(
                    id="CAP002",
                    severity=RECOMMENDED,
                    title=f"The rest of the cluster cannot hold the pods of {label}",
                    objects=(
                        f"{label}: {len(members)} nodes, {need[2]} pods to evict"
                        f" ({_cpu(need[0])}, {_mem(need[1])} requested)",
                    ),
                    why="A drain of the whole group (the bot's drain cordons every node of it first) has"
                    f" nowhere to put its pods but the new nodes: the {outside} schedulable nodes"
                    f" outside it have {_cpu(free_outside[0])}, {_mem(free_outside[1])} and"
                    f" {free_outside[2]} pods free; " + "; ".join(short) + ".",
                    fix="Let the new nodes join and become Ready before the drain (replace the node group"
                    " with a surge, or scale the new group up first); drain node by node otherwise.",
                    source=_CAPACITY_SOURCE,
                )
            )
    return out


def check_serving_certs(
    health: HealthFacts, *, now: datetime, window: timedelta = CERT_WINDOW, soon: timedelta = CERT_SOON
) -> list[Finding]:
    """CERT004: a webhook's (or a CRD conversion's) serving certificate issued by cert-manager that
    expires inside the window — Required when cert-manager will not renew it in time (its renewal
    time has passed, or the Certificate is not Ready), Recommended when its renewal falls in the
    window (cert-manager and its issuer must then run through the upgrade) or it expires within
    `soon` with its renewal overdue; a Certificate an annotation names that cannot be read."""
    out: list[Finding] = []
    for cert in health.serving:
        users = ", ".join(cert.users)
        if cert.error:
            out.append(
                Finding(
                    id="CERT004",
                    severity=RECOMMENDED,
                    title=f"The cert-manager Certificate {cert.ref} that {cert.users[0]} names cannot be read",
                    objects=(f"Certificate {cert.ref} ({cert.error}), named by {users}",),
                    why="cert-manager.io/inject-ca-from names it: cainjector copies its CA into the caBundle,"
                    " and the webhook serves the certificate it issues. Without it, neither can be renewed"
                    " and its expiry cannot be checked.",
                    fix=f"kubectl -n {cert.ref.split('/', 1)[0]} get certificates — fix the annotation, or"
                    " create the Certificate the webhook's chart expects.",
                    source=_SERVING_SOURCE,
                )
            )
            continue
        if cert.not_after is None:
            continue
        overdue = cert.renewal is None or cert.renewal <= now or cert.ready == "False"
        inside = cert.not_after <= now + window
        if not inside and not (overdue and cert.not_after <= now + soon):
            continue
        required = inside and overdue
        left = _left(cert.not_after, now)
        renewal = (
            f"renewalTime {cert.renewal:%Y-%m-%d %H:%M} UTC" if cert.renewal is not None else "no renewalTime"
        )
        state = (
            f"Ready {cert.ready}" + (f": {cert.message}" if cert.message else "")
            if cert.ready
            else "no Ready condition"
        )
        namespace, name = cert.ref.split("/", 1)
        why = (
            "cert-manager issues this webhook's serving certificate (and cainjector puts its CA into the"
            " caBundle); it renews it at status.renewalTime. "
            + (
                "That time has passed, or the Certificate is not Ready: the renewal is failing"
                + (f" ({cert.message})" if cert.message else "")
                + ", so nothing will replace it before it expires."
                if overdue
                else "Its renewal falls inside the window: cert-manager, its webhook and the issuer must"
                " keep running while the nodes under them are drained."
            )
            + " Once it expires, the API server's calls to "
            + users
            + " fail TLS: the objects they admit or convert can no longer be written (failurePolicy Fail)"
            " or pass unchecked (Ignore) — during the upgrade, when new pods need them."
            + (
                f" It expires inside the upgrade window (the next {window.days} days)."
                if inside
                else f" It expires within {soon.days} days."
            )
        )
        out.append(
            Finding(
                id="CERT004",
                severity=REQUIRED if required else RECOMMENDED,
                title=f"The serving certificate of {cert.users[0]} (cert-manager Certificate {cert.ref}) {left}"
                + ("; its renewal is overdue" if overdue else ""),
                objects=(
                    f"Certificate {cert.ref}: status.notAfter {left}; {renewal}; {state} — used by {users}",
                ),
                why=why,
                fix="See why it is not renewed (its events and CertificateRequests), fix the issuer, then"
                " renew it now and check the new expiry:\n"
                f"  kubectl -n {namespace} describe certificate {name}\n"
                f"  cmctl renew -n {namespace} {name}\n"
                f"  kubectl -n {namespace} get certificate {name} -o jsonpath='{{.status.notAfter}}'",
                source=_SERVING_SOURCE,
            )
        )
    return out


def run_health_checks(health: HealthFacts, *, now: float | None = None) -> list[Finding]:
    """Every check of this module; `now` (Unix seconds) dates the certificates' expiry."""
    when = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    return [
        *check_cni(health),
        *check_crds(health),
        *check_istio_operator(health),
        *check_certs(health, now=when),
        *check_serving_certs(health, now=when),
        *check_capacity(health),
    ]
