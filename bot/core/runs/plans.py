"""Upgrade plans: the YAML runbook, parsed into frozen dataclasses and validated all at once.

A plan names a cluster, the versions, the window, the channels, a roster (role → Slack user or
user-group IDs) and ordered steps. Each step has a *gate* — who must confirm it — and either
built-in `actions` the bot performs once the gate opens, or nothing: a plain gated step is human
work (a pipeline, a merge, an announcement) that the bot only gates and records. A plain step has
two confirmations: its gate ("started") and its `done` gate ("done").

Gates, as written in YAML:

    gate: {approve: [primary, shadow]}         each role must approve (distinct people)
    gate: {any_of: [primary, shadow]}          one approval from anyone holding one of them
    gate: {quorum: {role: sre, count: 2}}      N different people holding the role
    gate: {any_of: [primary], expires: 30m}    approvals older than 30 minutes no longer count

Validation walks the YAML node tree (the same way `bot.settings` does), so every error carries
the file, the line and the dotted key, and *every* error is reported at once. Whether the Slack
users and groups exist is asked through an injected `PeopleLookup` (the Slack adapter in
production, the Slack stub in tests); the rest is pure. A hostile file (a FIFO, not UTF-8, huge,
nested thousands deep, a `!!python/…` tag, a 5,000-digit version) is one more such line, never a
traceback: `read_plan_file` and `parse_plan` raise nothing else.

The model lives in `planmodel` and the checks of the steps in `plansteps`; their names are
re-exported here, where callers have always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from bot.core.actions import default_registry
from bot.core.actions.base import ActionRegistry
from bot.core.durations import format_duration, in_words
from bot.core.people import CHANNEL_ID, GROUP_ID, USER_ID
from bot.core.runs.planmodel import GATE_KINDS as GATE_KINDS
from bot.core.runs.planmodel import HORIZON, MAX_PLAN_BYTES, MAX_WINDOW, version_tuple
from bot.core.runs.planmodel import ON_FAILURE as ON_FAILURE
from bot.core.runs.planmodel import ON_OPEN_FINDINGS as ON_OPEN_FINDINGS
from bot.core.runs.planmodel import REHEARSAL_HOOKS as REHEARSAL_HOOKS
from bot.core.runs.planmodel import STEP_ANNOUNCEMENTS as STEP_ANNOUNCEMENTS
from bot.core.runs.planmodel import STEP_ID as STEP_ID
from bot.core.runs.planmodel import VERSION as VERSION
from bot.core.runs.planmodel import Gate as Gate
from bot.core.runs.planmodel import PeopleLookup as PeopleLookup
from bot.core.runs.planmodel import Plan as Plan
from bot.core.runs.planmodel import PlanLink as PlanLink
from bot.core.runs.planmodel import RehearsalHook as RehearsalHook
from bot.core.runs.planmodel import Step as Step
from bot.core.runs.planmodel import Window as Window
from bot.core.runs.planmodel import to_document as to_document
from bot.core.runs.plansteps import DEFAULTS_KEYS as DEFAULTS_KEYS
from bot.core.runs.plansteps import MAX_QUORUM as MAX_QUORUM
from bot.core.runs.plansteps import STEP_KEYS as STEP_KEYS
from bot.core.runs.plansteps import _gate as _gate
from bot.core.runs.plansteps import _PlanValidator as _PlanValidator
from bot.core.runs.plansteps import check_people, check_satisfiable, parse_steps, step_list_nodes
from bot.core.validation import (
    NAME_PATTERN,
    Home,
    compose_document,
    decode_document,
    is_null,
    read_document,
    shown,
)
from bot.core.windows import unknown_zone
from bot.errors import ConfigError, PlanInvalid
from bot.records import ActionCall

# ---------------------------------------------------------------------------------------------
# Parsing and validation


TOP_KEYS = {
    "name",
    "description",
    "cluster",
    "current_version",
    "target_version",
    "window",
    "channels",
    "roster",
    "defaults",
    "steps",
    "impact",
    "links",
}
WINDOW_KEYS = {"start", "end", "timezone"}
CHANNEL_KEYS = {"operations", "announcements"}
LINK_KEYS = {"title", "url"}
#: The plan's sections by the keys under them: one of those written at the top level (a line
#: indented too little) is said as that slip, not as an unknown key ("did you mean …").
HOMES = {
    "window": Home(frozenset(WINDOW_KEYS)),
    "channels": Home(frozenset(CHANNEL_KEYS)),
    "defaults": Home(frozenset(DEFAULTS_KEYS)),
    "steps": Home(frozenset(STEP_KEYS), entry="step"),
    "links": Home(frozenset(LINK_KEYS), entry="link"),
}
#: Announcements show these; Slack's section text limit (3,000) leaves room for the rest.
MAX_IMPACT = 1500
MAX_LINKS = 10
MAX_LINK_TITLE = 200
MAX_URL = 1000


def read_plan_file(path: Path, *, label: str | None = None) -> str:
    """A plan file's text: a regular file, at most MAX_PLAN_BYTES, UTF-8; else ConfigError."""
    label = str(path) if label is None else label
    try:
        return read_document(path, what="plan", limit=MAX_PLAN_BYTES, label=label)
    except FileNotFoundError:
        raise ConfigError(f"{label}: plan file not found") from None


