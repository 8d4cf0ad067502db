"""Announcement templates: their context, team overrides, Block Kit limits, and `templates check`.

Announcements render through the bot's one sandboxed environment (`bot.core.rendering`) from
`templates/announcements/NAME.txt.j2` (mrkdwn; the message text and notification) and
`NAME.blocks.json.j2` (Block Kit). The context is built here from plain data, so every template
sees the same shape (documented in templates/announcements/README.md).

Overrides: a team's `templates_dir` may hold `announcements/NAME…` (mirroring the built-in layout)
or `NAME…` directly; the first found in that order wins, then the built-in. If a team overrides the
text but not the blocks of an announcement, the message is posted as text only: readers would
otherwise see the built-in blocks and never the team's wording. Having both spellings of one
override is refused by `templates check`, since only one of them could ever be used.

Rendering is bounded in time and size by the shared sandbox (see `bot.core.rendering`), and every
failure reads `FILE:LINE: reason`; `templates check` prints one such line per problem.

A rendered announcement is checked against Slack's limits before anything is posted (at most 50
blocks, 3,000 characters per section text, 2,000 per field, 10 fields, 10 context elements, about
12,000 characters of block text in all): a template that breaks them fails whole, never half-posted.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2

from bot.core.announcements import timing as announcements
from bot.core.rendering import Rendered, Renderer, when
from bot.errors import TemplateError
from bot.resources import BUILTIN_TEMPLATES

BUILTIN_ANNOUNCEMENTS = BUILTIN_TEMPLATES / "announcements"
ROLES = ("primary", "shadow", "coordinator")
RUN_STATES = ("scheduled", "running", "paused", "completed", "aborted", "rolled_back")

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELD_TEXT = 2000
MAX_FIELDS = 10
MAX_CONTEXT_ELEMENTS = 10
#: Slack answers `msg_blocks_too_long` from about 12–13k characters of block text.
MAX_TOTAL_BLOCK_TEXT = 12000
#: `chat.postMessage` truncates `text` past 40,000 characters; announcements stay far below.
MAX_TEXT = 4000


def _aware(moment: datetime, what: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")


def _short(value: str, what: str, limit: int) -> None:
    if not value or len(value) > limit:
        raise ValueError(f"{what} must be 1 to {limit} characters")


@dataclass(frozen=True, kw_only=True)
class WindowSpan:
    """The upgrade's window: aware start and end, and the plan's IANA zone for the text fallback."""

    start: datetime
    end: datetime
    tz: str

    def __post_init__(self) -> None:
        _aware(self.start, "window.start")
        _aware(self.end, "window.end")
        ZoneInfo(self.tz)
        if self.end <= self.start:
            raise ValueError("window.end must be after window.start")

    def in_words(self) -> str:
        """The window for the audit log, both ends in its own zone and the zone named:
        `2026-12-08T11:00:00+09:00 – 2026-12-08T14:09:00+09:00 Asia/Tokyo`."""
        zone = ZoneInfo(self.tz)
        return (
            f"{self.start.astimezone(zone).isoformat()} – {self.end.astimezone(zone).isoformat()} {self.tz}"
        )


@dataclass(frozen=True, kw_only=True)
class Link:
    title: str
    url: str

    def __post_init__(self) -> None:
        _short(self.title, "a link's title", 200)
        _short(self.url, "a link's url", 1000)


@dataclass(frozen=True, kw_only=True)
class PlanInfo:
    """What an announcement says about the plan."""

    name: str
    cluster: str
    current_version: str
    target_version: str
    window: WindowSpan
    impact: str = ""
    links: tuple[Link, ...] = ()

    def __post_init__(self) -> None:
        _short(self.name, "plan.name", 200)
        _short(self.cluster, "plan.cluster", 100)
        _short(self.current_version, "plan.current_version", 50)
        _short(self.target_version, "plan.target_version", 50)
        if len(self.links) > 10:
            raise ValueError("at most 10 links")


@dataclass(frozen=True, kw_only=True)
class StepInfo:
    index: int
    total: int
    name: str
    confirmed_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.total:
            raise ValueError("step.index must be from 1 to step.total")


@dataclass(frozen=True, kw_only=True)
class SkippedStepInfo:
    """A step that failed and was skipped: an honest `completed` names each one."""

    id: str
    name: str
    failure: str
    skipped_by: tuple[str, ...]
    reason: str


@dataclass(frozen=True, kw_only=True)
class LeftBehindInfo:
    """A step that succeeded without doing all it was asked (a drain whose skipped nodes are still
    cordoned): an honest `completed` names each one with what it left for people."""

    id: str
    name: str
    left: str


@dataclass(frozen=True, kw_only=True)
class ChosenInfo:
    """A step people let past a safeguard (a gate approved with force, evidence waived): what, by
    whom (user ids) and each one's reason (`bot.core.runs.chosen`)."""

    id: str
    name: str
    what: str
    by: tuple[str, ...]
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EvidenceLine:
    """One evidence step as the completed announcement shows it: its summary and how it ended."""

    step_id: str
    summary: str
    outcome: str


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    id: int | str
    state: str
    step: StepInfo | None = None
    #: The failed steps the run went past (skipped), in the plan's order; () for a clean run.
    failed_skipped: tuple[SkippedStepInfo, ...] = ()
    #: The finding ids those steps left open (a check's Required ids, the known issues).
    open_findings: tuple[str, ...] = ()
    #: The steps that succeeded without doing all they were asked, in the plan's order.
    left_behind: tuple[LeftBehindInfo, ...] = ()
    #: The evidence of the run's evidence steps, one line each (`step`, summary, outcome).
    evidence: tuple[EvidenceLine, ...] = ()
    #: The regressions the run's diff step finds between its snapshots ("category — subject").
    regressions: tuple[str, ...] = ()
    #: An aborted run: the nodes its jobs cordoned that are still cordoned (its thread asks).
    cordoned: tuple[str, ...] = ()
    #: What people let past a safeguard, in step order: never said as a plain success.
    chosen: tuple[ChosenInfo, ...] = ()

    def __post_init__(self) -> None:
        if self.state not in RUN_STATES:
            raise ValueError(f"run.state must be one of {', '.join(RUN_STATES)}")


