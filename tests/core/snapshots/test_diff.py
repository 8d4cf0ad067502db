"""The diff separates what an upgrade is meant to change from what it broke."""

from __future__ import annotations

import copy
import json
from typing import Any

from bot.core.snapshots.diff import diff
from tests.support.diff_objects import NOW, base_objects, snap, upgraded
from tests.support.kube_objects import container_status, deployment, node, pod


def test_a_clean_upgrade_has_only_expected_changes() -> None:
    report = diff(snap(base_objects(), "pre"), snap(upgraded(), "post", version="v1.30.2"))
    assert report.regressions == []
    categories = set(report.categories("expected"))
    assert {
        "control-plane version",
        "nodes replaced",
        "kubelet version",
        "kernel version",
        "pods rescheduled",
    } <= categories
    replaced = next(f for f in report.expected if f.category == "nodes replaced")
    assert replaced.subject == "node group ng-shared"
    assert "2 old nodes replaced by 2 new" in replaced.detail


def test_eks_node_names_are_shown_without_the_domain_they_share() -> None:
    """Four EKS names in one line were cut mid-name in Slack ("ip-10-0-0-27.ap-northeast-1.c…");
    the domain they all share is said once. Names with different domains stay whole."""
    domain = "ap-northeast-1.compute.internal"
    before, after = base_objects(), base_objects()
    before["nodes"] = [node(f"ip-10-0-0-{i}.{domain}", "istio") for i in (14, 15)]
    after["nodes"] = [node(f"ip-10-0-0-{i}.{domain}", "istio") for i in (28, 29)]
    after["nodes"].append(node(f"ip-10-0-0-30.{domain}", "logging"))
    report = diff(snap(before, "pre"), snap(after, "post"))
    details = {
        f.subject: f.detail for f in report.expected if f.category in ("nodes replaced", "nodes added")
    }
    assert details["node group istio"] == (
        f"2 old nodes replaced by 2 new (ip-10-0-0-14, ip-10-0-0-15 → ip-10-0-0-28, ip-10-0-0-29; "
        f"each name ends .{domain})"
    )
    assert details["node group logging"] == f"1 new: ip-10-0-0-30.{domain}"
    after["nodes"][1] = node("ip-10-0-0-29.us-east-1.compute.internal", "istio")
    report = diff(snap(before, "pre"), snap(after, "post"))
    [replaced] = [f for f in report.expected if f.category == "nodes replaced"]
    assert replaced.detail.endswith(
        "→ ip-10-0-0-28.ap-northeast-1.compute.internal, ip-10-0-0-29.us-east-1.compute.internal)"
    )


def test_the_injected_regressions_are_found_and_nothing_else() -> None:
    o = upgraded()
    # vault-injected pod at 2/3, kube-proxy in ImagePullBackOff, a node left cordoned, logging shrank.
    o["pods"][0]["status"]["containerStatuses"][1]["ready"] = False
    o["pods"][2] = pod(
        "kube-system",
        "kube-proxy-9",
        owner=("DaemonSet", "kube-proxy"),
        node_name="new-1",
        phase="Pending",
        containers=[container_status("kube-proxy", ready=False, waiting="ImagePullBackOff")],
    )
    o["nodes"][1] = node("new-2", "ng-shared", kubelet="v1.30.2", kernel="6.1.0", unschedulable=True)
    o["nodes"].pop()  # logging node gone
    o["pods"].pop()  # its pod with it
    report = diff(snap(base_objects(), "pre"), snap(o, "post", version="v1.30.2"))
    got = sorted((f.category, f.subject) for f in report.regressions)
    assert got == sorted(
        [
            ("containers not ready", "Deployment shop/web"),
            ("new ImagePullBackOff pods", "DaemonSet kube-system/kube-proxy"),
            ("node cordoned", "node new-2"),
            ("node missing", "node group logging"),
            ("namespace pods gone", "namespace logging"),
        ]
    )
    # kube-system sorts first.
    assert report.regressions[0].namespace == "kube-system"


