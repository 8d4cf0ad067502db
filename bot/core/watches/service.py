"""The watch service: a watch's row, its publishing to Slack, and who drives it. No threads.

A watch is a row in `watches` (the store): scope, target and stop rules, the channel, who drives it
(`owner` + `heartbeat_at`) and the last PUBLISHED `Summary`. The duty engine (`bot.core.duties`,
kind `bot.frontdoor.watching.WatchDuty`) owns the threads: it claims live watches whose owner is gone, feeds the kube streams
into a `WatchState`, and calls `publish` at most every `PUBLISH_SECONDS`. This service does the
rest, in this order, so a crash at any point loses nothing and repeats nothing:

1. the summary now, its verdict, and the milestones since the last published summary;
2. ONE transaction stores the new summary and the thread posts it owes (outbox rows keyed by each
   milestone's deterministic key; several milestones at once become one batched reply whose
   milestone keys are recorded as markers; a known issue's explanation is long, so it is a reply
   of its own, keyed `rule:<id>:<workload>:<episode>`), and ends the watch when the verdict is final (or
   `unwatch` asked) — this write names the owner, so a process that lost the watch writes nothing;
3. the card (subject `watch:<id>`, key `card`) is posted once through `Deliveries` or edited in
   place (its channel and ts are in the database, never looked up in the channel);
4. the outbox rows are posted into the card's thread through `Deliveries` (claim → post with the
   dedup key → record the ts; a claim a crash left is settled by `Deliveries.settle`).

After `kill -9` a new process takes the watch (its owner's heartbeat is stale), lists again, seeds
the state from the persisted summary and calls `catch_up`: tombstones are settled and unposted
outbox rows posted; the next `publish` compares the fresh lists with the persisted summary, so the
milestones missed while down come out once, into the same card's thread.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.adapters.store import Store
from bot.core.delivery import Deliveries, thread_root
from bot.core.live import StepReports
from bot.core.rendering import Renderer
from bot.core.rules import Rule
from bot.core.watches.card import card_context
from bot.core.watches.milestones import (
    KNOWN_ISSUE,
    MAX_BUTTON_VALUE,
    Milestone,
    finding_fix,
    milestones,
    parse_finding_key,
)
from bot.core.watches.model import WatchState
from bot.core.watches.spec import StopRules, Target, WatchSpec
from bot.core.watches.summary import Summary
from bot.core.watches.verdict import TARGET_OPEN, TARGET_REACHED, Verdict, said, verdict
from bot.errors import BotError, Fenced, UserError, clip
from bot.records import WatchRow

log = logging.getLogger(__name__)

#: Trailing edge of the watch's state: at most one publish per watch this often. Shorter than the
#: Slack edit interval (`slack.edit_interval`, 2 s), which the coalescer still enforces per card:
#: a publish stores the state and hands the card to the coalescer, so an event is stored within
#: about this long of its arrival (at 2 s, a uniform wait of up to 2 s put the p95 at 2.04 s).
PUBLISH_SECONDS = 1.0
#: A paced publish (the driver's) hands the card to the coalescer only for the card's next edit
#: slot: the publish due then starts this long before the slot opens at the least, and publishes
#: are never brought closer together than this (see `WatchService.publish_wait`).
MIN_GAP = 0.25
#: Starting estimate of a publish's time from its start to the card's hand-off (then measured).
LEAD_START = 0.05
#: A driver refreshes its heartbeat this often; a watch whose heartbeat is older than
#: `STALE_AFTER` has no live owner and is taken by the next process that looks.
HEARTBEAT_SECONDS = 3.0
STALE_AFTER = timedelta(seconds=15)
CARD = "card"
FINAL = "final"
#: A watch samples its unhealthy pods by class (for the run report's "Unhealthy pods over time")
#: when the counts changed since its last sample, at most this often on its clock (and once as it
#: starts and once as it ends), so a watch of 150,000 pods does not write per event.
SAMPLE_SECONDS = 30.0


def subject(watch_id: int) -> str:
    return f"watch:{watch_id}"


@dataclass(frozen=True, kw_only=True)
class Published:
    """What one `publish` did."""

    verdict: Verdict
    posted: int = 0  # thread messages posted now
    milestones: tuple[str, ...] = ()  # keys of the milestones this publish recorded
    card_updated: bool = False
    #: A paced publish kept the card (changed or not) for the publish due at its edit slot.
    card_kept: bool = False
    ended: str = ""  # the end reason when this publish ended the watch
    lost: bool = False  # the watch is no longer ours (ended elsewhere, or taken over)


def target_json(target: Target | None) -> str:
    if target is None:
        return ""
    return json.dumps(
        {
            "nodegroups": list(target.nodegroups),
            "kubelet_version": target.kubelet_version,
            "no_old_nodes": target.no_old_nodes,
            "settle": target.settle.total_seconds(),
            "replaces": [list(pair) for pair in target.replaces],
        }
    )


def stop_json(stop: StopRules) -> str:
    return json.dumps(
        {
            "crashloop_after": stop.crashloop_after.total_seconds(),
            "imagepull_after": stop.imagepull_after.total_seconds(),
            "timeout": stop.timeout.total_seconds() if stop.timeout is not None else None,
        }
    )


def spec_of(row: WatchRow, node_group_labels: Sequence[str]) -> WatchSpec:
    """The core spec of a stored watch."""
    target = None
    if row.target:
        t = json.loads(row.target)
        target = Target(
            nodegroups=tuple(t.get("nodegroups", ())),
            kubelet_version=str(t.get("kubelet_version", "")),
            no_old_nodes=bool(t.get("no_old_nodes", True)),
            settle=timedelta(seconds=float(t.get("settle", 300))),
            replaces=tuple((str(old), str(new)) for old, new in t.get("replaces") or ()),
        )
    stop = StopRules()
    if row.stop:
        s = json.loads(row.stop)
        stop = StopRules(
            crashloop_after=timedelta(seconds=float(s["crashloop_after"])),
            imagepull_after=timedelta(seconds=float(s["imagepull_after"])),
            timeout=timedelta(seconds=float(s["timeout"])) if s.get("timeout") is not None else None,
        )
    return WatchSpec(
        cluster=row.cluster,
        nodegroups=row.nodegroups,
        namespaces=row.namespaces,
        node_group_labels=tuple(node_group_labels),
        target=target,
        stop=stop,
        started_at=row.started_at,
        ends_at=row.ends_at,
    )


def _same(a: Summary, b: Summary) -> bool:
    return dataclasses.replace(a, at=b.at) == b


class WatchService:
    def __init__(
        self,
        *,
        store: Store,
        deliveries: Deliveries | None,
        renderer: Renderer,
        clock: Callable[[], datetime],
        owner: str,
        node_group_labels: Sequence[str],
        stale_after: timedelta = STALE_AFTER,
        rules: Sequence[Rule] = (),
        steps: Callable[[], StepReports] | None = None,
        on_change: Callable[[], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        #: The known-issue rules the watches match (the shipped ones and the team's `rules_files`).
        self.rules = tuple(rules)
        self._rules_by_id = {r.id: r for r in self.rules}
        self.deliveries = deliveries
        self.renderer = renderer
        self.clock = clock
        self.owner = owner
        self.node_group_labels = tuple(node_group_labels)
        self.stale_after = stale_after
        #: Told after a watch is started or asked to end (the duty engine scans now, rather than
        #: at its next scan).
        self.on_change = on_change
        self._cards: dict[int, str] = {}  # the card text last sent, per watch
        #: The runs: a plan step's watch ends its step (`step_ended`); read then, as the runs are
        #: built after the long actions (`bot.frontdoor.assemble`). None: standalone only.
        self.steps = steps
        self._card_refs: dict[int, tuple[str, str]] = {}  # the card's channel and ts, per watch
        self._owed: set[int] = set()  # watches whose newest card waits for its edit slot
        #: Seconds from a publish's start to its card's hand-off (a moving average), per watch:
        #: how long before an edit slot the publish for it starts.
        self.leads: dict[int, float] = {}
        self.monotonic = monotonic
        #: The last sample written (its time and counts), per watch; read from the store once.
        self._samples: dict[int, tuple[datetime, dict[str, int]] | None] = {}

    # -- rows ------------------------------------------------------------------------------------

    def start(
        self,
        *,
        cluster: str,
        channel: str,
        started_by: str,
        nodegroups: Sequence[str] = (),
        namespaces: Sequence[str] = (),
        target: Target | None = None,
        stop: StopRules | None = None,
        duration: timedelta | None = None,
        run_id: str = "",
        step_id: str = "",
    ) -> WatchRow:
        if not channel:
            raise UserError("a watch needs a channel for its card; ask in a channel")
        now = self.clock()
        row = WatchRow(
            id=0,
            cluster=cluster,
            nodegroups=tuple(nodegroups),
            namespaces=tuple(namespaces),
            target=target_json(target),
            stop=stop_json(stop or StopRules()),
            channel=channel,
            run_id=run_id,
            step_id=step_id,
            started_by=started_by,
            started_at=now,
            ends_at=now + duration if duration is not None else None,
        )
        watch_id = self.store.create_watch(row)
        self._changed()
        started = self.store.watch(watch_id)
        assert started is not None
        return started

    def live(self) -> list[WatchRow]:
        return self.store.watches(live=True)

    def get(self, watch_id: int) -> WatchRow:
        row = self.store.watch(watch_id)
        if row is None:
            raise UserError(f"no watch {watch_id}; `/upgrade watches` lists the live ones")
        return row

    def request_end(self, watch_id: int, *, by: str) -> WatchRow:
        row = self.get(watch_id)
        if row.state != "live" or not self.store.request_watch_end(watch_id, by=by):
            raise UserError(f"watch {watch_id} has already ended ({said(row.end_reason or '') or 'ended'})")
        self._changed()
        return self.get(watch_id)

    def spec(self, row: WatchRow) -> WatchSpec:
        return spec_of(row, self.node_group_labels)

    def previous(self, row: WatchRow) -> Summary | None:
        return Summary.from_json(row.summary) if row.summary else None

    def claim(self, row: WatchRow) -> bool:
        now = self.clock()
        return self.store.claim_watch(row.id, owner=self.owner, now=now, stale_before=now - self.stale_after)

    def heartbeat(self, watch_id: int) -> bool:
        return self.store.heartbeat_watch(watch_id, owner=self.owner, now=self.clock())

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- publishing --------------------------------------------------------------------------------

    def catch_up(self, row: WatchRow) -> int:
        """After taking a watch: settle its posts a crash cut off, then post what it still owes."""
        if self.deliveries is None:
            return 0
        self.deliveries.settle(subject(row.id))
        card = self.store.messages(subject(row.id)).get(CARD)
        if card is None or not card.ts:
            return 0  # the next publish posts the card, then the thread
        return self._post_owed(row, card.channel, card.ts)

    def publish_wait(self, row: WatchRow, last: float, every: float) -> float:
        """Seconds until a driver that publishes at most every `every` seconds (its last publish
        started at `last`, on `monotonic`'s clock) publishes next; ≤ 0: now.

        The card's edits go through the coalescer's slots (one edit per card per interval, 2 s).
        Publishing every second regardless, the edit at a slot carried a state up to a second old
        (plus the publish's own time): the Slack edit lagged the events by p95 2.7 s. So the
        publish for the card's next slot is timed to hand the card over just as the slot opens:
        it starts `lead` (the measured time from a publish's start to its hand-off) before it;
        a regular publish that would fall within `MIN_GAP` before that one waits for it, and one
        due after it comes forward. The others store the state (as often as before) but keep the
        card for the slot (`publish(paced=True)`)."""
        now = self.monotonic()
        due = last + every
        slot = self._slot_at(row.id, now)
        lead = self.leads.get(row.id, LEAD_START)
        if slot is not None and last < slot - lead - MIN_GAP:  # nothing handed for it yet
            target = slot - lead
            if due >= target - MIN_GAP:
                due = target
        return due - now

    def _slot_at(self, watch_id: int, now: float) -> float | None:
        """When the card's next edit slot opens (`monotonic`'s clock); None when edits are not
        coalesced or the card is not posted yet."""
        ref = self._card_refs.get(watch_id)
        if ref is None or self.deliveries is None:
            return None
        slot_in = self.deliveries.edit_slot(*ref)
        return None if slot_in is None else now + slot_in

    def _hands_card(self, watch_id: int, started: float) -> bool:
        """Does a paced publish started at `started` hand the card over (for the slot due next)?"""
        slot = self._slot_at(watch_id, started)
        return slot is None or slot - started <= self.leads.get(watch_id, LEAD_START) + MIN_GAP

    def publish(
        self,
        row: WatchRow,
        state: WatchState,
        *,
        force: bool = False,
        paced: bool = False,
        fresh: Callable[[], bool] | None = None,
    ) -> Published:
        """Publish the watch's state now (see the module docstring); `row` is re-read first.

        `paced`: the caller publishes again at `publish_wait`'s times, so the card is handed to the
        coalescer only by the publish due for its next edit slot (and always by one that ends the
        watch); another keeps it for that one.

        `fresh`: folds into `state` what arrived since the publish began (the driver's queue; True
        when it folded anything). A publish that hands the card over calls it once the state is
        stored, just before the card is rendered: the card shows the events up to its hand-off, not
        up to the publish's start (at 5,000 nodes a publish took ~0.1 s, which every edit carried
        as age). The newer state is stored by the next publish, which finds its milestones; a
        newer state whose verdict would end the watch is left for that publish too."""
        started = self.monotonic()
        hand = not paced or self._hands_card(row.id, started)
        now = self.clock()
        current = self.store.watch(row.id) or row
        spec = self.spec(current)
        summary = state.summary(now)
        v = verdict(summary, spec, now)
        before = self.previous(current)
        found = milestones(before, summary, spec, self._rules_by_id)
        end_reason = ""
        if current.end_requested_by:
            end_reason = f"unwatched by <@{current.end_requested_by}>"
        elif v.final:
            end_reason = f"{v.state}: {v.reason}"
        self._sample(row.id, summary, now, final=bool(end_reason))
        if not found and not end_reason and not force and before is not None and _same(before, summary):
            if hand and row.id in self._owed and self.deliveries is not None:
                # Unchanged since a publish that kept its card for this slot: hand that one now.
                try:
                    shown, shown_v, at = self._fresher(state, spec, summary, v, now, fresh)
                    self._card(current, shown, spec, shown_v, end_reason, at)
                except Fenced:
                    raise
                except BotError as exc:
                    log.warning("watch %s: Slack update failed: %s", row.id, exc.user_message)
            return Published(verdict=v, card_kept=row.id in self._owed)
        sub = subject(row.id)
        known = set(self.store.messages(sub))
        new = [m for m in found if m.key not in known]
        outbox, markers = self._outbox(new, row.id)
        if end_reason and FINAL not in known:
            outbox.append((FINAL, json.dumps({"text": self._final_text(summary, spec, v, end_reason, now)})))
        if not self.store.publish_watch(
            row.id,
            owner=self.owner,
            summary=summary.to_json(),
            at=now,
            outbox=outbox,
            markers=markers,
            end_reason=end_reason or None,
        ):
            log.info("watch %s is no longer driven by %s; stopping", row.id, self.owner)
            return Published(verdict=v, lost=True)
        updated = posted = 0
        if self.deliveries is not None:
            try:
                shown, shown_v, at = summary, v, now
                if hand and not end_reason:
                    shown, shown_v, at = self._fresher(state, spec, summary, v, now, fresh)
                channel, ts, updated = self._card(
                    current,
                    shown,
                    spec,
                    shown_v,
                    end_reason,
                    at,
                    hand=hand or bool(end_reason),
                    started=started,
                )
                if ts:
                    posted = self._post_owed(current, channel, ts)
            except Fenced:
                raise
            except BotError as exc:
                # Slack refused or is down: the state is stored and the posts are owed; the next
                # publish (or the next process's catch-up) delivers them.
                log.warning("watch %s: Slack update failed: %s", row.id, exc.user_message)
        if end_reason:
            self.step_ended(current, end_reason)
        return Published(
            verdict=v,
            posted=posted,
            milestones=tuple(m.key for m in new),
            card_updated=bool(updated),
            card_kept=row.id in self._owed,
            ended=end_reason,
        )

    def _fresher(
        self,
        state: WatchState,
        spec: WatchSpec,
        summary: Summary,
        v: Verdict,
        now: datetime,
        fresh: Callable[[], bool] | None,
    ) -> tuple[Summary, Verdict, datetime]:
        """What the card shows when handed over: the state as `fresh` brings it up to now, unless
        nothing came or its verdict would end the watch (the next publish ends it, in order)."""
        if fresh is None or not fresh():
            return summary, v, now
        later = self.clock()
        newer = state.summary(later)
        newer_v = verdict(newer, spec, later)
        if newer_v.final:
            return summary, v, now
        return newer, newer_v, later

    def _sample(self, watch_id: int, summary: Summary, now: datetime, *, final: bool) -> None:
        """Record the unhealthy pods by class when they changed since the last sample and
        `SAMPLE_SECONDS` have passed (the first and the final one at once). Before the summary's
        write, so the final one lands while the watch is live; a watch that is not ours (or is
        full, `MAX_SAMPLES`) writes nothing."""
        counts = {g.reason: g.pods for g in summary.unhealthy if g.pods}
        if watch_id not in self._samples:
            stored = self.store.watch_samples(watch_id)
            self._samples[watch_id] = stored[-1] if stored else None
        last = self._samples[watch_id]
        if last is not None:
            at, was = last
            if final:
                if at >= now:
                    return
            elif counts == was or (now - at).total_seconds() < SAMPLE_SECONDS:
                return
        self.store.add_watch_sample(watch_id, owner=self.owner, at=now, counts=counts)
        # Remembered even when refused (not ours, or full): asked again in SAMPLE_SECONDS at most.
        self._samples[watch_id] = (now, counts)

    def end_unlisted(self, row: WatchRow, *, why: str = "") -> str:
        """End a watch that was asked to end (or ran out of time) while its cluster could not be
        listed (`why`: the last list's error, as the API said it): the last published summary
        stays, with a final line saying so. The end reason, or "" when it is not to end yet (or is
        no longer ours)."""
        now = self.clock()
        current = self.store.watch(row.id) or row
        spec = self.spec(current)
        if current.end_requested_by:
            reason = f"unwatched by <@{current.end_requested_by}>"
        elif spec.deadline is not None and now >= spec.deadline:
            reason = "timed_out: time limit reached"
        else:
            return ""
        reason += (
            f" (the cluster could not be read: {clip(why, 200)})"
            if why
            else " (the cluster could not be read)"
        )
        text = f":checkered_flag: Watch ended — {reason}."
        known = set(self.store.messages(subject(row.id)))
        outbox = [(FINAL, json.dumps({"text": text}))] if FINAL not in known else []
        if not self.store.publish_watch(
            row.id, owner=self.owner, summary=current.summary, at=now, outbox=outbox, end_reason=reason
        ):
            return ""
        card = self.store.messages(subject(row.id)).get(CARD)
        if self.deliveries is not None and card is not None and card.ts:
            try:
                self._post_owed(current, card.channel, card.ts)
            except BotError as exc:
                log.warning("watch %s: Slack post failed: %s", row.id, exc.user_message)
        self.step_ended(current, reason)
        return reason

    def step_ended(self, row: WatchRow, reason: str) -> None:
        """What a watch's end does to a plan step's watch: the step's `action_finished` (target
        reached: succeeded; reached with a known issue still open: as the step's `on_open_findings`
        says, failed by default; anything else: failed); nothing for a standalone watch."""
        if not row.run_id or self.steps is None:
            return
        ok = reason.startswith(TARGET_REACHED + ":")
        try:
            if reason.startswith(TARGET_OPEN + ":"):
                ok = self.steps().succeeds_with_open_findings(row.run_id, row.step_id)
            self.steps().finish_long(row.run_id, row.step_id, ok=ok, detail=f"watch {row.id}: {said(reason)}")
        except BotError as exc:
            log.warning("watch %s: step %s of run %s: %s", row.id, row.step_id, row.run_id, exc.user_message)

    def settle_ended_steps(self) -> None:
        """A step whose watch ended just before a crash, without its step committed: commit it
        now (at start-up, before the runs' recovery looks at running steps)."""
        for row in self.store.watches(live=False, limit=200):
            if row.run_id and row.state == "ended":
                self.step_ended(row, row.end_reason)

    def _outbox(self, new: Sequence[Milestone], watch_id: int) -> tuple[list[tuple[str, str]], list[str]]:
        # A known issue's explanation is a reply of its own (it is long, and people link to it).
        rows = [(m.key, self._known_issue_body(m, watch_id)) for m in new if m.kind == KNOWN_ISSUE]
        lines = [m for m in new if m.kind != KNOWN_ISSUE]
        if not lines:
            return rows, []
        text = self.renderer.render("watch_thread", {"milestones": lines}).text
        body = json.dumps({"text": text})
        if len(lines) == 1:
            return [(lines[0].key, body), *rows], []
        # Several at once: one reply, keyed on the first; every milestone's own key is recorded.
        return [(f"batch:{lines[0].key}", body), *rows], [m.key for m in lines]

    def _known_issue_body(self, m: Milestone, watch_id: int) -> str:
        """A known issue's post: its text, and blocks carrying a Fix… button when its rule names a
        fix for this workload (the button's value is short: the watch and the finding's key; the
        click finds the rule and the workload again from them)."""
        parsed = parse_finding_key(m.key)
        fix = finding_fix(self._rules_by_id.get(parsed[0]), parsed[1]) if parsed else None
        value = f"{watch_id}|{m.key}"
        if fix is None or len(value) > MAX_BUTTON_VALUE:
            return json.dumps({"text": self.renderer.render("watch_thread", {"milestones": [m]}).text})
        head, sep, remedy = m.text.partition("\n*What to do*")
        rendered = self.renderer.render(
            "watch_known_issue",
            {
                "text": m.text,
                "sections": [head, sep.lstrip("\n") + remedy] if sep else [m.text],
                "fix": {"value": value, "command": fix.command, "rule": fix.rule_id},
            },
        )
        return json.dumps({"text": rendered.text, "blocks": rendered.blocks})

    def _final_text(self, summary: Summary, spec: WatchSpec, v: Verdict, reason: str, now: datetime) -> str:
        groups = ", ".join(f"{g.name} {g.on_target}/{g.total}" for g in summary.groups) or "no nodes"
        return (
            f":checkered_flag: Watch ended — {said(reason)}. Final: {len(summary.nodes)} nodes ({groups}), "
            f"{summary.pods} pods, {summary.unhealthy_pods} unhealthy."
        )

    def card_context(
        self,
        summary: Summary,
        spec: WatchSpec,
        v: Verdict,
        end_reason: str,
        now: datetime,
        *,
        watch_id: int = 0,
        run_id: str = "",
    ) -> dict[str, Any]:
        context = card_context(summary, spec, v, now)
        if end_reason and not v.final:
            # "unwatched by <@U…>": the card escapes its reason and names the people in it by id.
            said_by = re.sub(r"<@([UW][A-Z0-9]+)>", r"\1", end_reason)
            context.update(state="ended", reason=said_by, final=True, icon=":stop_button:")
        if watch_id and not run_id and not context["final"]:
            # A standalone watch's card carries its Stop button; a plan step's watch ends with its step.
            context["stop"] = {"value": str(watch_id)}
        return context

    def _card(
        self,
        row: WatchRow,
        summary: Summary,
        spec: WatchSpec,
        v: Verdict,
        end_reason: str,
        now: datetime,
        *,
        hand: bool = True,
        started: float | None = None,
    ) -> tuple[str, str, bool]:
        assert self.deliveries is not None
        ref = self._card_refs.get(row.id)
        if not hand and ref is not None:
            self._owed.add(row.id)  # rendered and handed over by the publish due for its slot
            return ref[0], ref[1], False
        rendered = self.renderer.render(
            "watch_card",
            self.card_context(summary, spec, v, end_reason, now, watch_id=row.id, run_id=row.run_id),
        )
        sub = subject(row.id)
        run_thread = self._run_thread(row)
        if row.run_id and not run_thread:
            return "", "", False  # the run's card is not posted yet; the next publish tries again
        posted = self.deliveries.post_once(
            sub, CARD, row.channel, rendered.text, blocks=rendered.blocks, thread_ts=run_thread
        )
        if posted is not None:
            self._cards[row.id] = rendered.text
            self._card_refs[row.id] = (posted.channel, posted.ts)
            return posted.channel, posted.ts, True
        card = self.store.messages(sub).get(CARD)
        if card is None or not card.ts:
            return "", "", False  # in flight elsewhere, or a tombstone settled at the next catch-up
        self._card_refs[row.id] = (card.channel, card.ts)
        self._owed.discard(row.id)
        if self._cards.get(row.id) != rendered.text:
            if started is not None:
                took = self.monotonic() - started
                self.leads[row.id] = 0.8 * self.leads.get(row.id, took) + 0.2 * took
            # Coalesced where the poster is; a card someone deleted is posted again once (its
            # reference re-pointed, a link in its thread), as the run cards are.
            self.deliveries.edit(card.channel, card.ts, rendered.text, blocks=rendered.blocks)
            self._cards[row.id] = rendered.text
            return card.channel, card.ts, True
        return card.channel, card.ts, False

    def _run_thread(self, row: WatchRow) -> str:
        """A plan step's watch streams into its RUN's thread (its card there, edited in place, and
        its milestones), not a second card in the channel; "" for a standalone watch."""
        if not row.run_id:
            return ""
        # The card and its posts again say where the thread is: not every message of the run.
        refs = self.store.messages(row.run_id, prefix="card")
        card = refs.get("card")
        return (thread_root(refs, "card") or card.ts) if card is not None else ""

    def _post_owed(self, row: WatchRow, channel: str, card_ts: str) -> int:
        """Post the watch's outbox rows not posted yet into the card's thread, oldest first."""
        assert self.deliveries is not None
        refs = self.store.messages(subject(row.id), posted_lines=False)
        owed = sorted(
            (r for r in refs.values() if r.body and not r.ts and not r.owner),
            key=lambda r: (r.key == FINAL, r.claimed_at or row.started_at, r.key),
        )
        posted = 0
        # The thread stays where it began, even when the card was deleted and posted again.
        root = thread_root(refs, CARD) or card_ts
        for ref in owed:
            thread = self._run_thread(row) or root
            if self.deliveries.post_outbox(ref, channel, thread_ts=thread) is not None:
                posted += 1
        return posted
