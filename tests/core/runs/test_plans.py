"""Plans: the examples validate, and a bad plan is refused with every problem and its line."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml

from bot.adapters.slack import SlackDirectory, make_web_client
from bot.core import actions as action_registry
from bot.core.durations import parse_duration
from bot.core.runs import planschema
from bot.core.runs.plans import (
    DEFAULTS_KEYS,
    GATE_KINDS,
    ON_OPEN_FINDINGS,
    REHEARSAL_HOOKS,
    STEP_ANNOUNCEMENTS,
    STEP_KEYS,
    TOP_KEYS,
    parse_plan,
    window_warnings,
)
from bot.errors import PlanInvalid
from tests.support.plans import BAD, EXAMPLES, GOOD, PLANS
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans_validate(path: Path) -> None:
    plan = parse_plan(path.read_text(), source=path.name)
    assert plan.steps
    assert plan.window.end > plan.window.start
    for step in plan.steps:
        assert set(step.gate.roles) <= set(plan.roster)


def test_eks_example_has_the_runbook_phases_in_order() -> None:
    plan = parse_plan((PLANS / "eks-nodegroups.yaml").read_text())
    ids = [s.id for s in plan.steps]
    assert ids.index("snapshot-pre") < ids.index("control-plane") < ids.index("restart-coredns")
    groups = ("control-plane", "istio", "ng-shared", "others", "logging")
    order = [ids.index(f"{what}-{g}") for g in groups for what in ("launch", "drain", "wait")]
    assert order == sorted(order)  # the runbook's group order; per group: launch, drain, wait
    assert ids.index("wait-istio") < ids.index("restart-istio-data-plane") < ids.index("launch-ng-shared")
    assert ids.index("wait-logging") < ids.index("watch-settle") < ids.index("snapshot-post")
    # After the roll-out: the leftover Auto Scaling groups and the launch-template drift (EKS009,
    # EKS006) are checked again before the before/after diff.
    assert ids[-4:] == ["snapshot-post", "check-leftovers", "diff", "announce-done"]
    (leftovers,) = plan.step("check-leftovers").actions
    assert (leftovers.name, dict(leftovers.args)) == ("check", {"only": "EKS009,EKS006"})
    # Launching a group's new nodes is human work (a Terraform merge) the sim can play; the bot
    # then drains the old nodes behind the primary AND the shadow, and waits for the group.
    launch = plan.step("launch-ng-shared")
    assert launch.manual
    assert launch.done_gate.roles == ("primary", "shadow")
    assert launch.rehearsal[0].name == "replace_node_group"
    assert launch.rehearsal[0].args == {"name": "ng-shared", "version": "1.25.16", "drain": "external"}
    drain = plan.step("drain-ng-shared")
    assert (drain.gate.kind, drain.gate.roles) == ("approve", ("primary", "shadow"))
    assert drain.actions[0].name == "drain"
    assert drain.actions[0].args["nodegroup"] == "ng-shared"
    assert drain.actions[0].args["version"] == "1.25.16"
    assert plan.step("wait-ng-shared").actions[0].name == "wait-nodegroup"
    assert plan.step("restart-coredns").actions[0].args["workloads"] == (
        "deployment/kube-system/coredns, deployment/kube-system/dns-autoscaler"
    )
    assert plan.step("snapshot-pre").actions[0].args == {"label": "pre"}


def test_a_good_plan_parses_into_the_model() -> None:
    plan = parse_plan(GOOD)
    work = plan.step("work")
    assert work.gate.kind == "approve"
    assert work.gate.expires == timedelta(minutes=30)
    assert work.done is not None
    assert work.done.kind == "quorum"
    assert work.done.count == 2
    assert work.escalate_after == timedelta(minutes=10)
    assert work.on_failure == "pause"
    assert plan.roster["shadow"] == ("U0SHADOW", "S0SRE")
    assert plan.window.start.utcoffset() == timedelta(hours=9)


def test_a_step_may_ask_for_the_step_complete_announcement_and_a_wrong_value_names_its_line() -> None:
    flagged = GOOD.replace(
        "    escalate_after: 10m\n", "    escalate_after: 10m\n    announce: step-complete\n"
    )
    plan = parse_plan(flagged)
    assert plan.step("work").announce == "step-complete"
    assert plan.step("snap").announce == ""
    eks = parse_plan((PLANS / "eks-nodegroups.yaml").read_text())
    assert [s.id for s in eks.steps if s.announce] == ["control-plane"]
    wrong = GOOD.replace("    escalate_after: 10m\n", "    escalate_after: 10m\n    announce: completed\n")
    line = wrong.splitlines().index("    announce: completed") + 1
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(wrong, source="p.yaml")
    (error,) = caught.value.errors
    assert error.startswith(f"p.yaml:{line}:")
    assert "steps[1](work).announce" in error
    assert "'completed' is not one of: step-complete" in error


def test_a_window_at_a_time_the_clocks_skip_or_pass_twice_is_refused_and_one_across_a_change_is_warned_of() -> (
    None
):
    def window(start: str, end: str) -> str:
        return GOOD.replace(
            'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
            f'window: {{start: "{start}", end: "{end}", timezone: Europe/Berlin}}',
        )

    with pytest.raises(PlanInvalid) as skipped:
        parse_plan(window("2027-03-28T02:30", "2027-03-28T05:00"), source="p.yaml")
    (error,) = skipped.value.errors
    assert "window.start: 2027-03-28 02:30 does not exist in Europe/Berlin: the clocks skip it" in error
    with pytest.raises(PlanInvalid) as twice:
        parse_plan(window("2027-10-31T02:30", "2027-10-31T05:00"), source="p.yaml")
    (error,) = twice.value.errors
    assert "happens twice in Europe/Berlin that night" in error
    assert "(2027-10-31T02:30+02:00 for the first)" in error
    # Its offset written, the first 02:30 is one instant. A window lasts its real time that night
    # (`elapsed`), and the wall clock's length (`length`) on any other day a schedule puts it.
    plan = parse_plan(window("2027-10-31T02:30+02:00", "2027-10-31T05:00"))
    assert plan.window.elapsed == timedelta(hours=3, minutes=30)
    assert plan.window.length == timedelta(hours=2, minutes=30)
    spring = parse_plan(window("2027-03-28T01:00", "2027-03-28T05:00"))
    assert spring.window.elapsed == timedelta(hours=3)
    assert spring.window.length == timedelta(hours=4)
    assert window_warnings(spring) == [
        "the window spans a clock change (2027-03-28 in Europe/Berlin, 01:00 CET to 05:00 CEST): 3h of "
        "real time, 4h on the wall clock; scheduled on another day (`/upgrade schedule small --at …`) "
        "it lasts 4h, 01:00–05:00"
    ]
    assert window_warnings(parse_plan(window("2027-03-29T01:00", "2027-03-29T05:00"))) == []


def test_an_overnight_window_written_on_one_date_is_refused_with_the_next_days_date() -> None:
    backwards = GOOD.replace(
        'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
        'window: {start: "2026-12-05T23:00", end: "2026-12-05T02:00", timezone: Europe/Berlin}',
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(backwards, source="p.yaml")
    (error,) = caught.value.errors
    assert error.endswith(
        "window.end: the window ends (2026-12-05 02:00) before it starts (2026-12-05 23:00, Europe/Berlin); "
        "a window across midnight ends on the next day's date: 2026-12-06T02:00"
    )


def test_a_bad_plan_lists_every_problem_with_its_line() -> None:
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(BAD, source="bad.yaml")
    errors = caught.value.errors
    expected = [
        ("bad.yaml:4:", "target_version", "not newer than 1.30"),
        ("bad.yaml:5:", "window.end", "before it starts"),
        ("bad.yaml:12:", "gate.approve", "unknown role 'sre'"),
        ("bad.yaml:13:", "steps[1](one).id", "duplicate step id (first used on line 10)"),
        ("bad.yaml:16:", "actions", "unknown action 'reboot'"),
        ("bad.yaml:17:", "timeout", "'soon' is not a duration"),
        ("bad.yaml:21:", "actions", "'announce' is not available yet"),
        ("bad.yaml:22:", "on_failure", "'shrug' is not one of: pause, abort"),
    ]
    for prefix, key, text in expected:
        assert any(e.startswith(prefix) and key in e and text in e for e in errors), (prefix, key, errors)
    assert len(errors) == len(expected)
    assert "8 problem(s)" in caught.value.user_message


def test_yaml_syntax_errors_carry_the_line_and_column_in_plain_words() -> None:
    with pytest.raises(PlanInvalid) as caught:
        parse_plan("name: x\nsteps: [\n", source="p.yaml")
    assert caught.value.errors == [
        "p.yaml:2:8: invalid YAML: this `[` is never closed: a missing `]`? "
        "(a value holding `:`, `,`, `[`, `]`, `{` or `}` needs quotes)"
    ]


GATE = "    gate: {approve: [primary, shadow], expires: 30m}\n"
REST = "    done: {quorum: {role: shadow, count: 2}}\n    escalate_after: 10m\n"


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        pytest.param(REST, REST.replace("    escalate_after", "escalate_after"), "escalate_after", id="last"),
        # Its gate moved last, at the top level: one problem, not also the gate the step lacks.
        pytest.param(GATE + REST, REST + GATE.lstrip(), "gate", id="required"),
    ],
)
def test_a_step_s_key_written_at_the_top_level_is_one_problem_saying_where_it_goes(
    old: str, new: str, key: str
) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:")) + 1
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml")
    assert caught.value.errors == [
        f"p.yaml:{at}: {key}: `{key}` is a key of a step under `steps:`: indent it under the step above it "
        f"(line {lines.index('  - id: work') + 1})"
    ]


def test_a_window_s_key_written_at_the_top_level_is_said_as_the_window_s() -> None:
    text = GOOD.replace(
        'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
        'window:\n  start: "2026-11-28T22:00"\n  end: "2026-11-29T02:00"\ntimezone: Asia/Tokyo',
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml")
    assert caught.value.errors == [
        "p.yaml:8: timezone: `timezone` is a key of `window:`: indent it under `window:` (line 5)"
    ]


def test_unknown_slack_users_are_errors_through_the_api(slack_stub: SlackStub) -> None:
    slack_stub.users["U0PRIMARY"] = {"id": "U0PRIMARY"}
    slack_stub.users["U0SHADOW"] = {"id": "U0SHADOW", "deleted": True}
    directory = SlackDirectory(make_web_client(BOT_TOKEN, slack_stub.api_url))
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(GOOD, source="good.yaml", people=directory)
    assert caught.value.errors == [
        "good.yaml:8: roster.shadow: Slack user U0SHADOW does not exist",
        "good.yaml:8: roster.shadow: Slack user group S0SRE does not exist",
    ]
    slack_stub.users["U0SHADOW"] = {"id": "U0SHADOW"}
    slack_stub.usergroups["S0SRE"] = ["U0A", "U0B"]
    assert parse_plan(GOOD, people=directory).name == "small"
    asked = {c.params.get("user") or c.params.get("usergroup") for c in slack_stub.calls}
    assert asked == {"U0PRIMARY", "U0SHADOW", "S0SRE"}


@pytest.mark.parametrize(
    ("text", "minutes"), [("90s", 1.5), ("15m", 15), ("2h", 120), ("1h30m", 90), ("1d", 1440)]
)
def test_durations_parse(text: str, minutes: float) -> None:
    assert parse_duration(text) == timedelta(minutes=minutes)


@pytest.mark.parametrize("text", ["", "soon", "m15", "1.5h", "1h 2x", "99999999999d"])
def test_bad_durations_do_not_parse(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer than"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["0m", "15", "soon"])
def test_a_plan_refuses_a_zero_or_bare_or_unreadable_gate_timeout(text: str) -> None:
    plan = GOOD.replace("    escalate_after: 10m\n", f"    escalate_after: 10m\n    timeout: {text!r}\n")
    with pytest.raises(PlanInvalid, match="timeout"):
        parse_plan(plan, source="p.yaml")


def test_the_json_schema_is_the_one_generated_from_the_validator() -> None:
    """The schema file is written by `bot.core.runs.planschema`, never by hand: regenerate it with
    `python -m bot.core.runs.planschema > templates/plans/plan.schema.json`."""
    assert (PLANS / "plan.schema.json").read_text() == planschema.render()
    schema = json.loads((PLANS / "plan.schema.json").read_text())
    defs = schema["$defs"]
    assert set(schema["properties"]) == TOP_KEYS
    assert set(schema["properties"]["defaults"]["properties"]) == DEFAULTS_KEYS
    assert set(defs["step"]["properties"]) == STEP_KEYS
    assert set(defs["gate"]["properties"]) == {*GATE_KINDS, "expires"}
    assert [o["required"][0] for o in defs["gate"]["oneOf"]] == list(GATE_KINDS)
    assert defs["on_failure"]["enum"] == ["pause", "abort"]
    assert defs["step"]["properties"]["on_open_findings"]["enum"] == list(ON_OPEN_FINDINGS)
    built = sorted(s.name for s in action_registry.BUILTIN)
    assert defs["action"]["oneOf"][0]["enum"] == built
    assert defs["action"]["oneOf"][1]["propertyNames"]["enum"] == built
    assert defs["rehearsal"]["propertyNames"]["enum"] == sorted(REHEARSAL_HOOKS)
    assert defs["step"]["properties"]["announce"]["enum"] == list(STEP_ANNOUNCEMENTS)


def test_a_key_the_validator_knows_without_a_shape_in_the_schema_is_caught() -> None:
    """The generator refuses key sets that differ from the validator's: a key added to one and not
    the other cannot ship a stale schema."""
    with pytest.raises(ValueError, match="do not match the validator's keys"):
        planschema._ordered(planschema._STEP_SHAPES, {*STEP_KEYS, "retries"})


def test_what_the_validator_accepts_the_schema_accepts_and_a_typo_both_refuse() -> None:
    validator = jsonschema.Draft202012Validator(json.loads((PLANS / "plan.schema.json").read_text()))
    jsonschema.Draft202012Validator.check_schema(validator.schema)
    for text in (GOOD, *(example.read_text() for example in EXAMPLES)):
        parse_plan(text, source="p.yaml")
        assert list(validator.iter_errors(yaml.safe_load(text))) == []
    typo = GOOD.replace("    escalate_after: 10m\n", "    escalate_afer: 10m\n")
    with pytest.raises(PlanInvalid, match="escalate_afer"):
        parse_plan(typo, source="p.yaml")
    assert list(validator.iter_errors(yaml.safe_load(typo))) != []
    weeks = GOOD.replace("    escalate_after: 10m\n", "    escalate_after: 1w\n")
    parse_plan(weeks, source="p.yaml")
    assert list(validator.iter_errors(yaml.safe_load(weeks))) == []


def test_gates_nobody_can_pass_are_refused_before_the_run() -> None:
    text = GOOD.replace(
        "  shadow: [U0SHADOW, S0SRE]\n", "  shadow: [U0PRIMARY]\n  coordinator: [U0C]\n  mesh: [U0A, U0B]\n"
    )
    text += """\
  - id: announce
    title: Announce
    gate: {any_of: [coordinator]}
  - id: mesh
    title: Mesh
    gate: {quorum: {role: mesh, count: 3}}
    done: {any_of: [coordinator]}
