"""The fleet card: one Slack message per fleet run, edited in place, with a thread of milestones.

The card shows the fleet's state and why (a failed canary, a budget, a failed soak), the soak
clock and its evidence, who the next gate waits for, and a clusters × stages matrix: one section
per stage, one line per cluster (state, versions, current step, stalled). It must fit Slack's
limits (50 blocks, 3,000 characters a section) at 50 clusters without cutting a failing row:
healthy rows (pending, succeeded, not stalled) are collapsed first into one line per state
naming the clusters; only then are whole lines dropped from the end ("…and N more"), and the rows
that need people come first, so they are the last to go.

The card carries the buttons of what people can do now (`machine.buttons`): Approve the gate the
fleet waits on (a stage's `before` or `after`), Carry the canary's waivers to the later
clusters, Pause while it is active, Resume while it is paused. Each carries the fleet, the stage
and what the card showed, so a click on a card drawn before the fleet moved is answered as stale
(`bot.frontdoor.slack.fleets` decides them, as the verbs do).

Milestones (a stage started or done, a soak, a pause, a failure, a skip, the end) go to the card's
thread once each, keyed by the fleet's version and the event, so a restart never posts one twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.core.delivery import Deliveries
from bot.core.fleets import machine as M
from bot.core.fleets import render
from bot.core.rendering import fit, people
from bot.errors import BotError

log = logging.getLogger(__name__)

SECTION = 3000
#: Room kept in a section for the collapsed lines' "…and N more".
SLACK = 60
#: Events that are milestones in the thread (the others are on the card or in the audit only).
MILESTONES = {
    "fleet_started": ":rocket: Fleet started",
    "stage_started": ":arrow_forward: Stage {stage} started",
    "cluster_failed": ":red_circle: {cluster} failed: {detail}",
    "cluster_skipped": ":fast_forward: {cluster} skipped: {detail}",
    "cluster_retried": ":repeat: {cluster} retried",
    "soak_started": ":stopwatch: Soak of {stage} started ({detail})",
    "soak_passed": ":white_check_mark: Soak of {stage} passed",
    "soak_skipped": ":fast_forward: Soak of {stage} skipped by {actor}: {detail}",
    "gate_approved": ":ballot_box_with_check: {actor} approved the {detail} of {stage}",
    "stage_done": ":checkered_flag: Stage {stage} done",
    "fleet_paused": ":double_vertical_bar: Fleet paused: {detail}",
    "fleet_resumed": ":arrow_forward: Fleet resumed by {actor}",
    "fleet_completed": ":white_check_mark: Fleet completed",
    # Completed with loose ends (`machine.loose_ends`): failed, skipped or never started clusters.
    "fleet_completed:with": ":warning: Fleet completed, but {detail}",
    "fleet_aborted": ":no_entry: Fleet aborted: {detail}",
}


def _stage_text(title: str, rows: Sequence[render.Row]) -> str:
    """A stage's section: the rows that need people first, healthy ones collapsed when needed."""
    urgent = [r for r in rows if not r.healthy]
    healthy = [r for r in rows if r.healthy]
    full = "\n".join(
        [title, *(r.line(render.shown) for r in urgent), *(r.line(render.shown) for r in healthy)]
    )
    if len(full) <= SECTION:
        return full
    collapsed = []
    for state in (M.SUCCEEDED, M.PENDING):
        names = [r.cluster for r in healthy if r.state == state]
        if names:
            collapsed.append(
                f"{render.ICONS[state]} {len(names)} {state}: " + str(fit(", ".join(names), 400, more="…"))
            )
    lines = [title, *(r.line(render.shown) for r in urgent), *collapsed]
    return str(fit("\n".join(lines), SECTION - SLACK))


#: Slack's limit on a button's text.
BUTTON_TEXT = 75


def _button(fleet: M.Fleet, b: M.FleetButton) -> dict[str, Any]:
    stage = fleet.stages[b.stage].stage.name
    element: dict[str, Any] = {"type": "button", "action_id": f"fleet_{b.decision}", "value": b.encode()}
    if b.decision == "approve":
        text = f"Approve the {b.mark} gate of {stage}"
        element["style"] = "primary"
    elif b.decision == "carry":
        text = "Carry the canary's waivers"
    elif b.decision == "pause":
        text = "Pause the fleet"
        element["style"] = "danger"
        element["confirm"] = {
            "title": {"type": "plain_text", "text": "Pause the fleet?"},
            "text": {
                "type": "mrkdwn",
                "text": "No new cluster starts until it is resumed; runs already started go on.",
            },
            "confirm": {"type": "plain_text", "text": "Pause"},
            "deny": {"type": "plain_text", "text": "Cancel"},
        }
    else:
        text = "Resume the fleet"
        element["style"] = "primary"
    if len(text) > BUTTON_TEXT:  # a long stage name: plain text, cut at Slack's limit
        text = text[: BUTTON_TEXT - 1] + "…"
    element["text"] = {"type": "plain_text", "text": text}
    return element