@dataclass(frozen=True, kw_only=True)
class VerifiedBy:
    """One person who pressed "Verified" on a completed announcement, and when (`at`: "14:02" in
    the schedule's zone)."""

    user_id: str
    at: str


@dataclass(frozen=True, kw_only=True)
class AnnouncementInfo:
    """The posted announcement itself, for the templates that carry a button: `id` is what the
    button's value names; `verified` who confirmed it so far, in order."""

    id: int
    verified: tuple[VerifiedBy, ...] = ()


#: The completed announcement's button: the owning teams confirm their services are fine.
VERIFIED_ACTION = "announcement_verified"


#: Templates that cannot be rendered without a run (or without its current step).
_NEEDS_RUN = {announcements.STEP_COMPLETE, announcements.COMPLETED, announcements.ABORTED}


def build_context(
    *,
    plan: PlanInfo,
    roster: Mapping[str, Sequence[str]],
    run: RunInfo | None = None,
    reason: str | None = None,
    previous_window: WindowSpan | None = None,
    announcement: AnnouncementInfo | None = None,
) -> dict[str, Any]:
    """The context every announcement template receives; optional parts are present as None."""
    people = {role: tuple(roster.get(role, ())) for role in ROLES}
    people.update({role: tuple(ids) for role, ids in roster.items()})
    return {
        "plan": plan,
        "roster": people,
        "run": run,
        "reason": reason or None,
        "previous_window": previous_window,
        "announcement": announcement,
    }


