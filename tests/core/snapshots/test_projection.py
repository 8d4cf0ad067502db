"""Snapshot projection on raw JSON: workloads resolved, states read as kubectl reads them, gaps named."""

from __future__ import annotations

import itertools
import json
import threading
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.checks.logprobe import log_probe
from bot.core.rules import load_rules
from bot.core.snapshots.labels import MAX_LABEL, clean_label, label_of, new_label
from bot.core.snapshots.projection import (
    P,
    pod_display_status,
    pods_as_dicts,
    project_pod,
    take_snapshot,
    to_json,
)
from bot.core.snapshots.service import StreamedBody, take_and_store
from bot.errors import ClusterError, UserError
from tests.support.kube_objects import (
    container_status,
    deployment,
    node,
    pod,
    replicaset,
)
from tests.support.wire_cluster import MappedPage, WireCluster, as_pod

NOW = datetime(2026, 11, 22, 5, 0, tzinfo=UTC)


def cluster() -> WireCluster:
    return WireCluster(
        objects={
            "namespaces": [{"metadata": {"name": "kube-system"}}, {"metadata": {"name": "vault-app"}}],
            "nodes": [node("n1", "ng-shared"), node("n2", "istio", unschedulable=True)],
            "replicasets": [replicaset("vault-app", "api-7d9f", "api")],
            "deployments": [deployment("vault-app", "api", replicas=2, ready=1)],
            "pods": [
                pod(
                    "vault-app",
                    "api-7d9f-a",
                    owner=("ReplicaSet", "api-7d9f"),
                    containers=[
                        container_status("app"),
                        container_status("vault-agent"),
                        container_status("istio-proxy"),
                    ],
                ),
                pod(
                    "vault-app",
                    "api-7d9f-b",
                    owner=("ReplicaSet", "api-7d9f"),
                    containers=[
                        container_status("app"),
                        container_status("vault-agent", ready=False),
                        container_status("istio-proxy"),
                    ],
                ),
                pod(
                    "kube-system",
                    "kube-proxy-x",
                    owner=("DaemonSet", "kube-proxy"),
                    containers=[
                        container_status(
                            "kube-proxy", ready=False, waiting="ImagePullBackOff", image="kube-proxy:v1.30"
                        )
                    ],
                    phase="Pending",
                ),
                pod("kube-system", "static-etcd", owner=None),
            ],
        }
    )


def test_pods_are_folded_under_the_deployment_through_their_replicaset() -> None:
    snap = take_snapshot(cluster(), label="pre", taken_by="U1", now=NOW)
    pods = {p["name"]: p for p in pods_as_dicts(snap)}
    assert (pods["api-7d9f-a"]["workload_kind"], pods["api-7d9f-a"]["workload"]) == ("Deployment", "api")
    assert (pods["kube-proxy-x"]["workload_kind"], pods["kube-proxy-x"]["workload"]) == (
        "DaemonSet",
        "kube-proxy",
    )
    assert (pods["static-etcd"]["workload_kind"], pods["static-etcd"]["workload"]) == ("Pod", "static-etcd")


def test_ready_containers_restarts_and_waiting_reasons_are_kept() -> None:
    snap = take_snapshot(cluster(), label="pre", taken_by="U1", now=NOW)
    pods = {p["name"]: p for p in pods_as_dicts(snap)}
    assert (pods["api-7d9f-b"]["ready"], pods["api-7d9f-b"]["total"]) == (2, 3)
    assert pods["kube-proxy-x"]["status"] == "ImagePullBackOff"
    assert pods["kube-proxy-x"]["reasons"] == "ImagePullBackOff"


