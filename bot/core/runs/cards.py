"""A run's face in Slack: the card (edited in place), its thread, and the gate messages.

Called by the run service after every commit. Every post goes through `bot.core.delivery` (a
claimed key, Slack metadata naming it, the ts recorded), so nothing is posted twice and a crash
mid-post is settled after the restart. The thread lines a transition owes (`event:VERSION:N`) are
rendered and written as outbox rows *in the commit itself*, so a crash between the commit and
Slack cannot lose them; publishing posts every owed row in order. The card is edited in place
after every commit, so it always shows the truth; gate messages are derived from the state.
A Slack failure never undoes a commit: Slack catches up on the next change, the timer, or at restart.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.core.delivery import Deliveries, FileUploader, thread_root, undelivered_line
from bot.core.durations import in_words
from bot.core.evidence.view import WAIVED_BY, EvidenceSource, evidence_blocks, now_line
from bot.core.jobs.common import APPROVING
from bot.core.live import LiveSection, LiveSource
from bot.core.people import USER_ID, Directory
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs import pipelines, prs
from bot.core.runs.chosen import WAIVED, Chosen, chosen_of
from bot.core.runs.paused import ending, paused_view
from bot.core.runs.prs import PullRequests
from bot.errors import BotError, Fenced, SlackCallFailed
from bot.records import FileAttachment, MessageRef

if TYPE_CHECKING:
    from bot.core.runs.dryrun import GateDryRuns

log = logging.getLogger(__name__)


#: A run of this many finished (or pending) steps in a row collapses into one line on the card.
COLLAPSE_AT = 3
#: How many characters of step ids a collapsed line lists before it says "…" and the last id.
IDS_BUDGET = 110
#: States a step is shown in full in, wherever it is: what someone must look at.
_ALWAYS_FULL = frozenset({"failed", "skipped", "interrupted", "awaiting_approval", "running"})


def _ids(ids: Sequence[str]) -> dict[str, Any]:
    """The ids a collapsed line lists: all when they fit the budget, else the first one and as
    many more as fit, then (after "…") the last one."""
    if sum(len(i) + 4 for i in ids) <= IDS_BUDGET:
        return {"shown": list(ids), "last": ""}
    shown = [ids[0]]
    size = len(ids[0]) + len(ids[-1]) + 10
    for step_id in ids[1:-1]:
        if size + len(step_id) + 4 > IDS_BUDGET:
            break
        shown.append(step_id)
        size += len(step_id) + 4
    return {"shown": shown, "last": ids[-1]}


def step_lines(rows: Sequence[Mapping[str, Any]], current: int) -> list[dict[str, Any]]:
    """The card's step list, one entry a line: the step now and the next one, and every step that
    failed, was skipped or was interrupted, or succeeded leaving something for people, in full
    (`kind` "step"); runs of finished or pending steps collapse (`kind` "group": one line for
    `COLLAPSE_AT` or more, else a short line each)."""
    lines: list[dict[str, Any]] = []
    group: list[Mapping[str, Any]] = []

    def close() -> None:
        if not group:
            return
        if len(group) >= COLLAPSE_AT:
            ids = [str(r["id"]) for r in group]
            lines.append({"kind": "group", "state": group[0]["state"], "count": len(group), **_ids(ids)})
        else:
            lines.extend({"kind": "short", "row": r} for r in group)
        group.clear()

    for i, row in enumerate(rows):
        role = "now" if i == current else "next" if i == current + 1 else ""
        if role or row["state"] in _ALWAYS_FULL or row.get("left_behind") or row.get("chosen"):
            close()
            lines.append({"kind": "step", "row": row, "role": role})
            continue
        if group and group[0]["state"] != row["state"]:
            close()
        group.append(row)
    close()
    # Which lines come before the step now (the history) and which from it on (what is ahead):
    # a card that must shorten drops the oldest history, never the step now.
    seen_now = current >= len(rows)
    for line in lines:
        seen_now = seen_now or (line["kind"] == "step" and line["role"] == "now")
        line["ahead"] = seen_now and current < len(rows)
    return lines


def _progress(
    run: R.Run,
    rows: Sequence[Mapping[str, Any]],
    current: int,
    now: datetime,
    window: tuple[datetime, datetime] | None,
) -> dict[str, Any]:
    """The card's progress line: done · ▶ now · to go, and the time left in the run's window (its
    schedule's, else the plan's); before the window opens (a run started early, by override),
    when it opens instead: "ends in 20h" of a 3-hour window not yet open read as 20 hours left."""
    finished = [r for r in rows if r["state"] in ("succeeded", "skipped")]
    start, end = window or (run.plan.window.start, run.plan.window.end)
    left = end - now
    ahead = start - now
    return {
        "done": len(finished),
        "skipped": sum(1 for r in finished if r["state"] == "skipped"),
        "total": len(rows),
        "to_go": sum(1 for r in rows[current + 1 :] if r["state"] == "pending"),
        "window_end": end,
        # Whole minutes: a card is edited every few minutes at most, seconds would lie.
        "left": in_words(timedelta(minutes=int(abs(left).total_seconds() // 60))),
        "over": left.total_seconds() < 0,
        "window_start": start,
        "opens_in": in_words(timedelta(minutes=int(ahead.total_seconds() // 60)))
        if ahead.total_seconds() >= 60
        else "",
    }


#: How the card titles a long action whose driver stopped, while its run can go on.
INTERRUPTED = " (interrupted: `/upgrade resume` continues it)"


def card_context(
    run: R.Run,
    now: datetime,
    live: Sequence[LiveSection] = (),
    *,
    waive_roles: Sequence[str] = ("primary", "shadow"),
    waiting_on_evidence: str = "",
    window: tuple[datetime, datetime] | None = None,
) -> dict[str, Any]:
    """What the card template shows of a run at `now`, with the live sections of its long actions;
    `window`: the start and end of the window the run was scheduled in, when it was (else the plan's);
    `waive_roles` ask a Required finding's waiver (the settings' `actions.approvers`);
    `waiting_on_evidence` is the Now line of a running step that waits on evidence."""
    cur = run.current
    ended = run.state in (R.RunState.ABORTED, R.RunState.COMPLETED)
    gate: dict[str, Any] | None = None
    if cur is not None and run.state is R.RunState.ACTIVE and run.phase(cur) is not None:
        # The card carries the open gate's buttons too (same value as in the thread).
        gate = {
            "step": cur.step_id,
            "phase": run.phase(cur),
            "value": R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch).encode(),
            "on_failure": run.plan.step(cur.step_id).on_failure,
            # A step whose action can pass disruption budgets offers "Approve with force…".
            "force": run.phase(cur) == "start" and R.offers_force(run.plan.step(cur.step_id)),
        }
    rows = summary_rows(run, now)
    index = next((i for i, sr in enumerate(run.steps) if sr is cur), len(run.steps))
    return {
        "run": run,
        "plan": run.plan,
        "rows": rows,
        "lines": step_lines(rows, index),
        "progress": _progress(run, rows, index, now, window),
        "now_row": rows[index] if cur is not None else None,
        "current": cur.step_id if cur else "",
        "gate": gate,
        "zone": run.plan.window.timezone,
        # Thread posts set aside as dead letters (`undelivered_line`); filled in by `RunCards.context`.
        "undelivered": None,
        "roster": run.roster,
        # An interrupted job goes on with `resume` while the run can; an ended run's stays as it is.
        "live": [
            dataclasses.replace(section, title=section.title + (" (interrupted)" if ended else INTERRUPTED))
            if section.interrupted
            else section
            for section in live
        ],
        "waiting_on_evidence": waiting_on_evidence,
        # A paused run says why and who may move it on; a completed one, what it went past.
        "paused": paused_view(run, waive_roles=waive_roles),
        "ending": ending(run),
    }


#: Events that get a line in the run's thread (a refusal is told to the clicker; a gate has its
#: own message) and those also broadcast to the channel.
_NOT_IN_THREAD = frozenset({"refused", "gate_opened"})
_BROADCAST = frozenset({"step_failed", "run_aborted", "step_interrupted", "window_ended"})
#: The events an action's files (its report) are uploaded under: how its step ended.
_STEP_ENDED = frozenset({"step_succeeded", "step_failed"})


def dry_run_view(dry_run: Mapping[str, Any], zone: str) -> dict[str, Any]:
    """A kept dry run as the gate template shows it: its time as a Slack date token (each reader's
    zone) whose fallback, for the terminal and notifications, is the plan's zone to the second."""
    at = datetime.fromisoformat(str(dry_run["at"]).replace("Z", "+00:00"))
    local = at.astimezone(ZoneInfo(zone))
    return {
        **dry_run,
        "ts": int(at.timestamp()),
        "fallback": f"{local:%H:%M:%S} {zone}",
    }


