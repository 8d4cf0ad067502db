"""The verdict: target held for its settle time, stop rules (kube-system first), time limits."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.core.rules import read_rules
from bot.core.watches.model import WatchState
from bot.core.watches.spec import StopRules, Target
from bot.core.watches.summary import Summary
from bot.core.watches.verdict import (
    RUNNING,
    STOPPED,
    TARGET_OPEN,
    TARGET_REACHED,
    TIMED_OUT,
    Verdict,
    verdict,
)
from tests.support.watch_objects import at, crashing, node, pod, spec, stamp, target_spec, vault_pod


def judge(state: WatchState, minutes: float) -> Verdict:
    return verdict(state.summary(at(minutes)), state.spec, at(minutes))


def upgraded(settle: timedelta = timedelta(minutes=5), **changes: object) -> WatchState:
    state = WatchState(target_spec(settle=settle, **changes))
    state.sync("node", [node("n1", kubelet="v1.30.2"), node("n2", kubelet="v1.30.2")], at(0))
    state.sync("pod", [], at(0))
    return state


def test_the_target_must_hold_for_its_settle_time() -> None:
    state = upgraded()
    assert judge(state, 4).state == RUNNING
    assert "settling" in judge(state, 4).reason
    reached = judge(state, 5)
    assert reached.state == TARGET_REACHED
    assert reached.reason == "ng-a: 2 nodes Ready on v1.30.2, no old node left; no new unhealthy pod for 5m"


def test_a_new_unhealthy_pod_restarts_the_settle_time() -> None:
    state = upgraded()
    state.apply("pod", "ADDED", pod("e", ready=False, terminated="Error"), at(3))
    state.apply("pod", "DELETED", pod("e", ready=False, terminated="Error"), at(3, 30))
    assert judge(state, 7).state == RUNNING
    assert judge(state, 8).state == TARGET_REACHED


def test_a_watch_that_cannot_read_the_cluster_never_reaches_its_target_and_settles_again_after() -> None:
    # Its streams failing (a 503, a dropped watch), the watch once counted the blind minutes as
    # settle time and declared "target reached" while coredns crash-looped unseen.
    state = upgraded()
    state.stream_failed("pod", "cluster prod answered HTTP 503", at(1))
    state.stream_failed("node", "cluster prod answered HTTP 503", at(2))
    blind = judge(state, 30)
    assert blind.state == RUNNING
    assert blind.reason == (
        "the cluster could not be read since 12:01 UTC (node: cluster prod answered HTTP 503; pod: cluster "
        "prod answered HTTP 503): what is shown is from before, and the target is not confirmed until it "
        "can; 2/2 nodes Ready on v1.30.2"
    )
    state.stream_back("node", at(31))
    assert judge(state, 40).state == RUNNING  # the pods' stream is still failing
    state.stream_back("pod", at(41))
    # Settle time counts from when the cluster could be read again, not across the blind stretch.
    assert judge(state, 45).state == RUNNING
    assert "settling (1m to go)" in judge(state, 45).reason
    assert judge(state, 46).state == TARGET_REACHED


def test_a_blind_watch_that_runs_out_of_time_says_it_could_not_read_the_cluster() -> None:
    state = upgraded(ends_at=at(30))
    state.stream_failed("pod", "the bot is not allowed to list pods (HTTP 403)", at(2))
    ended = judge(state, 31)
    assert ended.state == TIMED_OUT
    assert ended.reason.startswith(
        "time limit reached after 30m; the cluster could not be read since 12:02 UTC (pod: the bot is not "
        "allowed to list pods (HTTP 403))"
    )


def test_a_pod_stuck_pending_counts_as_new_unhealthy_once_stuck() -> None:
    state = upgraded(pending_stuck_after=timedelta(minutes=2))
    state.apply(
        "pod", "ADDED", pod("p", phase="Pending", ready=False, unschedulable=True, created=at(1)), at(1)
    )
    assert judge(state, 5).state == RUNNING  # stuck since 3m: settle runs to 8m
    # Settled, but the pod is still stuck: not all clear (it once said "target reached").
    settled = judge(state, 8)
    assert settled.state == TARGET_OPEN
    assert settled.reason.startswith("1 unhealthy pod (shop/p (Unschedulable)); ng-a: 2 nodes Ready")
    state.apply(
        "pod", "DELETED", pod("p", phase="Pending", ready=False, unschedulable=True, created=at(1)), at(9)
    )
    assert judge(state, 9).state == TARGET_REACHED


def test_old_nodes_left_or_a_missing_group_keep_it_running() -> None:
    state = WatchState(target_spec(groups=("ng-a", "ng-b")))
    state.sync("node", [node("n1", kubelet="v1.30.2"), node("o1")], at(0))
    result = judge(state, 30)
    assert result.state == RUNNING
    assert result.reason == "1/2 nodes Ready on v1.30.2; 1 old node left; no node yet in ng-b"


def test_without_a_version_the_target_is_every_node_ready() -> None:
    state = WatchState(spec(target=Target(settle=timedelta(0))))
    state.sync("node", [node("a", ready=False)], at(0))
    assert judge(state, 1).state == RUNNING
    state.apply("node", "MODIFIED", node("a"), at(2))
    assert judge(state, 2).state == TARGET_REACHED


def test_a_crash_loop_longer_than_the_limit_stops_it_kube_system_named_first() -> None:
    state = upgraded(stop=StopRules(crashloop_after=timedelta(minutes=5)))
    state.apply("pod", "ADDED", crashing("a", "checkout", deployment="payments-api"), at(1))
    state.apply("pod", "ADDED", crashing("d", "kube-system", deployment="coredns"), at(2))
    assert judge(state, 6).state == RUNNING  # 5m exactly is not longer than 5m
    early = judge(
        state,
        6,
    )
    assert early.code == ""
    stopped = judge(state, 7.5)
    assert stopped == Verdict(
        state=STOPPED,
        reason="kube-system/coredns in CrashLoopBackOff for 5m30s (limit 5m); 1 more workload over the limit",
        code="crashloop",
    )


def test_an_image_pull_loop_stops_it_too() -> None:
    state = upgraded(stop=StopRules(imagepull_after=timedelta(minutes=2)))
    state.apply("pod", "ADDED", pod("a", ready=False, waiting="ErrImagePull", deployment="api"), at(1))
    state.apply("pod", "MODIFIED", pod("a", ready=False, waiting="ImagePullBackOff", deployment="api"), at(2))
    result = judge(state, 3.5)
    assert (result.state, result.code) == (STOPPED, "imagepull")
    assert result.reason.startswith("shop/api in ImagePullBackOff/ErrImagePull for 2m30s")


def test_a_stop_rule_wins_over_a_reached_target() -> None:
    state = upgraded(settle=timedelta(0), stop=StopRules(crashloop_after=timedelta(minutes=1)))
    state.apply("pod", "ADDED", crashing("a", deployment="api"), at(0))
    assert judge(state, 2).state == STOPPED


def test_a_plain_watch_is_not_stopped_by_crash_loops_only_by_its_time_limit() -> None:
    state = WatchState(spec(ends_at=at(60)))
    state.sync("pod", [crashing("a", deployment="api")], at(0))
    assert judge(state, 59).state == RUNNING
    ended = judge(state, 60)
    assert (ended.state, ended.code, ended.reason) == (TIMED_OUT, "timeout", "time limit reached after 60m")


def test_the_stop_timeout_counts_from_the_start() -> None:
    state = WatchState(target_spec(stop=StopRules(timeout=timedelta(minutes=30))))
    state.sync("node", [node("o1")], at(0))
    assert judge(state, 29).state == RUNNING
    assert judge(state, 30).state == TIMED_OUT


def test_pods_already_unhealthy_when_the_watch_starts_are_not_new() -> None:
    state = WatchState(target_spec(settle=timedelta(minutes=5)))
    state.sync("node", [node("n1", kubelet="v1.30.2")], at(0))
    state.sync("pod", [pod("e", ready=False, terminated="Error")], at(0))
    assert state.summary(at(1)).last_unhealthy_at is None
    # Not new, so the settle time runs; but broken now, so not all clear: people look.
    settled = judge(state, 5)
    assert settled.state == TARGET_OPEN
    assert settled.reason == (
        "1 unhealthy pod (shop/e (Error)); ng-a: 1 node Ready on v1.30.2, no old node left; no new "
        "unhealthy pod for 5m"
    )
    state.sync(
        "pod", [pod("e", ready=False, terminated="Error"), pod("f", ready=False, terminated="Error")], at(6)
    )
    assert state.summary(at(6)).last_unhealthy_at == at(6)  # found by a re-list: new


def test_a_running_pod_not_ready_past_its_grace_is_unhealthy_and_restarts_the_settle_time() -> None:
    state = upgraded()
    state.apply("pod", "ADDED", pod("w", deployment="worker", ready=False), at(1))
    # Starting (probes, a sidecar) for less than NOT_READY_GRACE: not unhealthy yet.
    assert state.summary(at(2)).unhealthy == ()
    summary = state.summary(at(3, 30))
    [group] = summary.unhealthy
    assert (group.reason, group.pods, group.top[0].detail) == ("Not ready", 1, "0/1 containers ready")
    # It became unhealthy at 3m (1m + the 2m grace): the target settles five minutes after that,
    # and while it is still not ready the target is not all clear.
    assert judge(state, 7).state == RUNNING
    assert judge(state, 8).state == TARGET_OPEN
    state.apply("pod", "MODIFIED", pod("w", deployment="worker"), at(8, 30))
    assert (
        judge(
            state,
            8,
        ).state
        == TARGET_REACHED
    )


def test_the_target_with_a_known_issue_still_open_is_not_all_clear() -> None:
    rules = read_rules(Path(__file__).resolve().parents[3] / "templates" / "rules" / "known-issues.yaml")
    state = WatchState(target_spec(), rules=rules)
    state.sync("node", [node("n1", kubelet="v1.30.2"), node("n2", kubelet="v1.30.2")], at(0))
    state.sync("pod", [vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=False)], at(0))
    assert state.summary(at(6)).rule_episodes[0].open  # KI004, posted in the thread
    reached = judge(state, 10)
    assert reached.state == TARGET_OPEN
    assert reached.code == "open_findings"
    assert reached.final
    assert reached.reason.startswith(
        "1 open finding: KI004 payments/payments-worker; 1 unhealthy pod (payments/payments-worker ("
    )
    assert reached.reason.endswith(
        "); ng-a: 2 nodes Ready on v1.30.2, no old node left; no new unhealthy pod for 5m"
    )
    # The finding closes (the sidecar is Ready): the target is reached, all clear.
    state.apply("pod", "MODIFIED", vault_pod("payments-worker-5d8f7c9b6-a", agent_ready=True), at(11))
    assert judge(state, 17).state == TARGET_REACHED


def test_a_replaced_groups_nodes_count_as_old_nodes_of_its_replacement() -> None:
    # `others` recreated as `others-1-25` (a plan's replaces:): the watch scoped to the new group
    # sees the old group's nodes as its old nodes, and the target waits until they are gone.
    replaced = Target(
        nodegroups=("others-1-25",),
        kubelet_version="v1.30.2",
        settle=timedelta(minutes=5),
        replaces=(("others", "others-1-25"),),
    )
    state = WatchState(spec(target=replaced, nodegroups=("others-1-25",)))
    state.sync("node", [node("n1", "others-1-25", kubelet="v1.30.2"), node("o1", "others")], at(0))
    waiting = judge(state, 30)
    assert waiting.state == RUNNING
    assert waiting.reason == "1/2 nodes Ready on v1.30.2; 1 old node left"
    state.apply("node", "DELETED", node("o1", "others"), at(31))
    assert judge(state, 36).state == TARGET_REACHED
    # Without the mapping the old group is out of the watch's scope: it would not be waited for.
    plain = WatchState(target_spec(groups=("others-1-25",), nodegroups=("others-1-25",)))
    plain.sync("node", [node("n1", "others-1-25", kubelet="v1.30.2"), node("o1", "others")], at(0))
    assert judge(plain, 30).state == TARGET_REACHED


def test_an_end_reason_reaches_people_in_words_not_as_the_states_name() -> None:
    from bot.core.watches.verdict import said

    assert said("target_reached_with_open_findings: 1 open finding: KI004 payments/worker") == (
        "target reached with open findings: 1 open finding: KI004 payments/worker"
    )
    assert said("timed_out: time limit reached after 2h") == "timed out: time limit reached after 2h"
    assert said("unwatched by <@U0A>") == "unwatched by <@U0A>"


def _flapping(name: str, *, ready: bool, went: float, started: float = 0) -> dict[str, Any]:
    """A Running pod Initialized at `started` whose Ready condition last changed at `went`."""
    p = pod(name, deployment="web", ready=ready)
    p["status"]["conditions"] = [
        {"type": "Initialized", "status": "True", "lastTransitionTime": stamp(at(started))},
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp(at(went))},
    ]
    return p


def test_a_pod_whose_readiness_flaps_is_an_open_finding_though_no_spell_lasts_its_grace() -> None:
    """Each spell not Ready is shorter than the 2-minute grace, so no pod is ever counted
    unhealthy; three spells within ten minutes make it flapping: named on the card and as an open
    finding of the target, until its spells are older than the window. A relist of the same spell
    does not count it twice; a pod merely starting (not Ready since it started) is no spell."""
    state = upgraded()
    state.apply("pod", "ADDED", _flapping("w", ready=True, went=0.5), at(1))
    for minute in (2, 3):
        state.apply("pod", "MODIFIED", _flapping("w", ready=False, went=minute), at(minute))
        state.sync("pod", [_flapping("w", ready=False, went=minute)], at(minute, 10))  # relisted
        state.apply("pod", "MODIFIED", _flapping("w", ready=True, went=minute + 0.5), at(minute, 30))
    # A pod starting up: not Ready since about when it was Initialized, then Ready: not a spell.
    state.apply("pod", "ADDED", _flapping("starting", ready=False, went=3, started=3), at(3))
    state.apply("pod", "MODIFIED", _flapping("starting", ready=True, went=3.5, started=3), at(3, 30))
    assert state.summary(at(3, 40)).flapping_pods == 0  # two spells
    state.apply("pod", "MODIFIED", _flapping("w", ready=False, went=4), at(4))
    state.apply("pod", "MODIFIED", _flapping("w", ready=True, went=4.5), at(4, 30))
    summary = state.summary(at(6))
    assert summary.unhealthy == ()
    assert summary.flapping_pods == 1
    [flap] = summary.flapping
    assert (flap.namespace, flap.name, flap.pods, flap.spells) == ("shop", "web", 1, 3)
    held = judge(state, 6)
    assert held.state == TARGET_OPEN
    assert held.reason.startswith("1 pod flapping readiness (shop/web ×1: 3 times not Ready in 10m); ng-a:")
    assert judge(state, 14).state == TARGET_REACHED  # the spells are older than ten minutes


def test_a_restarted_watch_goes_on_counting_a_pods_spells_not_ready() -> None:
    """The spells live in the persisted summary: a watch restarted after a pod's second spell
    calls it flapping at its third (not after three more), and a relist of the spell it had
    already seen does not count it again."""
    state = upgraded()
    state.apply("pod", "ADDED", _flapping("w", ready=True, went=0.5), at(1))
    for minute in (2, 3):
        state.apply("pod", "MODIFIED", _flapping("w", ready=False, went=minute), at(minute))
        state.apply("pod", "MODIFIED", _flapping("w", ready=True, went=minute + 0.5), at(minute, 30))
    persisted = state.summary(at(3, 40))
    assert persisted.flapping_pods == 0
    assert [(f.pod, len(f.seen)) for f in persisted.flap_spells] == [("uid-shop-w", 2)]

    again = WatchState(state.spec, previous=Summary.from_json(persisted.to_json()))
    again.sync("node", [node("n1", kubelet="v1.30.2"), node("n2", kubelet="v1.30.2")], at(4))
    again.sync("pod", [_flapping("w", ready=True, went=3.5)], at(4))  # the relist after the restart
    assert again.summary(at(4, 10)).flapping_pods == 0
    again.apply("pod", "MODIFIED", _flapping("w", ready=False, went=5), at(5))
    again.apply("pod", "MODIFIED", _flapping("w", ready=True, went=5.5), at(5, 30))
    summary = again.summary(at(6))
    assert summary.flapping_pods == 1
    [flap] = summary.flapping
    assert (flap.namespace, flap.name, flap.pods, flap.spells) == ("shop", "web", 1, 3)
    assert judge(again, 10).state == TARGET_OPEN  # settled since the restart, but flapping