def test_nodes_carry_group_versions_cordon_and_readiness() -> None:
    snap = take_snapshot(cluster(), label="pre", taken_by="U1", now=NOW)
    n2 = next(n for n in snap["nodes"] if n["name"] == "n2")
    assert (n2["group"], n2["kubelet"], n2["unschedulable"], n2["ready"]) == (
        "istio",
        "v1.29.4",
        True,
        "True",
    )
    assert n2["roles"] == ["worker"]
    # Which label named the group: a plan drafted from the snapshot says `key=value`.
    assert n2["group_label"] == "eks.amazonaws.com/nodegroup"


def test_workloads_carry_the_kubectl_rollout_verdict() -> None:
    snap = take_snapshot(cluster(), label="pre", taken_by="U1", now=NOW)
    (api,) = snap["workloads"]
    assert (api["rollout"], api["rollout_message"]) == ("waiting", "1 of 2 updated replicas are available")


def test_a_forbidden_resource_is_a_named_gap_not_a_crash() -> None:
    c = cluster()
    c.errors["events"] = ClusterError(
        "cluster test: the bot is not allowed to GET /api/v1/events", status=403
    )
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW)
    assert [g["resource"] for g in snap["gaps"]] == ["events"]
    assert "forbidden" in snap["gaps"][0]["reason"]
    assert snap["counts"]["pods"] == 4


def test_gaps_are_reported_in_one_order_whatever_order_the_lists_ran_in() -> None:
    c = cluster()
    for resource in ("events", "pods", "replicasets", "namespaces"):
        c.errors[resource] = ClusterError(
            f"cluster test: the bot is not allowed to GET {resource}", status=403
        )
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW)
    assert [g["resource"] for g in snap["gaps"]] == ["namespaces", "replicasets", "pods", "events"]
    assert snap["pods"] == []
    assert snap["counts"]["pods"] == 0


def test_a_stored_body_holds_each_pod_once_when_the_pod_list_expired_mid_way_and_ran_again() -> None:
    class ExpiringOnce(WireCluster):
        calls = 0

        def map_pages(self, path, query=None, *, limit=500, item_type=dict, transform):  # type: ignore[no-untyped-def]
            pages = super().map_pages(path, query, limit=limit, item_type=item_type, transform=transform)
            if not path.endswith("/pods"):
                yield from pages
                return
            ExpiringOnce.calls += 1
            if ExpiringOnce.calls == 1:  # a page of rows, then the continue token expires
                yield next(pages)
                raise ClusterError("cluster test: continue token expired", status=410)
            yield from pages

    c = ExpiringOnce(objects=cluster().objects)
    streamed = StreamedBody()
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW, pods_to=streamed)
    body = json.loads(zlib.decompress(streamed.finish(snap)))
    assert ExpiringOnce.calls == 2
    assert body == json.loads(to_json(take_snapshot(cluster(), label="pre", taken_by="U1", now=NOW)))
    assert len(body["pods"]) == body["counts"]["pods"] == 4


def test_a_stored_body_whose_pods_are_a_gap_holds_no_pod() -> None:
    c = cluster()
    c.errors["pods"] = ClusterError("cluster test: the bot is not allowed to GET pods", status=403)
    streamed = StreamedBody()
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW, pods_to=streamed)
    body = json.loads(zlib.decompress(streamed.finish(snap)))
    assert body["pods"] == []
    assert [g["resource"] for g in body["gaps"]] == ["pods"]
    assert body == json.loads(to_json(snap))


def test_an_expired_list_is_retried_once_then_recorded_as_a_gap() -> None:
    class Expiring(WireCluster):
        calls = 0

        def list_pages(self, path, query=None, *, limit=500, item_type=dict):  # type: ignore[no-untyped-def]
            if path.endswith("/pods"):
                Expiring.calls += 1
                raise ClusterError("cluster test: continue token expired", status=410)
            return super().list_pages(path, query, limit=limit, item_type=item_type)

    c = Expiring(objects=cluster().objects)
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW)
    assert Expiring.calls == 2
    assert [g["resource"] for g in snap["gaps"]] == ["pods"]
    assert "expired" in snap["gaps"][0]["reason"]


