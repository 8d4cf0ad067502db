"""`upgrade-bot plan validate`: the terminal front door's plan check, as a real process."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import bot_command
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
