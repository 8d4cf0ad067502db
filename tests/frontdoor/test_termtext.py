"""Terminal output for people (issue 40 items 10 and 5e): `exec` and `rehearse` print Slack's
markup rendered — people by their Slack display names (users.info through the real slack_sdk client
against the loopback stub, cached in the store), dates in local time, emoji as characters — or
plain ASCII with `--plain`; and `completion bash|zsh` (shtab) completes the verbs in a real bash."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.frontdoor.termtext import EMOJI, TerminalText, ascii_text, mentioned
from tests.support.bot_process import bot_command
from tests.support.slack_stub import SlackStub

REPO = Path(__file__).resolve().parents[2]
# 2026-12-01 05:00 UTC, as the bot's `when` filter writes it for a Tokyo window.
DATE = "<!date^1796101200^{date_short_pretty} {time}|2026-12-01 14:00 Asia/Tokyo (05:00 UTC)>"


def test_dates_show_in_the_terminals_zone_not_the_fallbacks() -> None:
    assert (
        TerminalText(zone=ZoneInfo("Europe/Berlin"))(f"window opens {DATE}")
        == "window opens 2026-12-01 06:00 CET"
    )
    assert TerminalText(zone=ZoneInfo("Asia/Tokyo"))(DATE) == "2026-12-01 14:00 JST"


def test_people_show_by_name_when_known_else_by_the_mentions_label_or_id() -> None:
    render = TerminalText(names={"U0PRIMARY": "Priya"})
    assert render("<@U0PRIMARY> and <@U0SHADOW> and <@U0X|sam> and <!subteam^S0LEADS>") == (
        "@Priya and @U0SHADOW and @sam and @S0LEADS"
    )
    assert mentioned("<@U0PRIMARY> <@U0SHADOW> <@U0PRIMARY> <!subteam^S0LEADS>") == ["U0PRIMARY", "U0SHADOW"]


def test_links_channels_specials_and_escapes_read_as_text() -> None:
    render = TerminalText()
    assert render("<https://runbook.example/x|the runbook> in <#C0OPS|ops> <!here> a &lt;b&gt; &amp;") == (
        "the runbook (https://runbook.example/x) in #ops @here a <b> &"
    )
    assert render("<https://runbook.example/x> <#C0OPS>") == "https://runbook.example/x #C0OPS"


def test_emoji_are_characters_or_with_plain_ascii_words() -> None:
    assert TerminalText()(":white_check_mark: done :tada: :not_an_emoji_we_use:") == (
        "✅ done 🎉 :not_an_emoji_we_use:"
    )
    plain = TerminalText(plain=True)(":warning: *Completed with 4 failed steps skipped* — 1.24 → 1.25 …")
    assert plain == "[!] Completed with 4 failed steps skipped - 1.24 -> 1.25 ..."
    assert ascii_text("──── ↳ ✅ naïve") == "---- -> [ok] na?ve"


def test_plain_text_drops_slacks_emphasis_but_not_names_or_arithmetic() -> None:
    """`rehearse --plain` printed "[x] *`checks` failed* in run …": Slack's bold, not plain text."""
    plain = TerminalText(plain=True)
    assert plain(":x: *`checks` failed* in run R1 · _lunch with <@U0SHADOW>_") == (
        "[x] `checks` failed in run R1 * lunch with @U0SHADOW"
    )
    assert plain("*Fleet _agora_ paused* by <@U0SHADOW>") == "Fleet agora paused by @U0SHADOW"
    # Not emphasis: names with underscores, a glob, a product, a bullet.
    kept = "on_failure: abort · snake_case_name · kube-* · 2 * 3 · __init__"
    assert plain(kept) == kept.replace("·", "*")
    # Without --plain the terminal keeps Slack's marks as they read: emphasis.
    assert TerminalText()("*paused*") == "*paused*"


def test_every_emoji_the_templates_use_has_a_character_and_an_ascii_word() -> None:
    used = {
        code
        for path in (REPO / "templates").rglob("*.j2")
        for code in re.findall(r":([a-z_]+):", path.read_text(encoding="utf-8"))
    }
    # The bot's own texts too (the fleet card's ":point_right:", a PR's ":large_purple_circle:"):
    # shortcodes of two words or more, which no other colon-delimited text in the code has.
    in_code = {
        code
        for path in (REPO / "bot").rglob("*.py")
        for code in re.findall(r"(?<![\w:]):([a-z]+(?:_[a-z]+)+):(?!\w)", path.read_text(encoding="utf-8"))
    }
    assert {"point_right", "large_purple_circle"} <= in_code, "the pattern is wrong"
    used |= in_code
    assert used, "no emoji found: the pattern is wrong"
    assert sorted(used - set(EMOJI)) == []
    for char, word in EMOJI.values():
        assert not char.isascii()
        assert word.isascii()
        assert word