def card(view: render.View, now: datetime) -> tuple[str, list[dict[str, Any]]]:
    """(notification text, blocks) of the fleet card."""
    fleet = view.fleet
    head = [render.headline(fleet, now)]
    if fleet.reason:
        head.append(f":warning: {render.shown(fleet.reason)}")
    if nxt := M.over_budget_next(fleet):
        head.append(f":point_right: {nxt}")
    for extra in (render.soak_line(fleet, now), render.gate_line(fleet, now)):
        if extra:
            head.append(extra)
    rows = render.rows(view, now)
    offer = getattr(view, "offer", "")
    if offer:
        head.append(f":package: {offer}: `/upgrade fleet carry-waivers`")
    stalled = [r.cluster for r in rows if r.stalled]
    if stalled:
        head.append(
            f":hourglass: Stalled (no progress for {render.STALL_AFTER.seconds // 60} min): {', '.join(stalled)}"
        )
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": str(fit("\n".join(head), SECTION))}}
    ]
    offered = M.buttons(fleet, now, offer=bool(offer))
    if offered:
        blocks.append(
            {"type": "actions", "block_id": "fleet_buttons", "elements": [_button(fleet, b) for b in offered]}
        )
    for i, resolved in enumerate(fleet.stages):
        current = " ← now" if i == fleet.stage and fleet.state in (M.ACTIVE, M.PAUSED) else ""
        title = render.stage_title(i, resolved) + current
        mine = [r for r in rows if r.stage == resolved.stage.name]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _stage_text(title, mine)}})
    counts = {state: sum(1 for r in rows if r.state == state) for state in render.ICONS}
    summary = " · ".join(f"{render.ICONS[k]} {n} {k}" for k, n in counts.items() if n)
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": summary or "no clusters"}]})
    text = f"Fleet {fleet.plan.name} {fleet.id}: {fleet.state}" + (
        f" — {people(fleet.reason)}" if fleet.reason else ""
    )
    return str(fit(text, 3000)), blocks


def milestone(event: M.FleetEvent) -> str:
    """The thread line of an event ("" when it is not a milestone)."""
    with_loose_ends = event.kind == "fleet_completed" and event.detail
    pattern = MILESTONES.get(event.kind + (":with" if with_loose_ends else ""))
    if pattern is None:
        return ""
    return pattern.format(
        stage=f"`{event.stage}`" if event.stage else "",
        cluster=f"*{event.cluster}*",
        detail=people(event.detail) if event.detail else "",
        actor=f"<@{event.actor}>" if event.actor else "the bot",
    )


class FleetCards:
    """Posts and edits the fleet card and posts its milestones (a fleet listener)."""

    def __init__(self, *, deliveries: Deliveries, channel: str | None, clock: Any) -> None:
        self.deliveries = deliveries
        self.channel = channel
        self.clock = clock

    def fleet_changed(self, view: render.View, events: Sequence[M.FleetEvent]) -> None:
        if not self.channel:
            return
        try:
            self._publish(view, events)
        except BotError as exc:
            # The fleet is committed; the card catches up on the next change.
            log.warning("could not update Slack for fleet %s: %s", view.fleet.id, exc.user_message)

    def _publish(self, view: render.View, events: Sequence[M.FleetEvent]) -> None:
        fleet = view.fleet
        assert self.channel is not None
        text, blocks = card(view, self.clock())
        refs = self.deliveries.settle(fleet.id)
        ref = refs.get("card")
        if ref is None:
            posted = self.deliveries.post_once(fleet.id, "card", self.channel, text, blocks=blocks)
            if posted is None:
                return
            channel, ts = posted.channel, posted.ts
        elif not ref.ts:
            return  # in flight in a live process
        else:
            channel, ts = ref.channel, ref.ts
            self.deliveries.edit(channel, ts, text, blocks=blocks)
        for n, event in enumerate(events):
            line = milestone(event)
            if line:
                key = f"m:{fleet.version}:{n}:{event.kind}"
                self.deliveries.post_once(fleet.id, key, channel, line, thread_ts=ts)
