"""A plan's steps validated: gates, actions, rehearsal hooks, pipelines and pull requests.

`bot.core.runs.plans.parse_plan` reads the plan's top level and hands the `steps:` list here.
`_PlanValidator` (the settings validator plus durations and moments) lives here because the step
checks are its main user; the fleet plans use it too. Every problem is one more error line with
the YAML line and the dotted key, never a raise on the first one.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import yaml

from bot.core.actions import PLANNED
from bot.core.actions.base import ActionRegistry
from bot.core.durations import EXAMPLES, format_duration, parse_duration
from bot.core.evidence.leases import lease_of
from bot.core.jobs.background import BACKGROUND_ARG, DISRUPTIVE, EVIDENCE_KINDS, SILENCE_ARG
from bot.core.rules.patterns import PatternError, compile_pattern
from bot.core.runs.planmodel import (
    FIRST_YEAR,
    GATE_KINDS,
    LAST_YEAR,
    ON_FAILURE,
    ON_OPEN_FINDINGS,
    REHEARSAL_HOOK_OPTIONS,
    REHEARSAL_HOOKS,
    STEP_ANNOUNCEMENTS,
    STEP_ID,
    Gate,
    PeopleLookup,
    PipelineJob,
    RehearsalHook,
    Step,
)
from bot.core.runs.prs import REPO, PrRef, parse_ref
from bot.core.validation import (
    YamlValidator,
    is_null,
    shown,
)
from bot.core.windows import wall_clock_problem
from bot.errors import UserError
from bot.records import ActionCall

#: A quorum gate counts at most this many people.
MAX_QUORUM = 20
STEP_KEYS = {
    "id",
    "title",
    "description",
    "phase",
    "gate",
    "done",
    "actions",
    "timeout",
    "escalate_after",
    "on_failure",
    "on_open_findings",
    "destructive",
    "rehearsal",
    "announce",
    "background",
    "silence",
    "pipeline",
    "pr",
}
DEFAULTS_KEYS = {"timeout", "escalate_after", "on_failure"}


class _PlanValidator(YamlValidator):
    """The settings validator plus the plan's own kinds of value; never raises on the first error."""

    def duration(self, node: yaml.Node | None, key: str) -> timedelta | None:
        value = self._scalar(node, key, "a duration")
        if value is None:
            return None
        # A bare number is refused: "15" could be seconds or minutes, and a gate is no place to guess.
        if not isinstance(value, str) or value.strip().isdigit():
            self.error(node, key, f"{value!r} is not a duration (use {EXAMPLES})")
            return None
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            self.error(node, key, str(exc))
            return None
        if not parsed:
            self.error(node, key, "a duration here must be longer than zero")
            return None
        return parsed

    def moment(self, node: yaml.Node | None, key: str, zone: ZoneInfo | None) -> datetime | None:
        value = self._scalar(node, key, "a date and time")
        if value is None:
            if node is None:
                self.error(node, key, "missing key")
            return None  # an empty or unreadable value is reported by _scalar
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value.strip())
            except ValueError:
                self.error(node, key, f"{shown(value)} is not a date and time (use 2026-11-28T22:00)")
                return None
        if not isinstance(value, datetime):
            self.error(node, key, "expected a date and time such as 2026-11-28T22:00")
            return None
        if not FIRST_YEAR <= value.year <= LAST_YEAR:
            self.error(node, key, f"{value.isoformat()} is not between {FIRST_YEAR} and {LAST_YEAR}; a typo?")
            return None
        if value.tzinfo is None and zone is not None:
            problem = wall_clock_problem(value, zone)
            if problem is not None:
                # A window an hour off, or opening at a time the card shows and no clock does.
                first = value.replace(tzinfo=zone, fold=0).isoformat(timespec="minutes")
                offset = f", or write it with its offset ({first} for the first)" if problem.repeated else ""
                self.error(node, key, f"{problem.text}; pick a time before or after the change{offset}")
                return None
            value = value.replace(tzinfo=zone)
        return value

    def required(self, fields: Mapping[str, yaml.Node], parent: yaml.Node, key: str, name: str) -> bool:
        if name not in fields:
            self.error(parent, f"{key}.{name}" if key else name, "missing key")
            return False
        return True


