"""The Fix… buttons beyond restart (issue 25), end to end on the sim through the HTTP front door,
the real slack_sdk client and the Slack stub (which validates every Block Kit payload):

- KI005, kube-proxy in ImagePullBackOff on a tag that was never published: its fix sets the image
  EKS documents for the cluster's version (1.24 here), in the registry the DaemonSet uses; the gate
  shows old → new; approved by two, the DaemonSet rolls out and pulls.
- KI008, pods stuck Terminating on a node that died: its fix deletes the workload's Terminating
  pods with grace period 0; the gate names pod, node and owner; approved by two, the pod is gone
  and its StatefulSet starts it again elsewhere.

The bot's clock is the sim's, stepped with `advance` (tests/support/fix_buttons.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.core.duties import Duties
from bot.core.kube.kubeproxy import EKS_KUBE_PROXY
from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import (
    FIX,
    OPS,
    PRIMARY,
    SHADOW,
    approve_and_complete,
    approve_with_force,
    complete,
    fix_bot,
    fix_button,
    fix_posts,
    scanned_by_hand,
    wait_for,
)
from tests.support.slack_stub import SlackStub


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim_eks: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim_eks, tmp_path) as started:
        yield started


REGISTRY = "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/eks/kube-proxy"
BAD_TAG = "v1.24.17-minimal-eksbuild.99"  # computed, never published


def _engine(front: Any, kubeconfig: Path) -> tuple[Duties, Any, Any]:
    return scanned_by_hand(front)


def _fix_and_approve(
    front: Any, sim: SimCluster, post: dict[str, Any], step: str, job_runner: Any, *, force: str = ""
) -> str:
    """Click the post's Fix…, pass the one-step run's gate with two people (both with the force
    option and its reason when `force` is given); the gate's text once the run completed."""
    services = front.services
    jobs = front.pool.count()
    assert front.front.click(PRIMARY, fix_button(post), FIX).status == 200
    front.pool.wait_idle(jobs)
    runs = services.store.runs()
    assert len(runs) == 1, runs
    run_id = str(runs[0].id)
    # The one-step run's gate is posted once the run starts: wait for it rather than race it.
    gate = wait_for(lambda: _gate_or_none(front, step), what=f"the gate of `{step}`")
    gate_post = next(p for p in reversed(front.posts()) if gate in json.dumps(p.get("blocks") or []))
    if force:
        for user in (PRIMARY, SHADOW):
            assert approve_with_force(front, step, user, f"{force} ({user})") == ""
        complete(front, run_id=run_id, runner=job_runner, sim=sim)
    else:
        approve_and_complete(front, gate, step, run_id=run_id, runner=job_runner, sim=sim)
    fixes = [e for e in services.store.audit_entries() if e.subcommand == "action" and e.outcome == "ok"]
    assert [e.user_id for e in fixes] == [PRIMARY]
    approvals = services.store.run_rows(run_id)
    assert approvals is not None
    assert {a.user_id for a in approvals[2]} >= {PRIMARY, SHADOW}
    return json.dumps(gate_post.get("blocks")) + "\n" + str(gate_post.get("text", ""))


def _gate_or_none(front: Bot, step: str) -> str | None:
    try:
        return front.gate(step)
    except AssertionError:
        return None


def _step(sim: SimCluster, seconds: float = 30) -> Callable[[], None]:
    def step() -> None:
        sim.control.advance(seconds)
        time.sleep(0.2)

    return step


def test_kube_proxy_on_an_unpublished_tag_is_fixed_with_the_documented_image(
    bot: tuple[Bot, Path],
    sim_eks: SimCluster,
) -> None:
    front, kubeconfig = bot
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    duties, watch_runner, job_runner = _engine(front, kubeconfig)
    try:
        # The runbook's fault: kube-proxy set to a computed tag that does not exist in the registry.
        sim_eks.control.inject_fault(
            {"type": "image_pull_error", "match": {"image": f"*:{BAD_TAG}"}, "pull_error": "not found"}
        )
        apps.patch_namespaced_daemon_set(
            "kube-proxy",
            "kube-system",
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "kube-proxy", "image": f"{REGISTRY}:{BAD_TAG}"}]}
                    }
                }
            },
        )
        row = front.services.watches.start(
            cluster="prod", channel=OPS, started_by=PRIMARY, namespaces=["kube-system"]
        )
        assert watch_runner.scan() == [row.id]
        posts = wait_for(
            lambda: [p for p in fix_posts(front.stub) if "*KI005*" in p["text"]],
            what="KI005's post with its Fix button",
            tick=_step(sim_eks),
            timeout=90,
        )
        note = json.dumps(posts[0]["blocks"])
        assert "set-image workload=daemonset/kube-system/kube-proxy container=kube-proxy" in note

        documented = f"{REGISTRY}:{EKS_KUBE_PROXY['1.24'][1]}"
        gate = _fix_and_approve(front, sim_eks, posts[0], "set-image", job_runner)
        # The gate showed old → new, and where the new one comes from.
        assert f"{REGISTRY}:{BAD_TAG}" in gate, gate
        assert documented in gate, gate
        assert "docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html" in gate

        audit = [e.detail for e in front.services.store.audit_entries() if e.subcommand == "set-image"]
        assert (
            f"set-image: daemonset/kube-system/kube-proxy container kube-proxy: {REGISTRY}:{BAD_TAG} → {documented}"
            in audit
        ), audit
        ds = apps.read_namespaced_daemon_set("kube-proxy", "kube-system")
        assert ds.spec.template.spec.containers[0].image == documented

        # The fault is gone: every kube-proxy pod runs the documented image, Ready.
        def healthy() -> bool:
            pods = [
                p
                for p in core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-proxy").items
                if not p.metadata.deletion_timestamp
            ]
            return bool(pods) and all(
                p.spec.containers[0].image == documented
                and p.status.container_statuses
                and all(cs.ready for cs in p.status.container_statuses)
                for p in pods
            )

        wait_for(healthy, what="kube-proxy pods on the documented image, Ready", tick=_step(sim_eks, 10))
    finally:
        duties.shutdown()


