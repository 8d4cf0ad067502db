"""Known-issue rules, below the checks, the jobs and the watches that share them.

A rule is a known problem seen in past upgrades, as data: what it matches on a pod and the events
about it, and what to tell people (`templates/rules/known-issues.yaml`, plus a team's `rules_files`).
`check`, `diagnose`, a drain and the rollout stream run the same engine over it. The modules:

- `model`: the views of pods and events a rule looks at, the rule, its hit, remediations filled in;
- `patterns`: every rule pattern, compiled on RE2 and matched on a time budget;
- `signals`: which pods can match at all (`Screen`), and each rule's candidates;
- `engine`: `match_rules` (one hit per rule and workload) and `Episodes` (the stream's reports);
- `linetest`: one line given by hand against the patterns (`upgrade-bot rules test`);
- `loader`: the rules file, validated (every problem by file, line and key) and loaded;
- `known`: what a live pod's record keeps for the rules (a watch, a drain) and a known issue's post.

The package re-exports the rules' API (that of `model`, `signals`, `engine`, `linetest` and
`loader`), so a caller imports `from bot.core.rules import Rule, load_rules`. Nothing here imports
the checks, the jobs or the watches (`tests/test_architecture.py` holds it so).
"""

from __future__ import annotations

from bot.core.rules.engine import (
    EVENT_EVIDENCE,
    Episodes,
    match_rules,
)
from bot.core.rules.linetest import (
    LineMatch,
    NearMiss,
    try_event,
    try_log,
)
from bot.core.rules.loader import (
    MAX_RULES_BYTES,
    RULE_ID,
    load_rules,
    parse_rules,
    read_rules,
    rules_problems,
)
from bot.core.rules.model import (
    DEFAULT_LOG_LINES,
    FIX_ACTIONS,
    FIX_PLACEHOLDERS,
    FIX_REQUIRED,
    MAX_LOG_LINES,
    MAX_REMEDY_OBJECTS,
    PLACEHOLDERS,
    RECOMMENDED,
    REQUIRED,
    ContainerView,
    EventMatch,
    EventRecord,
    LogMatch,
    Match,
    PodState,
    Rule,
    RuleFix,
    RuleHit,
    fill_remediation,
    placeholders_in,
    shown_source,
    split_workload,
)
from bot.core.rules.signals import (
    ALL_SIGNALS,
    ANNOTATED,
    CONTAINER_NOT_READY,
    DELETING,
    EVENTS,
    IN_KIND,
    IN_NAMESPACE,
    LABELLED,
    LOGGED,
    NAMED_CONTAINER,
    NODE_NOT_READY,
    TERMINATED,
    TOLERATES_ALL,
    WAITING,
    Screen,
    required_signals,
)

__all__ = [
    "ALL_SIGNALS",
    "ANNOTATED",
    "CONTAINER_NOT_READY",
    "DEFAULT_LOG_LINES",
    "DELETING",
    "EVENTS",
    "EVENT_EVIDENCE",
    "FIX_ACTIONS",
    "FIX_PLACEHOLDERS",
    "FIX_REQUIRED",
    "IN_KIND",
    "IN_NAMESPACE",
    "LABELLED",
    "LOGGED",
    "MAX_LOG_LINES",
    "MAX_REMEDY_OBJECTS",
    "MAX_RULES_BYTES",
    "NAMED_CONTAINER",
    "NODE_NOT_READY",
    "PLACEHOLDERS",
    "RECOMMENDED",
    "REQUIRED",
    "RULE_ID",
    "TERMINATED",
    "TOLERATES_ALL",
    "WAITING",
    "ContainerView",
    "Episodes",
    "EventMatch",
    "EventRecord",
    "LineMatch",
    "LogMatch",
    "Match",
    "NearMiss",
    "PodState",
    "Rule",
    "RuleFix",
    "RuleHit",
    "Screen",
    "fill_remediation",
    "load_rules",
    "match_rules",
    "parse_rules",
    "placeholders_in",
    "read_rules",
    "required_signals",
    "rules_problems",
    "shown_source",
    "split_workload",
    "try_event",
    "try_log",
]
