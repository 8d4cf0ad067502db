"""`upgrade-bot plan validate`: the terminal front door's plan check, as a real process."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import bot_command
from tests.support.plans import BAD, GOOD, PLANS
from tests.support.slack_stub import SlackStub


def test_cli_validate_exits_0_for_a_good_plan_and_2_listing_every_problem(tmp_path: Path) -> None:
    good = subprocess.run(
        [*bot_command(), "plan", "validate", str(PLANS / "eks-nodegroups.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert "eks-nodegroups is valid" in good.stdout
    bad_file = tmp_path / "bad.yaml"
    bad_file.write_text(BAD)
    bad = subprocess.run(
        [*bot_command(), "plan", "validate", str(bad_file)], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.count(f"{bad_file}:") == 8
    assert "Traceback" not in bad.stderr


def test_cli_validate_says_a_yaml_slip_in_plain_words_with_its_line_and_column(tmp_path: Path) -> None:
    text = (PLANS / "eks-managed.yaml").read_text()
    plan = tmp_path / "slip.yaml"
    plan.write_text(text.replace("\n  timeout: 2h\n", "\n\ttimeout: 2h\n", 1))
    line = text.splitlines().index("  timeout: 2h") + 1
    result = subprocess.run(
        [*bot_command(), "plan", "validate", str(plan)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"• {plan}:{line}:1: invalid YAML: a tab character: YAML indents with spaces (replace the tab with spaces)"
    )
    assert "cannot start any token" not in result.stderr


def test_cli_validate_warns_of_steps_left_on_another_upgrade_s_versions(tmp_path: Path) -> None:
    # Last quarter's plan copied, one step left behind and one typed a minor too far.
    text = (PLANS / "eks-managed.yaml").read_text()
    copied = text.replace('eks-update-cluster: {version: "1.25"', 'eks-update-cluster: {version: "1.24"')
    copied = copied.replace('nodegroup: istio, version: "1.25"', 'nodegroup: istio, version: "1.26"')
    assert copied.count("1.24") > text.count("1.24")
    assert "1.26" in copied
    plan = tmp_path / "copied.yaml"
    plan.write_text(copied)
    result = subprocess.run(
        [*bot_command(), "plan", "validate", str(plan)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr  # warnings: the plan itself is well formed
    warnings = [
        line
        for line in result.stderr.splitlines()
        # (Past the copied plan's dated window, `plan validate` also says that window has ended.)
        if line.startswith(f"{plan}: warning: ") and "the plan's window ended" not in line
    ]
    assert len(warnings) == 3, result.stderr
    assert (
        "step `control-plane`: eks-update-cluster version=1.24 is not above the plan's current_version"
        in warnings[0]
    )
    assert (
        "step `nodegroup-istio`: eks-update-nodegroup version=1.26 goes past the plan's target_version"
        in warnings[1]
    )
    assert "the last control-plane update, step `control-plane`, goes to 1.24, short of" in warnings[2]
    # The shipped plan, its catch-up roll of `others` to 1.24 included, has none.
    shipped = subprocess.run(
        [*bot_command(), "plan", "validate", str(PLANS / "eks-managed.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    # (but, past its dated window, that the window has ended)
    assert not [w for w in shipped.stderr.splitlines() if "the plan's window ended" not in w], shipped.stderr


def test_cli_validate_warns_of_a_window_drawn_across_a_clock_change(tmp_path: Path) -> None:
    plan = tmp_path / "dst.yaml"
    plan.write_text(
        GOOD.replace(
            'window: {start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}',
            'window: {start: "2027-03-14T01:30", end: "2027-03-14T03:30", timezone: America/New_York}',
        )
    )
    result = subprocess.run(
        [*bot_command(), "plan", "validate", str(plan)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert (
        f"{plan}: warning: the window spans a clock change (2027-03-14 in America/New_York, 01:30 EST to "
        "03:30 EDT): 1h of real time, 2h on the wall clock"
    ) in result.stderr


def test_cli_validate_takes_a_built_in_plan_by_name_from_any_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [*bot_command(), "plan", "validate", "eks-nodegroups"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "plan eks-nodegroups is valid" in result.stdout


def test_cli_validate_can_ask_slack_about_the_roster(
    tmp_path: Path, write_config: Callable[..., Path], bot_env: dict[str, str], slack_stub: SlackStub
) -> None:
    plan = tmp_path / "good.yaml"
    plan.write_text(GOOD)
    slack_stub.users.update({"U0PRIMARY": {"id": "U0PRIMARY"}, "U0SHADOW": {"id": "U0SHADOW"}})
    config = write_config()
    command = [*bot_command(), "plan", "validate", str(plan), "--check-slack", "--config", str(config)]
    missing = subprocess.run(command, env=bot_env, capture_output=True, text=True, check=False)
    assert missing.returncode == 2
    assert f"{plan}:8: roster.shadow: Slack user group S0SRE does not exist" in missing.stderr
    slack_stub.usergroups["S0SRE"] = ["U0SHADOW"]
    found = subprocess.run(command, env=bot_env, capture_output=True, text=True, check=False)
    assert found.returncode == 0, found.stderr
    assert "(Slack users checked)" in found.stdout


# -- hostile plans: one problem line naming file, line and key; exit 2; never a traceback ---------

HOSTILE_BASE = GOOD
#: Three years from now, whenever the tests run: past the two-year horizon, never in the past.
FAR = datetime.now(UTC).year + 3


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "plan", "validate", str(path)], capture_output=True, text=True, timeout=60
    )


def the_problem(result: subprocess.CompletedProcess[str], path: Path) -> str:
    """Exit 2, no traceback, and exactly one line naming the file (PlanInvalid's list of one)."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    named = [line for line in result.stderr.splitlines() if f"{path}" in line]
    assert len(named) == 1, result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2, result.stderr
    return named[0]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "    escalate_after: 10m",
            "    timeout: 99999999999999d",
            "steps[1](work).timeout: '99999999999999d'",
        ),
        ('target_version: "1.30"', 'target_version: "1.' + "9" * 5000 + '"', "target_version: '1.999"),
        ("    title: Do it", "    title:", "steps[1](work).title: missing value"),
        (
            'end: "2026-11-29T02:00"',
            'end: "9999-12-31T02:00"',
            "window.end: 9999-12-31T02:00:00 is not between 2000 and 2099",
        ),
        ('end: "2026-11-29T02:00"', 'end: "2026-12-31T02:00"', "window.end: the window lasts 32d4h"),
        (
            'start: "2026-11-28T22:00", end: "2026-11-29T02:00"',
            f'start: "{FAR}-11-28T22:00", end: "{FAR}-11-29T02:00"',
            f"window.end: {FAR}-11-29T02:00:00+09:00 is more than 2 years ahead",
        ),
        ("name: small", "name: !!python/name:os.system small", "name: unknown tag !!python/name:os.system"),
        (
            "    title: Do it",
            '    title: "Do it \\ud83d"',
            "steps[1].title: \\ud83d is half of a UTF-16 pair, not a character",
        ),
        (
            "cluster: prod",
            "cluster: " + "[" * 3000 + "]" * 3000,
            "cluster[0][0][0]…: nested deeper than 50 levels",
        ),
    ],
)
def test_cli_validate_names_file_line_and_key_for_hostile_values(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in HOSTILE_BASE
    text = HOSTILE_BASE.replace(old, new, 1)
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    line = the_problem(validate(path), path)
    # Each replacement stays on the line it replaced.
    lineno = HOSTILE_BASE[: HOSTILE_BASE.index(old)].count("\n") + 1
    assert f"{path}:{lineno}: {expected}" in line, line
    assert len(line) < 400


def test_cli_validate_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    line = the_problem(validate(fifo), fifo)
    assert line == f"upgrade-bot: {fifo}: the plan must be a regular file, not a FIFO"


def test_cli_validate_refuses_a_plan_that_is_not_utf8_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.replace("Do it", "Caf\xe9").encode("latin-1"))
    line = the_problem(validate(path), path)
    raw = path.read_bytes()
    offset = raw.index(b"\xe9")
    lineno = raw.count(b"\n", 0, offset) + 1
    assert line == f"upgrade-bot: {path}:{lineno}: the plan is not UTF-8 text (byte {offset})"


