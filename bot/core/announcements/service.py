"""Scheduled announcements in motion: schedule a plan's window, post what is due, exactly once.

The pure parts live beside it: `timing` says when each announcement is due and what to do when
it is late, `templates` renders it. This service ties them to the store and to Slack; the
triggers front door (`bot.frontdoor.triggers`) only decides *when* to call `fire`, and the store
is the source of truth for *what* is due.

**Posting once.** Every post goes through `bot.core.delivery`, as the run cards do: the
announcement's dedup key is claimed in the database *before* `chat.postMessage`, the message
carries that key in Slack metadata, and its ts is recorded after. A restart, a retried job or a
second replica finds the key claimed and does not post again. A claim left without a ts by a
process that died is settled before anything else: found in the channel (so it was posted: marked
sent with its ts) or given back (so it was not: posted now, if still within the grace). Exactly
once, where it used to be at most once.

**Steps and moves.** A step whose plan says `announce: step-complete` is announced when it
succeeds in a scheduled run (`step_succeeded`, called from the run service's commit; its key names
the run and the step). `move` postpones a pending schedule: the old one becomes `moved`, its
pending announcements are withdrawn and a new schedule posts `delayed` with the old window.

**Missed.** A window that ends with no run started in it closes its schedule as `missed`
(`window_ended`, at the window's end and at every start): what it had not posted is withdrawn and
`missed` is posted in its channel, where people read `scheduled` — whenever the bot finds it, so a
bot that was down through the window still says so, once (one key per schedule). A missed schedule
no longer holds the plan: `schedule`, `move` and `start` see it as over.

**Late.** An announcement found due after the fact (the bot was down) is sent on time within
`ON_TIME`, marked delayed within the grace, and skipped past it — the skip is audited and shown
in `/upgrade schedule list`. A template that cannot be rendered is skipped with its error the
same way: a half-rendered announcement is never posted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bot.adapters.store import Store
from bot.core.announcements import timing as A
from bot.core.announcements.overrides import override_audit
from bot.core.announcements.runinfo import evidence_lines, plan_context
from bot.core.announcements.templates import (
    AnnouncementInfo,
    AnnouncementRenderer,
    LateNote,
    VerifiedBy,
    WindowSpan,
    sample_context,
)
from bot.core.audit import audit_entry
from bot.core.delivery import Deliveries, Poster, new_owner
from bot.core.evidence.view import StoredEvidence
from bot.core.jobs.common import cordoned_by
from bot.core.rendering import Rendered, slack_date
from bot.core.runs import machine as R
from bot.core.runs.library import assemble_run, find_plan, stored_plan
from bot.core.runs.plans import Plan
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.errors import (
    BotError,
    ConcurrentUpdate,
    PermanentError,
    TemplateError,
    UsageError,
    UserError,
)
from bot.records import AnnouncementRow, AuditEntry, ScheduleRow, VerificationRow

log = logging.getLogger(__name__)

#: How an announcement's reason begins while its posts fail (`schedule list` shows it).
LAST_FAILED = "last attempt failed: "


def diff_regressions(store: Store, run: R.Run) -> list[str]:
    """The regressions of the run's `diff` step ("containers not ready — Deployment shop/web"),
    computed again from the two snapshots it compares as the store keeps them; none when the
    plan has no diff step, the step never ran, or its snapshots are gone."""
    from bot.core.actions.diff import replaces_arg
    from bot.core.snapshots.diff import diff
    from bot.core.snapshots.service import resolve

    for step in run.plan.steps:
        call = next((c for c in step.actions if c.name == "diff"), None)
        if call is None or run.step_run(step.id).state is R.StepState.PENDING:
            continue
        try:
            before = resolve(store, str(call.args.get("before", "pre")), cluster=run.plan.cluster).snap
            after = resolve(store, str(call.args.get("after", "post")), cluster=run.plan.cluster).snap
            report = diff(before, after, replaces=replaces_arg(call.args))
        except UserError:
            return []
        return [f"{r.category} — {r.subject}" for r in report.regressions]
    return []


def _claim_subject(schedule_id: int) -> str:
    # The run-message claims are keyed (subject, key); announcements claim under their schedule.
    return f"schedule:{schedule_id}"


def _pending_rows(
    planned: Sequence[A.Announcement], *, schedule_id: int, plan_name: str, channel: str, now: datetime
) -> list[AnnouncementRow]:
    """A new schedule's announcements, as the store keeps them until they are due."""
    return [
        AnnouncementRow(
            id=0,
            schedule_id=schedule_id,
            plan_name=plan_name,
            run_id="",
            template=a.template,
            due_at=a.due,
            window_start=a.window_start,
            dedup_key=a.key,
            state="scheduled",
            channel=channel,
            updated_at=now,
        )
        for a in planned
    ]


