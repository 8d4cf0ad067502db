"""The job service: a cluster job's row, one tick at a time, its posts and its question to people.

No threads here: the duty engine (`bot.core.duties`, kind `bot.frontdoor.acting.JobDuty`, on the
leader only, fenced) claims live jobs and calls `advance` again and again. One `advance`:

1. re-reads the row; a job whose step no longer runs under the job's epoch (a restart marked it
   interrupted, the run was aborted, people skipped the step) is interrupted, not driven;
2. the first tick of a job is its `plan` (what will be done, read now) — or, for a dry run, its
   `plan` and `dry_run` lines, and the job ends having changed nothing;
3. otherwise, unless the job waits for people (an open `Choice` with no decision), `tick` with
   the decision if there is one;
4. ONE transaction stores the new progress, the card lines, the open question, the thread posts
   the tick owes (outbox rows keyed by the job's deterministic keys: a key is posted once, ever)
   and its audit rows, and ends the job when the tick says so — naming the owner, so a process
   that lost the job writes nothing;
5. then Slack: the owed posts go into the run's thread through `Deliveries` (claim → post → ts),
   the run's card is brought up to date (its live section shows this job), and when the job
   ended, the runs commit the step (`steps.finish_long`, the `StepReports` port).

People answer a job's question with `decide` (a button in the thread, or `/upgrade choose`): only
someone holding one of the option's roles in the run's roster, with a reason where the option asks
for one; the answer is stored once and the next tick acts on it.

Poison ticks: a tick that raises an unexpected error (not the cluster's: those are waited out,
`RETRY_SECONDS` apart) is tried again after `RETRY_SECONDS`; after `POISON_ATTEMPTS` failures in
a row the same way (the same exception at the same place) the job is interrupted as if its driver
had died — its step waits for people — with one log line, a metric (`job_set_aside`) and one post
in the run's thread naming the error. The count is the driver's (in memory): a restart interrupts
the job anyway.

After `kill -9` a job is never continued silently: the driver's heartbeat goes stale, the next
scan (on the leader) interrupts the job and its step waits for people; `resume` re-opens the gate,
and the approval that follows calls `start` again, which reopens the SAME job under the new epoch
so it continues from its stored progress.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.adapters.store import Store
from bot.core.audit import Who, audit_entry
from bot.core.delivery import Deliveries, thread_root
from bot.core.durations import format_duration
from bot.core.evidence.baseline import BASELINE_ARG
from bot.core.evidence.view import WAITING_ON_EVIDENCE
from bot.core.jobs import trail as tr
from bot.core.jobs.base import Choice, ChoiceOption, Decision, JobRegistry, Tick
from bot.core.jobs.common import (
    AFTER_ABORT,
    APPROVING,
    GATE,
    LEFT_CORDONED,
    RESUMED_AT,
    cordoned_by,
    few,
    gate_choice,
    iso,
)
from bot.core.jobs.gitops import backup_files
from bot.core.jobs.trail import make_trail
from bot.core.kube.owners import action
from bot.core.live import LiveSection, StepReports
from bot.core.people import Directory, roles_of
from bot.core.rendering import inert, inert_naming, mention, mentions
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.errors import (
    POISON_ATTEMPTS,
    BotError,
    ClusterError,
    Fenced,
    TemporaryError,
    UserError,
    clip,
    describe,
)
from bot.records import ActionRequest, Approval, AuditEntry, JobRow, StepState

log = logging.getLogger(__name__)

#: A driver refreshes its heartbeat this often; a live job whose owner's heartbeat is older than
#: `STALE_AFTER` lost its driver (a crash, a deposed leader) and is interrupted by the next scan.
HEARTBEAT_SECONDS = 3.0
STALE_AFTER = timedelta(seconds=15)
#: How long to wait before trying again after the cluster could not be reached.
RETRY_SECONDS = 5.0
#: How a job's card line begins while its cluster gives no answer (`JobService._unreachable`).
UNREACHABLE = ":warning: no answer from cluster "
#: Its beginning while the cluster answers 401: it refuses the bot's credentials (an expired token).
REFUSED = ":warning: credentials refused by cluster "
_NOT_ANSWERING = (UNREACHABLE, REFUSED)
#: A cluster unreachable this long is said in the thread too (a blip is on the card only).
UNREACHABLE_SAID = timedelta(seconds=60)
#: Longest wait between two ticks of a job waiting for the cluster.
MAX_WAIT = 30.0
#: Jobs whose progress may leave nodes cordoned (what `cordoned_by_run` reads).
CORDONING = ("cordon", "drain")
#: How long after an abort the leader still makes an offer the crash of the aborting process owed.
OFFER_WINDOW = timedelta(days=7)
GO, LEAVE = "go", "leave"


#: The choice keys of a job whose evidence is Inconclusive (`bot.core.jobs.alerts.PAUSE_KIND`).
EVIDENCE_PAUSE_KIND = "evidence_inconclusive"
#: In `decide`'s answer when it was a vote that does not count yet (a first person's Waive).
VOTE_RECORDED = "your vote is recorded"


def _reason(tick: Tick) -> str:
    """Why the evidence is Inconclusive: from the job's progress, else its card's line ("background
    alerts is Inconclusive — …"), else the question's words (a whole question in the card's reason
    repeats the thread's, and the card's buttons answer it)."""
    progress = tick.progress if isinstance(tick.progress, dict) else {}
    line = next((c for c in tick.card if c.startswith(WAITING_ON_EVIDENCE)), "")
    return str(
        progress.get("unavailable")
        or line.removeprefix(WAITING_ON_EVIDENCE)
        or (tick.choice.question if tick.choice else "")
    )[:300]


def subject(job_id: int) -> str:
    """The job's posts in `run_messages` (outbox rows keyed by the job's own keys)."""
    return f"job:{job_id}"


def choice_json(choice: Choice | None) -> str:
    if choice is None:
        return ""
    return json.dumps(
        {
            "key": choice.key,
            "question": choice.question,
            "options": [
                {
                    "id": o.id,
                    "label": o.label,
                    "roles": list(o.roles),
                    "needs_reason": o.needs_reason,
                    **({"not_by": list(o.not_by)} if o.not_by else {}),
                }
                for o in choice.options
            ],
        }
    )


def choice_of(text: str) -> Choice | None:
    if not text:
        return None
    data = json.loads(text)
    return Choice(
        key=str(data["key"]),
        question=str(data["question"]),
        options=tuple(
            ChoiceOption(
                id=str(o["id"]),
                label=str(o["label"]),
                roles=tuple(o.get("roles", ())),
                needs_reason=bool(o.get("needs_reason", False)),
                not_by=tuple(o.get("not_by", ())),
            )
            for o in data.get("options", ())
        ),
    )


def decision_of(text: str) -> Decision | None:
    if not text:
        return None
    data = json.loads(text)
    return Decision(
        choice_key=str(data["choice_key"]),
        option=str(data["option"]),
        by=str(data["by"]),
        reason=str(data.get("reason", "")),
    )


def choice_value(job_id: int, choice_key: str, option: str) -> str:
    """A choice button's value: the job, the question and the option (stale buttons are refused)."""
    return f"{job_id}|{choice_key}|{option}"