def _gate(v: _PlanValidator, node: yaml.Node, key: str, roles: set[str]) -> Gate | None:
    g = v.mapping(node, key, {*GATE_KINDS, "expires"})
    kinds = [k for k in GATE_KINDS if k in g]
    if len(kinds) != 1:
        v.error(
            node, key, "a gate is exactly one of approve: [roles], any_of: [roles], quorum: {role, count}"
        )
        return None
    kind = kinds[0]
    expires = v.duration(g.get("expires"), f"{key}.expires")
    count = 1
    if kind == "quorum":
        q = v.mapping(g["quorum"], f"{key}.quorum", {"role", "count"})
        ok = v.required(q, g["quorum"], f"{key}.quorum", "role") & v.required(
            q, g["quorum"], f"{key}.quorum", "count"
        )
        role = v.string(q.get("role"), f"{key}.quorum.role")
        count = v.integer(q.get("count"), f"{key}.quorum.count", low=1, high=MAX_QUORUM) or 1
        if not ok or role is None:
            return None
        names = [(role, q["role"])]
    else:
        if is_null(g[kind]):
            v.missing_value(g[kind], f"{key}.{kind}")
            return None
        if not isinstance(g[kind], yaml.SequenceNode) or not g[kind].value:
            v.error(g[kind], f"{key}.{kind}", "expected a list of roles")
            return None
        names = [(r, item) for item in g[kind].value if (r := v.string(item, f"{key}.{kind}"))]
    good = True
    seen: set[str] = set()
    for role, rnode in names:
        if role not in roles:
            known = ", ".join(sorted(roles)) or "none"
            v.error(rnode, f"{key}.{kind}", f"unknown role {role!r} (the roster has: {known})")
            good = False
        if role in seen:
            v.error(rnode, f"{key}.{kind}", f"role {role!r} is listed twice")
        seen.add(role)
    if not good or not names:
        return None
    return Gate(kind=kind, roles=tuple(dict.fromkeys(r for r, _ in names)), count=count, expires=expires)


