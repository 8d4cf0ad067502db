"""`upgrade-bot rehearse-fleet FLEET`: a whole fleet run on simulated clusters, from a terminal.

The same bot as in Slack (store, fleet service, child runs with their cards and threads, the
fleet card and its milestones), with the rehearsal's text poster. The terminal front door starts
one simulated cluster per cluster of the fleet, all served by this one process on loopback, each
from its `clusters.NAME.scenario`, and hands this module settings whose clusters point at them:
their kubeconfigs, their Alertmanager and Prometheus facades (a soak's `alerts` evidence is
judged on them) and, for a scenario with a cloud, their EKS APIs.

Each cluster's sim answers its child plan's analysis queries with a quiet cluster's 0 (as
`rehearse` does), so the analyses measure through its Prometheus facade.

The rehearsal plays a stage's children one after another, so each child's run is created at its
turn (the fleet's `children_in_turn`: `FleetService.start_child`), and its window opens then, as
long as its plan wrote it and in its zone (`window_opening_now`, as `rehearse` opens its plan's;
a line says so before the child's card): a fleet is rehearsed on whatever day, and the written
dates had passed, so every card said "window ended … ago". Opened when the stage started, a
later child's window ran out while the earlier ones were played, though on the day each
cluster's team works in its own. The fleet itself (`fleet start`) keeps the windows as written.

The fleet moves as it does on the day, through `FleetService.drive`: its children are played one
after the other as `rehearse` plays a run (`bot.frontdoor.rehearse.play_run`: gates answered by
the roster with `--auto-approve`, else at the prompt; each manual step's `rehearsal:` hooks asked
of that cluster's sim), the soak passes on the sims' clock, and the fleet's `before`/`after` gates
are approved by the fleet's roster (four eyes included) or at the prompt.

Only the sims with something to play run (`_StageClocks`): the child's being played, its
stage's while they soak, and the first cluster's through its stage, whose time the bot's own
clock starts from. The others stand still: an idle sim at 600x costs about a fifth of a core
(its kubelets renew their Leases 60 times a real second each), which the one being upgraded
needs.

With `report_dir`, the fleet's timeline (`bot.core.fleets.timeline`: clusters as lanes, with
the stages and their soaks) is written there as `fleet-ID.html`.

`fail=(CLUSTER, STEP)` plants a failure: that cluster's child fails at STEP (the roster rejects
the step's gate, saying it was planted). A failed canary, or a stage over its failure budget,
pauses the fleet, and the rehearsal stops there, printing the fleet's status and why.

Exit status (`bot.frontdoor.cli.EXIT_STATUSES`): 0 when the fleet completed, 3 when it paused
(a planted or a scenario's failure stopped it), 1 when it was aborted or the rehearsal stopped,
2 when the fleet or a cluster's plan is invalid. The last line says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TextIO

from bot.core.evidence.baseline import analysis_queries
from bot.core.fleets import machine as M
from bot.core.fleets import timeline
from bot.core.people import StaticDirectory, roles_of
from bot.core.rendering import people
from bot.core.runs.plans import parse_plan
from bot.core.runs.service import Actor
from bot.core.snapshots.projection import ClusterReader
from bot.errors import TransitionRefused, UsageError, UserError
from bot.frontdoor.assemble import Services
from bot.frontdoor.rehearse import (
    SimControl,
    Terminal,
    named,
    play_run,
    rehearsal_bot,
    window_opening_now,
)
from bot.frontdoor.termtext import TerminalText
from bot.frontdoor.textposter import framed
from bot.records import ClusterConfig
from bot.settings import Settings

#: Real seconds between two looks at a soaking fleet: its clock is the sims', many times faster.
#: With a clock the rehearsal may move (`skip_clock`), the soak is not waited out: the clocks
#: are moved on as far at each look (`_StageClocks.skip`), which judges its evidence as often.
SOAK_POLL = 0.2
#: How long a rehearsal waits, in real seconds, for a fleet that neither moves nor waits on people.
STUCK_LIMIT = 120.0


def rehearse_fleet(
    fleet_name: str,
    *,
    settings: Settings,
    sims: Mapping[str, str],
    out: TextIO,
    auto_approve: bool,
    ask: Callable[[str], str],
    connect_cluster: Callable[[ClusterConfig], ClusterReader],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    start_clock: Callable[[float], None] | None = None,
    skip_clock: Callable[[float], None] | None = None,
    speed: float = 1.0,
    interactive: bool = False,
    fail: tuple[str, str] | None = None,
    plan_dirs: Sequence[Path] = (),
    report_dir: Path | None = None,
    plain: bool = False,
    zone: tzinfo | None = None,
) -> int:
    """Run the fleet to its end or its pause; the exit status is `exit_status`'s. `sims` maps each
    cluster to its sim's URL (its control endpoints); `settings` already point at them. The sims
    may be handed over frozen: each runs at `speed` only while it has something to play, and
    stands still otherwise (`_StageClocks`). `clock` is the bot's simulated time, and
    `start_clock(speed)` sets it going at the first cluster's sim's time once that sim runs
    (None: `clock` is that sim's own, which then runs all along); `skip_clock(seconds)` moves
    it on at once, so a soak passes without waiting it out in real time.
    `plan_dirs` are searched first for the fleet's `plan:` (the fleet file's own folder)."""
    if interactive and auto_approve:
        raise UserError("--interactive asks people; --auto-approve lets the roster answer: pick one")
    settings = replace(
        settings, channels=replace(settings.channels, operations=settings.channels.operations or "CREHEARSAL")
    )
    # The rehearsal drives the fleet and its children itself (see `rehearse`), each child's run
    # created as it is played.
    shown = TerminalText(zone=zone, plain=plain)
    with rehearsal_bot(
        settings,
        out,
        directory=StaticDirectory({}),
        connect_cluster=connect_cluster,
        clock=clock,
        speed=speed,
        text=shown,
        fleet_children_in_turn=True,
    ) as (bot, out, _):
        bot.fleets.plan_dirs = (*plan_dirs, *bot.fleets.plan_dirs)
        plan, stages, texts = bot.fleets.validate(fleet_name)
        for cluster, text in texts.items():
            # As `rehearse` does for its one cluster: the sim's Prometheus facade evaluates no
            # PromQL, so each child plan's analysis queries get a quiet cluster's 0 there; else
            # every analysis is Inconclusive (no data) and the first child pauses on it.
            child = parse_plan(text, source=f"{plan.plan_for(cluster)} for {cluster}")
            calls = (call for step in child.steps for call in (*step.actions, *step.background))
            for query in SimControl(sims[cluster]).quiet_metrics(analysis_queries(calls)):
                out.write(f"sim: {cluster}'s Prometheus facade answers {query} with 0 (a quiet cluster)\n")
        if fail is not None:
            _check_planted(fail, plan.name, texts)
        starter = next((p for people in plan.roster.values() for p in people), "")
        if not starter:
            raise UserError(f"fleet {plan.name} has nobody in its roster to start it")
        fleet = bot.fleets.start(fleet_name, Actor(user_id=starter, source="terminal"))
        out.write(
            f"fleet {plan.name}: run {fleet.id}, {len(fleet.members)} clusters in {len(stages)} stages\n"
        )
        clocks = _StageClocks(
            sims,
            speed,
            first=fleet.members[0].cluster,
            start_clock=start_clock,
            skip_clock=skip_clock,
            clock=clock,
        )
        # A prompt quotes the bot's texts (a person's mention): rendered as the rest is, as `rehearse` does.
        term = Terminal(
            out=out, ask=lambda prompt: ask(shown(prompt)), auto_approve=auto_approve, interactive=interactive
        )
        fleet = _play(bot, fleet.id, sims, term, fail=fail, clocks=clocks)
        out.write(framed(bot.fleets.status(fleet.id)))
        if report_dir is not None:
            out.write(
                f"report: {write_timeline(bot, fleet.id, report_dir, title=f'Fleet {plan.name} {fleet.id}')}\n"
            )
        out.write(last_line(plan.name, fleet) + "\n")
        return exit_status(fleet)


def _opening_now(cluster: str, out: TextIO, clock: Callable[[], datetime]) -> Callable[[str], str]:
    """The plan `cluster`'s child run starts with, at its turn: its window opens now (see the
    module's docstring), and `out` says so, just before the child's card."""

    def opened(text: str) -> str:
        plan = parse_plan(text, source=f"the plan of {cluster}")
        moved, said = window_opening_now(text, plan, clock(), whose=f"{cluster}'s")
        out.write(said + "\n")
        return moved

    return opened


class _StageClocks:
    """Which sims run: the one whose child is being played; the current stage's during its soak
    (a scenario's alert fires on its own cluster's clock); and the first cluster's through its
    stage, the canary's, whose time the bot's clock is (with `start_clock`, the bot's clock
    starts from it and runs on alone after). The others stand still: a cluster whose turn has
    not come, or is over, has nothing to play, and idle sims renewing their kubelets' Leases at
    600x took most of the rehearsal's CPU from the one being upgraded. A sim that resumes is
    first brought up to the bot's clock (`clock`), its timers firing on the way: it would
    otherwise be behind by the time it stood still, and an alert it fires in a soak would
    start before the soak did, so never count as new."""

    def __init__(
        self,
        sims: Mapping[str, str],
        speed: float,
        *,
        first: str,
        start_clock: Callable[[float], None] | None = None,
        skip_clock: Callable[[float], None] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.sims = sims
        self.speed = speed
        self.first = first
        self.clock = clock
        self.start_clock = start_clock
        self.skip_clock = skip_clock
        self.running: set[str] | None = None

    def follow(self, fleet: M.Fleet, *, playing: str = "") -> None:
        wanted = {playing} if playing else set()
        if fleet.phase == M.SOAKING:
            wanted |= {m.cluster for m in fleet.members_of(fleet.stage)}
        if self.start_clock is None or self.first in {m.cluster for m in fleet.members_of(fleet.stage)}:
            wanted.add(self.first)
        wanted &= set(self.sims)
        if wanted == self.running:
            return
        for cluster in sorted(self.sims):
            runs = cluster in wanted
            if self.running is None or runs != (cluster in self.running):
                sim = SimControl(self.sims[cluster])
                if runs and self.running is not None and self.clock is not None:
                    behind = (self.clock() - sim.now()).total_seconds()
                    if behind > 1:
                        sim.advance(behind)
                sim.set_speed(self.speed if runs else 0.0)
        if self.running is None and self.start_clock is not None:
            self.start_clock(self.speed)  # after the first sim's: it starts from that sim's time
        self.running = wanted

    def skip(self) -> None:
        """Let a soak's time pass: the running sims' clocks and then the bot's moved on by what
        `SOAK_POLL` real seconds would have brought (each sim firing its timers in order on
        the way, so an alert starts when it would have), else those seconds waited out."""
        if self.skip_clock is None or not self.speed:
            time.sleep(SOAK_POLL)
            return
        seconds = SOAK_POLL * self.speed
        for cluster in sorted(self.running or ()):
            SimControl(self.sims[cluster]).advance(seconds)
        self.skip_clock(seconds)


def _play(
    bot: Services,
    fleet_id: str,
    sims: Mapping[str, str],
    term: Terminal,
    *,
    fail: tuple[str, str] | None,
    clocks: _StageClocks,
) -> M.Fleet:
    """Drive the fleet until it ends or pauses: each running child played to its end, then the
    fleet's tick; the soak waited out on the sims' clock; the fleet's gates answered."""
    played: set[str] = set()
    stuck_since: float | None = None
    while True:
        fleet = bot.fleets.load(fleet_id)
        if fleet.state != M.ACTIVE:
            return fleet
        clocks.follow(fleet)
        moved = False
        for m in fleet.members:
            if m.state != M.STARTED or not m.run_id or m.run_id in played:
                continue
            stage = fleet.stages[m.stage].stage.name
            term.out.write(f"\n── {m.cluster} (stage {stage}): run {m.run_id} ──\n")
            clocks.follow(fleet, playing=m.cluster)
            opening = _opening_now(m.cluster, term.out, bot.fleets.clock)
            if not bot.fleets.start_child(fleet_id, m.cluster, plan=opening):
                moved = True
                break  # its API server did not answer: the fleet skipped it or paused, and says so
            run = bot.runs.load(m.run_id)
            planted = fail[1] if fail is not None and fail[0] == m.cluster else ""
            run = play_run(bot.runs, bot.jobs, run, SimControl(sims[m.cluster]), term, fail=planted)
            term.out.write(
                f"── {m.cluster}: run {run.id} {run.state}"
                + (f": {people(run.reason, run.roster)}" if run.reason else "")
                + " ──\n"
            )
            played.add(m.run_id)
            moved = True
        if bot.fleets.drive(fleet_id):
            moved = True
        fleet = bot.fleets.load(fleet_id)
        if fleet.state != M.ACTIVE:
            continue
        waiting = fleet.waiting_for(bot.fleets.clock())
        if waiting is not None:
            _answer_gate(bot, fleet, term)
            moved = True
        elif fleet.phase == M.SOAKING:
            clocks.skip()
            moved = True
        if moved:
            stuck_since = None
            continue
        # Nothing moved and nobody is asked: a child that paused without failing (an evidence
        # pause, an interrupted step) waits for people the rehearsal does not stand in for.
        stuck_since = stuck_since or time.monotonic()
        if time.monotonic() - stuck_since > STUCK_LIMIT:
            raise UserError(
                f"fleet {fleet_id} has not moved for {STUCK_LIMIT:g}s: "
                + "; ".join(
                    f"{m.cluster} run {m.run_id} {bot.runs.load(m.run_id).state}"
                    for m in fleet.members
                    if m.state == M.STARTED and m.run_id
                )
            )
        time.sleep(SOAK_POLL)


