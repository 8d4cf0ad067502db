"""Sample plans shared by the plan, run and front-door tests: one good, one with every mistake."""

from __future__ import annotations

from pathlib import Path

PLANS = Path(__file__).resolve().parents[2] / "templates" / "plans"
EXAMPLES = sorted(PLANS.glob("*.yaml"))

GOOD = """\
name: small
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW, S0SRE]
steps:
  - id: snap
    title: Snapshot
    gate: {any_of: [primary]}
    actions: [{snapshot: {label: pre}}]
  - id: work
    title: Do it
    gate: {approve: [primary, shadow], expires: 30m}
    done: {quorum: {role: shadow, count: 2}}
    escalate_after: 10m
"""

BAD = """\
name: bad
cluster: prod
current_version: "1.30"
target_version: "1.29"
window: {start: "2026-11-28T22:00", end: "2026-11-28T21:00", timezone: Asia/Tokyo}
roster:
  primary: [U0PRIMARY]
  shadow: [U0NOBODY]
steps:
  - id: one
    title: One
    gate: {approve: [primary, sre]}
  - id: one
    title: One again
    gate: {any_of: [shadow]}
    actions: [{reboot: {all: "yes"}}]
    timeout: soon
  - id: three
    title: Three
    gate: {any_of: [primary]}
    actions: [announce]
    on_failure: shrug
"""

#: The EKS runbook as it was before the cluster actions (issue 15): node groups are plain human
#: steps (the cloud's pipeline drains them), `checks` runs the `check` action. Tests of gates,
#: restarts and announcements that walk a run of human steps use it; the shipped plan, whose node
#: groups are drained by the bot, is tested by the rehearsal and the demo.
EKS = (Path(__file__).with_name("eks_human_runbook.yaml")).read_text(encoding="utf-8")
_CHECK_ACTION = """    gate: {any_of: [primary]}
    actions:
      - check: {to: "1.25"}
"""
_HUMAN_CHECKS = """    gate: {any_of: [primary]}
    done: {any_of: [primary, shadow]}
"""


def eks_with_human_checks() -> str:
    """The EKS runbook with `checks` as a plain step gated twice (started, done), as it was before
    the `check` action: tests of gates, restarts and announcements that need a human step right
    after the snapshot use it, so the pre-flight findings the sim's scenario plants (which fail the
    action and pause the run) do not stand in their way. The action itself is tested in
    tests/frontdoor/test_run_gates.py and tests/test_demo.py."""
    assert EKS.count(_CHECK_ACTION) == 1
    return EKS.replace(_CHECK_ACTION, _HUMAN_CHECKS)
