"""The drain job's progress transitions on an in-memory cluster, with time passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.core.jobs.base import Decision
from bot.core.jobs.common import RESUMED_AT, iso
from bot.core.jobs.drain import DrainJob, triage
from bot.core.rules import load_rules
from bot.errors import ClusterError, ClusterForbidden, ClusterUnreachable, UserError
from bot.settings import BUILTIN_RULES
from tests.support.clock import FakeClock
from tests.support.jobs import FakeCluster, JobDriver, stored
from tests.support.kube_objects import node, pod

T0 = datetime(2026, 11, 24, 7, 0, tzinfo=UTC)
LABELS = ("eks.amazonaws.com/nodegroup",)


def web(name: str, node_name: str = "n1", **meta: Any) -> dict[str, Any]:
    raw = pod("shop", name, owner=("ReplicaSet", "web-5d8f"), node_name=node_name)
    raw["metadata"]["labels"] = {"app": "web"}
    raw["metadata"].update(meta)
    return raw


def cluster(*pods: dict[str, Any], **kwargs: Any) -> FakeCluster:
    return FakeCluster(nodes=[node("n1", "workers"), node("n2", "workers")], pods=list(pods), **kwargs)


def drive(fake: FakeCluster, args: dict[str, str], clock: FakeClock | None = None) -> JobDriver:
    return JobDriver(DrainJob(LABELS), fake, args, now=clock or FakeClock(T0))


def test_each_write_comes_one_tick_after_its_intent_was_stored() -> None:
    fake = cluster(web("web-a"), web("web-b"))
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    assert fake.writes == [("cordon", "n1")]
    assert driver.progress["cordoned"] == ["n1"]
    driver.tick()  # lists the pods: intents stored, nothing evicted yet
    assert fake.writes == [("cordon", "n1")]
    pods = driver.progress["nodes"]["n1"]["pods"]
    assert {k: (v["state"], v["uid"]) for k, v in pods.items()} == {
        "shop/web-a": ("evicting", "uid-shop-web-a"),
        "shop/web-b": ("evicting", "uid-shop-web-b"),
    }
    driver.tick()
    assert sorted(fake.writes[1:]) == [("evict", "shop/web-a"), ("evict", "shop/web-b")]
    assert {v["state"] for v in driver.progress["nodes"]["n1"]["pods"].values()} == {"evicted"}
    fake.finish("shop/web-a")
    fake.finish("shop/web-b")
    driver.tick()
    assert driver.last is not None
    assert driver.last.done
    assert driver.posts["drained:n1"] == "node n1 drained: 2 pod(s) evicted"
    assert ("cordon", "node n1: schedulable → unschedulable") in driver.audit


def test_a_tick_run_again_from_the_stored_progress_observes_instead_of_writing_again() -> None:
    fake = cluster(web("web-a"))
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    driver.tick()
    before = driver.progress
    driver.tick(crash=True)  # evicted, then killed before the progress was stored
    assert fake.writes == [("cordon", "n1"), ("evict", "shop/web-a")]
    assert driver.progress == before
    driver.tick()  # the same tick again: the pod is terminating, so no second eviction
    assert fake.writes == [("cordon", "n1"), ("evict", "shop/web-a")]
    assert driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]["state"] == "evicted"


def test_a_cordon_re_run_after_a_crash_still_counts_the_node_as_cordoned_by_the_job() -> None:
    fake = cluster()
    driver = drive(fake, {"node": "n1"})
    driver.tick(crash=True)
    driver.tick()
    assert fake.writes == [("cordon", "n1")]
    assert driver.progress["cordoned"] == ["n1"]


def test_a_node_cordoned_before_the_job_is_not_offered_for_uncordon() -> None:
    fake = cluster()
    fake.nodes["n1"]["spec"] = {"unschedulable": True}
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    assert fake.writes == []
    assert driver.progress["cordoned"] == []


def test_a_recreated_pod_under_the_same_name_counts_as_gone_and_is_never_evicted() -> None:
    fake = cluster(web("db-0"))
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    driver.tick()
    fake.pods["shop/db-0"] = web("db-0", node_name="n2", uid="uid-new")
    driver.tick()
    assert ("evict", "shop/db-0") not in fake.writes
    assert driver.last is not None
    assert driver.last.done


def test_a_budget_blocked_eviction_is_retried_every_5_s_and_the_budget_named_once() -> None:
    pdb = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2},
    }
    fake = cluster(web("web-a"), pdbs={"shop": [pdb]})
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = drive(fake, {"node": "n1"}, clock)
    driver.tick()
    driver.tick()
    blocked = driver.tick()
    entry = driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]
    assert (entry["state"], entry["attempts"], entry["next"]) == ("blocked", 1, "2026-11-24T07:00:05Z")
    assert driver.posts["pdb-blocked:shop/web:n1"].startswith(
        "n1: PodDisruptionBudget shop/web blocks evicting shop/web-a — disruptionsAllowed 0"
    )
    assert blocked.wait == 5.0
    assert "blocked by PDB: shop/web" in blocked.card
    clock.advance(timedelta(seconds=2))
    driver.tick()  # too early: no attempt
    assert driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]["attempts"] == 1
    clock.advance(timedelta(seconds=3))
    driver.tick()  # 5 s later: tried again, not posted again (the harness fails on a repeated key)
    assert driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]["attempts"] == 2
    fake.blocked.clear()
    clock.advance(timedelta(seconds=5))
    driver.tick()
    assert ("evict", "shop/web-a") in fake.writes


def test_evictions_in_flight_are_bounded_by_parallel() -> None:
    fake = cluster(*(web(f"web-{i}") for i in range(5)))
    driver = drive(fake, {"node": "n1", "parallel": "2"})
    driver.tick()
    driver.tick()
    states = sorted(v["state"] for v in driver.progress["nodes"]["n1"]["pods"].values())
    assert states == ["evicting", "evicting", "pending", "pending", "pending"]
    driver.tick()
    assert len([w for w in fake.writes if w[0] == "evict"]) == 2


def test_past_the_timeout_the_job_asks_and_then_does_nothing_until_a_decision() -> None:
    fake = cluster(web("web-a"))
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = drive(fake, {"node": "n1", "timeout": "1m"}, clock)
    for _ in range(3):
        driver.tick()
    clock.advance(timedelta(seconds=61))
    asked = driver.tick()
    assert asked.choice is not None
    assert asked.choice.key == "drain-timeout:n1:1"
    writes = list(fake.writes)
    clock.advance(timedelta(seconds=600))
    for _ in range(3):
        again = driver.tick()
        assert again.choice == asked.choice
    assert fake.writes == writes
    driver.tick(Decision(choice_key="drain-timeout:n1:1", option="wait", by="U1"))
    assert driver.progress["nodes"]["n1"]["choice"] is None
    assert driver.progress["nodes"]["n1"]["started"] == "2026-11-24T07:11:01Z"
    assert driver.posts["drain-decision:n1:1"] == "node n1: <@U1> chose to wait 15 more minutes"
    clock.advance(timedelta(seconds=61))
    driver.tick()
    assert driver.choice is not None
    assert driver.choice.key == "drain-timeout:n1:2"


def test_a_resumed_drain_gives_each_node_its_whole_timeout_again() -> None:
    fake = cluster(web("web-a"))
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = drive(fake, {"node": "n1", "timeout": "1m"}, clock)
    for _ in range(3):
        driver.tick()
    clock.advance(timedelta(seconds=50))
    assert driver.tick().choice is None
    # Interrupted for ten minutes (its driver died), then resumed: the job service notes the resume.
    clock.advance(timedelta(seconds=600))
    driver.progress[RESUMED_AT] = iso(clock())
    assert driver.tick().choice is None  # not asked at once: the time nobody drove it does not count
    clock.advance(timedelta(seconds=59))
    assert driver.tick().choice is None
    clock.advance(timedelta(seconds=2))
    asked = driver.tick().choice
    assert asked is not None
    assert asked.key == "drain-timeout:n1:1"


def test_delete_after_the_timeout_deletes_with_the_uid_one_tick_after_the_decision() -> None:
    fake = cluster(web("web-a"))
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = drive(fake, {"node": "n1", "timeout": "1m"}, clock)
    for _ in range(3):
        driver.tick()
    clock.advance(timedelta(seconds=61))
    driver.tick()
    driver.tick(Decision(choice_key="drain-timeout:n1:1", option="delete", by="U9", reason="window closes"))
    assert driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]["state"] == "deleting"
    assert ("delete_pod", "shop/web-a") not in fake.writes
    driver.tick()
    assert ("delete_pod", "shop/web-a") in fake.writes
    driver.tick()  # terminating: not deleted again
    assert fake.writes.count(("delete_pod", "shop/web-a")) == 1
    fake.finish("shop/web-a")
    driver.tick()
    assert driver.posts["drained:n1"] == "node n1 drained: 0 pod(s) evicted, 1 deleted"
    assert any(what == "delete-pod" and "U9: window closes" in detail for what, detail in driver.audit)


def test_refused_pods_are_named_and_bring_the_question_without_waiting_for_the_timeout() -> None:
    local = web("cache")
    local["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    bare = pod("shop", "debug", owner=None, node_name="n1")
    fake = cluster(local, bare)
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    driver.tick()
    assert driver.choice is None  # the listing tick only records what it found
    assert driver.posts["drain-refused:shop/cache:n1"].startswith("n1: not evicting pod shop/cache: emptyDir")
    assert driver.posts["drain-refused:shop/debug:n1"].startswith(
        "n1: not evicting pod shop/debug: no controller"
    )
    driver.tick()
    assert driver.choice is not None
    assert "2 pod(s) cannot be evicted" in driver.choice.question
    assert driver.choice.key == "drain-timeout:n1:1"
    assert fake.writes == [("cordon", "n1")]


def test_a_skipped_node_stays_cordoned_and_the_job_goes_on_with_the_next() -> None:
    fake = cluster(web("web-a"), web("web-b", node_name="n2"))
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = drive(fake, {"nodegroup": "workers", "timeout": "1m"}, clock)
    driver.tick()
    assert fake.writes == [("cordon", "n1"), ("cordon", "n2")]  # every node first
    driver.tick()
    driver.tick()
    clock.advance(timedelta(seconds=61))
    driver.tick()
    assert driver.choice is not None
    # Leaving a node cordoned and undrained is said with a reason, as a delete is.
    assert [o.needs_reason for o in driver.choice.options if o.id == "skip"] == [True]
    why = "the budget of shop/web is the web team's; they fix it after the window"
    driver.tick(Decision(choice_key="drain-timeout:n1:1", option="skip", by="U2", reason=why))
    assert driver.progress["nodes"]["n1"]["state"] == "skipped"
    assert driver.progress["nodes"]["n1"]["skip"] == {"by": "U2", "reason": why}
    assert (
        "skipped (still cordoned): n1 (why: the budget of shop/web is the web team's; they fix it after…)"
        in (driver.last.card if driver.last is not None else ())
    )
    driver.tick()
    driver.tick()
    assert ("evict", "shop/web-b") in fake.writes
    fake.finish("shop/web-b")
    driver.tick()
    assert driver.last is not None
    assert driver.last.done
    assert driver.last.detail == "drained 1 node(s); skipped 1 (left cordoned): n1"
    # What it leaves for people, for the step: not a plain "done" on the card.
    assert driver.last.left_behind == (
        "1 node(s) skipped, still cordoned: n1 (why: the budget of shop/web is the web team's; they fix it after…)"
    )
    assert ("uncordon", "n1") not in fake.writes


def test_daemonset_and_mirror_pods_are_left_and_local_data_or_bare_pods_refused_unless_allowed() -> None:
    ds = pod("kube-system", "proxy", owner=("DaemonSet", "kube-proxy"))
    mirror = pod("kube-system", "etcd", owner=("Node", "n1"))
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    local = web("cache")
    local["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    bare = pod("shop", "debug", owner=None)
    done = pod("shop", "job-1", owner=None, phase="Succeeded")
    strict = {"allow_local_storage": False, "allow_unmanaged": False}
    assert triage(ds, **strict) == ("skip", "DaemonSet")
    assert triage(mirror, **strict) == ("skip", "mirror")
    assert triage(local, **strict)[0] == "refuse"
    assert triage(bare, **strict)[0] == "refuse"
    assert triage(done, **strict) == ("evict", "")
    assert triage(local, allow_local_storage=True, allow_unmanaged=False) == ("evict", "")
    assert triage(bare, allow_local_storage=False, allow_unmanaged=True) == ("evict", "")


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"node": "n9"}, "no such node: n9"),
        ({"nodegroup": "nope"}, "node group 'nope' has no nodes"),
        ({"node": "n1", "nodegroup": "workers"}, "either node"),
        ({}, "either node"),
        ({"nodegroup": "workers", "version": "1.29"}, "already on 1.29"),
        ({"node": "n1", "timeout": "soon"}, "timeout:"),
        ({"node": "n1", "parallel": "0"}, "parallel:"),
    ],
)
def test_a_selection_that_names_nothing_is_refused_with_a_short_reason(
    args: dict[str, str], reason: str
) -> None:
    with pytest.raises(UserError, match=reason):
        DrainJob(LABELS).plan(cluster(), args, now=T0)


def test_version_keeps_only_the_old_nodes_of_a_group() -> None:
    fake = FakeCluster(
        nodes=[node("n1", "workers", kubelet="v1.29.4"), node("n2", "workers", kubelet="v1.30.2")]
    )
    progress = stored(DrainJob(LABELS).plan(fake, {"nodegroup": "workers", "version": "1.30"}, now=T0))
    assert progress["order"] == ["n1"]


def test_another_refusal_backs_off_per_pod_and_is_said_once() -> None:
    fake = cluster(web("web-a"), web("web-b"))
    fake.refusals["shop/web-a"] = ClusterError("This pod has more than one PodDisruptionBudget", status=500)
    clock = FakeClock(T0)
    driver = drive(fake, {"node": "n1"}, clock)
    driver.tick()
    driver.tick()
    driver.tick()
    pods = driver.progress["nodes"]["n1"]["pods"]
    assert (pods["shop/web-a"]["state"], pods["shop/web-a"]["next"]) == ("blocked", "2026-11-24T07:00:05Z")
    assert pods["shop/web-b"]["state"] == "evicted"  # one refused pod does not stall the others
    assert driver.posts["drain-evict-error:shop/web-a:n1"].startswith(
        ":warning: n1: shop/web-a is selected by several PodDisruptionBudgets: the eviction API refuses a pod "
        "that several budgets select, so no retry evicts it until all but one of them are removed"
    )
    clock.advance(timedelta(seconds=5))
    driver.tick()  # refused again: the back-off doubles, nothing posted twice
    assert driver.progress["nodes"]["n1"]["pods"]["shop/web-a"]["next"] == "2026-11-24T07:00:15Z"


def test_evictions_none_of_which_got_an_answer_raise_the_cluster_unreachable() -> None:
    """Said per pod as "refused …; retrying" before, with no line on the card: raised, the job
    service says the cluster gives no answer; the intents stay stored, nothing is marked blocked."""
    fake = cluster(web("web-a"), web("web-b"))
    for key in ("shop/web-a", "shop/web-b"):
        fake.refusals[key] = ClusterUnreachable("cluster prod refused the connection")
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    driver.tick()
    with pytest.raises(ClusterUnreachable):
        driver.tick()
    assert {v["state"] for v in driver.progress["nodes"]["n1"]["pods"].values()} == {"evicting"}
    fake.refusals.clear()
    driver.tick()
    assert {v["state"] for v in driver.progress["nodes"]["n1"]["pods"].values()} == {"evicted"}


def test_an_eviction_the_role_forbids_ends_the_job_naming_the_role_and_the_nodes_left_cordoned() -> None:
    """A 403 from the eviction API is not the budget's refusal: no retry helps until the act role
    is bound, and the group's nodes stay cordoned meanwhile; the end says both."""
    fake = cluster(web("web-a"))
    fake.refusals["shop/web-a"] = ClusterError(
        'pods "web-a" is forbidden: cannot create resource "pods/eviction"', cluster="prod", status=403
    )
    driver = drive(fake, {"node": "n1"})
    driver.tick()
    driver.tick()
    with pytest.raises(ClusterForbidden) as forbidden:
        driver.tick()
    said = forbidden.value.user_message
    assert "evicting a pod needs `create pods/eviction`, which the `upgrade-bot-act` role grants" in said
    assert said.endswith(
        "it is not bound; left cordoned by this job: n1 "
        '(`/upgrade action uncordon node=n1 --cluster prod --reason "…"` returns them)'
    )