@dataclass(frozen=True, kw_only=True)
class LateNote:
    """Marks an announcement sent after its due time (the bot was down), within the grace."""

    due: datetime
    zone: str


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One failure found by `templates check`: the file, the line when known, and the reason."""

    path: Path | None
    message: str
    line: int | None = None

    def __str__(self) -> str:
        """`FILE:LINE: reason`, the compiler-style line editors and CI annotations understand."""
        if self.path is None:
            return self.message
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class AnnouncementRenderer:
    """Renders announcement templates: the team's overrides first, then the built-ins."""

    templates_dir: Path | None = None
    builtin: Path = BUILTIN_ANNOUNCEMENTS
    _renderer: Renderer = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._renderer = Renderer(self.search_path())

    def team_dirs(self) -> list[Path]:
        if self.templates_dir is None:
            return []
        return [self.templates_dir / "announcements", self.templates_dir]

    def search_path(self) -> list[Path]:
        return [*self.team_dirs(), self.builtin]

    def source(self, filename: str) -> Path | None:
        """The file that `filename` resolves to, or None."""
        for directory in self.search_path():
            candidate = directory / filename
            if candidate.is_file():
                return candidate
        return None

    def overridden(self, filename: str) -> bool:
        """Does the team's directory provide `filename`?"""
        return any((d / filename).is_file() for d in self.team_dirs())

    def render(self, template: str, context: Mapping[str, Any], *, late: LateNote | None = None) -> Rendered:
        """Text and blocks for `template`, or TemplateError naming the file, line and cause."""
        if template not in announcements.TEMPLATES:
            raise TemplateError(
                f"unknown announcement {template!r} (one of {', '.join(announcements.TEMPLATES)})"
            )
        run = context.get("run")
        if template in _NEEDS_RUN and run is None:
            raise TemplateError(f"announcement {template} needs a run")
        if template == announcements.STEP_COMPLETE and getattr(run, "step", None) is None:
            raise TemplateError(f"announcement {template} needs the run's current step")
        text_name, blocks_name = f"{template}.txt.j2", f"{template}.blocks.json.j2"
        text = self._renderer.render_file(text_name, context).strip()
        blocks: list[dict[str, Any]] | None = None
        blocks_file = self.source(blocks_name)
        # The team's text without the team's blocks is posted as text, so the team's wording shows.
        if blocks_file is not None and (self.overridden(blocks_name) or not self.overridden(text_name)):
            blocks = _parse_blocks(str(blocks_file), self._renderer.render_file(blocks_name, context))
        if late is not None:
            note = (
                f":hourglass: _Delayed: this announcement was due {when(late.due, late.zone)}; "
                "the bot could not post it then._"
            )
            text = f"{note}\n{text}"
            if blocks is not None:
                blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}, *blocks]
        check_limits(
            template,
            text,
            blocks,
            text_file=str(self.source(text_name) or text_name),
            blocks_file=str(blocks_file or blocks_name),
        )
        return Rendered(text=text, blocks=blocks)

    def check(self, sample: Mapping[str, Any] | None = None) -> list[Problem]:
        """Render every announcement against a sample context; every problem found, in order."""
        problems: list[Problem] = []
        context = sample if sample is not None else sample_context()
        if self.templates_dir is not None and not self.templates_dir.is_dir():
            return [Problem(path=self.templates_dir, message="not a directory")]
        for template in announcements.TEMPLATES:
            for filename in (f"{template}.txt.j2", f"{template}.blocks.json.j2"):
                if self.templates_dir is not None:
                    both = [d / filename for d in self.team_dirs() if (d / filename).is_file()]
                    if len(both) > 1:
                        problems.append(
                            Problem(
                                path=both[1],
                                message=f"also overridden by {both[0]}, which wins; keep only one of them",
                            )
                        )
            # Once with every optional part present, once without them (before a run exists, no
            # reason, no links): a template must survive both, or it fails on a real day. After a
            # failure the next variant is not tried: it would likely fail the same way, and a
            # template that runs out of time would spend that time twice.
            variants = [context] if template in _NEEDS_RUN else [context, sample_minimal(context)]
            for variant in variants:
                try:
                    self.render(template, variant)
                except TemplateError as exc:
                    problem = self._problem(template, exc.user_message)
                    if problem not in problems:
                        problems.append(problem)
                    break
        return problems + self._other_files()

    def _other_files(self) -> list[Problem]:
        """Team files no announcement renders: a misspelt name would never be used, so say so; the
        rest (reply-template overrides, partials) have no sample context here: syntax only."""
        if self.templates_dir is None:
            return []
        known = {f"{t}.{kind}" for t in announcements.TEMPLATES for kind in ("txt.j2", "blocks.json.j2")}
        problems: list[Problem] = []
        for path in sorted(self.templates_dir.rglob("*.j2")):
            if path.name in known and path.parent in self.team_dirs():
                continue
            if path.parent == self.templates_dir / "announcements" and not path.name.startswith("_"):
                names = ", ".join(announcements.TEMPLATES)
                problems.append(
                    Problem(
                        path=path, message=f"not an announcement template ({names}; partials start with _)"
                    )
                )
                continue
            try:
                self._renderer.env.parse(path.read_text(encoding="utf-8"), path.name, str(path))
            except jinja2.TemplateSyntaxError as exc:
                problems.append(Problem(path=path, line=exc.lineno, message=exc.message or "syntax error"))
        return problems

    def _problem(self, template: str, message: str) -> Problem:
        """A render failure (`FILE:LINE: reason`, or `FILE: reason`) as a Problem on that file."""
        match = _LOCATED.match(message)
        if match is None:
            return Problem(path=self.source(f"{template}.txt.j2"), message=message)
        named = Path(match.group("file"))
        path = named if named.is_absolute() else self.source(named.name) or named
        line = int(match.group("line")) if match.group("line") else None
        return Problem(path=path, line=line, message=match.group("reason"))