def test_restarts_since_the_first_snapshot_count_not_lifetime_totals() -> None:
    before_objects = base_objects()
    before_objects["pods"][3]["status"]["containerStatuses"][0]["restartCount"] = 10
    after_objects = copy.deepcopy(before_objects)
    assert diff(snap(before_objects, "pre"), snap(after_objects, "post")).regressions == []
    after_objects["pods"][3]["status"]["containerStatuses"][0]["restartCount"] = 14
    (finding,) = diff(snap(before_objects, "pre"), snap(after_objects, "post")).regressions
    assert (finding.category, finding.detail.split()[0]) == ("restarts jumped", "+4")


def test_fewer_ready_replicas_and_a_blocking_pdb_are_regressions() -> None:
    before_objects = base_objects()
    before_objects["poddisruptionbudgets"] = [
        {
            "metadata": {"namespace": "shop", "name": "web"},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2},
        }
    ]
    after_objects = copy.deepcopy(before_objects)
    after_objects["deployments"] = [deployment("shop", "web", replicas=2, ready=1)]
    after_objects["poddisruptionbudgets"][0]["status"].update(disruptionsAllowed=0, currentHealthy=1)
    report = diff(snap(before_objects, "pre"), snap(after_objects, "post"))
    assert sorted(f.category for f in report.regressions) == [
        "PDB blocking",
        "fewer ready replicas",
        "not rolled out",
    ]


def test_a_gap_in_either_snapshot_is_skipped_and_said() -> None:
    before, after = snap(base_objects(), "pre"), snap({**base_objects(), "pods": []}, "post")
    after["gaps"] = [{"resource": "pods", "reason": "forbidden"}]
    report = diff(before, after)
    assert report.regressions == []
    assert report.skipped == ["pods: not readable in one of the snapshots"]


def test_reports_render_as_text_markdown_and_json() -> None:
    report = diff(snap(base_objects(), "pre"), snap(upgraded(), "post", version="v1.30.2"))
    assert "EXPECTED CHANGES" in report.to_text()
    assert "| nodes replaced | — | node group ng-shared |" in report.to_markdown()
    # Its head gives each snapshot's time as people read it, not `…T…:42.231151+00:00`.
    assert f"- before: #? **pre** of test at {NOW:%Y-%m-%d %H:%M:%S} UTC (v1.29.4)" in report.to_markdown()
    assert json.loads(report.to_json())["regressions"] == []


def test_a_pod_flipping_between_errimagepull_and_imagepullbackoff_is_not_new_trouble() -> None:
    def failing(waiting: str, restarts: int = 0) -> dict[str, list[dict[str, Any]]]:
        o = base_objects()
        o["pods"][3] = pod(
            "logging",
            "fluentd-1",
            owner=("DaemonSet", "fluentd"),
            node_name="log-1",
            phase="Pending" if "Pull" in waiting else "Running",
            containers=[container_status("fluentd", ready=False, waiting=waiting, restarts=restarts)],
        )
        return o

    assert (
        diff(snap(failing("ErrImagePull"), "pre"), snap(failing("ImagePullBackOff"), "post")).regressions
        == []
    )
    crashed = failing("CrashLoopBackOff", restarts=4)
    crashed["pods"][3]["status"]["containerStatuses"][0]["state"] = {"terminated": {"reason": "Error"}}
    assert diff(snap(failing("CrashLoopBackOff", restarts=4), "pre"), snap(crashed, "post")).regressions == []
    # From healthy, the same trouble is new whichever of its two names the moment shows.
    (finding,) = diff(snap(base_objects(), "pre"), snap(failing("ErrImagePull"), "post")).regressions
    assert finding.category == "new ImagePullBackOff pods"


def test_statefulset_pods_recreated_under_the_same_name_count_as_rescheduled() -> None:
    before = base_objects()
    before["pods"].append(pod("logging", "es-0", owner=("StatefulSet", "es"), node_name="log-1"))
    after = copy.deepcopy(before)
    after["nodes"][2] = node("log-2", "logging")
    after["pods"][3] = pod("logging", "fluentd-2", owner=("DaemonSet", "fluentd"), node_name="log-2")
    after["pods"][4] = pod(
        "logging", "es-0", owner=("StatefulSet", "es"), node_name="log-2", uid="uid-es-0-new"
    )
    report = diff(snap(before, "pre"), snap(after, "post"))
    assert report.regressions == []
    (moved,) = [f for f in report.expected if f.category == "pods rescheduled"]
    assert moved.detail == "2 pods of 2 workloads on new nodes"


