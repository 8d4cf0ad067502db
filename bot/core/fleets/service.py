"""Fleet runs over the store: start, drive, and the people's verbs, each one fenced transaction.

`FleetService.drive` is the fleet's tick: it reads each running child run, judges the soak's
evidence, asks the state machine (`bot.core.fleets.machine`) how far the fleet may go, commits
that (compare-and-set on the fleet's version, with its audit lines) and only then creates the
child runs it started. A child's run id is committed before its run exists, and creating it is
idempotent by that id, so a crash between the two creates it once, at the next drive. A fleet
whose children start in turn (`children_in_turn`: a rehearsal, which plays a stage's children one
after another) leaves that to its caller, who creates each child's run as it plays it
(`start_child`).

The triggers drive every live fleet on the fleet ticker (`tick`, as often as the run ticker), and
every verb drives its fleet at once.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from markupsafe import Markup

from bot.adapters.store import Store
from bot.core.audit import audit_entry
from bot.core.fleets import machine as M
from bot.core.fleets import render
from bot.core.fleets import timeline as fleet_timeline
from bot.core.fleets.plan import FleetPlan, Labelled, ResolvedStage, child_plan_text, parse_fleet, resolve
from bot.core.people import ANY_ROLE, Directory, display_names, require_any_role, roles_of
from bot.core.runs.machine import failure_of
from bot.core.runs.paused import ending
from bot.core.runs.plans import parse_plan, read_plan_file
from bot.core.runs.reportevents import ids_in
from bot.core.runs.service import Actor, RunService
from bot.core.snapshots.projection import ClusterReader
from bot.errors import (
    BotError,
    ConcurrentUpdate,
    ConfigError,
    Fenced,
    PlanInvalid,
    RunNotFound,
    TransitionRefused,
    UserError,
    clip,
)
from bot.records import (
    AuditEntry,
    ClusterConfig,
    FleetMemberRow,
    FleetRow,
    RunRow,
    RunState,
    StepState,
    WaiverRow,
)

log = logging.getLogger(__name__)

#: A fleet's rehearsal configuration sits next to it (`example.config.yaml`): not a fleet plan.
CONFIG_SUFFIX = ".config.yaml"
#: A compare-and-set lost to another writer is tried again on the fresh fleet this many times.
RETRIES = 3


class SoakJudge(Protocol):
    """Judges one kind of soak evidence on one cluster: "" while it passes, else why it fails."""

    def judge(self, kind: str, cluster: str, *, since: datetime, now: datetime) -> str: ...


class FleetListener(Protocol):
    """Told after every committed change of a fleet, with what the card shows (the fleet card)."""

    def fleet_changed(self, view: FleetView, events: Sequence[M.FleetEvent]) -> object: ...


@dataclass(frozen=True, kw_only=True)
class FleetView:
    fleet: M.Fleet
    children: Mapping[str, RunRow]
    #: Cluster → "1.29.4 → 1.30.2", from its pinned plan.
    versions: Mapping[str, str]
    #: Cluster → its child's current step.
    steps: Mapping[str, str]
    #: The canary's waivers that can be carried to later clusters, in words ("" when none).
    offer: str = ""


@functools.lru_cache(maxsize=64)
def _versions(plan_text: str, cluster: str) -> str:
    """A child plan's "current → target" for the fleet's card (a member's plan text does not
    change, and every fleet message shows it): parsed once, not at each card edit. PlanInvalid is
    raised, and not kept."""
    plan = parse_plan(plan_text, source=cluster)
    return f"{plan.current_version} → {plan.target_version}"


@functools.lru_cache(maxsize=32)
def _fleet_plan(plan_text: str, source: str) -> FleetPlan:
    """A stored fleet's plan (its text does not change once the fleet starts): parsed once, not at
    each load (every card edit, vote and tick loads the fleet). The plan is frozen and nobody
    writes into its mappings, so the loads share it. PlanInvalid is raised, and not kept."""
    return parse_fleet(plan_text, source=source)


class FleetService:
    def __init__(
        self,
        *,
        store: Store,
        runs: RunService,
        clusters: Mapping[str, Labelled],
        directory: Directory,
        clock: Callable[[], datetime],
        fleet_dirs: Sequence[Path],
        plan_dirs: Sequence[Path],
        judge: SoakJudge | None = None,
        reachable: Callable[[str], str] | None = None,
        listeners: Sequence[FleetListener] = (),
        children_in_turn: bool = False,
    ) -> None:
        self.store = store
        self.runs = runs
        self.clusters = clusters
        self.directory = directory
        self.clock = clock
        #: Where `fleet start NAME` finds `NAME.yaml` (the templates_dir's `fleets/`, then the shipped).
        self.fleet_dirs = tuple(fleet_dirs)
        #: Where a fleet's `plan:` is found when it is not loaded (`/upgrade plan load`).
        self.plan_dirs = tuple(plan_dirs)
        #: None: a soak with evidence cannot be judged, and says so (no data never passes).
        self.judge = judge
        #: Asked at each cluster's turn, before its child run is created: "" when its API server
        #: answers, else why not (None: not asked).
        self.reachable = reachable
        self.listeners = tuple(listeners)
        #: False (a fleet on the day): the runs of the children a stage starts are created at
        #: once, as pinned, their windows as written: their teams work at once. True: the caller
        #: creates each child's run at its turn (`start_child`): a rehearsal plays a stage's
        #: children one after another, and opens each one's window as it plays it
        #: (`bot.frontdoor.rehearse_fleet`); created with the stage, a later child's window ran
        #: out while the earlier ones were played.
        self.children_in_turn = children_in_turn

    # -- reading -----------------------------------------------------------------------------

    def fleet_text(self, name: str) -> tuple[str, str]:
        """(label, text) of the fleet plan `name` (or a path to a `.yaml` file)."""
        candidates = [Path(name)] if name.endswith((".yaml", ".yml")) else []
        candidates += [d / f"{name}.yaml" for d in self.fleet_dirs if not name.endswith(".config")]
        for path in candidates:
            if path.is_file():
                return str(path), read_plan_file(path)
        shipped = sorted(
            {
                p.stem
                for d in self.fleet_dirs
                if d.is_dir()
                for p in d.glob("*.yaml")
                if not p.name.endswith(CONFIG_SUFFIX)
            }
        )
        raise UserError(f"no fleet plan `{clip(name)}` (known: {', '.join(shipped) or 'none'})")

    def plan_text(self, name: str, *, beside: Sequence[Path] = ()) -> str:
        """The plan `name`: loaded in the store, else a file in `beside` (the folders of a fleet
        file named by its path) or the plan folders."""
        row = self.store.plan(name)
        if row is not None:
            return row.text
        for d in (*beside, *self.plan_dirs):
            if (d / f"{name}.yaml").is_file():
                return read_plan_file(d / f"{name}.yaml")
        raise UserError(f"the fleet's plan `{clip(name)}` is neither loaded nor shipped")

    def validate(self, name: str) -> tuple[FleetPlan, tuple[ResolvedStage, ...], dict[str, str]]:
        """The fleet plan, its stages over the configured clusters and each cluster's plan text;
        PlanInvalid listing every problem (the fleet's, then each cluster's plan's)."""
        label, text = self.fleet_text(name)
        fleet = parse_fleet(text, source=label)
        stages = resolve(fleet, self.clusters)
        texts: dict[str, str] = {}
        problems: list[str] = []
        # A fleet file named by its path finds its plans beside it too, as `rehearse-fleet` does.
        here = Path(label).parent if name.endswith((".yaml", ".yml")) else None
        beside = (here, here / "plans", here.parent / "plans") if here is not None else ()
        for resolved in stages:
            for cluster in resolved.clusters:
                try:
                    base = self.plan_text(fleet.plan_for(cluster), beside=beside)
                    texts[cluster] = child_plan_text(fleet, base, cluster)
                    parse_plan(texts[cluster], source=f"{fleet.plan_for(cluster)} for {cluster}")
                except PlanInvalid as exc:
                    problems += exc.errors
                except (UserError, ConfigError) as exc:
                    problems.append(f"{cluster}: {exc.user_message}")
        if problems:
            raise PlanInvalid(problems)
        return fleet, stages, texts

    def load(self, fleet_id: str) -> M.Fleet:
        rows = self.store.fleet_rows(fleet_id)
        if rows is None:
            raise RunNotFound(f"there is no fleet run `{clip(fleet_id)}` (`fleet status` lists them)")
        row, members, votes = rows
        plan = _fleet_plan(row.plan_text, f"fleet {row.id}")
        stages = tuple(
            ResolvedStage(stage=s, clusters=tuple(m.cluster for m in members if m.stage == i))
            for i, s in enumerate(plan.stages)
        )
        return M.Fleet(
            id=row.id,
            plan=plan,
            stages=stages,
            **_copied(row, _HEADER_FIELDS),
            members=tuple(M.Member(**_copied(m, _MEMBER_FIELDS)) for m in members),
            approvals=tuple(votes),
            created_at=row.created_at,
        )

    def resolve_id(self, fleet_id: str | None) -> str:
        """`fleet_id`, or the only live fleet's."""
        if fleet_id:
            return self.load(fleet_id).id
        live = self.store.fleets(states=[M.ACTIVE, M.PAUSED])
        if len(live) == 1:
            return live[0].id
        if not live:
            # The newest ended ones, so `fleet status ID` can show how they ended.
            ended = self.store.fleets(limit=3)
            last = (
                "; the last: "
                + ", ".join(
                    f"`{f.id}` ({f.name}, {f.state} {f.updated_at:%Y-%m-%d %H:%M} UTC)" for f in ended
                )
                + " (`fleet status ID`)"
                if ended
                else ""
            )
            raise RunNotFound(f"no fleet run is live{last}; `fleet start FLEET` starts one")
        raise RunNotFound(f"several fleet runs are live ({', '.join(f'`{f.id}`' for f in live)}); name one")

    def child_runs(self, fleet: M.Fleet) -> dict[str, RunRow]:
        out: dict[str, RunRow] = {}
        for m in fleet.members:
            if m.run_id and (rows := self.store.run_rows(m.run_id)) is not None:
                out[m.cluster] = rows[0]
        return out

    def view(self, fleet_id: str | None) -> FleetView:
        """The fleet with what its card and status show of each child run."""
        fleet = self.load(self.resolve_id(fleet_id))
        rows = self.store.fleet_rows(fleet.id)
        assert rows is not None
        versions: dict[str, str] = {}
        for row in rows[1]:
            try:
                versions[row.cluster] = _versions(row.plan_text, row.cluster)
            except PlanInvalid:
                continue
        children: dict[str, RunRow] = {}
        steps: dict[str, str] = {}
        for m in fleet.members:
            if m.run_id and (found := self.store.run_rows(m.run_id)) is not None:
                children[m.cluster] = found[0]
                current = next(
                    (
                        s.step_id
                        for s in found[1]
                        if s.state in (StepState.AWAITING_APPROVAL, StepState.RUNNING)
                    ),
                    "",
                )
                steps[m.cluster] = current
        return FleetView(
            fleet=fleet, children=children, versions=versions, steps=steps, offer=self.carry_offer(fleet)
        )

    def status(self, fleet_id: str | None) -> Markup:
        """The fleet's status as Slack markup (`render.status_text`): posted as it is, never
        escaped again; the terminal renders it."""
        return render.status_text(self.view(fleet_id), self.clock())

    def timeline(self, fleet_id: str) -> fleet_timeline.Timeline:
        """The fleet's timeline for its report: its audit log, and how each child run that
        completed ended, as that run's own card and report say it (`ending`)."""
        audit = self.store.audit_entries(run_id=fleet_id)
        endings = {}
        for run_id in fleet_timeline.run_ids(audit, fleet_id):
            try:
                run = self.runs.load(run_id)
            except RunNotFound:
                continue  # committed, never created: the lane says so already (still running)
            if run.state is RunState.COMPLETED:
                endings[run_id] = ending(run)
        # Who skipped a step, and whom a child's failure or skip names ("rejected by U0PRIMARY").
        said = [f"{s.by} {s.failure}" for end in endings.values() for s in end.skipped]
        said += [e.detail for e in audit if e.kind == "fleet" and e.subcommand.startswith("cluster_")]
        people = display_names(
            self.store,
            [u for text in said for u in ids_in(text)],
            now=self.clock(),
            directory=self.directory,
        )
        return fleet_timeline.build(fleet_id, audit, now=self.clock(), endings=endings, people=people)

    # -- writing -----------------------------------------------------------------------------

    def start(self, name: str, actor: Actor) -> M.Fleet:
        plan, stages, texts = self.validate(name)
        require_any_role(
            actor.user_id, frozenset({ANY_ROLE}), plan.roster, self.directory, action="starting a fleet"
        )
        now = self.clock()
        fleet_id = "F" + secrets.token_hex(3).upper()
        fleet = M.new_fleet(fleet_id, plan, stages, by=actor.user_id, now=now)
        _, plan_text = self.fleet_text(name)
        self.store.create_fleet(
            self._row(fleet, plan_text, now),
            [
                FleetMemberRow(
                    fleet_id=fleet_id,
                    cluster=c,
                    stage=i,
                    position=j,
                    state=M.PENDING,
                    run_id="",
                    attempts=0,
                    reason="",
                    plan_text=texts[c],
                )
                for i, resolved in enumerate(stages)
                for j, c in enumerate(resolved.clusters)
            ],
            self._audit(
                fleet, [M.FleetEvent(kind="fleet_started", actor=actor.user_id, detail=plan.name)], actor, now
            ),
        )
        self._tell(fleet, [M.FleetEvent(kind="fleet_started", actor=actor.user_id, detail=plan.name)])
        self.drive(fleet_id)
        return self.load(fleet_id)

    def drive(self, fleet_id: str) -> list[M.FleetEvent]:
        """Move the fleet as far as it goes now, then create the child runs it started."""
        actor = Actor(user_id="", source="scheduler")
        events: list[M.FleetEvent] = []
        for _ in range(RETRIES):
            fleet = self.load(fleet_id)
            now = self.clock()
            children = self._children(fleet)
            failure = self._evidence(fleet, now)
            out = M.advance(
                fleet,
                children,
                now=now,
                evidence_failure=failure,
                new_run_id=lambda: "R" + secrets.token_hex(3).upper(),
            )
            if out.fleet != fleet and not self._commit(fleet, out, actor, now):
                continue
            events = list(out.events)
            break
        else:
            raise ConcurrentUpdate("the fleet changed under three tries; try again")
        fleet = self.load(fleet_id)
        if events:
            self._tell(fleet, events)
        if not self.children_in_turn:
            self._create_children(fleet)
        return events

    def start_child(self, fleet_id: str, cluster: str, *, plan: Callable[[str], str] | None = None) -> bool:
        """`cluster`'s child run, created now if the fleet started it and it has none yet (a fleet
        whose children start in turn, `children_in_turn`), from the plan `plan(text)` makes of its
        pinned text (None: as pinned). False when it has no run: not started, or its API server
        does not answer (the fleet skipped it or paused, saying why)."""
        fleet = self.load(fleet_id)
        m = next((m for m in fleet.members if m.cluster == cluster), None)
        if m is None or m.state != M.STARTED or not m.run_id:
            return False
        return self._create_child(fleet, m, plan)

    def tick(self) -> list[M.FleetEvent]:
        out: list[M.FleetEvent] = []
        for row in self.store.fleets(states=[M.ACTIVE, M.PAUSED]):
            try:
                out += self.drive(row.id)
            except Fenced:
                raise  # deposed: the triggers step this replica down; the next leader drives
            except Exception:
                # One fleet's trouble must not stop the others' ticks; the next tick tries again.
                log.exception("fleet %s: drive failed", row.id)
        return out

    def approve(self, fleet_id: str | None, actor: Actor) -> M.Outcome:
        def change(fleet: M.Fleet, now: datetime) -> M.Outcome:
            held = frozenset(roles_of(actor.user_id, fleet.plan.roster, self.directory))
            return M.approve(fleet, user_id=actor.user_id, held=held, now=now)

        return self._apply(fleet_id, change, actor)

    def pause(self, fleet_id: str | None, actor: Actor, reason: str = "") -> M.Outcome:
        return self._apply(fleet_id, lambda f, now: M.pause(f, actor=actor.user_id, reason=reason), actor)

    def resume(self, fleet_id: str | None, actor: Actor) -> M.Outcome:
        return self._apply(fleet_id, lambda f, now: M.resume(f, actor=actor.user_id, now=now), actor)

    def skip(self, fleet_id: str | None, cluster: str, actor: Actor, reason: str) -> M.Outcome:
        return self._apply(
            fleet_id, lambda f, now: M.skip(f, cluster=cluster, actor=actor.user_id, reason=reason), actor
        )

    def retry_failed(self, fleet_id: str | None, actor: Actor) -> M.Outcome:
        return self._apply(fleet_id, lambda f, now: M.retry_failed(f, actor=actor.user_id), actor)

    def abort(self, fleet_id: str | None, actor: Actor, reason: str = "") -> M.Outcome:
        return self._apply(fleet_id, lambda f, now: M.abort(f, actor=actor.user_id, reason=reason), actor)

    def click(self, button: M.FleetButton, actor: Actor) -> list[str]:
        """A fleet card's button (`M.buttons`), decided as its verb is (`approve`, `pause`,
        `resume`, `carry-waivers`): the same rules and refusals, audited. A button the card no
        longer offers (the fleet moved on since it was drawn) is refused as stale, and audited.
        Returns what to tell the clicker (the carried waivers; nothing for the others: the card
        and its thread show the change)."""
        fleet = self.load(button.fleet_id)
        why = M.stale(fleet, button, self.clock(), offer=bool(self.carry_offer(fleet)))
        try:
            if why:
                raise TransitionRefused(why)
            if button.decision == "approve":
                self.approve(fleet.id, actor)
            elif button.decision == "pause":
                self.pause(fleet.id, actor, reason="from the fleet card")
            elif button.decision == "resume":
                self.resume(fleet.id, actor)
            elif button.decision == "carry":
                lines = self.carry_waivers(fleet.id, actor)
                # The offer is gone from the card once every later cluster has the waivers.
                self._tell(self.load(fleet.id), [])
                return lines
            else:
                raise UserError(f"`{clip(button.decision)}` is not a fleet button")
        except TransitionRefused as exc:
            if why:  # the verbs audit their own refusals; a stale click is refused here
                self._refused(fleet.id, actor, f"{button.decision}: {exc.user_message}")
            raise
        except BotError as exc:
            # Not in the roster, nothing to carry: refused before the fleet was asked.
            self._refused(fleet.id, actor, f"{button.decision}: {exc.user_message}")
            raise
        return []

    def _refused(self, fleet_id: str, actor: Actor, detail: str) -> None:
        self.store.record_audit(
            audit_entry(
                actor,
                at=self.clock(),
                kind="fleet",
                subcommand="refused",
                outcome="refused",
                detail=detail,
                run_id=fleet_id,
            )
        )

    def carry_waivers(self, fleet_id: str | None, actor: Actor) -> list[str]:
        """Offer the canary's waivers to the fleet's later clusters, in one go (audited).

        Each active waiver of a canary cluster becomes a waiver of every cluster of a later stage
        that has not ended, with the same finding, objects and end, and the reason saying where
        it came from. A Required finding's waiver arrives pending: a second person confirms it
        on each cluster (`/upgrade waive confirm ID`), as for any Required waiver. A cluster that
        already has the same waiver (active or pending) is left alone. Returns one line each."""
        fleet = self.load(self.resolve_id(fleet_id))
        require_any_role(
            actor.user_id, frozenset({ANY_ROLE}), fleet.plan.roster, self.directory, action="carrying waivers"
        )
        now = self.clock()
        canary, sources = self._canary_waivers(fleet, now)
        targets = [m.cluster for m in fleet.members if m.stage > 0 and m.state not in M.ENDED_MEMBER]
        if not sources:
            raise UserError(f"the canary ({', '.join(canary)}) has no active waiver to carry")
        lines: list[str] = []
        for target in targets:
            have = self._waived(target)
            for w in sources:
                if (w.finding, w.objects) in have:
                    continue
                row = self.store.add_waiver(
                    cluster=target,
                    finding=w.finding,
                    objects=w.objects,
                    reason=f"carried from {w.cluster} (waiver {w.id}): {w.reason}",
                    required=w.required,
                    state="pending" if w.required else "active",
                    requested_by=actor.user_id,
                    requested_at=now,
                    expires_at=w.expires_at,
                )
                have.add((w.finding, w.objects))
                line = f"{w.finding} on {target} (waiver {row.id}, {row.state})"
                self.store.record_audit(
                    audit_entry(
                        actor,
                        at=now,
                        kind="fleet",
                        subcommand="waiver_carried",
                        arguments=f"{w.cluster} {target}",
                        detail=f"waiver {w.id} → {row.id}: {w.finding} {row.state}",
                        run_id=fleet.id,
                    )
                )
                lines.append(line)
        if not lines:
            raise UserError("every later cluster already has the canary's waivers")
        return lines

    def carry_offer(self, fleet: M.Fleet) -> str:
        """The card's offer: "carry 3 waivers from ci to lab-1, lab-2" ("" when there is none)."""
        now = self.clock()
        canary, sources = self._canary_waivers(fleet, now)
        if not sources or fleet.stage > 1:
            return ""
        wanted = {(w.finding, w.objects) for w in sources}
        later = [m.cluster for m in fleet.members if m.stage > 0 and m.state == M.PENDING]
        # Offered while some later cluster lacks one of them (gone once they are all carried).
        if not any(wanted - self._waived(c) for c in later):
            return ""
        return f"carry {len(sources)} waiver(s) from {', '.join(canary)} to the {len(later)} later clusters"

    def _canary_waivers(self, fleet: M.Fleet, now: datetime) -> tuple[list[str], list[WaiverRow]]:
        """The canary's clusters, and their waivers active at `now`: what `carry_waivers` carries."""
        canary = [m.cluster for m in fleet.members_of(0)]
        sources = [
            w for c in canary for w in self.store.waivers(cluster=c, states=["active"]) if w.expires_at > now
        ]
        return canary, sources

    def _waived(self, cluster: str) -> set[tuple[str, tuple[str, ...]]]:
        """(finding, objects) of each waiver `cluster` has, active or pending: not carried again."""
        return {
            (w.finding, w.objects) for w in self.store.waivers(cluster=cluster, states=["active", "pending"])
        }

    # -- inside --------------------------------------------------------------------------------

    def _apply(
        self, fleet_id: str | None, change: Callable[[M.Fleet, datetime], M.Outcome], actor: Actor
    ) -> M.Outcome:
        fid = self.resolve_id(fleet_id)
        for _ in range(RETRIES):
            fleet = self.load(fid)
            now = self.clock()
            if actor.user_id:
                # The fleet's roster decides its gates and its verbs, as a run's roster does.
                require_any_role(
                    actor.user_id,
                    frozenset({ANY_ROLE}),
                    fleet.plan.roster,
                    self.directory,
                    action="changing a fleet",
                )
            out = change(fleet, now)
            if out.refused:
                self.store.record_audit(
                    audit_entry(
                        actor,
                        at=now,
                        kind="fleet",
                        subcommand="refused",
                        outcome="refused",
                        detail=out.refused,
                        run_id=fid,
                    )
                )
                raise TransitionRefused(out.refused)
            if self._commit(fleet, out, actor, now):
                self._tell(self.load(fid), out.events)
                self.drive(fid)
                return out
        raise ConcurrentUpdate("the fleet changed under three tries; try again")

    def _commit(self, before: M.Fleet, out: M.Outcome, actor: Actor, now: datetime) -> bool:
        after = out.fleet
        changed = [m for m, old in zip(after.members, before.members, strict=True) if m != old]
        votes = after.approvals[len(before.approvals) :]
        row = self.store.fleet_rows(before.id)
        assert row is not None
        return self.store.commit_fleet(
            dataclasses.replace(
                self._row(after, row[0].plan_text, now),
                version=before.version + 1,
                created_at=row[0].created_at,
            ),
            expected_version=before.version,
            members=[
                FleetMemberRow(fleet_id=after.id, position=0, plan_text="", **_copied(m, _MEMBER_FIELDS))
                for m in changed
            ],
            votes=votes,
            audit=self._audit(after, out.events, actor, now),
        )

    def _row(self, fleet: M.Fleet, plan_text: str, now: datetime) -> FleetRow:
        return FleetRow(
            id=fleet.id,
            name=fleet.plan.name,
            plan_text=plan_text,
            **_copied(fleet, _HEADER_FIELDS),
            created_at=fleet.created_at or now,
            updated_at=now,
        )

    def _audit(
        self, fleet: M.Fleet, events: Sequence[M.FleetEvent], actor: Actor, now: datetime
    ) -> list[AuditEntry]:
        return [
            audit_entry(
                actor,
                at=now,
                user_id=e.actor or actor.user_id,
                kind="fleet",
                subcommand=e.kind,
                arguments=" ".join(p for p in (e.stage, e.cluster) if p),
                detail=e.detail,
                run_id=fleet.id,
            )
            for e in events
        ]

    def _children(self, fleet: M.Fleet) -> dict[str, M.ChildStatus]:
        out: dict[str, M.ChildStatus] = {}
        for m in fleet.members:
            if m.state != M.STARTED or not m.run_id:
                continue
            rows = self.store.run_rows(m.run_id)
            if rows is None:
                continue  # committed, not created yet: `_create_children` (or `start_child`) does it
            run, steps, _ = rows
            if run.state == "completed":
                # Completed past failed steps people skipped: it says so on the card and at the end.
                # So is one whose steps succeeded leaving work for people (a drain's skipped nodes).
                # In the run's own words ("completed with 1 failed step skipped"), as its card says.
                end = ending(self.runs.load(run.id))
                steps_named = [s.step_id for s in end.skipped] + [step for step, _ in end.left]
                detail = f"{end.honest} in run {run.id}: {', '.join(steps_named)}" if steps_named else ""
                out[m.cluster] = M.ChildStatus(state=M.SUCCEEDED, detail=clip(detail, 200))
            elif run.state == "aborted":
                out[m.cluster] = M.ChildStatus(
                    state=M.FAILED,
                    detail=f"run {run.id} aborted" + (f": {clip(run.reason, 120)}" if run.reason else ""),
                )
            elif run.state == "paused":
                failed = [s for s in steps if s.state == StepState.FAILED]
                if failed:
                    names = ", ".join(s.step_id for s in failed)
                    out[m.cluster] = M.ChildStatus(
                        state=M.FAILED,
                        detail=f"{names} failed in run {run.id}: {clip(failure_of(failed[0]), 120)}",
                    )
        return out

    def _evidence(self, fleet: M.Fleet, now: datetime) -> str:
        kinds = M.soaking_with_evidence(fleet)
        if not kinds or fleet.soak_started_at is None:
            return ""
        clusters = [m.cluster for m in fleet.members_of(fleet.stage) if m.state == M.SUCCEEDED]
        for kind in kinds:
            for cluster in clusters:
                if self.judge is None:
                    return f"no source for `{kind}` evidence is wired into this bot"
                why = self.judge.judge(kind, cluster, since=fleet.soak_started_at, now=now)
                if why:
                    return f"{kind} on {cluster}: {why}"
        return ""

    def _create_children(self, fleet: M.Fleet) -> None:
        """Create the runs of members committed as started whose run does not exist yet."""
        for m in fleet.members:
            if m.state == M.STARTED and m.run_id:
                self._create_child(fleet, m)

    def _create_child(self, fleet: M.Fleet, m: M.Member, plan: Callable[[str], str] | None = None) -> bool:
        """The run of `m` (committed as started) created unless it exists; False when its cluster's
        API server does not answer."""
        if self.store.run_rows(m.run_id) is not None:
            return True
        why = self.reachable(m.cluster) if self.reachable is not None else ""
        if why:
            # Skipped (`skip_unreachable`) or the fleet pauses naming it: never a child run
            # that fails at its first call.
            self._apply(fleet.id, _unreachable(m.cluster, why), Actor(user_id="", source="scheduler"))
            return False
        text = self._pinned(fleet.id, m.cluster)
        self.runs.start_pinned(
            plan(text) if plan is not None else text,
            Actor(user_id=fleet.created_by, source="scheduler"),
            run_id=m.run_id,
        )
        return True

    def _pinned(self, fleet_id: str, cluster: str) -> str:
        rows = self.store.fleet_rows(fleet_id)
        assert rows is not None
        return next(m.plan_text for m in rows[1] if m.cluster == cluster)

    def _tell(self, fleet: M.Fleet, events: Sequence[M.FleetEvent]) -> None:
        if not self.listeners:
            return
        view = self.view(fleet.id)
        for listener in self.listeners:
            try:
                listener.fleet_changed(view, events)
            except Exception:
                # The card is a view: a failed edit must not undo a committed fleet change.
                log.exception("fleet %s: a listener failed", fleet.id)


def _unreachable(cluster: str, why: str) -> Callable[[M.Fleet, datetime], M.Outcome]:
    def change(fleet: M.Fleet, now: datetime) -> M.Outcome:
        return M.unreachable(fleet, cluster=cluster, why=why)

    return change


def api_server_answers(connect: Callable[[ClusterConfig], ClusterReader], cluster: ClusterConfig) -> str:
    """ "" when the cluster's API server answers `/version` within its `request_timeout`, else why
    not, in a line (the fleet's `reachable`)."""
    try:
        reader = connect(cluster)
        try:
            reader.get_json("/version")
        finally:
            reader.close()
    except BotError as exc:
        return exc.user_message
    except Exception as exc:  # a client that failed before it could say why: its words
        log.warning("fleet: %s did not answer /version", cluster.name, exc_info=True)
        return clip(f"{type(exc).__name__}: {exc}", 200)
    return ""


#: What a fleet and its header row (`FleetRow`) both hold under the same names, and every field of
#: a member, which its row (`FleetMemberRow`) holds too: copied as they are both ways
#: (`FleetService.load`; `_row` and `_commit`).
_HEADER_FIELDS = ("state", "reason", "stage", "phase", "soak_started_at", "created_by", "version")
_MEMBER_FIELDS = tuple(f.name for f in dataclasses.fields(M.Member))


def _copied(source: object, names: Sequence[str]) -> dict[str, Any]:
    return {name: getattr(source, name) for name in names}