def danger_confirm(option: ChoiceOption) -> dict[str, Any]:
    """Slack's confirmation dialog for an answer that cannot be taken back (deleting pods instead
    of evicting them): Block Kit's limits are title 100, text 300, buttons 30 characters."""
    return {
        "title": {"type": "plain_text", "text": f"{option.label[:98]}?"},
        "text": {
            "type": "plain_text",
            "text": f"“{option.label[:150]}” cannot be taken back by the bot. You will be asked why; "
            "the answer and the reason go to the run's thread and the audit log.",
        },
        "confirm": {"type": "plain_text", "text": "Yes, give a reason"},
        "deny": {"type": "plain_text", "text": "Cancel"},
        "style": "danger",
    }


def parse_choice_value(value: str) -> tuple[int, str, str] | None:
    """None for anything `choice_value` does not make (a value from outside: ASCII digits only —
    `str.isdigit` accepts "²", which `int()` then refuses — and bounded lengths)."""
    match = _CHOICE_VALUE.fullmatch(value) if len(value) <= 2_000 else None
    if match is None:
        return None
    return int(match[1]), match[2], match[3]


_CHOICE_VALUE = re.compile(r"([0-9]{1,12})\|([^|]*)\|([^|]*)", re.ASCII)


@dataclass(frozen=True, kw_only=True)
class Advanced:
    """What one `advance` did; `wait` is how long until the next one is useful."""

    wait: float
    ticked: bool = False
    done: bool = False
    lost: bool = False  # no longer ours: interrupted, ended elsewhere, or taken
    waiting_for_people: bool = False


@dataclasses.dataclass(frozen=True)
class _Named:
    """What a job's `release` reads of its cluster: the configured name."""

    name: str


