"""`upgrade-bot fleet …` in the terminal: validate a fleet written outside the project against a
configuration, start it, read its status, and the exit statuses of the terminal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.cli import main
from bot.sim.cluster import SimCluster
from tests.support.fleets import fleet_config

REPO = Path(__file__).resolve().parents[2]


def test_the_example_fleet_validates_against_its_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A copy: the configuration's data_dir is relative to it, and the repository stays clean.
    config = tmp_path / "example.config.yaml"
    config.write_text((REPO / "templates" / "fleets" / "example.config.yaml").read_text(), encoding="utf-8")
    status = main(["fleet", "validate", "example", "--config", str(config)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "fleet example is valid: 3 stages, 6 clusters — canary: agora-ci (max 1); " in out
    assert "dev: agora-dev, cityos-dev-east, cityos-dev-west (max 2)" in out


def test_a_fleet_written_outside_the_project_is_validated_started_and_shown(
    write_config: Callable[..., Path],
    tmp_path: Path,
    sim_small: SimCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = str(write_config(fleet_config(tmp_path, sim=sim_small)))
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "name: mine\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: tiny\n"
        "stages:\n  - {name: first, clusters: [ci]}\n  - {name: rest, selector: {env: lab}, max_concurrency: 50%}\n",
        encoding="utf-8",
    )
    assert main(["fleet", "validate", str(mine), "--config", config]) == 0
    assert "fleet mine is valid: 2 stages, 5 clusters" in capsys.readouterr().out

    bad = tmp_path / "bad.yaml"
    bad.write_text(mine.read_text().replace("max_concurrency", "max_concurency"), encoding="utf-8")
    assert main(["fleet", "validate", str(bad), "--config", config]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:6: stages[1].max_concurency: unknown key (did you mean 'max_concurrency'?)" in err
    bad.write_text(mine.read_text().replace("env: lab", "env: prod"), encoding="utf-8")
    assert main(["fleet", "validate", str(bad), "--config", config]) == 2
    assert "fleet mine: stage rest: no configured cluster has the labels env=prod" in capsys.readouterr().err

    assert main(["fleet", "start", str(mine), "--config", config, "--as", "U0PRIMARY"]) == 0
    out = capsys.readouterr().out
    assert "started" in out
    assert "*ci* — running · 1.29.4 → 1.30.2 · step `drain`" in out
    assert main(["fleet", "pause", "--reason", "lunch", "--config", config, "--as", "U0STRANGER"]) == 1
    assert "roster" in capsys.readouterr().out
    assert main(["fleet", "pause", "--reason", "lunch break", "--config", config, "--as", "U0SHADOW"]) == 0
    assert "⚠️ paused by @U0SHADOW: lunch break" in capsys.readouterr().out
    # The status as a terminal reads it: people as `@name` (here the id: nobody looked them up), no
    # Slack markup (it printed `<@U0SHADOW>`, `:warning:` and `*ci*`); as `exec` does, the emphasis
    # goes with `--plain`.
    assert main(["fleet", "status", "--config", config, "--as", "U0PRIMARY"]) == 0
    status = capsys.readouterr().out
    assert "⚠️ paused by @U0SHADOW: lunch break" in status
    assert not re.search(r"<[@!#]|:[a-z_]+:", status), status
    assert main(["fleet", "status", "--config", config, "--as", "U0PRIMARY", "--plain"]) == 0
    status = capsys.readouterr().out
    assert "[!] paused by @U0SHADOW: lunch break" in status
    assert "  [blue] ci - running * 1.29.4 -> 1.30.2 * step `drain` * run `R" in status
    assert status.isascii()
    assert not re.search(r"<[@!#]|\*\w|:[a-z_]+:", status), status


def test_a_fleet_file_finds_its_plan_beside_it_as_rehearse_fleet_does(
    write_config: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(write_config(fleet_config(tmp_path)))
    team = tmp_path / "team"
    (team / "plans").mkdir(parents=True)
    # A plan of the team's own, in `plans/` beside the fleet file: not in the configuration's templates.
    (team / "plans" / "ours.yaml").write_text(
        (tmp_path / "templates" / "plans" / "tiny.yaml").read_text().replace("name: tiny", "name: ours"),
        encoding="utf-8",
    )
    fleet = team / "ours-fleet.yaml"
    fleet.write_text(
        "name: ours-fleet\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: ours\n"
        "stages:\n  - {name: first, clusters: [ci]}\n",
        encoding="utf-8",
    )
    assert main(["fleet", "validate", str(fleet), "--config", config]) == 0, capsys.readouterr().err
    assert "fleet ours-fleet is valid: 1 stages, 1 clusters" in capsys.readouterr().out
    # Named by name, it is found among the configured fleets only, and its plan must be known there.
    assert main(["fleet", "validate", "ours-fleet", "--config", config]) == 1  # an unknown fleet
    said = capsys.readouterr()
    assert "no fleet plan `ours-fleet`" in said.out + said.err
