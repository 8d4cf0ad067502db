"""Semantic diff of two snapshots: expected changes versus regressions.

Pods are renamed by every rollout, so nothing is compared by pod name alone: nodes are compared per
node group, pods are folded into the workload that owns them (Deployment, DaemonSet, StatefulSet…)
and counted per state. An upgrade is *supposed* to replace nodes, bump versions and reschedule
pods; those are expected. What an SRE must look at — a node group that shrank, a node NotReady or
left cordoned, fewer ready replicas, new CrashLoopBackOff/ImagePullBackOff/Error/Pending pods,
restarts piling up, containers-ready dropping (3/3 → 2/3), a PDB that now blocks evictions, a
namespace whose pods vanished — are regressions. kube-system sorts first.
"""

from __future__ import annotations

import functools
import json
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

from bot.core.markdown import md_text
from bot.core.snapshots.collector import collector_paused
from bot.core.snapshots.projection import BAD_REASONS, POD_DIFF_FIELDS, POD_FIELDS

EXPECTED, REGRESSION, WARNING = "expected", "regression", "warning"
#: New Warning events are listed for context, up to this many in the text and Markdown reports.
WARNINGS_SHOWN = 100


@dataclass(frozen=True, kw_only=True)
class Finding:
    kind: str  # EXPECTED | REGRESSION | WARNING
    category: str
    subject: str
    detail: str
    namespace: str = ""


@dataclass(frozen=True, kw_only=True)
class DiffReport:
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    expected: list[Finding] = field(default_factory=list)
    regressions: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: Warning events in the later snapshot that the earlier one did not have: context for the
    #: regressions (a FailedScheduling, a Multi-Attach error), never a regression by themselves.
    warnings: list[Finding] = field(default_factory=list)

    @property
    def has_regressions(self) -> bool:
        return bool(self.regressions)

    @property
    def not_compared(self) -> list[str]:
        """The sections the diff compares that it could not: a gap of either snapshot (`COMPARED`)."""
        return sorted((_gaps(self.before) | _gaps(self.after)) & COMPARED)

    def categories(self, kind: str) -> Counter[str]:
        items = self.regressions if kind == REGRESSION else self.expected
        return Counter(f.category for f in items)

    def to_json(self) -> str:
        return json.dumps(
            {
                "before": _meta(self.before),
                "after": _meta(self.after),
                "regressions": [asdict(f) for f in self.regressions],
                "expected": [asdict(f) for f in self.expected],
                "warnings": [asdict(f) for f in self.warnings],
                "skipped": self.skipped,
            },
            indent=2,
        )

    def to_text(self) -> str:
        lines = [f"diff {_title(self.before)} → {_title(self.after)}"]
        lines.append(f"regressions: {len(self.regressions)}   expected changes: {len(self.expected)}")
        for heading, items in (("REGRESSIONS", self.regressions), ("EXPECTED CHANGES", self.expected)):
            if items:
                lines.append("")
                lines.append(heading)
                lines.extend(f"  [{f.category}] {f.subject}: {f.detail}" for f in items)
        if self.warnings:
            lines.append("")
            lines.append("NEW WARNING EVENTS")
            lines.extend(f"  [{f.category}] {f.subject}: {f.detail}" for f in self.warnings[:WARNINGS_SHOWN])
            if len(self.warnings) > WARNINGS_SHOWN:
                lines.append(f"  … and {len(self.warnings) - WARNINGS_SHOWN} more")
        if self.skipped:
            lines.append("")
            lines.append("NOT COMPARED")
            lines.extend(f"  {s}" for s in self.skipped)
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        lines = [f"# Cluster diff: {_md(_title(self.before))} → {_md(_title(self.after))}", ""]
        lines.append(f"- before: {_describe(self.before)}")
        lines.append(f"- after: {_describe(self.after)}")
        lines.append(f"- **{len(self.regressions)} regressions**, {len(self.expected)} expected changes")
        lines.append("")
        for heading, items in (("Regressions", self.regressions), ("Expected changes", self.expected)):
            lines.append(f"## {heading}")
            lines.append("")
            if not items:
                lines.append("None.")
            else:
                lines.append("| category | namespace | subject | detail |")
                lines.append("|---|---|---|---|")
                for f in items:
                    lines.append(
                        f"| {_md(f.category)} | {_md(f.namespace or '—')} | {_md(f.subject)} | {_md(f.detail)} |"
                    )
            lines.append("")
        if self.warnings:
            lines.append("## New Warning events")
            lines.append("")
            lines.append("| reason | namespace | object | message |")
            lines.append("|---|---|---|---|")
            for f in self.warnings[:WARNINGS_SHOWN]:
                lines.append(
                    f"| {_md(f.category)} | {_md(f.namespace or '—')} | {_md(f.subject)} | {_md(f.detail)} |"
                )
            if len(self.warnings) > WARNINGS_SHOWN:
                lines.append("")
                lines.append(f"… and {len(self.warnings) - WARNINGS_SHOWN} more.")
            lines.append("")
        if self.skipped:
            lines.append("## Not compared")
            lines.append("")
            lines.extend(f"- {_md(s)}" for s in self.skipped)
            lines.append("")
        return "\n".join(lines)


