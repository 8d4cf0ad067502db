"""Configuration: every problem exits 2 with one line naming the key or the YAML line."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.settings import parse_settings, read_check_ignores
from tests.support.bot_process import bot_command


def run_bot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
    return subprocess.run(
        [*bot_command(), *args], capture_output=True, text=True, env=base | (env or {}), timeout=60
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_missing_file_exits_2_naming_the_path(tmp_path: Path) -> None:
    line = one_line_error(run_bot("exec", "help", "--config", str(tmp_path / "missing.yaml")))
    assert "missing.yaml" in line
    assert "not found" in line


def test_bad_yaml_exits_2_naming_the_line(write_config: Callable[..., Path]) -> None:
    path = write_config("clusters:\n  prod:\n    kubeconfig: [unclosed\n")
    line = one_line_error(run_bot("exec", "help", "--config", str(path)))
    assert f"{path}:" in line
    assert "invalid YAML" in line


def test_an_unknown_key_exits_2_naming_key_and_line(write_config: Callable[..., Path]) -> None:
    path = write_config("clusters:\n  prod:\n    kubeconfg: ./kube\n")
    result = run_bot("exec", "help", "--config", str(path))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lineno = path.read_text().splitlines().index("    kubeconfg: ./kube") + 1
    # Every problem, one a line: the typo, and so the kubeconfig missing from `prod`.
    lines = result.stderr.splitlines()
    assert lines[0] == "upgrade-bot: 2 problems:", result.stderr
    assert any(
        f":{lineno}: clusters.prod.kubeconfg: unknown key (did you mean 'kubeconfig'?)" in line
        for line in lines
    ), result.stderr


def test_a_roster_role_a_letter_from_a_known_one_is_a_typo_and_a_team_s_own_role_is_welcome(
    write_config: Callable[..., Path],
) -> None:
    path = write_config(
        "roster:\n  primray: [U0PRIMARY]\n  shadow: [U0SHADOW]\n  mesh: [U0MESH]\n", roster=False
    )
    line = one_line_error(run_bot("exec", "help", "--config", str(path)))
    assert ":3: roster.primray: not a role the bot knows; did you mean `primary`?" in line
    fine = write_config("roster:\n  primary: [U0PRIMARY]\n  mesh: [U0MESH]\n  dba: [U0DBA]\n", roster=False)
    assert parse_settings(fine.read_text(), source=fine, env={}).roster["dba"] == ("U0DBA",)


def test_a_missing_secret_exits_2_naming_the_variable(write_config: Callable[..., Path]) -> None:
    line = one_line_error(
        run_bot(
            "run",
            "--http",
            "--port",
            "0",
            "--config",
            str(write_config()),
            env={"SLACK_SIGNING_SECRET": "x" * 20},
        )
    )
    assert "SLACK_BOT_TOKEN is not set" in line


def test_socket_mode_needs_the_app_token(write_config: Callable[..., Path]) -> None:
    line = one_line_error(
        run_bot("run", "--config", str(write_config()), env={"SLACK_BOT_TOKEN": "xoxb-1-2"})
    )
    assert "SLACK_APP_TOKEN" in line


def test_the_config_file_can_come_from_the_environment(write_config: Callable[..., Path]) -> None:
    result = run_bot("exec", "help", env={"UPGRADE_BOT_CONFIG": str(write_config())})
    assert result.returncode == 0, result.stderr
    assert "/upgrade whoami" in result.stdout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("roster:\n  primary: [alice]\n", "roster.primary: 'alice' is not a Slack user ID"),
        ("timezone: Mars/Olympus\n", "timezone: unknown time zone"),
        ("channels:\n  announcements: general\n", "'general' is not a Slack channel ID"),
        ("clusters:\n  prod:\n    context: x\n", "clusters.prod.kubeconfig: missing key"),
        ("clusters:\n  prod:\n    in_cluster: true\n    kubeconfig: x\n", "either in_cluster"),
        ("workers: 0\n", "workers: expected a whole number from 1 to 64"),
        ("- a list\n", "top level: expected a mapping"),
    ],
)
def test_invalid_values_are_named(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, source=Path("cfg.yaml"), env={})
    assert expected in caught.value.user_message
    assert caught.value.user_message.startswith("cfg.yaml:")


EXAMPLE = Path(__file__).resolve().parent.parent / "upgrade-bot.example.yaml"


def _problems(text: str) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text, source=EXAMPLE, env={"SLACK_BOT_TOKEN": "xoxb-a-b"})
    return tuple(p.removeprefix(f"{EXAMPLE}:") for p in caught.value.problems)


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        # A cluster's last key indented as the next cluster's name: "expected a mapping" and the
        # kubeconfig that "cluster" lacked.
        (
            ("    request_timeout: 10", "  request_timeout: 10"),
            "13: clusters.request_timeout: indented as a cluster's name, but it is a key of a cluster: "
            "indent it under `prod` (line 10)",
        ),
        # An only key so indented: `staging` empty and its kubeconfig missing, twice over.
        (
            ("    in_cluster: true", "  in_cluster: true"),
            "18: clusters.in_cluster: indented as a cluster's name, but it is a key of a cluster: "
            "indent it under `staging` (line 17)",
        ),
        (
            (
                "    in_cluster: true",
                "  in_cluster: true\n  request_timeout: 3\n  provider:\n    eks: {name: s}",
            ),
            "18: clusters.in_cluster: indented as a cluster's name (and request_timeout, provider after "
            "it), but these are keys of a cluster: indent them under `staging` (line 17)",
        ),
        # A value refused is not a key missing as well.
        (
            ("    in_cluster: true", "    in_cluster: 5"),
            "18: clusters.staging.in_cluster: expected true or false",
        ),
        (
            ("    kubeconfig: ~/.kube/config", "    kubeconfig: [a]"),
            "11: clusters.prod.kubeconfig: expected a string",
        ),
    ],
)
def test_one_slip_in_the_clusters_is_one_problem_that_names_it(slip: tuple[str, str], problem: str) -> None:
    text = EXAMPLE.read_text()
    assert slip[0] in text
    assert _problems(text.replace(slip[0], slip[1], 1)) == (problem,)


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        # `operations:` at column 1 under `channels:` was "unknown key (did you mean 'actions'?)".
        (
            ("  operations: C0UPGRADES", "operations: C0UPGRADES"),
            "23: operations: `operations` is a key of `channels:`: indent it under `channels:` (line 21)",
        ),
        (
            ("  grace: 30m", "grace: 30m"),
            "56: grace: `grace` is a key of `announcements:`: indent it under `announcements:` (line 54)",
        ),
        # A key of a list's entry: said under the entry above it (`zone` is a freeze's too).
        (
            ("    zone: Asia/Tokyo", "zone: Asia/Tokyo"),
            "46: zone: `zone` is a key of a window under `windows:`: indent it under the window above it (line 43)",
        ),
        # ... and not again as the key the freeze then lacks.
        (
            ("    reason: year-end change freeze", "reason: year-end change freeze"),
            "50: reason: `reason` is a key of a freeze under `freezes:`: indent it under the freeze above it "
            "(line 48)",
        ),
        # A cluster's only key: not also "clusters.staging: missing value".
        (
            ("    in_cluster: true", "in_cluster: true"),
            "18: in_cluster: `in_cluster` is a key of a cluster under `clusters:`: indent it under `staging` "
            "(line 17)",
        ),
    ],
)
def test_a_key_of_a_section_written_at_the_top_level_is_one_problem_saying_where_it_goes(
    slip: tuple[str, str], problem: str
) -> None:
    text = EXAMPLE.read_text()
    assert slip[0] in text
    assert _problems(text.replace(slip[0], slip[1], 1)) == (problem,)


def test_a_key_of_a_section_the_file_lacks_is_said_as_that_section_s() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings("timezone: UTC\nlease_seconds: 30\n", source=Path("cfg.yaml"), env={})
    assert caught.value.problems == (
        "cfg.yaml:2: lease_seconds: `lease_seconds` is a key of `leader:`, not a key of the top level",
    )


def test_a_yaml_slip_in_the_configuration_exits_2_in_plain_words(write_config: Callable[..., Path]) -> None:
    path = write_config("channels:\n  announcements: C0ANN\n   operations: C0OPS\n")
    line = one_line_error(run_bot("exec", "help", "--config", str(path)))
    lineno = path.read_text().splitlines().index("   operations: C0OPS") + 1
    assert line == (
        f"upgrade-bot: {path}:{lineno}:4: invalid YAML: `operations:` is indented deeper than `announcements:` "
        f"above it (line {lineno - 1}), whose value is already on that line: a key indented 1 space too far?"
    )


def test_a_key_of_channels_indented_too_little_exits_2_saying_where_it_goes(
    write_config: Callable[..., Path],
) -> None:
    path = write_config("channels:\n  announcements: C0ANN\noperations: C0OPS\n")
    line = one_line_error(run_bot("exec", "help", "--config", str(path)))
    lines = path.read_text().splitlines()
    assert line == (
        f"upgrade-bot: {path}:{lines.index('operations: C0OPS') + 1}: operations: `operations` is a key of "
        f"`channels:`: indent it under `channels:` (line {lines.index('channels:') + 1})"
    )


def test_a_cluster_named_as_a_key_of_a_cluster_is_a_cluster_and_a_scalar_one_is_one_problem() -> None:
    settings = parse_settings("clusters:\n  labels:\n    in_cluster: true\n", source=Path("cfg.yaml"), env={})
    assert list(settings.clusters) == ["labels"]
    with pytest.raises(ConfigError) as caught:
        parse_settings("clusters:\n  prod: ./kubeconfig\n  lab:\n", source=Path("cfg.yaml"), env={})
    assert caught.value.problems == (
        "cfg.yaml:2: clusters.prod: expected a mapping",
        "cfg.yaml:3: clusters.lab: missing value",
    )


def test_the_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parent.parent / "upgrade-bot.example.yaml"
    settings = parse_settings(example.read_text(), source=example, env={"SLACK_BOT_TOKEN": "xoxb-a-b"})
    assert set(settings.clusters) == {"prod", "staging"}
    assert settings.roster["coordinator"] == ("S0SRELEADS",)
    assert "xoxb" not in repr(settings)


def test_rules_files_come_after_the_shipped_rules_and_must_exist(tmp_path: Path) -> None:
    from bot.resources import BUILTIN_RULES

    (tmp_path / "team.yaml").write_text("rules: []\n")
    settings = parse_settings("rules_files: [team.yaml]\n", source=tmp_path / "cfg.yaml", env={})
    assert settings.rules_paths() == [BUILTIN_RULES, tmp_path / "team.yaml"]
    with pytest.raises(ConfigError, match=r"cfg.yaml:1: rules_files\[0\]: .*missing.yaml is not a file"):
        parse_settings("rules_files: [missing.yaml]\n", source=tmp_path / "cfg.yaml", env={})


def test_without_a_configuration_file_the_state_goes_to_the_xdg_state_home(tmp_path: Path) -> None:
    from bot.settings import cluster_name_of, kube_context_settings, state_dir

    assert state_dir({"XDG_STATE_HOME": str(tmp_path), "HOME": "/nowhere"}) == tmp_path / "upgrade-bot"
    # The XDG spec ignores a relative path: the default under HOME applies.
    assert (
        state_dir({"XDG_STATE_HOME": "rel", "HOME": str(tmp_path)}) == tmp_path / ".local/state/upgrade-bot"
    )
    assert cluster_name_of("kind-kind") == "kind-kind"
    assert (
        cluster_name_of("arn:aws:eks:eu-west-1:1234:cluster/Prod")
        == "arn-aws-eks-eu-west-1-1234-cluster-prod"
    )
    assert cluster_name_of("@@") == "default"
    settings = kube_context_settings(
        kubeconfig="/a:/b", context="admin@prod", env={"XDG_STATE_HOME": str(tmp_path)}
    )
    (cluster,) = settings.clusters.values()
    assert (cluster.name, str(cluster.kubeconfig), cluster.context) == ("admin-prod", "/a:/b", "admin@prod")
    assert settings.database_url == f"sqlite:///{tmp_path / 'upgrade-bot' / 'upgrade-bot.db'}"
    assert settings.roster == {}
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(ConfigError, match="cannot be created"):
        kube_context_settings(kubeconfig="/a", context="c", env={"XDG_STATE_HOME": str(blocked)})


def test_checks_ignore_lists_reviewed_exceptions_with_their_reason() -> None:
    settings = parse_settings(
        "checks:\n  ignore:\n"
        "    - {finding: API001, objects: [kube-system/pod-identity-webhook], reason: EKS manages it}\n"
        "    - {finding: RES001, reason: singletons by design}\n",
        source=None,
        env={},
    )
    first, second = settings.check_ignores
    assert (first.finding, first.objects, first.reason, first.label) == (
        "API001",
        ("kube-system/pod-identity-webhook",),
        "EKS manages it",
        "checks.ignore[0]",
    )
    assert (second.finding, second.objects) == ("RES001", ())


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("checks:\n  ignore: {finding: API001}\n", "checks.ignore: expected a list"),
        ("checks:\n  ignore:\n    - {finding: API001}\n", "checks.ignore[0].reason: missing: say why"),
        ("checks:\n  ignore:\n    - {reason: x}\n", "checks.ignore[0].finding: missing"),
        (
            "checks:\n  ignore:\n    - {finding: api-1, reason: x}\n",
            "checks.ignore[0].finding: 'api-1' is not a finding id",
        ),
        (
            "checks:\n  ignore:\n    - {finding: API001, reason: x, objects: a/b}\n",
            "checks.ignore[0].objects: expected a list",
        ),
        (
            "checks:\n  ignore:\n    - {finding: API001, reason: x, until: 2027}\n",
            "checks.ignore[0].until: unknown key",
        ),
        ("checks:\n  ignores: []\n", "checks.ignores: unknown key"),
    ],
)
def test_a_bad_checks_ignore_entry_names_its_key(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        parse_settings(text, source=None, env={})


def test_checks_ignore_takes_every_id_a_check_or_rule_reports_as_waive_does(tmp_path: Path) -> None:
    # The ids issue 40 found `waive` refusing, a shipped rule's, and a team rule's from rules_files.
    rules = tmp_path / "team-rules.yaml"
    rules.write_text(
        "rules:\n  - id: TEAM001\n    title: t\n    match: {containers: [x], not_ready: true}\n"
        "    explanation: e\n    remediation: r\n    links: [https://example.com/r]\n",
        encoding="utf-8",
    )
    ids = ("EKS001", "CRD002", "CERT004", "CNI001", "CAP001", "ISTIO002", "CNI002", "KI004", "TEAM001")
    text = f"rules_files: [{rules}]\nchecks:\n  ignore:\n" + "".join(
        f"    - {{finding: {i}, reason: reviewed}}\n" for i in ids
    )
    assert tuple(c.finding for c in parse_settings(text, source=None, env={}).check_ignores) == ids


def test_checks_ignore_refuses_an_id_nothing_reports_naming_the_ids_it_may_mean(tmp_path: Path) -> None:
    # An ignore entry for a typo accepts nothing: the check keeps failing with nobody knowing why.
    text = "checks:\n  ignore:\n    - {finding: API001, reason: x}\n    - {finding: EKS011, reason: x}\n"
    with pytest.raises(ConfigError) as raised:
        parse_settings(text, source=None, env={})
    assert "checks.ignore[1].finding: no check or rule reports EKS011 (did you mean EKS010 or EKS001" in str(
        raised.value
    )
    assert "checks.ignore[0]" not in str(raised.value)
    # A team rule's id is known only with its rules file listed.
    with pytest.raises(ConfigError, match=re.escape("no check or rule reports TEAM001")):
        parse_settings("checks:\n  ignore:\n    - {finding: TEAM001, reason: x}\n", source=None, env={})
    # The rehearsal reads the ignore list alone, with the same registry.
    config = tmp_path / "upgrade-bot.yaml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(
        ConfigError, match=re.escape("checks.ignore[1].finding: no check or rule reports EKS011")
    ):
        read_check_ignores(config)