def _announcement(
    schedule: ScheduleRow, run_id: str, template: str, due: datetime, key: str, now: datetime, step_id: str
) -> AnnouncementRow:
    """One more announcement of `schedule` (a run's end or step, a late start, `missed`), due at `due`."""
    return AnnouncementRow(
        id=0,
        schedule_id=schedule.id,
        plan_name=schedule.plan_name,
        run_id=run_id,
        template=template,
        due_at=due,
        window_start=schedule.window_start,
        dedup_key=key,
        state="scheduled",
        channel=schedule.channel,
        updated_at=now,
        step_id=step_id,
    )


def _schedule_audit(
    subcommand: str, arguments: str, *, at: datetime, by: str, detail: str, correlation_id: str
) -> AuditEntry:
    """The audit record of a change people made to a schedule (`schedule move`, `schedule cancel`)."""
    return audit_entry(
        at=at,
        user_id=by,
        channel_id="",
        source="scheduler",
        kind="schedule",
        subcommand=subcommand,
        arguments=arguments,
        outcome="ok",
        detail=detail,
        correlation_id=correlation_id,
    )


def _pending_schedule(
    plan: Plan,
    *,
    plan_id: int,
    span: WindowSpan,
    channel: str,
    by: str,
    now: datetime,
    override_reason: str,
    **moved: Any,
) -> ScheduleRow:
    """A new schedule of `plan` over `span`, not yet started (`moved`: what it was moved from, and why)."""
    return ScheduleRow(
        id=0,
        plan_id=plan_id,
        plan_name=plan.name,
        window_start=span.start,
        window_end=span.end,
        tz=span.tz,
        channel=channel,
        state="scheduled",
        run_id="",
        created_by=by,
        created_at=now,
        override_reason=override_reason,
        **moved,
    )


@dataclass(frozen=True, kw_only=True)
class Fired:
    """What `fire` did with one announcement."""

    id: int
    action: str  # wait | sent | delayed | skipped | already_sent | failed | done | no_slack | missed
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class Verified:
    """What `verify` did: the announcement, whether this press was new, the message to show now."""

    row: AnnouncementRow
    recorded: bool
    rendered: Rendered


#: The outcomes of `fire` that are metrics (the others are "nothing to do yet" or "done before").
RECORDED = frozenset({"sent", "delayed", "skipped", "failed"})


