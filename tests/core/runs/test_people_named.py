"""People are named as people in every line the bot writes about a run: a run driven through a
reject, a failure people reported, skips (one person's and two people's), force, a waiver, a
hand-off, a note, a pause and an abort leaves no raw Slack id (`U0…`) and no escaped mention
(`&lt;@U0…&gt;`) in its thread, its gate messages, its card (text and Block Kit), the list of
runs (`/upgrade status`) or the audit log's excerpt (`/upgrade audit`). The run service posts to
the loopback Slack stub through the real slack_sdk client; the steps' actions are the run
machine's and the jobs' own words."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.core import audit
from bot.core.live import LiveSection
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.handoffs import handoff
from bot.core.runs.service import Actor, RunService
from bot.resources import BUILTIN_TEMPLATES
from tests.support.clock import FakeClock
from tests.support.run_service import T0, tiny
from tests.support.slack_stub import SlackStub

PLAN = """\
name: tiny
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}
steps:
  - id: prepare
    title: Prepare the node groups
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
  - id: evict
    title: Delete the stuck pods
    gate: {approve: [primary, shadow]}
    actions: [{delete-pod: {workload: deployment/shop/web, only: not-ready}}]
  - id: settle
    title: No new alerts
    gate: {any_of: [primary]}
    actions: [{alerts: {settle: 10m, timeout: 30m}}]
  - id: last
    title: Last words
    gate: {any_of: [coordinator]}
    done: {any_of: [primary]}
"""
ABRUPT = """\
name: abrupt
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}
defaults: {on_failure: abort}
steps:
  - id: only
    title: The only step
    gate: {any_of: [primary, shadow]}
"""
#: The alerts job's detail when people waived its Inconclusive evidence (`bot.core.jobs.alerts.waived`).
WAIVED = "alerts: waived by <@U0PRIMARY> (token rotates at 04:00) and <@U0SHADOW> (Grafana is green)"
#: A Slack user id not inside a mention.
RAW_ID = re.compile(r"(?<![@\w])[UW]0[A-Z0-9]{3,}\b")
MENTION = re.compile(r"<@[UW][A-Z0-9]+>")


def _texts(value: Any) -> Iterator[str]:
    """Every text a person reads in a message's Block Kit (the `text` of each element)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                yield item
            else:
                yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _misnamed(text: str) -> list[str]:
    """The raw ids and escaped mentions in `text` (its mentions taken out first)."""
    return RAW_ID.findall(MENTION.sub("", text)) + re.findall(r"&lt;@[^&]*&gt;", text)


def _drive(service: RunService, clock: FakeClock) -> str:
    """The run through every way people decide on it; its id."""
    p, s, c = Actor(user_id="U0PRIMARY"), Actor(user_id="U0SHADOW"), Actor(user_id="U0COORD")
    run = service.start("tiny", p).run

    def ref(step: str, decision: str = "approve") -> R.ButtonRef:
        epoch = service.load(run.id).step_run(step).epoch
        return R.ButtonRef(run_id=run.id, step_id=step, epoch=epoch, decision=decision)

    def by(who: Actor) -> dict[str, Any]:
        """What the machine's decisions take of the person deciding now."""
        return {"user_id": who.user_id, "directory": service.directory, "now": clock()}

    def later() -> None:
        clock.advance(timedelta(minutes=3))

    def apply(change: Any, actor: Actor) -> R.Outcome:
        later()
        out = service.apply(run.id, change, actor)
        assert out.accepted, out.message
        return out

    # prepare: rejected at its start (the reason mentions the shadow), resumed, reported failed.
    assert service.click(ref("prepare", "reject"), p, reason="ask <@U0SHADOW> first").accepted
    apply(lambda r: R.resume(r, by="U0PRIMARY", now=clock(), reason="asked"), p)
    assert service.click(ref("prepare"), p).accepted
    later()
    assert service.click(ref("prepare", "reject"), s, reason="pods crash, see <@U0COORD>").accepted
    # Skipped by one person while paused (`/upgrade skip`), then resumed.
    apply(lambda r: R.skip_step(r, step_id="prepare", reason="done by hand with <@U0COORD>", **by(p)), p)
    apply(lambda r: R.resume(r, by="U0PRIMARY", now=clock()), p)
    # evict: the primary approves with force, the shadow without; the action cannot run here.
    assert service.click(ref("evict", "force"), p, reason="the node is gone").accepted
    later()
    assert service.click(ref("evict"), s).accepted
    # Skipped by two votes on the paused card.
    for who in (p, s):
        why = f"{who.user_id[2:].lower()} agrees"
        apply(
            lambda r, w=who, y=why: R.skip_vote(r, step_id="evict", epoch=r.current.epoch, reason=y, **by(w)),
            who,
        )
    # settle: running; Inconclusive evidence paused it; two people waived it; it succeeded so.
    apply(
        lambda r: R.click(r, step_id="settle", epoch=r.step_run("settle").epoch, decision="approve", **by(p)),
        p,
    )
    epoch = service.load(run.id).step_run("settle").epoch
    bot = Actor(user_id="bot")
    apply(lambda r: R.pause_on_evidence(r, step_id="settle", epoch=epoch, why="no data", now=clock()), bot)
    for who in (p, s):
        apply(
            lambda r, w=who: R.evidence_waive_vote(r, step_id="settle", epoch=epoch, reason="green", **by(w)),
            who,
        )
    later()
    assert service.finish_long(run.id, "settle", ok=True, detail=WAIVED) is not None
    # The shadow hands over; a note; a pause and a resume; the run completes past its failures.
    apply(lambda r: handoff(r, role="shadow", user_id="U0DANIELA", by="U0SHADOW", now=clock()), s)
    apply(lambda r: R.note(r, by="U0COORD", text="told <@U0DANIELA> the plan", now=clock()), c)
    apply(lambda r: R.pause(r, by="U0COORD", reason="lunch with <@U0PRIMARY>", now=clock()), c)
    apply(lambda r: R.resume(r, by="U0DANIELA", now=clock()), Actor(user_id="U0DANIELA"))
    assert service.click(ref("last"), c).accepted
    later()
    assert service.click(ref("last"), p).accepted
    assert service.load(run.id).state is R.RunState.COMPLETED
    # A step whose failure aborts its run (`on_failure: abort`), rejected.
    service.store.save_plan(name="abrupt", text=ABRUPT, loaded_by="U0PRIMARY", loaded_at=clock())
    aborted = service.start("abrupt", p).run
    later()
    rejected = R.ButtonRef(run_id=aborted.id, step_id="only", epoch=1, decision="reject")
    assert service.click(rejected, s, reason="not today, <@U0COORD>").accepted
    assert service.load(aborted.id).state is R.RunState.ABORTED
    return run.id