def parse_steps(
    v: _PlanValidator,
    node: yaml.Node | None,
    roles: set[str],
    defaults: Mapping[str, yaml.Node],
    registry: ActionRegistry,
) -> list[Step]:
    if node is None:
        return []
    if is_null(node):
        v.missing_value(node, "steps")
        return []
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, "steps", "expected a list of steps")
        return []
    if not node.value:
        v.error(node, "steps", "a plan needs at least one step")
        return []
    default_timeout = v.duration(defaults.get("timeout"), "defaults.timeout")
    default_escalate = v.duration(defaults.get("escalate_after"), "defaults.escalate_after")
    default_failure = _on_failure(v, defaults.get("on_failure"), "defaults.on_failure") or "pause"
    out: list[Step] = []
    seen: dict[str, int] = {}
    for index, snode in enumerate(node.value):
        s = v.mapping(snode, f"steps[{index}]", STEP_KEYS)
        sid = v.string(s.get("id"), f"steps[{index}].id") if "id" in s else None
        key = f"steps[{index}]" + (f"({sid})" if sid else "")
        v.required(s, snode, f"steps[{index}]", "id")
        v.required(s, snode, key, "title")
        v.required(s, snode, key, "gate")
        if sid is not None:
            if not STEP_ID.match(sid):
                v.error(s["id"], f"{key}.id", "step ids are lower-case letters, digits and -")
            if sid in seen:
                v.error(s["id"], f"{key}.id", f"duplicate step id (first used on line {seen[sid]})")
            else:
                seen[sid] = s["id"].start_mark.line + 1
        gate = _gate(v, s["gate"], f"{key}.gate", roles) if "gate" in s else None
        done = _gate(v, s["done"], f"{key}.done", roles) if "done" in s else None
        calls = _actions(v, s.get("actions"), f"{key}.actions", registry)
        background = _actions(v, s.get("background"), f"{key}.background", registry)
        calls = _with_background(v, s, key, calls, background)
        if done is not None and calls:
            v.error(s["done"], f"{key}.done", "only a plain step (no actions) has a done confirmation")
        _long_and_mutating(v, s, key, calls, gate, registry)
        timeout = v.duration(s.get("timeout"), f"{key}.timeout") if "timeout" in s else default_timeout
        escalate = (
            v.duration(s.get("escalate_after"), f"{key}.escalate_after")
            if "escalate_after" in s
            else default_escalate
        )
        if timeout and escalate and escalate >= timeout:
            v.error(
                s.get("escalate_after") or snode,
                f"{key}.escalate_after",
                f"escalating after {format_duration(escalate)} is pointless with a "
                f"{format_duration(timeout)} timeout",
            )
        calls = _bounded_watch(v, s, key, calls, timeout)
        on_failure = _on_failure(v, s.get("on_failure"), f"{key}.on_failure") or default_failure
        on_open_findings = _on_open_findings(v, s.get("on_open_findings"), f"{key}.on_open_findings", calls)
        destructive = bool(v.boolean(s.get("destructive"), f"{key}.destructive"))
        hooks = _rehearsal(v, s.get("rehearsal"), f"{key}.rehearsal")
        announce = _announce(v, s.get("announce"), f"{key}.announce")
        pipeline = _pipeline(v, s.get("pipeline"), f"{key}.pipeline")
        if pipeline is not None and calls:
            v.error(s["pipeline"], f"{key}.pipeline", "only a plain step (no actions) has a pipeline job")
        pr = _pr(v, s.get("pr"), f"{key}.pr")
        if pr is not None and calls:
            v.error(s["pr"], f"{key}.pr", "only a plain step (no actions) names a pull request")
        # Read before the `continue`, so an empty `title:` is reported even on a broken step.
        title = v.string(s.get("title"), f"{key}.title")
        description = v.string(s.get("description"), f"{key}.description") or ""
        phase = v.string(s.get("phase"), f"{key}.phase") or ""
        if sid is None or gate is None or "title" not in s:
            continue
        out.append(
            Step(
                id=sid,
                title=title or sid,
                description=description,
                phase=phase,
                gate=gate,
                done=done,
                actions=calls,
                timeout=timeout,
                escalate_after=escalate,
                on_failure=on_failure,
                on_open_findings=on_open_findings,
                destructive=destructive,
                rehearsal=hooks,
                announce=announce,
                background=background,
                pipeline=pipeline,
                pr=pr,
                line=snode.start_mark.line + 1,
            )
        )
    return out


def step_list_nodes(node: yaml.Node | None) -> list[yaml.Node]:
    """Step nodes by line, to match parsed steps (which keep their line)."""
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def people_of(gate: Gate, roster: Mapping[str, tuple[str, ...]]) -> tuple[dict[str, set[str]], bool]:
    """Person → the gate's roles they hold; and whether a user group is involved (size unknown)."""
    held: dict[str, set[str]] = {}
    groups = False
    for role in gate.roles:
        for entry in roster.get(role, ()):
            groups = groups or entry.startswith("S")
            held.setdefault(entry, set()).add(role)
    return held, groups