class AnnouncementService:
    def __init__(
        self,
        *,
        store: Store,
        clock: Callable[[], datetime],
        poster: Poster | None = None,
        templates_dir: Path | None = None,
        channel: str | None = None,
        offsets: Sequence[timedelta] | None = None,
        grace: timedelta = A.DEFAULT_GRACE,
        owner: str | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        live_owners: Callable[[], set[str]] | None = None,
        listeners: Sequence[Callable[[], object]] = (),
    ) -> None:
        self.store = store
        self.clock = clock
        self.poster = poster
        #: Posting exactly once across crashes (None without Slack); `owner` names this process.
        self.deliveries = (
            Deliveries(
                store=store, poster=poster, clock=clock, owner=owner or new_owner(), live_owners=live_owners
            )
            if poster is not None
            else None
        )
        self.renderer = AnnouncementRenderer(templates_dir)
        self.channel = channel
        self.offsets = tuple(offsets) if offsets is not None else None
        self.grace = grace
        #: Told after the set of pending announcements changed (the triggers re-read them).
        self.listeners = tuple(listeners)
        #: Where each announcement's outcome is recorded (the metrics exporter when serving).
        self.telemetry = telemetry

    # -- scheduling ------------------------------------------------------------------------------

    def channel_for(self, plan: Plan) -> str | None:
        return plan.announcements_channel or self.channel

    def schedule(
        self,
        plan_name: str,
        *,
        start: datetime,
        tz: str,
        by: str,
        override_reason: str = "",
        correlation_id: str = "",
    ) -> tuple[ScheduleRow, list[AnnouncementRow]]:
        """Store a schedule for `plan_name` opening at `start`, with its announcements."""
        row, plan = find_plan(self.store, plan_name)
        now = self.clock()
        # A schedule whose window has passed without a run no longer holds the plan.
        self.close_missed(now)
        pending = self.store.schedules(states=["scheduled"], plan_name=plan_name)
        if pending:
            raise UserError(
                f"`{plan_name}` is already scheduled (#{pending[0].id}); "
                f"`/upgrade schedule cancel {pending[0].id}` first"
            )
        channel = self.channel_for(plan)
        if not channel:
            raise UserError(
                "no announcement channel: set `channels.announcements` in the plan or the configuration"
            )
        end = start.astimezone(UTC) + plan.window.length

        def rows(schedule_id: int) -> list[AnnouncementRow]:
            planned = A.schedule(
                subject=_claim_subject(schedule_id),
                window_start=start,
                scheduled_at=now,
                offsets=self.offsets,
            )
            return _pending_rows(
                planned, schedule_id=schedule_id, plan_name=plan.name, channel=channel, now=now
            )

        try:
            planned = A.schedule(subject="check", window_start=start, scheduled_at=now, offsets=self.offsets)
        except ValueError as exc:
            raise UserError(f"cannot schedule that: {exc}") from None
        context = plan_context(plan, start=start, end=end, tz=tz)
        self._check_renders(planned, context)
        # ... and the ones its run will post (its end, a step's completion, a move): with a sample
        # run, since there is none yet; a broken one was found out only when the run ended.
        later = [A.COMPLETED, A.ABORTED, A.DELAYED, A.MISSED] + (
            [A.STEP_COMPLETE] if any(s.announce for s in plan.steps) else []
        )
        self._check_renders(
            [A.Announcement(subject="check", template=t, due=start, window_start=start) for t in later],
            sample_context(plan=context["plan"]),
        )
        span = WindowSpan(start=start, end=end, tz=tz)
        schedule_id = self.store.create_schedule(
            _pending_schedule(
                plan,
                plan_id=row.id,
                span=span,
                channel=channel,
                by=by,
                now=now,
                override_reason=override_reason,
            ),
            rows,
            audit=[
                _schedule_audit(
                    "schedule",
                    f"{plan.name} {start.isoformat()}",
                    at=now,
                    by=by,
                    detail=f"window {span.in_words()}",
                    correlation_id=correlation_id,
                )
            ],
        )
        if override_reason:
            self.store.record_audit(
                override_audit(
                    at=now,
                    user_id=by,
                    subcommand="schedule",
                    arguments=f"#{schedule_id} {plan.name} {start.isoformat()}",
                    done="scheduled",
                    reason=override_reason,
                    correlation_id=correlation_id,
                )
            )
        schedule = self.store.schedule(schedule_id)
        assert schedule is not None
        # The `scheduled` announcement is due now: post it while the person waits for the reply.
        self.run_due(now)
        self.changed()
        return schedule, self.store.scheduled_announcements(schedule_id=schedule_id)

    def _check_renders(self, planned: Sequence[A.Announcement], context: Mapping[str, Any]) -> None:
        # Render every announcement of the schedule now: a broken template is an error for the
        # person scheduling (file and line), not a skipped announcement found out days later.
        for template in dict.fromkeys(a.template for a in planned):
            try:
                self.renderer.render(template, context)
            except TemplateError as exc:
                raise PermanentError(
                    f"announcement `{template}` could not be rendered: {exc.user_message}"
                ) from None

    def move(
        self,
        schedule_id: int,
        *,
        start: datetime,
        tz: str,
        by: str,
        reason: str,
        override_reason: str = "",
        correlation_id: str = "",
    ) -> tuple[ScheduleRow, ScheduleRow, int]:
        """Move a pending schedule to a window opening at `start`: (old, new, withdrawn).

        The old schedule becomes `moved` and its pending announcements are withdrawn; a new one
        (a new id, so no dedup key of the old window can collide with the new) gets `delayed`,
        posted now with the old window and `reason`, then the new window's reminders and
        `starting`. One transaction: a crash leaves either the old schedule or the new one.
        """
        old = self._pending(schedule_id, "moved")
        if not reason.strip():
            raise UsageError('say why it moves: `--reason "…"` (the delayed announcement shows it)')
        # One pending schedule per plan, whichever way it is made: two would announce everything twice.
        other = next(
            (
                s
                for s in self.store.schedules(states=["scheduled"], plan_name=old.plan_name)
                if s.id != old.id
            ),
            None,
        )
        if other is not None:
            raise UserError(
                f"`{old.plan_name}` is also scheduled (#{other.id}) and a plan has one pending schedule: "
                f"move #{other.id}, or `/upgrade schedule cancel {other.id}` first"
            )
        plan = stored_plan(self.store, old.plan_id)
        now = self.clock()
        end = start.astimezone(UTC) + plan.window.length
        if start <= old.window_start:
            # The announcement says "delayed": bringing a window forward is a different message
            # (people may have planned around the old time), so it is a cancel and a new schedule.
            raise UserError(
                f"`schedule move` postpones; schedule #{schedule_id} opens "
                f"{old.window_start.astimezone(ZoneInfo(old.tz)):%Y-%m-%d %H:%M} {old.tz}. "
                f"To bring it forward, `/upgrade schedule cancel {schedule_id}` and schedule it again"
            )
        try:
            planned = A.moved(subject="check", window_start=start, moved_at=now, offsets=self.offsets)
        except ValueError as exc:
            raise UserError(f"cannot move it there: {exc}") from None
        previous = WindowSpan(start=old.window_start, end=old.window_end, tz=old.tz)
        self._check_renders(
            planned,
            plan_context(plan, start=start, end=end, tz=tz, reason=reason.strip(), previous_window=previous),
        )

        def rows(new_id: int) -> list[AnnouncementRow]:
            moved = A.moved(
                subject=_claim_subject(new_id), window_start=start, moved_at=now, offsets=self.offsets
            )
            return _pending_rows(moved, schedule_id=new_id, plan_name=plan.name, channel=old.channel, now=now)

        audit = [
            _schedule_audit(
                "move",
                f"#{old.id} {plan.name} {start.isoformat()}",
                at=now,
                by=by,
                detail=f"from {previous.in_words()}: {reason.strip()}",
                correlation_id=correlation_id,
            )
        ]
        if override_reason:
            audit.append(
                override_audit(
                    at=now,
                    user_id=by,
                    subcommand="schedule move",
                    arguments=f"#{old.id} {plan.name} {start.isoformat()}",
                    done="moved",
                    reason=override_reason,
                    correlation_id=correlation_id,
                )
            )
        try:
            new_id, withdrawn = self.store.move_schedule(
                old.id,
                _pending_schedule(
                    plan,
                    plan_id=old.plan_id,
                    span=WindowSpan(start=start, end=end, tz=tz),
                    # The same channel: the people who read the old window's announcements.
                    channel=old.channel,
                    by=by,
                    now=now,
                    override_reason=override_reason,
                    moved_from=old.id,
                    move_reason=reason.strip(),
                ),
                rows,
                at=now,
                reason=f"moved by {by}: {reason.strip()}",
                audit=audit,
            )
        except ConcurrentUpdate:
            raise UserError(
                f"schedule #{schedule_id} changed at the same moment (moved, cancelled or started); "
                "see `/upgrade schedule list`"
            ) from None
        log.info("schedule %s moved to #%s by %s (%s withdrawn)", old.id, new_id, by, withdrawn)
        # The `delayed` announcement is due now: post it while the person waits for the reply.
        self.run_due(now)
        self.changed()
        before, after = self.store.schedule(old.id), self.store.schedule(new_id)
        assert before is not None
        assert after is not None
        return before, after, withdrawn

    def _pending(self, schedule_id: int, done: str) -> ScheduleRow:
        """The schedule `schedule_id`, if it is still pending (only such a schedule can be `done`)."""
        self.close_missed()
        schedule = self.store.schedule(schedule_id)
        if schedule is None:
            raise UserError(f"there is no schedule #{schedule_id} (`/upgrade schedule list`)")
        if schedule.state == "missed":
            ended = schedule.window_end.astimezone(ZoneInfo(schedule.tz))
            raise UserError(
                f"schedule #{schedule_id} was missed: its window ended {ended:%Y-%m-%d %H:%M} {schedule.tz} "
                f"with no run, so it cannot be {done}. "
                f'`/upgrade schedule {schedule.plan_name} --at "…"` schedules the plan again'
            )
        if schedule.state == "moved":
            # Moved means replaced: name the schedule that holds the plan's window now.
            after = next(
                (
                    s
                    for s in self.store.schedules(plan_name=schedule.plan_name)
                    if s.moved_from == schedule_id
                ),
                None,
            )
            if after is not None:
                raise UserError(
                    f"schedule #{schedule_id} was moved: it is #{after.id} now ({after.state}); "
                    f"`/upgrade schedule list` shows it"
                )
        if schedule.state != "scheduled":
            raise UserError(
                f"schedule #{schedule_id} is {schedule.state}; only a pending schedule can be {done}"
            )
        return schedule

    def cancel(
        self, schedule_id: int, *, by: str, reason: str, correlation_id: str = ""
    ) -> tuple[ScheduleRow, int]:
        """Cancel a pending schedule; it and how many announcements were withdrawn."""
        schedule = self._pending(schedule_id, "cancelled")
        now = self.clock()
        count = self.store.cancel_schedule(
            schedule_id,
            at=now,
            reason=f"cancelled by {by}" + (f": {reason}" if reason else ""),
            audit=[
                _schedule_audit(
                    "cancel",
                    f"#{schedule_id} {schedule.plan_name}",
                    at=now,
                    by=by,
                    detail=reason,
                    correlation_id=correlation_id,
                )
            ],
        )
        log.info("schedule %s cancelled by %s (%s pending announcements)", schedule_id, by, count)
        self.changed()
        cancelled = self.store.schedule(schedule_id)
        assert cancelled is not None
        return cancelled, count

    def attach_run(self, schedule_id: int, run_id: str) -> ScheduleRow | None:
        """A run of a scheduled plan began: its end will be announced under that schedule. A run
        started before its window (teams start a little early) makes the reminders still to come
        wrong ("the upgrade is in N minutes" while it runs): they are withdrawn, and `starting`
        ("is starting now") is posted now instead of at the window's start. One transaction.

        A run that starts after `starting` was skipped (the bot was down when the window opened)
        gets it now, marked late: readers last saw `scheduled` or a reminder, and would never hear
        the upgrade began. Once per run: its key names the run."""
        now = self.clock()
        withdrawn = self.store.update_schedule(
            schedule_id,
            state="started",
            run_id=run_id,
            withdraw=((A.REMINDER,), f"not posted: run {run_id} started before the window", now),
            bring_forward=(A.STARTING, now),
        )
        if withdrawn:
            log.info("schedule %s: %s reminder(s) withdrawn: run %s started", schedule_id, withdrawn, run_id)
        schedule = self.store.schedule(schedule_id)
        starting = [
            a for a in self.store.scheduled_announcements(schedule_id=schedule_id) if a.template == A.STARTING
        ]
        if schedule is not None and starting and all(a.state in ("skipped", "cancelled") for a in starting):
            self._add(schedule, run_id, template=A.STARTING, due=now, key=f"run:{run_id}/starting", now=now)
        try:
            for row in self.store.scheduled_announcements(schedule_id=schedule_id, states=["scheduled"]):
                if row.template == A.STARTING and row.due_at <= now:
                    self.fire(row.id, now)
        except BotError as exc:
            # The run has started: `starting`, due now, goes out at the announcements' next tick.
            log.warning(
                "schedule %s: `starting` not posted with run %s: %s", schedule_id, run_id, exc.user_message
            )
        return self.store.schedule(schedule_id)

    def run_ended(self, run: R.Run) -> Fired | None:
        """`completed` or `aborted` for a run that was scheduled; posted at once."""
        if run.state not in (R.RunState.COMPLETED, R.RunState.ABORTED):
            return None
        schedule = self._schedule_of(run)
        if schedule is None:
            return None
        template = A.COMPLETED if run.state is R.RunState.COMPLETED else A.ABORTED
        now = self.clock()
        ended = A.run_ended(
            subject=f"run:{run.id}", template=template, at=now, window_start=schedule.window_start
        )
        # One end per run, whenever it is computed: the key does not carry the instant.
        new_id = self._add(
            schedule, run.id, template=template, due=ended.due, key=f"run:{run.id}/{template}", now=now
        )
        # A reminder or `starting` still to come would announce a run that is over.
        withdrawn = self.store.update_schedule(
            schedule.id,
            state=str(run.state),
            withdraw=(A.BEFORE_THE_RUN, f"not posted: run {run.id} {run.state} before it was due", now),
        )
        if withdrawn:
            log.info(
                "schedule %s: %s announcement(s) before the run withdrawn: it ended", schedule.id, withdrawn
            )
        return None if new_id is None else self.fire(new_id, now)

    def step_succeeded(self, run: R.Run, step_id: str) -> Fired | None:
        """`step-complete` for a step whose plan asks for it, in a scheduled run; posted at once.

        The key names the run and the step, not the instant: a retried hook or a restart that
        computes it again finds it stored and posts nothing.
        """
        sr = next((s for s in run.steps if s.step_id == step_id), None)
        if sr is None or sr.state is not R.StepState.SUCCEEDED or not run.plan.step(step_id).announce:
            return None
        schedule = self._schedule_of(run)
        if schedule is None:
            return None
        now = self.clock()
        new_id = self._add(
            schedule, run.id, template=A.STEP_COMPLETE,
            # Due when the step succeeded: one found at a restart is late, and decide() says so.
            due=sr.finished_at or now,
            key=A.step_complete_key(run.id, step_id), now=now, step_id=step_id,
        )  # fmt: skip
        return None if new_id is None else self.fire(new_id, now)

    def _add(
        self,
        schedule: ScheduleRow,
        run_id: str,
        *,
        template: str,
        due: datetime,
        key: str,
        now: datetime,
        step_id: str = "",
    ) -> int | None:
        """Store an announcement of run `run_id` in its schedule, due at `due`; None when `key` was
        stored before."""
        return self.store.add_announcement(_announcement(schedule, run_id, template, due, key, now, step_id))

    def close_missed(self, now: datetime | None = None) -> list[Fired]:
        """Close every pending schedule whose window has ended with no run (`window_ended`)."""
        moment = now or self.clock()
        ended = [s for s in self.store.schedules(states=["scheduled"], limit=500) if s.window_end <= moment]
        return [self.window_ended(s.id, moment) for s in ended]

    def window_ended(self, schedule_id: int, now: datetime | None = None) -> Fired:
        """The window of schedule `schedule_id` ended: still pending, no run started in it, so it
        is closed as `missed` — what it had not posted withdrawn, `missed` stored, in one
        transaction, and posted at once (due now: however late the bot finds it, the channel that
        read `scheduled` hears the window passed). Fired `missed` (its detail: what the post did),
        `done` when it was not pending, `wait` before its end."""
        moment = now or self.clock()
        schedule = self.store.schedule(schedule_id)
        if schedule is None or schedule.state != "scheduled":
            return Fired(id=schedule_id, action="done")
        if schedule.window_end > moment:
            return Fired(id=schedule_id, action="wait", detail="its window has not ended")
        span = WindowSpan(start=schedule.window_start, end=schedule.window_end, tz=schedule.tz)
        missed = _announcement(schedule, "", A.MISSED, moment, A.missed_key(schedule.id), moment, "")
        new_id = self.store.miss_schedule(
            schedule.id,
            at=moment,
            reason="not posted: the window ended with no run",
            announcement=missed,
            audit=[
                _schedule_audit(
                    "missed",
                    f"#{schedule.id} {schedule.plan_name}",
                    at=moment,
                    by="bot",
                    detail=f"window {span.in_words()} ended with no run",
                    correlation_id="",
                )
            ],
        )
        if new_id is None:
            return Fired(id=schedule_id, action="done")
        log.info("schedule %s of %s missed: its window ended with no run", schedule.id, schedule.plan_name)
        fired = self.fire(new_id, moment)
        self.changed()
        return Fired(id=schedule_id, action="missed", detail=f"{A.MISSED} {fired.action}")

    def _schedule_of(self, run: R.Run) -> ScheduleRow | None:
        return self.store.schedule_of_run(run.id)

    # -- posting ---------------------------------------------------------------------------------

    def pending(self) -> list[AnnouncementRow]:
        return self.store.scheduled_announcements(states=["scheduled"])

    def changed(self) -> None:
        for listener in self.listeners:
            try:
                listener()
            except Exception:
                log.exception("the scheduler could not pick up the change; it will at its next sync")

    def catch_up(self, now: datetime) -> list[Fired]:
        """At start: runs that ended while the end could not be announced, then what is due."""
        fired = []
        for schedule in self.store.schedules(states=["started"]):
            run = assemble_run(self.store, schedule.run_id)
            if run is None:
                continue
            # Steps that succeeded while their announcement could not be stored (a crash right
            # after the commit); the ones already stored are found by their key and skipped.
            for sr in run.steps:
                if sr.state is R.StepState.SUCCEEDED and run.plan.step(sr.step_id).announce:
                    step_done = self.step_succeeded(run, sr.step_id)
                    if step_done is not None:
                        fired.append(step_done)
            if run.state not in (R.RunState.COMPLETED, R.RunState.ABORTED):
                continue
            done = self.run_ended(run)
            if done is not None:
                fired.append(done)
        return fired + self.run_due(now)

    def run_due(self, now: datetime | None = None) -> list[Fired]:
        """Fire every scheduled announcement due at `now` (default: the clock)."""
        moment = now or self.clock()
        return [self.fire(a.id, moment) for a in self.pending() if a.due_at <= moment]

    def fire(self, announcement_id: int, now: datetime | None = None) -> Fired:
        """Post one announcement if it is due and not posted yet, mark it delayed or skip it."""
        fired = self._fire(announcement_id, now)
        if fired.action in RECORDED:
            self.telemetry.announcement(fired.action)
        return fired

    def _fire(self, announcement_id: int, now: datetime | None = None) -> Fired:
        moment = now or self.clock()
        row = self.store.scheduled_announcement(announcement_id)
        if row is None or row.state != "scheduled":
            return Fired(id=announcement_id, action="done")
        subject = _claim_subject(row.schedule_id)
        ann = A.Announcement(
            subject=subject, template=row.template, due=row.due_at, window_start=row.window_start
        )
        # A claim a dead process left without a ts is settled first: found in the channel (it was
        # posted) or given back (it was not), so the announcement is neither lost nor doubled.
        refs = (
            self.deliveries.settle(subject) if self.deliveries is not None else self.store.messages(subject)
        )
        claimed = refs.get(row.dedup_key)
        decision = A.decide(ann, now=moment, grace=self.grace, already_sent=claimed is not None)
        if decision.action == "wait":
            return Fired(id=row.id, action="wait", detail=decision.reason)
        if claimed is not None:
            reason = "" if claimed.ts else "being posted by another worker"
            self.store.finish_announcement(
                row.id, state="sent", at=moment, channel=claimed.channel, ts=claimed.ts, reason=reason
            )
            return Fired(id=row.id, action="already_sent", detail=reason)
        if decision.action == "skip":
            # Late because every attempt failed: the skip says why, not only that it is late.
            why = (
                f"{decision.reason} ({row.reason})" if row.reason.startswith(LAST_FAILED) else decision.reason
            )
            self._finish_skipped(row, moment, why)
            return Fired(id=row.id, action="skipped", detail=why)
        late, why = self._late(row, decision)
        try:
            rendered = self._render(row, late)
        except BotError as exc:
            reason = f"not posted: {exc.user_message}"
            log.warning("announcement %s (%s): %s", row.id, row.template, reason)
            self._finish_skipped(row, moment, reason, outcome="error")
            return Fired(id=row.id, action="skipped", detail=reason)
        if self.deliveries is None:
            return Fired(id=row.id, action="no_slack")
        try:
            posted = self.deliveries.post_once(
                subject, row.dedup_key, row.channel, rendered.text, blocks=rendered.blocks
            )
        except BotError as exc:
            # Not posted (the claim was given back): the next attempt within the grace posts it.
            log.warning("posting announcement %s failed: %s", row.id, exc.user_message)
            self._failed(row, subject, exc.user_message)
            return Fired(id=row.id, action="failed", detail=exc.user_message)
        if posted is None:
            return Fired(id=row.id, action="already_sent", detail="another worker claimed it")
        delayed = late is not None
        finished = self.store.finish_announcement(
            row.id,
            state="sent",
            at=moment,
            channel=posted.channel,
            ts=posted.ts,
            delayed=delayed,
            reason=why,
            audit=[self._audit(row, moment, "ok", why or "posted")],
        )
        if not finished:
            # Another worker saw our claim before the ts was recorded and marked it sent.
            self.store.record_announcement_ts(row.id, channel=posted.channel, ts=posted.ts)
        return Fired(id=row.id, action="delayed" if delayed else "sent", detail=posted.ts)

    def _late(self, row: AnnouncementRow, decision: A.Decision) -> tuple[LateNote | None, str]:
        """The "Delayed: this announcement was due …" line a post gets, and why, if it is late."""
        if decision.action == "send_late":
            return LateNote(due=row.due_at, zone=self._zone(row)), decision.reason
        if row.template == A.STARTING and row.due_at > row.window_start + A.ON_TIME:
            # `starting` of a run that began after it had been skipped (`attach_run`): it was due
            # when the window opened, and says so.
            return LateNote(due=row.window_start, zone=self._zone(row)), "posted as the run started, late"
        return None, ""

    def _failed(self, row: AnnouncementRow, subject: str, reason: str) -> None:
        """An attempt to post failed: kept on the announcement, and the first time a reason is new,
        the person who scheduled it is told directly (the channel it was for may be the trouble:
        the bot not invited to it is the usual first-day mistake). Best effort: it is tried again."""
        try:
            if not self.store.note_announcement_failure(row.id, f"{LAST_FAILED}{reason}"):
                return
            schedule = self.store.schedule(row.schedule_id)
            if schedule is None or not schedule.created_by or self.deliveries is None:
                return
            until = slack_date(row.due_at + self.grace, schedule.tz)
            self.deliveries.post_once(
                subject,
                f"{row.dedup_key}:failed:{reason[:40]}",
                schedule.created_by,
                f":warning: The {row.template} announcement of {row.plan_name} (schedule #{row.schedule_id}) could "
                f"not be posted in <#{row.channel}>: {reason}. It is tried again until {until}, then skipped; "
                "`/upgrade schedule list` shows where it stands.",
            )
        except BotError as exc:
            log.warning(
                "announcement %s: could not tell its scheduler of the failure: %s", row.id, exc.user_message
            )

    def _finish_skipped(
        self, row: AnnouncementRow, now: datetime, reason: str, outcome: str = "skipped"
    ) -> None:
        self.store.finish_announcement(
            row.id, state="skipped", at=now, reason=reason, audit=[self._audit(row, now, outcome, reason)]
        )

    def _audit(self, row: AnnouncementRow, now: datetime, outcome: str, detail: str) -> AuditEntry:
        return audit_entry(
            at=now,
            user_id="bot",
            channel_id=row.channel,
            source="scheduler",
            kind="announcement",
            subcommand=row.template,
            arguments=row.dedup_key,
            outcome=outcome,
            detail=detail,
            run_id=row.run_id,
        )

    def _zone(self, row: AnnouncementRow) -> str:
        schedule = self.store.schedule(row.schedule_id)
        return schedule.tz if schedule else "UTC"

    def context_for(self, row: AnnouncementRow) -> dict[str, Any]:
        schedule = self.store.schedule(row.schedule_id)
        if schedule is None:
            raise UserError(f"schedule #{row.schedule_id} is missing")
        # What `/upgrade start` will run: the plan loaded under the schedule's name now (a reload
        # since the schedule was made may aim at another version), else the one it was made from.
        latest = self.store.plan(schedule.plan_name)
        plan = stored_plan(self.store, latest.id if latest is not None else schedule.plan_id)
        run = None
        run_id = row.run_id or schedule.run_id
        if run_id:
            run = assemble_run(self.store, run_id)
            if run is not None:
                # The plan the run runs (reloaded since the schedule was made, it may aim elsewhere).
                plan = run.plan
        previous = None
        if schedule.moved_from:
            old = self.store.schedule(schedule.moved_from)
            if old is not None:
                previous = WindowSpan(start=old.window_start, end=old.window_end, tz=old.tz)
        return plan_context(
            plan,
            start=schedule.window_start,
            end=schedule.window_end,
            tz=schedule.tz,
            run=run,
            # Only `delayed` is about the move; the others keep the run's reason (an abort).
            reason=(schedule.move_reason or None) if row.template == A.DELAYED else None,
            step_id=row.step_id,
            previous_window=previous,
            # The completed announcement carries the run's evidence (read from its jobs).
            evidence=evidence_lines(StoredEvidence(self.store), run) if run is not None else (),
            # ... and what the diff of its snapshots says regressed.
            regressions=diff_regressions(self.store, run)
            if run is not None and row.template == A.COMPLETED
            else (),
            # ... and its Verified button, with who confirmed so far (read from the store, so any
            # replica renders the same lines).
            announcement=self._verified(row, schedule.tz) if row.template == A.COMPLETED else None,
            # An abort's: the nodes its jobs cordoned and did not uncordon (its thread asks).
            cordoned=cordoned_by(
                self.store.jobs(states=("live", "interrupted", "done"), run_id=run.id, limit=500)
            )
            if run is not None and row.template == A.ABORTED
            else (),
        )

    def _verified(self, row: AnnouncementRow, tz: str) -> AnnouncementInfo:
        zone = ZoneInfo(tz or "UTC")
        return AnnouncementInfo(
            id=row.id,
            verified=tuple(
                VerifiedBy(user_id=v.user_id, at=v.at.astimezone(zone).strftime("%H:%M"))
                for v in self.store.verifications(row.id)
            ),
        )

    def verify(
        self,
        announcement_id: int,
        *,
        user_id: str,
        channel_id: str,
        message_ts: str = "",
        correlation_id: str = "",
    ) -> Verified:
        """Record that `user_id` pressed Verified on a posted completed announcement (once per
        person: a second press records nothing) and render the message again with every name.

        A `UserError` says why not: the store does not know the announcement (another install's
        message, a deleted database) or it was never posted."""
        row = self.store.scheduled_announcement(announcement_id)
        if row is None or row.template != A.COMPLETED:
            raise UserError("this announcement is not known to the bot, so nothing was recorded")
        if row.state != "sent" or not row.ts:
            raise UserError(f"announcement #{row.id} was not posted, so it cannot be verified")
        if message_ts and message_ts != row.ts:
            # A copy (a preview, a message quoting the button) must not confirm the real one.
            raise UserError("this message is not the announcement the bot posted, so nothing was recorded")
        now = self.clock()
        recorded = self.store.record_verification(
            VerificationRow(announcement_id=row.id, user_id=user_id, at=now),
            audit=[
                audit_entry(
                    at=now,
                    user_id=user_id,
                    channel_id=channel_id,
                    source="slack",
                    kind="announcement",
                    subcommand="verified",
                    arguments=row.dedup_key,
                    outcome="ok",
                    detail=f"announcement #{row.id} verified",
                    correlation_id=correlation_id,
                    run_id=row.run_id,
                )
            ],
        )
        late = LateNote(due=row.due_at, zone=self._zone(row)) if row.delayed else None
        return Verified(row=row, recorded=recorded, rendered=self._render(row, late))

    def _render(self, row: AnnouncementRow, late: LateNote | None) -> Rendered:
        try:
            return self.renderer.render(row.template, self.context_for(row), late=late)
        except TemplateError as exc:
            raise TemplateError(
                f"announcement `{row.template}` could not be rendered: {exc.user_message}"
            ) from None


# ---------------------------------------------------------------------------------------------
# Windows and the coordinator's override (shared by `schedule` and `start`)
