"""Reference only: the diff's pod comparison as it was before it was made columnar.

`_pods` below (with `_fold`, `_is_bad`, `_same_trouble`) is copied unchanged from
`bot/core/snapshots/diff.py` as of the commit before the change: one pass per snapshot building a
dict per workload. `test_diff.py` holds the production path to it finding by finding on random
snapshots; nothing in the bot imports this module.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bot.core.snapshots.diff import EXPECTED, REGRESSION, Finding, _few
from bot.core.snapshots.projection import BAD_REASONS, POD_FIELDS


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

    Rows are read by column index rather than turned into dicts: at 150,000 pods the diff must stay
    a small fraction of the snapshot's time.
    """
    col = {name: i for i, name in enumerate(snap.get("pod_fields") or POD_FIELDS)}
    ns_i, name_i, uid_i, kind_i, wl_i = (
        col[c] for c in ("namespace", "name", "uid", "workload_kind", "workload")
    )
    node_i, phase_i, status_i, reasons_i = (col[c] for c in ("node", "phase", "status", "reasons"))
    ready_i, total_i, restarts_i = (col[c] for c in ("ready", "total", "restarts"))
    by_workload: dict[WorkloadKey, dict[str, Any]] = {}
    by_uid: dict[str, tuple[int, WorkloadKey, str]] = {}
    per_namespace: Counter[str] = Counter()
    for row in snap.get("pods") or []:
        ns, name = row[ns_i], row[name_i]
        k = (ns, row[kind_i], row[wl_i])
        agg = by_workload.get(k)
        if agg is None:
            agg = by_workload[k] = {
                "pods": 0,
                "bad": defaultdict(list),
                "unready": [],
                "nodes": Counter(),
                "ids": set(),
            }
        agg["pods"] += 1
        uid = row[uid_i] or f"{ns}/{name}"
        # By uid: a StatefulSet's pod keeps its name when it is recreated on a new node.
        agg["ids"].add(uid)
        agg["nodes"][row[node_i]] += 1
        phase = row[phase_i]
        trouble = _is_bad(str(row[status_i]), str(row[reasons_i] or ""), phase)
        if trouble:
            agg["bad"][trouble].append(name)
        elif phase == "Running" and row[ready_i] < row[total_i]:
            agg["unready"].append(f"{name} {row[ready_i]}/{row[total_i]}")
        by_uid[uid] = (row[restarts_i], k, name)
        per_namespace[ns] += 1
    return by_workload, by_uid, per_namespace


def _pods(before: Mapping[str, Any], after: Mapping[str, Any], restart_threshold: int) -> Iterable[Finding]:
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
        for trouble, names in sorted(a["bad"].items()):
            before_count = len(b["bad"].get(trouble, []))
            if len(names) > before_count:
                yield Finding(
                    kind=REGRESSION,
                    category=f"new {trouble} pods",
                    subject=subject,
                    namespace=ns,
                    detail=f"{len(names)} now, {before_count} before: {_few(sorted(names))}",
                )
        if len(a["unready"]) > len(b["unready"]):
            yield Finding(
                kind=REGRESSION,
                category="containers not ready",
                subject=subject,
                namespace=ns,
                detail=f"{_few(sorted(a['unready']))} (was {len(b['unready'])} pods not fully ready)",
            )
        if restarts[k] >= restart_threshold:
            yield Finding(
                kind=REGRESSION,
                category="restarts jumped",
                subject=subject,
                namespace=ns,
                detail=f"+{restarts[k]} restarts ({restart_example[k]})",
            )
    # Rescheduling is the point of an upgrade: one summary line per namespace.
    moved: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k, agg in a_work.items():
        old = b_work.get(k)
        if old is None or agg["nodes"] == old["nodes"]:
            continue
        replaced = len(agg["ids"] - old["ids"])
        if replaced:
            moved[k[0]][0] += replaced
            moved[k[0]][1] += 1
    for ns, (pods, workloads) in sorted(moved.items()):
        yield Finding(
            kind=EXPECTED,
            category="pods rescheduled",
            subject=f"namespace {ns}",
            namespace=ns,
            detail=f"{pods} pod{'s' if pods != 1 else ''} of {workloads} workload{'s' if workloads != 1 else ''} on new nodes",
        )
    for ns in sorted(b_ns):
        if a_ns.get(ns, 0) == 0:
            yield Finding(
                kind=REGRESSION,
                category="namespace pods gone",
                subject=f"namespace {ns}",
                namespace=ns,
                detail=f"{b_ns[ns]} pods before, none now",
            )
