"""Runs in motion: load a run from the store, apply one transition, commit it, then show it.

Every change follows the same path, whoever asks for it (a button, a command, the escalation
timer, a second replica): read the run and its `version` → compute the transition with the pure
`bot.core.runs.machine` → commit with `UPDATE … WHERE version = :v` together with the approvals and the
audit rows → only then talk to Slack. When another writer committed first, the transition is
computed again on the fresh state (which usually refuses it: "already approved", "stale button").

What Slack shows is `bot.core.runs.cards`' job; actions are looked up in the injected registry
and run with the injected `ActionContext` (`bot.core.actions`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import secrets
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypedDict

from bot.adapters.store import Store
from bot.core.actions.base import ActionContext, ActionRegistry
from bot.core.audit import Who, audit_entry
from bot.core.jobs.common import APPROVE
from bot.core.live import EvidenceAnswer, LongActions
from bot.core.people import Directory, roles_of
from bot.core.runs import machine as R
from bot.core.runs import pipelines, prs
from bot.core.runs.cards import RunCards, card_context
from bot.core.runs.library import assemble_run, find_plan
from bot.core.runs.pipelines import Report
from bot.core.runs.plans import Plan, parse_plan
from bot.core.runs.prs import PullRequests
from bot.core.telemetry import NO_TELEMETRY, TIMED_WORK, Telemetry
from bot.errors import BotError, ConcurrentUpdate, RunNotFound, TransitionRefused, UserError, clip
from bot.logsetup import run_scoped
from bot.records import ActionRequest, AuditEntry, FileAttachment, PlanRow, RunRow

log = logging.getLogger(__name__)

_ENDED = (R.RunState.COMPLETED, R.RunState.ABORTED)
_STEP_ENDED = (R.StepState.SUCCEEDED, R.StepState.FAILED, R.StepState.SKIPPED, R.StepState.INTERRUPTED)
#: How often a transition is recomputed when other writers keep committing first.
MAX_ATTEMPTS = 5


class RunListener(Protocol):
    """Told of a run's events, once each (its commit won): the announcements, the uncordon offer."""

    def run_ended(self, run: R.Run) -> object:
        """The run reached completed or aborted."""

    def step_succeeded(self, run: R.Run, step_id: str) -> object:
        """A step whose plan says `announce: step-complete` succeeded."""


class StepObserver(Protocol):
    """Told of every committed change of a step's state, once each (its commit won): Grafana's
    annotations. An observer must not block (hand the work to a thread); its exception is logged
    and never breaks the run."""

    def step_changed(self, run: R.Run, old: R.StepRun, new: R.StepRun) -> object:
        """`old` → `new`: the step's record before and after the commit (their states differ)."""


@dataclass(frozen=True, kw_only=True)
class Actor:
    user_id: str
    source: str = "slack"
    channel_id: str = ""
    correlation_id: str = ""


class _Button(TypedDict):
    """What the machine's button decisions (`click`, `skip_vote`, `resume_click`…) take of a click."""

    step_id: str
    epoch: int
    user_id: str
    directory: Directory


# ---------------------------------------------------------------------------------------------
# The service


def run_key(typed: str) -> str:
    """A run id as the bot makes them (`R` and hex, upper case) from what someone typed or pasted:
    compatibility forms folded (NFKC), invisible and other characters no id has dropped."""
    return re.sub(r"[^0-9A-Za-z_-]", "", unicodedata.normalize("NFKC", typed)).upper()


