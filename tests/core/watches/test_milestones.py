"""Milestones come from comparing summaries: each transition once, keyed on names, uids, episodes."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.watches.milestones import Milestone, milestones
from bot.core.watches.model import WatchState
from bot.core.watches.spec import StopRules, WatchSpec
from bot.core.watches.summary import Summary
from tests.support.watch_objects import at, crashing, deployment, node, pod, spec, target_spec


def keys(found: list[Milestone]) -> list[str]:
    return [m.key for m in found]


def published(
    state: WatchState, spec_: WatchSpec, before: Summary | None, now_min: float
) -> tuple[Summary, list[str]]:
    """What a driver does at each publish: summary, milestones since the last one, persist."""
    after = state.summary(at(now_min))
    return Summary.from_json(after.to_json()), keys(milestones(before, after, spec_))


def test_the_first_summary_is_a_baseline_except_for_crash_loops() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("node", [node("n1"), node("n2", cordoned=True)], at(0))
    state.sync("pod", [crashing("a", deployment="api")], at(0))
    _, found = published(state, sp, None, 0)
    assert found == ["crashloop:shop/Deployment/api:1"]


def test_a_node_replacement_gives_joined_cordoned_removed_once_each() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("node", [node("old1")], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("node", "ADDED", node("new1", kubelet="v1.30.2", ready=False), at(1))
    last, found = published(state, sp, last, 1)
    assert found == []
    state.apply("node", "MODIFIED", node("new1", kubelet="v1.30.2"), at(2))
    state.apply("node", "MODIFIED", node("old1", cordoned=True), at(2))
    last, found = published(state, sp, last, 2)
    assert found == ["node-ready:new1:uid-new1", "node-cordoned:old1:uid-old1"]
    last, found = published(state, sp, last, 3)
    assert found == []
    # A NotReady blip and back is not a second "joined".
    state.apply("node", "MODIFIED", node("new1", kubelet="v1.30.2", ready=False), at(4))
    last, _ = published(state, sp, last, 4)
    state.apply("node", "MODIFIED", node("new1", kubelet="v1.30.2"), at(5))
    last, found = published(state, sp, last, 5)
    assert found == []
    state.apply("node", "DELETED", node("old1", cordoned=True), at(6))
    last, found = published(state, sp, last, 6)
    assert found == ["node-removed:old1:uid-old1"]


def test_a_crashloop_milestone_comes_once_per_workload_per_episode() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("pod", [], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("pod", "ADDED", crashing("a", deployment="api"), at(1))
    state.apply("pod", "ADDED", crashing("b", deployment="api"), at(1))
    last, found = published(state, sp, last, 1)
    assert found == ["crashloop:shop/Deployment/api:1"]
    for minute in (2, 3):  # restarts flip the pods between states: same episode
        state.apply(
            "pod", "MODIFIED", pod("a", deployment="api", ready=False, restarts=minute + 3), at(minute)
        )
        state.apply("pod", "MODIFIED", crashing("a", deployment="api", restarts=minute + 4), at(minute))
        last, found = published(state, sp, last, minute)
        assert found == []
    state.apply("pod", "MODIFIED", pod("a", deployment="api", restarts=9), at(4))
    state.apply("pod", "DELETED", crashing("b", deployment="api"), at(4))
    last, found = published(state, sp, last, 4)
    assert found == []
    state.apply("pod", "MODIFIED", pod("a", deployment="api", restarts=10, ready=False), at(5))
    state.apply("pod", "MODIFIED", crashing("a", deployment="api", restarts=10), at(6))
    last, found = published(state, sp, last, 6)
    assert found == []  # back within ten minutes: the same episode
    state.apply("pod", "MODIFIED", pod("a", deployment="api", restarts=11), at(7))
    last, found = published(state, sp, last, 7)
    state.apply("pod", "MODIFIED", crashing("a", deployment="api", restarts=12), at(17))
    last, found = published(state, sp, last, 17)
    assert found == ["crashloop:shop/Deployment/api:2"]


def test_a_crash_loop_that_came_and_went_between_two_publishes_is_a_post_once() -> None:
    """The CI flake's interleaving: a 60 s step of the sim is a burst of events (crash, restart,
    Ready, crash again); a loaded driver drained part of it and published the pod Ready again, its
    episode closed, before the next crash reopened the same episode (within `EPISODE_REOPEN`)."""
    sp = spec()
    state = WatchState(sp)
    state.sync("pod", [pod("ca", "kube-system", deployment="cluster-autoscaler")], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply(
        "pod", "MODIFIED", crashing("ca", "kube-system", deployment="cluster-autoscaler", restarts=1), at(1)
    )
    state.apply(
        "pod",
        "MODIFIED",
        pod("ca", "kube-system", deployment="cluster-autoscaler", ready=False, restarts=1),
        at(1, 10),
    )
    state.apply(
        "pod", "MODIFIED", pod("ca", "kube-system", deployment="cluster-autoscaler", restarts=1), at(1, 12)
    )
    after = state.summary(at(1, 12))
    [post] = milestones(last, after, sp)
    assert post.key == "crashloop:kube-system/Deployment/cluster-autoscaler:1"
    assert post.text == (
        ":rotating_light: Deployment `kube-system/cluster-autoscaler` entered CrashLoopBackOff:"
        " no pod in it right now"
    )
    last = Summary.from_json(after.to_json())
    # The next crash, seconds later: the same episode, already said.
    state.apply(
        "pod",
        "MODIFIED",
        crashing("ca", "kube-system", deployment="cluster-autoscaler", restarts=2),
        at(1, 30),
    )
    last, found = published(state, sp, last, 2)
    assert found == []
    assert [(e.number, e.open) for e in last.episodes] == [(1, True)]


def test_kube_system_crash_loops_come_first() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync(
        "pod", [crashing("a", deployment="api"), crashing("c", "kube-system", deployment="coredns")], at(0)
    )
    _, found = published(state, sp, None, 0)
    assert found == ["crashloop:kube-system/Deployment/coredns:1", "crashloop:shop/Deployment/api:1"]


def test_a_rollout_complete_milestone_once_per_generation() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("deployment", [deployment("api")], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("deployment", "MODIFIED", deployment("api", generation=2, updated=1, total=4), at(1))
    last, found = published(state, sp, last, 1)
    assert found == []
    state.apply("deployment", "MODIFIED", deployment("api", generation=2), at(2))
    last, found = published(state, sp, last, 2)
    assert found == ["rollout-complete:shop/Deployment/api:2"]
    state.apply("deployment", "MODIFIED", deployment("api", generation=2, available=1), at(3))
    last, _ = published(state, sp, last, 3)
    state.apply("deployment", "MODIFIED", deployment("api", generation=2), at(4))
    last, found = published(state, sp, last, 4)
    assert found == []


def test_target_reached_once_after_settling() -> None:
    sp = target_spec(settle=timedelta(minutes=2))
    state = WatchState(sp)
    state.sync("node", [node("old")], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("node", "ADDED", node("new", kubelet="v1.30.2"), at(1))
    state.apply("node", "DELETED", node("old"), at(1))
    last, found = published(state, sp, last, 2)
    assert found == ["node-ready:new:uid-new", "node-removed:old:uid-old"]
    last, found = published(state, sp, last, 3)
    assert found == ["target-reached"]
    last, found = published(state, sp, last, 4)
    assert found == []


def test_stopped_once_with_its_reason_code() -> None:
    sp = target_spec(stop=StopRules(crashloop_after=timedelta(minutes=3)))
    state = WatchState(sp)
    state.sync("node", [node("old")], at(0))
    state.sync("pod", [], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("pod", "ADDED", crashing("a", deployment="api"), at(1))
    last, found = published(state, sp, last, 1)
    assert found == ["crashloop:shop/Deployment/api:1"]
    last, found = published(state, sp, last, 4)
    assert found == []  # 3m exactly is not longer than 3m
    last, found = published(state, sp, last, 4.5)
    assert found == ["stopped:crashloop"]
    last, found = published(state, sp, last, 5)
    assert found == []


def test_node_and_verdict_milestones_say_what_happened_in_their_words() -> None:
    sp = target_spec(settle=timedelta(minutes=2))
    state = WatchState(sp)
    state.sync("node", [node("old")], at(0))
    last = state.summary(at(0))
    state.apply("node", "ADDED", node("new", kubelet="v1.30.2"), at(1))
    state.apply("node", "MODIFIED", node("old", cordoned=True), at(1))
    after = state.summary(at(1))
    assert [m.text for m in milestones(last, after, sp)] == [
        ":large_green_circle: Node `new` joined and is Ready (ng-a, kubelet v1.30.2)",
        ":construction: Node `old` cordoned (ng-a, kubelet v1.29.4)",
    ]
    state.apply("node", "DELETED", node("old", cordoned=True), at(2))
    last, after = after, state.summary(at(2))
    assert [m.text for m in milestones(last, after, sp)] == [":wave: Node `old` drained and removed (ng-a)"]
    last, after = after, state.summary(at(4))
    (reached,) = milestones(last, after, sp)
    assert reached.text.startswith(":tada: Target reached — ")


def test_milestone_text_escapes_cluster_names_for_slack() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("node", [], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("node", "ADDED", node("n<1>&"), at(1))
    found = milestones(last, state.summary(at(1)), sp)
    assert "`n&lt;1&gt;&amp;`" in found[0].text


def test_after_a_restart_exactly_the_missed_milestones_come_out() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("node", [node("old1"), node("old2")], at(0))
    state.sync("pod", [crashing("a", deployment="api"), crashing("w", deployment="web")], at(0))
    state.sync("deployment", [deployment("api", generation=2, updated=1, total=4)], at(0))
    persisted = state.summary(at(1)).to_json()  # the last published summary, then kill -9
    first = keys(milestones(None, Summary.from_json(persisted), sp))
    assert first == ["crashloop:shop/Deployment/api:1", "crashloop:shop/Deployment/web:1"]

    # While the bot was down: new1 joined, old1 was removed, old2 cordoned, api's pods recovered,
    # cart started crash-looping, web kept crashing (same episode), api's rollout completed.
    before = Summary.from_json(persisted)
    restarted = WatchState(sp, previous=before)
    restarted.sync("node", [node("old2", cordoned=True), node("new1", kubelet="v1.30.2")], at(9))
    restarted.sync("deployment", [deployment("api", generation=2)], at(9))
    restarted.sync(
        "pod",
        [pod("a", deployment="api"), crashing("c", deployment="cart"), crashing("w", deployment="web")],
        at(9),
    )
    after = restarted.summary(at(9))
    found = keys(milestones(before, after, sp))
    assert found == [
        "node-ready:new1:uid-new1",
        "node-cordoned:old2:uid-old2",
        "node-removed:old1:uid-old1",
        "crashloop:shop/Deployment/cart:1",
        "rollout-complete:shop/Deployment/api:2",
    ]
    web = next(e for e in after.episodes if e.workload == "shop/Deployment/web")
    assert (web.number, web.since) == (1, at(0))  # the episode goes on, with its start time
    # And from then on nothing repeats, across another round trip.
    again = Summary.from_json(after.to_json())
    assert milestones(again, restarted.summary(at(10)), sp) == []


def test_after_a_restart_an_episode_that_ended_meanwhile_is_closed_and_the_next_is_numbered_on() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("pod", [crashing("a", deployment="api")], at(0))
    before = Summary.from_json(state.summary(at(1)).to_json())
    restarted = WatchState(sp, previous=before)
    restarted.sync("pod", [pod("a", deployment="api")], at(5))
    after = restarted.summary(at(5))
    assert [(e.number, e.open) for e in after.episodes] == [(1, False)]
    assert milestones(before, after, sp) == []
    restarted.apply("pod", "MODIFIED", crashing("a", deployment="api"), at(16))
    assert keys(milestones(after, restarted.summary(at(16)), sp)) == ["crashloop:shop/Deployment/api:2"]


# ----- a property: whatever happens and whenever the driver publishes or restarts, no key repeats --

_pod_states = st.sampled_from(["ok", "crash", "running-after-crash", "pull"])
_step = st.one_of(
    st.tuples(st.just("pod"), st.sampled_from(["a", "b", "c"]), st.sampled_from(["api", "web"]), _pod_states),
    st.tuples(
        st.just("node"),
        st.sampled_from(["n1", "n2", "n3"]),
        st.sampled_from(["add", "ready", "cordon", "delete"]),
        st.just(""),
    ),
    st.tuples(st.just("publish"), st.just(""), st.just(""), st.just("")),
    st.tuples(st.just("restart"), st.just(""), st.just(""), st.just("")),
)


def _pod_for(name: str, workload: str, how: str) -> dict[str, object]:
    if how == "crash":
        return crashing(name, deployment=workload)
    if how == "running-after-crash":
        return pod(name, deployment=workload, ready=False, restarts=3)
    if how == "pull":
        return pod(name, deployment=workload, ready=False, waiting="ImagePullBackOff")
    return pod(name, deployment=workload)


@settings(max_examples=200, deadline=None)
@given(st.lists(_step, max_size=60))
def test_no_milestone_key_is_ever_repeated(steps: list[tuple[str, str, str, str]]) -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("node", [], at(0))
    state.sync("pod", [], at(0))
    published_json: str | None = None
    pods: dict[str, dict[str, object]] = {}
    nodes: dict[str, dict[str, object]] = {}
    generation: dict[str, int] = {}
    seen: list[str] = []
    for i, (what, name, arg, how) in enumerate(steps):
        now = at(0, i + 1)
        if what == "pod":
            raw = _pod_for(name, arg, how)
            # A pod keeps its workload for life: a different workload means a new pod (new uid).
            old = pods.get(name)
            if old is not None and old["metadata"]["ownerReferences"] != raw["metadata"]["ownerReferences"]:  # type: ignore[index]
                state.apply("pod", "DELETED", old, now)
                old = None
            state.apply("pod", "MODIFIED" if old is not None else "ADDED", raw, now)
            pods[name] = raw
        elif what == "node":
            if arg == "add" and name not in nodes:
                generation[name] = generation.get(name, 0) + 1
                nodes[name] = node(name, ready=False, uid=f"{name}-{generation[name]}")
                state.apply("node", "ADDED", nodes[name], now)
            elif name in nodes and arg in ("ready", "cordon"):
                n = nodes[name]
                nodes[name] = node(
                    name,
                    ready=True if arg == "ready" else n["status"]["conditions"][1]["status"] == "True",  # type: ignore[index]
                    cordoned=arg == "cordon" or bool(n["spec"]),
                    uid=n["metadata"]["uid"],  # type: ignore[index]
                )
                state.apply("node", "MODIFIED", nodes[name], now)
            elif name in nodes and arg == "delete":
                state.apply("node", "DELETED", nodes.pop(name), now)
        elif what == "publish":
            before = Summary.from_json(published_json) if published_json else None
            after = state.summary(now)
            seen.extend(m.key for m in milestones(before, after, sp))
            published_json = after.to_json()
            # Whatever came and went between two publishes: each episode published was said.
            said = {f"{e.kind}:{e.workload}:{e.number}" for e in after.episodes} - set(seen)
            assert not said, said
        elif what == "restart" and published_json is not None:
            state = WatchState(sp, previous=Summary.from_json(published_json))
            state.sync("node", list(nodes.values()), now)
            state.sync("pod", list(pods.values()), now)
    assert len(seen) == len(set(seen)), seen


def test_an_image_pull_loop_is_a_thread_post_once_per_episode() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("pod", [], at(0))
    last, _ = published(state, sp, None, 0)
    pulling = pod("m", "kube-system", deployment="metrics-server", ready=False, waiting="ImagePullBackOff")
    state.apply("pod", "ADDED", pulling, at(1))
    after = state.summary(at(1))
    [post] = milestones(last, after, sp)
    assert post.key == "imagepull:kube-system/Deployment/metrics-server:1"
    assert post.text == (
        ":rotating_light: Deployment `kube-system/metrics-server` cannot pull its image"
        " (ImagePullBackOff/ErrImagePull): 1 pod"
    )
    last = Summary.from_json(after.to_json())
    # ErrImagePull and back to ImagePullBackOff: the same episode, nothing new.
    for minute, reason in ((2, "ErrImagePull"), (3, "ImagePullBackOff")):
        state.apply("pod", "MODIFIED", {**pulling, **pod("m", "kube-system", deployment="metrics-server",
                    ready=False, waiting=reason)}, at(minute))  # fmt: skip
        last, found = published(state, sp, last, minute)
        assert found == []
    # Recovered: the episode ends; back within ten minutes it is the same episode, later a new one.
    state.apply("pod", "MODIFIED", pod("m", "kube-system", deployment="metrics-server"), at(4))
    last, found = published(state, sp, last, 4)
    assert found == []
    state.apply("pod", "MODIFIED", pulling, at(6))
    last, found = published(state, sp, last, 6)
    assert found == []
    state.apply("pod", "MODIFIED", pod("m", "kube-system", deployment="metrics-server"), at(7))
    last, _ = published(state, sp, last, 7)
    state.apply("pod", "MODIFIED", pulling, at(20))
    last, found = published(state, sp, last, 20)
    assert found == ["imagepull:kube-system/Deployment/metrics-server:2"]


def test_error_and_init_stuck_are_posts_once_they_last_and_a_crash_loop_says_its_own_error() -> None:
    sp = spec()
    state = WatchState(sp)
    state.sync("pod", [], at(0))
    last, _ = published(state, sp, None, 0)
    state.apply("pod", "ADDED", pod("e", deployment="batch", ready=False, terminated="Error"), at(1))
    init = [{"name": "wait-db", "ready": False, "state": {"running": {}}}]
    state.apply("pod", "ADDED", pod("i", deployment="web", ready=False, phase="Pending", init=init), at(1))
    # A crash loop's first crash shows as Error for a few seconds: not a post of its own.
    state.apply("pod", "ADDED", pod("c", deployment="api", ready=False, terminated="Error"), at(1))
    last, found = published(state, sp, last, 1)
    assert found == []  # Error for less than ERROR_SETTLE, Init not stuck yet
    state.apply("pod", "MODIFIED", crashing("c", deployment="api"), at(1, 10))
    last, found = published(state, sp, last, 1.5)
    assert found == ["crashloop:shop/Deployment/api:1", "error:shop/Deployment/batch:1"]
    last, found = published(state, sp, last, 5.5)
    assert found == ["init:shop/Deployment/web:1"]
    assert keys(milestones(last, state.summary(at(6)), sp)) == []
    # A restart (the state seeded from the persisted summary, listed again) posts nothing again.
    fresh = WatchState(sp, previous=last)
    fresh.sync(
        "pod",
        [
            pod("e", deployment="batch", ready=False, terminated="Error"),
            pod("i", deployment="web", ready=False, phase="Pending", init=init),
            crashing("c", deployment="api"),
        ],
        at(7),
    )
    resumed = fresh.summary(at(7))
    assert keys(milestones(last, resumed, sp)) == []
    # …and the episodes go on (the card's loops do not blink), numbered as before.
    assert {(e.workload, e.kind, e.number) for e in resumed.episodes if e.open} == {
        ("shop/Deployment/api", "crashloop", 1),
        ("shop/Deployment/batch", "error", 1),
        ("shop/Deployment/web", "init", 1),
    }