def _answer_gate(bot: Services, fleet: M.Fleet, term: Terminal) -> None:
    """The fleet's `before` or `after` gate: its roster approves, one person at a time (four eyes:
    whoever started the fleet last), or the person at the prompt names who approves (an empty
    answer lets the roster answer: it once named the first person again and again, refused each
    time for having approved already)."""
    which = fleet.phase
    stage = fleet.current.stage.name
    gate = fleet.gate(which)
    assert gate is not None
    people = list(
        dict.fromkeys(
            p
            for role in gate.roles
            for entry in fleet.plan.roster.get(role, ())
            for p in (sorted(bot.fleets.directory.group_members(entry)) if entry.startswith("S") else [entry])
        )
    )
    people.sort(key=lambda p: p == fleet.created_by)
    if not term.auto_approve:
        term.out.write(framed(bot.fleets.status(fleet.id)))
        while True:
            answer = term.ask(
                f"fleet gate `{which}` of stage {stage}: approve as [{'/'.join(people)}], or 'abort': "
            ).strip()
            if answer == "abort":
                bot.fleets.abort(
                    fleet.id, Actor(user_id=fleet.created_by, source="terminal"), "rehearsal stopped"
                )
                return
            if not answer:
                break  # nobody named: the roster answers this gate, as with --auto-approve
            who = answer
            try:
                bot.fleets.approve(fleet.id, Actor(user_id=who, source="terminal"))
                return
            except UserError as exc:
                term.out.write(
                    f"  · {named(who, fleet.plan.roster, bot.fleets.directory)}: {exc.user_message}\n"
                )
    for person in people:
        if not roles_of(person, fleet.plan.roster, bot.fleets.directory):
            continue
        # Said first: an approval that lets the fleet on starts the next stage's runs at once.
        term.out.write(
            f"  ↳ {named(person, fleet.plan.roster, bot.fleets.directory)} approves the fleet's `{which}` "
            f"gate of stage {stage}\n"
        )
        try:
            bot.fleets.approve(fleet.id, Actor(user_id=person, source="terminal"))
        except TransitionRefused as exc:
            term.out.write(
                f"  · {named(person, fleet.plan.roster, bot.fleets.directory)}: {exc.user_message}\n"
            )
            continue
        now = bot.fleets.load(fleet.id)
        if now.waiting_for(bot.fleets.clock()) is None or (now.stage, now.phase) != (fleet.stage, which):
            return
    raise UserError(f"nobody in the fleet's roster can satisfy the `{which}` gate of stage {stage}")