def _exec(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "exec", "--config", str(config), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )


def test_exec_names_people_by_their_slack_display_name_looked_up_once_and_cached(
    write_config: Callable[..., Path], slack_stub: SlackStub, bot_env: dict[str, str]
) -> None:
    slack_stub.users["U0PRIMARY"] = {"id": "U0PRIMARY", "name": "priya", "profile": {"display_name": "Priya"}}
    config = write_config()

    first = _exec(config, bot_env, "--as", "U0PRIMARY", "whoami")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "@Priya holds: primary"
    assert len(slack_stub.calls_to("users.info")) == 1

    # A rename in Slack shows after the cache's day; until then no second users.info.
    slack_stub.users["U0PRIMARY"]["profile"]["display_name"] = "Priya R."
    again = _exec(config, bot_env, "--as", "U0PRIMARY", "whoami")
    assert again.stdout.strip() == "@Priya holds: primary"
    assert len(slack_stub.calls_to("users.info")) == 1

    # Without Slack (no token), the cache still names her; someone never looked up stays an id.
    offline = {k: v for k, v in bot_env.items() if not k.startswith("SLACK_")}
    assert _exec(config, offline, "--as", "U0PRIMARY", "whoami").stdout.strip() == "@Priya holds: primary"
    assert _exec(config, offline, "--as", "U0SHADOW", "whoami").stdout.strip() == "@U0SHADOW holds: shadow"


def test_exec_plain_prints_ascii(write_config: Callable[..., Path], bot_env: dict[str, str]) -> None:
    offline = {k: v for k, v in bot_env.items() if not k.startswith("SLACK_")}
    result = _exec(write_config(), offline, "--plain", "--as", "U0PRIMARY", "help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii()
    assert result.stdout.strip()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts_name_every_verb(shell: str) -> None:
    result = subprocess.run(
        [*bot_command(), "completion", shell], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for verb in ("rehearse", "exec", "check", "completion"):
        assert verb in result.stdout
    # `sim …` and `snapshot export` parse their own arguments: their subcommands and options too.
    assert "_shtab_upgrade_bot_sim_serve_option" in result.stdout
    assert "_shtab_upgrade_bot_sim_scenario_option" in result.stdout
    assert "_shtab_upgrade_bot_snapshot_export_option" in result.stdout
    assert "--from-snapshot" in result.stdout


def test_bash_completes_verbs_and_options_with_the_generated_script(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = subprocess.run(
        [*bot_command(), "completion", "bash"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    (tmp_path / "upgrade-bot.bash").write_text(script)
    probe = (
        f"source {tmp_path / 'upgrade-bot.bash'}\n"
        "complete -p upgrade-bot >/dev/null || exit 9\n"
        "fn=$(complete -p upgrade-bot | sed -E 's/.*-F ([^ ]+).*/\\1/')\n"
        'ask() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMP_LINE="$*";'
        ' COMP_POINT=${#COMP_LINE}; COMPREPLY=(); "$fn" upgrade-bot "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}";'
        " printf '%s\\n' \"${COMPREPLY[@]}\"; echo --; }\n"
        "ask upgrade-bot reh\n"
        "ask upgrade-bot rehearse --pl\n"
        "ask upgrade-bot completion ''\n"
        # The commands that parse their own arguments complete as the others do.
        "ask upgrade-bot sim ''\n"
        "ask upgrade-bot sim serve --p\n"
        "ask upgrade-bot sim scenario --f\n"
        "ask upgrade-bot snapshot ''\n"
        "ask upgrade-bot snapshot export -o ''\n"
        "ask upgrade-bot snapshot pre --cl\n"
    )
    result = subprocess.run([bash, "-c", probe], capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    verbs, options, shells, sim, serve, scenario, snapshot, export, labelled, _ = result.stdout.split("--\n")
    assert verbs.split() == ["rehearse", "rehearse-fleet"]
    assert options.split() == ["--plain"]
    assert shells.split() == ["bash", "zsh"]
    assert sim.split() == ["serve", "scenarios", "scenario", "fidelity"]
    assert serve.split() == ["--port"]
    assert scenario.split() == ["--from-snapshot"]
    assert snapshot.split() == ["export"]
    assert export.split() == ["json", "yaml", "wide", "kubectl-wide"]
    assert labelled.split() == ["--cluster"]
