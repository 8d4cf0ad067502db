"""What the cluster jobs share: the slice of the kube adapter they use, argument parsing, node
selection, label-selector matching (PodDisruptionBudgets, workloads) and the card's progress bar.

`JobCluster` is the Protocol of the adapter methods the jobs call, so the core never imports
`bot.adapters.kube`; `bot.adapters.kube.Cluster` satisfies it, and so can a small fake in tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from bot.core.durations import parse_duration
from bot.core.kube.objects import node_group, parse_iso
from bot.core.kube.versions import on_version, parse_version
from bot.errors import ClusterError, UserError, clip
from bot.records import Approval, JobRow

Raw = dict[str, Any]


#: The well-known label that takes a node out of cloud load balancers (the service controller
#: stops sending it traffic): a drain with `depool` sets it; the value says the bot set it, so that
#: only the bot's is removed (after the drain, or by an `uncordon`).
DEPOOL_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
DEPOOL_VALUE = "upgrade-bot"


class JobCluster(Protocol):
    """The kube adapter as the jobs see it (`bot.adapters.kube.Cluster` has every method)."""

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    def list_pages(self, path: str, query: Mapping[str, Any] | None = None) -> Iterator[Any]: ...

    def cordon(
        self, node: str, *, dry_run: bool = False, annotations: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...

    def uncordon(
        self, node: str, *, dry_run: bool = False, remove_annotations: Sequence[str] = ()
    ) -> dict[str, Any]: ...

    def label_node(
        self, node: str, labels: Mapping[str, str | None], *, dry_run: bool = False
    ) -> dict[str, Any]: ...

    def node_event(
        self, node: str, *, uid: str, name: str, reason: str, message: str, action: str, at: datetime
    ) -> bool: ...

    def evict(self, namespace: str, pod: str, *, uid: str = "", dry_run: bool = False) -> bool: ...

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, dry_run: bool = False, grace_seconds: int | None = None
    ) -> bool: ...

    def set_image(
        self, kind: str, namespace: str, name: str, *, container: str, image: str, dry_run: bool = False
    ) -> dict[str, Any]: ...

    def node_pods(self, node: str) -> list[dict[str, Any]]: ...

    def restart_workload(
        self, kind: str, namespace: str, name: str, *, at: datetime, dry_run: bool = False
    ) -> dict[str, Any]: ...


# ----- arguments ---------------------------------------------------------------------------------


def flag(args: Mapping[str, str], name: str) -> bool:
    """A yes/no argument as a plan writes it (`"true"`, `"yes"`, `"1"`); anything else is no."""
    return str(args.get(name, "")).strip().lower() in ("true", "yes", "1", "on")


def duration_arg(args: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    text = str(args.get(name, "")).strip()
    if not text:
        return default
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise UserError(f"{name}: {exc}") from None
    if value <= timedelta(0):
        raise UserError(f"{name}: must be longer than 0")
    return value


def int_arg(args: Mapping[str, str], name: str, default: int, *, low: int = 1, high: int = 100) -> int:
    text = str(args.get(name, "")).strip()
    if not text:
        return default
    # ASCII digits only: `int()` also takes "١٢" and "1_0", which nobody types as a number.
    if not re.fullmatch(r"[+-]?[0-9]{1,12}", text, re.ASCII):
        raise UserError(f"{name}: {text[:20]!r} is not a whole number")
    value = int(text)
    if not low <= value <= high:
        raise UserError(f"{name}: must be between {low} and {high}")
    return value


def names_arg(args: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated list, blanks dropped, order kept, duplicates once."""
    seen: dict[str, None] = {}
    for part in str(args.get(name, "")).split(","):
        if part.strip():
            seen[part.strip()] = None
    return list(seen)


# Kubernetes' own name rules (apimachinery's validation): a name that breaks them cannot exist, so
# it is refused when the command or the plan is read, before anyone is asked to approve.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
#: A label selector is parsed by the API server; this only keeps a paste from being absurd.
MAX_SELECTOR = 1_000


def object_name(what: str, text: str) -> str:
    """`text` if it can be an object's name (a DNS subdomain, at most 253 characters)."""
    if len(text) > 253 or not _DNS_SUBDOMAIN.fullmatch(text):
        raise UserError(
            f"{what}: {clip(text, 40)!r} is not a Kubernetes name "
            "(lowercase letters, digits, - and ., at most 253 characters)"
        )
    return text