def _md(text: object) -> str:
    # Names from the cluster and people's labels: inert, as the HTML report makes them.
    return md_text(text)


def _title(snap: Mapping[str, Any]) -> str:
    return f"#{snap.get('id', '?')} {snap.get('label', '')}".strip()


def _meta(snap: Mapping[str, Any]) -> dict[str, Any]:
    return {k: snap.get(k) for k in ("id", "label", "cluster", "taken_at", "taken_by", "version")}


def _describe(snap: Mapping[str, Any]) -> str:
    """The Markdown line of one snapshot: every part inert (the label is a person's, the cluster
    name and version the configuration's and the API server's)."""
    version = (snap.get("version") or {}).get("gitVersion", "?")
    label, cluster = (_md(snap.get(k, "")) for k in ("label", "cluster"))
    taken = _md(_when(str(snap.get("taken_at", ""))))
    return f"#{_md(snap.get('id', '?'))} **{label}** of {cluster} at {taken} ({_md(version)})"


def _when(taken_at: str) -> str:
    """A stored ISO time as people read it in a file they download: to the second, in UTC."""
    try:
        at = datetime.fromisoformat(taken_at)
    except ValueError:
        return taken_at
    return f"{(at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _sort_key(f: Finding) -> tuple[int, str, str, str]:
    return (
        0 if f.namespace == "kube-system" else 1 if not f.namespace else 2,
        f.namespace,
        f.category,
        f.subject,
    )


#: The snapshot's lists the diff compares (a gap of one of them in either snapshot skips it); the
#: first five are what "the same cluster after the upgrade" means: without them a diff says nothing.
COMPARED = frozenset(
    {"nodes", "pods", "deployments", "daemonsets", "statefulsets", "poddisruptionbudgets", "events"}
)
ESSENTIAL = frozenset({"nodes", "pods", "deployments", "daemonsets", "statefulsets"})


def _gaps(snap: Mapping[str, Any]) -> set[str]:
    return {g["resource"] for g in snap.get("gaps") or []}


def diff(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    restart_threshold: int = 3,
    replaces: Mapping[str, str] | None = None,
) -> DiffReport:
    """`replaces`: new node group → the old one it replaces (a plan step's `replaces:`); a group
    gone whose replacement holds its workloads is expected, not a regression (see `_replaced`)."""
    with collector_paused():
        return _diff(before, after, restart_threshold=restart_threshold, replaces=replaces or {})


def _diff(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    *,
    restart_threshold: int,
    replaces: Mapping[str, str],
) -> DiffReport:
    report = DiffReport(before=before, after=after)
    gaps = _gaps(before) | _gaps(after)
    report.skipped.extend(f"{resource}: not readable in one of the snapshots" for resource in sorted(gaps))
    found: list[Finding] = []
    found.extend(_control_plane(before, after))
    if "nodes" not in gaps:
        # Read only when a group is gone, once: which workloads each group's nodes held.
        held = None if "pods" in gaps else functools.cache(lambda: (_held(before), _held(after)))
        found.extend(_nodes(before["nodes"], after["nodes"], replaces=replaces, held=held))
    if not gaps & {"deployments", "daemonsets", "statefulsets"}:
        found.extend(_workloads(before["workloads"], after["workloads"]))
    if "pods" not in gaps:
        found.extend(_pods(before, after, restart_threshold))
    if "poddisruptionbudgets" not in gaps:
        found.extend(_pdbs(before["pdbs"], after["pdbs"]))
    report.regressions.extend(sorted((f for f in found if f.kind == REGRESSION), key=_sort_key))
    report.expected.extend(sorted((f for f in found if f.kind == EXPECTED), key=_sort_key))
    if "events" not in gaps:
        report.warnings.extend(sorted(_new_warnings(before, after), key=_sort_key))
    return report


