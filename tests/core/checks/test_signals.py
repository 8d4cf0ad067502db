"""The shortcut that keeps `check` fast at 150,000 pods changes no hit: a pod is dropped before its
`PodState` is built only when no rule can match it, and the gatherer's signals, read off the wire
structs, are the engine's own (`Screen.signals`) over the state it would have built."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.core import rules
from bot.core.checks import gather, podreducer, schema
from bot.core.rules import (
    EVENTS,
    LOGGED,
    ContainerView,
    EventRecord,
    PodState,
    Screen,
    engine,
    match_rules,
    model,
    parse_rules,
    read_rules,
)
from bot.core.rules.patterns import MatchBudget
from bot.errors import ClusterError
from bot.resources import BUILTIN_RULES

#: The shipped rules and one for each match field they leave out.
RULES = [
    *read_rules(BUILTIN_RULES),
    *parse_rules(
        """rules:
  - id: TEAM001
    title: legacy batch pods that crashed
    match: {labels: {team: legacy}, terminated_reasons: [OOMKilled, Error]}
    explanation: x
    remediation: y
    links: [https://example.com/a]
  - id: TEAM002
    title: a container of the registry in a crash loop
    match: {images: "registry.example.com/", waiting_reasons: [CrashLoopBackOff]}
    explanation: x
    remediation: y
    links: [https://example.com/b]
  - id: TEAM003
    title: a deleting StatefulSet pod
    match: {kinds: [StatefulSet], deleting: true, containers: [db, app]}
    explanation: x
    remediation: y
    links: [https://example.com/c]
""",
        source="team.yaml",
    ),
]
SCREEN = Screen(RULES)
SHAPE = schema.pod_schema(SCREEN.label_keys, SCREEN.annotation_keys)
NODES = {"n-ok": True, "n-down": False}

_name = st.sampled_from(["app", "db", "istio-proxy", "vault-agent", "kube-proxy"])
_reason = st.sampled_from(["", "CrashLoopBackOff", "ImagePullBackOff", "OOMKilled", "Error", "Completed"])
_state = st.one_of(
    st.none(),
    st.just({"running": {"startedAt": "2026-11-23T00:00:00Z"}}),
    st.builds(lambda r: {"waiting": {"reason": r} if r else {}}, _reason),
    st.builds(lambda r: {"terminated": {"reason": r, "exitCode": 1} if r else {"exitCode": 0}}, _reason),
    st.just({}),
)
_status = st.fixed_dictionaries(
    {
        "name": _name,
        "ready": st.booleans(),
        # "istio-proxy": a log container's name in a pod's bytes that is not a container's name
        "image": st.sampled_from(["registry.example.com/a:1", "x:2", "istio-proxy"]),
    },
    optional={"state": _state, "lastState": _state},
)
_pod = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["p-1", "p-2", "p-3"]),
                "namespace": st.sampled_from(["shop", "kube-system"]),
            },
            optional={
                "deletionTimestamp": st.just("2026-11-23T00:00:00Z"),
                "labels": st.dictionaries(
                    st.sampled_from(["team", "serving.kserve.io/inferenceservice", "app"]),
                    st.sampled_from(["legacy", "x"]),
                ),
                "annotations": st.dictionaries(
                    st.sampled_from(
                        [
                            "vault.hashicorp.com/agent-inject",
                            "cluster-autoscaler.kubernetes.io/safe-to-evict",
                            "other",
                        ]
                    ),
                    st.sampled_from(["true", "false"]),
                ),
                "ownerReferences": st.sampled_from(["StatefulSet", "DaemonSet", "ReplicaSet", "Job"]).map(
                    lambda kind: [{"kind": kind, "name": "db", "controller": True}]
                ),
            },
        ),
        "spec": st.fixed_dictionaries(
            {"nodeName": st.sampled_from(["n-ok", "n-down", "gone"])},
            optional={
                "tolerations": st.lists(
                    st.sampled_from(
                        [
                            {"operator": "Exists"},
                            {"operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists"},
                        ]
                    ),
                    max_size=2,
                )
            },
        ),
        "status": st.fixed_dictionaries(
            {"phase": st.sampled_from(["Running", "Pending"])},
            optional={"containerStatuses": st.lists(_status, max_size=3)},
        ),
    }
)


def wire(pod: dict[str, Any]) -> schema.Pod:
    return msgspec.json.decode(msgspec.json.encode(pod), type=SHAPE.pod)


@settings(max_examples=300, deadline=None)
@given(_pod)
def test_the_gatherers_signals_are_the_engines_over_the_state_it_builds(raw: dict[str, Any]) -> None:
    pod = wire(raw)
    workload, _ = podreducer.workload_of(pod.metadata)
    state = podreducer.pod_state(pod, workload, SHAPE, NODES)
    signals = gather._pod_signals(pod, workload, SCREEN, SHAPE, NODES) | podreducer._container_signals(
        pod, SCREEN
    )
    assert signals == SCREEN.signals(state)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_pod, max_size=6),
    st.sampled_from([frozenset(), frozenset({"istio-proxy"}), podreducer._Everything()]),
)
def test_the_pods_helper_sends_every_pod_a_rule_may_match_with_the_engines_signals(
    raws: list[dict[str, Any]], log_containers: frozenset[str] | podreducer._Everything
) -> None:
    """`PodReducer` screens the pods inline, off the page's bytes: the pods it sends are those the
    engine's screen wants (every node taken for Ready, as in the helper) or whose log a log rule
    may read (the first two of their workload), each with the engine's signals over its state."""
    pods = [wire(raw) for raw in raws]
    reducer = podreducer.PodReducer(
        screen=SCREEN, shape=SHAPE, rules=True, with_events=frozenset(), log_containers=log_containers
    )
    page = podreducer._REDUCED_DECODER.decode(reducer(pods))
    expected = []
    asked: dict[str, int] = {}
    for pod in pods:
        workload, _ = podreducer.workload_of(pod.metadata)
        state = podreducer.pod_state(pod, workload, SHAPE, {})
        signals = SCREEN.signals(state)
        logs = False
        if (
            log_containers
            and asked.get(workload, 0) < podreducer.LOGS_PER_WORKLOAD
            and any(c.name in log_containers for c in state.containers)
        ):
            asked[workload] = asked.get(workload, 0) + 1
            logs = True
        if logs or SCREEN.wants(signals | (SCREEN.used & rules.NODE_NOT_READY)):
            expected.append((signals, logs, state))
    assert [(c.signals, c.logs, c.state) for c in page.candidates] == expected


_view = st.builds(
    ContainerView,
    name=_name,
    image=st.sampled_from(["registry.example.com/a:1", "x:2"]),
    ready=st.booleans(),
    waiting=_reason,
    terminated=_reason,
    log_tail=st.sampled_from(["", "Too many open files", "workload-spiffe-uds: read-only file system"]),
)
_state_of = st.builds(
    PodState,
    namespace=st.sampled_from(["shop", "kube-system", "knative-serving"]),
    name=st.sampled_from(["p-1", "p-2", "p-3", "p-4"]),
    workload=st.sampled_from(
        ["Deployment shop/api", "StatefulSet shop/db", "DaemonSet kube-system/kube-proxy"]
    ),
    deleting=st.booleans(),
    node_ready=st.booleans(),
    tolerates_all=st.booleans(),
    labels=st.dictionaries(
        st.sampled_from(["team", "serving.kserve.io/inferenceservice"]), st.just("legacy")
    ),
    annotations=st.dictionaries(
        st.sampled_from(
            ["vault.hashicorp.com/agent-inject", "cluster-autoscaler.kubernetes.io/safe-to-evict"]
        ),
        st.sampled_from(["true", "false"]),
    ),
    containers=st.lists(_view, max_size=3).map(tuple),
)
_event = st.builds(
    EventRecord,
    namespace=st.just("shop"),
    kind=st.just("Pod"),
    name=st.sampled_from(["p-1", "p-2", "p-9"]),
    reason=st.sampled_from(["FailedAttachVolume", "EvictionBlocked"]),
    message=st.sampled_from(["Multi-Attach error for volume x", "would violate the pod's disruption budget"]),
)


def hits(pods: list[PodState], events: list[EventRecord]) -> list[tuple[str, str, tuple[str, ...], str]]:
    return [(h.rule.id, h.workload, h.pods, h.evidence) for h in match_rules(RULES, pods, events)]


VAULT_NOT_READY = PodState(
    namespace="shop",
    name="p-1",
    workload="Deployment shop/api",
    annotations={"vault.hashicorp.com/agent-inject": "true"},
    containers=(ContainerView(name="app"), ContainerView(name="vault-agent", ready=False)),
)


@example([VAULT_NOT_READY], [])
@settings(max_examples=300, deadline=None)
@given(st.lists(_state_of, max_size=8, unique_by=lambda p: p.name), st.lists(_event, max_size=3))
def test_dropping_the_pods_the_screen_refuses_changes_no_hit(
    pods: list[PodState], events: list[EventRecord]
) -> None:
    with_events = {(e.namespace, e.name) for e in events}
    kept = [p for p in pods if SCREEN.wants(SCREEN.signals(p, with_events))]
    # Events about dropped pods are not orphans: the gatherer passes them with their pods only.
    kept_keys = {(p.namespace, p.name) for p in kept}
    all_keys = {(p.namespace, p.name) for p in pods}
    kept_events = [
        e for e in events if (e.namespace, e.name) in kept_keys or (e.namespace, e.name) not in all_keys
    ]
    assert hits(kept, kept_events) == hits(pods, events)
    # And both are what the rules' own tests say of each pod, one by one.
    assert {(h[0], h[1], h[2]) for h in hits(pods, events)} == naive(pods, events)


def naive(pods: list[PodState], events: list[EventRecord]) -> set[tuple[str, str, tuple[str, ...]]]:
    """Every rule against every pod with the rules' per-pod tests, no candidates and no screen."""
    found: dict[tuple[str, str], set[str]] = {}
    for rule in RULES:
        m = rule.match
        for p in pods:
            if not model._pod_level(m, p):
                continue
            if m.container_level and not any(model._container_ok(m, c) for c in p.containers):
                continue
            about = [e for e in events if (e.namespace, e.name) == (p.namespace, p.name)]
            if m.events is not None and not any(engine._event_ok(m.events, e) for e in about):
                continue
            found.setdefault((rule.id, p.workload), set()).add(p.name)
        if m.events is not None and not m.container_level and not engine._has_pod_filters(m):
            names = {(p.namespace, p.name) for p in pods}
            for e in events:
                if (e.namespace, e.name) not in names and engine._event_ok(m.events, e):
                    found.setdefault((rule.id, f"{e.kind} {e.namespace}/{e.name}"), set())
    return {(rule, workload, tuple(sorted(names))) for (rule, workload), names in found.items()}


def test_a_healthy_pod_shows_no_signal_a_rule_needs_and_a_troubled_one_does() -> None:
    healthy = PodState(
        namespace="shop",
        name="api-1",
        workload="Deployment shop/api",
        containers=(ContainerView(name="app"), ContainerView(name="istio-proxy")),
    )
    assert not SCREEN.wants(SCREEN.signals(healthy))
    logged = PodState(
        namespace="shop",
        name="api-2",
        workload="Deployment shop/api",
        containers=(ContainerView(name="istio-proxy", log_tail="Too many open files"),),
    )
    assert SCREEN.signals(logged) & LOGGED
    assert SCREEN.wants(SCREEN.signals(logged))
    assert SCREEN.signals(healthy, {("shop", "api-1")}) & EVENTS


def _istio_pod(i: int, *, ready: bool = True) -> schema.Pod:
    """Pod `i` of the Deployment `app-<i // 2>` (two pods each), with an istio-proxy."""
    app = f"app-{i // 2}"
    statuses = [{"name": n, "image": f"{n}:1", "ready": ready} for n in ("app", "istio-proxy")]
    return wire(
        {
            "metadata": {
                "namespace": "shop",
                "name": f"{app}-7d5-{i}",
                "labels": {"pod-template-hash": "7d5"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-7d5", "controller": True}],
            },
            "spec": {
                "nodeName": "n-ok",
                "containers": [{"name": n, "image": f"{n}:1"} for n in ("app", "istio-proxy")],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": statuses,
            },
        }
    )


def _istio_reducer(offer_rules: list[rules.Rule]) -> podreducer.PodReducer:
    """The pods' helper of a check with the shipped and team rules, which reads istio-proxy logs
    and counts the reads of `offer_rules` (none: it offers every pod that may be read)."""
    return podreducer.PodReducer(
        screen=SCREEN,
        shape=SHAPE,
        rules=True,
        with_events=frozenset(),
        log_containers=frozenset({"istio-proxy"}),
        log_rules=offer_rules,
    )


def _folded(
    pods: list[schema.Pod], log_rules: list[rules.Rule], offer_rules: list[rules.Rule]
) -> tuple[list[tuple[str, str]], list[rules.RuleHit], int]:
    """The log reads (path, container) and hits of a check over `pods`, 50 to a page, with the
    pods' helper counting the reads of `offer_rules`; and how many pods it offered for their log."""
    reads: list[tuple[str, str]] = []

    def get_raw(path: str, query: dict[str, Any]) -> bytes:
        reads.append((path, str(query["container"])))
        # One pod in seven has the open-files trouble KI012 looks for.
        return b"listener accept failure: Too many open files" if len(reads) % 7 == 0 else b"serving"

    reducer = _istio_reducer(offer_rules)
    fold = podreducer._PodFold(
        rules=RULES,
        budget=MatchBudget(30.0),
        screen=SCREEN,
        node_ready={},
        events={},
        log_rules=log_rules,
        get_raw=get_raw,
    )
    offered = 0
    for start in range(0, len(pods), 50):
        data = reducer(pods[start : start + 50])
        offered += sum(c.logs for c in podreducer._REDUCED_DECODER.decode(data).candidates)
        fold.add(data)
    return reads, fold.finish(), offered


def test_the_pods_helper_offers_pods_for_their_logs_only_until_the_reads_they_cost_are_spent() -> None:
    """600 pods of 300 workloads, each with an istio-proxy a log rule reads: the check reads its
    `MAX_LOG_READS` logs, the same ones and with the same hits whether the helper offers every
    pod or stops offering once the reads it offered are spent — it offers no more than that."""
    pods = [_istio_pod(i, ready=i % 5 != 0) for i in range(600)]
    log_rules = [r for r in RULES if r.match.log is not None]
    every = _folded(pods, log_rules, offer_rules=[])
    counted = _folded(pods, log_rules, offer_rules=log_rules)
    assert len(every[0]) == podreducer.MAX_LOG_READS
    assert counted[0] == every[0], "the same containers' logs, in the same order"
    assert counted[1] == every[1]
    assert any(h.rule.id == "KI012" for h in counted[1])
    assert every[2] == 600
    assert counted[2] == podreducer.MAX_LOG_READS  # one istio-proxy read per pod offered


def test_a_log_rule_that_needs_a_notready_node_keeps_every_pod_offered() -> None:
    """Only the caller knows which nodes are NotReady: with a log rule that asks for one, the
    helper cannot count the reads, and offers every pod that may be read, as before."""
    (needs_node,) = parse_rules(
        """rules:
  - id: TEAM004
    title: istio-proxy on a lost node logs connection resets
    match: {containers: [istio-proxy], node_not_ready: true, log: {regex: "connection reset", lines: 50}}
    explanation: x
    remediation: y
    links: [https://example.com/d]
""",
        source="team.yaml",
    )
    pods = [_istio_pod(i) for i in range(600)]
    log_rules = [r for r in RULES if r.match.log is not None]
    assert _folded(pods, log_rules, offer_rules=[*log_rules, needs_node])[2] == 600


_condition = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["PodScheduled", "Initialized", "Ready", "ContainersReady"]),
        "status": st.sampled_from(["True", "False", "Unknown"]),
    },
    optional={"lastTransitionTime": st.just("2026-11-26T07:05:49Z"), "message": st.text(max_size=30)},
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_condition, max_size=5, unique_by=lambda c: c["type"]), st.booleans(), st.booleans())
def test_a_pods_readiness_is_its_ready_condition_whatever_order_and_spacing_the_json_has(
    conditions: list[dict[str, str]], reordered: bool, spaced: bool
) -> None:
    """`pod_ready` reads the API server's bytes where it can, and decodes them where it cannot: a
    Ready condition written in another field order, or with spaces, tells the same."""
    written = [dict(reversed(list(c.items()))) if reordered else c for c in conditions]
    text = json.dumps(written, separators=(", ", ": ") if spaced else (",", ":"))
    status = msgspec.json.decode(f'{{"phase":"Running","conditions":{text}}}', type=schema.PodStatus)
    assert schema.pod_ready(status) == any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_screens_table_says_what_wants_says_for_every_set_of_signals() -> None:
    for screen in (SCREEN, Screen(read_rules(BUILTIN_RULES)), Screen([])):
        assert [bool(b) for b in screen.table] == [
            screen.wants(signals) for signals in range(rules.ALL_SIGNALS + 1)
        ]


