"""`plan load FILE`: from the terminal (`upgrade-bot exec "plan load plan.yaml"`), the person at the
keyboard loads the plan file `plan draft` wrote, by its path; from Slack a path is refused (it would
read files on the bot's host), and the refusal says how a plan gets there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.plans import GOOD

Load = Callable[[str, str], tuple[bool, str]]


@pytest.fixture
def load(write_config: Callable[..., Path], tmp_path: Path) -> Load:
    (tmp_path / "team" / "plans").mkdir(parents=True)
    config = write_config(f"templates_dir: {tmp_path / 'team'}\n")

    def run(text: str, source: str) -> tuple[bool, str]:
        services = assemble(load_settings(config, {}), with_slack=False)
        try:
            outcome = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", source=source))
            return outcome.ok, outcome.rendered.text
        finally:
            services.close()

    return run


def test_the_terminal_loads_a_plan_file_by_its_path(
    load: Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plan.yaml").write_text(GOOD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for given in ("plan.yaml", "./plan.yaml", str(tmp_path / "plan.yaml")):
        ok, text = load(f"plan load {given}", "terminal")
        assert ok, text
        assert "small" in text
    # A file that is not there is said as such, by the name given.
    ok, text = load("plan load ./nope.yaml", "terminal")
    assert not ok
    assert "./nope.yaml: plan file not found" in text


def test_slack_refuses_a_path_and_says_how_a_plan_gets_to_the_bot(load: Load, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(GOOD, encoding="utf-8")
    for given in ("plan.yaml", str(tmp_path / "plan.yaml"), "../../etc/passwd"):
        ok, text = load(f"plan load {given}", "slack")
        assert not ok
        assert "is a file path, and Slack does not read files on the bot's host" in text
        assert "small" not in text
    ok, text = load("plan load ./plan.yaml", "slack")
    assert (
        "put it in the templates directory as `plans/plan.yaml` and pass `plan`, or upload it to Slack"
        in text
    )
