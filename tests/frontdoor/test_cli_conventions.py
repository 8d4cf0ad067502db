"""The terminal CLI's conventions (issue 28 items 1–4), through the real `upgrade-bot` process.

Exit statuses the same for every command (0 clean, 1 could not do it, 2 usage or configuration,
3 done and found something); `-o FORMAT` with `--out FILE`; `--manifests -` from standard input;
unknown flags named; the current kube context without a configuration file, state under
$XDG_STATE_HOME; a progress display on a terminal only.
"""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.validation import TOKEN_HINT
from bot.sim import SimCluster
from tests.support.bot_process import bot_command
from tests.support.kubeconfigs import refusing_kubeconfig

REMOVED = (
    "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\n"
    "spec: {maxUnavailable: 1}\n"
)
CLEAN = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\n"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No configuration file, an empty HOME and a state directory of the test's own."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "UPGRADE_BOT_")) and k not in ("KUBECONFIG", "XDG_STATE_HOME")
    }
    env.update(HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"), **extra)
    return env


def cli(
    tmp_path: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=tmp_path,
        env=env if env is not None else _env(tmp_path),
    )


def test_check_over_manifests_exits_0_when_clean_and_3_on_removed_apis(tmp_path: Path) -> None:
    (tmp_path / "clean.yaml").write_text(CLEAN)
    (tmp_path / "old.yaml").write_text(REMOVED)
    clean = cli(tmp_path, "check", "--manifests", "clean.yaml", "--to", "1.25")
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.startswith("Pre-flight check of manifests for 1.25: passed")
    found = cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "-o", "json")
    assert found.returncode == 3, found.stderr
    (finding,) = json.loads(found.stdout)["findings"]
    assert (finding["id"], finding["objects"]) == ("API001", ["old.yaml:1 PodDisruptionBudget shop/web"])
    # The older spelling still works, and YAML is the same data.
    assert cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "--format", "md").returncode == 3
    as_yaml = cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "-o", "yaml")
    assert as_yaml.returncode == 3
    assert "- id: API001\n" in as_yaml.stdout
    assert "failed: true\n" in as_yaml.stdout


def test_check_writes_to_out_file_as_the_terminal_page_says_and_a_bad_path_is_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "old.yaml").write_text(REMOVED)
    shown = cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "-o", "md")
    wrote = cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "-o", "md", "--out", "check.md")
    assert (shown.returncode, wrote.returncode) == (3, 3)
    assert wrote.stdout == ""
    assert wrote.stderr == "wrote the check to check.md\n"
    assert (tmp_path / "check.md").read_text() == shown.stdout
    bad = cli(tmp_path, "check", "--manifests", "old.yaml", "--to", "1.25", "--out", "no/such/dir/check.txt")
    assert bad.returncode == 2
    assert bad.stderr == "upgrade-bot: cannot write no/such/dir/check.txt: No such file or directory\n"


def test_manifests_dash_reads_a_multi_document_stream_from_stdin(tmp_path: Path) -> None:
    stream = f"{CLEAN}---\n{REMOVED}"
    found = cli(tmp_path, "check", "--manifests", "-", "--to", "1.25", "-o", "json", stdin=stream)
    assert found.returncode == 3, found.stderr
    (finding,) = json.loads(found.stdout)["findings"]
    assert finding["objects"] == ["stdin:5 PodDisruptionBudget shop/web"]
    clean = cli(tmp_path, "check", "--manifests", "-", "--to", "1.25", stdin=CLEAN)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "manifests: stdin" in clean.stdout
    # A path that does not exist is a usage error, named.
    missing = cli(tmp_path, "check", "--manifests", "nowhere.yaml", "--to", "1.25")
    assert missing.returncode == 2
    assert "no such file or directory: nowhere.yaml" in missing.stderr


