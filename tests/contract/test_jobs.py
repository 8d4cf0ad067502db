"""The cluster jobs (issue 15) against both backends: drains that meet PodDisruptionBudgets,
StatefulSet pods and DaemonSet pods, a drain past its timeout that waits for people, dry runs that
change nothing, a crash that never evicts twice, rollout restarts and a node-group wait."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from bot.core.jobs.base import Choice, Decision
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.nodes import CordonJob
from bot.core.jobs.restart import RestartJob
from bot.core.jobs.waitgroup import WaitNodeGroupJob
from bot.core.rules import load_rules
from bot.settings import BUILTIN_RULES
from bot.sim import SimCluster
from tests.contract.workloads import IMAGE, pdb, start_web
from tests.support.backends import GROUP_LABEL, TIMEOUT, Backend, SimBackend
from tests.support.jobs import CountingCluster, JobDriver, pause, pod_versions, run_job, stored, utcnow
from tests.support.testbed import wait_until

LABELS = (GROUP_LABEL,)
VERSION = "v1.29.4"


# ----- set-up ------------------------------------------------------------------------------------


def _group(backend: Backend, nodes: int = 2) -> tuple[str, list[str]]:
    group = f"ng-{uuid.uuid4().hex[:4]}"
    return group, backend.add_nodes(group, nodes, version=VERSION)


def _pods(backend: Backend, selector: str = "") -> list[Any]:
    core = client.CoreV1Api(backend.api)
    return list(core.list_namespaced_pod(backend.namespace, label_selector=selector).items)


def _live(backend: Backend, selector: str) -> list[Any]:
    return [p for p in _pods(backend, selector) if not p.metadata.deletion_timestamp]


def _on(backend: Backend, node: str, selector: str = "") -> list[str]:
    return sorted(p.metadata.name for p in _live(backend, selector) if p.spec.node_name == node)


def _web_node(backend: Backend) -> str:
    return str(sorted(p.spec.node_name for p in _live(backend, "app=web"))[0])


def _budget(backend: Backend, min_available: int, allowed: int) -> None:
    policy = client.PolicyV1Api(backend.api)
    policy.create_namespaced_pod_disruption_budget(backend.namespace, pdb("web", minAvailable=min_available))

    def settled() -> bool:
        budget = policy.read_namespaced_pod_disruption_budget("web", backend.namespace)
        status = budget.status
        return bool(
            status
            and status.observed_generation == budget.metadata.generation
            and status.current_healthy == 2
            and status.disruptions_allowed == allowed
        )

    wait_until(settled, timeout=TIMEOUT, what=f"PDB web allows {allowed}")


def _unschedulable(backend: Backend, node: str) -> bool:
    return bool(client.CoreV1Api(backend.api).read_node(node).spec.unschedulable)


def _template(name: str, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": name}},
        "spec": {
            "nodeSelector": {GROUP_LABEL: group},
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "app", "image": IMAGE}],
            **extra,
        },
    }


def _daemonset(backend: Backend, group: str) -> None:
    client.AppsV1Api(backend.api).create_namespaced_daemon_set(
        backend.namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": _template("agent", group)},
        },
    )
    wait_until(lambda: len(_live(backend, "app=agent")) == 2, timeout=TIMEOUT, what="agent on both nodes")


def _statefulset(backend: Backend, group: str) -> None:
    client.AppsV1Api(backend.api).create_namespaced_stateful_set(
        backend.namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 1,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": _template("db", group),
            },
        },
    )
    wait_until(
        lambda: any(p.status.phase == "Running" for p in _live(backend, "app=db")),
        timeout=TIMEOUT,
        what="db-0",
    )


def _daemonset_pods(backend: Backend, node: str) -> int:
    """DaemonSet pods on the node in every namespace (the sim runs kube-proxy and friends)."""
    pods = (
        client.CoreV1Api(backend.api)
        .list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        .items
    )
    return sum(
        1
        for p in pods
        if any(r.kind == "DaemonSet" and r.controller for r in p.metadata.owner_references or [])
    )


def _evictions(cluster: CountingCluster) -> dict[str, int]:
    return {target: n for (what, target), n in cluster.calls.items() if what == "evict"}


# ----- drain -------------------------------------------------------------------------------------


def test_a_drain_blocked_by_a_disruption_budget_names_it_once_and_finishes_when_it_is_relaxed(
    backend: Backend,
) -> None:
    ns = backend.namespace
    group, _nodes = _group(backend)
    start_web(backend, group)
    _budget(backend, 2, 0)
    node = _web_node(backend)
    on_node = _on(backend, node, "app=web")
    driver = JobDriver(DrainJob(LABELS, load_rules([BUILTIN_RULES])), backend.bot(), {"node": node})
    blocked = f"pdb-blocked:{ns}/web:{node}"
    # The API's refusal matched against the shipped rules: KI006, once for the workload.
    known = f"rule:KI006:{ns}/Deployment/web:1"

    driver.run(until=lambda d: blocked in d.posts)
    assert "disruptionsAllowed 0" in driver.posts[blocked]
    assert driver.posts[known].startswith(
        f":mag: Known issue *KI006* — Eviction refused by a PodDisruptionBudget (drain stalled)\n"
        f"Deployment `{ns}/web` ({len(on_node)} pod{'s' if len(on_node) > 1 else ''}) — seen: event"
        " TooManyRequests: Cannot evict pod as it would"
        " violate the pod's disruption budget."
    )
    assert (
        f"kubectl -n {ns} get pdb   (the one with ALLOWED DISRUPTIONS 0 selects web)" in driver.posts[known]
    )
    assert _unschedulable(backend, node)
    # It keeps retrying (every 5 s) without a second post, and the card names the budget.
    driver.run(until=lambda d: any(p["attempts"] >= 2 for p in d.progress["nodes"][node]["pods"].values()))
    assert driver.last is not None
    assert f"blocked by PDB: {ns}/web" in driver.last.card
    assert _on(backend, node, "app=web") == on_node

    client.PolicyV1Api(backend.api).patch_namespaced_pod_disruption_budget(
        "web", ns, {"spec": {"minAvailable": 1}}
    )
    driver.run()
    assert driver.last is not None
    assert driver.last.done
    assert driver.last.ok
    assert _on(backend, node, "app=web") == []
    assert driver.posts[f"drained:{node}"].startswith(f"node {node} drained: {len(on_node)} pod(s) evicted")
    assert driver.progress["cordoned"] == [node]
    assert [k for k in driver.posts if k.startswith("pdb-blocked:")] == [blocked]
    assert [k for k in driver.posts if k.startswith("rule:")] == [known]


def test_a_drain_leaves_daemonset_pods_and_follows_a_recreated_statefulset_pod_by_uid(
    backend: Backend,
) -> None:
    ns = backend.namespace
    group, _nodes = _group(backend)
    _daemonset(backend, group)
    _statefulset(backend, group)
    db = _live(backend, "app=db")[0]
    node, old_uid = db.spec.node_name, db.metadata.uid
    agent = {p.metadata.name: p.metadata.uid for p in _live(backend, "app=agent") if p.spec.node_name == node}
    cluster = CountingCluster(backend.bot())

    driver = run_job(DrainJob(LABELS), cluster, {"node": node})
    assert driver.last is not None
    assert driver.last.ok, driver.last
    # db-0 came back under the same name with a new UID, elsewhere: the drain did not wait on it.
    wait_until(
        lambda: [p for p in _live(backend, "app=db") if p.metadata.uid != old_uid],
        timeout=TIMEOUT,
        what="new db-0",
    )
    assert _evictions(cluster) == {f"{ns}/db-0": 1}
    # The DaemonSet pod is still there, untouched.
    assert {
        p.metadata.name: p.metadata.uid for p in _live(backend, "app=agent") if p.spec.node_name == node
    } == agent
    kept = _daemonset_pods(backend, node)
    assert kept >= 1
    assert f"{kept} DaemonSet/mirror pod(s) left on the node" in driver.posts[f"drained:{node}"]
    # An eviction aimed at the old UID never hits the new pod.
    new = _live(backend, "app=db")[0]
    assert cluster.inner.evict(ns, "db-0", uid=old_uid) is False
    after = _pods(backend, "app=db")
    assert [(p.metadata.uid, p.metadata.deletion_timestamp) for p in after] == [(new.metadata.uid, None)]


def test_a_drain_past_its_timeout_asks_and_does_nothing_until_people_decide_skip_or_delete(
    backend: Backend,
) -> None:
    group, _nodes = _group(backend)
    start_web(backend, group)
    _budget(backend, 2, 0)
    node = _web_node(backend)
    stuck = _on(backend, node, "app=web")
    cluster = CountingCluster(backend.bot())
    driver = JobDriver(DrainJob(LABELS), cluster, {"node": node, "timeout": "2s"})

    driver.run(until=lambda d: d.choice is not None)
    choice = driver.choice
    assert choice is not None
    assert choice.key == f"drain-timeout:{node}:1"
    assert [(o.id, o.roles, o.needs_reason) for o in choice.options] == [
        ("wait", ("primary", "shadow"), False),
        ("delete", ("coordinator",), True),
        ("skip", ("primary", "shadow"), True),
    ]
    before, evictions = pod_versions(_pods(backend)), _evictions(cluster)
    for _ in range(3):  # longer than the 5 s between eviction retries
        pause(2.5)
        again = driver.tick()
        assert (again.choice, again.posts, again.audit) == (choice, (), ())
    assert pod_versions(_pods(backend)) == before
    assert _evictions(cluster) == evictions

    driver.tick(
        Decision(choice_key=choice.key, option="skip", by="U-primary", reason="the web team's budget")
    )
    driver.run()
    assert driver.last is not None
    assert driver.last.done
    assert driver.last.ok
    assert "skipped 1" in driver.last.detail
    assert "<@U-primary> (the web team's budget) chose to skip" in driver.posts[f"drain-decision:{node}:1"]
    assert _unschedulable(backend, node)
    assert _on(backend, node, "app=web") == stuck

    # A second drain of the same (already cordoned) node; this time the coordinator deletes.
    def delete(asked: Choice) -> Decision:
        return Decision(choice_key=asked.key, option="delete", by="U-coord", reason="maintenance window ends")

    again_driver = run_job(DrainJob(LABELS), cluster, {"node": node, "timeout": "2s"}, decide=delete)
    assert again_driver.last is not None
    assert again_driver.last.ok
    assert again_driver.progress["cordoned"] == []  # it was cordoned before this job
    assert _on(backend, node, "app=web") == []
    deleted = [d for what, d in again_driver.audit if what == "delete-pod"]
    assert len(deleted) == len(stuck)
    assert all("U-coord: maintenance window ends" in d for d in deleted)
    assert f"{len(stuck)} deleted" in again_driver.posts[f"drained:{node}"]


def test_a_tick_run_again_after_a_crash_never_evicts_a_pod_twice(backend: Backend) -> None:
    ns = backend.namespace
    group, _nodes = _group(backend)
    start_web(backend, group)
    node = _web_node(backend)
    victims = {p.metadata.name: p.metadata.uid for p in _live(backend, "app=web") if p.spec.node_name == node}
    cluster = CountingCluster(backend.bot())

    driver = run_job(
        DrainJob(LABELS), cluster, {"node": node}, crash_when=lambda t: any(a[0] == "evict" for a in t.audit)
    )
    assert driver.crashed
    assert driver.last is not None
    assert driver.last.ok
    assert _evictions(cluster) == {f"{ns}/{name}": 1 for name in victims}
    assert not {p.metadata.uid for p in _pods(backend, "app=web")} & set(victims.values())


# ----- dry runs ----------------------------------------------------------------------------------


def test_dry_runs_of_cordon_drain_and_restart_list_what_would_happen_and_change_nothing(
    backend: Backend,
) -> None:
    ns = backend.namespace
    group, nodes = _group(backend)
    start_web(backend, group)
    _daemonset(backend, group)
    _budget(backend, 2, 0)
    node = _web_node(backend)
    web = _on(backend, node, "app=web")
    agent = _on(backend, node, "app=agent")
    core, apps = client.CoreV1Api(backend.api), client.AppsV1Api(backend.api)

    def versions() -> tuple[Any, ...]:
        return (
            pod_versions(_pods(backend)),
            [core.read_node(n).metadata.resource_version for n in nodes],
            apps.read_namespaced_deployment("web", ns).metadata.resource_version,
            apps.read_namespaced_daemon_set("agent", ns).metadata.resource_version,
        )

    # A baseline once the controllers are done with the new objects (a status still settling
    # would change a resourceVersion that no dry run touched): two equal reads in a row.
    seen: list[tuple[Any, ...]] = []

    def settled() -> tuple[Any, ...] | None:
        seen.append(versions())
        return seen[-1] if len(seen) > 1 and seen[-1] == seen[-2] else None

    before = wait_until(settled, timeout=TIMEOUT, interval=1.0, what="the objects to settle")
    cluster = CountingCluster(backend.bot())
    now = utcnow()

    cordon = CordonJob(LABELS)
    assert cordon.dry_run(cluster, stored(cordon.plan(cluster, {"node": node}, now=now))) == [
        f"would cordon node {node} (schedulable → unschedulable)"
    ]
    drain = DrainJob(LABELS)
    lines = drain.dry_run(cluster, stored(drain.plan(cluster, {"node": node}, now=now)))
    budget = f"PodDisruptionBudget {ns}/web (disruptionsAllowed 0)"
    # The sim also runs kube-system DaemonSets (kube-proxy …) on every node: left there too.
    others = [line for line in lines[1:] if f" {ns}/" not in line]
    assert all(" on the node (DaemonSet pod)" in line for line in others)
    assert [line for line in lines if line not in others] == [
        f"would cordon node {node} (schedulable → unschedulable)",
        *sorted(
            [f"{node}: would leave {ns}/{a} on the node (DaemonSet pod)" for a in agent]
            + [f"{node}: would try to evict {ns}/{w}, but it is blocked now by {budget}" for w in web]
        ),
    ]
    restart = RestartJob()
    progress = stored(restart.plan(cluster, {"namespace": ns, "kinds": "deployment"}, now=now))
    stamp = progress["workloads"][0]["stamp"]
    assert restart.dry_run(cluster, progress) == [
        f"would restart deployment/{ns}/web: pod template restartedAt = {stamp}, every pod replaced"
    ]
    assert not cluster.calls  # every write was a server-side dry run
    assert versions() == before


# ----- restart -----------------------------------------------------------------------------------


def test_a_restart_waits_for_the_rollout_verdict_and_refuses_a_paused_deployment(backend: Backend) -> None:
    ns = backend.namespace
    group, _nodes = _group(backend)
    start_web(backend, group)
    before = {p.metadata.uid for p in _live(backend, "app=web")}
    bot = backend.bot()

    driver = run_job(RestartJob(), bot, {"workloads": f"deployment/{ns}/web"})
    assert driver.last is not None
    assert driver.last.ok, driver.last
    assert driver.posts[f"rollout-done:deployment/{ns}/web"].endswith(
        'deployment "web" successfully rolled out'
    )
    assert [what for what, _ in driver.audit] == ["restart"]
    assert not before & {p.metadata.uid for p in _live(backend, "app=web")}

    client.AppsV1Api(backend.api).patch_namespaced_deployment("web", ns, {"spec": {"paused": True}})
    refused = run_job(RestartJob(), bot, {"workloads": f"deployment/{ns}/web"})
    assert refused.last is not None
    assert refused.last.done
    assert not refused.last.ok
    assert "paused" in refused.posts[f"restart-refused:deployment/{ns}/web"]
    assert refused.audit == []


def test_a_restart_of_a_namespace_restarts_every_deployment_daemonset_and_statefulset(
    backend: Backend,
) -> None:
    ns = backend.namespace
    group, _nodes = _group(backend)
    start_web(backend, group)
    _daemonset(backend, group)
    _statefulset(backend, group)
    before = {p.metadata.uid for p in _pods(backend)}

    driver = run_job(RestartJob(), backend.bot(), {"namespace": ns})
    assert driver.last is not None
    assert driver.last.ok, driver.last
    keys = [f"deployment/{ns}/web", f"daemonset/{ns}/agent", f"statefulset/{ns}/db"]
    assert sorted(k for k in driver.posts if k.startswith("rollout-done:")) == sorted(
        f"rollout-done:{k}" for k in keys
    )
    stamps = {
        kind: obj.spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"]
        for kind, obj in (
            ("deployment", client.AppsV1Api(backend.api).read_namespaced_deployment("web", ns)),
            ("daemonset", client.AppsV1Api(backend.api).read_namespaced_daemon_set("agent", ns)),
            ("statefulset", client.AppsV1Api(backend.api).read_namespaced_stateful_set("db", ns)),
        )
    }
    assert set(stamps.values()) == {driver.progress["started"]}
    assert not before & {p.metadata.uid for p in _live(backend, "")}


def test_a_restart_whose_pods_crash_loop_stops_not_ok_naming_the_workload(
    sim_factory: Callable[..., SimCluster], tmp_path: Path
) -> None:
    # Sim only: kwok's fake kubelets cannot crash a container; the sim's fault injection can.
    backend = SimBackend(sim_factory("small", speed=20.0, seed=1), tmp_path)
    try:
        ns = backend.namespace
        group, _nodes = _group(backend)
        start_web(backend, group)
        backend.sim.control.inject_fault({"type": "crash_loop", "match": {"namespace": ns}})
        driver = run_job(
            RestartJob(),
            backend.bot(),
            {"workloads": f"deployment/{ns}/web", "crashloop_after": "3s", "timeout": "5m"},
        )
        assert driver.last is not None
        assert driver.last.done
        assert not driver.last.ok
        key = f"deployment/{ns}/web"
        assert "CrashLoopBackOff for more than 3 s" in driver.posts[f"rollout-failed:{key}"]
        assert key in driver.last.detail
        assert "CrashLoopBackOff" in driver.last.detail
    finally:
        backend.close()


# ----- wait-nodegroup ----------------------------------------------------------------------------


def test_wait_nodegroup_finishes_when_every_node_of_the_group_is_ready_on_the_version(
    backend: Backend,
) -> None:
    group, old = _group(backend)
    driver = JobDriver(WaitNodeGroupJob(LABELS), backend.bot(), {"nodegroup": group, "version": "1.30"})
    first = driver.tick()
    assert not first.done
    assert first.card == (f"░░░░░░░░░░ 0/2 nodes of {group} Ready on 1.30", "2 old node(s) remaining")

    backend.add_nodes(group, 2, version="v1.30.2")
    second = driver.tick()
    assert not second.done
    assert second.card[0].endswith(f"2/4 nodes of {group} Ready on 1.30")
    for name in old:
        backend.remove_node(name)
    driver.run()
    assert driver.last is not None
    assert driver.last.ok
    assert driver.posts[f"nodegroup-ready:{group}:1.30"] == f"node group {group}: all 2 node(s) Ready on 1.30"
