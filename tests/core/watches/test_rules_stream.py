"""The known-issue rules in the status model: matched over the unhealthy pods and Warning events the
fold remembers, one episode (and one thread post) per rule, workload and episode, across restarts.
The shipped rules file is the data."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.core.rules import read_rules
from bot.core.rules.known import view_of
from bot.core.watches.milestones import KNOWN_ISSUE, milestones
from bot.core.watches.model import WatchState
from bot.core.watches.summary import Summary
from tests.support.watch_objects import at, node, pod, spec, stamp, vault_pod

RULES = read_rules(Path(__file__).resolve().parents[3] / "templates" / "rules" / "known-issues.yaml")
BY_ID = {r.id: r for r in RULES}


def kube_proxy(name: str, *, waiting: str | None = "ImagePullBackOff") -> dict[str, Any]:
    raw = pod(name, "kube-system", daemonset="kube-proxy", ready=waiting is None, waiting=waiting)
    raw["status"]["containerStatuses"][0].update(
        name="kube-proxy", image="602401143452.dkr.ecr/kube-proxy:v9"
    )
    return raw


def multi_attach(name: str, pod_name: str, pod_uid: str, when: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "logging", "uid": f"uid-ev-{name}"},
        "type": "Warning",
        "reason": "FailedAttachVolume",
        "message": 'Multi-Attach error for volume "pvc-1" Volume is already exclusively attached to one node',
        "count": 1,
        "involvedObject": {"kind": "Pod", "namespace": "logging", "name": pod_name, "uid": pod_uid},
        "lastTimestamp": stamp(when),
    }


def rule_posts(before: Summary | None, after: Summary) -> list[str]:
    return [m.key for m in milestones(before, after, spec(), BY_ID) if m.kind == KNOWN_ISSUE]


def test_kube_proxy_in_image_pull_is_explained_once_per_workload_and_episode() -> None:
    state = WatchState(spec(), rules=RULES)
    state.sync("node", [node("n1")], at(0))
    state.sync("pod", [kube_proxy("kube-proxy-a")], at(0))
    first = state.summary(at(0))
    posts = milestones(None, first, spec(), BY_ID)
    [post] = [m for m in posts if m.kind == KNOWN_ISSUE]
    assert post.key == "rule:KI005:kube-system/DaemonSet/kube-proxy:1"
    assert "kube-proxy in ImagePullBackOff after the control-plane upgrade" in post.text
    assert "describe-addon-versions" in post.text  # the remediation
    assert "<https://github.com/eksctl-io/eksctl/issues/5972>" in post.text  # the evidence
    # A second pod of the same DaemonSet: the same finding, nothing new in the thread.
    state.apply("pod", "ADDED", kube_proxy("kube-proxy-b"), at(1))
    second = state.summary(at(1))
    assert rule_posts(first, second) == []
    assert [e.pods for e in second.rule_episodes] == [2]
    # Fixed, then back within 10 minutes: the same episode; back after longer: episode 2, posted.
    state.apply("pod", "MODIFIED", kube_proxy("kube-proxy-a", waiting=None), at(2))
    state.apply("pod", "MODIFIED", kube_proxy("kube-proxy-b", waiting=None), at(2))
    healed = state.summary(at(2))
    assert [e.open for e in healed.rule_episodes] == [False]
    state.apply("pod", "MODIFIED", kube_proxy("kube-proxy-a"), at(5))
    again = state.summary(at(5))
    assert rule_posts(healed, again) == []
    state.apply("pod", "MODIFIED", kube_proxy("kube-proxy-a", waiting=None), at(6))
    quiet = state.summary(at(6))
    state.apply("pod", "MODIFIED", kube_proxy("kube-proxy-a"), at(20))
    assert rule_posts(quiet, state.summary(at(20))) == ["rule:KI005:kube-system/DaemonSet/kube-proxy:2"]


def test_a_restarted_watch_seeded_from_its_summary_does_not_post_the_same_episode_again() -> None:
    state = WatchState(spec(), rules=RULES)
    state.sync("pod", [kube_proxy("kube-proxy-a")], at(0))
    published = Summary.from_json(state.summary(at(0)).to_json())  # what the database holds
    fresh = WatchState(spec(), previous=published, rules=RULES)
    fresh.sync("pod", [kube_proxy("kube-proxy-a")], at(3))
    assert rule_posts(published, fresh.summary(at(3))) == []
    # Gone while the bot was down: the episode is closed, and a later one is a new post.
    gone = WatchState(spec(), previous=published, rules=RULES)
    gone.sync("pod", [], at(3))
    closed = gone.summary(at(3))
    assert [(e.open, e.number) for e in closed.rule_episodes] == [(False, 1)]
    gone.apply("pod", "ADDED", kube_proxy("kube-proxy-c"), at(30))
    assert rule_posts(closed, gone.summary(at(30))) == ["rule:KI005:kube-system/DaemonSet/kube-proxy:2"]


def test_a_vault_agent_not_ready_is_a_known_issue_only_once_it_lasts() -> None:
    state = WatchState(spec(), rules=RULES)
    state.sync("pod", [vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False)], at(0))
    # Not Ready for a minute is a pod starting: not a known issue, and not unhealthy on the card yet.
    early = state.summary(at(1))
    assert early.rule_episodes == ()
    assert early.unhealthy == ()
    # Past the grace (2 minutes) it is unhealthy, "Not ready"; past 5 minutes a known issue.
    middle = state.summary(at(3))
    assert [(u.reason, u.pods, u.top[0].detail) for u in middle.unhealthy] == [
        ("Not ready", 1, "1/2 containers ready")
    ]
    assert middle.rule_episodes == ()
    late = state.summary(at(6))
    assert rule_posts(early, late) == ["rule:KI004:payments/Deployment/payments-worker:1"]
    assert late.rule_episodes[0].evidence == "1/2 containers ready (vault-agent is not)"
    # Ready again: forgotten (the fold keeps no record of a healthy pod).
    state.apply("pod", "MODIFIED", vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=True), at(7))
    assert state._pods == {}
    assert [e.open for e in state.summary(at(7)).rule_episodes] == [False]


def test_the_fold_keeps_only_the_labels_and_annotations_the_rules_name() -> None:
    state = WatchState(spec(), rules=RULES)
    state.sync("pod", [vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False)], at(0))
    [record] = state._pods.values()
    assert record.view is not None
    view = view_of(record.view, record.namespace, "Deployment payments/payments-worker")
    assert dict(view.annotations) == {"vault.hashicorp.com/agent-inject": "true"}
    assert dict(view.labels) == {}
    assert [(c.name, c.ready) for c in view.containers] == [("app", True), ("vault-agent", False)]
    # Without rules, nothing is kept for them.
    bare = WatchState(spec())
    bare.sync("pod", [kube_proxy("kube-proxy-a")], at(0))
    assert all(p.view is None for p in bare._pods.values())


def test_a_multi_attach_event_about_a_pod_still_creating_is_its_workloads_finding() -> None:
    state = WatchState(spec(), rules=RULES)
    es = pod("es-1", "logging", statefulset="es", phase="Pending", ready=False, waiting="ContainerCreating")
    state.sync("pod", [es], at(0))
    state.sync("event", [], at(0))
    state.apply("event", "ADDED", multi_attach("es-1.1", "es-1", es["metadata"]["uid"], at(1)), at(1))
    state.apply("event", "MODIFIED", multi_attach("es-1.1", "es-1", es["metadata"]["uid"], at(2)), at(2))
    summary = state.summary(at(2))
    assert rule_posts(None, summary) == ["rule:KI007:logging/StatefulSet/es:1"]
    # An unrelated Warning is not kept for the rules at all.
    state.apply("event", "ADDED", _warning_about("es-1", "BackOff"), at(2))
    assert len(state._issues.events) == 1
    # Five quiet minutes after the last event the episode ends.
    assert [e.open for e in state.summary(at(8)).rule_episodes] == [False]


def _warning_about(name: str, reason: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.{reason}", "namespace": "logging", "uid": f"uid-ev-{name}-{reason}"},
        "type": "Warning",
        "reason": reason,
        "message": "Back-off restarting failed container",
        "involvedObject": {"kind": "Pod", "namespace": "logging", "name": name},
        "lastTimestamp": stamp(at(2)),
    }


def test_a_log_rule_asks_for_one_tail_per_workload_and_matches_it_once_read() -> None:
    state = WatchState(spec(), rules=RULES)
    pods = []
    for suffix in ("a", "b"):
        raw = pod(
            f"web-5d8f7c9b6-{suffix}", deployment="web", ready=False, waiting="CrashLoopBackOff", restarts=4
        )
        raw["status"]["containerStatuses"][0]["name"] = "istio-proxy"
        pods.append(raw)
    state.sync("pod", pods, at(0))
    before = state.summary(at(0))
    [want] = state.logs_wanted()  # one pod's log for the workload, not one per pod
    assert (want.workload, want.container, want.lines) == ("Deployment shop/web", "istio-proxy", 200)
    state.add_log_tail(want.workload, want.container, "ok\nlistener accept failure: Too many open files\n")
    assert state.logs_wanted() == []
    after = state.summary(at(0, 2))
    assert rule_posts(before, after) == ["rule:KI012:shop/Deployment/web:1"]
    assert "Too many open files" in after.rule_episodes[0].evidence
    assert state.logs_wanted() == []  # read once while the workload stays a candidate


def test_rule_episodes_survive_the_summary_json() -> None:
    state = WatchState(spec(), rules=RULES)
    state.sync("pod", [kube_proxy("kube-proxy-a")], at(0))
    summary = state.summary(at(0))
    assert Summary.from_json(summary.to_json()) == summary
    assert summary.rule_episodes[0].since == at(0)
    assert summary.rule_episodes[0].ended is None
    assert timedelta(0) == summary.at - summary.rule_episodes[0].since


def test_a_node_group_watch_explains_only_what_is_in_its_view() -> None:
    state = WatchState(spec(nodegroups=("ng-a",)), rules=RULES)
    inside = pod("es-0", "logging", statefulset="es", node_name="a1")
    outside = pod("db-0", "logging", statefulset="db", node_name="b1")
    state.sync("node", [node("a1"), node("b1", "ng-b")], at(0))
    state.sync("pod", [inside, outside], at(0))
    state.sync("event", [], at(0))
    state.apply("event", "ADDED", multi_attach("db-0.1", "db-0", outside["metadata"]["uid"], at(1)), at(1))
    state.apply("event", "ADDED", multi_attach("es-0.1", "es-0", inside["metadata"]["uid"], at(1)), at(1))
    assert [e.workload for e in state.summary(at(1)).rule_episodes] == ["logging/Pod/es-0"]


def test_a_watchs_known_issue_post_fills_its_remedy_with_the_pods_container_and_target() -> None:
    """The drain's and `check`'s remedies named the pods; the watch's said `<pod>`, `<container>`
    and `<version>` though it had matched them: now its post carries the remedy filled from the
    episode's first match, and the target's minor for `{version}`."""
    from tests.support.watch_objects import target_spec

    state = WatchState(target_spec(version="v1.25.16"), rules=RULES)
    state.sync("node", [node("n1")], at(0))
    state.sync(
        "pod",
        [vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False), kube_proxy("kube-proxy-a")],
        at(0),
    )
    late = state.summary(at(6))
    texts = {
        m.key.split(":")[1]: m.text for m in milestones(None, late, spec(), BY_ID) if m.kind == KNOWN_ISSUE
    }
    assert "kubectl -n payments logs payments-worker-5d8f7c9b6-a -c vault-agent --tail=50" in texts["KI004"]
    assert "--kubernetes-version 1.25)" in texts["KI005"]
    assert "set image daemonset/kube-proxy kube-proxy=REGISTRY" in texts["KI005"]
    assert "<pod>" not in texts["KI004"]
    assert "<container>" not in texts["KI005"]
    restored = Summary.from_json(late.to_json())  # the remedy is kept with the episode
    assert restored.rule_episodes == late.rule_episodes