#: An object's Warning events of one reason with more distinct messages than this are folded into
#: one row (the latest message, the count of all): a pod that cannot be scheduled says "0/16 nodes
#: are available: …" again with every change of the nodes, and one pod's retries would fill the table.
MESSAGES_SHOWN = 3


def _new_warnings(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterable[Finding]:
    """Warning events that are new, or that happened again (a higher count), since the earlier snapshot."""

    def key(e: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
        return (e["namespace"], e["kind"], e["name"], e["reason"], e["message"])

    seen = {key(e): int(e.get("count") or 1) for e in before.get("events") or []}
    grouped: dict[tuple[str, str, str, str], list[tuple[Mapping[str, Any], int, int]]] = {}
    for e in after.get("events") or []:
        count = int(e.get("count") or 1)
        earlier = seen.get(key(e), 0)
        if count > earlier:
            grouped.setdefault(key(e)[:4], []).append((e, count, earlier))
    for (namespace, kind, name, reason), events in grouped.items():
        subject = f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
        if len(events) > MESSAGES_SHOWN:
            latest = max(events, key=lambda item: str(item[0].get("last") or ""))[0]
            total = sum(count - earlier for _, count, earlier in events)
            detail = f"{latest['message']} (the latest of {len(events)} different messages, ×{total} in all)"
            yield Finding(
                kind=WARNING,
                category=reason or "Warning",
                subject=subject,
                namespace=namespace,
                detail=detail,
            )
            continue
        for e, count, earlier in events:
            times = f" (×{count}, {count - earlier} new)" if earlier else f" (×{count})"
            yield Finding(
                kind=WARNING,
                category=reason or "Warning",
                subject=subject,
                namespace=namespace,
                detail=f"{e['message']}{times if count > 1 else ''}",
            )


def _control_plane(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterable[Finding]:
    b, a = before["version"].get("gitVersion"), after["version"].get("gitVersion")
    if b != a:
        yield Finding(
            kind=EXPECTED, category="control-plane version", subject="control plane", detail=f"{b} → {a}"
        )
    removed = sorted(set(before.get("api_versions") or []) - set(after.get("api_versions") or []))
    added = sorted(set(after.get("api_versions") or []) - set(before.get("api_versions") or []))
    if removed:
        yield Finding(
            kind=EXPECTED, category="API versions", subject="no longer served", detail=", ".join(removed)
        )
    if added:
        yield Finding(kind=EXPECTED, category="API versions", subject="newly served", detail=", ".join(added))


_NODE_VERSIONS = (
    ("kubelet", "kubelet version"),
    ("kernel", "kernel version"),
    ("os_image", "OS image"),
    ("runtime", "container runtime"),
)


def _held(snap: Mapping[str, Any]) -> dict[str, set[tuple[str, str, str]]]:
    """Node → the workloads (namespace, kind, name) with pods on it, DaemonSets left out (every
    node has theirs): what a node group holds."""
    col = {name: i for i, name in enumerate(snap.get("pod_fields") or POD_FIELDS)}
    fields = itemgetter(col["namespace"], col["workload_kind"], col["workload"], col["node"])
    out: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    for ns, kind, workload, node in map(fields, snap.get("pods") or []):
        if node and kind != "DaemonSet":
            out[node].add((ns, kind, workload))
    return out


Held = tuple[dict[str, set[tuple[str, str, str]]], dict[str, set[tuple[str, str, str]]]]


def _replaced(
    old: str,
    b: Mapping[str, Any],
    by_group_b: Mapping[str, Mapping[str, Any]],
    by_group_a: Mapping[str, Mapping[str, Any]],
    replaces: Mapping[str, str],
    held: Held,
) -> tuple[str, list[str], int]:
    """The group that replaced `old` (gone), the workloads it held that its replacement does not
    hold, and how many it held (DaemonSets aside): named by a plan step's `replaces:`, or else the
    one group new since the earlier snapshot that holds every workload `old` held (eksctl's
    rename: `others` → `others-1-25`)."""
    named = [new for new, was in replaces.items() if was == old and new in by_group_a]
    candidates = named or [g for g in by_group_a if g not in by_group_b]
    held_b, held_a = held
    workloads = set().union(*(held_b.get(n, set()) for n in b))
    for new in candidates:
        now = set().union(*(held_a.get(n, set()) for n in by_group_a[new]))
        missing = sorted(f"{k} {ns}/{w}" for ns, k, w in workloads - now)
        if named or (workloads and not missing):
            return new, missing, len(workloads)
    return "", [], len(workloads)


def _count(n: int, noun: str) -> str:
    """`1 node`, `2 nodes`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _nodes(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    *,
    replaces: Mapping[str, str] | None = None,
    held: Callable[[], Held] | None = None,
) -> Iterable[Finding]:
    by_group_b: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    by_group_a: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for n in before:
        by_group_b[n["group"]][n["name"]] = n
    for n in after:
        by_group_a[n["group"]][n["name"]] = n
    old_nodes = {n["name"]: n for n in before}
    for group in sorted(set(by_group_b) | set(by_group_a)):
        b, a = by_group_b.get(group, {}), by_group_a.get(group, {})
        subject = f"node group {group}"
        about = functools.partial(Finding, subject=subject)
        gone, new = sorted(set(b) - set(a)), sorted(set(a) - set(b))
        (short_gone, short_new), domain = _hosts(gone, new)
        if gone and new:
            yield about(
                kind=EXPECTED,
                category="nodes replaced",
                detail=f"{_count(len(gone), 'old node')} replaced by {len(new)} new "
                f"({_few(short_gone)} → {_few(short_new)}{domain})",
            )
        elif new:
            yield about(
                kind=EXPECTED, category="nodes added", detail=f"{len(new)} new: {_few(short_new)}{domain}"
            )
        new_group, unheld, holding = (
            _replaced(group, b, by_group_b, by_group_a, replaces or {}, held())
            if b and not a and held is not None
            else ("", [], 0)
        )
        if new_group and not unheld:
            # A group that ran only DaemonSet pods held nothing to move: the plan named its successor.
            sizes = f"{_count(len(b), 'node')} → {len(by_group_a[new_group])}"
            yield about(
                kind=EXPECTED,
                category="node group replaced",
                detail=f"replaced by node group {new_group}, which holds its workloads ({sizes})"
                if holding
                else f"replaced by node group {new_group}, as the plan says (it ran only DaemonSet pods; {sizes})",
            )
        elif new_group or len(a) < len(b):
            what = "is gone" if not a else f"has {_count(len(a), 'node')}, had {len(b)}"
            yield about(
                kind=REGRESSION,
                category="node missing",
                detail=f"is gone; its replacement {new_group} does not hold {_few(unheld)}"
                if new_group
                else f"{what} ({len(b) - len(a)} fewer; gone: {_few(short_gone)}"
                + (f"; new: {_few(short_new)}" if new else "")
                + f"{domain})",
            )
        for key, label in _NODE_VERSIONS:
            # A node not yet registered reports no versions: it is not a version of its own.
            vb, va = (
                sorted({n[key] for n in b.values() if n[key]}),
                sorted({n[key] for n in a.values() if n[key]}),
            )
            if vb and va and vb != va:
                yield about(kind=EXPECTED, category=label, detail=f"{', '.join(vb)} → {', '.join(va)}")
        for name, node in sorted(a.items()):
            old = old_nodes.get(name)
            about_node = functools.partial(Finding, subject=f"node {name}")
            if node["ready"] != "True" and (old is None or old["ready"] == "True"):
                yield about_node(
                    kind=REGRESSION, category="node not ready", detail=f"Ready={node['ready']} ({subject})"
                )
            if node["unschedulable"] and (old is None or not old["unschedulable"]):
                yield about_node(
                    kind=REGRESSION, category="node cordoned", detail=f"still SchedulingDisabled ({subject})"
                )
            elif old is not None and old["boot_id"] and node["boot_id"] and old["boot_id"] != node["boot_id"]:
                yield about_node(kind=EXPECTED, category="node rebooted", detail="bootID changed")


def _hosts(*lists: list[str]) -> tuple[list[list[str]], str]:
    """Node names without the domain they all share, and a note naming it once: an EKS node is
    `ip-10-0-0-12.ap-northeast-1.compute.internal`, and four such names cut at a message's length
    left the last one unreadable ("ip-10-0-0-27.ap-northeast-1.c…"). Names with no shared domain
    (GKE's, AKS's) stay whole and the note is empty."""
    names = [name for names in lists for name in names]
    domains = {name.partition(".")[2] for name in names}
    if len(names) < 2 or len(domains) != 1 or not (domain := domains.pop()):
        return list(lists), ""
    cut = len(domain) + 1
    return [[name[:-cut] for name in names] for names in lists], f"; each name ends .{domain}"


def _few(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return f"{shown}, +{len(names) - limit} more" if len(names) > limit else shown


def _workloads(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Iterable[Finding]:
    def key(w: Mapping[str, Any]) -> tuple[str, str, str]:
        return (w["kind"], w["namespace"], w["name"])

    b_map, a_map = {key(w): w for w in before}, {key(w): w for w in after}
    for k in sorted(set(b_map) | set(a_map)):
        kind, ns, name = k
        # Every finding of this loop is about one workload.
        about = functools.partial(Finding, subject=f"{kind} {ns}/{name}", namespace=ns)
        b, a = b_map.get(k), a_map.get(k)
        if a is None:
            assert b is not None
            yield about(
                kind=REGRESSION, category="workload gone", detail=f"had {b['ready']}/{b['desired']} ready"
            )
            continue
        if b is None:
            continue
        if a["ready"] < b["ready"] and a["ready"] < a["desired"]:
            yield about(
                kind=REGRESSION,
                category="fewer ready replicas",
                detail=f"{b['ready']}/{b['desired']} → {a['ready']}/{a['desired']} ready",
            )
        if a["rollout"] != "done" and b["rollout"] == "done":
            yield about(kind=REGRESSION, category="not rolled out", detail=a["rollout_message"])
        if a["images"] != b["images"]:
            changed = [f"{x} → {y}" for x, y in zip(b["images"], a["images"], strict=False) if x != y]
            yield about(
                kind=EXPECTED,
                category="images bumped",
                detail="; ".join(changed) or f"{b['images']} → {a['images']}",
            )


def _is_bad(status: str, reasons: str, phase: str) -> str | None:
    """The trouble a pod is in, named as kubectl would, or None."""
    if status == "Running" and not reasons:
        return None  # most pods, most of the time: decided without building a set
    if status in BAD_REASONS:
        return _same_trouble(status, phase)
    bad = sorted(set(filter(None, reasons.split(","))) & BAD_REASONS)
    if bad and status != "Running":
        return _same_trouble(bad[0], phase)
    if status.startswith("Init:"):
        return "Init"
    if phase == "Pending":
        return "Pending"
    if phase == "Failed":
        return "Failed"
    return None


def _same_trouble(reason: str, phase: str) -> str:
    """One name per trouble: a failing pod flips between two STATUS values from moment to moment.

    A pod that cannot pull shows ErrImagePull, then ImagePullBackOff while it waits to retry; a
    crash-looping container shows Error right after it exits, then CrashLoopBackOff while it waits to
    restart. Taken at different moments, the same pod must not count as a *new* kind of trouble.
    """
    if reason == "ErrImagePull":
        return "ImagePullBackOff"
    if reason == "Error" and phase == "Running":
        return "CrashLoopBackOff"
    return reason


WorkloadKey = tuple[str, str, str]


def _fold(
    snap: Mapping[str, Any],
) -> tuple[dict[WorkloadKey, dict[str, Any]], dict[str, tuple[int, WorkloadKey, str]], Counter[str]]:
    """Pods per workload, each pod's restarts by uid, and pods per namespace, in one pass over the rows.

    Rows are read by column index (one `itemgetter` call per row) rather than turned into dicts, and
    a healthy pod is told apart without a function call: at 150,000 pods the diff must stay a small
    fraction of the snapshot's time.
    """
    col = {name: i for i, name in enumerate(snap.get("pod_fields") or POD_FIELDS)}
    fields = itemgetter(*(col[c] for c in POD_DIFF_FIELDS))
    by_workload: dict[WorkloadKey, dict[str, Any]] = {}
    by_uid: dict[str, tuple[int, WorkloadKey, str]] = {}
    per_namespace: Counter[str] = Counter()
    for ns, name, uid, kind, wl, node, phase, status, ready, total, restarts, reasons in map(
        fields, snap.get("pods") or []
    ):
        k = (ns, kind, wl)
        agg = by_workload.get(k)
        if agg is None:
            agg = by_workload[k] = {
                "pods": 0,
                "bad": defaultdict(list),
                "unready": [],
                "nodes": defaultdict(int),
                "ids": set(),
            }
        agg["pods"] += 1
        uid = uid or f"{ns}/{name}"
        # By uid: a StatefulSet's pod keeps its name when it is recreated on a new node.
        agg["ids"].add(uid)
        agg["nodes"][node] += 1
        # Most pods are Running with no reasons and every container ready: decided inline.
        if status != "Running" or reasons:
            trouble = _is_bad(str(status), str(reasons or ""), phase)
            if trouble:
                agg["bad"][trouble].append(name)
            elif phase == "Running" and ready < total:
                agg["unready"].append(f"{name} {ready}/{total}")
        elif ready < total and phase == "Running":
            agg["unready"].append(f"{name} {ready}/{total}")
        by_uid[uid] = (restarts, k, name)
    for (ns, _, _), agg in by_workload.items():
        per_namespace[ns] += agg["pods"]
    return by_workload, by_uid, per_namespace


class _Rows:
    """One snapshot's pod rows, read a column at a time in C (`map`, `compress`, `set`, `Counter`)
    for `_pods_fast`; made only when every row has a uid of its own (as the API gives them)."""

    def __init__(self, rows: Sequence[Sequence[Any]], col: Mapping[str, int]) -> None:
        self.rows = rows
        self.col = col
        self.workload = itemgetter(col["namespace"], col["workload_kind"], col["workload"])
        self.ident = itemgetter(col["namespace"], col["workload_kind"], col["workload"], col["uid"])
        self.placed = itemgetter(col["namespace"], col["workload_kind"], col["workload"], col["node"])

    @classmethod
    def of(cls, snap: Mapping[str, Any]) -> _Rows | None:
        rows = snap.get("pods") or []
        col = {name: i for i, name in enumerate(snap.get("pod_fields") or POD_FIELDS)}
        uids = set(map(itemgetter(col["uid"]), rows))
        if len(uids) != len(rows) or "" in uids or None in uids:
            return None  # a row without a uid, or a uid twice: `_fold` has the rules for those
        return cls(rows, col)

    def column(self, name: str) -> Iterator[Any]:
        return map(itemgetter(self.col[name]), self.rows)

    def troubles(self) -> tuple[dict[WorkloadKey, dict[str, list[str]]], dict[WorkloadKey, list[str]]]:
        """The pods in trouble per workload, and those Running with containers not ready, as `_fold`
        finds them; only the rows not plainly healthy are read one by one."""
        index = range(len(self.rows))
        odd = set(compress(index, map(operator.ne, self.column("status"), repeat("Running"))))
        odd.update(compress(index, self.column("reasons")))
        odd.update(compress(index, map(operator.lt, self.column("ready"), self.column("total"))))
        get = itemgetter(*(self.col[c] for c in ("name", "phase", "status", "ready", "total", "reasons")))
        bad: dict[WorkloadKey, dict[str, list[str]]] = {}
        unready: dict[WorkloadKey, list[str]] = {}
        for i in sorted(odd):
            row = self.rows[i]
            name, phase, status, ready, total, reasons = get(row)
            k = self.workload(row)
            if status != "Running" or reasons:
                trouble = _is_bad(str(status), str(reasons or ""), phase)
                if trouble:
                    bad.setdefault(k, {}).setdefault(trouble, []).append(name)
                    continue
            if phase == "Running" and ready < total:
                unready.setdefault(k, []).append(f"{name} {ready}/{total}")
        return bad, unready


def _pods_fast(b: _Rows, a: _Rows, restart_threshold: int) -> Iterable[Finding]:
    """`_pods` for two snapshots whose every pod has a uid of its own: the same findings in the same
    order, with the 150,000 rows of each side walked in C and only the odd ones in Python."""
    a_bad, a_unready = a.troubles()
    # Restarts since the first snapshot: only a pod with restarts now can have more than before.
    uid_i, restarts_i = b.col["uid"], b.col["restarts"]
    before = {row[uid_i]: row[restarts_i] for row in compress(b.rows, b.column("restarts"))}
    uid_i, restarts_i, name_i = a.col["uid"], a.col["restarts"], a.col["name"]
    restarts: Counter[WorkloadKey] = Counter()
    restart_example: dict[WorkloadKey, str] = {}
    for row in compress(a.rows, a.column("restarts")):
        count = row[restarts_i]
        delta = count - before.get(row[uid_i], 0)
        if delta > 0:
            k = a.workload(row)
            restarts[k] += delta
            restart_example.setdefault(k, f"{row[name_i]} restarted {count}×")
    flagged = set(a_bad) | set(a_unready) | {k for k, n in restarts.items() if n >= restart_threshold}
    # The earlier snapshot's troubles matter only for a workload in trouble now.
    b_bad, b_unready = b.troubles() if flagged else ({}, {})
    for k in sorted(flagged):
        ns, kind, name = k
        subject = f"{kind} {ns}/{name}" if kind != "Pod" else f"pod {ns}/{name}"
        yield from _pod_troubles(
            subject,
            ns,
            now_bad=a_bad.get(k, {}),
            was_bad=b_bad.get(k, {}),
            now_unready=a_unready.get(k, []),
            was_unready=b_unready.get(k, []),
            restarts=restarts[k],
            example=restart_example.get(k, ""),
            threshold=restart_threshold,
        )
    # Rescheduled: the pods new to a workload of both snapshots whose pods per node changed.
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    # The same pods, in the same workloads, in the same order (two snapshots a while apart: the
    # API lists pods by namespace and name): nothing new, told by comparing columns, not by
    # hashing 150,000 (workload, uid) pairs a side.
    same = len(a.rows) == len(b.rows) and all(map(operator.eq, map(a.ident, a.rows), map(b.ident, b.rows)))
    new = set() if same else set(map(a.ident, a.rows)) - set(map(b.ident, b.rows))
    if new:
        b_workloads = set(map(b.workload, b.rows))
        replaced = Counter(k for k in map(itemgetter(0, 1, 2), new) if k in b_workloads)
        if replaced:
            hit = set(replaced)
            a_nodes = Counter(compress(map(a.placed, a.rows), map(hit.__contains__, map(a.workload, a.rows))))
            b_nodes = Counter(compress(map(b.placed, b.rows), map(hit.__contains__, map(b.workload, b.rows))))
            differ = {placed[:3] for placed, _count in a_nodes.items() ^ b_nodes.items()}
            for k, count in replaced.items():
                if k in differ:
                    moved[k[0]][0] += count
                    moved[k[0]][1] += 1
    yield from _moved(moved)
    gone = set() if same else set(b.column("namespace")) - set(a.column("namespace"))
    if gone:
        yield from _emptied(Counter(ns for ns in b.column("namespace") if ns in gone), {})


def _moved(moved: Mapping[str, list[int]]) -> Iterable[Finding]:
    # Rescheduling is the point of an upgrade: one summary line per namespace.
    for ns, (pods, workloads) in sorted(moved.items()):
        detail = f"{_count(pods, 'pod')} of {_count(workloads, 'workload')} on new nodes"
        yield _about_namespace(ns, kind=EXPECTED, category="pods rescheduled", detail=detail)


def _emptied(b_ns: Mapping[str, int], a_ns: Mapping[str, int]) -> Iterable[Finding]:
    for ns in sorted(b_ns):
        if a_ns.get(ns, 0) == 0:
            detail = f"{b_ns[ns]} pods before, none now"
            yield _about_namespace(ns, kind=REGRESSION, category="namespace pods gone", detail=detail)


def _about_namespace(ns: str, *, kind: str, category: str, detail: str) -> Finding:
    return Finding(kind=kind, category=category, subject=f"namespace {ns}", namespace=ns, detail=detail)


def _pods(before: Mapping[str, Any], after: Mapping[str, Any], restart_threshold: int) -> Iterable[Finding]:
    fast_b, fast_a = _Rows.of(before), _Rows.of(after)
    if fast_b is not None and fast_a is not None:
        yield from _pods_fast(fast_b, fast_a, restart_threshold)
        return
    b_work, b_uid, b_ns = _fold(before)
    a_work, a_uid, a_ns = _fold(after)
    # Restarts since the first snapshot: a surviving pod's increase, or all of a new pod's restarts.
    restarts: Counter[tuple[str, str, str]] = Counter()
    restart_example: dict[tuple[str, str, str], str] = {}
    for uid, (count, k, pod_name) in a_uid.items():
        seen = b_uid.get(uid)
        delta = count - (seen[0] if seen else 0)
        if delta > 0:
            restarts[k] += delta
            restart_example.setdefault(k, f"{pod_name} restarted {count}×")
    for k in sorted(set(b_work) | set(a_work)):
        ns, kind, name = k
        subject = f"{kind} {ns}/{name}" if kind != "Pod" else f"pod {ns}/{name}"
        b = b_work.get(k) or {"pods": 0, "bad": {}, "unready": [], "nodes": Counter(), "ids": set()}
        a = a_work.get(k)
        if a is None:
            continue
        yield from _pod_troubles(
            subject,
            ns,
            now_bad=a["bad"],
            was_bad=b["bad"],
            now_unready=a["unready"],
            was_unready=b["unready"],
            restarts=restarts[k],
            example=restart_example.get(k, ""),
            threshold=restart_threshold,
        )
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k, agg in a_work.items():
        old = b_work.get(k)
        if old is None or agg["nodes"] == old["nodes"]:
            continue
        replaced = len(agg["ids"] - old["ids"])
        if replaced:
            moved[k[0]][0] += replaced
            moved[k[0]][1] += 1
    yield from _moved(moved)
    yield from _emptied(b_ns, a_ns)


def _pdbs(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Iterable[Finding]:
    b_map = {(p["namespace"], p["name"]): p for p in before}
    for p in after:
        old = b_map.get((p["namespace"], p["name"]))
        if (
            p["disruptions_allowed"] == 0
            and p["expected_pods"] > 0
            and (old is None or old["disruptions_allowed"] > 0)
        ):
            yield Finding(
                kind=REGRESSION,
                category="PDB blocking",
                subject=f"PDB {p['namespace']}/{p['name']}",
                namespace=p["namespace"],
                detail=f"0 disruptions allowed ({p['current_healthy']}/{p['desired_healthy']} healthy) — "
                "drains will wait on it",
            )


def _pod_troubles(
    subject: str,
    ns: str,
    *,
    now_bad: Mapping[str, Sequence[str]],
    was_bad: Mapping[str, Sequence[str]],
    now_unready: Sequence[str],
    was_unready: Sequence[str],
    restarts: int,
    example: str,
    threshold: int,
) -> Iterator[Finding]:
    """A workload's pod regressions (both ways of comparing pods end here): more pods in a trouble
    than before, more not fully ready, restarts past the threshold."""
    regression = functools.partial(Finding, kind=REGRESSION, subject=subject, namespace=ns)
    for trouble, names in sorted(now_bad.items()):
        before_count = len(was_bad.get(trouble, ()))
        if len(names) > before_count:
            yield regression(
                category=f"new {trouble} pods",
                detail=f"{len(names)} now, {before_count} before: {_few(sorted(names))}",
            )
    if len(now_unready) > len(was_unready):
        yield regression(
            category="containers not ready",
            detail=f"{_few(sorted(now_unready))} (was {len(was_unready)} pods not fully ready)",
        )
    if restarts >= threshold:
        yield regression(category="restarts jumped", detail=f"+{restarts} restarts ({example})")