class JobService:
    def __init__(
        self,
        *,
        store: Store,
        registry: JobRegistry,
        deliveries: Deliveries | None,
        directory: Directory,
        clock: Callable[[], datetime],
        owner: str,
        stale_after: timedelta = STALE_AFTER,
        steps: Callable[[], StepReports] | None = None,
        on_change: Callable[[], None] | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.registry = registry
        self.deliveries = deliveries
        self.directory = directory
        self.clock = clock
        self.owner = owner
        self.stale_after = stale_after
        #: The runs: a job's end commits its step, its progress shows in the run's card, a job
        #: whose driver died interrupts its step (people decide). Read when a job reports: the runs
        #: are built after the long actions, which they start (`bot.frontdoor.assemble`). None:
        #: jobs of no run (tests).
        self.steps = steps
        #: Told when a job was started, resumed or answered (the duty engine scans now).
        self.on_change = on_change
        #: Where a stored tick's counts go (`Tick.counts`): evictions and drained nodes.
        self.telemetry = telemetry
        #: Job id -> (how its last ticks failed, how many times in a row): poison ticks.
        self._failures: dict[int, tuple[str, int]] = {}

    # -- starting, resuming, answering -------------------------------------------------------------

    def start(self, request: ActionRequest, *, cluster: str, channel: str = "") -> str:
        """Start the request's job for its step, or continue the step's interrupted one (a resumed
        step: the same job, from its stored progress); the step's one-line detail."""
        kind = request.call.name
        if self.registry.get(kind) is None:
            raise UserError(f"this bot has no `{kind}` job")
        args = {k: str(v) for k, v in request.call.args.items()}
        dry_run = args.pop("dry_run", "false").strip().lower() in ("true", "yes", "1")
        epoch = self._step_epoch(request.run_id, request.step_id)
        now = self.clock()
        earlier = self.store.job_of_step(request.run_id, request.step_id) if request.step_id else None
        if (
            earlier is not None
            and earlier.state != "done"
            and earlier.kind == kind
            and earlier.epoch != epoch
        ):
            progress = json.loads(earlier.progress) if earlier.progress else None
            if progress is not None:
                progress[RESUMED_AT] = iso(now)  # its timers start again (`timer_start`)
                # The gate people passed again decides how it goes on (force or not), not the
                # gate of the run before the interruption.
                progress[GATE] = self._gate(dataclasses.replace(earlier, epoch=epoch))
            reopened = json.dumps(progress, sort_keys=True) if progress is not None else None
            if not self.store.reopen_job(earlier.id, epoch=epoch, at=now, progress=reopened):
                raise TemporaryError(f"job {earlier.id} changed under us; try again")
            self._audit(earlier, "resumed", f"continues from its recorded progress under epoch {epoch}")
            self._changed()
            return f"{kind} job {earlier.id} resumed from its recorded progress"
        if earlier is not None and earlier.state == "live" and earlier.epoch == epoch:
            return f"{kind} job {earlier.id} is already running"
        row = JobRow(
            id=0,
            run_id=request.run_id,
            step_id=request.step_id,
            epoch=epoch,
            kind=kind,
            cluster=cluster,
            args=json.dumps(args, sort_keys=True),
            dry_run=dry_run,
            started_by=f"run:{request.run_id}",
            started_at=now,
        )
        job_id = self.store.create_job(row)
        created = self.store.job(job_id)
        assert created is not None
        self._audit(
            created, "started", f"{kind} {self._describe_args(args)}" + (" (dry run)" if dry_run else "")
        )
        self._changed()
        what = "dry run of " if dry_run else ""
        return f"{what}{kind} job {job_id} started on {cluster}; the step ends when it does"

    def decide(
        self,
        job_id: int,
        *,
        choice_key: str,
        option: str,
        user_id: str,
        reason: str = "",
        who: Who | None = None,
    ) -> str:
        """Record `user_id`'s answer to the job's open question; a short confirmation, or a
        UserError saying why not (wrong role, no reason, a question already answered). `who`: the
        click or command it came through (its door, channel and correlation id go on the audit row).

        An answer to Inconclusive evidence is the run's to judge first (`StepReports.answer_evidence`),
        as on its card: a first vote to waive is recorded there and the question stays open."""
        row = self.store.job(job_id)
        if row is None:
            raise UserError(f"there is no job {job_id}")
        choice = choice_of(row.choice)
        if choice is None or choice.key != choice_key or row.decision:
            raise UserError("that question was already answered or is no longer open")
        if row.state == "interrupted":
            # An answer kept now would be acted on the moment the step is approved again, with
            # nothing on its gate saying so (a force past disruption budgets, a skipped node).
            raise UserError(
                f"job {job_id} was interrupted with its step: nothing is asked or done until the run "
                "is resumed and the step approved again; answer the question then"
            )
        picked = next((o for o in choice.options if o.id == option), None)
        if picked is None:
            known = ", ".join(o.id for o in choice.options)
            raise UserError(f"`{clip(option, 40)}` is not an answer to this question (one of: {known})")
        reason = reason.strip()
        if picked.needs_reason and not reason:
            raise UserError(f"“{picked.label}” needs a reason: say why")
        if choice.key.startswith(EVIDENCE_PAUSE_KIND + ":") and self.steps is not None:
            # The run's rules, whichever door the answer came through (two people to waive).
            verdict = self.steps().answer_evidence(
                row.run_id,
                row.step_id,
                epoch=row.epoch,
                option=option,
                user_id=user_id,
                reason=reason,
                who=who,
            )
            if not verdict.counts:
                return f"“{picked.label}”: {VOTE_RECORDED}; {verdict.text}"
            reason = verdict.text
        elif refusal := self.refusal(row, picked, user_id):
            raise UserError(refusal)
        decision = json.dumps({"choice_key": choice_key, "option": option, "by": user_id, "reason": reason})
        if not self.store.decide_job(job_id, choice_key=choice_key, decision=decision):
            raise UserError("that question was already answered or is no longer open")
        self._retire_question(row, choice, picked, user_id, reason)
        self._audit(
            row,
            "decided",
            f"{choice_key}: {option} by {user_id}" + (f" ({reason})" if reason else ""),
            user=user_id,
            who=who,
        )
        self._changed()
        return f"{picked.label}: recorded; job {job_id} goes on"

    def refusal(self, row: JobRow, picked: ChoiceOption, user_id: str) -> str:
        """Why `user_id` may not give this answer ("" when they may): the option's roles in the
        run's roster, and four eyes. Asked before a reason's modal opens, and again on the answer."""
        choice = choice_of(row.choice)
        if choice is None or choice.key.startswith(EVIDENCE_PAUSE_KIND + ":"):
            return ""  # the run judges these (`StepReports.answer_evidence`); no question: `decide` says
        held = roles_of(user_id, self._roster(row.run_id), self.directory)
        if not held & set(picked.roles):
            you = f"the {' and the '.join(sorted(held))}" if held else "not in this run's roster"
            return f"“{picked.label}” needs the {' or '.join(picked.roles)} of this run; you are {you}"
        if user_id in picked.not_by:
            # Four eyes: the person who asked for it cannot also confirm it.
            return f"“{picked.label}” needs a second person: you asked for it"
        return ""

    def _retire_question(
        self, row: JobRow, choice: Choice, picked: ChoiceOption, user_id: str, reason: str
    ) -> None:
        """The question's message loses its buttons and says what was chosen, by whom: a late click
        no longer meets "already answered" without knowing the answer. Best effort (the job's own
        line about the answer follows in the thread anyway)."""
        ref = self.store.messages(subject(row.id)).get(f"choice:{choice.key}")
        if ref is None or not ref.ts or self.deliveries is None:
            return
        why = f": _{inert(reason[:300])}_" if reason else ""
        text = f":ballot_box_with_check: {inert(choice.question)}\nAnswered: *{inert(picked.label)}*, by <@{inert(user_id)}>{why}"
        try:
            # In one term of this replica's lease, as every edit (`bot.core.tenure`).
            with self.deliveries.tenure.reserve(self.deliveries.send_timeout):
                self.deliveries.immediate.update_message(
                    ref.channel,
                    ref.ts,
                    text,
                    blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
                )
        except BotError as exc:  # a lapsed lease too: the answer is recorded, the edit is not owed
            log.warning("job %s: editing the answered question failed: %s", row.id, exc.user_message)

    def offer_after_abort(self, run_id: str, *, cluster: str) -> int | None:
        """After `abort`: the offer to uncordon what the run's jobs cordoned, if they cordoned
        anything and the run has no offer yet (the replica that aborted makes it at once; the
        leader's scan makes up for a crash in between: `offer_owed`). The offer's id, or None."""
        nodes = self.cordoned_by_run(run_id)
        return self.offer_uncordon(run_id, cluster=cluster, nodes=nodes) if nodes else None

    def offer_owed(self) -> list[int]:
        """Offers owed by runs aborted in the last `OFFER_WINDOW` whose offer was never made (the
        process died between the abort's commit and the offer); the ids made."""
        made: list[int] = []
        since = self.clock() - OFFER_WINDOW
        for run_id in self.store.aborted_runs_without_job(AFTER_ABORT, since=since, kinds=CORDONING):
            rows = self.store.run_rows(run_id)
            if rows is None:
                continue
            offer = self.offer_after_abort(run_id, cluster=rows[0].cluster)
            if offer is not None:
                log.info("offered to uncordon after the abort of run %s (owed since a restart)", run_id)
                made.append(offer)
        return made

    def offer_uncordon(self, run_id: str, *, cluster: str, nodes: Sequence[str]) -> int | None:
        """Offer to uncordon `nodes` after the run's abort — a job that asks first and does nothing
        until the primary or the shadow says so (or says leave them). At most one per run
        (migration 13): None when the run has one already."""
        names = sorted(dict.fromkeys(nodes))
        choice = _uncordon_choice(names)
        now = self.clock()
        row = JobRow(
            id=0,
            run_id=run_id,
            step_id=AFTER_ABORT,
            kind="uncordon",
            cluster=cluster,
            args=json.dumps({"node": ",".join(names)}),
            choice=choice_json(choice),
            started_by=f"run:{run_id}",
            started_at=now,
        )
        job_id = self.store.create_job_once(row)
        if job_id is None:
            return None
        created = self.store.job(job_id)
        assert created is not None
        self._audit(created, "offered", f"uncordon {', '.join(names)} after the abort")
        self._changed()
        return job_id

    # -- driving (called by the front door's driver thread) -----------------------------------------

    def claim(self, row: JobRow) -> bool:
        return self.store.claim_job(row.id, owner=self.owner, now=self.clock())

    def heartbeat(self, job_id: int) -> bool:
        return self.store.heartbeat_job(job_id, owner=self.owner, now=self.clock())

    def stale(self, row: JobRow) -> bool:
        """A live job whose driver is gone (no heartbeat for `stale_after`)."""
        if row.state != "live" or not row.owner or row.owner == self.owner:
            return False
        return row.heartbeat_at is None or row.heartbeat_at < self.clock() - self.stale_after

    def interrupt(self, row: JobRow, note: str, *, post: tuple[str, str] | None = None) -> bool:
        """Stop a job nobody may drive now; its progress stays for `resume`. `post`: a thread
        post (key, text) owed with the interruption, in the same transaction."""
        outbox = [_owed(post[0], post[1])] if post else []
        if not self.store.interrupt_job(
            row.id, owner_was=row.owner, at=self.clock(), note=note, outbox=outbox
        ):
            return False
        log.info("job %s (%s of run %s) interrupted: %s", row.id, row.kind, row.run_id, note)
        self._release(row)
        # An after-abort job (the uncordon offer) has no step: it ends none and interrupts none.
        if (
            self.steps is not None
            and row.step_id != AFTER_ABORT
            and self.steps().interrupt_step(row.run_id, row.step_id, epoch=row.epoch) is None
        ):
            # The step had stopped already (a restart's recovery interrupted it while this job
            # was still live): its card still shows the job as running until published again.
            self._publish_run(row.run_id)
        return True

    def advance(self, job_id: int, cluster: Any) -> Advanced:
        """One step of a job this process drives (see the module docstring)."""
        row = self.store.job(job_id)
        if row is None or row.state != "live" or row.owner != self.owner:
            self._failures.pop(job_id, None)
            return Advanced(wait=0, lost=True)
        try:
            step = self._advance(row, cluster)
        except (Fenced, BotError):
            raise
        except Exception as exc:
            return self._failed(row, exc)
        self._failures.pop(job_id, None)
        return step

    def _failed(self, row: JobRow, exc: Exception) -> Advanced:
        """A tick raised an unexpected error: again after `RETRY_SECONDS`, or, the same way
        `POISON_ATTEMPTS` times in a row, the job is interrupted and people decide."""
        failure = describe(exc)
        frames = traceback.extract_tb(exc.__traceback__)
        # The same way: the same exception raised at the same place (its message may vary).
        how = (
            f"{type(exc).__name__} {frames[-1].filename}:{frames[-1].lineno}"
            if frames
            else type(exc).__name__
        )
        was, count = self._failures.get(row.id, ("", 0))
        count = count + 1 if was == how else 1
        if count < POISON_ATTEMPTS:
            self._failures[row.id] = (how, count)
            log.warning(
                "job %s (%s of run %s) failed (attempt %s of %s); again in %.0fs: %s",
                row.id,
                row.kind,
                row.run_id,
                count,
                POISON_ATTEMPTS,
                RETRY_SECONDS,
                failure,
                exc_info=count == 1,
            )
            self.heartbeat(row.id)
            return Advanced(wait=RETRY_SECONDS)
        self._failures.pop(row.id, None)
        text = (
            f":warning: {row.kind} stopped: it failed {count} times in a row the same way "
            f"({clip(failure, 160)}). The step waits for people: `/upgrade resume {row.run_id}` "
            f"tries again from where it stopped, `/upgrade skip {row.step_id} --run {row.run_id} "
            "--reason …` records that you finished it by hand."
        )
        if self.interrupt(
            row,
            f"its tick failed {count} times in a row: {failure}",
            post=(f"failed:{row.epoch}", text),
        ):
            log.error(
                "job %s (%s of run %s) interrupted after %s failures in a row: %s",
                row.id,
                row.kind,
                row.run_id,
                count,
                failure,
            )
            self.telemetry.job_set_aside(row.kind)
            self._post_owed(row)
        return Advanced(wait=0, lost=True)

    def _advance(self, row: JobRow, cluster: Any) -> Advanced:
        if not self._step_running(row):
            self.interrupt(row, "its step is no longer running")
            return Advanced(wait=0, lost=True)
        job = self.registry.get(row.kind)
        if job is None:
            return self._end(row, ok=False, detail=f"this bot has no `{row.kind}` job")
        now = self.clock()
        args: Mapping[str, str] = json.loads(row.args or "{}")
        try:
            answered = False
            if not row.progress and row.choice:
                # A job that asks before it starts (abort's offer to uncordon).
                asked = choice_of(row.choice)
                decision = decision_of(row.decision)
                if decision is None:
                    if asked is not None and asked.key == ABORT_UNCORDON and not self._asked(row, asked):
                        # Asked once, about the nodes as they are now: the cloud removed some since.
                        names = [n for n in str(args.get("node", "")).split(",") if n]
                        left, gone = _still_cordoned(cluster, names)
                        if not left:
                            return self._end(
                                row,
                                ok=True,
                                detail="nothing to uncordon: the nodes its jobs cordoned are gone or schedulable",
                                text=":white_check_mark: nothing to uncordon after the abort: the "
                                f"{len(names)} node(s) its jobs cordoned are gone or schedulable again",
                            )
                        asked = _uncordon_choice(left, gone=len(gone), of=len(names))
                    self._ask(row, asked)
                    return Advanced(wait=2.0, waiting_for_people=True)
                if decision.option != GO:
                    return self._left_cordoned(row, cluster, decision.by)
                answered = True
            if not row.progress:
                if getattr(job, "uses_baseline", False) and row.run_id:
                    # Evidence compares against what the run's snapshot recorded, when it did.
                    recorded = self.store.evidence_baseline(row.run_id)
                    if recorded is not None:
                        args = {**args, BASELINE_ARG: json.dumps(dict(recorded.body))}
                progress = job.plan(cluster, args, now=now)
                # Who and why, for what the job leaves on the nodes it touches (bot.core.jobs.trail).
                progress[tr.TRAIL] = self._trail(row)
                progress[GATE] = self._gate(row)
                if row.dry_run:
                    lines = job.dry_run(cluster, progress)
                    return self._dry_run_done(row, progress, lines)
                tick = Tick(progress=progress, wait=0.0)
                return self._store(row, tick, planned=True, answered=answered)
            choice = choice_of(row.choice)
            decision = decision_of(row.decision)
            if choice is not None and decision is None:
                self.heartbeat(row.id)
                self._post_owed(row)
                return Advanced(wait=2.0, waiting_for_people=True)
            tick = job.tick(cluster, json.loads(row.progress), now=now, decision=decision)
            return self._store(row, tick, answered=decision is not None)
        except Fenced:
            raise
        except UserError as exc:
            return self._end(row, ok=False, detail=exc.user_message)
        except (TemporaryError, ClusterError) as exc:
            status = getattr(exc, "status", 0)
            if status == 403:
                # Read-only (the act role is not bound): the API's refusal, named, ends the job.
                return self._end(row, ok=False, detail=exc.user_message)
            log.warning("job %s: %s; again in %.0fs", row.id, exc.user_message, RETRY_SECONDS)
            self._unreachable(row, exc.user_message, refused=status == 401)
            return Advanced(wait=RETRY_SECONDS)
        except BotError as exc:
            return self._end(row, ok=False, detail=exc.user_message)

    # -- storing and showing ----------------------------------------------------------------------

    def _unreachable(self, row: JobRow, why: str, *, refused: bool = False) -> None:
        """The job's cluster gives no answer (it retries): its card's first line says so at once,
        since when the job last moved; past `UNREACHABLE_SAID` the thread says it once, so the
        channel does not read "running" over a job that has been stuck for minutes."""
        now = self.clock()
        since = row.updated_at or row.started_at
        lines = [
            line for line in (json.loads(row.card) if row.card else []) if not line.startswith(_NOT_ANSWERING)
        ]
        # A 401 is an answer: the credentials (an expired token) are refused, and waiting does not
        # renew them.
        head, renew = (
            (REFUSED, ": renew the credentials of its kubeconfig (or the bot's ServiceAccount token);")
            if refused
            else (UNREACHABLE, ";")
        )
        said = (
            f"{head}{row.cluster} since {since:%H:%M} UTC ({clip(why, 160)}){renew} retrying every "
            f"{RETRY_SECONDS:.0f} s, from where the job stopped"
        )
        card = json.dumps([said, *lines])
        outbox = []
        key = f"unreachable:{iso(since)}"
        if now - since >= UNREACHABLE_SAID and key not in self.store.messages(subject(row.id)):
            cannot = "is refused by" if refused else "cannot reach"
            renew = (
                " Its credentials must be renewed (the kubeconfig's, or the bot's ServiceAccount token)."
                if refused
                else ""
            )
            text = (
                f":warning: {row.kind} (job {row.id}) {cannot} cluster {row.cluster} since {since:%H:%M} UTC: "
                f"{clip(why, 300)}.{renew} It retries every {RETRY_SECONDS:.0f} s and goes on from where it "
                "stopped; `/upgrade pause` holds the run meanwhile."
            )
            outbox.append(_owed(key, text))
        if card == row.card and not outbox:
            # The same line as at the last retry, already said: nothing to write or edit.
            self.heartbeat(row.id)
        elif self.store.save_job_card(row.id, owner=self.owner, at=now, card=card, outbox=outbox):
            if outbox:
                self._post_owed(row)
            self._publish_run(row.run_id)

    def _reached_again(self, row: JobRow, now: datetime) -> list[tuple[str, str]]:
        """The thread line when a job whose cluster could not be reached (said in the thread) ticks
        again: how long it was out."""
        lines = json.loads(row.card) if row.card else []
        since = row.updated_at or row.started_at
        if not (lines and str(lines[0]).startswith(_NOT_ANSWERING)) or now - since < UNREACHABLE_SAID:
            return []
        text = (
            f":white_check_mark: cluster {row.cluster} answers again ({row.kind}, job {row.id}), after "
            f"{format_duration(now - since)} without an answer; the job goes on"
        )
        return [_owed(f"reachable:{iso(since)}", text)]

    def _store(self, row: JobRow, tick: Tick, *, planned: bool = False, answered: bool = False) -> Advanced:
        now = self.clock()
        # A job's lines are plain text built from node, pod and workload names (the cluster's) and
        # arguments (the user's): made inert here, once, so no job can post a ping or a fake link.
        outbox = [_owed(p.key, p.text, broadcast=p.broadcast, people=p.people) for p in tick.posts]
        outbox += self._reached_again(row, now)
        if tick.choice is not None:
            outbox.append((f"choice:{tick.choice.key}", json.dumps(self._choice_body(row, tick.choice))))
        audit = [self._audit_row(row, what, detail, at=now) for what, detail in tick.audit]
        done = (
            (tick.ok, tick.detail or f"{row.kind} {'finished' if tick.ok else 'failed'}")
            if tick.done
            else None
        )
        if not self.store.save_job_tick(
            row.id,
            owner=self.owner,
            at=now,
            progress=json.dumps(tick.progress, sort_keys=True),
            card=json.dumps(list(tick.card)),
            choice_key=tick.choice.key if tick.choice is not None else "",
            choice=choice_json(tick.choice),
            clear_decision=answered,
            outbox=outbox,
            audit=audit,
            done=done,
        ):
            return Advanced(wait=0, lost=True)
        self._count(tick)
        self._post_owed(row)
        if (
            tick.choice is not None
            and tick.choice.key.startswith(EVIDENCE_PAUSE_KIND + ":")
            and self.steps is not None
        ):
            # No data never passes: the run pauses, and its card asks Wait / Waive… / Abort.
            try:
                self.steps().pause_on_evidence(row.run_id, row.step_id, epoch=row.epoch, why=_reason(tick))
            except Fenced:
                raise
            except BotError as exc:
                log.warning("run %s: pausing on evidence failed: %s", row.run_id, exc.user_message)
        self._publish_run(row.run_id)
        if done is not None:
            self._ended(row, *done, left_behind=tick.left_behind if tick.ok else "")
            return Advanced(wait=0, ticked=True, done=True)
        wait = min(max(tick.wait, 0.0), MAX_WAIT)
        return Advanced(wait=wait, ticked=not planned, waiting_for_people=tick.choice is not None)

    def _count(self, tick: Tick) -> None:
        """Telemetry of a stored tick (stored once: the owner's fence)."""
        for what, count in tick.counts:
            kind, _, result = what.partition(":")
            if kind == "eviction":
                self.telemetry.evictions(result, count)
            elif what == "node:drained":
                self.telemetry.nodes_drained(count)

    def _asked(self, row: JobRow, choice: Choice) -> bool:
        return f"choice:{choice.key}" in self.store.messages(subject(row.id))

    def _ask(self, row: JobRow, choice: Choice | None) -> None:
        """Make sure the question of a job that asks first is in the thread (once), and keep it."""
        if choice is not None and not self._asked(row, choice):
            self.store.save_job_tick(
                row.id,
                owner=self.owner,
                at=self.clock(),
                progress="",
                card=json.dumps([choice.question]),
                choice_key=choice.key,
                choice=choice_json(choice),
                outbox=[(f"choice:{choice.key}", json.dumps(self._choice_body(row, choice)))],
            )
            self._publish_run(row.run_id)
        else:
            self.heartbeat(row.id)
        self._post_owed(row)

    def _dry_run_done(self, row: JobRow, progress: Any, lines: Sequence[str]) -> Advanced:
        shown = list(lines)[:50]
        more = len(lines) - len(shown)
        text = f":mag: Dry run of `{row.kind}` — nothing was changed. It would:\n" + "\n".join(
            f"• {inert(line, multiline=False)}" for line in shown
        )
        if more > 0:
            text += f"\n…and {more} more"
        detail = f"dry run: {len(lines)} change(s) listed, nothing changed"
        tick = Tick(progress=progress, posts=(), done=True, ok=True, detail=detail)
        now = self.clock()
        if not self.store.save_job_tick(
            row.id,
            owner=self.owner,
            at=now,
            progress=json.dumps(progress, sort_keys=True),
            card="[]",
            outbox=[("dry-run", json.dumps({"text": text}))],
            audit=[self._audit_row(row, "dry run", "; ".join(lines)[:1500], at=now)],
            done=(True, detail),
        ):
            return Advanced(wait=0, lost=True)
        self._post_owed(row)
        self._publish_run(row.run_id)
        self._ended(row, tick.ok, detail)
        return Advanced(wait=0, ticked=True, done=True)

    def _end(
        self, row: JobRow, *, ok: bool, detail: str, text: str = "", progress: dict[str, Any] | None = None
    ) -> Advanced:
        """End the job with `detail` (plain text: it may repeat a user's argument or a cluster's
        name, so the thread line shows it inert); `text` is a thread line built with markup;
        `progress`, what to keep in place of its stored progress."""
        if progress is None:
            progress = json.loads(row.progress) if row.progress else {}
        card = json.loads(row.card) if row.card else []
        shown = inert(detail)
        text = text or (f":x: `{row.kind}` stopped: {shown}" if not ok else f":white_check_mark: {shown}")
        if not self.store.save_job_tick(
            row.id,
            owner=self.owner,
            at=self.clock(),
            progress=json.dumps(progress, sort_keys=True),
            card=json.dumps(card),
            # A job's failure goes to the channel when no step's does: a step's failure, posted
            # at once with this reason, is broadcast itself (twice said the same thing twice).
            outbox=[("ended", json.dumps({"text": text, "broadcast": not ok and not self._has_step(row)}))],
            done=(ok, detail),
        ):
            return Advanced(wait=0, lost=True)
        self._post_owed(row)
        self._publish_run(row.run_id)
        self._release(row)
        self._ended(row, ok, detail)
        return Advanced(wait=0, done=True)

    def _left_cordoned(self, row: JobRow, cluster: Any, by: str) -> Advanced:
        """Abort's offer answered "leave them cordoned": the nodes still cordoned now are named in
        the thread and kept in the job's progress, for the ended run's card (`live_sections`)."""
        names = [n for n in str(json.loads(row.args or "{}").get("node", "")).split(",") if n]
        left, _gone = _still_cordoned(cluster, names)
        shown = few(left, 10)
        back = action("uncordon node=" + ",".join(left), cluster=row.cluster)
        return self._end(
            row,
            ok=True,
            detail=f"left as it is by <@{by}>: {len(left)} node(s) still cordoned: {shown}",
            text=f":warning: {len(left)} node(s) left cordoned after the abort, by {mention(by)}'s answer: "
            f"{inert(shown)} — {back} uncordons them when they are wanted back",
            progress={LEFT_CORDONED: left, "by": by},
        )

    def _has_step(self, row: JobRow) -> bool:
        return self.steps is not None and row.step_id != AFTER_ABORT

    def _release(self, row: JobRow) -> None:
        """A job that stops without a tick of its own lets go of what it holds outside the
        cluster (a step's silence lease keeps only its tail: bot.core.evidence.leases)."""
        job = self.registry.get(row.kind)
        release = getattr(job, "release", None)
        if release is None or not row.progress:
            return
        try:
            release(_Named(row.cluster), json.loads(row.progress), now=self.clock())
        except Exception as exc:  # an evidence source's trouble never stops an interruption
            log.warning("job %s: releasing its silence failed: %s", row.id, describe(exc))

    def _ended(self, row: JobRow, ok: bool, detail: str, *, left_behind: str = "") -> None:
        if self.steps is None or row.step_id == AFTER_ABORT:
            return
        try:
            self.steps().finish_long(
                row.run_id,
                row.step_id,
                ok=ok,
                detail=f"{row.kind} job {row.id}: {detail}",
                files=backup_files(row.progress),
                left_behind=left_behind,
            )
        except Fenced:
            raise
        except BotError as exc:
            log.warning("job %s: committing its step failed: %s", row.id, exc.user_message)

    def _choice_body(self, row: JobRow, choice: Choice) -> dict[str, Any]:
        roles = {o.id: " or ".join(o.roles) for o in choice.options}
        if choice.key.startswith(EVIDENCE_PAUSE_KIND + ":"):
            # The run judges these answers, as on its card (`RunService.answer_evidence`).
            roles = {o.id: "a holder of the step's gate" for o in choice.options}
            roles["waive"] = "two people, one of them the primary and the other the shadow"
        # The person whose request the question asks a second person to confirm, by name.
        asked_by = [u for o in choice.options for u in o.not_by]
        lines = "\n".join(
            f"• *{inert(o.label)}* — {roles[o.id]}"
            + (" (with a reason)" if o.needs_reason else "")
            + (f", a second person: not {', '.join(f'<@{inert(u)}>' for u in o.not_by)}" if o.not_by else "")
            for o in choice.options
        )
        text = (
            f":raised_hand: {inert_naming(choice.question, asked_by)}\nThe job waits for people; nothing more happens until one of "
            f"these is chosen:\n{lines}\n{self._who_may_answer(row, choice)}(`/upgrade choose {row.id} OPTION "
            f"[--reason …]`, OPTION one of {', '.join(o.id for o in choice.options)})"
        )
        blocks = [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "actions",
                "block_id": f"job_choice:{row.id}",
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"job_choice_{o.id}",
                        "text": {"type": "plain_text", "text": o.label[:75]},
                        "value": choice_value(row.id, choice.key, o.id),
                        **({"style": "danger", "confirm": danger_confirm(o)} if o.needs_reason else {}),
                    }
                    for o in choice.options
                ],
            },
        ]
        return {"text": text, "blocks": blocks, "broadcast": True}

    def _who_may_answer(self, row: JobRow, choice: Choice) -> str:
        """The people of the roles that may answer, mentioned once, in the post that asks: the
        question waits for them, and a card's edit notifies nobody. "" outside a run's roster."""
        if choice.key.startswith(EVIDENCE_PAUSE_KIND + ":") or not row.run_id:
            return ""
        roster = self.store.run_rows(row.run_id)
        people = roster[0].roster if roster is not None else {}
        roles = [r for r in dict.fromkeys(r for o in choice.options for r in o.roles) if people.get(r)]
        if not roles:
            return ""
        return "Who can answer: " + " · ".join(f"the {r} {mentions(people[r])}" for r in roles) + "\n"

    def post_owed(self, row: JobRow) -> int:
        return self._post_owed(row)

    def _post_owed(self, row: JobRow) -> int:
        """Post the job's outbox rows not posted yet into its run's thread, oldest first."""
        if self.deliveries is None:
            return 0
        # The run's card and where its thread is, and the job's lines not posted yet: not every
        # message of the run and the job, which grow with their threads, at every tick.
        card = self.store.messages(row.run_id, prefix="card")
        root = card.get("card")
        if root is None or not root.ts:
            return 0  # the run's card is not posted yet; the next tick posts them
        thread = thread_root(card, "card") or root.ts
        refs = self.store.messages(subject(row.id), posted_lines=False)
        owed = sorted(
            (r for r in refs.values() if r.body and not r.ts and not r.owner),
            key=lambda r: (r.claimed_at or row.started_at, r.key),
        )
        posted = 0
        for ref in owed:
            try:
                if self.deliveries.post_outbox(ref, root.channel, thread_ts=thread) is not None:
                    posted += 1
            except Fenced:
                raise
            except BotError as exc:
                # Owed still: the next tick (or the next process's scan) posts it.
                log.warning("job %s: posting %s failed: %s", row.id, ref.key, exc.user_message)
                break
        return posted

    def _publish_run(self, run_id: str) -> None:
        if self.steps is None:
            return
        try:
            self.steps().publish_run(run_id)
        except Fenced:
            raise
        except BotError as exc:
            log.warning("run %s: card update failed: %s", run_id, exc.user_message)

    def live_sections(self, run_id: str) -> list[LiveSection]:
        """The run card's live sections: every job of the run that is not done, with its lines,
        and the nodes people chose to leave cordoned after its abort (its offer, done)."""
        sections = self._left_after_abort(run_id)
        for row in self.store.jobs(states=("live", "interrupted"), run_id=run_id):
            lines = tuple(json.loads(row.card)) if row.card else ()
            state = ""  # an interrupted one is said by the card, which knows whether the run goes on
            if row.choice and not row.decision:
                state = " (waiting for people: see the thread)"
            sections.append(
                LiveSection(
                    step_id=row.step_id,
                    title=f"{row.kind} (job {row.id}){state}",
                    lines=lines[:8],
                    updated_at=row.updated_at or row.started_at,
                    interrupted=row.state != "live",
                )
            )
        return sections

    def _left_after_abort(self, run_id: str) -> list[LiveSection]:
        # One row at most (a run has one offer): read on every card render, so not the run's jobs.
        row = self.store.job_of_step(run_id, AFTER_ABORT)
        if row is None or row.state != "done" or not row.progress:
            return []
        progress = json.loads(row.progress)
        left = [str(n) for n in progress.get(LEFT_CORDONED) or []]
        if not left:
            return []
        return [
            LiveSection(
                step_id=AFTER_ABORT,
                title=f"{len(left)} node(s) left cordoned",
                lines=(few(left, 10),),
                updated_at=row.updated_at,
                left=True,
                by=str(progress.get("by") or ""),
            )
        ]

    def cordoned_by_run(self, run_id: str) -> list[str]:
        """Nodes the run's jobs cordoned and did not uncordon since (for `abort`'s offer)."""
        return cordoned_by(self.store.jobs(states=("live", "interrupted", "done"), run_id=run_id, limit=500))

    # -- helpers ----------------------------------------------------------------------------------

    def _step_epoch(self, run_id: str, step_id: str) -> int:
        rows = self.store.run_rows(run_id)
        if rows is None:
            raise UserError(f"there is no run `{clip(run_id)}`")
        for sr in rows[1]:
            if sr.step_id == step_id:
                return sr.epoch
        return 0

    def _step_running(self, row: JobRow) -> bool:
        rows = self.store.run_rows(row.run_id)
        if rows is None:
            return False
        run_row, steps, _ = rows
        if row.step_id == AFTER_ABORT:
            return True  # the offer outlives its run: it is gated by its own question
        if run_row.state not in ("active", "paused"):
            return False
        for sr in steps:
            if sr.step_id == row.step_id:
                return sr.state is StepState.RUNNING and sr.epoch == row.epoch
        return False

    def _trail(self, row: JobRow) -> dict[str, Any]:
        """The run, step, job and the people whose approval started the step (for abort's offer
        to uncordon: whoever answered it)."""
        approved: list[str] = []
        if row.step_id == AFTER_ABORT:
            decision = decision_of(row.decision)
            approved = [decision.by] if decision is not None else []
        else:
            approved = [a.user_id for a in self._starts(row)]
        return make_trail(run_id=row.run_id, step_id=row.step_id, job_id=row.id, approved_by=approved)

    def _starts(self, row: JobRow) -> list[Approval]:
        """The approvals that set the job's step running."""
        rows = self.store.run_rows(row.run_id)
        given = rows[2] if rows is not None else []
        # Each state change bumps the step's epoch: the approvals that set it running carry
        # the epoch it had while its gate was open, the last one below the job's.
        starts = [
            a for a in given
            if a.step_id == row.step_id and a.phase == "start" and a.decision in APPROVING
            and a.epoch < row.epoch
        ]  # fmt: skip
        last = max((a.epoch for a in starts), default=None)
        return [a for a in starts if a.epoch == last]

    def _gate(self, row: JobRow) -> dict[str, Any]:
        """What the step's gate chose (`bot.core.jobs.common.GATE`): force only when every
        approval that set the step running chose it, each with its reason."""
        if row.step_id == AFTER_ABORT:
            return gate_choice(())
        return gate_choice(self._starts(row))

    def _roster(self, run_id: str) -> Mapping[str, Sequence[str]]:
        rows = self.store.run_rows(run_id)
        if rows is None:
            raise UserError(f"there is no run `{clip(run_id)}`")
        return rows[0].roster

    def _audit(
        self, row: JobRow, what: str, detail: str, *, user: str = "bot", who: Who | None = None
    ) -> None:
        self.store.record_audit(self._audit_row(row, what, detail, at=self.clock(), user=user, who=who))

    @staticmethod
    def _audit_row(
        row: JobRow, what: str, detail: str, *, at: datetime, user: str = "bot", who: Who | None = None
    ) -> AuditEntry:
        """One audit row about a job: what it did (before → after), by whom; `who`, a person's
        click or command, gives its door, channel and correlation id (the bot's own rows, the one
        bound to the work writing them: the job's driver, a timer)."""
        return audit_entry(
            who or _BotActor(),
            at=at,
            user_id=user,
            kind="action",
            subcommand=row.kind,
            arguments=f"job {row.id}",
            outcome="ok",
            detail=f"{what}: {detail}",
            run_id=row.run_id,
        )

    @staticmethod
    def _describe_args(args: Mapping[str, str]) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(args.items()))

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


