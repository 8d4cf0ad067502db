"""Fleet plans: parsing with every problem named by line, the schema, and stages resolved over
the configured clusters' labels."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml

from bot.core.fleets import schema as fleetschema
from bot.core.fleets.plan import (
    OVERRIDE_KEYS,
    STAGE_KEYS,
    TOP_KEYS,
    child_plan_text,
    parse_fleet,
    resolve,
)
from bot.core.runs.plans import Plan, parse_plan
from bot.errors import PlanInvalid, UserError
from bot.settings import load_settings

REPO = Path(__file__).resolve().parents[3]
FLEETS = REPO / "templates" / "fleets"
EXAMPLE = FLEETS / "example.yaml"

BASE = """\
name: f
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
plan: eks-nodegroups
stages:
"""


def _fleet(stages: str, base: str = BASE) -> str:
    return base + stages


def _problems(text: str) -> list[str]:
    with pytest.raises(PlanInvalid) as caught:
        parse_fleet(text, source="f.yaml")
    return caught.value.errors


def _example_clusters() -> dict[str, object]:
    return dict(load_settings(FLEETS / "example.config.yaml", env={}).clusters)


def test_the_example_is_three_stages_over_the_six_configured_clusters() -> None:
    fleet = parse_fleet(EXAMPLE.read_text(), source="example.yaml")
    stages = resolve(fleet, _example_clusters())  # type: ignore[arg-type]
    assert [(s.stage.name, s.clusters, s.concurrency) for s in stages] == [
        ("canary", ("agora-ci",), 1),
        ("lab", ("agora-lab", "cityos-lab"), 2),
        ("dev", ("agora-dev", "cityos-dev-east", "cityos-dev-west"), 2),
    ]
    canary = fleet.stages[0]
    assert canary.soak == timedelta(hours=1)
    assert canary.evidence == ("alerts",)
    assert canary.after is not None
    assert canary.after.kind == "approve"
    assert canary.after.roles == ("primary", "shadow")
    assert [s.failure_budget for s in fleet.stages] == [0, 0, 1]
    assert sum(len(s.clusters) for s in stages) == 6


def test_a_cluster_runs_the_shared_plan_aimed_at_itself_with_its_overrides() -> None:
    fleet = parse_fleet(EXAMPLE.read_text(), source="example.yaml")
    base = (REPO / "templates" / "plans" / "eks-nodegroups.yaml").read_text()
    west = parse_plan(child_plan_text(fleet, base, "cityos-dev-west"), source="west")
    east = parse_plan(child_plan_text(fleet, base, "cityos-dev-east"), source="east")
    assert (west.cluster, west.target_version) == ("cityos-dev-west", "1.25.15")
    assert (east.cluster, east.target_version) == ("cityos-dev-east", parse_plan(base).target_version)
    assert west.name == "eks-nodegroups.cityos-dev-west"
    assert [s.id for s in west.steps] == [s.id for s in east.steps]

    # The override aims the steps too, not only the card: every version the plan's actions, their
    # background checks and rehearsal stand-ins give as its target (it once changed the header only,
    # and cityos-dev-west was upgraded to 1.25.16 under a card that said 1.25.15).
    def versions(plan: Plan) -> set[str]:
        calls = [c for step in plan.steps for c in (*step.actions, *step.background, *step.rehearsal)]
        return {str(c.args["version"]) for c in calls if "version" in c.args}

    assert versions(west) == {"1.25.15"}
    assert versions(east) == {"1.25.16"}
    west_titles = {s.id: s.title for s in west.steps}
    assert west_titles["wait-control-plane"] == "Wait until control-plane is entirely on 1.25.15 and Ready"
    assert west_titles["control-plane"] == "Upgrade the EKS control plane to 1.25"


def test_an_override_to_another_minor_version_is_refused_with_its_way_out() -> None:
    text = EXAMPLE.read_text().replace('target_version: "1.25.15"', 'target_version: "1.26.6"')
    fleet = parse_fleet(text, source="example.yaml")
    base = (REPO / "templates" / "plans" / "eks-nodegroups.yaml").read_text()
    with pytest.raises(UserError) as refused:
        child_plan_text(fleet, base, "cityos-dev-west")
    assert refused.value.user_message == (
        "overrides.cityos-dev-west.target_version: 1.26.6 is not a 1.25 version like the plan's 1.25.16; "
        "a cluster that goes to another minor version needs a plan of its own (`plans:`)"
    )


def test_window_and_roster_overrides_reach_the_cluster_plan() -> None:
    overrides = (
        "overrides:\n"
        "  ci:\n"
        "    window: {start: '2026-12-02T10:00', end: '2026-12-02T12:00', timezone: Europe/Berlin}\n"
        "    roster: {primary: [U0OTHER], shadow: [U0SHADOW], coordinator: [U0COORD]}\n"
    )
    text = _fleet("  - {name: canary, clusters: [ci]}\n", BASE.replace("stages:\n", overrides + "stages:\n"))
    fleet = parse_fleet(text)
    base = (REPO / "templates" / "plans" / "eks-nodegroups.yaml").read_text()
    plan = parse_plan(child_plan_text(fleet, base, "ci"))
    assert plan.window.timezone == "Europe/Berlin"
    assert plan.window.start.hour == 10
    assert plan.roster["primary"] == ("U0OTHER",)


def test_a_stage_s_key_written_at_the_top_level_is_said_as_the_stage_s() -> None:
    errors = _problems(
        _fleet(
            "  - name: canary\n"  # line 5
            "    clusters: [ci]\n"
            "soak: 1h\n"  # 7: the canary's, indented too little
        )
    )
    assert errors == [
        "f.yaml:7: soak: `soak` is a key of a stage under `stages:`: indent it under the stage above it (line 5)"
    ]


def test_every_problem_is_named_with_its_line_at_once() -> None:
    errors = _problems(
        _fleet(
            "  - name: canary\n"  # line 5
            "    clusters: [ci]\n"
            "    evidence: [alerts, logs]\n"  # 7: unknown evidence, and no soak
            "    after: {approve: [primary, sre]}\n"  # 8: unknown role
            "  - name: lab\n"
            "    selector: {env: lab}\n"
            "    clusters: [lab-1]\n"  # both
            "    max_concurrency: 150%\n"  # 12
            "    soke: 1h\n"  # 13: typo
        )
    )
    text = "\n".join(errors)
    assert "f.yaml:7: stages[0].evidence: unknown evidence 'logs'" in text
    assert "f.yaml:7: stages[0].evidence: evidence is watched during the soak" in text
    assert "f.yaml:8: stages[0].after.approve: unknown role 'sre'" in text
    assert "f.yaml:9: stages[1]: a stage takes its clusters by name" in text
    assert "f.yaml:12: stages[1].max_concurrency: expected a count from 1 to 50 or a percentage" in text
    assert "f.yaml:13: stages[1].soke: unknown key (did you mean 'soak'?)" in text


def test_a_fleet_names_its_runbook_once() -> None:
    no_plan = "name: f\nroster: {primary: [U0PRIMARY]}\nstages:\n  - {name: a, clusters: [x]}\n"
    assert any("name the runbook" in e for e in _problems(no_plan))
    both = no_plan + "plan: p\nplans: {x: q}\n"
    assert any("name the runbook" in e for e in _problems(both))
    parse_fleet(no_plan + "plans: {x: q}\n")


def test_gates_are_the_step_gates_four_eyes_and_quorum_included() -> None:
    fleet = parse_fleet(
        _fleet(
            "  - name: canary\n    clusters: [ci]\n    before: {quorum: {role: shadow, count: 2}}\n"
            "    after: {any_of: [primary], expires: 30m}\n"
        )
    )
    before, after = fleet.stages[0].before, fleet.stages[0].after
    assert before is not None
    assert (before.kind, before.count) == ("quorum", 2)
    assert after is not None
    assert after.expires == timedelta(minutes=30)


def test_resolution_names_every_cluster_problem() -> None:
    fleet = parse_fleet(
        _fleet(
            "  - {name: canary, clusters: [agora-ci, nowhere]}\n"
            "  - {name: lab, selector: {env: lab}}\n"
            "  - {name: again, clusters: [agora-lab]}\n"
            "  - {name: prod, selector: {env: prod}}\n",
            BASE.replace("stages:\n", "overrides: {ghost: {target_version: '1.25'}}\nstages:\n"),
        )
    )
    with pytest.raises(PlanInvalid) as caught:
        resolve(fleet, _example_clusters())  # type: ignore[arg-type]
    assert caught.value.errors == [
        "fleet f: stage canary: no cluster 'nowhere' in the configuration",
        "fleet f: cluster agora-lab is in stage lab and in stage again",
        "fleet f: stage prod: no configured cluster has the labels env=prod",
        "fleet f: overrides.ghost: ghost is in no stage of the fleet",
    ]


def test_a_plan_per_cluster_must_cover_every_cluster() -> None:
    fleet = parse_fleet(
        "name: f\nroster: {primary: [U0PRIMARY]}\nplans: {agora-ci: a}\n"
        "stages:\n  - {name: lab, selector: {env: lab}}\n  - {name: ci, clusters: [agora-ci]}\n"
    )
    with pytest.raises(PlanInvalid, match="no plan for cluster agora-lab"):
        resolve(fleet, _example_clusters())  # type: ignore[arg-type]
    assert fleet.plan_for("agora-ci") == "a"


def test_a_percentage_rounds_up_and_never_below_one() -> None:
    fleet = parse_fleet(
        _fleet(
            "  - {name: a, clusters: [a, b, c], max_concurrency: 50%}\n  - {name: b, clusters: [d], max_concurrency: 10%}\n"
        )
    )
    assert fleet.stages[0].max_concurrency.limit(3) == 2
    assert fleet.stages[1].max_concurrency.limit(1) == 1
    assert fleet.stages[0].max_concurrency.limit(12) == 6


def test_the_schema_is_the_one_generated_from_the_validator() -> None:
    assert (FLEETS / "fleet.schema.json").read_text() == fleetschema.render()
    schema = json.loads((FLEETS / "fleet.schema.json").read_text())
    assert set(schema["properties"]) == TOP_KEYS
    assert set(schema["$defs"]["stage"]["properties"]) == STAGE_KEYS
    assert set(schema["$defs"]["override"]["properties"]) == OVERRIDE_KEYS


def test_what_the_validator_accepts_the_schema_accepts_and_a_typo_both_refuse() -> None:
    validator = jsonschema.Draft202012Validator(json.loads((FLEETS / "fleet.schema.json").read_text()))
    jsonschema.Draft202012Validator.check_schema(validator.schema)
    text = EXAMPLE.read_text()
    assert list(validator.iter_errors(yaml.safe_load(text))) == []
    typo = text.replace("max_concurrency: 2", "max_concurency: 2")
    assert list(validator.iter_errors(yaml.safe_load(typo)))
    assert any("max_concurency: unknown key" in e for e in _problems(typo))
    both = text.replace("selector: {env: lab}", "selector: {env: lab}\n    clusters: [agora-lab]")
    assert list(validator.iter_errors(yaml.safe_load(both)))
    assert _problems(both)


def test_a_soak_on_evidence_it_does_not_watch_is_refused_with_the_way_to_get_it() -> None:
    # It once validated, then paused the fleet at the soak ("`analysis` evidence has no source in
    # this bot yet"), where no resume could pass it: only an abort got out.
    (problem,) = _problems(
        _fleet("  - {name: canary, clusters: [ci], soak: 1h, evidence: [alerts, analysis]}\n")
    )
    assert problem == (
        "f.yaml:5: stages[0].evidence: a soak does not watch `analysis` yet, so it could never pass: "
        "put an `analysis` step (or a drain's `background: [analysis]`) in the clusters' plan; a soak watches `alerts`"
    )
