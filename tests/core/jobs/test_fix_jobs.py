"""The jobs behind the Fix… buttons beyond restart (issue 25): `delete-pod` and `set-image`, and the
table of kube-proxy images EKS documents.

The jobs run through the kube adapter against the sim (`sim_eks`, the runbook's EKS cluster on
1.24, its clock stepped), with what they did read back through the official kubernetes client; the
opt-in role for deleting pods is played by an in-memory cluster answering 403."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.jobs import preview
from bot.core.jobs.common import GATE
from bot.core.jobs.image import SetImageJob
from bot.core.jobs.pods import ROLE_HINT, DeletePodJob
from bot.core.jobs.registry import default_jobs
from bot.core.kube.kubeproxy import EKS_KUBE_PROXY, SOURCE, documented_image
from bot.core.rendering import Renderer
from bot.errors import ClusterError, ClusterForbidden, UserError
from bot.records import ActionCall, ClusterConfig
from bot.resources import BUILTIN_TEMPLATES
from bot.sim import SimCluster
from tests.support.jobs import FakeCluster, JobDriver, stored
from tests.support.kube_objects import pod

REGISTRY = "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/eks/kube-proxy"


@pytest.fixture
def cluster(sim_eks: SimCluster, tmp_path: Path) -> Iterator[Cluster]:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    adapter = Cluster.connect(ClusterConfig(name="prod", kubeconfig=kubeconfig, context="sim"))
    yield adapter
    adapter.close()


@pytest.fixture
def core(sim_eks: SimCluster, tmp_path: Path) -> client.CoreV1Api:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig-client")
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig), persist_config=False))


def now(sim: SimCluster) -> datetime:
    return datetime.fromtimestamp(sim.core.clock.now(), UTC)


# ----- the table ---------------------------------------------------------------------------------


def test_the_documented_image_keeps_the_registry_and_the_variant_and_takes_the_tag_from_the_table() -> None:
    minimal = f"{REGISTRY}:v1.24.17-minimal-eksbuild.4"
    assert documented_image(minimal, "v1.25.16-eks-1234") == f"{REGISTRY}:{EKS_KUBE_PROXY['1.25'][1]}"
    default = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.29.0-eksbuild.1"
    assert (
        documented_image(default, "1.30")
        == "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.30.14-eksbuild.8"
    )
    # 1.34 publishes no minimal image: the default one, never a made-up tag.
    assert documented_image(minimal, "1.34").endswith(":v1.34.1-eksbuild.2")
    with pytest.raises(ValueError, match="not an EKS kube-proxy image"):
        documented_image("registry.k8s.io/kube-proxy:v1.30.0", "1.30")
    with pytest.raises(ValueError, match=r"no entry for Kubernetes '1\.19'") as missing:
        documented_image(minimal, "v1.19.8")
    assert SOURCE in str(missing.value)


# ----- set-image -----------------------------------------------------------------------------------


def test_set_image_moves_kube_proxy_to_the_documented_image_once_and_waits_for_its_rollout(
    cluster: Cluster, sim_eks: SimCluster, core: client.CoreV1Api
) -> None:
    job = SetImageJob()
    args = {"workload": "daemonset/kube-system/kube-proxy"}
    documented = f"{REGISTRY}:{EKS_KUBE_PROXY['1.24'][1]}"
    apps = client.AppsV1Api(core.api_client)
    before = apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
    progress = job.plan(cluster, args, now=now(sim_eks))
    (entry,) = progress["workloads"]
    assert (entry["container"], entry["old"], entry["new"]) == (
        "kube-proxy",
        before.spec.template.spec.containers[0].image,
        documented,
    )
    assert job.dry_run(cluster, progress) == [
        f"would set daemonset/kube-system/kube-proxy container kube-proxy: {entry['old']} → {documented}"
        f" (the image EKS documents for 1.24: {SOURCE})"
    ]
    assert apps.read_namespaced_daemon_set("kube-proxy", "kube-system").metadata.generation == (
        before.metadata.generation
    )  # the dry run changed nothing

    driver = JobDriver(job, cluster, progress=progress, now=lambda: now(sim_eks))
    pending = driver.progress
    driver.tick()
    patched = apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
    assert patched.spec.template.spec.containers[0].image == documented
    assert driver.audit == [
        ("set-image", f"daemonset/kube-system/kube-proxy container kube-proxy: {entry['old']} → {documented}")
    ]
    # A crash before that tick was stored: the same tick again from the pending progress finds the
    # image set and does not patch a second time.
    again = job.tick(cluster, stored(pending), now=now(sim_eks))
    assert again.audit == ()
    assert again.progress["workloads"][0]["state"] == "rolling"
    assert apps.read_namespaced_daemon_set("kube-proxy", "kube-system").metadata.generation == (
        patched.metadata.generation
    )
    for _ in range(60):
        if driver.done:
            break
        sim_eks.control.advance(10)
        driver.tick()
    assert driver.done
    assert driver.last is not None
    assert driver.last.ok, driver.last.detail
    assert driver.last.detail == "1 workload(s) updated and rolled out"
    # Nothing left to change: the next plan says so.
    with pytest.raises(
        UserError, match=r"already runs .* the image EKS documents for 1\.24: nothing to change"
    ):
        job.plan(cluster, args, now=now(sim_eks))


def test_set_image_refuses_what_the_table_cannot_answer(cluster: Cluster, sim_eks: SimCluster) -> None:
    job = SetImageJob()
    with pytest.raises(UserError, match="no such workload: daemonset/kube-system/kube-proxi"):
        job.plan(cluster, {"workload": "daemonset/kube-system/kube-proxi"}, now=now(sim_eks))
    with pytest.raises(UserError, match="is not like daemonset/kube-system/kube-proxy"):
        job.plan(cluster, {"workload": "deployment/kube-system/coredns"}, now=now(sim_eks))
    # aws-node is an EKS image too, but not kube-proxy's: no documented kube-proxy tag for it.
    with pytest.raises(UserError, match="is not an EKS kube-proxy image"):
        job.plan(cluster, {"workload": "daemonset/kube-system/aws-node"}, now=now(sim_eks))


# ----- delete-pod ----------------------------------------------------------------------------------


FORCE_GATE = {"option": "force", "by": ["U1", "U2"], "reasons": ["U1: its node is dead", "U2: agreed"]}


def test_delete_pod_takes_only_the_workload_s_terminating_pods_and_only_force_passes_their_budget(
    cluster: Cluster, sim_eks: SimCluster, core: client.CoreV1Api
) -> None:
    job = DeletePodJob()
    args = {"workload": "statefulset/logging/es", "only": "terminating", "force": "true"}
    with pytest.raises(
        UserError, match="no pod of statefulset/logging/es is terminating now: nothing to delete"
    ):
        job.plan(cluster, args, now=now(sim_eks))
    es = {p.metadata.name: p for p in core.list_namespaced_pod("logging", label_selector="app=es").items}
    victim = sorted(es)[0]
    node = es[victim].spec.node_name
    sim_eks.control.inject_fault({"type": "node_not_ready", "node": node})
    sim_eks.control.advance(400)  # NotReady after 40 s, its pods deleted after their 300 s toleration
    assert core.read_namespaced_pod(victim, "logging").metadata.deletion_timestamp

    progress = job.plan(cluster, args, now=now(sim_eks))
    assert [(p["name"], p["node"], p["owner"], p["terminating"]) for p in progress["pods"]] == [
        (victim, node, "StatefulSet logging/es", True)
    ]
    pdb = "PodDisruptionBudget logging/es (disruptionsAllowed 0)"
    described = f"pod logging/{victim} on node {node} (StatefulSet logging/es; Terminating)"
    # `force: "true"` only asks for the gate's force option: by itself it passes no budget.
    assert job.dry_run(cluster, progress) == [
        "es: 2 pods (1 terminating), 0 not ready → deletes 1, 1 remains (maxUnavailable 1, replicas 2 of"
        " StatefulSet logging/es)",
        f"would leave {described}: held by {pdb}",
    ]
    assert job.dry_run(cluster, {**progress, GATE: FORCE_GATE})[1] == (
        f"would delete {described} with grace period 0 (forced, past {pdb})"
    )
    assert core.read_namespaced_pod(victim, "logging").metadata.uid == es[victim].metadata.uid
    entry = preview.read(
        cluster,
        [ActionCall(name="delete-pod", args=args)],
        default_jobs(()),
        now=now(sim_eks),
    )["actions"][0]
    assert entry["pods"] == [described]
    assert entry["asked_force"] is True
    assert entry["blocking"] == [{"pdb": pdb, "pods": f"logging/{victim}", "count": 1}]
    assert entry["forbidden"] == ""  # the sim has no RBAC: the server's dry run allowed it

    # Approved without force: the budget holds the pod, and the thread says which and how to pass it.
    plain = JobDriver(job, cluster, progress=progress, now=lambda: now(sim_eks)).run()
    assert plain.last is not None
    assert (plain.last.done, plain.last.ok, plain.audit) == (True, False, [])
    assert plain.posts[f"delete-pod-blocked:logging/{victim}:{es[victim].metadata.uid}"] == (
        f"pod logging/{victim} left: held by {pdb} — only the gate's force option passes a budget"
    )

    driver = JobDriver(job, cluster, progress={**progress, GATE: FORCE_GATE}, now=lambda: now(sim_eks))
    pending = driver.progress
    driver.tick()  # the forced delete
    uid = es[victim].metadata.uid
    assert driver.audit == [
        (
            "delete-pod",
            f"{described} (uid {uid}): deleted with grace period 0 (forced, past {pdb}) — force chosen at"
            " the gate by U1, U2: U1: its node is dead; U2: agreed",
        )
    ]
    driver.tick()
    assert driver.done
    assert driver.last is not None
    assert driver.last.ok
    assert driver.last.detail == "1 pod(s) gone"
    # A crash before the delete's tick was stored: the same tick again finds the pod gone (its
    # StatefulSet's new pod has another uid) and deletes nothing.
    again = job.tick(cluster, stored(pending), now=now(sim_eks))
    assert again.audit == ()
    assert [p["state"] for p in again.progress["pods"]] == ["gone"]


def test_delete_pod_refuses_a_pod_no_controller_owns_unless_asked_by_name(
    cluster: Cluster, sim_eks: SimCluster, core: client.CoreV1Api
) -> None:
    sim_eks.control.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "debug-shell", "namespace": "logging"},
            "spec": {"containers": [{"name": "sh", "image": "busybox:1.36"}]},
        }
    )
    sim_eks.control.advance(30)
    job = DeletePodJob()
    with pytest.raises(UserError) as refused:
        job.plan(cluster, {"pod": "logging/debug-shell"}, now=now(sim_eks))
    assert refused.value.user_message.startswith(
        "pod logging/debug-shell has no controller: once deleted nothing starts it again"
    )
    assert "allow_unmanaged=true" in refused.value.user_message
    with pytest.raises(UserError, match="pod logging/debug-shell is not terminating now: nothing to delete"):
        job.plan(
            cluster,
            {"pod": "logging/debug-shell", "only": "terminating", "allow_unmanaged": "true"},
            now=now(sim_eks),
        )
    driver = JobDriver(
        job, cluster, {"pod": "logging/debug-shell", "allow_unmanaged": "true"}, now=lambda: now(sim_eks)
    )
    # Outside the count rule (no controller counts its replicas), through the Eviction API.
    assert driver.progress["workloads"] == []
    (line,) = job.dry_run(cluster, driver.progress)
    assert line.startswith("would evict pod logging/debug-shell on node ")
    assert line.endswith("(no controller: nothing recreates it) through the Eviction API")
    driver.tick()
    for _ in range(20):
        if driver.done:
            break
        sim_eks.control.advance(10)
        driver.tick()
    assert driver.done
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_pod("debug-shell", "logging")
    assert gone.value.status == 404
    assert driver.audit[0][1].startswith("pod logging/debug-shell on node ")


class NoDeleteRole(FakeCluster):
    """A cluster whose bot is not bound to the opt-in `upgrade-bot-pod-delete` role."""

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, dry_run: bool = False, grace_seconds: int | None = None
    ) -> bool:
        raise ClusterError(
            f'pods "{name}" is forbidden: cannot delete resource "pods"', cluster="prod", status=403
        )


def test_without_the_pod_delete_role_the_gate_says_so_and_the_job_ends_naming_it() -> None:
    stuck: dict[str, Any] = pod("db", "db-0", owner=("StatefulSet", "db"), node_name="n1")
    stuck["metadata"]["deletionTimestamp"] = "2026-11-24T07:00:00Z"
    fake = NoDeleteRole(pods=[stuck])
    args = {"workload": "statefulset/db/db", "only": "terminating", "force": "true"}
    at = datetime(2026, 11, 24, 7, 5, tzinfo=UTC)
    entry = preview.read(fake, [ActionCall(name="delete-pod", args=args)], default_jobs(()), now=at)[
        "actions"
    ][0]
    assert entry["forbidden"] == ROLE_HINT
    assert "Helm value `podDelete: true`" in ROLE_HINT
    # The gate's text says so before anyone approves, on its own line.
    rendered = Renderer([BUILTIN_TEMPLATES]).env.from_string(
        '{% from "runs/_dryrun.txt.j2" import summary, nodes %}{{ summary(a) }}\n{{ nodes(a) }}'
    )
    lines = [line for line in rendered.render(a=entry).splitlines() if line]
    assert lines[0].endswith("evict 1 of 1 pod(s) through the Eviction API, so their disruption budgets apply;"
                             " their controllers start them again")  # fmt: skip
    assert lines[1].startswith("*Approve with force…* (its own reason; every approval must choose it)")
    assert lines[1].endswith("This remedy asks for force.")
    assert (
        lines[2]
        == f":no_entry: The bot may not delete pods here: {ROLE_HINT} — approving with force would fail."
    )
    assert lines[-1] == "• pod db/db-0 on node n1 (StatefulSet db/db; Terminating)"
    job = DeletePodJob()
    progress = {**job.plan(fake, args, now=at), GATE: {"option": "force", "by": ["U1"], "reasons": ["U1: x"]}}
    assert job.dry_run(fake, progress)[-1].startswith("would FAIL to delete pod db/db-0 on node n1")
    with pytest.raises(ClusterForbidden, match="upgrade-bot-pod-delete"):
        job.tick(fake, progress, now=at)
