"""`upgrade-bot rules test` as a user types it: the console script in a process of its own, each
built-in rule held to its literal line from the seed notes (tests/core/checks/test_seed_lines.py
names which line is whose), and the exit statuses a CI job branches on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.seed_lines import CLAIMS, CNI002_LINE, NO_SEED_LINE, Seed, seed_text

UPGRADE_BOT = Path(sys.executable).with_name("upgrade-bot")


def rules_test(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(UPGRADE_BOT), "rules", "test", *args], capture_output=True, text=True, timeout=120, check=False
    )


def argv(seed: Seed, text: str) -> list[str]:
    if seed.signal == "log":
        return ["--log", text, *(["--container", seed.container] if seed.container else [])]
    return ["--event", text, *(["--reason", seed.reason] if seed.reason else [])]


@pytest.mark.parametrize("rule_id", sorted(CLAIMS))
def test_the_command_matches_each_built_in_rule_on_its_seed_line_and_exits_3(rule_id: str) -> None:
    seed = CLAIMS[rule_id]
    # The lines as a person pastes them: a log's whole block (a tail), an event's message.
    done = rules_test(*argv(seed, seed_text(seed)))
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith(f"{rule_id}  "), done.stdout
    (summary,) = [line for line in done.stdout.splitlines() if line.startswith("1 rule matches this ")]
    assert f": {rule_id} (" in summary, done.stdout


def test_the_command_matches_cni002_on_the_vpc_cnis_event() -> None:
    done = rules_test(*argv(NO_SEED_LINE["CNI002"], CNI002_LINE))
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("CNI002  ")


def test_a_line_no_rule_matches_exits_0_and_says_so() -> None:
    done = rules_test("--log", "GET /healthz 200 OK")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("no rule matches this log line")


def test_a_log_and_an_event_at_once_is_a_usage_error() -> None:
    done = rules_test("--log", "x", "--event", "y")
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr
    assert "Traceback" not in done.stderr


def test_kubectls_eviction_error_pasted_as_a_log_line_points_to_the_event_rule_it_matches() -> None:
    """kubectl drain prints the eviction API's refusal; an SRE pastes it as a log line. No log rule
    matches it, but KI006 matches those words in events: the answer says so instead of "no rule"."""
    line = (
        'error when evicting pods/"ledger-0" -n "billing" (will retry after 5s): Cannot evict pod as it '
        "would violate the pod's disruption budget."
    )
    done = rules_test("--log", line)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("no rule matches this log line")
    assert "as an event message it matches KI006: " in done.stdout
    assert rules_test("--event", line).returncode == 3


def test_with_a_configuration_it_tries_the_rules_that_configurations_bot_matches(tmp_path: Path) -> None:
    seed = CLAIMS["KI001"]
    team = tmp_path / "team-rules.yaml"
    shipped_rules = yaml.safe_load(
        (Path(__file__).parents[2] / "templates/rules/known-issues.yaml").read_text()
    )
    [ki001] = [r for r in shipped_rules["rules"] if r["id"] == "KI001"]
    ki001["match"]["log"]["regex"] = "NEVERMATCH"  # the team's own KI001, which this line does not match
    team.write_text(yaml.safe_dump({"rules": [ki001]}))
    config = tmp_path / "upgrade-bot.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\nrules_files: [{team}]\n")
    shipped = rules_test(*argv(seed, seed_text(seed)))
    assert shipped.returncode == 3
    configured = rules_test("--config", str(config), *argv(seed, seed_text(seed)))
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert f"the rules of {config} (" in configured.stdout
