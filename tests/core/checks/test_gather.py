"""The gatherer over real HTTP (the sim's `eks-nodegroups`): the pods are reduced in the kube
adapter's helper process (`PodReducer`) and folded here, and the facts and hits are the same when
no helper can be had and the caller's process reduces every page itself; the gaps keep the order
of the report whatever order the lists are read in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from bot.adapters.kube import Cluster, fetching_ahead, prefetch
from bot.core.checks import podreducer
from bot.core.checks.gather import Gathered, read_facts
from bot.core.rules import read_rules
from bot.records import ClusterConfig
from bot.resources import BUILTIN_RULES
from bot.sim import SimCluster
from tests.support.forbidden import LogsForbidden

RULES = read_rules(BUILTIN_RULES)


@pytest.fixture
def reader(sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim_eks), context="sim"))
    yield cluster
    cluster.close()


def hits_of(gathered: Gathered) -> list[tuple[str, str, tuple[str, ...], str]]:
    return [(h.rule.id, h.workload, h.pods, h.evidence) for h in gathered.hits]


def test_the_pods_folded_from_a_helper_are_the_pods_folded_in_the_callers_process(
    reader: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    helped = read_facts(reader, rules=RULES)
    assert fetching_ahead() == 0, "every helper was stopped"
    monkeypatch.setattr(prefetch, "FORK_FETCH", False)  # no helper: `map_pages` lists in this process
    alone = read_facts(reader, rules=RULES)
    assert alone.facts == helped.facts
    assert hits_of(alone) == hits_of(helped)
    assert alone.notes == helped.notes
    # Both saw the scenario's pods: its drain blockers, old sidecars and known issues.
    pods = helped.facts.pods
    assert pods.not_evictable
    assert pods.empty_dir
    assert pods.proxy_versions
    assert {h[0] for h in hits_of(helped)} >= {"KI002", "KI004", "KI010"}


def test_without_the_core_api_every_list_is_a_gap_in_the_reports_order(
    reader: Cluster, sim_eks: SimCluster
) -> None:
    sim_eks.control.set_transport(error_rate=1.0, error_status=403, path_prefix="/api/v1/")
    try:
        gathered = read_facts(reader, rules=RULES)
    finally:
        sim_eks.control.set_transport()
    resources = [gap.split(":", 1)[0].split(" ", 1)[0] for gap in gathered.facts.gaps]
    # The events are read before the nodes (the pods' helper takes them along), yet their gap
    # comes where the report has always had it: after what the checks read, before the pods.
    assert resources[:2] == ["nodes", "services"]
    assert resources[-2:] == ["events", "pods"]
    # Between them: the webhooks' Endpoints and the Istio root certificate's ConfigMap.
    assert set(resources[2:-2]) == {"endpoints", "ConfigMap"}
    assert gathered.facts.nodes == []
    assert gathered.hits == []
    assert fetching_ahead() == 0


def test_logs_the_bot_may_not_read_are_a_gap_naming_the_opt_in_role_and_read_once(reader: Cluster) -> None:
    allowed = read_facts(reader, rules=RULES)
    assert not any(g.startswith("container logs") for g in allowed.facts.gaps)
    refused = LogsForbidden(reader)
    gathered = read_facts(refused, rules=RULES)  # type: ignore[arg-type]
    assert refused.log_reads == 1  # the first refusal stops the rest
    assert gathered.facts.gaps[-1] == (
        "container logs: not read (forbidden): the log-based rules need the optional "
        "`upgrade-bot-pod-logs` role (deploy/rbac.yaml; Helm value `podLogs: true`)"
    )
    # The rest of the check is whole.
    assert gathered.facts.nodes == allowed.facts.nodes


def test_a_check_whose_matching_budget_runs_out_says_which_rules_stopped(reader: Cluster) -> None:
    # No time at all to match: the pattern rules stop, the others still run, and the notes say so.
    gathered = read_facts(reader, rules=RULES, match_seconds=0.0)
    patterned = {
        r.id for r in RULES if r.match.log is not None or r.match.events is not None or r.match.images
    }
    found = {h[0] for h in hits_of(gathered)}
    assert "KI004" in found  # vault-agent not ready: no pattern
    assert not found & patterned
    (note,) = [n for n in gathered.notes if "budget" in n]
    assert note.startswith("known-issue rules stopped matching after their 0 s budget: ")
    assert "KI002" in note  # the scenario's workload-spiffe-uds log lines were not looked at
    assert "findings may be missing" in note


PAGES_OF_ROOMS = 40


def test_the_rooms_of_many_pages_add_up_to_each_nodes_requests() -> None:
    """The pods' helper sends, with each page, the requests so far of that page's nodes; the
    caller's fold keeps the last of each and ends with every node's sums."""
    from bot.core.checks import schema
    from bot.core.rules import Screen
    from bot.core.rules.patterns import MatchBudget

    screen = Screen(RULES)
    shape = schema.pod_schema(screen.label_keys, screen.annotation_keys)

    def pod(i: int) -> object:
        owner = "DaemonSet" if i % 7 == 0 else "ReplicaSet"
        return msgspec.convert(
            {
                "metadata": {
                    "name": f"p{i}",
                    "namespace": "ns",
                    "ownerReferences": [{"kind": owner, "name": f"w{i % 5}", "controller": True}],
                },
                "spec": {
                    "nodeName": f"node-{i % 4}" if i % 11 else "",
                    "containers": [
                        {"name": "app", "resources": {"requests": {"cpu": f"{i}m", "memory": "1Mi"}}}
                    ],
                },
                "status": {"phase": "Failed" if i % 13 == 0 else "Running"},
            },
            shape.pod,
            from_attributes=False,
        )

    pods = [pod(i) for i in range(1, PAGES_OF_ROOMS * 3 + 1)]
    reducer = podreducer.PodReducer(
        screen=screen, shape=shape, rules=False, with_events=frozenset(), log_containers=frozenset()
    )
    fold = podreducer._PodFold(
        rules=[], budget=MatchBudget(1.0), screen=screen, node_ready={}, events={}, log_rules=[], get_raw=None
    )
    for start in range(0, len(pods), 3):
        fold.add(reducer(pods[start : start + 3]))  # type: ignore[arg-type]
    want: dict[str, list[int]] = {}
    for i in range(1, PAGES_OF_ROOMS * 3 + 1):
        if i % 11 == 0 or i % 13 == 0:
            continue  # no node yet; finished
        room = want.setdefault(f"node-{i % 4}", [0] * 8)
        room[0] += i
        room[1] += 2**20
        room[2] += 1
        if i % 7:
            room[3] += i
            room[4] += 2**20
            room[5] += 1
            room[6] = max(room[6], i)
            room[7] = 2**20
    assert fold.rooms == want
