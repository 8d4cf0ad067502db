"""The diff's pod comparison gives, finding by finding and in the same order, what it gave before it
was tuned for 150,000 pods (`reference_diff.py`, the code as it was), on random pairs of snapshots:
pods replaced, rescheduled, crash-looping, not ready, restarting, namespaces emptied, and the odd
rows (a uid missing, the same uid twice)."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.snapshots.diff import _pods, _Rows, diff
from bot.core.snapshots.projection import POD_FIELDS
from tests.core.snapshots import reference_diff as reference

STATUSES = (
    "Running",
    "Running",
    "Running",
    "CrashLoopBackOff",
    "Error",
    "ImagePullBackOff",
    "ErrImagePull",
    "Init:0/1",
    "Pending",
    "Completed",
    "ContainerCreating",
    "Terminating",
)
REASONS = ("", "", "", "CrashLoopBackOff", "ErrImagePull", "Error,OOMKilled", "ImagePullBackOff,Error")
PHASES = ("Running", "Running", "Pending", "Failed", "Succeeded")


@st.composite
def rows(draw: Any, *, unique: bool = False) -> list[list[Any]]:
    # One draw a row, the seed of its choices, rather than eleven: the draws were most of these
    # tests' time, and the rows are as varied (each choice uniform over its options, as before).
    count = draw(st.integers(0, 40))
    seeds = draw(st.lists(st.integers(0, 2**32 - 1), min_size=count, max_size=count))
    out = []
    for i, seed in enumerate(seeds):
        pick = random.Random(seed)
        wl = pick.choice(("web", "db", "agent"))
        total = pick.randint(1, 3)
        out.append(
            [
                pick.choice(("kube-system", "shop", "logging")),
                f"{wl}-{i}",
                f"u{i}" if unique else pick.choice((f"u{i}", f"u{i % 7}", "")),
                pick.choice(("Deployment", "StatefulSet", "DaemonSet", "Pod")),
                wl,
                pick.choice(("n1", "n2", "n3", "")),
                pick.choice(PHASES),
                pick.choice(STATUSES),
                pick.randint(0, total),
                total,
                pick.randint(0, 6),
                pick.choice(REASONS),
                "img:1",
                "10.0.0.1",
                "2026-11-20T00:00:00Z",
            ]
        )
    return out


@settings(max_examples=300, deadline=None)
@given(before=rows(), after=rows(), threshold=st.integers(1, 4))
def test_the_pod_findings_are_the_reference_s(
    before: list[list[Any]], after: list[list[Any]], threshold: int
) -> None:
    # Half the time the second snapshot is the first with changes, as after a real upgrade.
    b = {"pod_fields": list(POD_FIELDS), "pods": before}
    a = {"pod_fields": list(POD_FIELDS), "pods": [*before[: len(before) // 2], *after]}
    assert list(_pods(b, a, threshold)) == list(reference._pods(b, a, threshold))


@settings(max_examples=300, deadline=None)
@given(
    before=rows(unique=True),
    after=rows(unique=True),
    same=st.lists(st.booleans()),
    threshold=st.integers(1, 4),
)
def test_the_pod_findings_are_the_reference_s_when_every_pod_has_a_uid_of_its_own(
    before: list[list[Any]], after: list[list[Any]], same: list[bool], threshold: int
) -> None:
    # The column-wise path (`_pods_fast`): the second snapshot keeps the first half of the pods
    # and has others, some of them under the uid of a pod of the first snapshot's second half
    # (the same pod, now in another state, on another node, or even in another workload).
    half = len(before) // 2
    for i, row in enumerate(after):
        keep = i < len(same) and same[i] and half + i < len(before)
        row[2] = f"u{half + i}" if keep else f"new{i}"
    b = {"pod_fields": list(POD_FIELDS), "pods": before}
    a = {"pod_fields": list(POD_FIELDS), "pods": [*before[:half], *after]}
    assert _Rows.of(b) is not None
    assert _Rows.of(a) is not None
    assert list(_pods(b, a, threshold)) == list(reference._pods(b, a, threshold))


@settings(max_examples=200, deadline=None)
@given(before=rows(unique=True), after=rows(unique=True), threshold=st.integers(1, 4))
def test_the_pod_findings_are_the_reference_s_for_the_same_pods_in_new_states(
    before: list[list[Any]], after: list[list[Any]], threshold: int
) -> None:
    # The same pods in the same order (two snapshots a while apart), each on the node and in the
    # state (phase, status, readiness, restarts, reasons) of the other list's pod at its place.
    again = [
        [*row[:5], *after[i][5:12], *row[12:]] if i < len(after) else list(row)
        for i, row in enumerate(before)
    ]
    b = {"pod_fields": list(POD_FIELDS), "pods": before}
    a = {"pod_fields": list(POD_FIELDS), "pods": again}
    assert list(_pods(b, a, threshold)) == list(reference._pods(b, a, threshold))


def test_the_collector_is_back_on_after_a_diff_even_one_that_failed() -> None:
    snap = {
        "pod_fields": list(POD_FIELDS),
        "pods": [],
        "nodes": [],
        "workloads": [],
        "pdbs": [],
        "events": [],
        "version": {},
    }
    assert gc.isenabled()
    diff(snap, snap)
    assert gc.isenabled()
    with pytest.raises(KeyError):
        diff(snap, {"pods": []})  # no version: the diff fails part-way
    assert gc.isenabled()
