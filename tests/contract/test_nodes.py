"""Cordon and uncordon: a strategic merge patch of spec.unschedulable, as kubectl sends it."""

from __future__ import annotations

import uuid

from kubernetes import client

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