def test_an_unknown_flag_is_named_with_status_2(tmp_path: Path) -> None:
    for args in (["--bogus"], ["check", "--bogus"], ["check", "--manifests", "-", "--bogus"]):
        result = cli(tmp_path, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "unrecognized arguments: --bogus" in result.stderr, args
        assert "required: COMMAND" not in result.stderr
    nothing = cli(tmp_path)
    assert nothing.returncode == 2
    assert "required: COMMAND" in nothing.stderr
    wrong = cli(tmp_path, "check", "--manifests", "x.yaml", "--to", "1.25", "-o", "out.txt")
    assert wrong.returncode == 2
    assert "invalid choice: 'out.txt'" in wrong.stderr


def test_a_configuration_with_several_problems_names_every_one_with_status_2(tmp_path: Path) -> None:
    """It named the first and "(and 2 more problem(s))": fixed one at a time, run again each time."""
    config = tmp_path / "upgrade-bot.yaml"
    config.write_text("slack_bot_token: x\nchannels: 5\nfoo: 1\n")
    result = cli(tmp_path, "check", "--config", str(config))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "upgrade-bot: 3 problems:"
    assert sorted(lines[1:]) == [
        f"  {config}:1: slack_bot_token: unknown key; {TOKEN_HINT}",
        f"  {config}:2: channels: expected a mapping",
        f"  {config}:3: foo: unknown key",
    ]
    one = tmp_path / "one.yaml"
    one.write_text("foo: 1\n")
    result = cli(tmp_path, "check", "--config", str(one))
    assert (result.returncode, result.stderr) == (2, f"upgrade-bot: {one}:1: foo: unknown key\n")


def test_help_lists_the_exit_statuses(tmp_path: Path) -> None:
    for args in (["--help"], ["check", "--help"], ["diff", "--help"], ["rehearse", "--help"]):
        shown = cli(tmp_path, *args)
        assert shown.returncode == 0
        assert "exit status (the same for every command):" in shown.stdout, args
        assert "3  done, and found something: check (Required findings), diff (regressions)" in shown.stdout
    # An AKS rehearsal whose block two people overrode exits 3 for it: the help says why.
    shown = cli(tmp_path, "rehearse", "--help")
    assert (
        " ".join(shown.stdout.split()).count(
            "rehearse (completed with failed steps skipped, steps not all done or past a safeguard people chose — "
            "a cloud's refusal overridden, evidence waived —, or paused)"
        )
        == 1
    )


def test_an_unreachable_cluster_is_status_1_not_a_finding(tmp_path: Path) -> None:
    kubeconfig = refusing_kubeconfig(tmp_path / "down.kubeconfig", context="down", scheme="https")
    env = _env(tmp_path, KUBECONFIG=str(kubeconfig))
    for args in (["check", "--to", "1.25"], ["check", "-o", "json"], ["snapshot", "pre"]):
        result = cli(tmp_path, *args, env=env)
        assert result.returncode == 1, (args, result.stderr)
        assert "cluster down (context down) refused the connection" in result.stderr
        assert "Traceback" not in result.stderr


def test_the_current_kube_context_without_a_configuration_file(
    tmp_path: Path, sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    kubeconfig = sim_kubeconfig(sim_eks)
    # kubectl's $KUBECONFIG: a list, merged; a file in it that does not exist is passed over.
    env = _env(tmp_path, KUBECONFIG=f"{tmp_path / 'absent'}:{kubeconfig}")
    snap = cli(tmp_path, "snapshot", "pre", env=env)
    assert snap.returncode == 0, snap.stderr
    assert "snapshot #1 `pre`: 14 nodes, 61 pods" in snap.stdout
    assert "snapshot `pre` of sim (context sim)" in snap.stderr
    database = tmp_path / "state" / "upgrade-bot" / "upgrade-bot.db"
    with sqlite3.connect(database) as db:
        assert db.execute("select label, cluster from snapshots").fetchall() == [("pre", "sim")]
    assert not (tmp_path / ".data").exists()

    check = cli(tmp_path, "check", "-o", "json", env=env)
    assert check.returncode == 3, check.stderr  # the scenario's planted blockers
    report = json.loads(check.stdout)
    assert report["cluster"] == "sim"
    assert report["failed"] is True
    assert check.stderr == ""  # no progress display off a terminal, nor with -o json
    # No configuration, no store: the check says it read no waivers rather than differ silently.
    assert report["waivers_read"] is False
    assert any(n.startswith("no waivers read: no configuration, so no store") for n in report["notes"])
    text = cli(tmp_path, "check", env=env)
    assert text.stdout.splitlines()[0].endswith("(no waivers read)"), text.stdout

    same = cli(tmp_path, "diff", "pre", env=env)
    assert same.returncode == 0, same.stderr
    assert "regressions: 0" in same.stdout
    unknown = cli(tmp_path, "diff", "nosuch", "post", env=env)
    assert unknown.returncode == 1
    assert "no snapshot labelled `nosuch` on sim; recent snapshots: #1 `pre`" in unknown.stderr
    listed = cli(tmp_path, "exec", "snapshots", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "`pre` sim" in listed.stdout
    # The slash command run from the terminal exits as the terminal command of the same name.
    executed = cli(tmp_path, "exec", "check", env=env)
    assert executed.returncode == 3, executed.stdout + executed.stderr
    assert "FAILED" in executed.stdout
    executed_diff = cli(tmp_path, "exec", "diff pre", env=env)
    assert executed_diff.returncode == 0, executed_diff.stdout + executed_diff.stderr

    # --kubeconfig and --context as kubectl reads them; an unknown context is a usage error.
    flags = cli(tmp_path, "check", "--kubeconfig", str(kubeconfig), "--context", "sim", env=_env(tmp_path))
    assert flags.returncode == 3, flags.stderr
    assert flags.stdout.startswith("Pre-flight check of sim for 1.25: FAILED")
    nope = cli(tmp_path, "check", "--context", "nope", env=env)
    assert nope.returncode == 2
    assert "no context named 'nope' (it has: sim)" in nope.stderr
    # With a configuration file the flag is named as the flag, not as the file's `context:`.
    (tmp_path / "flagged.yaml").write_text(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n")
    flagged = cli(tmp_path, "check", "--config", "flagged.yaml", "--context", "nope", env=env)
    assert (flagged.returncode, flagged.stderr) == (
        2,
        f"upgrade-bot: kubeconfig {kubeconfig}: no context named 'nope' (it has: sim)\n",
    )

    # What needs Slack or a roster still needs the configuration file, and says so.
    start = cli(tmp_path, "exec", "start eks-nodegroups", env=env)
    assert start.returncode == 2
    assert "configuration file not found" in start.stderr


def test_without_a_configuration_file_or_a_kubeconfig_it_says_what_is_missing(tmp_path: Path) -> None:
    result = cli(tmp_path, "snapshot")
    assert result.returncode == 2
    assert "no configuration file (upgrade-bot.yaml) and no kubeconfig at ~/.kube/config" in result.stderr
    assert "--kubeconfig PATH, set KUBECONFIG" in result.stderr


def test_a_snapshot_label_of_two_words_is_status_1_before_the_cluster_is_read(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    """`upgrade-bot snapshot pre pre` stored `pre pre`, which `diff` could name only in quotes."""
    config = write_config(f"clusters:\n  sim: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\n")
    env = _env(tmp_path)
    two = cli(tmp_path, "snapshot", "pre", "pre", "--config", str(config), env=env)
    assert two.returncode == 1
    assert "`snapshot` takes one label, one word: `pre pre` is 2 words; use `pre-pre`" in two.stderr
    assert "snapshot `pre pre` of" not in two.stderr  # refused before the cluster is read
    assert cli(tmp_path, "snapshot", "pre-pre", "--config", str(config), env=env).returncode == 0
    with sqlite3.connect(tmp_path / "data" / "upgrade-bot.db") as db:
        assert db.execute("select label from snapshots").fetchall() == [("pre-pre",)]


def test_diff_of_an_unknown_label_is_status_1_with_a_configuration_file(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    # (Regressions, status 3: tests/acceptance/test_snapshot_and_diff_across_the_eks_upgrade.py.)
    config = write_config(f"clusters:\n  sim: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\n")
    env = _env(tmp_path)
    assert cli(tmp_path, "snapshot", "pre", "--config", str(config), env=env).returncode == 0
    unknown = cli(tmp_path, "diff", "pre", "nosuch", "--config", str(config), env=env)
    assert unknown.returncode == 1
    assert "no snapshot labelled `nosuch`" in unknown.stderr
    same = cli(tmp_path, "diff", "pre", "pre", "--config", str(config), env=env)
    assert same.returncode == 1  # one snapshot with itself compares nothing
    assert "are the same snapshot (#1): nothing to compare" in same.stderr
    assert cli(tmp_path, "snapshot", "post", "--config", str(config), env=env).returncode == 0
    fine = cli(tmp_path, "diff", "pre", "post", "--format", "json", "--config", str(config), env=env)
    assert fine.returncode == 0, fine.stderr
    assert json.loads(fine.stdout)["regressions"] == []


def test_audit_export_takes_the_format_with_o_and_the_file_with_out(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    config = str(write_config())
    env = _env(tmp_path)
    assert cli(tmp_path, "exec", "whoami", "--as", "U0PRIMARY", "--config", config, env=env).returncode == 0
    as_json = cli(tmp_path, "audit", "export", "-o", "json", "--config", config, env=env)
    assert as_json.returncode == 0, as_json.stderr
    assert [(r["user_id"], r["subcommand"]) for r in json.loads(as_json.stdout)] == [("U0PRIMARY", "whoami")]
    assert not (tmp_path / "json").exists()
    out = tmp_path / "audit.csv"
    written = cli(tmp_path, "audit", "export", "--out", str(out), "--config", config, env=env)
    assert written.returncode == 0, written.stderr
    assert out.read_text().startswith("at_utc,user_id")


def _on_a_terminal(tmp_path: Path, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run with standard error on a pseudo-terminal: (status, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    shown = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**env, "COLUMNS": "120", "TERM": "xterm"}
    try:
        done = subprocess.run(
            [*bot_command(), *args],
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=180,
            check=False,
            cwd=tmp_path,
            env=env,
        )
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return done.returncode, done.stdout, shown.decode(errors="replace")


@pytest.mark.parametrize("command", [["snapshot", "pre"], ["check"]])
def test_a_terminal_shows_progress_with_the_totals(
    tmp_path: Path,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    command: list[str],
) -> None:
    env = _env(tmp_path, KUBECONFIG=str(sim_kubeconfig(sim_eks)))
    status, out, shown = _on_a_terminal(tmp_path, command, env)
    assert status in (0, 3), shown
    assert "reading pods" in shown
    assert "61/61" in shown  # the pods, of the total the list reported
    assert "reading" not in out  # the display is on standard error only
    # With a machine-readable output the terminal stays quiet.
    if command == ["check"]:
        status, out, shown = _on_a_terminal(tmp_path, ["check", "-o", "json"], env)
        assert status == 3
        assert "reading" not in shown
        assert json.loads(out)["cluster"] == "sim"


def test_exec_exits_2_for_what_the_command_was_given_wrong(
    tmp_path: Path,
    write_config: Callable[..., Path],
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> None:
    """terminal.md: 2 is a usage error or an invalid plan. A misspelt action argument, a bad value,
    a missing `--reason` and an invalid plan exited 1 ("could not do it")."""
    team = tmp_path / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "bad.yaml").write_text("name: bad\ncluster: sim\nsteps: []\n")
    config = str(
        write_config(
            f"clusters:\n  sim: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\nchannels: {{operations: C0OPS}}\n"
            f"templates_dir: {team}\n"
        )
    )
    env = _env(tmp_path)
    for text in (
        "action drain nodgroup=others --reason x",
        "action drain nodegroup=others timeout=banana --reason x",
        "action cordon node=ip-1",
        "abort",
        "plan load bad",
    ):
        done = cli(tmp_path, "exec", text, "--as", "U0PRIMARY", "--config", config, env=env)
        assert done.returncode == 2, (text, done.stdout, done.stderr)


def test_exec_and_the_verb_exit_2_alike_when_the_cluster_is_not_named_or_unknown(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    """A cluster not named or unknown is the input's fault: `exec "check"` exited 1 where `upgrade-bot check` exits 2."""
    config = str(
        write_config(
            "clusters:\n  a: {kubeconfig: /dev/null}\n  b: {kubeconfig: /dev/null}\n"
            "channels: {operations: C0OPS}\n"
        )
    )
    env = _env(tmp_path)
    for words, reason in (
        ([], "which cluster? use --cluster with one of: a, b"),
        (["--cluster", "zz"], "no cluster named `zz`; configured clusters: a, b"),
    ):
        verb = cli(tmp_path, "check", *words, "--config", config, env=env)
        assert (verb.returncode, verb.stderr) == (2, f"upgrade-bot: {reason}\n")
        for command in ("check", "snapshot"):
            done = cli(
                tmp_path,
                "exec",
                " ".join([command, *words]),
                "--as",
                "U0PRIMARY",
                "--config",
                config,
                env=env,
            )
            assert done.returncode == 2, (command, done.stdout, done.stderr)
            assert done.stdout.startswith(f"⚠️ {reason}\n")
