"""What plan validation says of three common slips, each once and right: a misspelt action argument
(not also the action's complaint about the rest), an empty step list, and an unquoted `yes`."""

from __future__ import annotations

import pytest

from bot.core.runs.plans import parse_plan
from bot.errors import PlanInvalid
from tests.support.plans import GOOD

HEADER = GOOD.split("steps:")[0]
CORDON = "steps:\n  - id: c\n    title: Cordon\n    gate: {approve: [primary, shadow]}\n    actions: [{cordon: {nodegrup: workers}}]\n"


def problems(text: str) -> list[str]:
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="plan.yaml")
    return caught.value.errors


def test_a_misspelt_argument_is_said_once() -> None:
    assert [p.split(": ", 1)[1] for p in problems(HEADER + CORDON)] == [
        "steps[0](c).actions.cordon: unknown argument 'nodegrup' (accepted: dry_run, node, nodegroup, version)"
    ]


def test_an_empty_step_list_and_an_unquoted_yes_say_what_is_wrong() -> None:
    assert any(p.endswith("steps: a plan needs at least one step") for p in problems(HEADER + "steps: []\n"))
    named = HEADER.replace("name: small", "name: yes") + CORDON.replace("nodegrup", "nodegroup")
    assert any(
        p.endswith('name: yes is read as true, not a string: quote it ("yes")') for p in problems(named)
    )