def _event_order(key: str) -> tuple[int, int, int]:
    # "event:VERSION:N" (and its files, "event:VERSION:N:file:J"): thread lines go out in commit
    # order, then in order within the commit, each line's files right after it.
    parts = key.split(":")
    return int(parts[1]), int(parts[2]), int(parts[4]) + 1 if len(parts) == 5 else 0


def file_body(attachment: FileAttachment) -> str:
    """An outbox row that uploads `attachment` into the thread (`Deliveries.post_outbox`)."""
    return json.dumps(
        {
            "file": {
                "filename": attachment.filename,
                "title": attachment.title,
                "content": base64.b64encode(attachment.content).decode(),
            }
        }
    )


#: The message key of a run's report in its thread: claimed once, so it is uploaded once.
REPORT_KEY = "report"
#: The `ts` recorded for the report's key once uploaded (a file share has no message of ours).
REPORT_UPLOADED = "uploaded"
#: The states in which a run has ended and its report goes into the thread.
ENDED = (R.RunState.COMPLETED, R.RunState.ABORTED)
#: Slack's answers that mean the run's channel is gone for the bot, and how its people are told.
CHANNEL_LOST = {
    "is_archived": "was archived",
    "channel_not_found": "cannot be found (deleted, or private without the bot)",
    "not_in_channel": "no longer has the bot in it",
}


