"""A step's `pr:` as the docs and the plan schema write it: `number: 62` (a YAML integer) is the PR
#62, as `"62"` is; what is not a PR number is a validation error on its line."""

from __future__ import annotations

import pytest

from bot.core.runs.plans import parse_plan
from bot.errors import PlanInvalid

PLAN = """\
name: pr-step
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {{start: "2026-11-29T14:00", end: "2026-11-29T18:00", timezone: UTC}}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: launch-istio
    title: Merge the Istio PR
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
    pr: {{repo: org/eks-provision-configuration, {which}, require: {{merged: true, checks: success}}}}
"""


@pytest.mark.parametrize(
    ("which", "number", "branch"),
    [("number: 62", 62, ""), ('number: "62"', 62, ""), ("branch: istio-1.25", None, "istio-1.25")],
)
def test_a_step_names_its_pr_by_number_as_the_docs_write_it_or_by_branch(
    which: str, number: int | None, branch: str
) -> None:
    step = parse_plan(PLAN.format(which=which)).step("launch-istio")
    assert step.pr is not None
    assert (step.pr.repo, step.pr.number, step.pr.branch) == (
        "org/eks-provision-configuration",
        number,
        branch,
    )
    assert step.pr.require == ("merged", "checks")


@pytest.mark.parametrize(
    ("which", "said"),
    [
        ("number: 0", "expected a whole number from 1 to 999999999"),
        ("number: 1000000000", "expected a whole number from 1 to 999999999"),
        ("number: 62.5", "expected a PR number, from 1 to 999999999"),
        ("number: true", "expected a PR number, from 1 to 999999999"),
        ('number: ""', "expected a non-empty string"),
        ('number: "#62"', "expected a PR number, from 1 to 999999999"),
    ],
)
def test_what_is_not_a_pr_number_is_refused_on_its_line(which: str, said: str) -> None:
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(PLAN.format(which=which))
    assert f"the plan has 1 problem(s):\n• <plan>:14: steps[0](launch-istio).pr.number: {said}" == str(
        caught.value
    )