class RunService:
    def __init__(
        self,
        *,
        store: Store,
        directory: Directory,
        clock: Callable[[], datetime],
        cards: RunCards | None = None,
        actions: ActionRegistry | None = None,
        action_context: ActionContext | None = None,
        long_actions: LongActions | None = None,
        listeners: Sequence[RunListener] = (),
        owner: str = "",
        live_runners: Callable[[], set[str]] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        step_observers: Sequence[StepObserver] = (),
        pull_requests: PullRequests | None = None,
    ) -> None:
        self.store = store
        self.directory = directory
        self.clock = clock
        #: None where nothing is shown (a terminal front door without Slack, some tests).
        self.cards = cards
        self.actions = actions
        #: None where actions cannot run (this front door has no cluster to act on).
        self.action_context = action_context
        #: Its long actions (watches, cluster jobs): whether a step's is still live, so a restart
        #: resumes the step instead of marking it interrupted. None: no long actions.
        self.long_actions = long_actions
        #: Told, in order, when a run ends and when a step whose plan says `announce:
        #: step-complete` succeeds (the announcements, the uncordon offer after an abort).
        self.listeners = tuple(listeners)
        #: This process's name, recorded on a step it sets running (`StepRun.runner`).
        self.owner = owner
        #: The replicas alive now (several replicas on one database); None on one host, where any
        #: other runner is a process that is gone.
        self.live_runners = live_runners
        #: Where each action's end is recorded (the metrics exporter when serving).
        self.telemetry = telemetry
        #: Told of each step's change of state after its commit (Grafana's annotations).
        self.step_observers = tuple(step_observers)
        #: Reads the PRs plan steps name (`github:`), for what a step's `done` requires; None: off.
        self.pull_requests = pull_requests
        #: Runs whose window's end the thread has been told of (the audit log is the record; this
        #: only spares the ticker reading it again).
        self._told_window_end: set[str] = set()

    # -- reading -----------------------------------------------------------------------------

    def load(self, run_id: str) -> R.Run:
        run = assemble_run(self.store, run_id)
        if run is None and (typed := run_key(run_id)) != run_id:
            # Pasted from a page or typed on a phone: `r821cb7`, a full-width `Ｒ`, a zero-width
            # space or a direction mark around it. The bot's ids are ASCII letters and digits.
            run = assemble_run(self.store, typed)
        if run is None:
            raise RunNotFound(f"there is no run `{clip(run_id)}` (`/upgrade status` lists the runs)")
        return run

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

    def start(
        self, plan_name: str, actor: Actor, *, attach: Callable[[str], object] | None = None
    ) -> R.Outcome:
        """Start a run of the loaded plan `plan_name`. `attach(run_id)` runs once the run is stored
        and before its card is posted (the schedule it belongs to, whose window the card shows)."""
        row, plan = find_plan(self.store, plan_name)
        # The same plan twice on one cluster (a second person, a command run twice) would cordon
        # and drain the same node groups twice over, each run blind to the other: refused while
        # the first is active or paused.
        live = [
            r
            for r in self.store.runs(states=["active", "paused"], limit=500)
            if r.cluster == plan.cluster and r.plan_name == plan.name
        ]
        if live:
            first = live[-1]
            raise UserError(
                f"run `{first.id}` of `{plan.name}` is already {first.state} on {plan.cluster} (started by "
                f"<@{first.created_by}>): `/upgrade status {first.id}` shows it; finish it, or `/upgrade "
                f"abort {first.id} --reason …`, before starting the plan again"
            )
        return self._start(row, plan, actor, "R" + secrets.token_hex(3).upper(), attach=attach)

    def start_pinned(self, plan_text: str, actor: Actor, *, run_id: str) -> R.Outcome | None:
        """A fleet's child (issue 41): the run `run_id` of a plan given whole (pinned when the fleet
        started); None when that run exists already, so a resumed fleet never starts it twice."""
        if self.store.run_rows(run_id) is not None:
            return None
        plan = parse_plan(plan_text, source=f"run {run_id}")
        now = self.clock()
        plan_id = self.store.save_plan(name=plan.name, text=plan_text, loaded_by=actor.user_id, loaded_at=now)
        row = self.store.plan_by_id(plan_id)
        assert row is not None
        return self._start(row, plan, actor, run_id)

    def _start(
        self,
        row: PlanRow,
        plan: Plan,
        actor: Actor,
        run_id: str,
        *,
        attach: Callable[[str], object] | None = None,
    ) -> R.Outcome:
        now = self.clock()
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
                roster=run.roster,
                reason="",
                created_by=actor.user_id,
                created_at=now,
                updated_at=now,
            ),
            run.steps,
            self._audit_rows(run, out.events, actor, now),
            self._thread_lines(run, out.events, 0),
        )
        if attach is not None:
            attach(run.id)
        self.publish(run, out.events)
        self.telemetry.run_started()
        return out

    @run_scoped
    def apply(
        self,
        run_id: str,
        change: Callable[[R.Run], R.Outcome],
        actor: Actor,
        *,
        files: tuple[FileAttachment, ...] = (),
    ) -> R.Outcome:
        """Compute `change` on the latest state and commit it; recompute when someone was first.

        `files` go with the thread line of the step's end (an action's report), in the same commit."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            run = self.load(run_id)
            out = change(run)
            if out.run is run:
                # A refusal (or nothing due): nothing to commit, but a refusal is audited.
                if out.events:
                    self._audit_only(run, out.events, actor)
                return out
            try:
                committed = self._commit(run, out, actor, files=files)
            except ConcurrentUpdate:
                log.info("run %s changed under us (attempt %s); recomputing", run_id, attempt)
                continue
            self.publish(committed.run, committed.events)
            self._count(run, committed.run)
            self._observe_steps(run, committed.run)
            self._announce_steps(run, committed.run)
            if committed.run.state in _ENDED and run.state not in _ENDED:
                self._ended(committed.run)
            return committed
        raise ConcurrentUpdate(f"run {run_id} kept changing; gave up after {MAX_ATTEMPTS} attempts")

    def _count(self, before: R.Run, after: R.Run) -> None:
        """Telemetry of one committed transition (it committed once: the version check)."""
        was = {s.step_id: s for s in before.steps}
        for sr in after.steps:
            old = was.get(sr.step_id)
            if old is None or old == sr:
                continue
            if sr.state is not old.state and sr.state in _STEP_ENDED:
                self.telemetry.step_ended(str(sr.state))
            if (
                old.state is R.StepState.AWAITING_APPROVAL
                and sr.state is R.StepState.RUNNING
                and sr.started_at is not None
                and old.opened_at is not None
            ):
                # Passed (set running): the time the gate waited for people.
                self.telemetry.gate_waited((sr.started_at - old.opened_at).total_seconds())
            if sr.escalations > old.escalations:
                self.telemetry.gate_escalated()
        if after.state in _ENDED and before.state not in _ENDED:
            self.telemetry.run_ended(str(after.state))

    def _observe_steps(self, before: R.Run, after: R.Run) -> None:
        # After the commit, which happened once (the version check): each change is observed once.
        if not self.step_observers:
            return
        was = {s.step_id: s for s in before.steps}
        for sr in after.steps:
            old = was.get(sr.step_id)
            if old is None or old.state is sr.state:
                continue
            for observer in self.step_observers:
                try:
                    observer.step_changed(after, old, sr)
                except Exception:
                    # An observer is a side channel: its failure is logged, the run goes on.
                    log.exception(
                        "step observer %s failed on step %s of run %s",
                        type(observer).__name__,
                        sr.step_id,
                        after.id,
                    )

    def _announce_steps(self, before: R.Run, after: R.Run) -> None:
        # Only the commit that moved the step to succeeded calls the hook (the version check
        # lets one writer win); the announcement's dedup key covers a crash before or during it.
        if not self.listeners:
            return
        was = {s.step_id: s.state for s in before.steps}
        for sr in after.steps:
            if sr.state is not R.StepState.SUCCEEDED or was.get(sr.step_id) is R.StepState.SUCCEEDED:
                continue
            if not after.plan.step(sr.step_id).announce:
                continue
            try:
                for listener in self.listeners:
                    listener.step_succeeded(after, sr.step_id)
            except BotError as exc:
                log.warning("announcing step %s of run %s failed: %s", sr.step_id, after.id, exc.user_message)

    def _ended(self, run: R.Run) -> None:
        # The commit that ended the run happened once (version check), so this runs once too.
        try:
            for listener in self.listeners:
                listener.run_ended(run)
        except BotError as exc:
            log.warning("announcing the end of run %s failed: %s", run.id, exc.user_message)

    def _commit(
        self, before: R.Run, out: R.Outcome, actor: Actor, *, files: tuple[FileAttachment, ...] = ()
    ) -> R.Outcome:
        now = self.clock()
        old = {s.step_id: s for s in before.steps}
        steps = [
            # Whoever commits a step into running runs its action: recorded for the recovery.
            dataclasses.replace(s, runner=self.owner)
            if s.state is R.StepState.RUNNING
            and getattr(old.get(s.step_id), "state", None) is not R.StepState.RUNNING
            else s
            for s in out.run.steps
        ]
        out = dataclasses.replace(out, run=dataclasses.replace(out.run, steps=tuple(steps)))
        changed = [(i, s) for i, s in enumerate(out.run.steps) if old.get(s.step_id) != s]
        # New votes, and a vote given again after it lapsed (it replaces the lapsed one: `_voted`).
        given = set(before.approvals)
        new_approvals = tuple(a for a in out.run.approvals if a not in given)
        version = self.store.commit_run(
            run_id=before.id,
            expected_version=before.version,
            state=str(out.run.state),
            roster=out.run.roster,
            reason=out.run.reason,
            updated_at=now,
            steps=changed,
            new_approvals=new_approvals,
            audit=self._audit_rows(out.run, out.events, actor, now),
            outbox=self._thread_lines(out.run, out.events, before.version + 1, files),
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
                audit_entry(
                    actor,
                    at=now,
                    user_id=event.actor or actor.user_id,
                    kind="run",
                    subcommand=event.kind,
                    arguments=event.step_id,
                    outcome="refused" if event.kind == "refused" else "ok",
                    detail=f"{detail} [{local} {zone}]".strip(),
                    run_id=run.id,
                )
            )
        return rows

    def _audit_only(self, run: R.Run, events: Sequence[R.Event], actor: Actor) -> None:
        for entry in self._audit_rows(run, events, actor, self.clock()):
            self.store.record_audit(entry)

    # -- the operations a front door or command asks for --------------------------------------

    @run_scoped
    def click(
        self,
        ref: R.ButtonRef,
        actor: Actor,
        *,
        confirmation: str | None = None,
        reason: str = "",
    ) -> R.Outcome:
        unmet = self._unmet(ref) if ref.decision == APPROVE else ""
        out = self.apply(
            ref.run_id,
            lambda run: R.click(
                run,
                decision=ref.decision,
                **self._button(ref, actor),
                now=self.clock(),
                confirmation=confirmation,
                reason=reason,
                unmet=unmet,
            ),
            actor,
        )
        if out.run_actions:
            out = self.perform(out.run, out.run_actions, actor)
        return out

    def _button(self, ref: R.ButtonRef, actor: Actor) -> _Button:
        """The arguments every decision on a card's button takes: where it was, who clicked it."""
        return _Button(step_id=ref.step_id, epoch=ref.epoch, user_id=actor.user_id, directory=self.directory)

    def _dry(self, run: R.Run, out: R.Outcome, actor: Actor) -> R.Outcome:
        """`out`, decided on the latest state, committed nowhere: a refusal is audited, as a refused
        click is; an accepted one gives back the run as it is."""
        if not out.accepted and out.events:
            self._audit_only(run, out.events, actor)
        return dataclasses.replace(out, run=run) if out.accepted else out

    def _unmet(self, ref: R.ButtonRef) -> str:
        """What the clicked step's `done` still requires of its PR (issue 43), read before the
        transition (GitHub is asked here, on a worker, never inside the commit's retry loop)."""
        run = self.load(ref.run_id)
        step = next((s for s in run.plan.steps if s.id == ref.step_id), None)
        if step is None or step.pr is None or not step.pr.require:
            return ""
        sr = run.step_run(ref.step_id)
        if run.phase(sr) != "done":
            return ""
        pr, error = prs.read(self.pull_requests, step.pr, fresh=True)
        if pr is None and error:
            return f"its PR could not be read ({error})"
        return prs.unmet(step.pr, pr)

    @run_scoped
    def check_click(self, ref: R.ButtonRef, actor: Actor) -> R.Outcome:
        """Would this click count now? Decided on the latest state and committed nowhere (the
        reason modal opens only for someone who may reject the gate); a refusal is audited, as a
        refused click is. The click itself is decided again when it is made."""
        run = self.load(ref.run_id)
        out = R.click(
            run,
            decision=ref.decision,
            **self._button(ref, actor),
            now=self.clock(),
            # Only the rules matter here: a reason is asked next; a destructive step's typed
            # confirmation is not (a rejection needs none).
            reason="(asked next)",
        )
        return self._dry(run, out, actor)

    @run_scoped
    def paused_click(self, ref: R.ButtonRef, actor: Actor, *, reason: str = "") -> R.Outcome:
        """A paused card's Resume (`ref.decision` "resume") or Skip… ("skip", with its reason),
        decided on the latest state by the stopped step's gate (`machine.resume_click`,
        `machine.skip_vote`); a refusal is audited and its `message` says why."""
        if ref.decision == "resume":

            def change(run: R.Run) -> R.Outcome:
                return R.resume_click(
                    run,
                    **self._button(ref, actor),
                    now=self.clock(),
                    reason=reason,
                )
        else:

            def change(run: R.Run) -> R.Outcome:
                return R.skip_vote(
                    run,
                    **self._button(ref, actor),
                    reason=reason,
                    now=self.clock(),
                )

        return self.apply(ref.run_id, change, actor)

    @run_scoped
    def check_paused(self, ref: R.ButtonRef, actor: Actor) -> R.Outcome:
        """Would a paused card's Skip… (or Waive…: is the run still paused there?) be taken from
        this person now? Decided on the latest state and committed nowhere, so the modal opens
        only for someone who may use it; a refusal is audited, as a refused click is."""
        run = self.load(ref.run_id)
        if ref.decision == "skip":
            out = R.skip_vote(
                run,
                **self._button(ref, actor),
                reason="(asked next)",
                now=self.clock(),
            )
        else:
            # Waive…: the run must still be paused there; who may ask is `/upgrade waive`'s rule.
            refused = R.paused_refusal(
                run,
                **self._button(ref, actor),
                gate_roles=False,
            )
            out = refused if refused is not None else R.Outcome(run=run)
        return self._dry(run, out, actor)

    @run_scoped
    def perform(self, run: R.Run, step_id: str, actor: Actor) -> R.Outcome:
        """Run the step's actions (committed as running before), then commit how they ended."""
        sr = run.step_run(step_id)
        step = run.plan.step(step_id)
        ok, details = True, []
        files: list[FileAttachment] = []
        for call in step.actions:
            spec = self.actions.get(call.name) if self.actions is not None else None
            began = time.monotonic()
            if spec is None or spec.run is None or self.action_context is None:
                ok, detail = False, f"this front door cannot run the `{call.name}` action"
                result_label = "unavailable"
            else:
                try:
                    result = spec.run(
                        self.action_context,
                        ActionRequest(
                            run_id=run.id,
                            cluster=run.plan.cluster,
                            call=call,
                            step_id=step_id,
                            target_version=run.plan.target_version,
                        ),
                    )
                    ok, detail = result.ok, result.detail
                    files.extend(result.files)
                    if ok and spec.long:
                        # Started, not finished: the step stays running and the triggers front
                        # door commits `action_finished` when the long action ends (`finish_long`).
                        log.info("step %s of run %s: %s", step_id, run.id, detail)
                        self.telemetry.action(call.name, "started")
                        return R.Outcome(run=run)
                    result_label = "ok" if ok else "failed"
                except BotError as exc:
                    ok, detail = False, exc.user_message
                    result_label = "failed"
                except Exception:
                    log.exception("action %s of step %s failed", call.name, step_id)
                    ok, detail = False, f"the `{call.name}` action failed with an internal error"
                    result_label = "error"
            # The registry's names only: a plan naming an unknown action is not a new label.
            self.telemetry.action(call.name if spec is not None else "unknown", result_label)
            if call.name in TIMED_WORK and result_label != "unavailable":
                self.telemetry.work_seconds(call.name, time.monotonic() - began)
            details.append(detail)
            if not ok:
                break
        text = "; ".join(d for d in details if d)
        try:
            return self.apply(
                run.id,
                lambda r: R.action_finished(
                    r, step_id=step_id, epoch=sr.epoch, ok=ok, detail=text, now=self.clock()
                ),
                Actor(user_id="bot", source=actor.source, correlation_id=actor.correlation_id),
                files=tuple(files),
            )
        except TransitionRefused:
            # The step was interrupted meanwhile (this replica was taken for gone): people decide
            # now, and a late result does not overwrite that. It stays in the log and the audit.
            log.warning("step %s of run %s: a late result after an interruption: %s", step_id, run.id, text)
            self.store.record_audit(
                audit_entry(
                    actor,
                    at=self.clock(),
                    user_id="bot",
                    kind="run",
                    subcommand="late_result",
                    arguments=step_id,
                    outcome="ignored",
                    detail=f"{'ok' if ok else 'failed'}: {text}",
                    run_id=run.id,
                )
            )
            return R.Outcome(run=self.load(run.id))

    @run_scoped
    def finish_long(
        self,
        run_id: str,
        step_id: str,
        *,
        ok: bool,
        detail: str,
        files: tuple[FileAttachment, ...] = (),
        left_behind: str = "",
    ) -> R.Outcome | None:
        """A long action (a watch) of a running step ended: commit how; None when the step is no
        longer running it (finished before, skipped, or the run ended) — safe to call twice.
        `left_behind`: what an action that succeeded left for people (`StepRun.left_behind`)."""
        run = self.load(run_id)
        sr = run.step_run(step_id)
        if sr.state is not R.StepState.RUNNING:
            return None
        try:
            return self.apply(
                run_id,
                lambda r: R.action_finished(
                    r,
                    step_id=step_id,
                    epoch=sr.epoch,
                    ok=ok,
                    detail=detail,
                    now=self.clock(),
                    left_behind=left_behind,
                ),
                Actor(user_id="bot", source="watch"),
                files=files,
            )
        except TransitionRefused:
            return None

    def report_build(self, report: Report, *, source: str, correlation_id: str = "") -> R.Outcome:
        """A signed pipeline hook reported a build of a run's step (issue 43): the build is kept
        (the card shows each step's latest), then the step's transition is committed
        (`pipelines.build_reported`). RunNotFound for an unknown run; a refusal (an ended run, an
        unknown step) keeps nothing and says why in `message`."""
        actor = Actor(user_id=f"pipeline:{source}", source="hook", correlation_id=correlation_id)
        line = pipelines.summary(report)
        failing = report.status in pipelines.FAILING
        builds = self.store.pipeline_builds(report.run)
        if pipelines.already_recorded(builds, report):
            # A pipeline's retried notification: said once in the thread, not twice.
            return R.Outcome(
                run=self.load(report.run),
                message=f"build {report.build} of {report.run}/{report.step}: {report.status}, already recorded",
            )
        newer = pipelines.superseding(builds, report) if failing else None

        def change(run: R.Run) -> R.Outcome:
            return pipelines.build_reported(
                run,
                step_id=report.step,
                pipeline=report.pipeline,
                job=report.job,
                status=report.status,
                summary=line,
                url=report.url,
                source=source,
                now=self.clock(),
                superseded_by=f"build {newer.build} ({newer.status})" if newer is not None else "",
            )

        checked = change(self.load(report.run))
        if not checked.accepted:
            return checked
        # Kept before the commit, so the card the commit publishes already shows the build.
        self.store.record_pipeline_build(report.record(source=source, at=self.clock()))
        return self.apply(report.run, change, actor)

    @run_scoped
    def publish_run(self, run_id: str) -> None:
        """A long action's live section changed: the run's card shows it."""
        self.publish(self.load(run_id))

    @run_scoped
    def succeeds_with_open_findings(self, run_id: str, step_id: str) -> bool:
        return self.load(run_id).plan.step(step_id).on_open_findings == "succeed"

    def pause_on_evidence(self, run_id: str, step_id: str, *, epoch: int, why: str) -> R.Outcome | None:
        """A running step's evidence is Inconclusive: the run pauses with the reason and its card
        offers Wait / Waive… / Abort (`bot.core.runs.paused`). None when the step moved on."""
        try:
            return self.apply(
                run_id,
                lambda r: R.pause_on_evidence(r, step_id=step_id, epoch=epoch, why=why, now=self.clock()),
                Actor(user_id="bot", source="job"),
            )
        except TransitionRefused:
            return None

    def evidence_click(self, ref: R.ButtonRef, actor: Actor, *, reason: str = "") -> R.Outcome:
        """Wait, Waive… or Abort on a card paused on Inconclusive evidence, decided on the latest
        state: Wait and Abort by one person holding a role of the step's gate (the run resumes;
        the caller then gives the step's job the answer); Waive… is a vote of two people
        (`machine.evidence_waive_vote`), `message` "waived" once it counts."""
        if ref.decision == "evidence_waive":

            def change(run: R.Run) -> R.Outcome:
                return R.evidence_waive_vote(
                    run,
                    **self._button(ref, actor),
                    reason=reason,
                    now=self.clock(),
                )
        else:

            def change(run: R.Run) -> R.Outcome:
                refused = R.paused_refusal(run, **self._button(ref, actor), doing=ref.decision)
                if refused is not None:
                    return refused
                if not run.reason.startswith(R.EVIDENCE_PAUSE):
                    return R.Outcome(
                        run=run, accepted=False, message=f"run {run.id} did not pause on evidence"
                    )
                what = "Wait: check the evidence again" if ref.decision == "wait" else "Abort: the step fails"
                return R.resume(run, by=actor.user_id, now=self.clock(), reason=what)

        return self.apply(ref.run_id, change, actor)

    def answer_evidence(
        self,
        run_id: str,
        step_id: str,
        *,
        epoch: int,
        option: str,
        user_id: str,
        reason: str,
        who: Who | None = None,
    ) -> EvidenceAnswer:
        """An answer to the Inconclusive evidence of the step running at `epoch` (`wait`, `waive` or
        `abort`), whichever door it came through: the card's buttons, the question's in the thread,
        `/upgrade choose`. The run's rules decide, as on the card (`evidence_click`), so a waiver is
        always two people's and the run resumes when the answer counts.

        A run active again with the question still open (resumed by hand) pauses on it first. A run
        paused for another reason takes Wait and Abort from a holder of the step's gate (it stays
        paused; an Abort's failure is then its reason) but not a waiver: resume it first."""
        decision = {"wait": "wait", "abort": "abort", "waive": R.EVIDENCE_WAIVE}.get(option)
        if decision is None:
            raise UserError(
                f"`{clip(option, 40)}` is not an answer to Inconclusive evidence (wait, waive, abort)"
            )
        run = self.load(run_id)
        sr = run.step_run(step_id)
        if sr.state is not R.StepState.RUNNING or sr.epoch != epoch:
            raise UserError(f"`{step_id}` is not waiting on evidence now")
        on_it = run.state is R.RunState.PAUSED and run.reason.startswith(f"{R.EVIDENCE_PAUSE}`{step_id}`")
        if not on_it and run.state is R.RunState.ACTIVE:
            self.pause_on_evidence(run_id, step_id, epoch=epoch, why="its question in the thread is open")
        elif not on_it:
            if option == "waive":
                raise UserError(
                    f"run {run_id} is paused ({clip(run.reason, 120)}): resume it, then waive the evidence"
                )
            gate = run.plan.step(step_id).gate
            held = frozenset(roles_of(user_id, run.roster, self.directory))
            if not held & set(gate.roles):
                raise UserError(R.not_the_gates(decision, step_id, gate, held))
            return EvidenceAnswer(counts=True, text=reason)
        ref = R.ButtonRef(run_id=run_id, step_id=step_id, epoch=epoch, decision=decision)
        # The click or command it came through, on the audit row as every door's (channel, correlation id).
        actor = Actor(
            user_id=user_id,
            source=who.source if who is not None else "answer",
            channel_id=who.channel_id if who is not None else "",
            correlation_id=who.correlation_id if who is not None else "",
        )
        out = self.evidence_click(ref, actor, reason=reason)
        if not out.accepted:
            raise UserError(out.message)
        if option != "waive":
            return EvidenceAnswer(counts=True, text=reason)
        if out.message != "waived":
            return EvidenceAnswer(counts=False, text=out.message)
        votes = [
            a
            for a in out.run.approvals
            if a.step_id == step_id and a.phase == R.EVIDENCE_WAIVE and a.epoch == epoch
        ]
        return EvidenceAnswer(counts=True, text="; ".join(f"<@{v.user_id}>: {v.reason}" for v in votes))

    def check_evidence_waive(self, ref: R.ButtonRef, actor: Actor) -> R.Outcome:
        """Would this person's Waive… vote count now? (before its modal opens; committed nowhere)."""
        run = self.load(ref.run_id)
        out = R.evidence_waive_vote(
            run,
            **self._button(ref, actor),
            reason="(asked next)",
            now=self.clock(),
        )
        return self._dry(run, out, actor)

    @run_scoped
    def interrupt_step(self, run_id: str, step_id: str, *, epoch: int) -> R.Outcome | None:
        """A long action's driver died under a running step (a crash, a failover): the step is
        interrupted and waits for people, as after a restart. None when it is not running it."""
        run = self.load(run_id)
        sr = run.step_run(step_id)
        if sr.state is not R.StepState.RUNNING or sr.epoch != epoch:
            return None
        keep = frozenset(s.step_id for s in run.steps if s.step_id != step_id)
        return self.apply(
            run_id,
            lambda r: R.recover(r, now=self.clock(), keep=keep),
            Actor(user_id="bot", source="job"),
        )

    def _long_running(self, run: R.Run, live: set[str] | None = None) -> frozenset[str]:
        """Running steps not to interrupt: a live long action (a watch) resumes; an action a live
        replica other than this one is running (`live`: the replicas alive) goes on there."""
        keep: set[str] = set()
        for sr in run.steps:
            if sr.state is not R.StepState.RUNNING:
                continue
            if (self.long_actions is not None and self.long_actions.live(run.id, sr.step_id)) or (
                live is not None and sr.runner and sr.runner != self.owner and sr.runner in live
            ):
                keep.add(sr.step_id)
        return frozenset(keep)

    def _live(self) -> set[str] | None:
        return self.live_runners() if self.live_runners is not None else None

    def interrupt_orphans(self) -> list[str]:
        """Several replicas: a step whose action ran on a replica that is gone (and that no job
        drives) is interrupted and waits for people; the runs touched. (At start-up
        `recover_all` does this; a runner that was still alive then is looked at again here.)"""
        live = self._live()
        if live is None:
            return []
        touched = []
        for row in self.store.runs(states=["active", "paused"], limit=500):
            run = self.load(row.id)
            orphans = [
                sr
                for sr in run.steps
                if sr.state is R.StepState.RUNNING
                and not run.plan.step(sr.step_id).manual
                and sr.runner
                and sr.runner != self.owner
                and sr.runner not in live
                and not (
                    self.long_actions is not None
                    and (
                        self.long_actions.driven(run.id, sr.step_id)
                        or self.long_actions.live(run.id, sr.step_id)
                    )
                )
            ]
            if not orphans:
                continue
            gone = {sr.step_id for sr in orphans}
            keep = frozenset(sr.step_id for sr in run.steps if sr.step_id not in gone)

            def orphaned(r: R.Run, keep: frozenset[str] = keep) -> R.Outcome:
                return R.recover(r, now=self.clock(), keep=keep)

            self.apply(run.id, orphaned, Actor(user_id="bot", source="timer"))
            touched.append(run.id)
        return touched

    def recover_all(self) -> list[str]:
        """At start-up: interrupted actions wait for a human; every live card is brought up to date."""
        touched = self.catch_up_slack()
        live = self._live()
        for row in self.store.runs(states=["active", "paused"], limit=500):
            actor = Actor(user_id="bot", source="startup")
            out = self.apply(
                row.id,
                lambda run: R.recover(run, now=self.clock(), keep=self._long_running(run, live)),
                actor,
            )
            if not out.events:
                self.publish(out.run, ())
            touched.append(row.id)
        return sorted(set(touched))

    def catch_up_slack(self) -> list[str]:
        """Settle posts a crash left unfinished and post the thread lines still owed; the runs touched.

        Run from the timer and at start-up: a thread line committed just before a crash, a card
        whose post was cut off, are in Slack within one tick of the restart, each exactly once.
        """
        if self.cards is None:
            return []
        owed = self.store.unposted_messages()
        self.cards.deliveries.settle_all(owed)
        touched = sorted({ref.run_id for ref in owed if not ref.run_id.startswith("schedule:")})
        for run_id in touched:
            run = assemble_run(self.store, run_id)
            if run is not None:
                self.publish(run)
        return touched

    def tick(self) -> list[R.Outcome]:
        """Escalations and timeouts due now, for every active run (called by a timer); steps
        whose runner is gone are interrupted (`interrupt_orphans`)."""
        self.interrupt_orphans()
        done = []
        for row in self.store.runs(states=["active", "paused"], limit=500):
            run = None
            if row.state == "active":
                out = self.apply(
                    row.id, lambda run: R.due(run, now=self.clock()), Actor(user_id="bot", source="timer")
                )
                run = out.run  # read (and maybe changed) just now: not read again below
                if out.events:
                    done.append(out)
            if (ended := self._window_end_told(row.id, run)) is not None:
                done.append(ended)
        return done

    def window_end(self, run_id: str, plan_end: datetime) -> datetime:
        """When the run's window ends: its schedule's (`/upgrade schedule --at`), else its plan's."""
        scheduled = self.store.schedule_of_run(run_id)
        return scheduled.window_end if scheduled is not None else plan_end

    def tell_window_end(self, run: R.Run) -> R.Outcome | None:
        """`tick`'s notice that `run` (as the caller just read it) is past its window's end, for a
        front door with no run ticker (a rehearsal asks between its steps); once, as `tick` says it."""
        return self._window_end_told(run.id, run)

    def _window_end_told(self, run_id: str, run: R.Run | None = None) -> R.Outcome | None:
        """Once a run still going is past its window's end, the thread and the card say so, once:
        nothing stops it (people decide), but nobody should find out from the report. `run`: the
        run as the caller has just read it, if it has."""
        if run_id in self._told_window_end:
            return None
        run = run or self.load(run_id)
        end = self.window_end(run_id, run.plan.window.end)
        if self.clock() < end:
            return None
        if any(e.subcommand == "window_ended" for e in self.store.audit_entries(run_id=run_id)):
            self._told_window_end.add(run_id)
            return None
        told = self.apply(
            run_id,
            lambda r: R.window_ended(r, end=end, now=self.clock()),
            Actor(user_id="bot", source="timer"),
        )
        self._told_window_end.add(run_id)  # only once it is committed: else the next tick tries again
        return told

    # -- showing -----------------------------------------------------------------------------

    @run_scoped
    def publish(self, run: R.Run, events: Sequence[R.Event] = ()) -> None:
        """Bring Slack up to date with a committed run (nothing when no Slack is wired).

        `events` are already in the outbox (written with their commit); they are not needed here.
        """
        if self.cards is not None:
            self.cards.publish(run)

    def _thread_lines(
        self, run: R.Run, events: Sequence[R.Event], version: int, files: tuple[FileAttachment, ...] = ()
    ) -> list[tuple[str, str]]:
        return self.cards.thread_lines(run, events, version, files) if self.cards is not None else []

    def card_context(self, run: R.Run) -> dict[str, Any]:
        if self.cards is not None:
            return self.cards.context(run)
        scheduled = self.store.schedule_of_run(run.id)
        return card_context(
            run, self.clock(), window=(scheduled.window_start, scheduled.window_end) if scheduled else None
        )