def check_satisfiable(
    v: _PlanValidator, step: Step, node: yaml.Node | None, roster: Mapping[str, tuple[str, ...]]
) -> None:
    """Gates nobody can pass with this roster are errors now, not a stuck run at 3 a.m."""
    children = {k.value: c for k, c in node.value} if isinstance(node, yaml.MappingNode) else {}
    key = f"steps({step.id})"
    # A step that names actions is not a plain step, and a `done` that failed to parse is not the
    # gate: either way its errors are already listed, and a guess here would only add noise.
    skip_done = "actions" in children or ("done" in children and step.done is None)
    gates = [("gate", step.gate)] + ([("done", step.done_gate)] if step.manual and not skip_done else [])
    for name, gate in gates:
        where = children.get(name, children.get("gate", node))
        people, groups = people_of(gate, roster)
        if groups:
            continue  # a user group may hold any number of people
        if gate.kind == "approve" and len(people) < len(gate.roles):
            v.error(
                where,
                f"{key}.{name}",
                f"needs {gate.describe()} as different people, but the roster has only {len(people)}",
            )
        if gate.kind == "quorum" and len(people) < gate.count:
            v.error(
                where,
                f"{key}.{name}",
                f"needs {gate.count} people, but the {gate.roles[0]} role has {len(people)}",
            )
    if skip_done:
        return
    if (
        step.manual
        and step.done_gate.kind != "approve"
        and not (step.done_gate.kind == "quorum" and step.done_gate.count > 1)
    ):
        done_people, done_groups = people_of(step.done_gate, roster)
        start_people, _ = people_of(step.gate, roster)
        if not done_groups and len(done_people) == 1 and set(done_people) <= set(start_people):
            (only,) = done_people
            v.error(
                children.get("done", children.get("gate", node)),
                f"{key}.done",
                f"four eyes: {only} would start the step and be the only one able to confirm it done; "
                "add a role to `done`",
            )


def _one_of(v: _PlanValidator, node: yaml.Node | None, key: str, words: Sequence[str]) -> str | None:
    """The word at `node` when it is one of `words`; None when absent, or another (an error)."""
    value = v.string(node, key)
    if value is not None and value not in words:
        v.error(node, key, f"{value!r} is not one of: {', '.join(words)}")
        return None
    return value


def _on_failure(v: _PlanValidator, node: yaml.Node | None, key: str) -> str | None:
    return _one_of(v, node, key, ON_FAILURE)


def _on_open_findings(
    v: _PlanValidator, node: yaml.Node | None, key: str, calls: Sequence[ActionCall]
) -> str:
    """`on_open_findings: fail|succeed` (default fail), only on a step with a `watch` action."""
    value = _one_of(v, node, key, ON_OPEN_FINDINGS)
    if value is None:
        return "fail"
    if not any(c.name == "watch" for c in calls):
        v.error(node, key, "only a step with a `watch` action has findings to decide on")
    return value


def _announce(v: _PlanValidator, node: yaml.Node | None, key: str) -> str:
    """`announce: step-complete` → the announcement's name; "" when absent or wrong (an error)."""
    return _one_of(v, node, key, STEP_ANNOUNCEMENTS) or ""


#: What a pipeline or job name may be: what CI systems name them, without control characters.
_PIPELINE_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


def _pipeline(v: _PlanValidator, node: yaml.Node | None, key: str) -> PipelineJob | None:
    """`pipeline: {pipeline: NAME, job: NAME}` → the step's CI job; None when absent or wrong."""
    if node is None:
        return None
    m = v.mapping(node, key, {"pipeline", "job"})
    names: dict[str, str] = {}
    for part in ("pipeline", "job"):
        if part not in m:
            v.error(node, f"{key}.{part}", "missing key")
            continue
        value = v.string(m[part], f"{key}.{part}")
        if value is not None and not _PIPELINE_NAME.match(value):
            v.error(m[part], f"{key}.{part}", "1 to 200 printable characters")
        elif value is not None:
            names[part] = value
    if len(names) < 2:
        return None
    return PipelineJob(pipeline=names["pipeline"], job=names["job"])


#: A Git branch name as a plan may give it (no spaces, no control characters).
_BRANCH = re.compile(r"^[A-Za-z0-9._/+-]{1,200}$")


