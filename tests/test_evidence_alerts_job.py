"""The `alerts` job against the simulator's Alertmanager facade: a baseline at plan time, the
gate's summary line while it settles, a new critical alert failing the step (counted even when
silenced), and no answer from Alertmanager pausing with an `evidence_inconclusive` choice that
people can waive (with a reason) — never a pass by itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.alertmanager import Alertmanager
from bot.core.evidence.matchers import parse_matcher
from bot.core.evidence.view import alerts_view
from bot.core.jobs.alerts import PAUSE_KIND, AlertsJob, Evidence, waived
from bot.core.jobs.base import Decision
from bot.core.jobs.registry import job_kind
from bot.errors import UserError
from bot.records import SignalSource
from bot.sim.cluster import SimCluster

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)


@dataclass
class _Named:
    """The kube adapter's one attribute this job reads: the cluster's configured name."""

    name: str


def _job(sim: SimCluster) -> AlertsJob:
    am = Alertmanager(SignalSource(url=f"{sim.url}/alertmanager"))
    evidence = Evidence({"prod": (am, (parse_matcher('cluster="prod"'),))})
    return AlertsJob(lambda: evidence)


def test_pre_existing_alerts_settle_and_a_new_critical_one_fails(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    ev = sim_small.sim.evidence
    ev.fire({"alertname": "Watchdog", "cluster": "prod"}, (T0 - timedelta(hours=1)).timestamp())
    ev.fire({"alertname": "Elsewhere", "cluster": "staging", "severity": "critical"}, T0.timestamp() + 30)
    job, cluster = _job(sim_small), _Named("prod")
    progress = job.plan(cluster, {"settle": "10m", "timeout": "30m"}, now=T0)
    assert len(progress["baseline"]) == 1
    tick = job.tick(cluster, progress, now=T0 + timedelta(minutes=2))
    assert (tick.done, tick.card) == (
        False,
        ("Alerts: 0 new since 14:02 UTC · 1 pre-existing · 0 silenced by this run",),
    )
    assert alerts_view(tick.progress).settle_left(T0 + timedelta(minutes=2)) == timedelta(minutes=8)
    settled = job.tick(cluster, tick.progress, now=T0 + timedelta(minutes=10))
    assert (settled.done, settled.ok) == (True, True)

    ev.fire({"alertname": "KubeAPIDown", "cluster": "prod", "severity": "critical"}, T0.timestamp() + 60)
    failed = job.tick(cluster, tick.progress, now=T0 + timedelta(minutes=3))
    assert (failed.done, failed.ok, failed.detail) == (
        True,
        False,
        "alerts: critical alert KubeAPIDown started firing",
    )
    assert '• `KubeAPIDown` {severity="critical", cluster="prod"} since 14:03 UTC' in failed.posts[0].text


def test_no_answer_pauses_with_an_inconclusive_choice_and_only_people_waive_it(sim_small: SimCluster) -> None:
    assert sim_small.sim is not None
    job, cluster = _job(sim_small), _Named("prod")
    progress = job.plan(cluster, {}, now=T0)
    sim_small.sim.evidence.alertmanager_mode = "401"
    asked = job.tick(cluster, progress, now=T0 + timedelta(minutes=11))
    assert asked.done is False
    assert asked.choice is not None
    assert asked.choice.key == f"{PAUSE_KIND}:alerts:1"
    assert "Alertmanager refused the bot's credentials (HTTP 401)" in asked.choice.question
    assert [o.id for o in asked.choice.options] == ["wait", "waive", "abort"]
    # Wait: still no answer, asked again (a new key), never passed.
    again = job.tick(
        cluster,
        asked.progress,
        now=T0 + timedelta(minutes=12),
        decision=Decision(choice_key=asked.choice.key, option="wait", by="U1"),
    )
    assert again.done is False
    assert again.choice is not None
    assert again.choice.key == f"{PAUSE_KIND}:alerts:2"
    waived = job.tick(
        cluster,
        again.progress,
        now=T0 + timedelta(minutes=13),
        decision=Decision(choice_key=again.choice.key, option="waive", by="U1", reason="AM maintenance"),
    )
    assert (waived.done, waived.ok, waived.detail) == (True, True, "alerts: waived by <@U1> (AM maintenance)")


def test_alerts_is_a_plan_kind_that_refuses_a_bad_regex() -> None:
    kind = job_kind("alerts")
    assert kind is not None
    assert not kind.mutating
    with pytest.raises(UserError, match=r"ignore: '\(unclosed' is not a regular expression"):
        kind.check({"ignore": "(unclosed"})


def test_a_waiver_of_two_people_names_each_with_their_reason_in_the_cards_words() -> None:
    # It read "alerts: waived by <@U2>: <@U1>: token rotates; Grafana is green; <@U2>: checked too",
    # beside the card's clear "evidence waived by @P (…) and @S (…)".
    decision = Decision(
        choice_key=f"{PAUSE_KIND}:alerts:1",
        option="waive",
        by="U2",
        reason="<@U1>: token rotates; Grafana is green; <@U2>: checked too",
    )
    tick = waived("alerts", {}, decision)
    said = "alerts: waived by <@U1> (token rotates; Grafana is green) and <@U2> (checked too)"
    assert tick.detail == said
    assert tick.audit == (("evidence:waived", said),)
    (post,) = tick.posts
    assert (post.text, post.people) == (said, ("U2", "U1"))