def test_cli_validate_says_a_missing_plan_file_is_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    line = the_problem(validate(missing), missing)
    assert line == f"upgrade-bot: {missing}: plan file not found"


def test_cli_validate_can_check_the_plans_actions_on_its_cluster(
    tmp_path: Path, write_config: Callable[..., Path], sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    plan = tmp_path / "names.yaml"
    plan.write_text(
        GOOD
        + """  - id: cordon-gone
    title: Cordon a node that is not there
    gate: {approve: [primary, shadow]}
    actions: [{cordon: {node: nosuch}}]
  - id: drain-shared
    title: Drain the shared group
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-shared}}]
"""
    )
    config = write_config(f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n")
    checked = subprocess.run(
        [*bot_command(), "plan", "validate", str(plan), "--check-cluster", "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert f"{plan}: warning: step `cordon-gone` (cordon): no such node: nosuch" in checked.stderr
    assert "drain-shared" not in checked.stderr
    # The plan is for 1.29 → 1.30; the cluster runs 1.24: last quarter's plan, or the wrong cluster.
    assert (
        f"{plan}: warning: the plan says the cluster runs 1.29, but prod runs v1.24.17" in checked.stderr
    ), checked.stderr
    assert "is valid" in checked.stdout
    # Without a cluster that answers, the check is said to be skipped; the plan is still valid.
    offline = write_config("clusters:\n  prod: {kubeconfig: /nonexistent, context: sim}\n")
    skipped = subprocess.run(
        [*bot_command(), "plan", "validate", str(plan), "--check-cluster", "--config", str(offline)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert skipped.returncode == 0, skipped.stderr
    assert "the check that the plan's nodes and workloads exist was skipped" in skipped.stderr
    assert "Traceback" not in skipped.stderr


def test_an_emoji_escaped_as_json_writes_it_is_read_as_the_emoji(tmp_path: Path) -> None:
    # `json.dumps` writes 🚀 as "\\ud83d\\ude80", which YAML reads as two halves of a pair: they
    # were kept apart, and the run's report, `abort` and `rehearse` then failed on them.
    from bot.core.runs.plans import parse_plan

    text = GOOD.replace("title: Do it", 'title: "Roll the web pool \\ud83d\\ude80"', 1)
    assert "\\ud83d" in text
    path = tmp_path / "emoji.yaml"
    path.write_text(text)
    assert validate(path).returncode == 0
    plan = parse_plan(text, source=str(path))
    assert "Roll the web pool \U0001f680" in [s.title for s in plan.steps]