RULES = load_rules([BUILTIN_RULES])


def test_a_budget_refusal_is_explained_by_ki006_once_per_workload_and_episode_and_a_slow_drain_said_once() -> (
    None
):
    pdb = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2},
    }
    fake = cluster(web("web-a"), web("web-b"), pdbs={"shop": [pdb]})
    fake.blocked.update({"shop/web-a", "shop/web-b"})
    clock = FakeClock(T0)
    driver = JobDriver(DrainJob(LABELS, RULES), fake, {"node": "n1"}, now=clock)
    first = "rule:KI006:shop/Deployment/web:1"
    for _ in range(3):
        driver.tick()
    text = driver.posts[first]
    assert text.startswith(
        ":mag: Known issue *KI006* — Eviction refused by a PodDisruptionBudget (drain stalled)"
    )
    assert "Deployment `shop/web` (2 pods) — seen: event TooManyRequests: Cannot evict pod" in text
    assert "kubectl -n shop get pdb   (the one with ALLOWED DISRUPTIONS 0 selects web)" in text
    # Retried every 5 s for 5 minutes: not said again (the harness fails on a repeated key); at 5
    # minutes the slow drain is said once, naming the budget and the known issue.
    for _ in range(61):
        clock.advance(timedelta(seconds=5))
        driver.tick()
    assert [k for k in driver.posts if k.startswith("rule:")] == [first]
    assert driver.posts["drain-slow:n1"] == (
        "n1: draining for 5 minutes; 2 pod(s) still refused by shop/web — known issue KI006 (above)"
    )
    # web-a goes (the budget let one through), web-b is still blocked: the same episode.
    fake.blocked.discard("shop/web-a")
    clock.advance(timedelta(seconds=5))
    driver.tick()
    assert driver.progress["issues"]["KI006 shop/Deployment/web"]["open"] is True
    fake.blocked.clear()
    clock.advance(timedelta(seconds=5))
    driver.tick()
    assert driver.progress["issues"]["KI006 shop/Deployment/web"]["open"] is False
    assert [k for k in driver.posts if k.startswith("rule:")] == [first]