def test_a_pod_stuck_terminating_on_a_dead_node_is_deleted_and_started_again(
    bot: tuple[Bot, Path],
    sim_eks: SimCluster,
) -> None:
    front, kubeconfig = bot
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    duties, watch_runner, job_runner = _engine(front, kubeconfig)
    try:
        es = {p.metadata.name: p for p in core.list_namespaced_pod("logging", label_selector="app=es").items}
        victim = sorted(es)[0]
        node = es[victim].spec.node_name
        uid = es[victim].metadata.uid
        assert node
        # The node's kubelet stops: NotReady after 40 s; its pods are deleted after their 300 s
        # toleration and stay Terminating, since no kubelet confirms it.
        sim_eks.control.inject_fault({"type": "node_not_ready", "node": node})
        row = front.services.watches.start(
            cluster="prod", channel=OPS, started_by=PRIMARY, namespaces=["logging"]
        )
        assert watch_runner.scan() == [row.id]
        posts = wait_for(
            lambda: [
                p for p in fix_posts(front.stub) if "*KI008*" in p["text"] and "`logging/es`" in p["text"]
            ],
            what="KI008's post about logging/es with its Fix button",
            tick=_step(sim_eks),
            timeout=120,
        )
        stuck = core.read_namespaced_pod(victim, "logging")
        assert stuck.metadata.deletion_timestamp
        assert stuck.metadata.uid == uid
        note = json.dumps(posts[0]["blocks"])
        assert "delete-pod workload=statefulset/logging/es only=terminating force=true" in note

        gate = _fix_and_approve(front, sim_eks, posts[0], "delete-pod", job_runner, force="its node is dead")
        # The gate named the pod, its node and its owner, the budget that holds it, and the force
        # option (the remedy asks for it) with what it does.
        assert f"pod logging/{victim} on node {node} (StatefulSet logging/es; Terminating)" in gate, gate
        assert "PodDisruptionBudget logging/es (disruptionsAllowed 0)" in gate
        assert "grace period 0" in gate
        assert '"action_id": "gate_force"' in gate
        assert "This remedy asks for force." in gate

        # The stuck pod is gone: its StatefulSet starts it again under the same name, elsewhere.
        def replaced() -> bool:
            try:
                pod = core.read_namespaced_pod(victim, "logging")
            except client.ApiException as exc:
                if exc.status == 404:
                    return False  # deleted; not started again yet
                raise
            return pod.metadata.uid != uid and not pod.metadata.deletion_timestamp

        wait_for(replaced, what="the stuck pod replaced", tick=_step(sim_eks, 10))
        # Audited: the delete, with the pod, its node, its owner and how.
        audit = [e.detail for e in front.services.store.audit_entries() if e.subcommand == "delete-pod"]
        assert [d for d in audit if d.startswith(f"delete-pod: pod logging/{victim} on node {node}")] == [
            f"delete-pod: pod logging/{victim} on node {node} (StatefulSet logging/es; Terminating)"
            f" (uid {uid}): deleted with grace period 0 (forced, past PodDisruptionBudget logging/es"
            f" (disruptionsAllowed 0)) — force chosen at the gate by {PRIMARY}, {SHADOW}:"
            f" {PRIMARY}: its node is dead ({PRIMARY}); {SHADOW}: its node is dead ({SHADOW})"
        ], audit
        # Each force approval is audited with its own reason.
        approvals = [  # each ends with its local time: " [2026-11-29 02:39 UTC]"
            e.detail.rsplit(" [", 1)[0]
            for e in front.services.store.audit_entries()
            if e.subcommand == "approved"
        ]
        assert approvals == [
            f"start roles=primary with force: its node is dead ({PRIMARY})",
            f"start roles=shadow with force: its node is dead ({SHADOW})",
        ], approvals
    finally:
        duties.shutdown()
