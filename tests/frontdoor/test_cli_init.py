"""`upgrade-bot init`: the annotated example configuration (or the Slack app's manifest), written
where a new team starts, through the real `upgrade-bot` process; and the copies the package ships
stay the repository's files."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bot.resources import EXAMPLE_CONFIG, SLACK_MANIFEST
from bot.settings import load_settings
from tests.support.bot_process import run_bot

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "upgrade-bot.example.yaml").read_text(encoding="utf-8")
MANIFEST = (ROOT / "slack-app-manifest.yaml").read_text(encoding="utf-8")
#: What `init` writes into a file: the example, its first line naming the schema written beside it
#: (a plain `pip install` has no `schemas/` folder for the repository's line to point at).
WRITTEN = EXAMPLE.replace("$schema=schemas/upgrade-bot.schema.json", "$schema=upgrade-bot.schema.json", 1)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}


def test_the_package_ships_the_repositorys_example_and_slack_manifest() -> None:
    assert EXAMPLE_CONFIG.read_text(encoding="utf-8") == EXAMPLE
    assert SLACK_MANIFEST.read_text(encoding="utf-8") == MANIFEST


def test_init_writes_the_example_which_loads_and_never_overwrites_without_force(tmp_path: Path) -> None:
    missing = run_bot("exec", "help", cwd=tmp_path, env=_env())
    assert missing.returncode == 2
    assert "`upgrade-bot init` writes an example to start from" in missing.stderr

    made = run_bot("init", cwd=tmp_path, env=_env())
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("wrote upgrade-bot.yaml, the example team's configuration")
    written = tmp_path / "upgrade-bot.yaml"
    assert written.read_text(encoding="utf-8") == WRITTEN != EXAMPLE
    assert written.read_text(encoding="utf-8").startswith(
        "# yaml-language-server: $schema=upgrade-bot.schema.json\n"
    )
    # The schema it names is there, the installed bot's own (what `schemas/` has in a checkout).
    schema = json.loads((tmp_path / "upgrade-bot.schema.json").read_text(encoding="utf-8"))
    assert schema == json.loads((ROOT / "schemas" / "upgrade-bot.schema.json").read_text(encoding="utf-8"))
    # It points at what an installed copy has (no docs/ folder, no repository files).
    assert "Beside it, upgrade-bot.schema.json: every key with what it means, its default and" in made.stdout
    assert "`upgrade-bot init --slack-manifest` writes its manifest" in made.stdout
    assert ".md" not in made.stdout
    assert load_settings(written, {}).roster  # the example is a configuration the bot reads

    written.write_text("data_dir: mine\n", encoding="utf-8")
    again = run_bot("init", cwd=tmp_path, env=_env())
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr == "upgrade-bot: upgrade-bot.yaml already exists; pass --force to replace it\n"
    assert written.read_text(encoding="utf-8") == "data_dir: mine\n"
    forced = run_bot("init", "--force", cwd=tmp_path, env=_env())
    assert forced.returncode == 0, forced.stderr
    assert written.read_text(encoding="utf-8") == WRITTEN


def test_init_into_a_folder_to_stdout_and_where_it_cannot_write(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    into = run_bot("init", "--out", "conf", cwd=tmp_path, env=_env())
    assert into.returncode == 0, into.stderr
    assert (tmp_path / "conf" / "upgrade-bot.yaml").read_text(encoding="utf-8") == WRITTEN
    assert (tmp_path / "conf" / "upgrade-bot.schema.json").is_file()
    printed = run_bot("init", "--out", "-", cwd=tmp_path, env=_env())
    assert (printed.returncode, printed.stdout) == (0, EXAMPLE)
    nowhere = run_bot("init", "--out", "missing/upgrade-bot.yaml", cwd=tmp_path, env=_env())
    assert nowhere.returncode == 1
    assert nowhere.stderr == (
        "upgrade-bot: cannot write missing/upgrade-bot.yaml: No such file or directory\n"
    )
    assert "Traceback" not in nowhere.stderr


def test_init_writes_the_slack_apps_manifest_the_package_ships(tmp_path: Path) -> None:
    made = run_bot("init", "--slack-manifest", cwd=tmp_path, env=_env())
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(
        "wrote slack-app-manifest.yaml, the Slack app's manifest: at api.slack.com/apps, Create New App"
    )
    assert (tmp_path / "slack-app-manifest.yaml").read_text(encoding="utf-8") == MANIFEST
    # Only the manifest: no configuration, no schema.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slack-app-manifest.yaml"]
    again = run_bot("init", "--slack-manifest", cwd=tmp_path, env=_env())
    assert again.returncode == 2
    assert again.stderr == "upgrade-bot: slack-app-manifest.yaml already exists; pass --force to replace it\n"
    printed = run_bot("init", "--slack-manifest", "--out", "-", cwd=tmp_path, env=_env())
    assert (printed.returncode, printed.stdout) == (0, MANIFEST)