"""
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml")
    assert caught.value.errors == [
        "p.yaml:18: steps(work).gate: needs the primary and the shadow as different people, but the roster has only 1",
        "p.yaml:19: steps(work).done: needs 2 people, but the shadow role has 1",
        "p.yaml:23: steps(announce).done: four eyes: U0C would start the step and be the only one able to "
        "confirm it done; add a role to `done`",
        "p.yaml:26: steps(mesh).gate: needs 3 people, but the mesh role has 2",
    ]


def test_a_window_more_than_two_years_ahead_is_refused_only_when_a_clock_is_given() -> None:
    from datetime import UTC, datetime

    from tests.support.plans import GOOD

    text = GOOD.replace("2026-11-28T22:00", "2031-11-28T22:00").replace(
        "2026-11-29T02:00", "2031-11-29T02:00"
    )
    assert parse_plan(text, source="p.yaml").window.end.year == 2031
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml", now=datetime(2026, 5, 1, tzinfo=UTC))
    assert caught.value.errors == [
        "p.yaml:5: window.end: 2031-11-29T02:00:00+09:00 is more than 2 years ahead; a typo in the year?"
    ]
    assert parse_plan(text, source="p.yaml", now=datetime(2030, 5, 1, tzinfo=UTC)).name == "small"


def test_empty_values_where_a_value_is_required_are_missing_values_at_their_line() -> None:
    from tests.support.plans import GOOD

    text = GOOD.replace("cluster: prod", "cluster:").replace("  shadow: [U0SHADOW, S0SRE]", "  shadow:")
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml")
    assert "p.yaml:2: cluster: missing value" in caught.value.errors
    assert "p.yaml:8: roster.shadow: missing value" in caught.value.errors


def test_a_watch_in_a_plan_ends_at_its_timeout_or_the_steps_and_one_with_neither_is_refused() -> None:
    """A plan's watch whose target is never reached would hold the run on its step for ever."""
    step = """\
  - id: settle
    title: Watch it settle
    gate: {any_of: [primary]}
    actions: [{watch: {version: "1.25.16"%s}}]
"""
    own = parse_plan(GOOD + step % ", timeout: 45m", source="p.yaml")
    assert own.step("settle").actions[0].args["timeout"] == "45m"
    stepped = parse_plan(GOOD + step % "" + "    timeout: 30m\n", source="p.yaml")
    assert stepped.step("settle").actions[0].args["timeout"] == "30m"
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(GOOD + step % "", source="p.yaml")
    assert caught.value.errors == [
        "p.yaml:22: steps[2](settle).actions.watch: a watch in a plan needs an end: give it `timeout:` (or "
        "the step, or the plan's `defaults`, a `timeout:`); without one, a target never reached holds the run "
        "here until someone aborts it"
    ]