def namespace_name(what: str, text: str) -> str:
    """`text` if it can be a namespace (a DNS label, at most 63 characters)."""
    if len(text) > 63 or not _DNS_LABEL.fullmatch(text):
        raise UserError(
            f"{what}: {clip(text, 40)!r} is not a namespace (lowercase letters, digits and -, at most 63)"
        )
    return text


def kind_namespace_name(
    what: str, text: str, kinds: Container[str] | None, like: str, *, width: int = 60
) -> tuple[str, str, str]:
    """`KIND/NAMESPACE/NAME` (a workload, a GitOps object): its kind in lower case, one of `kinds`
    (any when None), and its namespace and name, each checked; else a UserError that shows `text`
    (up to `width` characters) and what it should be `like`."""
    parts = text.split("/")
    if len(parts) != 3 or (kinds is not None and parts[0].lower() not in kinds):
        raise UserError(f"{what}: {clip(text, width)!r} is not like {like}")
    namespace_name(what, parts[1])
    object_name(what, parts[2])
    return parts[0].lower(), parts[1], parts[2]


def label_value(what: str, text: str) -> str:
    """`text` if it can be a label's value (a node group's name: at most 63 characters)."""
    if len(text) > 63 or not _LABEL_VALUE.fullmatch(text):
        raise UserError(
            f"{what}: {clip(text, 40)!r} is not a label value (letters, digits, - _ and ., at most 63)"
        )
    return text


def iso(moment: datetime) -> str:
    """RFC 3339 in UTC with seconds, as Kubernetes writes times (and restartedAt)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The progress key where the job service notes a resumed job's resume (`JobService.start`).
RESUMED_AT = "resumed_at"
#: The decisions that approve a gate (`bot.core.runs.machine`): a plain approval, and an approval
#: with the force option, which a step offers when one of its actions (`FORCE_ACTIONS`) can pass
#: disruption budgets (issue 38).
APPROVE = "approve"
FORCE = "force"
APPROVING = frozenset({APPROVE, FORCE})
#: `delete-pod` evicts through the Eviction API unless every approval of its gate chose force.
FORCE_ACTIONS = frozenset({"delete-pod"})


def gate_choice(approvals: Sequence[Approval]) -> dict[str, Any]:
    """What the approvals that set a step running chose (`GATE`): {"option": "force" | "",
    "by": [...], "reasons": ["U1: why", …]} — force only when every one of them chose it: one
    person's force would let a budget be passed on a single say-so."""
    forced = [a for a in approvals if a.decision == FORCE]
    unanimous = bool(forced) and len(forced) == len(approvals)
    return {
        "option": FORCE if unanimous else "",
        "by": [a.user_id for a in forced] if unanimous else [],
        "reasons": [f"{a.user_id}: {a.reason}" for a in forced] if unanimous else [],
    }


#: The progress key of what the step's gate chose (`JobService`, from the approvals that set the
#: step running): {"option": "force" | "", "by": [users], "reasons": ["U1: why", …]}. Only the
#: service writes it — a plan's arguments never can.
GATE = "gate"


def timer_start(progress: Mapping[str, Any], started: str | None, now: datetime) -> datetime:
    """When a job's timer that began at `started` counts from: then, or the job's last resume if
    later — people who resume an interrupted job give it its whole timeout again, and the time
    nobody drove it does not count (else a resumed drain would ask its question at once)."""
    begun = parse_iso(started) or now
    resumed = parse_iso(progress.get(RESUMED_AT))
    return max(begun, resumed) if resumed is not None else begun


# ----- nodes -------------------------------------------------------------------------------------


def list_nodes(cluster: JobCluster) -> list[Raw]:
    nodes: list[Raw] = []
    for page in cluster.list_pages("/api/v1/nodes"):
        nodes.extend(page.items)
    return nodes


def node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name", ""))


def unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def kubelet(node: Mapping[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""))


def ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def version_arg(args: Mapping[str, str], *, required: bool = False) -> tuple[int, ...] | None:
    text = str(args.get("version", "")).strip()
    if not text:
        if required:
            raise UserError("version: required (the kubelet version, like 1.30 or v1.30.2)")
        return None
    parsed = parse_version(text)
    if parsed is None:
        raise UserError(f"version: {text[:20]!r} is not a version like 1.30 or v1.30.2")
    return parsed