def write_timeline(bot: Services, fleet_id: str, directory: Path, *, title: str) -> Path:
    """The fleet's timeline (clusters as lanes, stages and soaks) as `fleet-ID.html` in `directory`."""
    tl = bot.fleets.timeline(fleet_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"fleet-{fleet_id}.html"
    path.write_text(timeline.to_html(tl, title=title), encoding="utf-8")
    return path


def _check_planted(fail: tuple[str, str], fleet: str, texts: Mapping[str, str]) -> None:
    """`--fail CLUSTER:STEP` names a cluster of the fleet and a step of its plan: a typo would
    plant nothing, and the rehearsal would pass for one whose failure was tried."""
    cluster, step = fail
    if cluster not in texts:
        raise UsageError(
            f"--fail {cluster}:{step}: {cluster} is not a cluster of fleet {fleet} (its clusters: "
            f"{', '.join(texts)})"
        )
    steps = [s.id for s in parse_plan(texts[cluster], source=f"the plan of {cluster}").steps]
    if step not in steps:
        raise UsageError(
            f"--fail {cluster}:{step}: {cluster}'s plan has no step {step} (its steps: {', '.join(steps)})"
        )


def exit_status(fleet: M.Fleet) -> int:
    """0 completed, every cluster cleanly; 3 completed with loose ends (a cluster failed within its
    stage's budget, skipped, or completed past failed steps: as `rehearse` exits for the last), or
    paused (a failure stopped it: a finding, for a pipeline); 1 aborted."""
    if fleet.state == M.COMPLETED:
        return 3 if M.loose_ends(fleet) else 0
    return 3 if fleet.state == M.PAUSED else 1


def last_line(name: str, fleet: M.Fleet) -> str:
    """How the fleet ended, and which stages never started when it stopped early."""
    head = f"rehearsal of fleet {name}: fleet {fleet.id} {fleet.state}"
    if fleet.state == M.COMPLETED:
        loose = M.loose_ends(fleet)
        return f"{head}, but {loose}" if loose else head
    never = [s.stage.name for i, s in enumerate(fleet.stages) if i > fleet.stage]
    after = f" (never started: {', '.join(never)})" if never else ""
    # The fleet's reason names people by id ("rejected by U0PRIMARY"): mentions, as on its card.
    why = f"why: {people(fleet.reason, fleet.plan.roster)}\n" if fleet.reason else ""
    return f"{why}{head} at stage {fleet.current.stage.name}{after}"
