"""The stream hands healthy pods to the state reduced (`reduce_pod` → `SeenPod`): the state folded
from reduced pods is the state folded from whole ones, and it keeps nothing per healthy pod."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.watches.model import WatchState
from bot.core.watches.schema import WPod
from bot.core.watches.spec import SeenPod, reduce_pod
from bot.core.watches.summary import Summary
from tests.support.watch_objects import at, crashing, node, pod, spec


def typed(raw: dict[str, Any]) -> WPod:
    return msgspec.convert(raw, WPod)


def test_a_healthy_pod_is_reduced_to_its_key_node_and_workload_and_any_other_is_kept_whole() -> None:
    healthy = reduce_pod(typed(pod("api-5d8f7c9b6-x1", deployment="api", node_name="a1")))
    assert healthy == SeenPod("uid-shop-api-5d8f7c9b6-x1", "shop", "a1", "shop/Deployment/api")
    assert isinstance(reduce_pod(typed(crashing("api-1", deployment="api"))), WPod)
    # Running, not Ready, restarted: healthy for no class, and the crash loop's hysteresis needs it.
    between = typed(pod("api-2", deployment="api", ready=False, restarts=3))
    assert isinstance(reduce_pod(between), WPod)
    # Its node lost: no class of its own, but a crash-looping pod stays crash-looping.
    lost = typed(pod("api-3", deployment="api", phase="Unknown", ready=False, restarts=3))
    assert isinstance(reduce_pod(lost), WPod)
    # Succeeded is healthy whatever came before.
    done = typed(pod("job-1", job="j", phase="Succeeded", ready=False, terminated="Completed", exit_code=0))
    assert isinstance(reduce_pod(done), SeenPod)


def test_a_list_of_healthy_pods_leaves_no_record_per_pod() -> None:
    def listed(count: int, *, reduced: bool = True) -> WatchState:
        state = WatchState(spec())
        state.sync("node", [node("n1")], at(0))
        pods = [typed(pod(f"web-{i}", deployment="web")) for i in range(count)]
        state.sync("pod", [reduce_pod(p) for p in pods] if reduced else pods, at(0))
        assert state.summary(at(1)).pods == count
        return state

    small, large = listed(5).footprint(), listed(500).footprint()
    assert (large.pods, large.unhealthy, large.nodes) == (500, 0, 1)
    assert large.pod_bytes == small.pod_bytes  # the pods cost a counter, not a record each
    assert listed(500, reduced=False).footprint().pod_bytes == small.pod_bytes
    crash = WatchState(spec())
    crash.sync("pod", [typed(crashing(f"api-{i}", deployment="api")) for i in range(500)], at(0))
    held = crash.footprint()
    assert held.unhealthy == 500
    assert 100 * 500 < held.pod_bytes < 1000 * 500


def test_the_footprint_counts_what_the_state_keeps_per_node() -> None:
    def listed(count: int) -> WatchState:
        state = WatchState(spec())
        state.sync("node", [node(f"n-{i}") for i in range(count)], at(0))
        state.sync("pod", [], at(0))
        assert len(state.summary(at(1)).nodes) == count
        return state

    small, large = listed(10).footprint(), listed(1000).footprint()
    assert large.nodes == 1000
    # Each node's record, its strings and its place in the summary's order: a few hundred bytes.
    assert 100 < (large.node_bytes - small.node_bytes) / 990 < 1000, large


_STATES: list[dict[str, Any]] = [
    {},
    {"ready": False, "waiting": "CrashLoopBackOff", "restarts": 2},
    {"ready": False, "restarts": 2},  # between two back-offs: the crash loop's hysteresis
    {"phase": "Unknown", "ready": False, "restarts": 2},  # no class, unless it was crash-looping
    {"ready": False, "waiting": "ImagePullBackOff"},
    {"ready": False, "terminated": "Error"},
    {"phase": "Pending", "ready": False, "unschedulable": True},
    {"phase": "Succeeded", "ready": False, "terminated": "Completed", "exit_code": 0},
    {"ready": False},
]
_event = st.tuples(
    st.sampled_from(["p0", "p1", "p2", "p3", "p4"]),
    st.sampled_from(["api", "web"]),
    st.sampled_from(["a1", "b1"]),
    st.integers(0, len(_STATES) - 1),
    st.booleans(),  # delete?
    st.booleans(),  # a relist of everything alive instead of this event?
)


def _summary_fields(summary: Summary) -> tuple[Any, ...]:
    return (summary.pods, summary.unhealthy, summary.episodes, summary.last_unhealthy_at)


@settings(max_examples=150, deadline=None)
@given(st.lists(_event, max_size=30), st.booleans())
def test_folding_reduced_pods_gives_the_summary_of_folding_whole_ones(
    events: list[Any], scoped: bool
) -> None:
    nodes = [node("a1"), node("b1", "ng-b")]
    whole = WatchState(spec(nodegroups=("ng-a",) if scoped else ()))
    reduced = WatchState(spec(nodegroups=("ng-a",) if scoped else ()))
    for state in (whole, reduced):
        state.sync("node", nodes, at(0))
        state.sync("pod", [], at(0))
    alive: dict[str, WPod] = {}
    for i, (name, workload, where, which, delete, relist) in enumerate(events):
        now = at(0, 20 * i)
        if relist:
            whole.sync("pod", list(alive.values()), now)
            reduced.sync("pod", [reduce_pod(p) for p in alive.values()], now)
        elif delete:
            if name in alive:
                gone = alive.pop(name)
                whole.apply("pod", "DELETED", gone, now)
                reduced.apply("pod", "DELETED", reduce_pod(gone), now)
        else:
            obj = typed(pod(name, deployment=workload, node_name=where, **_STATES[which]))
            event = "MODIFIED" if name in alive else "ADDED"
            whole.apply("pod", event, obj, now)
            reduced.apply("pod", event, reduce_pod(obj), now)
            alive[name] = obj
        later = at(0, 20 * i + 10)
        assert _summary_fields(reduced.summary(later)) == _summary_fields(whole.summary(later))