def decode_plan(data: bytes, *, label: str) -> str:
    """An uploaded plan's bytes as text, with the same limits as a file; else ConfigError."""
    if len(data) > MAX_PLAN_BYTES:
        raise ConfigError(f"{label}: the plan is larger than {MAX_PLAN_BYTES // 1024} KiB")
    return decode_document(data, label, what="plan")


def parse_plan(
    text: str,
    *,
    source: str = "<plan>",
    actions: ActionRegistry | None = None,
    people: PeopleLookup | None = None,
    now: datetime | None = None,
) -> Plan:
    """Parse and validate a plan; raise PlanInvalid listing every problem with its line.

    With `now`, a window more than HORIZON ahead is refused too (a typo in the year).
    """
    actions = actions or default_registry()
    required = ("name", "cluster", "current_version", "target_version", "window", "roster", "steps")
    v, _, top, name = _document(text, source, "plan", TOP_KEYS, required, HOMES)
    cluster = v.string(top.get("cluster"), "cluster") or ""
    current = _version(v, top, "current_version")
    target = _version(v, top, "target_version")
    # Equal versions are a maintenance run (nodes rotated for a new image, a restart, one action
    # outside a plan); an older target is a typo or a downgrade, which no runbook here does.
    if current and target and version_tuple(target) < version_tuple(current):  # type: ignore[operator]
        v.error(top["target_version"], "target_version", f"{target} is not newer than {current}")

    window = _window(v, top.get("window"), now)
    impact = (v.string(top["impact"], "impact") or "") if "impact" in top else ""
    if len(impact) > MAX_IMPACT:
        v.error(top["impact"], "impact", f"at most {MAX_IMPACT} characters (it has {len(impact)})")
    links = _links(v, top.get("links"))
    operations = announcements = None
    if "channels" in top:
        ch = v.mapping(top["channels"], "channels", CHANNEL_KEYS)
        if "operations" in ch:
            operations = v.slack_id(ch["operations"], "channels.operations", CHANNEL_ID, "channel")
        if "announcements" in ch:
            announcements = v.slack_id(ch["announcements"], "channels.announcements", CHANNEL_ID, "channel")

    roster, roster_nodes = _roster(v, top.get("roster"))
    defaults = v.mapping(top["defaults"], "defaults", DEFAULTS_KEYS) if "defaults" in top else {}
    steps = parse_steps(v, top.get("steps"), set(roster), defaults, actions)

    step_nodes = {n.start_mark.line + 1: n for n in step_list_nodes(top.get("steps"))}
    for step in steps:
        check_satisfiable(v, step, step_nodes.get(step.line), roster)
    if people is not None:
        check_people(v, roster_nodes, people)
    if v.errors:
        raise PlanInvalid(v.errors)
    assert window is not None
    return Plan(
        name=name,
        description=v.string(top.get("description"), "description") or "",
        impact=impact.strip(),
        links=links,
        cluster=cluster,
        current_version=current or "",
        target_version=target or "",
        window=window,
        operations_channel=operations,
        announcements_channel=announcements,
        roster=roster,
        steps=tuple(steps),
    )


@dataclass(frozen=True, kw_only=True)
class OneStep:
    """A one-step plan that performs one action behind a gate (`/upgrade action`): the plan as
    parsed, and its YAML text, which is what the store keeps and a run is started from."""

    plan: Plan
    text: str


