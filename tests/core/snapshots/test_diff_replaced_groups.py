"""A node group recreated under a new name (eksctl's `others` → `others-1-25`, the runbook's way)
is "replaced by" its successor when the successor holds its workloads, not "gone" (issue 29)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.actions import BUILTIN
from bot.core.actions.base import ActionResult
from bot.core.runs.capabilities import action_context
from bot.core.snapshots.diff import EXPECTED, diff
from bot.errors import UserError
from bot.records import ActionCall, ActionRequest, ClusterConfig
from tests.support.diff_objects import NOW, base_objects, snap, upgraded
from tests.support.kube_objects import node
from tests.support.wire_cluster import WireCluster

ACTIONS = {spec.name: spec for spec in BUILTIN}


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


def test_a_named_replacement_of_a_daemonset_only_group_says_so_in_the_singular() -> None:
    """`logging` ran only DaemonSet pods on its one node: the plan named its successor, and the
    finding says that rather than that the successor holds its (no) workloads."""
    after = copy.deepcopy(upgraded())
    after["nodes"] = [n for n in after["nodes"] if n["metadata"]["name"] != "log-1"]
    after["nodes"].append(node("log-2", "logging-1-30", kubelet="v1.30.2"))
    report = diff(
        snap(base_objects(), "pre"),
        snap(after, "post", version="v1.30.2"),
        replaces={"logging-1-30": "logging"},
    )
    assert report.regressions == []
    (replaced,) = [f for f in report.expected if f.category == "node group replaced"]
    assert replaced.subject == "node group logging"
    assert replaced.detail == (
        "replaced by node group logging-1-30, as the plan says (it ran only DaemonSet pods; 1 node → 1)"
    )


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


def test_a_plans_diff_step_names_the_replacement_the_diff_cannot_infer(tmp_path: Path) -> None:
    """`logging` runs only DaemonSet pods, so no workload tells the diff which new group took its
    place: without `replaces:` the old group is gone; the plan's diff step says which replaced it."""
    after = copy.deepcopy(upgraded())
    after["nodes"] = [n for n in after["nodes"] if n["metadata"]["name"] != "log-1"]
    after["nodes"].append(node("log-2", "logging-1-30", kubelet="v1.30.2"))
    world = {"objects": base_objects(), "version": "v1.29.4"}
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    ctx = action_context(
        store=store,
        clusters={"prod": ClusterConfig(name="prod")},
        connect_cluster=lambda _c: WireCluster(
            objects=world["objects"], version=str(world["version"]), name="prod"
        ),
        clock=lambda: NOW,
        restart_threshold=3,
        rules_paths=[],
    )

    def step(name: str, **args: str) -> ActionResult:
        call = ActionCall(name=name, args=args)
        run = ACTIONS[name].run
        assert run is not None
        return run(ctx, ActionRequest(run_id="R1", cluster="prod", call=call))

    assert step("snapshot", label="pre").ok
    world.update(objects=after, version="v1.30.2")
    assert step("snapshot", label="post").ok
    unnamed = step("diff", before="pre", after="post")
    assert not unnamed.ok
    assert unnamed.detail == (
        "diff: 1 regression(s), 7 expected change(s): node missing — node group logging"
    )
    # Every regression is named (the run report keeps this line of a diff that was skipped past).
    world.update(objects=copy.deepcopy(base_objects()), version="v1.29.4")
    assert step("snapshot", label="again").ok
    world.update(objects={**after, "pods": []}, version="v1.30.2")
    assert step("snapshot", label="empty").ok
    empty = step("diff", before="again", after="empty")
    total = int(empty.detail.removeprefix("diff: ").split(" ", 1)[0])
    assert total > 1
    listed = empty.detail.split(": ", 2)[2].split("; ")
    more = int(listed.pop().split()[1]) if listed[-1].startswith("…and ") else 0
    assert len(listed) > 1
    assert len(listed) + more == total
    assert all(" — " in entry for entry in listed)
    named = step("diff", before="pre", after="post", replaces="logging-1-30=logging")
    assert named.ok, named.detail
    assert named.detail.startswith("diff: 0 regression(s)")


def test_the_diff_steps_replaces_is_checked_when_the_plan_is_loaded() -> None:
    check = ACTIONS["diff"].check
    assert check is not None
    assert check({"replaces": "others-1-25=others, ng-2=ng"}) == {"others-1-25": "others", "ng-2": "ng"}
    with pytest.raises(UserError, match=r"replaces: 'others' — say which group replaces which, NEW=OLD"):
        check({"replaces": "others"})
    with pytest.raises(UserError, match="names the same group twice"):
        check({"replaces": "a=a"})


def test_a_group_of_one_node_is_said_in_the_singular() -> None:
    after = copy.deepcopy(upgraded())
    after["nodes"] = [n for n in after["nodes"] if n["metadata"]["name"] != "log-1"]
    after["nodes"].append(node("log-2", "logging", kubelet="v1.30.2"))
    report = diff(snap(base_objects(), "pre"), snap(after, "post", version="v1.30.2"))
    replaced = {f.subject: f.detail for f in report.expected if f.category == "nodes replaced"}
    assert replaced["node group logging"] == "1 old node replaced by 1 new (log-1 → log-2)"
