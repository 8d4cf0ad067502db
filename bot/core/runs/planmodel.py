"""The plan model: the frozen dataclasses a parsed plan is made of, and the values they allow.

`bot.core.runs.plans` parses and validates a plan's YAML into these; the run machine, the cards
and the store read them. Nothing here reads YAML.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from bot.core.runs.prs import PrRef
from bot.core.validation import MAX_DOCUMENT_BYTES
from bot.records import ActionCall

GATE_KINDS = ("approve", "any_of", "quorum")
ON_FAILURE = ("pause", "abort")
#: What a watch step does when its target is reached with a known issue still open.
ON_OPEN_FINDINGS = ("fail", "succeed")
#: What a step may ask to be announced (in the announcement channel) when it succeeds.
STEP_ANNOUNCEMENTS = ("step-complete",)
#: What a rehearsal step may ask the simulated cluster to do (the sim's control endpoints).
REHEARSAL_HOOKS: Mapping[str, frozenset[str]] = {
    "upgrade_control_plane": frozenset({"version"}),
    "replace_node_group": frozenset({"name", "version"}),
    "advance": frozenset({"seconds"}),
}
#: Optional arguments of a rehearsal hook, with the values each accepts. `drain: external`: the
#: sim launches the new nodes and leaves cordon and drain to the plan's own steps (issue 15).
REHEARSAL_HOOK_OPTIONS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "replace_node_group": {"drain": ("cloud", "external")},
}
STEP_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Bounded digits: Kubernetes versions are small numbers, and int() refuses past 4,300 digits.
VERSION = re.compile(r"^v?(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?(?:[-+][0-9A-Za-z.-]{1,100})?$", re.ASCII)
#: An upgrade window is hours, at most days; a longer one is a typo (9999-12-31) that would
#: otherwise be accepted here and fail later, in scheduling.
MAX_WINDOW = timedelta(days=14)
#: Plans are written for the next change, not for years ahead (checked when a clock is given).
HORIZON = timedelta(days=2 * 365)
FIRST_YEAR, LAST_YEAR = 2000, 2099
MAX_PLAN_BYTES = MAX_DOCUMENT_BYTES


@runtime_checkable
class PeopleLookup(Protocol):
    """Whether Slack IDs exist; the Slack adapter implements it with users.info and usergroups."""

    def user_exists(self, user_id: str) -> bool: ...

    def group_exists(self, group_id: str) -> bool: ...


# ---------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True, kw_only=True)
class Gate:
    """Who must confirm. `kind` is approve (every role), any_of (one of the roles) or quorum."""

    kind: str
    roles: tuple[str, ...]
    count: int = 1
    #: Approvals older than this stop counting (None: they never expire).
    expires: timedelta | None = None

    def __post_init__(self) -> None:
        if self.kind not in GATE_KINDS:
            raise ValueError(f"unknown gate kind {self.kind!r}")
        if not self.roles or self.count < 1:
            raise ValueError("a gate needs at least one role and a count of at least 1")

    def describe(self) -> str:
        if self.kind == "approve":
            return " and ".join(f"the {r}" for r in self.roles)
        if self.kind == "any_of":
            return " or ".join(f"the {r}" for r in self.roles)
        return f"{self.count} people holding the {self.roles[0]} role"


@dataclass(frozen=True, kw_only=True)
class RehearsalHook:
    """In a rehearsal only: what the simulated cluster does in the outside world's place."""

    name: str
    args: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PipelineJob:
    """The CI job a plain step's work runs in (`pipeline: {pipeline, job}`): the builds its hooks
    report (`bot.core.runs.pipelines`) must be of this job."""

    pipeline: str
    job: str


@dataclass(frozen=True, kw_only=True)
class Step:
    id: str
    title: str
    description: str = ""
    phase: str = ""
    gate: Gate
    #: Plain (human) steps only: the "done" confirmation. Defaults to the gate.
    done: Gate | None = None
    actions: tuple[ActionCall, ...] = ()
    timeout: timedelta | None = None
    escalate_after: timedelta | None = None
    on_failure: str = "pause"
    #: A watch step whose target is reached while a known issue it posted is still open: the step
    #: fails ("fail", the default: people look first) or succeeds ("succeed").
    on_open_findings: str = "fail"
    destructive: bool = False
    rehearsal: tuple[RehearsalHook, ...] = ()
    #: `background:` evidence checked between the nodes of the step's disruptive action (drain,
    #: restart, eks-update-nodegroup), which also carries it (`bot.core.jobs.background`).
    background: tuple[ActionCall, ...] = ()
    #: `step-complete`: announce the step in the announcement channel when it succeeds ("": no).
    announce: str = ""
    #: Plain steps only: the CI job whose builds are the step's evidence (issue 43); None: any.
    pipeline: PipelineJob | None = None
    #: Plain steps only: the pull request the step's work merges (issue 43); None: none.
    pr: PrRef | None = None
    line: int = 0

    @property
    def manual(self) -> bool:
        """True for human work the bot gates twice (started, done) but does not perform."""
        return not self.actions

    @property
    def done_gate(self) -> Gate:
        return self.done or self.gate


@dataclass(frozen=True, kw_only=True)
class Window:
    start: datetime
    end: datetime
    timezone: str

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def length(self) -> timedelta:
        """How long the window lasts as the team wrote it, on the wall clock: 01:30–03:30 is two
        hours, also when it is drawn on the night the clocks change (one hour of real time then,
        `elapsed`). A schedule on another day lasts this long, counted in real time from its
        start: the window people wrote, 01:30–03:30, on any day (and two hours of work across
        that day's own clock change, 01:30 EST–04:30 EDT)."""
        zone = self.zone
        return self.end.astimezone(zone).replace(tzinfo=None) - self.start.astimezone(zone).replace(
            tzinfo=None
        )

    @property
    def elapsed(self) -> timedelta:
        """How long the window lasts in real time: 01:00–05:00 the night the clocks go forward is
        3 hours (two datetimes of one zone subtract as wall clocks, so measured in UTC)."""
        return self.end.astimezone(UTC) - self.start.astimezone(UTC)


@dataclass(frozen=True, kw_only=True)
class PlanLink:
    """A link announcements show (runbook, change ticket, dashboard)."""

    title: str
    url: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    name: str
    description: str = ""
    #: What people outside the team will notice (announcements show it); may be empty.
    impact: str = ""
    links: tuple[PlanLink, ...] = ()
    cluster: str
    current_version: str
    target_version: str
    window: Window
    operations_channel: str | None = None
    announcements_channel: str | None = None
    roster: Mapping[str, tuple[str, ...]]
    steps: tuple[Step, ...]

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


def version_tuple(text: str) -> tuple[int, int, int] | None:
    match = VERSION.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def to_document(plan: Plan) -> dict[str, Any]:
    """A JSON-able view of the plan for templates and the store."""
    return {
        "name": plan.name,
        "cluster": plan.cluster,
        "impact": plan.impact,
        "links": [{"title": link.title, "url": link.url} for link in plan.links],
        "current_version": plan.current_version,
        "target_version": plan.target_version,
        "window": {
            "start": plan.window.start.isoformat(),
            "end": plan.window.end.isoformat(),
            "timezone": plan.window.timezone,
        },
        "roster": {r: list(p) for r, p in plan.roster.items()},
        "steps": [
            {
                "id": s.id,
                "title": s.title,
                "phase": s.phase,
                "gate": s.gate.describe(),
                "manual": s.manual,
                "actions": [a.name for a in s.actions],
                "destructive": s.destructive,
                "announce": s.announce,
            }
            for s in plan.steps
        ],
    }