def test_a_watch_step_fails_on_open_findings_unless_the_plan_says_succeed() -> None:
    watch_step = """\
  - id: settle
    title: Watch it settle
    gate: {any_of: [primary]}
    actions: [{watch: {version: "1.25.16", timeout: 1h}}]
"""
    plan = parse_plan(GOOD + watch_step, source="p.yaml")
    assert plan.step("settle").on_open_findings == "fail"
    plan = parse_plan(GOOD + watch_step + "    on_open_findings: succeed\n", source="p.yaml")
    assert plan.step("settle").on_open_findings == "succeed"
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(GOOD + watch_step + "    on_open_findings: ignore\n", source="p.yaml")
    assert caught.value.errors == [
        "p.yaml:23: steps[2](settle).on_open_findings: 'ignore' is not one of: fail, succeed"
    ]
    plain = GOOD.replace(
        "    escalate_after: 10m\n", "    escalate_after: 10m\n    on_open_findings: succeed\n", 1
    )
    with pytest.raises(PlanInvalid, match="only a step with a `watch` action"):
        parse_plan(plain, source="p.yaml")


def test_an_action_typo_is_offered_its_name_and_advice_is_not_cut_and_merge_keys_are_named() -> None:
    step = """\
  - id: drain-it
    title: Drain
    gate: {approve: [primary, shadow]}
    actions: [{%s: {nodegroup: ng-a}}]
"""
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(GOOD + step % "drian", source="p.yaml")
    (error,) = caught.value.errors
    assert "unknown action 'drian' — did you mean 'drain'? (available: " in error
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(GOOD + step % "announce", source="p.yaml")
    (error,) = caught.value.errors
    # What to write instead comes first: it was cut off after the list of available actions.
    assert (
        "action 'announce' is not available yet: make this a plain gated step without `actions` until it is"
        in error
    )
    merged = (
        GOOD
        + """\
  - id: merged
    title: Merged
    gate:
      <<: {approve: [primary, shadow]}
"""
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(merged, source="p.yaml")
    assert caught.value.errors[0].endswith(
        "YAML merge keys (`<<: *anchor`) are not read: write the keys out (plain anchors and aliases, "
        "`key: *anchor`, work)"
    )


def test_the_runbooks_node_group_order_is_checked_against_the_steps_rolls_to_the_target() -> None:
    """The runbook rolls control-plane, istio, ng-shared, others, logging in that order; a plan that
    drains logging first is warned about. The shipped plans keep it, including eks-managed's catch-up
    of a lagging group to the current minor before the control plane (not a roll to the target)."""
    from bot.core.jobs.preflight import order_warnings
    from bot.core.runs.plans import read_plan_file
    from tests.support.plans import PLANS

    order = ("control-plane", "istio", "ng-shared", "others", "logging")
    for path in sorted(PLANS.glob("*.yaml")):
        assert order_warnings(parse_plan(read_plan_file(path), source=path.name), order) == [], path.name
    text = read_plan_file(PLANS / "eks-nodegroups.yaml")
    swapped = (
        text.replace("drain: {nodegroup: control-plane", "drain: {nodegroup: TEMP", 1)
        .replace("drain: {nodegroup: logging", "drain: {nodegroup: control-plane", 1)
        .replace("drain: {nodegroup: TEMP", "drain: {nodegroup: logging", 1)
    )
    assert order_warnings(parse_plan(swapped, source="swapped.yaml"), order) == [
        "the steps roll the node groups in the order logging, istio, ng-shared, others, control-plane; the "
        "configured order (`snapshot.node_group_order`) is control-plane, istio, ng-shared, others, logging"
    ]
    assert order_warnings(parse_plan(swapped, source="swapped.yaml"), ()) == []  # none configured
