"""`check --to` and `plan draft --to` refuse a version that does not exist before reading the
cluster: `--to 1.99999999999999999999999` ran a full check (issue 38, item 5)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.core.checks.apis import schema_data
from bot.core.kube.versions import MINORS_AHEAD, NEWEST_KNOWN_MINOR
from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.bot_process import bot_command
from tests.support.kubeconfigs import refusing_kubeconfig

NEWEST = NEWEST_KNOWN_MINOR + MINORS_AHEAD
NOT_VERSIONS = ["1.99999999999999999999999", "2.0", "1.25.100", "1.25 please", "١.٢٥", "v", "1.025"]


@pytest.fixture
def config(write_config: Callable[..., Path], tmp_path: Path) -> Path:
    # A cluster that refuses connections: a target that got past the check would say so instead.
    kubeconfig = refusing_kubeconfig(tmp_path / "kubeconfig", context="dead-ctx")
    return write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, request_timeout: 2}}\n")


@pytest.fixture
def services(config: Path) -> Iterator[Services]:
    built = assemble(load_settings(config, {}), with_slack=False)
    yield built
    built.close()


def test_the_bots_newest_known_minor_is_its_api_datas() -> None:
    assert schema_data().last == NEWEST_KNOWN_MINOR


@pytest.mark.parametrize("version", [*NOT_VERSIONS, f"1.{NEWEST + 1}"])
@pytest.mark.parametrize("command", ["check --to {}", "plan draft --to {}"])
def test_a_version_that_does_not_exist_is_refused_before_the_cluster_is_read(
    services: Services, version: str, command: str
) -> None:
    out = services.router.handle(
        CommandRequest(text=command.format(f"'{version}'"), user_id="U0PRIMARY", source="terminal")
    )
    assert not out.ok
    assert f"--to '{version}'" in out.rendered.text
    assert f"this bot knows 1.0 to 1.{NEWEST}" in out.rendered.text or (
        f"this bot knows Kubernetes 1.0 to 1.{NEWEST}" in out.rendered.text
    )
    assert "refused the connection" not in out.rendered.text


@pytest.mark.parametrize("version", ["1.30", "v1.29.4-eks-1", f"1.{NEWEST}"])
def test_a_version_that_exists_goes_on_to_the_cluster(services: Services, version: str) -> None:
    out = services.router.handle(
        CommandRequest(text=f"check --to {version}", user_id="U0PRIMARY", source="terminal")
    )
    assert "refused the connection" in out.rendered.text


def test_the_terminal_check_refuses_the_issues_version_in_one_line(config: Path) -> None:
    result = subprocess.run(
        [*bot_command(), "check", "--to", "1.99999999999999999999999", "--config", str(config)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"upgrade-bot: --to '1.99999999999999999999999' does not exist: this bot knows Kubernetes 1.0 to 1.{NEWEST}"
    )


@pytest.fixture
def on_the_sim(
    write_config: Callable[..., Path], sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> Path:
    """A configuration whose one cluster is the sim, on v1.24.17-eks-10df0b3."""
    return write_config(f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\n")


def test_a_minor_older_than_the_cluster_s_is_refused_and_the_minor_it_is_on_is_said(on_the_sim: Path) -> None:
    built = assemble(load_settings(on_the_sim, {}), with_slack=False)
    try:
        older = built.router.handle(
            CommandRequest(text="check --to 1.20", user_id="U0PRIMARY", source="terminal")
        )
        same = built.router.handle(
            CommandRequest(text="check --to 1.24", user_id="U0PRIMARY", source="terminal")
        )
        next_one = built.router.handle(
            CommandRequest(text="check --to 1.25", user_id="U0PRIMARY", source="terminal")
        )
    finally:
        built.close()
    assert not older.ok
    assert (
        "the cluster is on v1.24.17-eks-10df0b3 already: --to 1.20 is an older minor "
        "(check 1.24, the minor it is on, or a newer one)"
    ) in older.rendered.text
    assert "Pre-flight check" not in older.rendered.text
    # The minor it is on is checked (what is left after its upgrade), and the check says so.
    assert "Pre-flight check of *prod* for *1.24*" in same.rendered.text
    assert (
        "the cluster is on 1.24 already: this checks what is left on it, not a next upgrade"
        in same.rendered.text
    )
    assert "Pre-flight check of *prod* for *1.25*" in next_one.rendered.text
    assert "already" not in next_one.rendered.text


def test_the_terminal_check_of_an_older_minor_is_a_usage_error(on_the_sim: Path) -> None:
    result = subprocess.run(
        [*bot_command(), "check", "--to", "1.20", "--config", str(on_the_sim)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))},
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert result.stderr == (
        "upgrade-bot: the cluster is on v1.24.17-eks-10df0b3 already: --to 1.20 is an older minor "
        "(check 1.24, the minor it is on, or a newer one)\n"
    )


def test_an_unreachable_cluster_is_one_line_in_the_terminal_without_urllib3_s_words(config: Path) -> None:
    result = subprocess.run(
        [*bot_command(), "check", "--config", str(config)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))},
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "upgrade-bot: cluster prod (context dead-ctx) refused the connection at http://127.0.0.1:"
    )
