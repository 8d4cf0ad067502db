"""A self-managed node group update (`drain="external"`): the cloud launches the new nodes and
terminates each old one only once someone else has cordoned and drained it.

The test plays that someone with the official client (cordon, then evictions through the API);
the control API is driven over HTTP, as a rehearsal drives it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from bot.core.runs.plans import parse_plan
from bot.errors import PlanInvalid
from bot.frontdoor.rehearse import SimControl
from bot.sim import SimCluster
from tests.support.plans import GOOD

Api = Callable[[SimCluster], Any]


def _call(sim: SimCluster, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        sim.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def _replace(sim: SimCluster, group: str, **extra: Any) -> dict[str, Any]:
    status, op = _call(sim, "POST", f"/sim/nodegroups/{group}/replace", {"version": "1.30.2", **extra})
    assert status == 202, op
    return dict(op)


def _op(sim: SimCluster, op_id: str, query: str = "") -> dict[str, Any]:
    status, op = _call(sim, "GET", f"/sim/operations/{op_id}{query}", timeout=60)
    assert status == 200, op
    return dict(op)


def _advance(sim: SimCluster, seconds: float) -> None:
    assert _call(sim, "POST", "/sim/advance", {"seconds": seconds})[0] == 200


def _group_nodes(sim: SimCluster, group: str) -> set[str]:
    return set(_call(sim, "GET", "/sim/status")[1]["nodeGroups"][group]["nodes"])


def _is_daemonset_pod(pod: Any) -> bool:
    return any(ref.kind == "DaemonSet" for ref in pod.metadata.owner_references or [])


def _pods_on(v1: Any, node: str) -> list[Any]:
    return list(v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)


def _cordon(v1: Any, node: str) -> None:
    v1.patch_node(node, {"spec": {"unschedulable": True}})


def _evict(v1: Any, pod: Any) -> int:
    """Ask for an eviction; the HTTP status (201 allowed, 429 refused by a budget)."""
    body = k8s_client.V1Eviction(
        metadata=k8s_client.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
    )
    try:
        v1.create_namespaced_pod_eviction(pod.metadata.name, pod.metadata.namespace, body)
    except ApiException as exc:
        return int(exc.status)
    return 201


def _drain(sim: SimCluster, v1: Any, node: str) -> None:
    """`kubectl drain --ignore-daemonsets` on a frozen clock: evict, let time pass, until empty."""
    for _ in range(40):
        left = [p for p in _pods_on(v1, node) if not _is_daemonset_pod(p)]
        if not left:
            return
        for pod in left:
            if pod.metadata.deletion_timestamp is None:
                _evict(v1, pod)
        sim.control.advance(2)
    raise AssertionError(f"{node} did not drain: {[p.metadata.name for p in _pods_on(v1, node)]}")


def _pod_versions(v1: Any, nodes: set[str]) -> dict[str, str]:
    return {
        f"{p.metadata.namespace}/{p.metadata.name}": p.metadata.resource_version
        for node in sorted(nodes)
        for p in _pods_on(v1, node)
    }


def _terminations(op: dict[str, Any], node: str) -> int:
    return sum(
        1 for s in op["steps"] if s.endswith(f"{node} is cordoned and drained; terminating the instance")
    )


def test_the_cloud_launches_new_nodes_and_ends_each_old_one_only_once_someone_else_drained_it(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    old = _group_nodes(sim, "workers")
    before = _pod_versions(v1, old)
    op = _replace(sim, "workers", drain="external")
    assert (op["state"], op["phase"]) == ("InProgress", "launching")

    _advance(sim, 60)
    op = _op(sim, op["id"])
    assert (op["state"], op["phase"]) == ("InProgress", "waiting-for-drain")
    new = _group_nodes(sim, "workers") - old
    assert len(new) == 3
    for name in new:
        node = v1.read_node(name)
        assert node.status.node_info.kubelet_version.startswith("v1.30.2-eks-")
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"

    # Long past the scenario's drain timeout, the cloud has neither cordoned nor evicted anything.
    _advance(sim, 15 * 60)
    assert _group_nodes(sim, "workers") >= old
    assert not any(v1.read_node(name).spec.unschedulable for name in old)
    assert _pod_versions(v1, old) == before
    op = _op(sim, op["id"])
    assert (op["state"], op["phase"]) == ("InProgress", "waiting-for-drain")
    assert not any("terminating" in s or "draining" in s for s in op["steps"])

    first, *others = sorted(old)
    _cordon(v1, first)
    _drain(sim, v1, first)
    _advance(sim, 5)
    assert first not in _group_nodes(sim, "workers")
    assert set(others) <= _group_nodes(sim, "workers")
    # Its kube-proxy pod was still bound when the instance went: DaemonSet pods hold no node.
    assert [p.metadata.name for p in _pods_on(v1, first) if _is_daemonset_pod(p)]
    _advance(sim, 60)
    op = _op(sim, op["id"])
    assert op["state"] == "InProgress"
    assert _terminations(op, first) == 1

    for name in others:
        _cordon(v1, name)
        _drain(sim, v1, name)
    _advance(sim, 5)
    op = _op(sim, op["id"])
    assert (op["state"], op["phase"], op["error"]) == ("Successful", "finished", ""), op["steps"]
    assert all(_terminations(op, name) == 1 for name in old)
    assert _group_nodes(sim, "workers") == new


def test_a_budget_that_allows_no_disruption_keeps_the_old_node_and_the_cloud_forces_nothing(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    sim.control.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    old = _group_nodes(sim, "workers")
    op = _replace(sim, "workers", drain="external")
    _advance(sim, 60)
    node = next(n for n in sorted(old) if any(p.metadata.labels.get("app") == "web" for p in _pods_on(v1, n)))
    _cordon(v1, node)
    web = next(p for p in _pods_on(v1, node) if p.metadata.labels.get("app") == "web")
    assert _evict(v1, web) == 429
    for pod in _pods_on(v1, node):
        if not _is_daemonset_pod(pod) and pod.metadata.labels.get("app") != "web":
            assert _evict(v1, pod) == 201

    _advance(sim, 20 * 60)
    assert node in _group_nodes(sim, "workers")
    held = v1.read_namespaced_pod(web.metadata.name, "default")
    assert held.metadata.deletion_timestamp is None
    assert held.metadata.resource_version == web.metadata.resource_version
    op = _op(sim, op["id"])
    assert (op["state"], op["phase"]) == ("InProgress", "waiting-for-drain")
    assert _terminations(op, node) == 0


def test_an_old_node_uncordoned_again_is_not_terminated_even_when_empty(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    node = sorted(_group_nodes(sim, "workers"))[0]
    op = _replace(sim, "workers", drain="external")
    _advance(sim, 60)
    _cordon(v1, node)
    _drain(sim, v1, node)
    # Uncordoned within the same poll interval in which it became empty: the cloud never saw it ready.
    v1.patch_node(node, {"spec": {"unschedulable": False}})
    _advance(sim, 5 * 60)
    assert node in _group_nodes(sim, "workers")
    assert _terminations(_op(sim, op["id"]), node) == 0


def test_a_pod_still_terminating_holds_its_node_until_it_is_gone(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    node = sorted(_group_nodes(sim, "workers"))[1]
    op = _replace(sim, "workers", drain="external")
    _advance(sim, 60)
    sim.control.inject_fault({"type": "stuck_terminating", "match": {"node": node}})
    _cordon(v1, node)
    stuck = [p for p in _pods_on(v1, node) if not _is_daemonset_pod(p)]
    assert stuck
    assert all(_evict(v1, p) == 201 for p in stuck)
    _advance(sim, 5 * 60)
    assert node in _group_nodes(sim, "workers")
    assert all(p.metadata.deletion_timestamp for p in _pods_on(v1, node) if not _is_daemonset_pod(p))
    for pod in stuck:
        v1.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
    _advance(sim, 5)
    assert node not in _group_nodes(sim, "workers")
    assert _terminations(_op(sim, op["id"]), node) == 1


def test_an_explicit_drain_timeout_fails_the_update_when_the_old_nodes_are_not_drained(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    old = _group_nodes(sim, "workers")
    op = _replace(sim, "workers", drain="external", drain_timeout="30m")
    _advance(sim, 60 + 29 * 60)
    assert _op(sim, op["id"])["state"] == "InProgress"
    _advance(sim, 2 * 60)
    op = _op(sim, op["id"])
    assert (op["state"], op["phase"]) == ("Failed", "finished")
    assert op["error"].startswith("NodesNotDrained: old nodes of node group workers not cordoned and drained")
    assert _group_nodes(sim, "workers") >= old


def test_the_cloud_drain_options_and_unknown_modes_are_refused_with_external_drain(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    for body in (
        {"version": "1.30.2", "drain": "external", "force": True},
        {"version": "1.30.2", "drain": "external", "max_unavailable": 2},
        {"version": "1.30.2", "drain": "sideways"},
    ):
        status, answer = _call(sim, "POST", "/sim/nodegroups/workers/replace", body)
        assert status == 400, answer
    assert _call(sim, "GET", "/sim/operations")[1] == []


def test_a_wait_until_waiting_for_drain_returns_once_the_new_nodes_are_ready(
    sim_factory: Callable[..., SimCluster],
) -> None:
    # A running clock: join 30 s + Ready 10 s ≈ 2.5 real seconds at speed 20.
    sim = sim_factory("small", speed=20, seed=1)
    old = _group_nodes(sim, "workers")
    op = _replace(sim, "workers", drain="external")
    started = time.monotonic()
    reached = _op(sim, op["id"], "?wait=60&until=waiting-for-drain")
    assert time.monotonic() - started < 30
    assert (reached["state"], reached["phase"]) == ("InProgress", "waiting-for-drain")
    new = _group_nodes(sim, "workers") - old
    assert len(new) == 3
    for name in new:
        node = sim.core.store.get("nodes", "", name)
        assert node is not None
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
    # A phase already passed answers at once; `wait` alone still waits for the end (not reached here).
    assert _op(sim, op["id"], "?wait=30&until=launching")["phase"] == "waiting-for-drain"
    started = time.monotonic()
    assert _op(sim, op["id"], "?wait=1")["state"] == "InProgress"
    assert time.monotonic() - started >= 1


def test_wait_alone_still_waits_for_the_end_and_bad_phase_queries_are_refused(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0, seed=1)
    op = _replace(sim, "workers")
    assert _op(sim, op["id"])["phase"] == "launching"
    _advance(sim, 600)
    done = _op(sim, op["id"], "?wait=5")
    assert (done["state"], done["phase"]) == ("Successful", "finished")
    assert any("cordoning the old nodes" in s for s in done["steps"])
    assert _call(sim, "GET", f"/sim/operations/{op['id']}?wait=1&until=nowhere")[0] == 400
    assert _call(sim, "GET", f"/sim/operations/{op['id']}?until=finished")[0] == 400
    assert _call(sim, "GET", "/sim/operations/op-99?wait=1")[0] == 404
    upgrade = sim.control.upgrade_control_plane("1.30.2")
    assert upgrade["phase"] == "updating"


REHEARSED = GOOD.replace(
    "    escalate_after: 10m\n",
    "    escalate_after: 10m\n"
    "    rehearsal:\n"
    '      - replace_node_group: {name: istio, version: "1.25.16", drain: external}\n',
)


def test_a_plan_hook_may_leave_the_drain_to_the_bot_and_a_wrong_mode_names_its_line() -> None:
    hook = parse_plan(REHEARSED).step("work").rehearsal[0]
    assert dict(hook.args) == {"name": "istio", "version": "1.25.16", "drain": "external"}
    assert parse_plan(REHEARSED.replace("drain: external", "drain: cloud")).step("work").rehearsal
    wrong = REHEARSED.replace("drain: external", "drain: sideways")
    line = wrong.splitlines().index(
        '      - replace_node_group: {name: istio, version: "1.25.16", drain: sideways}'
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(wrong, source="p.yaml")
    assert f"p.yaml:{line + 1}" in str(caught.value)
    assert "drain" in str(caught.value)


def test_the_rehearsal_hook_returns_once_the_new_nodes_are_ready_and_leaves_the_drain_to_the_bot(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("eks-nodegroups", speed=60, seed=1)
    old = _group_nodes(sim, "istio")
    hook = parse_plan(REHEARSED).step("work").rehearsal[0]
    started = time.monotonic()
    control = SimControl(sim.url, timeout=60)
    ok, line = control.play(hook)
    assert time.monotonic() - started < 30
    assert ok, line
    assert line == (
        "sim: replace_node_group name=istio, version=1.25.16, drain=external"
        " → new nodes Ready; waiting for the old nodes to be drained"
    )
    op = control.operations()[-1]
    assert (op["kind"], op["state"], op["phase"]) == ("NodeGroupUpdate", "InProgress", "waiting-for-drain")
    nodes = _group_nodes(sim, "istio")
    assert old < nodes
    assert all(not (sim.core.store.get("nodes", "", n) or {})["spec"].get("unschedulable") for n in old)
