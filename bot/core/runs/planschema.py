"""The plan's JSON Schema, generated from the validator's own declarations: one source of truth.

`parse_plan` (`bot.core.runs.plans`) is what validates a plan: it walks the YAML nodes, so every
problem names the file, the line and the dotted key ("did you mean …?" for a typo), and it checks
what a schema cannot say (a window's end after its start, a gate people can pass, two people for
a change, an action's argument values). `templates/plans/plan.schema.json` is for editors (
completion, red squiggles while typing); it is written by `plan_schema()` from the validator's key
sets, enums, patterns and limits and from the action registry, never by hand:
`python -m bot.core.runs.planschema > templates/plans/plan.schema.json`, and a test fails when the
file is stale.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from bot.core.actions import default_registry
from bot.core.durations import GRAMMAR
from bot.core.people import CHANNEL_ID, GROUP_ID, USER_ID
from bot.core.runs.plans import (
    DEFAULTS_KEYS,
    GATE_KINDS,
    MAX_IMPACT,
    MAX_LINK_TITLE,
    MAX_LINKS,
    MAX_QUORUM,
    MAX_URL,
    ON_FAILURE,
    ON_OPEN_FINDINGS,
    REHEARSAL_HOOKS,
    STEP_ANNOUNCEMENTS,
    STEP_ID,
    STEP_KEYS,
    TOP_KEYS,
    VERSION,
)
from bot.core.validation import NAME_PATTERN

#: What each key holds; the key sets above say which keys there are, and a test holds the two
#: together (a key added to the validator without a shape here fails it).
_TOP_SHAPES: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "pattern": NAME_PATTERN.pattern},
    "description": {"type": "string"},
    "impact": {
        "type": "string",
        "maxLength": MAX_IMPACT,
        "description": "what people outside the team notice; shown in announcements",
    },
    "links": {
        "type": "array",
        "maxItems": MAX_LINKS,
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["title", "url"],
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": MAX_LINK_TITLE},
                "url": {"type": "string", "pattern": r"^https?://\S+$", "maxLength": MAX_URL},
            },
        },
    },
    "cluster": {"type": "string", "minLength": 1},
    "current_version": {"$ref": "#/$defs/version"},
    "target_version": {"$ref": "#/$defs/version"},
    "window": {
        "type": "object",
        "additionalProperties": False,
        "required": ["start", "end"],
        "properties": {
            "start": {"type": "string", "description": "ISO 8601; without an offset it is in `timezone`"},
            "end": {"type": "string", "description": "must be after start"},
            "timezone": {
                "type": "string",
                "description": "IANA name, default UTC (`plan load` warns when the configured `timezone` is another)",
            },
        },
    },
    "channels": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "operations": {"$ref": "#/$defs/channel"},
            "announcements": {"$ref": "#/$defs/channel"},
        },
    },
    "roster": {
        "type": "object",
        "minProperties": 1,
        "propertyNames": {"pattern": NAME_PATTERN.pattern},
        "additionalProperties": {
            "oneOf": [
                {"$ref": "#/$defs/person"},
                {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/person"}},
            ]
        },
    },
    "defaults": {"type": "object", "additionalProperties": False},  # properties: `_DEFAULT_SHAPES`
    "steps": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/step"}},
}
_DEFAULT_SHAPES: dict[str, dict[str, Any]] = {
    "timeout": {"$ref": "#/$defs/duration"},
    "escalate_after": {"$ref": "#/$defs/duration"},
    "on_failure": {"$ref": "#/$defs/on_failure"},
}
_STEP_SHAPES: dict[str, dict[str, Any]] = {
    "id": {"type": "string", "pattern": STEP_ID.pattern},
    "title": {"type": "string", "minLength": 1},
    "description": {"type": "string", "description": "Slack mrkdwn"},
    "phase": {"type": "string"},
    "gate": {"$ref": "#/$defs/gate"},
    "done": {
        "$ref": "#/$defs/gate",
        "description": "plain steps only: who confirms the work is done (default: the gate)",
    },
    "actions": {"type": "array", "items": {"$ref": "#/$defs/action"}},
    "timeout": {"$ref": "#/$defs/duration"},
    "escalate_after": {"$ref": "#/$defs/duration"},
    "on_failure": {"$ref": "#/$defs/on_failure"},
    "on_open_findings": {
        "enum": list(ON_OPEN_FINDINGS),
        "description": "watch steps only: when the target is reached while a known issue the watch "
        "posted is still open, the step fails (default) or succeeds",
    },
    "destructive": {"type": "boolean", "description": "ask for a typed confirmation before it runs"},
    "rehearsal": {"type": "array", "items": {"$ref": "#/$defs/rehearsal"}},
    "silence": {
        "type": "object",
        "additionalProperties": False,
        "required": ["matchers"],
        "properties": {
            "matchers": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "max": {"$ref": "#/$defs/duration"},
        },
        "description": "steps with a background: only: an Alertmanager silence held while the step runs "
        "(created after the first healthy check, re-extended to now+25m, a 5m tail, never past max)",
    },
    "background": {
        "type": "array",
        "items": {"$ref": "#/$defs/action"},
        "description": "evidence (alerts, analysis, app-health) checked between the nodes of a drain, "
        "restart or eks-update-nodegroup step; the first failure pauses the step before its next node",
    },
    "pipeline": {
        "type": "object",
        "additionalProperties": False,
        "required": ["pipeline", "job"],
        "properties": {
            "pipeline": {"type": "string", "minLength": 1, "maxLength": 200},
            "job": {"type": "string", "minLength": 1, "maxLength": 200},
        },
        "description": "plain steps only: the CI job whose builds, reported on POST /hooks/pipeline, "
        "are the step's evidence; a failed build pauses the run",
    },
    "pr": {
        "type": "object",
        "additionalProperties": False,
        "required": ["repo"],
        "oneOf": [{"required": ["number"]}, {"required": ["branch"]}, {"required": ["match"]}],
        "properties": {
            "repo": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$"},
            "number": {"type": "integer", "minimum": 1, "maximum": 999999999},
            "branch": {"type": "string", "minLength": 1},
            "match": {"type": "string", "minLength": 1, "description": "a title pattern (RE2)"},
            "require": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"merged": {"type": "boolean"}, "checks": {"const": "success"}},
            },
        },
        "description": "plain steps only: the pull request the step's work merges; its gate and the card "
        "show its state, merge commit, checks and approvals; `require` is what its done confirmation "
        "needs besides people",
    },
    "announce": {
        "enum": list(STEP_ANNOUNCEMENTS),
        "description": "post the step-complete announcement in the announcement channel when the "
        "step succeeds (runs of a scheduled window)",
    },
}
_STEP_REQUIRED = ["id", "title", "gate"]
_TOP_REQUIRED = ["name", "cluster", "current_version", "target_version", "window", "roster", "steps"]
_GATE_DESCRIPTIONS = {
    "approve": "each role must approve, by different people",
    "any_of": "one approval from anyone holding one of the roles",
}


def _bare(pattern: re.Pattern[str]) -> str:
    return pattern.pattern.removeprefix("^").removesuffix("$")


def _ordered(shapes: dict[str, dict[str, Any]], keys: set[str]) -> dict[str, dict[str, Any]]:
    if set(shapes) != keys:
        raise ValueError(f"shapes {sorted(shapes)} do not match the validator's keys {sorted(keys)}")
    return dict(shapes)


def plan_schema() -> dict[str, Any]:
    """The plan's JSON Schema (draft 2020-12), from the validator's declarations."""
    actions = default_registry()
    names = actions.names()
    described = ", ".join(
        f"{name} {{{', '.join(sorted(spec.arguments))}}}"
        for name in names
        if (spec := actions.get(name)) is not None
    )
    gate_properties: dict[str, Any] = {
        kind: {"$ref": "#/$defs/roles", "description": _GATE_DESCRIPTIONS[kind]}
        for kind in GATE_KINDS
        if kind != "quorum"
    }
    gate_properties["quorum"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["role", "count"],
        "properties": {
            "role": {"type": "string"},
            "count": {"type": "integer", "minimum": 1, "maximum": MAX_QUORUM},
        },
    }
    gate_properties["expires"] = {"$ref": "#/$defs/duration"}
    top = _ordered(_TOP_SHAPES, TOP_KEYS)
    top["defaults"] = {**top["defaults"], "properties": _ordered(_DEFAULT_SHAPES, DEFAULTS_KEYS)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://upgrade-bot.example/plan.schema.json",
        "title": "upgrade-bot plan",
        "description": "An upgrade runbook: `upgrade-bot plan validate FILE` checks this and more "
        "(roles, step ids, Slack users). Generated by bot/core/runs/planschema.py: do not edit.",
        "type": "object",
        "additionalProperties": False,
        "required": _TOP_REQUIRED,
        "properties": top,
        "$defs": {
            "version": {"type": "string", "pattern": VERSION.pattern},
            "channel": {"type": "string", "pattern": CHANNEL_ID.pattern},
            "person": {"type": "string", "pattern": f"^({_bare(USER_ID)}|{_bare(GROUP_ID)})$"},
            "duration": {"type": "string", "pattern": GRAMMAR.pattern},
            "on_failure": {"enum": list(ON_FAILURE)},
            "roles": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}},
            "gate": {
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "properties": gate_properties,
                "oneOf": [{"required": [kind]} for kind in GATE_KINDS],
            },
            "named": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "minProperties": 1,
                        "maxProperties": 1,
                        "additionalProperties": {
                            "oneOf": [
                                {"type": "null"},
                                {
                                    "type": "object",
                                    "additionalProperties": {"type": ["string", "number", "boolean"]},
                                },
                            ]
                        },
                    },
                ]
            },
            "action": {
                "allOf": [{"$ref": "#/$defs/named"}],
                "description": f"a built-in action: {described}",
                "oneOf": [
                    {"enum": names},
                    {"type": "object", "propertyNames": {"enum": names}},
                ],
            },
            "rehearsal": {
                "allOf": [{"$ref": "#/$defs/named"}],
                "description": "in a rehearsal only: ask the simulated cluster to play the outside world",
                "type": "object",
                "propertyNames": {"enum": sorted(REHEARSAL_HOOKS)},
            },
            "step": {
                "type": "object",
                "additionalProperties": False,
                "required": _STEP_REQUIRED,
                "properties": _ordered(_STEP_SHAPES, STEP_KEYS),
            },
        },
    }


def render() -> str:
    """The schema file's text."""
    return json.dumps(plan_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