def select_nodes(cluster: JobCluster, args: Mapping[str, str], group_labels: Sequence[str]) -> list[Raw]:
    """The nodes a cordon/uncordon/drain step names, in a stable order (names as given; a group's
    by name): `node` (comma-separated) or `nodegroup`, then `version` keeps only nodes NOT on it
    (the old nodes of a group being replaced). Nothing selected is the user's error."""
    wanted = names_arg(args, "node")
    group = str(args.get("nodegroup", "")).strip()
    if bool(wanted) == bool(group):
        raise UserError("name the nodes: either node (comma-separated names) or nodegroup, not both")
    target = version_arg(args)
    if wanted:
        # A handful of GETs, instead of listing 5,000 nodes for three names.
        nodes = []
        missing = []
        for name in wanted:
            try:
                nodes.append(cluster.get_json(f"/api/v1/nodes/{name}"))
            except ClusterError as exc:
                if exc.status == 404:
                    missing.append(name)
                else:
                    raise
        if missing:
            raise UserError(f"no such node: {', '.join(missing)}")
    else:
        nodes = sorted(
            (
                n
                for n in list_nodes(cluster)
                if node_group((n.get("metadata") or {}).get("labels"), group_labels) == group
            ),
            key=node_name,
        )
        if not nodes:
            raise UserError(f"node group {group!r} has no nodes")
    if target is not None:
        nodes = [n for n in nodes if not on_version(kubelet(n), target)]
        if not nodes:
            raise UserError(
                f"every selected node is already on {args.get('version', '').strip()}: nothing to do"
            )
    return nodes


# ----- disruption budgets ------------------------------------------------------------------------


def pdb_ref(pdb: Mapping[str, Any]) -> str:
    """A PodDisruptionBudget as `namespace/name`."""
    meta = pdb.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def disruptions_allowed(pdb: Mapping[str, Any]) -> int:
    """How many of its pods a PodDisruptionBudget lets go now (its status; 0 when it says none)."""
    return int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)


def pdb_named(pdb: Mapping[str, Any]) -> str:
    """A PodDisruptionBudget as people read it: `PodDisruptionBudget ns/name (disruptionsAllowed 0)`."""
    return f"PodDisruptionBudget {pdb_ref(pdb)} (disruptionsAllowed {disruptions_allowed(pdb)})"


def namespace_pdbs(
    cluster: JobCluster, namespace: str, cache: dict[str, list[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    """The PodDisruptionBudgets of `namespace`, read once into `cache` (one tick's, or one dry run's)."""
    if namespace not in cache:
        listed = cluster.get_json(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")
        cache[namespace] = list(listed.get("items") or [])
    return cache[namespace]


# ----- label selectors ---------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Does a LabelSelector (matchLabels AND every matchExpression) select these labels?

    An empty selector `{}` selects everything (a PodDisruptionBudget's "all pods of the namespace");
    a missing (None) selector selects nothing, as the disruption controller treats it."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = str(expr.get("key", ""))
        op = str(expr.get("operator", ""))
        values = [str(v) for v in expr.get("values") or []]
        if op == "In":
            if key not in labels or labels[key] not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            return False  # an operator the API would have rejected: select nothing, never all
    return True


def selector_query(selector: Mapping[str, Any]) -> str:
    """A LabelSelector as the `labelSelector` query text (`app=web,tier in (a,b),!legacy`)."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


# ----- the card ----------------------------------------------------------------------------------

BAR_CELLS = 10


def bar(done: int, total: int, what: str) -> str:
    """`▓▓▓▓▓░░░░░ 3/6 nodes drained`: ten cells whatever the size."""
    filled = BAR_CELLS if total and done >= total else (done * BAR_CELLS // total if total else 0)
    return f"{'▓' * filled}{'░' * (BAR_CELLS - filled)} {done}/{total} {what}"


def few(names: Sequence[str], limit: int = 3) -> str:
    """At most `limit` names and `+N more`: a card never lists thousands."""
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")


#: The pseudo-step of the job `abort` offers (uncordon what the run cordoned), gated by its question.
AFTER_ABORT = "after-abort"
#: The offer's progress key, when people chose to leave the nodes cordoned: those still cordoned.
LEFT_CORDONED = "left_cordoned"


def cordoned_by(rows: Sequence[JobRow]) -> list[str]:
    """The nodes a run's jobs (`rows`) cordoned and did not uncordon since, in the order cordoned:
    what abort offers to uncordon, and what its announcement says is still cordoned."""
    cordoned: dict[str, None] = {}
    for row in rows:
        if not row.progress or row.dry_run:
            continue
        progress = json.loads(row.progress)
        if row.kind == "uncordon":
            for node in progress.get("uncordoned", []):
                cordoned.pop(str(node), None)
            continue
        for node in progress.get("cordoned", []):
            cordoned[str(node)] = None
    return list(cordoned)
