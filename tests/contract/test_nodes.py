"""Cordon and uncordon: a strategic merge patch of spec.unschedulable, as kubectl sends it, with the
annotations and the Event that say who cordoned the node."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from kubernetes import client

from bot.core.jobs.trail import CORDONED_BY
from tests.support.backends import TIMEOUT, Backend
from tests.support.testbed import wait_until

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


def _taints(core: client.CoreV1Api, node: str) -> list[tuple[str, str]]:
    return [(t.key, t.effect) for t in core.read_node(node).spec.taints or []]


def _status_column(backend: Backend, node: str) -> str:
    result = backend.kubectl("get", "node", node, "--no-headers")
    assert result.returncode == 0, result.stderr
    return result.stdout.split()[1]


def test_cordon_and_uncordon_a_node(backend: Backend) -> None:
    core = client.CoreV1Api(backend.api)
    (node,) = backend.add_nodes(f"ng-{uuid.uuid4().hex[:4]}", 1, version="v1.29.4")
    bot = backend.bot()

    cordoned = bot.cordon(node)
    assert cordoned["spec"]["unschedulable"] is True
    assert bot.cordon(node)["spec"]["unschedulable"] is True  # idempotent
    assert core.read_node(node).spec.unschedulable is True
    assert _status_column(backend, node) == "Ready,SchedulingDisabled"
    # The node lifecycle controller mirrors the field as a taint, which is what the scheduler obeys.
    wait_until(
        lambda: (UNSCHEDULABLE, "NoSchedule") in _taints(core, node), timeout=TIMEOUT, what="taint added"
    )

    uncordoned = bot.uncordon(node)
    assert "unschedulable" not in uncordoned["spec"]  # removed, as kubectl's patch removes it
    assert core.read_node(node).spec.unschedulable is None
    assert _status_column(backend, node) == "Ready"
    wait_until(
        lambda: (UNSCHEDULABLE, "NoSchedule") not in _taints(core, node),
        timeout=TIMEOUT,
        what="taint removed",
    )


def test_a_cordon_carries_its_trail_and_the_node_lists_the_bots_event(backend: Backend) -> None:
    core = client.CoreV1Api(backend.api)
    (node,) = backend.add_nodes(f"ng-{uuid.uuid4().hex[:4]}", 1, version="v1.29.4")
    bot = backend.bot()
    trail = {CORDONED_BY: "run=r-1 step=drain-a job=3 approved-by=U1,U2"}

    cordoned = bot.cordon(node, annotations=trail)
    assert cordoned["metadata"]["annotations"][CORDONED_BY] == trail[CORDONED_BY]
    assert core.read_node(node).metadata.annotations[CORDONED_BY] == trail[CORDONED_BY]

    uid = core.read_node(node).metadata.uid
    name = f"{node}.upgrade-bot-contract"
    said = "cordoned by upgrade-bot: run r-1, step drain-a (job 3), approved by U1, U2"
    at = datetime.now(UTC)
    fields = {"uid": uid, "name": name, "reason": "UpgradeBotCordon", "message": said, "action": "Cordon"}
    assert bot.node_event(node, **fields, at=at) is True
    assert bot.node_event(node, **fields, at=at) is False  # the same Event again: already there
    events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    # Among the kubelet's own (Starting, NodeNotSchedulable): the bot's, once.
    assert [
        (e.reason, e.message, e.involved_object.kind, e.type)
        for e in events
        if e.source.component == "upgrade-bot"
    ] == [("UpgradeBotCordon", said, "Node", "Normal")]
    described = backend.kubectl("describe", "node", node)
    assert described.returncode == 0, described.stderr
    assert "UpgradeBotCordon" in described.stdout
    assert CORDONED_BY in described.stdout

    uncordoned = bot.uncordon(node, remove_annotations=[CORDONED_BY])
    assert CORDONED_BY not in (uncordoned["metadata"].get("annotations") or {})
    assert CORDONED_BY not in (core.read_node(node).metadata.annotations or {})