def _pr(v: _PlanValidator, node: yaml.Node | None, key: str) -> PrRef | None:
    """`pr: {repo: org/name, number | branch | match, require?: {merged: true, checks: success}}`."""
    if node is None:
        return None
    m = v.mapping(node, key, {"repo", "number", "branch", "match", "require"})
    if not m:
        return None
    good = True
    repo = v.string(m.get("repo"), f"{key}.repo") if "repo" in m else None
    if "repo" not in m:
        v.error(node, f"{key}.repo", "missing key")
        good = False
    elif repo is None or not REPO.match(repo):
        v.error(m["repo"], f"{key}.repo", "expected owner/name, like org/eks-provision-configuration")
        good = False
    chosen = [k for k in ("number", "branch", "match") if k in m]
    if len(chosen) != 1:
        v.error(node, key, "name the PR by exactly one of number, branch or match (a title pattern)")
        return None
    document: dict[str, Any] = {"repo": repo}
    which = chosen[0]
    if which == "number":
        number = _pr_number(v, m[which], f"{key}.number")
        if number is None:
            return None
        document["number"] = number
    else:
        text = v.string(m[which], f"{key}.{which}")
        if text is None:
            return None
        if which == "branch" and not _BRANCH.match(text):
            v.error(m[which], f"{key}.branch", "expected a branch name")
            good = False
        if which == "match":
            try:
                compile_pattern(text)
            except PatternError as exc:
                v.error(m[which], f"{key}.match", exc.user_message)
                good = False
        document[which] = text
    if "require" in m:
        r = v.mapping(m["require"], f"{key}.require", {"merged", "checks"})
        require: dict[str, Any] = {}
        if "merged" in r:
            require["merged"] = v.boolean(r["merged"], f"{key}.require.merged")
        if "checks" in r:
            checks = v.string(r["checks"], f"{key}.require.checks")
            if checks != "success":
                v.error(r["checks"], f"{key}.require.checks", "the one requirement is `success`")
            require["checks"] = checks
        document["require"] = require
    return parse_ref(document) if good else None


def _pr_number(v: _PlanValidator, node: yaml.Node, key: str) -> int | None:
    """A PR's number: `62`, as the schema and the docs write it, or `"62"`."""
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int":
        return v.integer(node, key, low=1, high=999_999_999)
    text = v.string(node, key) if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str") else ""
    if text is None:
        return None  # said: not a non-empty string
    if not (text.isascii() and text.isdigit() and len(text) <= 9 and int(text) > 0):
        v.error(node, key, "expected a PR number, from 1 to 999999999")
        return None
    return int(text)


def _named_items(
    v: _PlanValidator, node: yaml.Node | None, key: str
) -> list[tuple[str, yaml.Node, dict[str, str]]]:
    """`- name` or `- name: {arg: value}` items → (name, node, args)."""
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, key, "expected a list")
        return []
    out: list[tuple[str, yaml.Node, dict[str, str]]] = []
    for item in node.value:
        if isinstance(item, yaml.ScalarNode):
            name = v.string(item, key)
            if name:
                out.append((name, item, {}))
            continue
        if not isinstance(item, yaml.MappingNode) or len(item.value) != 1:
            v.error(item, key, "each item is a name, or `name: {argument: value}`")
            continue
        knode, anode = item.value[0]
        name = str(knode.value)
        args: dict[str, str] = {}
        if not (isinstance(anode, yaml.ScalarNode) and anode.value in ("", "~", "null")):
            for arg, argnode in v.mapping(anode, f"{key}.{name}", None).items():
                text = str(argnode.value) if isinstance(argnode, yaml.ScalarNode) else ""
                if not text:
                    v.error(argnode, f"{key}.{name}.{arg}", "expected a value")
                args[arg] = text
        out.append((name, knode, args))
    return out


