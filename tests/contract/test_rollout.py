"""Rollout restart (the restartedAt template annotation) and the rollout verdict reaching done,
followed live through the adapter's list+watch, as kubectl rollout status follows it."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from bot.adapters.kube import RESTARTED_AT
from bot.core.rollout import DONE, verdict
from bot.errors import RolloutRefused
from tests.contract.workloads import pod_names, start_web
from tests.support.backends import TIMEOUT, Backend

DONE_MESSAGE = 'deployment "web" successfully rolled out'


def test_rollout_restart_replaces_every_pod_and_the_verdict_reaches_done(backend: Backend) -> None:
    ns = backend.namespace
    group = f"ng-{uuid.uuid4().hex[:4]}"
    backend.add_nodes(group, 2, version="v1.29.4")
    start_web(backend, group)
    before = set(pod_names(backend))
    bot = backend.bot()
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    assert verdict("Deployment", bot.get_json(f"{path}/web")) == (DONE, DONE_MESSAGE)

    restarted = bot.rollout_restart(ns, "web", at=datetime(2026, 11, 23, 9, 30, tzinfo=UTC))
    annotations = restarted["spec"]["template"]["metadata"]["annotations"]
    assert annotations[RESTARTED_AT] == "2026-11-23T09:30:00Z"
    generation = restarted["metadata"]["generation"]

    messages = _follow(
        bot.list_watch(path, {"fieldSelector": "metadata.name=web"}, timeout_seconds=10), generation
    )
    assert messages[-1] == DONE_MESSAGE
    assert not before & set(pod_names(backend))  # every pod was replaced

    result = backend.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=60s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == DONE_MESSAGE

    # A paused Deployment is refused, as kubectl refuses it.
    client.AppsV1Api(backend.api).patch_namespaced_deployment("web", ns, {"spec": {"paused": True}})
    with pytest.raises(RolloutRefused, match="paused"):
        bot.rollout_restart(ns, "web", at=datetime(2026, 11, 23, 9, 31, tzinfo=UTC))


def _follow(events: Any, generation: int) -> list[str]:
    """Fold the watch into verdicts until the restarted generation is rolled out."""
    deadline = time.monotonic() + TIMEOUT
    messages: list[str] = []
    try:
        for event in events:
            assert time.monotonic() < deadline, f"no verdict in time: {messages}"
            if event.type == "BOOKMARK":
                continue
            objects = event.object["items"] if event.type == "SYNC" else [event.object]
            for obj in objects:
                state, message = verdict("Deployment", obj)
                if not messages or messages[-1] != message:
                    messages.append(message)
                observed = (obj.get("status") or {}).get("observedGeneration", 0)
                if state == DONE and observed >= generation:
                    return messages
    finally:
        events.close()
    raise AssertionError(f"the watch ended: {messages}")