@dataclass(frozen=True)
class _BotActor:
    """The bot itself, as the audit's `Who` (jobs run without a person at the keyboard)."""

    user_id: str = "bot"
    source: str = "job"
    channel_id: str = ""
    correlation_id: str = ""


def _owed(key: str, text: str, *, broadcast: bool = False, people: Sequence[str] = ()) -> tuple[str, str]:
    """A thread post a job owes, as its outbox row: its line made inert (a job's lines carry the
    cluster's names and the user's arguments: no ping, no fake link) but for who answered (`people`)."""
    return key, json.dumps({"text": inert_naming(text, people), "broadcast": broadcast})


#: The choice key of the uncordon offered after an abort (`offer_uncordon`).
ABORT_UNCORDON = "abort-uncordon"


def _uncordon_choice(names: Sequence[str], *, gone: int = 0, of: int = 0) -> Choice:
    """Abort's question: uncordon `names`, the nodes the run's jobs cordoned that still are (`gone`
    of the `of` it cordoned are no longer in the cluster)."""
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    question = f"The run was aborted with {len(names)} node(s) its jobs cordoned: {shown}."
    if gone:
        question += (
            f" ({gone} more of the {of} it cordoned are no longer in the cluster: nothing to do for them.)"
        )
    return Choice(
        key=ABORT_UNCORDON,
        question=question + " Uncordon them?",
        options=(
            ChoiceOption(id=GO, label=f"Uncordon {len(names)} node(s)", roles=("primary", "shadow")),
            ChoiceOption(id=LEAVE, label="Leave them cordoned", roles=("primary", "shadow", "coordinator")),
        ),
    )


def _still_cordoned(cluster: Any, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the nodes still cordoned, those gone) of `names`, read now; a node that cannot be read
    counts as still cordoned (asked about, as before)."""
    left: list[str] = []
    gone: list[str] = []
    for name in names:
        try:
            node = cluster.get_json(f"/api/v1/nodes/{name}")
        except ClusterError as exc:
            if exc.status == 404:
                gone.append(name)
            else:
                left.append(name)
            continue
        if (node.get("spec") or {}).get("unschedulable"):
            left.append(name)
    return left, gone