def gate_key(sr: R.StepRun) -> str:
    """The key of the message of a step's gate open at this epoch (a new one at each phase)."""
    return f"gate:{sr.step_id}:{sr.epoch}"


class RunCards:
    """Publishes committed runs to Slack: one card per run, a thread of events, gate messages."""

    def __init__(
        self,
        *,
        deliveries: Deliveries,
        renderer: Renderer,
        clock: Callable[[], datetime],
        operations_channel: str | None = None,
        dry_runs: GateDryRuns | None = None,
        files: FileUploader | None = None,
        live: LiveSource | None = None,
        waive_roles: Sequence[str] = ("primary", "shadow"),
        directory: Directory | None = None,
        evidence: EvidenceSource | None = None,
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.deliveries = deliveries
        #: Reads the PRs plan steps name (`github:`), shown on the card and the gate; None: off.
        self.pull_requests = pull_requests
        #: Names the report's people (`users.info`, cached in the store); None: the cache alone.
        self.directory = directory
        #: Who asks a Required finding's waiver (`actions.approvers`): named on a paused card.
        self.waive_roles = tuple(waive_roles)
        #: Uploads the run's report into its thread when the run ends; None: no report posted.
        self.files = files
        self.store = deliveries.store
        self.poster = deliveries.poster
        self.renderer = renderer
        self.clock = clock
        self.operations_channel = operations_channel
        #: Reads (once per gate) and keeps what a step that changes the cluster will touch; None
        #: where no cluster is in reach (the gate then shows no dry run).
        self.dry_runs = dry_runs
        #: The live sections of a run's long actions (the cluster jobs).
        self.live = live
        #: The evidence a step's gate and the card's Now line show (alerts, analyses); None: none.
        self.evidence = evidence
        #: Run id → why this process's last publish of it failed (`not_shown`); only for the reply
        #: of the command at hand: Slack catches up from the database, not from this.
        self._failed: dict[str, str] = {}

    def context(self, run: R.Run, refs: Mapping[str, MessageRef] | None = None) -> dict[str, Any]:
        """The card's context now, live sections included, and a line for the thread posts that
        were set aside (`refs`: the run's message references, when already read)."""
        now = self.clock()
        undelivered = self._undelivered(self._refs(run.id) if refs is None else refs)
        return self._context(run, now, undelivered)

    def _context(self, run: R.Run, now: datetime, undelivered: dict[str, Any] | None) -> dict[str, Any]:
        """The card's context at `now`, with the live sections and the rest read now and the line
        for the thread posts set aside (`_undelivered`) given."""
        cur = run.current
        waiting = ""
        if self.evidence is not None and cur is not None and cur.state is R.StepState.RUNNING:
            view = self.evidence(run.id, (cur.step_id,))
            if view is not None and (
                (view.alerts is not None and view.alerts.outcome in ("Running", "Inconclusive"))
                or any(a.outcome in ("Running", "Inconclusive", "Error") for a in view.analyses)
            ):
                waiting = now_line(view, now, markup=False)
        context = card_context(
            run,
            now,
            self.live(run.id) if self.live is not None else (),
            waive_roles=self.waive_roles,
            waiting_on_evidence=waiting,
            window=(scheduled.window_start, scheduled.window_end)
            if (scheduled := self.store.schedule_of_run(run.id))
            else None,
        )
        context["undelivered"] = undelivered
        # Each step's latest build a pipeline hook reported (issue 43), on the step's line.
        context["builds"] = pipelines.latest_builds(self.store.pipeline_builds(run.id))
        # The step now's PR (issue 43): read for the step people are looking at, not for every one.
        context["prs"] = {}
        # Without `github:` a plan's `pr:` is shown nowhere (the shipped plans name PRs), unless
        # its `done` requires something of the PR: then the card says it cannot be read.
        if cur is not None:
            ref = run.plan.step(cur.step_id).pr
            if ref is not None and (self.pull_requests is not None or ref.require):
                pr, error = prs.read(self.pull_requests, ref)
                context["prs"][cur.step_id] = prs.view(ref, pr, error=error)
        return context

    def _refs(self, run_id: str) -> dict[str, MessageRef]:
        # Its thread lines already posted are neither owed nor needed to find the card, its gates
        # or its thread: left out, or each card edit of a long run read the whole thread.
        return self.store.messages(run_id, posted_lines=False)

    def _undelivered(self, refs: Mapping[str, MessageRef]) -> dict[str, Any] | None:
        """The card's line for its thread's dead letters (`undelivered_line`); None: none, or no
        card posted yet."""
        card = refs.get("card")
        if card is None or not card.ts:
            return None
        # Every dead letter of the card's thread: the run's own lines, its jobs' and watches'.
        thread = thread_root(refs, "card") or card.ts
        return undelivered_line(self.store.outbox_dead_in(channel=card.channel, thread_ts=thread))

    def _edit_card(
        self, run: R.Run, card: MessageRef, refs: Mapping[str, MessageRef]
    ) -> dict[str, Any] | None:
        """Edit the posted card to show `run` now; the undelivered line it shows."""
        now = self.clock()
        shown = self._undelivered(refs)

        def body() -> tuple[str, list[dict[str, Any]] | None]:
            rendered = self.renderer.render("runs/card", self._context(run, now, shown))
            return rendered.text, rendered.blocks

        # Rendered only if shown where the poster renders edits late (a rehearsal prints the card
        # at its end only); coalesced when the poster is; a card someone deleted is posted again.
        self.deliveries.edit_later(card.channel, card.ts, body)
        return shown

    def channel_for(self, run: R.Run) -> str | None:
        return run.plan.operations_channel or self.operations_channel

    def thread_lines(
        self,
        run: R.Run,
        events: Sequence[R.Event],
        version: int,
        files: Sequence[FileAttachment] = (),
    ) -> list[tuple[str, str]]:
        """The (key, body) outbox rows a commit at `version` owes the run's thread, rendered now;
        `files` (an action's report) are uploaded right after the line saying how its step ended."""
        lines = []
        owed = list(files)
        for i, event in enumerate(events):
            if event.kind in _NOT_IN_THREAD:
                continue
            rendered = self.renderer.render(
                "runs/event",
                {
                    "event": event,
                    "run": run,
                    "zone": run.plan.window.timezone,
                    "at": self.clock(),
                    "ending": ending(run),
                },
            )
            body = {"text": rendered.text, "blocks": rendered.blocks, "broadcast": event.kind in _BROADCAST}
            lines.append((f"event:{version}:{i}", json.dumps(body)))
            if owed and event.kind in _STEP_ENDED:
                lines.extend((f"event:{version}:{i}:file:{j}", file_body(f)) for j, f in enumerate(owed))
                owed = []
        return lines

    def publish(self, run: R.Run) -> None:
        """Bring Slack up to date with a committed run: card, thread lines owed, gate messages."""
        channel = self.channel_for(run)
        if not channel:
            return
        try:
            self._publish(run, channel)
        except BotError as exc:
            # The run is committed; Slack catches up on the next change, the timer, or at restart.
            log.warning("could not update Slack for run %s: %s", run.id, exc.user_message)
            self._failed[run.id] = exc.user_message
            if isinstance(exc, SlackCallFailed) and exc.code in CHANNEL_LOST:
                self._channel_lost(run, channel, exc.code)
        else:
            self._failed.pop(run.id, None)

    def _channel_lost(self, run: R.Run, channel: str, code: str) -> None:
        """The run's channel is gone for the bot (archived, deleted, the bot removed): nobody sees
        its card, gates or questions, while the run goes on. Its primary and coordinator are told
        directly, once each per cause; best effort (the log has it too)."""
        if run.state in ENDED:
            return
        text = (
            f":warning: Run {run.id} ({run.plan.name} on {run.plan.cluster}): its channel <#{channel}> "
            f"{CHANNEL_LOST[code]}, so nobody sees its card, gates or questions there. The run goes on (a "
            "running drain or watch too): invite the bot back (`/invite @upgrade-bot`), or pause it from "
            f"another channel with `/upgrade pause {run.id} --reason …`."
        )
        people = [
            p for role in ("primary", "coordinator") for p in run.roster.get(role, ()) if USER_ID.match(p)
        ]
        for user in dict.fromkeys(people):
            try:
                self.deliveries.post_once(run.id, f"channel-lost:{code}:{user}", user, text)
            except BotError as exc:
                log.warning(
                    "run %s: could not tell %s its channel is lost: %s", run.id, user, exc.user_message
                )

    def not_shown(self, run_id: str) -> str:
        """Why this process's last attempt to bring Slack up to date with the run failed ("" when
        it did not): the reply to the command that started it says so, naming the channel."""
        return self._failed.get(run_id, "")

    def _post_once(
        self,
        run: R.Run,
        key: str,
        channel: str,
        template: str,
        context: Mapping[str, Any],
        *,
        thread_ts: str = "",
    ) -> str | None:
        rendered = self.renderer.render(template, context)
        posted = self.deliveries.post_once(
            run.id, key, channel, rendered.text, blocks=rendered.blocks, thread_ts=thread_ts
        )
        return posted.ts if posted else None

    def _publish(self, run: R.Run, channel: str) -> None:
        refs = self.deliveries.settle(run.id, posted_lines=False)
        card = refs.get("card")
        edit = card is not None and bool(card.ts)
        if card is None:
            if self._post_once(run, "card", channel, "runs/card", self.context(run, refs)) is None:
                return  # another worker claimed it a moment ago and is posting it
            refs = self._refs(run.id)
            card = refs["card"]
        elif not card.ts:
            return  # in flight in a live process; its publish (or the timer) finishes the rest
        # The card first: its edit is queued before the thread lines, which are paced a second
        # apart, so the card shows the run's state while they go out (and whether any fail).
        shown = self._edit_card(run, card, refs) if edit else None
        # The thread stays where it began, even when the card was deleted and posted again.
        thread = thread_root(refs, "card") or card.ts
        # Thread lines, from the outbox rows their commits wrote: every one, once, in order (a
        # line that keeps failing is set aside, and the card says so).
        owed = sorted(
            (ref for key, ref in refs.items() if key.startswith("event:") and not ref.ts and not ref.owner),
            key=lambda ref: _event_order(ref.key),
        )
        failed: BotError | None = None
        troubled = False
        try:
            for ref in owed:
                # None: set aside, or another process's to post.
                troubled |= self.deliveries.post_outbox(ref, card.channel, thread_ts=thread) is None
        except Fenced:
            raise
        except BotError as exc:
            failed, troubled = exc, True  # the line waits for the next pass
        if troubled:
            # A line may have been set aside just now: the card says so (the edit replaces the
            # one queued above when it is still waiting for its slot).
            fresh = self._refs(run.id)
            if self._undelivered(fresh) != shown:
                self._edit_card(run, card, fresh)
        if failed is not None:
            raise failed
        if run.state in ENDED and self.files is not None and REPORT_KEY not in refs:
            self._post_report(run, card.channel, thread)
        # Gate messages: retire the buttons of gates that closed (every one, once the run ended:
        # an aborted run's open gate kept Approve and Reject), post the open one. A gate retired
        # (or being retired) already is left alone: claiming it again on every publish only to be
        # refused made each card edit of a long run cost a database write per closed gate.
        for sr in run.steps:
            for key, ref in refs.items():
                closed = key.startswith(f"gate:{sr.step_id}:") and (key != gate_key(sr) or run.state in ENDED)
                if closed and ref.ts and not key.endswith(":retired") and f"{key}:retired" not in refs:
                    self._retire(run, sr, ref.channel, ref.ts, key, refs)
        cur = run.current
        if run.state is R.RunState.PAUSED and cur is not None and run.phase(cur) is not None:
            # Paused with its gate open: the gate's message says so, with Resume instead of its
            # buttons, until the resume posts it again at the thread's end (`machine.resume`).
            posted = refs.get(gate_key(cur))
            held = self._held_key(run, cur)
            if posted is not None and posted.ts and held not in refs:
                with self.deliveries.tenure.reserve(self.deliveries.send_timeout):
                    self._edit_gate_once(
                        run, held, posted.channel, posted.ts, lambda: self._held_context(run, cur)
                    )
            return
        if run.state is R.RunState.ACTIVE and cur is not None and run.phase(cur) is not None:
            key = gate_key(cur)
            gate_shown = self._gate_shown_key(run, cur)
            if key in refs:
                # Posted (or in flight): edited when whom it waits for changed (an approval, a
                # handoff), so its first line never names people it no longer waits for.
                if refs[key].ts and gate_shown not in refs:
                    self._reshow_gate(run, cur, refs[key].channel, refs[key].ts, gate_shown, refs)
                return
            # Read here (a worker, the triggers door, a job's driver; never a thread that acks
            # Slack), once per gate: kept in the database, so a restart posts the same message.
            dry_run = self.dry_runs.for_gate(run, cur) if self.dry_runs is not None else None
            ts = self._post_once(
                run,
                key,
                card.channel,
                "runs/gate",
                {
                    **self._gate_context(run, cur, dry_run),
                    "reopened": _earlier(run, cur, cur.epoch - 1, refs),
                },
                thread_ts=thread,
            )
            if ts is not None and self.store.claim_message(
                run_id=run.id,
                key=gate_shown,
                channel=card.channel,
                thread_ts="",
                at=self.clock(),
                owner=self.deliveries.owner,
            ):
                self.store.record_message(run_id=run.id, key=gate_shown, channel=card.channel, ts=ts)

    def _gate_shown_key(self, run: R.Run, sr: R.StepRun) -> str:
        """The key of what the open gate's message shows of its people: whom it waits for, and who
        holds its roles (`shown:` keys are edits, not posts)."""
        context = self._gate_people(run, sr)
        digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).hexdigest()[:12]
        return f"shown:{sr.step_id}:{sr.epoch}:{run.phase(sr)}:{digest}"

    def _held_key(self, run: R.Run, sr: R.StepRun) -> str:
        """The key of the held gate's message (a paused run): edited again when the people it
        names change — a role handed off during the pause (`shown:` keys are edits, not posts)."""
        people = {
            **self._gate_people(run, sr),
            "resumers": self._resumers(run, sr),
        }
        digest = hashlib.sha256(json.dumps(people, sort_keys=True).encode()).hexdigest()[:12]
        return f"shown:{sr.step_id}:{sr.epoch}:paused:{digest}"

    @staticmethod
    def _resumers(run: R.Run, sr: R.StepRun) -> list[str]:
        # Resume is for the step's (start) gate, as on the card (`machine.paused_refusal`).
        return sorted({p for role in run.plan.step(sr.step_id).gate.roles for p in run.roster.get(role, ())})

    def _gate_people(self, run: R.Run, sr: R.StepRun) -> dict[str, Any]:
        gate = run.gate_for(sr)
        return {
            "people": sorted({p for role in (gate.roles if gate else ()) for p in run.roster.get(role, ())}),
            "waiting_on": R.waiting_on(run, sr, self.clock()),
        }

    def _reshow_gate(
        self, run: R.Run, sr: R.StepRun, channel: str, ts: str, shown: str, refs: Mapping[str, MessageRef]
    ) -> None:
        """Edit the open gate's message to whom it waits for now; once per state (claimed first)."""

        def context() -> Mapping[str, Any]:
            dry_run = self.dry_runs.for_gate(run, sr) if self.dry_runs is not None else None
            return {**self._gate_context(run, sr, dry_run), "reopened": _earlier(run, sr, sr.epoch - 1, refs)}

        with self.deliveries.tenure.reserve(self.deliveries.send_timeout):
            self._edit_gate_once(run, shown, channel, ts, context)

    def _post_report(self, run: R.Run, channel: str, thread: str) -> None:
        """The run ended: its timeline picture into the thread, the HTML and Markdown beside it —
        once (the key is claimed first; a claim a dead process left is settled and tried again)."""

        assert self.files is not None
        # Claimed and uploaded in one term of this replica's lease (`bot.core.tenure`).
        with self.deliveries.tenure.reserve(self.deliveries.send_timeout):
            self._upload_report(run, channel, thread)

    def _upload_report(self, run: R.Run, channel: str, thread: str) -> None:
        from bot.core.runs import report as rp

        assert self.files is not None
        if not self.store.claim_message(
            run_id=run.id,
            key=REPORT_KEY,
            channel=channel,
            thread_ts=thread,
            at=self.clock(),
            owner=self.deliveries.owner,
        ):
            return
        try:
            built = rp.build_report(self.store, run.id, now=self.clock(), directory=self.directory)
            comment = self.renderer.render("report", rp.reply_context(built)).text
            for i, (name, body, title, _filetype) in enumerate(rp.attachments(built)):
                self.files.upload_file(
                    channel, name, body, title=title, thread_ts=thread, comment=comment if i == 0 else None
                )
        except BaseException:
            self.store.release_message(run_id=run.id, key=REPORT_KEY, owner=self.deliveries.owner)
            raise
        self.store.record_message(run_id=run.id, key=REPORT_KEY, channel=channel, ts=REPORT_UPLOADED)

    def _gate_context(
        self, run: R.Run, sr: R.StepRun, dry_run: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        step = run.plan.step(sr.step_id)
        gate = run.gate_for(sr)
        phase = run.phase(sr) or ""
        return {
            "run": run,
            "step": step,
            "phase": phase,
            "gate": gate.describe() if gate else "",
            "people": sorted({p for role in (gate.roles if gate else ()) for p in run.roster.get(role, ())}),
            "value": R.ButtonRef(run_id=run.id, step_id=sr.step_id, epoch=sr.epoch).encode(),
            "waiting_on": R.waiting_on(run, sr, self.clock()),
            "state": str(sr.state),
            "open": True,
            "force": phase == "start" and R.offers_force(step),
            "dry_run": dry_run_view(dry_run, run.plan.window.timezone) if dry_run is not None else None,
            "evidence": self._evidence_blocks(run, sr),
            **self._pr_and_pipeline(run, sr, phase),
        }

    def _pr_and_pipeline(self, run: R.Run, sr: R.StepRun, phase: str) -> dict[str, Any]:
        """The gate's PR (its state, merge commit, checks, approvals) and, when it opens again
        after a failed build (a re-run), the revision that build ran at against the PR's merge
        commit."""
        ref = run.plan.step(sr.step_id).pr
        if ref is not None and self.pull_requests is None and not ref.require:
            ref = None  # as on the card: without `github:`, only a PR `done` depends on is shown
        pr, error = prs.read(self.pull_requests, ref, fresh=True) if ref is not None else (None, "")
        rerun = None
        if phase == "start" and sr.note.startswith(R.FAILED_BEFORE):
            merge_commit = pr.merge_commit if pr is not None else ""
            rerun = pipelines.rerun_view(
                self.store.pipeline_builds(run.id), sr.step_id, merge_commit=merge_commit
            )
        return {"pr": prs.view(ref, pr, error=error) if ref is not None else None, "pipeline": rerun}

    def _evidence_blocks(self, run: R.Run, sr: R.StepRun) -> list[dict[str, Any]]:
        """The gate's evidence: its own step's, or the step's just before (the settle check the
        next step is decided on)."""
        if self.evidence is None:
            return []
        ids = [s.step_id for s in run.steps]
        at = ids.index(sr.step_id)
        view = self.evidence(run.id, [sr.step_id] + ([ids[at - 1]] if at else []))
        return evidence_blocks(view, run.plan.window.timezone) if view else []

    def _retire(
        self, run: R.Run, sr: R.StepRun, channel: str, ts: str, key: str, refs: Mapping[str, MessageRef]
    ) -> None:
        """Edit a closed gate's message: no buttons, and what became of the step — or, when a
        resume posted the same gate again below it, that it is superseded."""
        epoch = key.removeprefix(f"gate:{sr.step_id}:")
        again = run.state is R.RunState.ACTIVE and run.current == sr and epoch.isdigit()
        superseded = _earlier(run, sr, int(epoch), refs) if again else None

        def context() -> Mapping[str, Any]:
            return {**self._gate_context(run, sr), "open": False, "superseded": superseded}

        # Claimed and edited in one term of this replica's lease (`bot.core.tenure`).
        with self.deliveries.tenure.reserve(self.deliveries.send_timeout):
            self._edit_gate_once(run, f"{key}:retired", channel, ts, context)

    def _held_context(self, run: R.Run, sr: R.StepRun) -> dict[str, Any]:
        """The open gate of a paused run: who paused it (the audit log's last pause) and when, and
        the approvals given on it so far (they will not count once it is resumed)."""
        paused = [e for e in self.store.audit_entries(run_id=run.id) if e.subcommand == "run_paused"]
        last = paused[-1] if paused else None
        return {
            **self._gate_context(run, sr),
            "open": False,
            "paused": {
                "by": last.user_id if last is not None and last.user_id != "bot" else "",
                "at": last.at if last is not None else None,
                "votes": sorted({a.user_id for a in run.votes(sr, run.phase(sr) or "")}),
                "resumers": self._resumers(run, sr),
            },
        }

    def _edit_gate_once(
        self, run: R.Run, key: str, channel: str, ts: str, context: Callable[[], Mapping[str, Any]]
    ) -> None:
        """Edit a gate's message once under `key` (claimed first, recorded once made): to whom it
        waits for now, or retired. `context` is read only by the one who claimed it."""
        if not self.store.claim_message(
            run_id=run.id,
            key=key,
            channel=channel,
            thread_ts="",
            at=self.clock(),
            owner=self.deliveries.owner,
        ):
            return
        rendered = self.renderer.render("runs/gate", context())
        try:
            # Made now, not coalesced: the edit is recorded only once it is in Slack.
            self.deliveries.immediate.update_message(channel, ts, rendered.text, blocks=rendered.blocks)
        except SlackCallFailed as exc:
            if exc.code != "message_not_found":
                self.store.release_message(run_id=run.id, key=key, owner=self.deliveries.owner)
                raise
            # Someone deleted the gate message: there is nothing left to edit.
        except BotError:
            self.store.release_message(run_id=run.id, key=key, owner=self.deliveries.owner)
            raise
        # An edit, not a post: done once it is made (a crash before this line edits it again,
        # which shows the same thing).
        self.store.record_message(run_id=run.id, key=key, channel=channel, ts=ts)


def _earlier(run: R.Run, sr: R.StepRun, epoch: int, refs: Mapping[str, MessageRef]) -> dict[str, Any] | None:
    """The same gate of `sr` as it was at an earlier `epoch`, when its message showed it open (or
    held while the run was paused) and a resume opened it afresh (`machine.resume`): the people
    whose approvals were given there, which do not count now. None when `epoch` was another gate."""
    phase = run.phase(sr)
    if phase is None or epoch >= sr.epoch:
        return None
    shown = (f"shown:{sr.step_id}:{epoch}:{phase}:", f"shown:{sr.step_id}:{epoch}:paused")
    votes = sorted(
        {
            a.user_id
            for a in run.approvals
            if (a.step_id, a.phase, a.epoch) == (sr.step_id, phase, epoch) and a.decision in APPROVING
        }
    )
    if not votes and not any(key.startswith(shown) for key in refs):
        return None
    return {"votes": votes}


def _note(run: R.Run, sr: R.StepRun, chosen: Sequence[Chosen]) -> str:
    """The step's note on its line: an ended run is resumed by nobody, so its interrupted steps
    say what happened only; a waiver's own words are dropped where the line already says who
    waived the evidence and why (`chosen`), which said it twice in two forms."""
    if run.state in (R.RunState.ABORTED, R.RunState.COMPLETED) and sr.note.startswith(R.STOPPED_MID_ACTION):
        return R.STOPPED_MID_ACTION
    if sr.state is R.StepState.SUCCEEDED and WAIVED_BY in sr.note and any(c.what == WAIVED for c in chosen):
        return ""
    return sr.note


def summary_rows(run: R.Run, now: datetime) -> Sequence[Mapping[str, object]]:
    """One row per step for the card: state, who approved what and when, what it waits for."""
    rows = []
    for sr in run.steps:
        step = run.plan.step(sr.step_id)
        approvals = [a for a in run.approvals if a.step_id == sr.step_id and a.decision in APPROVING]
        chosen = chosen_of(run, sr)
        rows.append(
            {
                "id": sr.step_id,
                "title": step.title,
                "phase": step.phase,
                "state": str(sr.state),
                "gate_phase": run.phase(sr) or "",
                "waiting_on": R.waiting_on(run, sr, now) if run.state is R.RunState.ACTIVE else "",
                "approvals": [
                    {"user": a.user_id, "phase": a.phase, "at": a.at, "roles": list(a.roles)}
                    for a in approvals
                ],
                "note": _note(run, sr, chosen),
                "epoch": sr.epoch,
                # What a step that succeeded left for people: never folded into "N done".
                "left_behind": sr.left_behind,
                # A gate approved with force, evidence waived: said on the step's line, never folded.
                "chosen": "; ".join(c.text() for c in chosen),
                "destructive": step.destructive,
                "manual": step.manual,
                "pipeline": f"{step.pipeline.pipeline}/{step.pipeline.job}" if step.pipeline else "",
            }
        )
    return rows