def one_step_plan(
    *,
    name: str,
    description: str,
    cluster: str,
    version: str,
    window: tuple[datetime, datetime],
    timezone: str,
    channel: str,
    roster: Mapping[str, Sequence[str]],
    gate_timeout: str,
    call: ActionCall,
    title: str,
    step_description: str,
    approvers: Sequence[str],
    source: str,
) -> OneStep:
    """A plan of one step, gated by `approvers`, whose one action is `call`: built once and
    validated as a loaded plan is (raises PlanInvalid), so it refuses what a plan would refuse."""
    start, end = window
    document: dict[str, Any] = {
        "name": name,
        "description": description,
        "cluster": cluster,
        "current_version": version,
        "target_version": version,
        "window": {
            "start": start.strftime("%Y-%m-%dT%H:%M"),
            "end": end.strftime("%Y-%m-%dT%H:%M"),
            "timezone": timezone,
        },
        "channels": {"operations": channel},
        "roster": {role: list(people) for role, people in roster.items()},
        "defaults": {"timeout": gate_timeout},
        "steps": [
            {
                "id": call.name,
                "title": title[:200],
                "description": step_description,
                "gate": {"approve": list(approvers)},
                "actions": [{call.name: dict(call.args)}],
            }
        ],
    }
    text = yaml.safe_dump(document, sort_keys=False)
    return OneStep(plan=parse_plan(text, source=source), text=text)


def _document(
    text: str, source: str, what: str, keys: set[str], required: Sequence[str], homes: Mapping[str, Home]
) -> tuple[_PlanValidator, yaml.Node, dict[str, yaml.Node], str]:
    """A plan's or a fleet plan's (`what`) document read to its top level: its validator, the
    document, its keys (the `required` ones reported when missing; a key of one of its sections'
    `homes` said as written a level too shallow) and its name, checked (a bad one is refused in
    `what`'s first word: "fleet names are…"); PlanInvalid when it is not YAML, or empty."""
    try:
        node = compose_document(text, source)
    except ConfigError as exc:
        raise PlanInvalid([str(exc)]) from None
    if node is None:
        raise PlanInvalid([f"{source}: the {what} is empty"])
    v = _PlanValidator(source)
    top = v.mapping(node, "", keys, homes)
    for key in required:
        v.required(top, node, "", key)
    name = v.string(top.get("name"), "name") or ""
    if name and not NAME_PATTERN.match(name):
        v.error(
            top["name"], "name", f"{what.split()[0]} names are lower-case letters, digits, '.', '-' and '_'"
        )
    return v, node, top, name


def _version(v: _PlanValidator, top: Mapping[str, yaml.Node], key: str) -> str | None:
    if key not in top:
        return None
    node = top[key]
    # `1.30` unquoted is a float in YAML; read the scalar's text, not its value.
    text = str(node.value).strip() if isinstance(node, yaml.ScalarNode) else ""
    if is_null(node):
        v.missing_value(node, key)
        return None
    if version_tuple(text) is None:
        v.error(node, key, f"{shown(text or node.tag)} is not a version such as 1.30 or v1.30.2")
        return None
    return text


def _links(v: _PlanValidator, node: yaml.Node | None) -> tuple[PlanLink, ...]:
    """`links: [{title: Runbook, url: https://…}]`: only http(s) URLs, at most MAX_LINKS."""
    if node is None:
        return ()
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, "links", "expected a list of {title, url}")
        return ()
    if len(node.value) > MAX_LINKS:
        v.error(node, "links", f"at most {MAX_LINKS} links (it has {len(node.value)})")
    out: list[PlanLink] = []
    for i, item in enumerate(node.value):
        key = f"links[{i}]"
        fields = v.mapping(item, key, LINK_KEYS)
        ok = v.required(fields, item, key, "title") & v.required(fields, item, key, "url")
        title = v.string(fields.get("title"), f"{key}.title") or ""
        url = v.string(fields.get("url"), f"{key}.url") or ""
        if "title" in fields and not 1 <= len(title.strip()) <= MAX_LINK_TITLE:
            v.error(fields["title"], f"{key}.title", f"1 to {MAX_LINK_TITLE} characters")
            ok = False
        if "url" in fields and (
            not url.startswith(("https://", "http://")) or len(url) > MAX_URL or " " in url
        ):
            v.error(fields["url"], f"{key}.url", f"{url!r} is not an http(s) URL")
            ok = False
        if ok:
            out.append(PlanLink(title=title.strip(), url=url))
    return tuple(out)