#: The rendering layer's error format: `FILE:LINE: reason` (no line when none applies).
_LOCATED = re.compile(r"^(?P<file>[^\n]+?\.j2)(?::(?P<line>\d+))?: (?P<reason>.*)$", re.DOTALL)


def _parse_blocks(name: str, raw: str) -> list[dict[str, Any]]:
    try:
        loaded = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TemplateError(
            f"{name}: not valid JSON once rendered (its line {exc.lineno}: {exc.msg})"
        ) from None
    blocks = loaded.get("blocks") if isinstance(loaded, dict) else loaded
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise TemplateError(f'{name}: expected a JSON list of blocks or {{"blocks": [...]}}')
    return blocks


def check_limits(
    template: str,
    text: str,
    blocks: list[dict[str, Any]] | None,
    *,
    text_file: str | None = None,
    blocks_file: str | None = None,
) -> None:
    """Raise TemplateError (`FILE: reason`) if Slack would refuse (or cut) the message."""
    where = text_file or f"{template}.txt.j2"
    if not text:
        raise TemplateError(f"{where}: the text is empty")
    if len(text) > MAX_TEXT:
        raise TemplateError(f"{where}: the text has {len(text)} characters (at most {MAX_TEXT})")
    if blocks is None:
        return
    where = blocks_file or f"{template}.blocks.json.j2"
    if not blocks:
        raise TemplateError(f"{where}: no blocks")
    if len(blocks) > MAX_BLOCKS:
        raise TemplateError(f"{where}: {len(blocks)} blocks (Slack allows {MAX_BLOCKS})")
    total = 0
    for number, block in enumerate(blocks, start=1):
        kind = block.get("type")
        if not isinstance(kind, str):
            raise TemplateError(f"{where}: block {number} has no type")
        if kind == "section":
            texts = []
            if "text" in block:
                texts.append(_text_of(where, number, block["text"], MAX_SECTION_TEXT, "section text"))
            fields = block.get("fields", [])
            if len(fields) > MAX_FIELDS:
                raise TemplateError(
                    f"{where}: block {number} has {len(fields)} fields (at most {MAX_FIELDS})"
                )
            texts += [_text_of(where, number, f, MAX_FIELD_TEXT, "field") for f in fields]
            if not texts:
                raise TemplateError(f"{where}: block {number} is a section without text or fields")
            total += sum(len(t) for t in texts)
        elif kind == "context":
            elements = block.get("elements", [])
            if not 1 <= len(elements) <= MAX_CONTEXT_ELEMENTS:
                raise TemplateError(f"{where}: block {number} needs 1 to {MAX_CONTEXT_ELEMENTS} elements")
            total += sum(
                len(_text_of(where, number, e, MAX_SECTION_TEXT, "context text"))
                for e in elements
                if e.get("type") in ("mrkdwn", "plain_text")
            )
        elif kind == "header":
            total += len(_text_of(where, number, block.get("text"), 150, "header text"))
    if total > MAX_TOTAL_BLOCK_TEXT:
        raise TemplateError(
            f"{where}: {total} characters of block text (Slack refuses past about {MAX_TOTAL_BLOCK_TEXT})"
        )