def test_init_container_trouble_shows_as_kubectl_shows_it() -> None:
    obj = pod("a", "p", owner=None)
    obj["status"]["initContainerStatuses"] = [
        {
            "name": "init",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "ready": False,
            "restartCount": 4,
        }
    ]
    assert pod_display_status(as_pod(obj)) == ("Init:CrashLoopBackOff", ["CrashLoopBackOff"])


def test_terminating_pods_show_terminating() -> None:
    obj = pod("a", "p", owner=None)
    obj["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    assert pod_display_status(as_pod(obj))[0] == "Terminating"


#: A container's state or last state as the API server writes it: each kind, with and without a reason.
_STATES = (
    None,
    {},
    {"running": {}},
    {"waiting": {}},
    {"waiting": {"reason": "CrashLoopBackOff"}},
    {"waiting": {"reason": "ImagePullBackOff"}},
    {"terminated": {"exitCode": 1}},
    {"terminated": {"reason": "Error", "exitCode": 1}},
    {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
    {"terminated": {"reason": "Completed", "exitCode": 0}},
    {"waiting": {}, "terminated": {"reason": "Error"}},
)


def test_a_pods_status_reasons_and_unready_containers_are_what_pod_display_status_says() -> None:
    """`project_pod` finds a pod's STATUS in its one pass over the statuses when there are no init
    containers: for every pair of container states and last states, deleted or not, it is what
    `pod_display_status` (kubectl's rules) gives, and each unready container has its state's reason."""
    seen = 0
    for (first, last_first), (second, last_second), deleted in itertools.product(
        itertools.product(_STATES, _STATES[:1] + _STATES[6:9]),
        itertools.product(_STATES, _STATES[:1] + _STATES[7:8]),
        (False, True),
    ):
        obj = pod("a", "p", owner=None)
        statuses = []
        for name, state, last, ready in (
            ("one", first, last_first, False),
            ("two", second, last_second, True),
        ):
            status: dict[str, object] = {"name": name, "ready": ready, "restartCount": 1}
            if state is not None:
                status["state"] = state
            if last is not None:
                status["lastState"] = last
            statuses.append(status)
        obj["status"]["containerStatuses"] = statuses
        if deleted:
            obj["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
        wire = as_pod(obj)
        row = project_pod(wire, {})
        display, reasons = pod_display_status(wire)
        waiting = (first or {}).get("waiting")
        why = (waiting if waiting is not None else (first or {}).get("terminated") or {}).get("reason", "")
        assert (row[P["status"]], row[P["reasons"]]) == (display, ",".join(reasons)), obj["status"]
        assert row[P["unready"]] == f"one:{why}"
        seen += 1
    assert seen == len(_STATES) * 4 * len(_STATES) * 2 * 2


def test_snapshot_labels_lose_control_characters_and_stay_one_short_line() -> None:
    assert clean_label("pre\tupgrade\x1b[31m\n") == "pre upgrade [31m"
    assert new_label(" pre-upgrade\x1b\r\n") == "pre-upgrade"
    assert len(clean_label("x" * 500)) == MAX_LABEL
    with pytest.raises(UserError):
        clean_label("\x00\x07")


def test_a_plan_stored_before_labels_were_one_word_still_takes_its_snapshot(tmp_path: Path) -> None:
    """A run's plan is read once, when it starts: its snapshot step's label is stored as it is, so
    a bot upgraded in the middle of a run does not fail the step it had accepted."""
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        stored = take_and_store(store, cluster(), label="pre upgrade", taken_by="U1", now=NOW)
        assert stored.meta.label == "pre upgrade"
        assert [m.label for m in store.snapshots()] == ["pre upgrade"]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("label", "meant"),
    [("pre pre", "pre-pre"), ("pre\tupgrade", "pre-upgrade"), ("before  the 1.25", "before-the-1.25")],
)
def test_a_snapshot_label_with_a_space_is_refused_with_the_word_it_may_have_meant(
    label: str, meant: str
) -> None:
    """`diff pre pre` names two snapshots: a label with a space could be named only in quotes."""
    with pytest.raises(UserError) as refused:
        new_label(label)
    assert refused.value.user_message.startswith("a snapshot label is one word: `")
    assert refused.value.user_message.endswith(
        f"has a space, which `diff` could name only in quotes; use `{meant}`"
    )


def test_the_snapshot_command_s_words_give_one_label_or_a_reason() -> None:
    assert label_of([]) == "manual"
    assert label_of(["pre"]) == "pre"
    with pytest.raises(UserError) as refused:
        label_of(["pre", "pre"])
    # The parser split the words: the second is named as what it is, not taken into the label.
    assert (
        refused.value.user_message
        == "`snapshot` takes one label, one word: `pre pre` is 2 words; use `pre-pre`"
    )


def test_the_stored_json_reads_back_as_json_dumps_would_have_written_it() -> None:
    snap = take_snapshot(cluster(), label='pré-upgrade ✓ "quoted"\n', taken_by="U1", now=NOW)
    written = to_json(snap)
    assert json.loads(written) == json.loads(json.dumps(snap, separators=(",", ":")))
    assert b", " not in written
    assert b": " not in written


SDS_LINE = (
    "2024-07-22T17:00:37.323487Z error failed to start SDS server: failed to start workload secret "
    "manager too many open files"
)


class Recording(WireCluster):
    """The cluster, naming each list as it is asked for, answering log reads with an SDS failure,
    and holding the end of the pod list until a log read has been asked for (10 s at most)."""

    def __init__(self) -> None:
        super().__init__(objects=cluster().objects)
        self.asked: list[str] = []
        self.log_asked = threading.Event()
        self.logs_while_listing: bool | None = None

    def map_pages(  # type: ignore[override]
        self,
        path: str,
        query: Any = None,
        *,
        limit: int = 500,
        item_type: Any = dict[str, Any],
        transform: Callable[[list[Any]], bytes],
    ) -> Iterator[MappedPage]:
        self.asked.append(path)
        pages = super().map_pages(path, query, limit=limit, item_type=item_type, transform=transform)
        return self._held(pages) if path.endswith("/pods") else pages

    def _held(self, pages: Iterator[MappedPage]) -> Iterator[MappedPage]:
        yield from pages
        self.logs_while_listing = self.log_asked.wait(10)

    def get_raw(self, path: str, query: Any = None) -> bytes:
        if not path.endswith("/log"):
            return super().get_raw(path, query)
        self.asked.append(path)
        self.log_asked.set()
        return f"starting\n{SDS_LINE}\n".encode()


def test_beside_runs_once_the_pods_are_being_listed_and_before_the_other_lists() -> None:
    c = Recording()
    c.log_asked.set()  # no logs are read here: the pod list's end is not held for one
    at_beside: list[list[str]] = []
    take_snapshot(c, label="pre", taken_by="U1", now=NOW, beside=lambda: at_beside.append(list(c.asked)))
    # The ReplicaSets first (the pods' helper takes their owners with it), then the pods.
    assert at_beside == [["/apis/apps/v1/replicasets", "/api/v1/pods"]]
    assert "/api/v1/nodes" in c.asked


def test_the_logs_are_read_while_the_pods_are_still_being_listed() -> None:
    probe = log_probe(load_rules([Path("templates/rules/known-issues.yaml")]))
    assert probe is not None
    c = Recording()
    snap = take_snapshot(c, label="pre", taken_by="U1", now=NOW, logs=probe)
    # The two istio-proxy containers of the first page were asked for before the list ended.
    assert c.logs_while_listing is True
    assert [(log["pod"], log["container"], log["lines"]) for log in snap["logs"]] == [
        ("api-7d9f-a", "istio-proxy", [SDS_LINE]),
        ("api-7d9f-b", "istio-proxy", [SDS_LINE]),
    ]
