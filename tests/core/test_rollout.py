"""Rollout verdicts follow kubectl rollout status, field by field."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.rollout import verdict


def dep(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "generation": 2},
        "spec": {"replicas": 3},
        "status": {"observedGeneration": 2, **status},
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"updatedReplicas": 1, "replicas": 3}, ("waiting", "1 of 3 new replicas have been updated")),
        ({"updatedReplicas": 3, "replicas": 4}, ("waiting", "1 old replicas are pending termination")),
        (
            {"updatedReplicas": 3, "replicas": 3, "availableReplicas": 2},
            ("waiting", "2 of 3 updated replicas are available"),
        ),
        (
            {"updatedReplicas": 3, "replicas": 3, "availableReplicas": 3},
            ("done", 'deployment "web" successfully rolled out'),
        ),
        (
            {"conditions": [{"type": "Progressing", "reason": "ProgressDeadlineExceeded"}]},
            ("failed", 'deployment "web" exceeded its progress deadline'),
        ),
    ],
)
def test_deployment_verdicts(status: dict[str, Any], expected: tuple[str, str]) -> None:
    assert verdict("Deployment", dep(**status)) == expected


def test_an_unobserved_generation_is_waiting() -> None:
    obj = dep(updatedReplicas=3, replicas=3, availableReplicas=3)
    obj["status"]["observedGeneration"] = 1
    assert verdict("Deployment", obj)[0] == "waiting"


def test_daemonset_and_statefulset_verdicts() -> None:
    ds = {
        "metadata": {"name": "kube-proxy", "generation": 1},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 5,
            "updatedNumberScheduled": 5,
            "numberAvailable": 4,
        },
    }
    assert verdict("DaemonSet", ds) == ("waiting", "4 of 5 updated pods are available")
    sts = {
        "metadata": {"name": "db", "generation": 1},
        "spec": {"replicas": 3},
        "status": {
            "observedGeneration": 1,
            "readyReplicas": 3,
            "currentRevision": "a",
            "updateRevision": "b",
        },
    }
    assert verdict("StatefulSet", sts) == ("waiting", "waiting for statefulset rolling update to complete")
    sts["status"]["currentRevision"] = "b"
    assert verdict("StatefulSet", sts)[0] == "done"
