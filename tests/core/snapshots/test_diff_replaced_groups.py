"""A node group recreated under a new name (eksctl's `others` → `others-1-25`, the runbook's way)
is "replaced by" its successor when the successor holds its workloads, not "gone" (issue 29)."""

from __future__ import annotations

import copy
from typing import Any

from bot.core.snapshots.diff import EXPECTED, diff
from tests.support.diff_objects import base_objects, snap, upgraded
from tests.support.kube_objects import node


def renamed(group: str = "ng-shared-1-30") -> dict[str, list[dict[str, Any]]]:
    """The clean upgrade, with ng-shared's new nodes in a group of another name."""
    o = copy.deepcopy(upgraded())
    o["nodes"] = [
        node("new-1", group, kubelet="v1.30.2", kernel="6.1.0"),
        node("new-2", group, kubelet="v1.30.2", kernel="6.1.0"),
        node("log-1", "logging"),
    ]
    return o


def test_a_renamed_group_that_holds_the_old_ones_workloads_is_replaced_not_gone() -> None:
    report = diff(snap(base_objects(), "pre"), snap(renamed(), "post", version="v1.30.2"))
    assert report.regressions == []
    (replaced,) = [f for f in report.expected if f.category == "node group replaced"]
    assert (replaced.kind, replaced.subject) == (EXPECTED, "node group ng-shared")
    assert replaced.detail == "replaced by node group ng-shared-1-30, which holds its workloads (2 nodes → 2)"
    assert "replaced by node group ng-shared-1-30" in report.to_text()


def test_a_new_group_that_does_not_hold_the_workloads_leaves_the_old_one_gone() -> None:
    o = renamed()
    for p in o["pods"]:
        if p["metadata"]["name"].startswith("web-"):
            p["spec"].pop("nodeName", None)
            p["status"]["phase"] = "Pending"
    report = diff(snap(base_objects(), "pre"), snap(o, "post", version="v1.30.2"))
    gone = [f for f in report.regressions if f.category == "node missing"]
    assert [(f.subject, f.detail.split(" (")[0]) for f in gone] == [("node group ng-shared", "is gone")]


def test_a_named_replacement_that_does_not_hold_them_says_what_it_lacks() -> None:
    o = renamed("others-1-30")
    o["nodes"].append(node("spare-1", "spare", kubelet="v1.30.2"))
    for p in o["pods"]:
        if p["metadata"]["name"].startswith("web-"):
            p["spec"]["nodeName"] = "spare-1"
    report = diff(
        snap(base_objects(), "pre"), snap(o, "post", version="v1.30.2"), replaces={"others-1-30": "ng-shared"}
    )
    (gone,) = [f for f in report.regressions if f.category == "node missing"]
    assert gone.detail == "is gone; its replacement others-1-30 does not hold Deployment shop/web"