def _actions(
    v: _PlanValidator, node: yaml.Node | None, key: str, registry: ActionRegistry
) -> tuple[ActionCall, ...]:
    calls: list[ActionCall] = []
    for name, nnode, args in _named_items(v, node, key):
        spec = registry.get(name)
        if spec is None:
            available = ", ".join(registry.names())
            if name in PLANNED:
                v.error(
                    nnode,
                    key,
                    f"action {name!r} is not available yet: make this a plain gated step without "
                    f"`actions` until it is (available: {available})",
                )
            else:
                near = difflib.get_close_matches(name, registry.names(), n=1)
                hint = f" — did you mean {near[0]!r}?" if near else ""
                v.error(nnode, key, f"unknown action {name!r}{hint} (available: {available})")
            continue
        for arg in sorted(set(args) - spec.arguments):
            v.error(
                nnode,
                f"{key}.{name}",
                f"unknown argument {arg!r} (accepted: {', '.join(sorted(spec.arguments))})",
            )
        for arg in sorted(spec.required - set(args)):
            v.error(nnode, f"{key}.{name}", f"missing argument {arg!r}")
        # With an argument misspelt or missing, what the action would say of the rest (a `nodegrup`
        # typo: "either node or nodegroup, not both") only repeats the same mistake, wrongly.
        if spec.check is not None and not set(args) - spec.arguments and not spec.required - set(args):
            # Values the action would refuse when it starts (a duration that is not one) are
            # refused now, with their line, rather than at 3 a.m. when the step opens.
            try:
                spec.check(dict(args))
            except UserError as exc:
                v.error(nnode, f"{key}.{name}", exc.user_message)
        calls.append(ActionCall(name=name, args=args))
    return tuple(calls)


def _with_background(
    v: _PlanValidator,
    s: Mapping[str, yaml.Node],
    key: str,
    calls: tuple[ActionCall, ...],
    background: tuple[ActionCall, ...],
) -> tuple[ActionCall, ...]:
    """A step's `background:` is evidence (alerts, analysis, app-health) on a step whose action is
    disruptive; it travels to that action's job as one JSON argument."""
    if "silence" in s and "background" not in s:
        v.error(s["silence"], f"{key}.silence",
                "silence: needs a background: check (the silence is created after its first healthy one)")  # fmt: skip
    if "background" not in s:
        return calls
    for call in background:
        if call.name not in EVIDENCE_KINDS:
            v.error(s["background"], f"{key}.background",
                    f"{call.name!r} is not evidence (background takes {', '.join(EVIDENCE_KINDS)})")  # fmt: skip
    targets = [i for i, call in enumerate(calls) if call.name in DISRUPTIVE]
    if not targets:
        v.error(s["background"], f"{key}.background",
                f"background: only on a step whose action is {', '.join(DISRUPTIVE)}")  # fmt: skip
        return calls
    if not background:
        return calls
    extra = {
        BACKGROUND_ARG: json.dumps(
            [{"name": c.name, "args": dict(c.args)} for c in background], sort_keys=True
        )
    }
    if "silence" in s:
        silence = _silence(v, s["silence"], f"{key}.silence")
        if silence is not None:
            extra[SILENCE_ARG] = json.dumps(silence, sort_keys=True)
    out = list(calls)
    for i in targets:
        out[i] = ActionCall(name=calls[i].name, args={**calls[i].args, **extra})
    return tuple(out)


def _silence(v: _PlanValidator, node: yaml.Node, key: str) -> dict[str, Any] | None:
    """`silence: {matchers: [...], max: 4h}`: the step's silence lease (bot.core.evidence.leases)."""
    m = v.mapping(node, key, {"matchers", "max"})
    matchers = m.get("matchers")
    texts = (
        [str(i.value) for i in matchers.value if isinstance(i, yaml.ScalarNode)]
        if isinstance(matchers, yaml.SequenceNode)
        else None
    )
    spec: dict[str, Any] = {
        "matchers": texts,
        "max": str(m["max"].value) if isinstance(m.get("max"), yaml.ScalarNode) else "",
    }
    try:
        lease_of(spec)
    except UserError as exc:
        v.error(node, key, exc.user_message)
        return None
    return spec


