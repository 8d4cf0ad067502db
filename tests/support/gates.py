"""A gate message as the run's cards render it for a step that changes the cluster (a drain of
the `big` group), around a given dry run — validated with slack_sdk's models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.core.runs.cards import dry_run_view
from bot.core.runs.plans import parse_plan
from bot.resources import BUILTIN_TEMPLATES
from tests.support.blockkit import message_blocks

NOW = datetime(2026, 11, 28, 14, 2, 11, tzinfo=UTC)


def gate_blocks(dry_run: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    plan = parse_plan(
        """\
name: big
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
steps:
  - id: drain-big
    title: Drain the big group
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: big}}]
"""
    )
    run = R.new_run("R1", plan, by="U0PRIMARY", now=NOW).run
    sr = run.step_run("drain-big")
    gate = run.gate_for(sr)
    assert gate is not None
    context = {
        "run": run,
        "step": plan.step("drain-big"),
        "phase": "start",
        "gate": gate.describe(),
        "people": ["U0PRIMARY", "U0SHADOW"],
        "value": "R1|drain-big|1",
        "waiting_on": "the primary and the shadow",
        "state": "awaiting_approval",
        "open": True,
        "dry_run": dry_run_view(dry_run, "Asia/Tokyo"),
    }
    rendered = Renderer([BUILTIN_TEMPLATES]).render("runs/gate", context)
    assert rendered.blocks is not None
    return message_blocks({"blocks": rendered.blocks}), rendered.text
