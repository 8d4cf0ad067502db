"""The rules file: its validation (every problem named by file, line and key) and loading.

The shipped rules are `templates/rules/known-issues.yaml`; a team adds rules or overrides shipped
ones by id through the `rules_files` setting (later files win: `load_rules`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import yaml

from bot.core.rules.model import (
    DEFAULT_LOG_LINES,
    FIX_ACTIONS,
    FIX_PLACEHOLDERS,
    FIX_REQUIRED,
    MAX_LOG_LINES,
    PLACEHOLDERS,
    RECOMMENDED,
    REQUIRED,
    EventMatch,
    LogMatch,
    Match,
    Rule,
    RuleFix,
    placeholders_in,
)
from bot.core.rules.patterns import MAX_PATTERN_CHARS, PatternError, SafePattern, compile_pattern
from bot.core.validation import YamlValidator, compose_document, read_document, shown
from bot.errors import ConfigError

#: A rules file is a few hundred rules at most.
MAX_RULES_BYTES = 512 * 1024
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*-?[0-9]{3}$")

_RULE_KEYS = {"id", "title", "severity", "match", "explanation", "remediation", "links", "fixed_in", "fix"}
_MATCH_KEYS = {
    "namespaces",
    "kinds",
    "tolerates_all_taints",
    "labels",
    "annotations",
    "containers",
    "images",
    "waiting_reasons",
    "terminated_reasons",
    "not_ready",
    "deleting",
    "node_not_ready",
    "events",
    "log",
}


class _RulesValidator(YamlValidator):
    def regex(self, node: yaml.Node | None, key: str) -> SafePattern | None:
        text = self.string(node, key)
        if text is None:
            return None
        if len(text) > MAX_PATTERN_CHARS:
            self.error(
                node, key, f"a pattern longer than {MAX_PATTERN_CHARS} characters is not a sensible rule"
            )
            return None
        try:
            # The one way a rule's pattern is compiled: RE2, linear time (see patterns.py).
            return compile_pattern(text)
        except PatternError as exc:
            self.error(node, key, f"{shown(text)} is not a regular expression RE2 accepts: {exc}")
            return None

    def string_map(self, node: yaml.Node, key: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, vnode in self.mapping(node, key, None).items():
            value = self.string(vnode, f"{key}.{name}")
            if value is not None:
                out[name] = value
        return out

    def string_list(self, node: yaml.Node, key: str) -> frozenset[str]:
        values = self.strings(node, key)
        if isinstance(node, yaml.SequenceNode) and not values and not node.value:
            self.error(node, key, "an empty list matches nothing; leave the key out")
        return frozenset(values)

    def fix(self, node: yaml.Node, key: str) -> RuleFix | None:
        f = self.mapping(node, key, {"action", "args"})
        action = self.string(f.get("action"), f"{key}.action")
        if "action" not in f and isinstance(node, yaml.MappingNode):
            self.error(node, f"{key}.action", "required")
        if action is not None and action not in FIX_ACTIONS:
            self.error(
                f["action"],
                f"{key}.action",
                f"{shown(action)} is not an action a fix may run; one of: {', '.join(sorted(FIX_ACTIONS))}",
            )
            return None
        args = self.string_map(f["args"], f"{key}.args") if "args" in f else {}
        if "args" not in f and isinstance(node, yaml.MappingNode):
            self.error(node, f"{key}.args", "required (what the action acts on)")
        if action is None:
            return None
        allowed = FIX_ACTIONS[action][0]
        ok = True
        for name, text in args.items():
            where = f"{key}.args.{name}"
            if name not in allowed:
                self.error(f["args"], where, f"`{action}` takes {', '.join(sorted(allowed))}; not {name}")
                ok = False
                continue
            unknown = sorted({p for p in placeholders_in(text) if p not in FIX_PLACEHOLDERS})
            if unknown:
                self.error(
                    f["args"],
                    where,
                    f"unknown placeholder {', '.join('{' + p + '}' for p in unknown)}; "
                    f"a fix may use {', '.join('{' + p + '}' for p in FIX_PLACEHOLDERS)}",
                )
                ok = False
        for name, what in FIX_REQUIRED.get(action, ()):
            if "args" in f and name not in args:
                self.error(f["args"], f"{key}.args.{name}", f"required: {what}")
                ok = False
        return RuleFix(action=action, args=args) if ok and "args" in f else None

    def match(self, node: yaml.Node, key: str) -> Match | None:
        m = self.mapping(node, key, _MATCH_KEYS)
        if not m and isinstance(node, yaml.MappingNode):
            self.error(node, key, "a rule must match something")
            return None
        events = None
        if "events" in m:
            ev = self.mapping(m["events"], f"{key}.events", {"reasons", "message"})
            events = EventMatch(
                reasons=self.string_list(ev["reasons"], f"{key}.events.reasons")
                if "reasons" in ev
                else frozenset(),
                message=self.regex(ev.get("message"), f"{key}.events.message"),
            )
            # A `message` given but refused has its own error already.
            if not events.reasons and events.message is None and "message" not in ev:
                self.error(m["events"], f"{key}.events", "give `reasons`, `message` or both")
        log = None
        if "log" in m:
            lg = self.mapping(m["log"], f"{key}.log", {"regex", "lines"})
            regex = self.regex(lg.get("regex"), f"{key}.log.regex")
            if "regex" not in lg:
                self.error(m["log"], f"{key}.log.regex", "required")
            lines = self.integer(lg.get("lines"), f"{key}.log.lines", low=1, high=MAX_LOG_LINES)
            if regex is not None:
                log = LogMatch(regex=regex, lines=lines or DEFAULT_LOG_LINES)

        def flag(name: str) -> bool:
            return bool(self.boolean(m.get(name), f"{key}.{name}")) if name in m else False

        def names(name: str) -> frozenset[str]:
            return self.string_list(m[name], f"{key}.{name}") if name in m else frozenset()

        return Match(
            namespaces=names("namespaces"),
            kinds=names("kinds"),
            tolerates_all_taints=flag("tolerates_all_taints"),
            labels=self.string_map(m["labels"], f"{key}.labels") if "labels" in m else {},
            annotations=self.string_map(m["annotations"], f"{key}.annotations") if "annotations" in m else {},
            containers=names("containers"),
            images=self.regex(m.get("images"), f"{key}.images"),
            waiting_reasons=names("waiting_reasons"),
            terminated_reasons=names("terminated_reasons"),
            not_ready=flag("not_ready"),
            deleting=flag("deleting"),
            node_not_ready=flag("node_not_ready"),
            events=events,
            log=log,
        )


def parse_rules(text: str, *, source: str) -> list[Rule]:
    """The rules of one file; a ConfigError naming file and line lists every problem found."""
    return list(_parsed(text, source))


# Every assembly reads the same files (a start, each command of a process such as a rehearsal's,
# and the test suite's bot per test): the shipped file takes ~40 ms of CPU to compose and
# validate, and its rules are frozen, so a text already parsed is not parsed again. A file that
# fails raises every time (exceptions are not cached).
@lru_cache(maxsize=16)
def _parsed(text: str, source: str) -> tuple[Rule, ...]:
    node = compose_document(text, source)
    v = _RulesValidator(source)
    if node is None:
        raise ConfigError(f"{source}: the file is empty (expected `rules:` with a list of rules)")
    top = v.mapping(node, "", {"rules"})
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    items = top.get("rules")
    if items is None:
        v.error(node, "rules", "required")
    elif not isinstance(items, yaml.SequenceNode):
        v.error(items, "rules", "expected a list of rules")
    else:
        for i, item in enumerate(items.value):
            key = f"rules[{i}]"
            r = v.mapping(item, key, _RULE_KEYS)
            for required in ("id", "title", "match", "explanation", "remediation", "links"):
                if required not in r and isinstance(item, yaml.MappingNode):
                    v.error(item, f"{key}.{required}", "required")
            rid = v.string(r.get("id"), f"{key}.id")
            if rid is not None:
                if not RULE_ID.match(rid):
                    v.error(
                        r["id"], f"{key}.id", f"{shown(rid)} is not an id like ISTIO001 (capitals, 3 digits)"
                    )
                elif rid in seen:
                    v.error(r["id"], f"{key}.id", f"{rid} is also the id of rules[{seen[rid]}]")
                seen.setdefault(rid, i)
            severity = v.string(r.get("severity"), f"{key}.severity") or RECOMMENDED
            if severity not in (REQUIRED, RECOMMENDED):
                v.error(r["severity"], f"{key}.severity", f"expected {REQUIRED} or {RECOMMENDED}")
            match = v.match(r["match"], f"{key}.match") if "match" in r else None
            links = v.strings(r["links"], f"{key}.links") if "links" in r else ()
            for j, link in enumerate(links):
                if not link.startswith("https://"):
                    v.error(r["links"].value[j], f"{key}.links[{j}]", "links are https:// URLs")
            if "links" in r and not links:
                v.error(r["links"], f"{key}.links", "a rule needs at least one link to its evidence")
            fixed = v.strings(r["fixed_in"], f"{key}.fixed_in") if "fixed_in" in r else ()
            fix = v.fix(r["fix"], f"{key}.fix") if "fix" in r else None
            title = v.string(r.get("title"), f"{key}.title")
            explanation = v.string(r.get("explanation"), f"{key}.explanation")
            remediation = v.string(r.get("remediation"), f"{key}.remediation")
            if remediation is not None:
                unknown = sorted({p for p in placeholders_in(remediation) if p not in PLACEHOLDERS})
                if unknown:
                    v.error(
                        r["remediation"],
                        f"{key}.remediation",
                        f"unknown placeholder {', '.join('{' + p + '}' for p in unknown)}; "
                        f"a remediation may use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}",
                    )
            if rid and title and explanation and remediation and match is not None:
                rules.append(
                    Rule(
                        id=rid,
                        title=title,
                        severity=severity,
                        match=match,
                        explanation=explanation,
                        remediation=remediation,
                        links=links,
                        fixed_in=fixed,
                        fix=fix,
                        source=f"{source}:{item.start_mark.line + 1}",
                    )
                )
    v.raise_if_errors()
    return tuple(rules)


def read_rules(path: Path, *, label: str | None = None) -> list[Rule]:
    text = read_document(path, what="rules file", limit=MAX_RULES_BYTES, label=label)
    return parse_rules(text, source=label or str(path))


def rules_problems(path: Path) -> tuple[list[Rule], list[str]]:
    """A rules file checked whole (`upgrade-bot rules check FILE`): its rules, and every problem
    found in it, each naming its file, line and key (no rules when there is any problem)."""
    try:
        return read_rules(path), []
    except FileNotFoundError:
        return [], [f"{path}: no such file"]
    except ConfigError as exc:
        return [], list(exc.problems)


def load_rules(paths: Sequence[Path]) -> list[Rule]:
    """The rules of every file in order; a later rule with the same id replaces the earlier one."""
    by_id: dict[str, Rule] = {}
    for path in paths:
        try:
            found = read_rules(path)
        except FileNotFoundError:
            raise ConfigError(f"{path}: rules file not found") from None
        for rule in found:
            by_id[rule.id] = rule
    return sorted(by_id.values(), key=lambda r: r.id)
