"""KI004's "N/M containers ready" reads the same on the watch's card, in its known-issue evidence
and in `check`: counted as `kubectl get pods` counts READY (regular containers and sidecars, never an
init container that ran to its end), by the one helper `bot.core.kube.objects.ready_count`."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bot.core.checks import podreducer, schema
from bot.core.checks.rulehits import rule_finding
from bot.core.kube.objects import NOT_READY, classify
from bot.core.kube.wire import WPod
from bot.core.rules import match_rules, read_rules
from bot.core.watches.model import WatchState
from bot.resources import BUILTIN_RULES
from tests.support.watch_objects import at, spec, vault_pod

RULES = read_rules(BUILTIN_RULES)
SHAPE = schema.pod_schema(frozenset(), frozenset({"vault.hashicorp.com/agent-inject"}))


def _completed(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
        "image": "init:1",
    }


def classic() -> dict[str, Any]:
    """Two init containers that ran to their end, then app, worker (ready) and vault-agent (not)."""
    raw = vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False)
    statuses = raw["status"]["containerStatuses"]
    statuses.insert(1, {**statuses[0], "name": "worker"})
    raw["spec"]["initContainers"] = [{"name": "vault-agent-init"}, {"name": "istio-init"}]
    raw["status"]["initContainerStatuses"] = [_completed("vault-agent-init"), _completed("istio-init")]
    return raw


def sidecar() -> dict[str, Any]:
    """vault-agent as a native sidecar (an init container with restartPolicy: Always), not ready;
    app and worker ready."""
    raw = vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False)
    app, agent = raw["status"]["containerStatuses"]
    raw["status"]["containerStatuses"] = [app, {**app, "name": "worker"}]
    raw["spec"]["initContainers"] = [
        {"name": "vault-agent-init"},
        {"name": "vault-agent", "restartPolicy": "Always"},
    ]
    raw["status"]["initContainerStatuses"] = [_completed("vault-agent-init"), agent]
    return raw


@pytest.mark.parametrize("make", [classic, sidecar], ids=["init-containers", "native-sidecar"])
def test_a_pod_with_init_containers_is_2_of_3_ready_on_the_card_in_the_watch_and_in_check(
    make: Any,
) -> None:
    raw = make()
    # The watch's card (its unhealthy group's detail).
    wire = msgspec.json.decode(msgspec.json.encode(raw), type=WPod)
    assert classify(wire) == (NOT_READY, "2/3 containers ready")
    # The watch's known issue, past KI004's five minutes.
    state = WatchState(spec(), rules=RULES)
    state.sync("pod", [raw], at(0))
    summary = state.summary(at(6))
    assert [(u.reason, u.top[0].detail) for u in summary.unhealthy] == [("Not ready", "2/3 containers ready")]
    (episode,) = summary.rule_episodes
    assert episode.evidence == "2/3 containers ready (vault-agent is not)"
    # `check`: the pod as the gatherer decodes it from the page.
    pod = msgspec.json.decode(msgspec.json.encode(raw), type=SHAPE.pod)
    workload, _ = podreducer.workload_of(pod.metadata)
    (hit,) = match_rules(RULES, [podreducer.pod_state(pod, workload, SHAPE, {})], [], at(6))
    assert hit.rule.id == "KI004"
    assert "2/3 containers ready (vault-agent is not)" in rule_finding(hit).why
    assert podreducer._pod_reason(pod) == "2/3 ready"
