"""Runs in motion: load a run from the store, apply one transition, commit it, show it in Slack.

Every change follows the same path, whoever asks for it (a button, a command, the escalation
timer, a second replica): read the run and its `version` → compute the transition with the pure
`bot.core.runs` → commit with `UPDATE … WHERE version = :v` together with the approvals and the
audit rows → only then talk to Slack. When another writer committed first, the transition is
computed again on the fresh state (which usually refuses it: "already approved", "stale button").

Slack posts are made idempotent by claiming a key in the store before posting (`card`,
`gate:STEP:EPOCH`, `event:VERSION:N`): after a restart the same keys are found claimed, so nothing
is posted twice. The card is edited in place after every commit, so it always shows the truth.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bot.adapters.store import (
    ApprovalRow,
    AuditEntry,
    ConcurrentUpdate,
    RunRow,
    StepRow,
    Store,
)
from bot.core import runs as R
from bot.core.people import Directory
from bot.core.plans import ActionCall, Plan, PlanInvalid, parse_plan
from bot.core.rendering import Renderer
from bot.errors import BotError, PermanentError, UserError

log = logging.getLogger(__name__)

_ENDED = (R.RunState.COMPLETED, R.RunState.ABORTED)
#: How often a transition is recomputed when other writers keep committing first.
MAX_ATTEMPTS = 5


class Posted(Protocol):
    @property
    def channel(self) -> str: ...

    @property
    def ts(self) -> str: ...


class Poster(Protocol):
    """The Slack calls a run needs; `bot.adapters.slack.SlackGateway` is one."""

    def post_message(
        self,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
    ) -> Posted: ...

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None: ...


#: Performs one built-in action of a step; returns (ok, detail shown in the thread).
ActionRunner = Callable[[R.Run, ActionCall], tuple[bool, str]]


@dataclass(frozen=True, kw_only=True)
class Actor:
    user_id: str
    source: str = "slack"
    channel_id: str = ""
    correlation_id: str = ""


class RunNotFound(UserError):
    pass


# ---------------------------------------------------------------------------------------------
# Rows ↔ the core model


def load_plan(store: Store, plan_id: int) -> Plan:
    row = store.plan_by_id(plan_id)
    if row is None:
        raise PermanentError(f"plan #{plan_id} is missing from the database")
    try:
        return parse_plan(row.text, source=f"plan {row.name}")
    except PlanInvalid as exc:
        raise PermanentError(f"stored plan {row.name} no longer validates: {exc.errors[0]}") from None


def from_rows(run: RunRow, steps: Sequence[StepRow], approvals: Sequence[ApprovalRow], plan: Plan) -> R.Run:
    roster = {k: tuple(v) for k, v in json.loads(run.roster).items()}
    return R.Run(
        id=run.id,
        plan=plan,
        state=R.RunState(run.state),
        created_by=run.created_by,
        created_at=run.created_at,
        roster=roster,
        version=run.version,
        reason=run.reason,
        steps=tuple(
            R.StepRun(
                step_id=s.step_id,
                state=R.StepState(s.state),
                epoch=s.epoch,
                started_by=s.started_by,
                opened_at=s.opened_at,
                started_at=s.started_at,
                finished_at=s.finished_at,
                escalations=s.escalations,
                note=s.note,
            )
            for s in steps
        ),
        approvals=tuple(
            R.Approval(
                step_id=a.step_id,
                phase=a.phase,
                epoch=a.epoch,
                user_id=a.user_id,
                roles=tuple(r for r in a.roles.split(",") if r),
                decision=a.decision,
                at=a.at,
                reason=a.reason,
            )
            for a in approvals
        ),
    )


def _step_row(run_id: str, position: int, s: R.StepRun) -> StepRow:
    return StepRow(
        run_id=run_id,
        step_id=s.step_id,
        position=position,
        state=str(s.state),
        epoch=s.epoch,
        started_by=s.started_by,
        opened_at=s.opened_at,
        started_at=s.started_at,
        finished_at=s.finished_at,
        escalations=s.escalations,
        note=s.note,
    )


def _approval_row(run_id: str, a: R.Approval) -> ApprovalRow:
    return ApprovalRow(
        run_id=run_id,
        step_id=a.step_id,
        phase=a.phase,
        epoch=a.epoch,
        user_id=a.user_id,
        roles=",".join(a.roles),
        decision=a.decision,
        at=a.at,
        reason=a.reason,
    )


def _roster_json(run: R.Run) -> str:
    return json.dumps({k: list(v) for k, v in run.roster.items()}, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# The service


class RunService:
    def __init__(
        self,
        *,
        store: Store,
        directory: Directory,
        clock: Callable[[], datetime],
        renderer: Renderer | None = None,
        poster: Poster | None = None,
        operations_channel: str | None = None,
        run_action: ActionRunner | None = None,
    ) -> None:
        self.store = store
        self.directory = directory
        self.clock = clock
        self.renderer = renderer
        self.poster = poster
        self.operations_channel = operations_channel
        self.run_action = run_action
        #: Called once when a run reaches completed or aborted (the completed/aborted announcement).
        self.on_ended: Callable[[R.Run], object] | None = None
        #: Called once when a step whose plan says `announce: step-complete` reaches succeeded,
        #: with the run and the step's id (the step-complete announcement).
        self.on_step_succeeded: Callable[[R.Run, str], object] | None = None

    # -- reading -----------------------------------------------------------------------------

    def load(self, run_id: str) -> R.Run:
        rows = self.store.run_rows(run_id)
        if rows is None:
            raise RunNotFound(f"there is no run `{run_id}` (`/upgrade status` lists the runs)")
        run_row, steps, approvals = rows
        return from_rows(run_row, steps, approvals, load_plan(self.store, run_row.plan_id))

    def resolve(self, run_id: str | None) -> R.Run:
        """`run_id`, or the only active/paused run when none is given."""
        if run_id:
            return self.load(run_id)
        live = self.store.runs(states=["active", "paused"])
        if len(live) == 1:
            return self.load(live[0].id)
        if not live:
            raise RunNotFound("no run is active; `/upgrade start PLAN` starts one")
        names = ", ".join(f"`{r.id}`" for r in live)
        raise RunNotFound(f"several runs are active ({names}); name one")

    # -- writing -----------------------------------------------------------------------------

    def start(self, plan_name: str, actor: Actor) -> R.Outcome:
        row = self.store.plan(plan_name)
        if row is None:
            raise UserError(f"there is no plan `{plan_name}`; load it with `/upgrade plan load`")
        plan = load_plan(self.store, row.id)
        now = self.clock()
        run_id = "R" + secrets.token_hex(3).upper()
        out = R.new_run(run_id, plan, by=actor.user_id, now=now)
        run = out.run
        self.store.create_run(
            RunRow(
                id=run.id,
                plan_id=row.id,
                plan_name=plan.name,
                cluster=plan.cluster,
                state=str(run.state),
                version=0,
                roster=_roster_json(run),
                reason="",
                created_by=actor.user_id,
                created_at=now,
                updated_at=now,
            ),
            [_step_row(run.id, i, s) for i, s in enumerate(run.steps)],
            self._audit_rows(run, out.events, actor, now),
        )
        self.publish(run, out.events)
        return out

    def apply(self, run_id: str, change: Callable[[R.Run], R.Outcome], actor: Actor) -> R.Outcome:
        """Compute `change` on the latest state and commit it; recompute when someone was first."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            run = self.load(run_id)
            out = change(run)
            if out.run is run:
                # A refusal (or nothing due): nothing to commit, but a refusal is audited.
                if out.events:
                    self._audit_only(run, out.events, actor)
                return out
            try:
                committed = self._commit(run, out, actor)
            except ConcurrentUpdate:
                log.info("run %s changed under us (attempt %s); recomputing", run_id, attempt)
                continue
            self.publish(committed.run, committed.events)
            self._announce_steps(run, committed.run)
            if committed.run.state in _ENDED and run.state not in _ENDED:
                self._ended(committed.run)
            return committed
        raise ConcurrentUpdate(f"run {run_id} kept changing; gave up after {MAX_ATTEMPTS} attempts")

    def _announce_steps(self, before: R.Run, after: R.Run) -> None:
        # Only the commit that moved the step to succeeded calls the hook (the version check
        # lets one writer win); the announcement's dedup key covers a crash before or during it.
        if self.on_step_succeeded is None:
            return
        was = {s.step_id: s.state for s in before.steps}
        for sr in after.steps:
            if sr.state is not R.StepState.SUCCEEDED or was.get(sr.step_id) is R.StepState.SUCCEEDED:
                continue
            if not after.plan.step(sr.step_id).announce:
                continue
            try:
                self.on_step_succeeded(after, sr.step_id)
            except BotError as exc:
                log.warning("announcing step %s of run %s failed: %s", sr.step_id, after.id, exc.user_message)

    def _ended(self, run: R.Run) -> None:
        # The commit that ended the run happened once (version check), so this runs once too.
        if self.on_ended is None:
            return
        try:
            self.on_ended(run)
        except BotError as exc:
            log.warning("announcing the end of run %s failed: %s", run.id, exc.user_message)

    def _commit(self, before: R.Run, out: R.Outcome, actor: Actor) -> R.Outcome:
        now = self.clock()
        old = {s.step_id: s for s in before.steps}
        changed = [_step_row(before.id, i, s) for i, s in enumerate(out.run.steps) if old.get(s.step_id) != s]
        new_approvals = [_approval_row(before.id, a) for a in out.run.approvals[len(before.approvals) :]]
        version = self.store.commit_run(
            run_id=before.id,
            expected_version=before.version,
            state=str(out.run.state),
            roster=_roster_json(out.run),
            reason=out.run.reason,
            updated_at=now,
            steps=changed,
            new_approvals=new_approvals,
            audit=self._audit_rows(out.run, out.events, actor, now),
        )
        return dataclasses.replace(out, run=dataclasses.replace(out.run, version=version))

    def _audit_rows(
        self, run: R.Run, events: Sequence[R.Event], actor: Actor, now: datetime
    ) -> list[AuditEntry]:
        zone = run.plan.window.timezone
        local = now.astimezone(run.plan.window.zone).strftime("%Y-%m-%d %H:%M")
        rows = []
        for event in events:
            detail = " ".join(
                part
                for part in (
                    event.detail,
                    f"roles={','.join(event.roles)}" if event.roles else "",
                    event.note,
                )
                if part
            )
            rows.append(
                AuditEntry(
                    at=now,
                    user_id=event.actor or actor.user_id,
                    channel_id=actor.channel_id,
                    source=actor.source,
                    kind="run",
                    subcommand=event.kind,
                    arguments=event.step_id,
                    outcome="refused" if event.kind == "refused" else "ok",
                    detail=f"{detail} [{local} {zone}]".strip(),
                    correlation_id=actor.correlation_id,
                    run_id=run.id,
                )
            )
        return rows

    def _audit_only(self, run: R.Run, events: Sequence[R.Event], actor: Actor) -> None:
        for entry in self._audit_rows(run, events, actor, self.clock()):
            self.store.record_audit(entry)

    # -- the operations a front door or command asks for --------------------------------------

    def click(
        self,
        ref: R.ButtonRef,
        actor: Actor,
        *,
        confirmation: str | None = None,
        reason: str = "",
    ) -> R.Outcome:
        out = self.apply(
            ref.run_id,
            lambda run: R.click(
                run,
                step_id=ref.step_id,
                epoch=ref.epoch,
                user_id=actor.user_id,
                decision=ref.decision,
                directory=self.directory,
                now=self.clock(),
                confirmation=confirmation,
                reason=reason,
            ),
            actor,
        )
        if out.run_actions:
            out = self.perform(out.run, out.run_actions, actor)
        return out

    def perform(self, run: R.Run, step_id: str, actor: Actor) -> R.Outcome:
        """Run the step's actions (committed as running before), then commit how they ended."""
        sr = run.step_run(step_id)
        step = run.plan.step(step_id)
        ok, details = True, []
        for call in step.actions:
            if self.run_action is None:
                ok, detail = False, f"this front door cannot run the `{call.name}` action"
            else:
                try:
                    ok, detail = self.run_action(run, call)
                except BotError as exc:
                    ok, detail = False, exc.user_message
                except Exception:
                    log.exception("action %s of step %s failed", call.name, step_id)
                    ok, detail = False, f"the `{call.name}` action failed with an internal error"
            details.append(detail)
            if not ok:
                break
        text = "; ".join(d for d in details if d)
        out = self.apply(
            run.id,
            lambda r: R.action_finished(
                r, step_id=step_id, epoch=sr.epoch, ok=ok, detail=text, now=self.clock()
            ),
            Actor(user_id="bot", source=actor.source, correlation_id=actor.correlation_id),
        )
        return out

    def recover_all(self) -> list[str]:
        """At start-up: interrupted actions wait for a human; every live card is brought up to date."""
        touched = []
        for row in self.store.runs(states=["active", "paused"], limit=500):
            actor = Actor(user_id="bot", source="startup")
            out = self.apply(row.id, lambda run: R.recover(run, now=self.clock()), actor)
            if not out.events:
                self.publish(out.run, ())
            touched.append(row.id)
        return touched

    def tick(self) -> list[R.Outcome]:
        """Escalations and timeouts due now, for every active run (called by a timer)."""
        done = []
        for row in self.store.runs(states=["active"], limit=500):
            out = self.apply(
                row.id, lambda run: R.due(run, now=self.clock()), Actor(user_id="bot", source="timer")
            )
            if out.events:
                done.append(out)
        return done

    # -- Slack ---------------------------------------------------------------------------------

    def channel_for(self, run: R.Run) -> str | None:
        return run.plan.operations_channel or self.operations_channel

    def card_context(self, run: R.Run) -> dict[str, Any]:
        now = self.clock()
        cur = run.current
        gate: dict[str, Any] | None = None
        if cur is not None and run.state is R.RunState.ACTIVE and run.phase(cur) is not None:
            # The card carries the open gate's buttons too (same value as in the thread).
            gate = {
                "step": cur.step_id,
                "phase": run.phase(cur),
                "value": R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch).encode(),
            }
        return {
            "run": run,
            "plan": run.plan,
            "rows": R.summary_rows(run, now),
            "current": cur.step_id if cur else "",
            "gate": gate,
            "zone": run.plan.window.timezone,
            "roster": run.roster,
        }

    def publish(self, run: R.Run, events: Sequence[R.Event]) -> None:
        """Bring Slack up to date with a committed run: card, gate messages, thread lines."""
        if self.poster is None or self.renderer is None:
            return
        channel = self.channel_for(run)
        if not channel:
            return
        try:
            self._publish(run, events, channel)
        except BotError as exc:
            # The run is committed; Slack catches up on the next change or at restart.
            log.warning("could not update Slack for run %s: %s", run.id, exc.user_message)

    def _post_once(
        self,
        run: R.Run,
        key: str,
        channel: str,
        template: str,
        context: Mapping[str, Any],
        *,
        thread_ts: str = "",
        broadcast: bool = False,
    ) -> str | None:
        assert self.poster is not None and self.renderer is not None
        if not self.store.claim_message(
            run_id=run.id, key=key, channel=channel, thread_ts=thread_ts, at=self.clock()
        ):
            return None
        rendered = self.renderer.render(template, context)
        try:
            posted = self.poster.post_message(
                channel,
                rendered.text,
                blocks=rendered.blocks,
                thread_ts=thread_ts or None,
                reply_broadcast=broadcast,
            )
        except BotError:
            self.store.release_message(run_id=run.id, key=key)
            raise
        self.store.record_message(run_id=run.id, key=key, channel=posted.channel, ts=posted.ts)
        return posted.ts

    def _publish(self, run: R.Run, events: Sequence[R.Event], channel: str) -> None:
        assert self.poster is not None and self.renderer is not None
        refs = self.store.messages(run.id)
        context = self.card_context(run)
        card = refs.get("card")
        if card is None or not card.ts:
            ts = self._post_once(run, "card", channel, "runs/card", context)
            if ts is None:
                return  # another worker holds the claim and will post it
            refs = self.store.messages(run.id)
            card = refs["card"]
        else:
            rendered = self.renderer.render("runs/card", context)
            self.poster.update_message(card.channel, card.ts, rendered.text, blocks=rendered.blocks)
        thread = card.ts
        # Thread lines for what just happened (keys from the committed version: never twice).
        for i, event in enumerate(events):
            if event.kind in ("refused", "gate_opened"):
                continue
            broadcast = event.kind in ("step_failed", "run_aborted", "step_interrupted")
            self._post_once(
                run,
                f"event:{run.version}:{i}",
                card.channel,
                "runs/event",
                {"event": event, "run": run, "zone": run.plan.window.timezone},
                thread_ts=thread,
                broadcast=broadcast,
            )
        # Gate messages: retire the buttons of gates that closed, post the open one.
        for sr in run.steps:
            for key, ref in refs.items():
                closed = key.startswith(f"gate:{sr.step_id}:") and key != self._gate_key(run, sr)
                if closed and ref.ts and not key.endswith(":retired"):
                    self._retire(run, sr, ref.channel, ref.ts, key)
        cur = run.current
        if run.state is R.RunState.ACTIVE and cur is not None and run.phase(cur) is not None:
            self._post_once(
                run,
                self._gate_key(run, cur),
                card.channel,
                "runs/gate",
                self._gate_context(run, cur),
                thread_ts=thread,
            )

    @staticmethod
    def _gate_key(run: R.Run, sr: R.StepRun) -> str:
        return f"gate:{sr.step_id}:{sr.epoch}"

    def _gate_context(self, run: R.Run, sr: R.StepRun) -> dict[str, Any]:
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
        }

    def _retire(self, run: R.Run, sr: R.StepRun, channel: str, ts: str, key: str) -> None:
        """Edit a closed gate's message: no buttons, and what became of the step."""
        assert self.poster is not None and self.renderer is not None
        if not self.store.claim_message(
            run_id=run.id, key=f"{key}:retired", channel=channel, thread_ts="", at=self.clock()
        ):
            return
        context = {**self._gate_context(run, sr), "open": False}
        rendered = self.renderer.render("runs/gate", context)
        self.poster.update_message(channel, ts, rendered.text, blocks=rendered.blocks)


# ---------------------------------------------------------------------------------------------
# Helpers for the run subcommands


def require_member(run: R.Run, user_id: str, directory: Directory, *, action: str) -> set[str]:
    """The roles `user_id` holds in this run's roster; PermissionDenied when none."""
    from bot.core.people import roles_of
    from bot.errors import PermissionDenied

    held = roles_of(user_id, run.roster, directory)
    if not held:
        raise PermissionDenied(f"{action} is for the people in run {run.id}'s roster; you are not in it")
    return held