def _bounded_watch(
    v: _PlanValidator,
    s: Mapping[str, yaml.Node],
    key: str,
    calls: tuple[ActionCall, ...],
    timeout: timedelta | None,
) -> tuple[ActionCall, ...]:
    """A plan's watch ends: with its own `timeout`, else the step's (`timeout`, or the plan's
    `defaults.timeout`), which it takes; with neither, a target never reached would hold the run
    on the step until someone aborted it, so the plan is refused."""
    out = []
    for call in calls:
        if call.name == "watch" and not call.args.get("timeout"):
            if timeout is None:
                v.error(
                    s["actions"],
                    f"{key}.actions.watch",
                    "a watch in a plan needs an end: give it `timeout:` (or the step, or the plan's "
                    "`defaults`, a `timeout:`); without one, a target never reached holds the run here "
                    "until someone aborts it",
                )
            else:
                call = ActionCall(name=call.name, args={**call.args, "timeout": format_duration(timeout)})
        out.append(call)
    return tuple(out)


def _long_and_mutating(
    v: _PlanValidator,
    s: Mapping[str, yaml.Node],
    key: str,
    calls: Sequence[ActionCall],
    gate: Gate | None,
    registry: ActionRegistry,
) -> None:
    """A long action (a watch, a cluster job) ends its step, so it is the step's last action and
    the only long one; an action that changes the cluster is approved by two people (four eyes),
    unless it is a dry run."""
    specs = [(call, registry.get(call.name)) for call in calls]
    longs = [call.name for call, spec in specs if spec is not None and spec.long]
    if len(longs) > 1:
        v.error(s["actions"], f"{key}.actions", f"one long action per step (found {', '.join(longs)})")
    elif longs and calls and calls[-1].name != longs[0]:
        v.error(
            s["actions"], f"{key}.actions", f"the long action {longs[0]!r} must be the step's last action"
        )
    mutating = [
        call.name
        for call, spec in specs
        if spec is not None
        and spec.mutating
        and call.args.get("dry_run", "").lower() not in ("true", "yes", "1")
    ]
    if mutating and gate is not None and not _two_people(gate):
        v.error(
            s["gate"],
            f"{key}.gate",
            f"{', '.join(mutating)} changes the cluster: its gate needs two people "
            "(`approve: [primary, shadow]` or a quorum of 2), or make it `dry_run: true`",
        )


def _two_people(gate: Gate) -> bool:
    if gate.kind == "approve":
        return len(gate.roles) >= 2
    if gate.kind == "quorum":
        return gate.count >= 2
    return False


def _rehearsal(v: _PlanValidator, node: yaml.Node | None, key: str) -> tuple[RehearsalHook, ...]:
    hooks: list[RehearsalHook] = []
    for name, nnode, args in _named_items(v, node, key):
        accepted = REHEARSAL_HOOKS.get(name)
        if accepted is None:
            v.error(
                nnode, key, f"unknown rehearsal hook {name!r} (known: {', '.join(sorted(REHEARSAL_HOOKS))})"
            )
            continue
        options = REHEARSAL_HOOK_OPTIONS.get(name, {})
        for arg in sorted((set(args) - set(options)) ^ accepted):
            problem = "unknown" if arg in args else "missing"
            v.error(nnode, f"{key}.{name}", f"{problem} argument {arg!r}")
        for arg, values in options.items():
            if arg in args and args[arg] not in values:
                v.error(nnode, f"{key}.{name}.{arg}", f"{args[arg]!r} is not one of: {', '.join(values)}")
        hooks.append(RehearsalHook(name=name, args=args))
    return tuple(hooks)


def check_people(v: _PlanValidator, nodes: list[tuple[str, yaml.Node, str]], people: PeopleLookup) -> None:
    """Ask Slack once per ID whether it exists; a missing one is an error on its own line."""
    known: dict[str, bool] = {}
    for key, node, value in nodes:
        if value not in known:
            known[value] = people.group_exists(value) if value.startswith("S") else people.user_exists(value)
        if not known[value]:
            what = "user group" if value.startswith("S") else "user"
            v.error(node, key, f"Slack {what} {value} does not exist")