def _text_of(where: str, number: int, obj: object, limit: int, what: str) -> str:
    if not isinstance(obj, dict) or obj.get("type") not in ("mrkdwn", "plain_text"):
        raise TemplateError(f"{where}: block {number}: {what} must be a mrkdwn or plain_text object")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise TemplateError(f"{where}: block {number}: {what} is empty")
    if len(text) > limit:
        raise TemplateError(f"{where}: block {number}: {what} has {len(text)} characters (at most {limit})")
    return text


# ---------------------------------------------------------------------------------------------
# The sample context `templates check` and `announce preview` render against

_SAMPLE_ZONE = "Asia/Tokyo"
_SAMPLE_START = datetime(2026, 12, 1, 14, 0, tzinfo=ZoneInfo(_SAMPLE_ZONE))


def sample_context(**changes: Any) -> dict[str, Any]:
    """A plan-like context with every optional part present, so every branch of a template renders.

    User-provided text carries `& < >` and `<!channel>`: the sample proves it is escaped.
    """
    plan = PlanInfo(
        name="prod-1.30",
        cluster="prod",
        current_version="v1.29.4",
        target_version="v1.30.2",
        window=WindowSpan(start=_SAMPLE_START, end=_SAMPLE_START + timedelta(hours=3), tz=_SAMPLE_ZONE),
        impact="API server restarts twice (< 1 min each) & node pools roll; no <!channel> action needed.",
        links=(
            Link(title="Runbook & rollback", url="https://wiki.example.com/runbooks/k8s-1.30?a=1&b=2"),
            Link(title="Change ticket <CHG-1234>", url="https://tickets.example.com/CHG-1234"),
        ),
    )
    run = RunInfo(
        id=42,
        state="aborted",
        step=StepInfo(index=3, total=7, name="Drain node group ng-a <blue>", confirmed_by=("U0SHADOW",)),
        failed_skipped=(
            SkippedStepInfo(
                id="checks",
                name="Pre-flight checks <all>",
                failure="pre-flight check FAILED: 1 Required — API001 & <!channel>",
                skipped_by=("U0PRIMARY",),
                reason="reviewed & <tracked> in CHG-1234",
            ),
        ),
        open_findings=("API001",),
        left_behind=(
            LeftBehindInfo(
                id="drain-ng-a",
                name="Drain node group ng-a <blue>",
                left="1 node(s) skipped, still cordoned: n<1>",
            ),
        ),
        evidence=(
            EvidenceLine(
                step_id="settle",
                summary="Alerts: 1 new since 14:02 UTC · 3 pre-existing · 0 silenced by this run <!channel> & co",
                outcome="Failed",
            ),
        ),
        regressions=("containers not ready — Deployment payments/<api> <!channel>",),
        cordoned=("ip-10-0-1-7 <!channel>", "ip-10-0-1-8"),
        chosen=(
            ChosenInfo(
                id="delete-pod",
                name="Delete the stuck pods <web>",
                what="approved with force",
                by=("U0PRIMARY", "U0SHADOW"),
                reasons=("the node is gone & <!channel>", ""),
            ),
        ),
    )
    context = build_context(
        plan=plan,
        roster={"primary": ["U0PRIMARY"], "shadow": ["U0SHADOW"], "coordinator": ["S0SRELEADS"]},
        run=run,
        reason="PDB payments/<api> blocks eviction & <!channel> was paged",
        announcement=AnnouncementInfo(id=7, verified=(VerifiedBy(user_id="U0PAYMENTS", at="14:02"),)),
        previous_window=WindowSpan(
            start=_SAMPLE_START - timedelta(days=1),
            end=_SAMPLE_START - timedelta(days=1) + timedelta(hours=3),
            tz=_SAMPLE_ZONE,
        ),
    )
    context.update(changes)
    return context


def sample_minimal(context: Mapping[str, Any]) -> dict[str, Any]:
    """`context` with its optional parts absent: no run, reason, previous window, impact or links."""
    out = replace_plan(context, impact="", links=())
    out.update(run=None, reason=None, previous_window=None, announcement=None)
    return out


def replace_plan(context: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `context` with some of the plan's fields changed (for tests and previews)."""
    out = dict(context)
    out["plan"] = dataclasses.replace(out["plan"], **changes)
    return out
