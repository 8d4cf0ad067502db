"""Is a twin true to its cluster? What differs between a cluster's snapshot and its twin's, and
between the check's findings on the two (`upgrade-bot sim fidelity`).

A twin is built again from nothing, so three things may differ and are not counted: ids (uids, boot
ids, addresses), ages (creation times, when a snapshot was taken, the Warning events of the last
hour, which are what happened lately rather than what is) and the random suffixes of the names of
pods that a controller names (`web-5d8f7c9b6d-x2x9q` is `web-*`). Everything else counts: the
semantic diff's regressions and expected changes, each field of each node, workload and budget, the
pods of each workload counted per node and state, the cloud's side the snapshot kept (its
`provider` section, less the ids of launch templates and insights), and each finding by its id,
severity and objects (the EKS checks' among them, when the cluster names a provider: the twin's
are read from its own AWS facade).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.core.snapshots.diff import diff
from bot.core.snapshots.projection import pods_as_dicts

#: Fields of a node that identify the machine, or say when it started: a twin's are its own.
NODE_IDS = frozenset({"boot_id", "created", "internal_ip", "external_ip"})
#: Node labels that carry an id (the instance's image, a region's hash): the twin's are its own.
NODE_ID_LABELS = frozenset({"eks.amazonaws.com/nodegroup-image", "k8s.io/cloud-provider-aws"})
#: Columns of a pod row that are ids or ages.
POD_IDS = frozenset({"uid", "ip", "created", "name"})
#: Owners whose pods are named after them with a random suffix (a StatefulSet's are not).
_SUFFIXED = frozenset({"Deployment", "ReplicaSet", "DaemonSet", "Job"})
#: Changes the semantic diff reports that are only an id changing: a twin's nodes booted anew.
ID_CHANGES = frozenset({"node rebooted"})
#: How many differences of one kind are printed; the rest are counted.
SHOWN = 50


class FindingLike(Protocol):
    """A check's finding, as far as fidelity reads it (`core/checks/findings.Finding`: the checks
    sit above snapshots, which do not import them)."""

    @property
    def id(self) -> str: ...

    @property
    def severity(self) -> str: ...

    @property
    def objects(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, kw_only=True)
class Fidelity:
    """The differences found, each a line a person reads; none at all: the twin is true."""

    regressions: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    snapshot: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    @property
    def differences(self) -> int:
        return len(self.regressions) + len(self.changes) + len(self.snapshot) + len(self.findings)

    def to_text(self) -> str:
        lines = [
            f"regressions: {len(self.regressions)}   changes: {len(self.changes)}   "
            f"snapshot differences: {len(self.snapshot)}   finding differences: {len(self.findings)}"
        ]
        for heading, items in (
            ("REGRESSIONS (diff of the cluster's snapshot → the twin's)", self.regressions),
            ("CHANGES (diff of the cluster's snapshot → the twin's)", self.changes),
            ("SNAPSHOT DIFFERENCES (cluster ≠ twin)", self.snapshot),
            ("FINDING DIFFERENCES (check on the cluster ≠ check on the twin)", self.findings),
        ):
            if items:
                lines += ["", heading, *(f"  {line}" for line in items[:SHOWN])]
                if len(items) > SHOWN:
                    lines.append(f"  …and {len(items) - SHOWN} more")
        return "\n".join(lines) + "\n"


def measure(
    original: Mapping[str, Any],
    twin: Mapping[str, Any],
    checked: Sequence[FindingLike] | None,
    twin_checked: Sequence[FindingLike] | None,
) -> Fidelity:
    """Compare the cluster's snapshot (and the check's findings on it) with the twin's. Without
    findings, the snapshots only."""
    report = diff(original, twin)
    names = pod_names(original) | pod_names(twin)
    return Fidelity(
        regressions=[_line(f.subject, f.detail) for f in report.regressions],
        changes=[_line(f.subject, f.detail) for f in report.expected if f.category not in ID_CHANGES],
        snapshot=compare_snapshots(original, twin),
        findings=(
            compare_findings(checked, twin_checked, names)
            if checked is not None and twin_checked is not None
            else []
        ),
    )


def _line(subject: str, detail: str) -> str:
    return f"{subject}: {detail}" if detail else subject


def pod_names(snap: Mapping[str, Any]) -> dict[str, str]:
    """Each pod's name → the name less the suffix its controller drew (`web-*`)."""
    out: dict[str, str] = {}
    for pod in pods_as_dicts(snap):
        name, workload = str(pod.get("name", "")), str(pod.get("workload", ""))
        if pod.get("workload_kind") in _SUFFIXED and workload and name.startswith(f"{workload}-"):
            out[name] = f"{workload}-*"
    return out