def test_one_pod_rescheduled_is_said_in_the_singular() -> None:
    before = base_objects()
    after = copy.deepcopy(before)
    # web-1-a evicted from old-1; its replacement runs on old-2.
    after["pods"][0]["metadata"].update(name="web-1-c", uid="uid-web-1-c")
    after["pods"][0]["spec"]["nodeName"] = "old-2"
    report = diff(snap(before, "pre"), snap(after, "post"))
    (moved,) = [f for f in report.expected if f.category == "pods rescheduled"]
    assert moved.detail == "1 pod of 1 workload on new nodes"


def warning_event(name: str, reason: str, message: str, count: int = 1) -> dict[str, Any]:
    return {
        "type": "Warning",
        "metadata": {"namespace": "logging", "name": f"{name}.1"},
        "involvedObject": {"kind": "Pod", "namespace": "logging", "name": name},
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": "2026-11-22T04:50:00Z",
    }


def test_new_warning_events_are_listed_for_context_but_are_not_regressions() -> None:
    before = base_objects()
    before["events"] = [warning_event("fluentd-1", "BackOff", "Back-off pulling image", count=2)]
    after = copy.deepcopy(before)
    after["events"].append(
        warning_event("es-1", "FailedScheduling", "1 node(s) had volume node affinity conflict")
    )
    report = diff(snap(before, "pre"), snap(after, "post"))
    assert report.regressions == []
    assert [(f.category, f.subject) for f in report.warnings] == [("FailedScheduling", "Pod logging/es-1")]
    after["events"][0]["count"] = 5  # the same event again since the first snapshot
    report = diff(snap(before, "pre"), snap(after, "post"))
    assert [(f.category, f.detail) for f in report.warnings] == [
        ("BackOff", "Back-off pulling image (×5, 3 new)"),
        ("FailedScheduling", "1 node(s) had volume node affinity conflict"),
    ]
    assert "## New Warning events" in report.to_markdown()
    assert json.loads(report.to_json())["warnings"][1]["category"] == "FailedScheduling"


def test_one_objects_warnings_of_one_reason_in_many_messages_fold_into_the_latest() -> None:
    """A pod that cannot be scheduled says "0/N nodes are available: …" anew whenever the nodes
    change: nine messages of one FailedScheduling were nine rows of the diff's events. Past three
    messages they are one row, the latest message with the count of all; three stay three rows."""
    before = base_objects()
    before["events"] = []
    after = copy.deepcopy(before)
    for i in range(9):
        event = warning_event("ledger-1", "FailedScheduling", f"0/{14 + i} nodes are available", count=2)
        event["metadata"]["name"] = f"ledger-1.{i}"
        event["lastTimestamp"] = f"2026-11-22T04:5{i}:00Z"
        after["events"].append(event)
    for message in ("Error: ErrImagePull", "Failed to pull image", "Error: ImagePullBackOff"):
        after["events"].append(warning_event("metrics-1", "Failed", message))
    report = diff(snap(before, "pre"), snap(after, "post"))
    assert [(f.category, f.subject, f.detail) for f in report.warnings] == [
        ("Failed", "Pod logging/metrics-1", "Error: ErrImagePull"),
        ("Failed", "Pod logging/metrics-1", "Failed to pull image"),
        ("Failed", "Pod logging/metrics-1", "Error: ImagePullBackOff"),
        (
            "FailedScheduling",
            "Pod logging/ledger-1",
            "0/22 nodes are available (the latest of 9 different messages, ×18 in all)",
        ),
    ]


def test_a_group_that_lost_two_nodes_and_gained_one_counts_one_fewer_and_names_each() -> None:
    """Two of ng-shared's nodes gone, one new one that has not registered yet (no versions): the
    group has one node fewer, both gone nodes and the new one are named, and the new node's empty
    versions are no version change ("v1.29.4 → , v1.29.4" before)."""
    after = copy.deepcopy(base_objects())
    after["nodes"] = [node("new-1", "ng-shared", kubelet="", kernel="", ready="False"), after["nodes"][2]]
    report = diff(snap(base_objects(), "pre"), snap(after, "post"))
    [missing] = [f for f in report.regressions if f.category == "node missing"]
    assert missing.detail == "has 1 node, had 2 (1 fewer; gone: old-1, old-2; new: new-1)"
    assert not [f for f in report.expected if f.category in ("kubelet version", "kernel version")]
