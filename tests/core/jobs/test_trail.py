"""What a cordon, a drain and an uncordon leave on the node: annotations naming the run, step, job
and approvers, written with the cordon itself, and one Event each, also after a crash."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.core.jobs import trail as tr
from bot.core.jobs.drain import DrainJob
from bot.core.jobs.nodes import CordonJob, UncordonJob
from bot.errors import ClusterError
from tests.support.jobs import FakeCluster, JobDriver
from tests.support.kube_objects import node

T0 = datetime(2026, 11, 24, 7, 0, tzinfo=UTC)
LABELS = ("eks.amazonaws.com/nodegroup",)
TRAIL = tr.make_trail(run_id="r-42", step_id="drain-istio", job_id=7, approved_by=["U0PRIMARY", "U0SHADOW"])


def driver(job: CordonJob | UncordonJob | DrainJob, fake: FakeCluster, names: str) -> JobDriver:
    d = JobDriver(job, fake, {"node": names}, now=lambda: T0)
    d.progress[tr.TRAIL] = TRAIL  # as the job service stores it when it plans the job
    return d


def annotations(fake: FakeCluster, name: str) -> dict[str, str]:
    return dict(fake.nodes[name]["metadata"].get("annotations") or {})


def test_a_cordon_annotates_the_node_and_records_an_event_naming_run_step_and_approvers() -> None:
    fake = FakeCluster(nodes=[node("n1", "g"), node("n2", "g", unschedulable=True)])
    fake.nodes["n1"]["metadata"]["uid"] = "uid-n1"
    driver(CordonJob(LABELS), fake, "n1,n2").tick()
    assert annotations(fake, "n1") == {
        "upgrade-bot.io/cordoned-by": "run=r-42 step=drain-istio job=7 approved-by=U0PRIMARY,U0SHADOW",
        "upgrade-bot.io/cordoned-at": "2026-11-24T07:00:00Z",
    }
    # A node cordoned before the job is not the bot's doing: nothing is written on it.
    assert annotations(fake, "n2") == {}
    (event,) = fake.node_events.values()
    assert event["node"] == "n1"
    assert event["uid"] == "uid-n1"  # so that `kubectl describe node` lists it
    assert event["reason"] == "UpgradeBotCordon"
    assert event["message"] == (
        "cordoned by upgrade-bot: run r-42, step drain-istio (job 7), approved by U0PRIMARY, U0SHADOW"
    )


def test_a_cordon_re_run_after_a_crash_records_no_second_event() -> None:
    fake = FakeCluster(nodes=[node("n1", "g")])
    d = driver(CordonJob(LABELS), fake, "n1")
    d.tick(crash=True)  # patched and recorded, then killed before the progress was stored
    d.tick()
    assert fake.writes == [("cordon", "n1")]
    assert len(fake.node_events) == 1


def test_an_uncordon_removes_the_annotations_and_says_so_in_an_event() -> None:
    fake = FakeCluster(nodes=[node("n1", "g")])
    driver(CordonJob(LABELS), fake, "n1").tick()
    assert "upgrade-bot.io/cordoned-by" in annotations(fake, "n1")
    driver(UncordonJob(LABELS), fake, "n1").tick()
    assert annotations(fake, "n1") == {}
    assert sorted(e["reason"] for e in fake.node_events.values()) == [
        "UpgradeBotCordon",
        "UpgradeBotUncordon",
    ]


def test_a_drain_leaves_the_same_trail_on_each_node_it_cordons() -> None:
    fake = FakeCluster(nodes=[node("n1", "g"), node("n2", "g")])
    d = driver(DrainJob(LABELS), fake, "n1,n2")
    d.tick()
    for name in ("n1", "n2"):
        assert annotations(fake, name)["upgrade-bot.io/cordoned-by"] == (
            "run=r-42 step=drain-istio job=7 approved-by=U0PRIMARY,U0SHADOW"
        )
    assert sorted((e["node"], e["reason"]) for e in fake.node_events.values()) == [
        ("n1", "UpgradeBotDrain"),
        ("n2", "UpgradeBotDrain"),
    ]
    assert all(
        e["message"].startswith("cordoned for a drain by upgrade-bot: run r-42")
        for e in fake.node_events.values()
    )


class RefusingEvents(FakeCluster):
    def node_event(self, node: str, **kwargs: object) -> bool:  # type: ignore[override]
        raise ClusterError("events is forbidden", status=403)


def test_an_event_the_api_refuses_leaves_the_cordon_and_its_annotation_in_place() -> None:
    fake = RefusingEvents(nodes=[node("n1", "g")])
    d = driver(CordonJob(LABELS), fake, "n1")
    d.tick()
    assert d.last is not None
    assert d.last.done
    assert fake.nodes["n1"]["spec"]["unschedulable"] is True
    assert "upgrade-bot.io/cordoned-by" in annotations(fake, "n1")


def test_a_job_planned_without_a_trail_still_says_it_was_the_bot() -> None:
    assert tr.describe(None) == "upgrade-bot"
    assert tr.message("cordoned", {}) == "cordoned by upgrade-bot"
    assert tr.event_name("n1", "UpgradeBotCordon", TRAIL) == tr.event_name("n1", "UpgradeBotCordon", TRAIL)
    assert tr.event_name("n1", "UpgradeBotCordon", TRAIL) != tr.event_name("n2", "UpgradeBotCordon", TRAIL)