def compare_snapshots(original: Mapping[str, Any], twin: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    a_version, b_version = original.get("version") or {}, twin.get("version") or {}
    for key in ("major", "minor", "gitVersion"):
        if a_version.get(key) != b_version.get(key):
            out.append(f"version {key}: {a_version.get(key)!r} ≠ {b_version.get(key)!r}")
    out += _sets("API version", original.get("api_versions") or [], twin.get("api_versions") or [])
    out += _sets("namespace", original.get("namespaces") or [], twin.get("namespaces") or [])
    for what, key, name, shown in _KINDS:
        out += _records(what, original.get(key) or [], twin.get(key) or [], name, shown)
    out += _pods(original, twin)
    out += compare_providers(original.get("provider") or {}, twin.get("provider") or {})
    return out


def compare_providers(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The cloud's side (`snap["provider"]`, `core/snapshots/provider`): every field of the
    cluster, node groups, add-ons, offered versions, insights, subnets and other Auto Scaling
    groups, less the launch templates' and insights' ids."""
    if not a and not b:
        return []
    if not b:
        return [f"provider {a.get('kind', '')} {a.get('name', '')}: only in the cluster"]
    if not a:
        return [f"provider {b.get('kind', '')} {b.get('name', '')}: only in the twin"]
    out = [
        f"provider {key}: {_short(a.get(key))} ≠ {_short(b.get(key))}"
        for key in ("kind", "name", "captured", "reason", "region", "account", "minors")
        if a.get(key) != b.get(key)
    ]
    for what, records, name, shown in _PROVIDER_RECORDS:
        out += _records(what, records(a), records(b), name, shown)
    return out


def _without_template_ids(group: Mapping[str, Any]) -> dict[str, Any]:
    """A node group less its launch template's id and name (a twin's templates are its own)."""
    out = dict(group)
    lt = out.get("launch_template")
    if lt:
        out["launch_template"] = {k: v for k, v in lt.items() if k not in ("id", "name")}
    return out


_Records = Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]]

#: The provider section's records compared one by one (as `_KINDS`), each list read from the section.
_PROVIDER_RECORDS: tuple[
    tuple[str, _Records, Callable[[Mapping[str, Any]], str], Callable[[Mapping[str, Any]], Any]], ...
] = (
    ("provider cluster", lambda p: [p.get("cluster") or {}], lambda c: str(c.get("name", "")), dict),
    (
        "provider node group",
        lambda p: p.get("node_groups") or [],
        lambda g: str(g["name"]),
        _without_template_ids,
    ),
    ("provider add-on", lambda p: p.get("addons") or [], lambda x: str(x["name"]), dict),
    (
        "provider offered",
        lambda p: [{"addon": k, "versions": v} for k, v in (p.get("offered") or {}).items()],
        lambda x: str(x["addon"]),
        dict,
    ),
    (
        "provider insight",
        lambda p: p.get("insights") or [],
        lambda i: f"{i.get('kubernetes_version', '')} {i.get('name', '')}",
        lambda i: {k: v for k, v in i.items() if k != "id"},
    ),
    ("provider subnet", lambda p: p.get("subnets") or [], lambda x: str(x["id"]), dict),
    ("provider Auto Scaling group", lambda p: p.get("other_asgs") or [], lambda x: str(x["name"]), dict),
)


def _sets(what: str, a: Iterable[str], b: Iterable[str]) -> list[str]:
    left, right = set(a), set(b)
    return [f"{what} {x}: only in the cluster" for x in sorted(left - right)] + [
        f"{what} {x}: only in the twin" for x in sorted(right - left)
    ]


def _node(node: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if k not in NODE_IDS}
    if "labels" in out:
        out["labels"] = {k: v for k, v in out["labels"].items() if k not in NODE_ID_LABELS}
    return out


#: The snapshot's record lists compared one by one: what a record is called in a difference, its key
#: in the snapshot, its name, and what of it is compared.
_KINDS: tuple[
    tuple[str, str, Callable[[Mapping[str, Any]], str], Callable[[Mapping[str, Any]], Any]], ...
] = (
    ("node", "nodes", lambda n: str(n["name"]), _node),
    ("workload", "workloads", lambda w: f"{w['kind']} {w['namespace']}/{w['name']}", dict),
    ("budget", "pdbs", lambda p: f"{p['namespace']}/{p['name']}", dict),
    (
        "object",
        "objects",
        lambda o: f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata'].get('name', '')}".replace(
            " /", " "
        ),
        dict,
    ),
)


def _records(
    what: str,
    a: Sequence[Mapping[str, Any]],
    b: Sequence[Mapping[str, Any]],
    key: Any,
    shape: Any,
) -> list[str]:
    left = {key(r): shape(r) for r in a}
    right = {key(r): shape(r) for r in b}
    out = _sets(what, left, right)
    for k in sorted(left.keys() & right.keys()):
        x, y = left[k], right[k]
        for f in sorted(x.keys() | y.keys()):
            if x.get(f) != y.get(f):
                out.append(f"{what} {k} {f}: {_short(x.get(f))} ≠ {_short(y.get(f))}")
    return out


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pods(original: Mapping[str, Any], twin: Mapping[str, Any]) -> list[str]:
    """The pods of each workload, counted per node and state (everything a row holds but its ids)."""

    def rows(snap: Mapping[str, Any]) -> Counter[tuple[tuple[str, Any], ...]]:
        names = pod_names(snap)
        counted: Counter[tuple[tuple[str, Any], ...]] = Counter()
        for pod in pods_as_dicts(snap):
            row = {k: v for k, v in pod.items() if k not in POD_IDS}
            row["name"] = names.get(str(pod.get("name", "")), pod.get("name", ""))
            counted[tuple(sorted(row.items()))] += 1
        return counted

    left, right = rows(original), rows(twin)
    out: list[str] = []
    for side, only in (("the cluster", left - right), ("the twin", right - left)):
        for row, n in sorted(only.items()):
            pod = dict(row)
            out.append(
                f"pod {pod.get('namespace')}/{pod.get('name')} on {pod.get('node') or '(no node)'}"
                f" ({_brief(pod)}): {n} more in {side}"
            )
    return out


def _brief(pod: Mapping[str, Any]) -> str:
    skip = {"namespace", "name", "node"}
    return ", ".join(f"{k}={v}" for k, v in pod.items() if k not in skip and v not in ("", None))


_TOKENS = re.compile(r"([\s/:,()]+)")


def _normal(text: str, names: Mapping[str, str]) -> str:
    return "".join(names.get(token, token) for token in _TOKENS.split(text))


def compare_findings(
    a: Sequence[FindingLike], b: Sequence[FindingLike], names: Mapping[str, str]
) -> list[str]:
    """Findings by id, severity and objects (pod names less their suffixes), as multisets."""

    def keyed(findings: Sequence[FindingLike]) -> Counter[tuple[str, str, tuple[str, ...]]]:
        return Counter(
            (f.id, f.severity, tuple(sorted(_normal(o, names) for o in f.objects))) for f in findings
        )

    left, right = keyed(a), keyed(b)
    out: list[str] = []
    for side, only in (("the cluster", left - right), ("the twin", right - left)):
        for (fid, severity, objects), n in sorted(only.items()):
            times = f" ×{n}" if n > 1 else ""
            shown = "; ".join(objects[:5]) + (f"; …and {len(objects) - 5} more" if len(objects) > 5 else "")
            out.append(f"{fid} ({severity}) only on {side}{times}: {shown or '(no objects)'}")
    return out