#: Small pools, so that a page often holds pods one after another with the same owner, containers,
#: volumes or tolerations, and sometimes pods that share some of them and differ in one.
_OWNERS: list[dict[str, Any]] = [
    {"ownerReferences": [{"kind": "ReplicaSet", "name": "api-7d5", "controller": True}], "hash": "7d5"},
    {"ownerReferences": [{"kind": "ReplicaSet", "name": "api-7d5", "controller": True}], "hash": "9f1"},
    {"ownerReferences": [{"kind": "ReplicaSet", "name": "api-9f1", "controller": True}], "hash": "9f1"},
    {"ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d5", "controller": True}], "hash": "7d5"},
    {"ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}]},
    {"ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": True}]},
    {"ownerReferences": [{"kind": "ReplicaSet", "name": "api-7d5"}], "hash": "7d5"},  # no controller
    {},  # a bare pod
]
_CONTAINERS: list[list[dict[str, Any]]] = [
    [
        {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}},
        {"name": "istio-proxy", "image": "istio/proxyv2:1.17.2", "resources": {"requests": {"cpu": "10m"}}},
    ],
    [  # the same, but for the app's requests (a vertical autoscaler's pod)
        {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
        {"name": "istio-proxy", "image": "istio/proxyv2:1.17.2", "resources": {"requests": {"cpu": "10m"}}},
    ],
    [  # the same, but for the sidecar's version (injected again mid-upgrade)
        {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}},
        {"name": "istio-proxy", "image": "istio/proxyv2:1.18.0", "resources": {"requests": {"cpu": "10m"}}},
    ],
    [{"name": "app", "image": "app:1", "resources": {"limits": {"cpu": "1"}}}],
    [{"name": "db", "image": "postgres:16"}, {"name": "istio-proxy", "image": "istio/proxyv2:1.17.2"}],
    [],
]
_VOLUMES: list[list[dict[str, Any]]] = [
    [{"name": "scratch", "emptyDir": {}}],
    [{"name": "data", "hostPath": {"path": "/var/data"}}],
    [{"name": "scratch", "emptyDir": {"medium": "Memory"}}, {"name": "data", "hostPath": {"path": "/d"}}],
    [{"name": "config", "configMap": {"name": "cfg"}}],
    [],
]
_TOLERATIONS: list[list[dict[str, Any]]] = [
    [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
    [{"operator": "Exists"}],
    [],
]
_pool_pod = st.tuples(
    st.sampled_from(["shop", "ops"]),
    st.integers(0, len(_OWNERS) - 1),
    st.integers(0, len(_CONTAINERS) - 1),
    st.integers(0, len(_VOLUMES) - 1),
    st.integers(0, len(_TOLERATIONS) - 1),
    st.sampled_from(["n-ok", "n-2", ""]),
    st.sampled_from(["Running", "Running", "Pending", "Failed", "Succeeded"]),
    st.booleans(),  # ready
    st.sampled_from(
        [
            {},
            {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
            {"kubernetes.io/config.mirror": "x"},
            {"vault.hashicorp.com/agent-inject": "true"},
        ]
    ),
    st.sampled_from([{}, {"team": "legacy"}]),
    st.booleans(),  # deleting
)


def _pool_wire(i: int, drawn: tuple[Any, ...]) -> schema.Pod:
    ns, owner, containers, volumes, tolerations, node, phase, ready, annotations, labels, deleting = drawn
    meta: dict[str, Any] = {"namespace": ns, "name": f"pod-{i}", "annotations": annotations}
    refs = _OWNERS[owner]
    if "ownerReferences" in refs:
        meta["ownerReferences"] = refs["ownerReferences"]
    meta["labels"] = {**labels, **({"pod-template-hash": refs["hash"]} if "hash" in refs else {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T07:05:49Z"
    return wire(
        {
            "metadata": meta,
            "spec": {
                "nodeName": node,
                "containers": _CONTAINERS[containers],
                "volumes": _VOLUMES[volumes],
                "tolerations": _TOLERATIONS[tolerations],
            },
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": [
                    {"name": c["name"], "image": c["image"], "ready": ready} for c in _CONTAINERS[containers]
                ],
            },
        }
    )


def _reduced(pods: list[schema.Pod], per_page: int) -> tuple[Any, ...]:
    """Everything a check takes from `pods` reduced `per_page` to a page: the pods' summary, the
    nodes' rooms, the candidates the helper sent and the rules' hits."""
    reducer = _istio_reducer([r for r in RULES if r.match.log is not None])
    fold = podreducer._PodFold(
        rules=RULES,
        budget=MatchBudget(30.0),
        screen=SCREEN,
        node_ready=NODES,
        events={},
        log_rules=[r for r in RULES if r.match.log is not None],
        get_raw=lambda path, query: b"listener accept failure: Too many open files",
    )
    candidates = []
    for start in range(0, len(pods), per_page):
        data = reducer(pods[start : start + per_page])
        candidates.extend(
            (c.signals, c.logs, c.state) for c in podreducer._REDUCED_DECODER.decode(data).candidates
        )
        fold.add(data)
    hits = fold.finish()
    summary = (fold.unhealthy, fold.not_evictable, fold.empty_dir, fold.host_path, fold.bare, fold.proxies)
    return summary, fold.rooms, candidates, hits


@settings(max_examples=300, deadline=None)
@given(st.lists(_pool_pod, min_size=1, max_size=30))
def test_what_the_pods_helper_reuses_from_the_last_pod_is_what_it_would_have_read_of_the_pod(
    drawn: list[tuple[Any, ...]],
) -> None:
    """Within a page the helper reuses the last pod's owner, requests, sidecar versions, volumes
    and tolerations where the pod's structs are equal to its: the pods of a workload come one after
    another. A page of every pod tells what a page per pod (nothing to reuse) tells."""
    pods = [_pool_wire(i, d) for i, d in enumerate(drawn)]
    assert _reduced(pods, per_page=len(pods)) == _reduced(pods, per_page=1)


def test_a_pod_only_its_labels_let_a_rule_match_is_sent_though_the_labels_are_read_last() -> None:
    """The helper reads a pod's labels only where a rule could still match with them: a rule that
    needs a label and a kind still gets the StatefulSet's pods that have the label."""
    (legacy,) = parse_rules(
        """rules:
  - id: TEAM005
    title: legacy StatefulSet pods
    match: {kinds: [StatefulSet], labels: {team: legacy}}
    explanation: x
    remediation: y
    links: [https://example.com/e]
""",
        source="team.yaml",
    )
    screen = Screen([legacy])
    shape = schema.pod_schema(screen.label_keys, screen.annotation_keys)
    reducer = podreducer.PodReducer(
        screen=screen, shape=shape, rules=True, with_events=frozenset(), log_containers=frozenset()
    )
    pods = [
        msgspec.json.decode(
            msgspec.json.encode(
                {
                    "metadata": {
                        "namespace": "shop",
                        "name": f"db-{i}",
                        "labels": labels,
                        "ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": True}],
                    },
                    "spec": {"nodeName": "n-ok"},
                    "status": {"phase": "Running"},
                }
            ),
            type=shape.pod,
        )
        for i, labels in enumerate([{"team": "legacy"}, {"team": "other"}, {}])
    ]
    page = podreducer._REDUCED_DECODER.decode(reducer(pods))
    # The signal is a label key a rule names (its value is the rule's to test): db-2 has none.
    assert [(c.state.name, c.signals & rules.LABELLED) for c in page.candidates] == [
        ("db-0", rules.LABELLED),
        ("db-1", rules.LABELLED),
    ]


def test_tolerations_of_an_unexpected_shape_stop_the_check_where_a_rule_reads_them() -> None:
    """The pods' tolerations stay bytes until a rule needs them: a shape no API server sends still
    stops the check with the field named, as decoding the page would have."""
    assert SCREEN.used & rules.TOLERATES_ALL
    pod = wire(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"tolerations": "all"},
            "status": {"phase": "Running"},
        }
    )
    reducer = podreducer.PodReducer(
        screen=SCREEN, shape=SHAPE, rules=True, with_events=frozenset(), log_containers=frozenset()
    )
    with pytest.raises(ClusterError, match=r"spec\.tolerations is not what was expected"):
        reducer([pod])
    with pytest.raises(ClusterError, match=r"spec\.tolerations is not what was expected"):
        podreducer.pod_state(pod, "Pod ns/p", SHAPE, {})
