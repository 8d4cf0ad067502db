"""A YAML syntax slip in a file someone wrote by hand is said in plain words, with its file, line
and column (1-based, as editors count), by every loader alike; the parser's own words ("expected
<block end>, but found '<block mapping start>'") go to the log at DEBUG only."""

from __future__ import annotations

import logging

import pytest
import yaml

from bot.core.fleets.plan import parse_fleet
from bot.core.rules.loader import parse_rules
from bot.core.runs.plans import parse_plan
from bot.core.validation import compose_document
from bot.errors import ConfigError, PlanInvalid
from bot.settings import parse_settings
from bot.yamlsyntax import read_slip

#: The parser's terms, none of which a person should have to read.
JARGON = ("<block", "token", "not allowed here", "could not find", "scanning", "while parsing", "expected '")

SLIPS = {
    # A step's key one space short of its siblings (`<block end>` … `<block mapping start>`).
    "between two levels": (
        "steps:\n  - id: drain\n    title: Drain\n   gate: {any_of: [primary]}\n",
        "4:4: this line starts at column 4, where no key above it does: `title:` (line 3) starts at "
        "column 5, the `- ` (line 2) starts at column 3; line it up with the keys it belongs with",
    ),
    # One space too far ("mapping values are not allowed here").
    "one space too far": (
        "channels:\n  announcements: C0ANN\n   operations: C0OPS\n",
        "3:4: `operations:` is indented deeper than `announcements:` above it (line 2), whose value is "
        "already on that line: a key indented 1 space too far?",
    ),
    # A step's key written at the column of the list, between its siblings.
    "a key dedented between its siblings": (
        "steps:\n  - id: drain\n    title: Drain\ngate: {any_of: [primary]}\n    actions: []\n",
        "4:1: `gate:` is indented less than the lines around it (lines 3 and 5 start at column 5): a key "
        "indented 4 spaces too little? (or, if `gate:` is where it belongs, line 5 is indented too far)",
    ),
    # The first key of a block written at the block's own column.
    "a key out of its block": (
        "channels:\noperations: C0OPS\n  announcements: C0ANN\n",
        "2:1: `operations:` is not indented under `channels:` above it (line 1), whose value starts on the "
        "next line, but line 3 below it is: a key indented 2 spaces too little?",
    ),
    # "could not find expected ':'", said where the key is, not on the line after it.
    "a key without its colon": (
        "defaults:\n  timeout: 2h\n  escalate_after\n  on_failure: pause\n",
        "3:3: `escalate_after` has no `:` after it: a key is written `key: value`, a list item `- item`",
    ),
    "a word where a key should be": (
        "defaults:\n  timeout 2h\n  on_failure: pause\n",
        "2:3: `timeout 2h` is neither `key: value` nor a `- ` item, so YAML reads it and line 3 below it as "
        "one text: a missing `:`?",
    ),
    # "found character '\\t' that cannot start any token"
    "a tab": (
        "window:\n\tstart: 2026-11-28T22:00\n",
        "2:1: a tab character: YAML indents with spaces (replace the tab with spaces)",
    ),
    "a value holding colon-space": (
        "description: Upgrade: the control plane\n",
        '1:21: the value of `description` holds `: `: quote it (description: "Upgrade: the control plane"), '
        "or put each key on a line of its own",
    ),
    "no space after a colon": (
        "roster:\n  primary:[U0PRIMARY]\n  shadow: [U0SHADOW]\n",
        "2:3: `primary:[U0PRIMARY]` has no space after its `:`, so YAML reads it and line 3 below it as one "
        "text: write `key: value`",
    ),
    "a bracket never closed": (
        "name: x\nsteps: [\n",
        "2:8: this `[` is never closed: a missing `]`? (a value holding `:`, `,`, `[`, `]`, `{` or `}` needs quotes)",
    ),
    "a quote never closed": (
        'title: "Drain the nodes\ngate: {any_of: [primary]}\n',
        '1:8: this " is never closed: the value runs on to the end of the file; close it with "',
    ),
    "a backslash in double quotes": (
        'match: "error\\.log"\n',
        "1:14: `\\.` is not an escape YAML knows inside double quotes: single-quote the value ('…' keeps "
        "every backslash as written) or double the backslash (`\\\\`)",
    ),
    "a glob read as an alias": (
        "selector: *\n",
        '1:12: a value starting with `*` reads as a reference to an anchor (`*name`): quote it ("*")',
    ),
    "a reserved character": (
        "owner: @platform\n",
        '1:8: `@` cannot start a value (YAML reserves it): quote the value ("@platform")',
    ),
}


@pytest.mark.parametrize("name", sorted(SLIPS))
def test_a_yaml_slip_is_said_in_plain_words_at_its_line_and_column(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    text, expected = SLIPS[name]
    with caplog.at_level(logging.DEBUG, logger="bot.yamlsyntax"), pytest.raises(ConfigError) as caught:
        compose_document(text, "f.yaml")
    at, reading = expected.split(": ", 1)
    assert caught.value.user_message == f"f.yaml:{at}: invalid YAML: {reading}"
    assert not [word for word in JARGON if word in caught.value.user_message]
    # The parser's own words are kept for whoever reads the log at DEBUG.
    (said,) = [r.getMessage() for r in caplog.records if r.name == "bot.yamlsyntax"]
    assert said.startswith("f.yaml: the YAML parser said: ")
    assert any(word in said for word in ("expected", "found", "not allowed", "never"))


@pytest.mark.parametrize("name", sorted(SLIPS))
def test_the_c_parser_s_errors_read_as_the_python_parser_s(name: str) -> None:
    """The kubeconfig check and `check --manifests` use libyaml (other words); they read the same."""
    text, expected = SLIPS[name]
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with pytest.raises(yaml.YAMLError) as caught:
        yaml.compose(text, Loader=loader)
    slip = read_slip(caught.value, text, "f.yaml")
    assert slip is not None
    assert f"{slip.line}:{slip.column}: {slip.reading}" == expected


TABBED = "name: x\nroster:\n\tprimary: [U0PRIMARY]\n"
SAID = "f.yaml:3:1: invalid YAML: a tab character: YAML indents with spaces (replace the tab with spaces)"


def test_the_configuration_plans_fleets_and_rules_files_say_it_alike() -> None:
    with pytest.raises(ConfigError) as settings:
        parse_settings(TABBED.replace("name: x", "timezone: UTC"), source=None, env={})
    assert settings.value.user_message == SAID.replace("f.yaml", "<config>")
    with pytest.raises(PlanInvalid) as plan:
        parse_plan(TABBED, source="f.yaml")
    assert plan.value.errors == [SAID]
    with pytest.raises(PlanInvalid) as fleet:
        parse_fleet(TABBED, source="f.yaml")
    assert fleet.value.errors == [SAID]
    with pytest.raises(ConfigError) as rules:
        parse_rules(TABBED.replace("name: x", "rules: []"), source="f.yaml")
    assert rules.value.user_message == SAID
