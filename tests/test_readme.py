"""The front page stays a front page, its two commands stay the ones CI runs, and the CHANGELOG's
newest release is the version every part of this checkout says it is."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import bot

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]

#: The README's two commands, exactly: `.ci/run` runs the second, people paste the first.
TWO_COMMANDS = """```sh
scripts/demo    # a rehearsal of the EKS runbook on the simulated cluster (no Slack, no cluster)
scripts/test    # the whole test suite (pytest, four workers); extra arguments go to pytest
```"""


def test_the_readme_is_a_front_page_of_at_most_300_lines_and_3000_words() -> None:
    # `wc -l` and `wc -w`: the reference lives in docs/, the figures in benchmarks/RESULTS.md.
    assert README.count("\n") <= 300
    assert len(README.split()) <= 3000


def test_the_readme_gives_the_two_commands_and_ci_runs_its_test_command() -> None:
    assert TWO_COMMANDS in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "scripts/test" in ci


def test_the_readme_keeps_no_measurement_diary() -> None:
    # Dated measurements and timings belong to benchmarks/RESULTS.md, where each has its commit.
    # A commit hash is 7+ hex digits with a digit in them ("defaced" is a word).
    diary = re.findall(
        r"[Mm]easured (?:again )?\d{4}-\d\d-\d\d|\d+ min \d+ s|\b(?=[a-f]*\d)[0-9a-f]{7,40}\b", README
    )
    assert diary == []
    assert "benchmarks/RESULTS.md" in README


def test_the_newest_release_in_the_changelog_is_the_version_of_this_checkout() -> None:
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", CHANGELOG, re.MULTILINE)
    assert releases[0] == ("Unreleased", "")
    newest, date = releases[1]
    assert newest == VERSION
    assert date
    chart = yaml.safe_load(
        (ROOT / "deploy" / "helm" / "upgrade-bot" / "Chart.yaml").read_text(encoding="utf-8")
    )
    assert bot.__version__ == VERSION
    assert chart["appVersion"] == VERSION


def test_the_changelog_is_for_users_without_internal_issue_numbers() -> None:
    assert re.findall(r"\bissues? \d+|#\d+\b", CHANGELOG, re.IGNORECASE) == []