def _window(v: _PlanValidator, node: yaml.Node | None, now: datetime | None) -> Window | None:
    if node is None:
        return None
    if is_null(node):
        v.missing_value(node, "window")
        return None
    w = v.mapping(node, "window", WINDOW_KEYS)
    tz_name = v.string(w.get("timezone"), "window.timezone") or "UTC"
    zone: ZoneInfo | None
    try:
        zone = ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        v.error(w.get("timezone"), "window.timezone", unknown_zone(tz_name))
        zone = None
    start = v.moment(w.get("start"), "window.start", zone) if "start" in w else None
    end = v.moment(w.get("end"), "window.end", zone) if "end" in w else None
    v.required(w, node, "window", "start")
    v.required(w, node, "window", "end")
    if start is None or end is None or zone is None:
        return None
    if start.tzinfo is None or end.tzinfo is None:
        return None
    if end <= start:
        v.error(w["end"], "window.end", _backwards(start, end, zone))
        return None
    lasts = end.astimezone(UTC) - start.astimezone(UTC)  # real time, across a clock change
    if lasts > MAX_WINDOW:
        v.error(
            w["end"],
            "window.end",
            f"the window lasts {format_duration(lasts)}; at most {format_duration(MAX_WINDOW)}",
        )
        return None
    if now is not None and end > now + HORIZON:
        v.error(
            w["end"],
            "window.end",
            f"{end.isoformat()} is more than {HORIZON.days // 365} years ahead; a typo in the year?",
        )
        return None
    return Window(start=start, end=end, timezone=tz_name)


def _backwards(start: datetime, end: datetime, zone: ZoneInfo) -> str:
    """Why a window that ends before it starts is refused, in the plan's wall clock; on the same
    day, the likely slip: an overnight window (23:00–02:00) ends on the next day's date."""
    begin, finish = start.astimezone(zone), end.astimezone(zone)
    said = (
        f"the window ends ({finish:%Y-%m-%d %H:%M}) before it starts ({begin:%Y-%m-%d %H:%M}, {zone.key})"
        if finish != begin
        else f"the window ends when it starts ({begin:%Y-%m-%d %H:%M} {zone.key})"
    )
    if finish.date() == begin.date():
        said += f"; a window across midnight ends on the next day's date: {finish + timedelta(days=1):%Y-%m-%dT%H:%M}"
    return said


def _roster(
    v: _PlanValidator, node: yaml.Node | None
) -> tuple[dict[str, tuple[str, ...]], list[tuple[str, yaml.Node, str]]]:
    roster: dict[str, tuple[str, ...]] = {}
    nodes: list[tuple[str, yaml.Node, str]] = []
    if node is None:
        return roster, nodes
    for role, rnode in v.mapping(node, "roster", None).items():
        key = f"roster.{role}"
        if not NAME_PATTERN.match(role):
            v.error(rnode, key, "role names are lower-case letters, digits, - and _")
        items = list(rnode.value) if isinstance(rnode, yaml.SequenceNode) else [rnode]
        people: list[str] = []
        for item in items:
            value = v.string(item, key)
            if value is None:
                continue
            if not (USER_ID.match(value) or GROUP_ID.match(value)):
                v.error(item, key, f"{value!r} is not a Slack user ID (U…/W…) or user-group ID (S…)")
                continue
            people.append(value)
            nodes.append((key, item, value))
        if not items:
            v.error(rnode, key, "a role needs at least one person or user group")
        roster[role] = tuple(people)
    if not roster:
        v.error(node, "roster", "the roster needs at least one role")
    return roster, nodes


def window_past(plan: Plan, now: datetime) -> str:
    """Nothing ("") while the plan's own window has not ended; else that it has, and how to run the
    plan in a new one (`plan load`, `plan validate` and `start` say it: a card only counts it)."""
    zone = plan.window.zone
    if now < plan.window.end:
        return ""
    return (
        f"the plan's window ended {in_words(now - plan.window.end)} ago "
        f"({plan.window.end.astimezone(zone):%Y-%m-%d %H:%M} {plan.window.timezone}): to run it in a new one, "
        f'`/upgrade schedule {plan.name} --at "YYYY-MM-DD HH:MM"`, or change the plan\'s `window`'
    )


def window_warnings(plan: Plan, now: datetime | None = None) -> list[str]:
    """What `plan validate` and `plan load` warn of in the plan's window: ended already (`now`
    given), or drawn on a night the clocks change, so that it lasts another length in real time
    than on the wall clock, and a schedule on another day takes the wall clock's (`Window.length`)."""
    window = plan.window
    out = [past] if now is not None and (past := window_past(plan, now)) else []
    if window.length != window.elapsed:
        zone = window.zone
        start, end = window.start.astimezone(zone), window.end.astimezone(zone)
        out.append(
            f"the window spans a clock change ({start:%Y-%m-%d} in {window.timezone}, {start:%H:%M %Z} to "
            f"{end:%H:%M %Z}): {format_duration(window.elapsed)} of real time, "
            f"{format_duration(window.length)} on the wall clock; scheduled on another day "
            f"(`/upgrade schedule {plan.name} --at …`) it lasts {format_duration(window.length)}, "
            f"{start:%H:%M}–{end:%H:%M}"
        )
    return out