def test_without_rules_a_drain_posts_no_known_issue() -> None:
    pdb = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    fake = cluster(web("web-a"), pdbs={"shop": [pdb]})
    fake.blocked.add("shop/web-a")
    driver = drive(fake, {"node": "n1"})
    for _ in range(3):
        driver.tick()
    assert "pdb-blocked:shop/web:n1" in driver.posts
    assert not [k for k in driver.posts if k.startswith("rule:")]


def test_a_stalled_drain_names_the_known_issue_and_its_remedy_in_the_stalled_line() -> None:
    pdb = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1},
    }
    fake = cluster(web("web-a"), pdbs={"shop": [pdb]})
    fake.blocked.add("shop/web-a")
    clock = FakeClock(T0)
    driver = JobDriver(DrainJob(LABELS, RULES), fake, {"node": "n1", "timeout": "1m"}, now=clock)
    for _ in range(3):
        driver.tick()
    clock.advance(timedelta(seconds=61))
    driver.tick()
    # The remedy names the pod left and its namespace (a budget's own name is not known here).
    assert driver.posts["drain-stalled:n1:1"] == (
        "node n1: timeout reached with 1 pod(s) left — KI006 Eviction refused by a PodDisruptionBudget "
        "(drain stalled): kubectl -n shop get pdb (the one with ALLOWED DISRUPTIONS 0 selects web-a); "
        "Scale the workload up, fix its unhealthy pods, or relax that budget (PDB) for the window: "
        """kubectl -n shop patch pdb PDB --type merge -p '{"spec":{"maxUnavailable":1,"minAvailable":null}}'; """
        "asking what to do"
    )