#: A cloud job's line on the card once two people chose force (`bot.core.jobs.eks`).
FORCED = (
    "node group ng-1: update with force past the upgrade insights in ERROR (kubelet skew), asked by "
    "U0PRIMARY (the pods are gone) and confirmed by U0SHADOW (no data to lose)"
)


def _live(run_id: str) -> list[LiveSection]:
    return [LiveSection(step_id="settle", title="EKS update of ng-1", lines=(FORCED,))]


@pytest.fixture
def driven(tmp_path: Path, slack_stub: SlackStub) -> Iterator[tuple[RunService, str]]:
    with tiny(tmp_path, slack_stub, PLAN, live=_live) as (service, clock):
        yield service, _drive(service, clock)


def test_a_runs_thread_and_card_name_people_as_mentions_never_as_raw_or_escaped_ids(
    driven: tuple[RunService, str], slack_stub: SlackStub
) -> None:
    service, _ = driven
    thread, card = [], []
    for call in (*slack_stub.calls_to("chat.postMessage"), *slack_stub.calls_to("chat.update")):
        shown = [call.params["text"], *_texts(call.params.get("blocks") or [])]
        (thread if call.params.get("thread_ts") else card).extend(shown)
    # The run went where it should: each decision has its line.
    said = "\n".join(thread)
    for line in (
        "<@U0PRIMARY> rejected `prepare`: ask <@U0SHADOW> first",
        "<@U0SHADOW> reported `prepare` failed: pods crash, see <@U0COORD>",
        "`evict` skipped by <@U0PRIMARY> and <@U0SHADOW>",
        "handed the shadow role to <@U0DANIELA>",
        "`settle` succeeded",
        "Completed with 2 failed steps skipped",
        "`prepare` failed: reported failed by <@U0SHADOW>: pods crash, see <@U0COORD>",
        # The honest ending quotes the skip's reason with the mention its author typed.
        "— skipped by <@U0PRIMARY>: _done by hand with <@U0COORD>_",
    ):
        assert line in said, line
    assert "waived by <@U0PRIMARY>" in said
    assert "force was chosen by <@U0PRIMARY> only" in said
    assert "step only failed: rejected by <@U0SHADOW>: not today, <@U0COORD>" in said
    assert any("asked by <@U0PRIMARY> (the pods are gone) and confirmed by <@U0SHADOW>" in t for t in card)
    assert [(t, _misnamed(t)) for t in thread if _misnamed(t)] == []
    assert [(t, _misnamed(t)) for t in card if _misnamed(t)] == []
    # `/upgrade status` with no run active lists the latest, each with its reason.
    listed = (
        Renderer([BUILTIN_TEMPLATES])
        .render("runs/list", {"runs": service.store.runs(limit=5), "active": False})
        .text
    )
    assert "(step only failed: rejected by <@U0SHADOW>: not today, <@U0COORD>)" in listed
    assert _misnamed(listed) == []


def test_the_audit_logs_excerpt_names_people_as_mentions(driven: tuple[RunService, str]) -> None:
    service, _ = driven
    entries = service.store.audit_entries(since=T0)
    # As `/upgrade audit` shows it: its latest entries (all of them here).
    summary = audit.summarise(entries, latest=len(entries))
    shown = Renderer([BUILTIN_TEMPLATES]).render("audit", {"since": T0, "summary": summary}).text
    assert "reported failed by <@U0SHADOW>" in shown
    assert [line for line in shown.splitlines() if _misnamed(line)] == []
