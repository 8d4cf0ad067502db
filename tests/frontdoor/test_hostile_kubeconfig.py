"""A kubeconfig that is not one (garbage YAML, `/dev/zero`, a FIFO, a directory, a huge file) is
refused with what is wrong with it, in the terminal and in Slack alike: never an internal error
with a traceback, never a command that hangs on a FIFO (issue 38, item 5)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.adapters.kube import MAX_KUBECONFIG_BYTES, Cluster, check_kubeconfig
from bot.errors import ConfigError
from bot.records import ClusterConfig
from bot.settings import load_settings
from tests.support.bot_process import bot_command
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

#: Generous for a Python start-up on two shared cores; a FIFO that blocks would exceed it.
PROCESS_TIMEOUT = 60

GOOD = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
"""


def _garbage(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.yaml"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c,\n  cluster: {server: x}\n")
    return path


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.fifo"
    os.mkfifo(path)
    return path


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "kube.d"
    path.mkdir()
    return path


def _huge(tmp_path: Path) -> Path:
    path = tmp_path / "huge.yaml"
    with path.open("w") as f:
        f.write("# " + "x" * MAX_KUBECONFIG_BYTES + "\n")
    return path


def _a_list(tmp_path: Path) -> Path:
    path = tmp_path / "list.yaml"
    path.write_text("- apiVersion: v1\n- kind: Config\n")
    return path


def _nul_bytes(tmp_path: Path) -> Path:
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"apiVersion: v1\n\x00\x00\x00")
    return path


HOSTILE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "garbage": (
        _garbage,
        "not valid YAML at line 3, column 12: this `{` is never closed: a missing `}`? "
        "(a value holding `:`, `,`, `[`, `]`, `{` or `}` needs quotes)",
    ),
    "dev-zero": (lambda _: Path("/dev/zero"), "not a regular file (a device)"),
    "fifo": (_fifo, "not a regular file (a FIFO)"),
    "directory": (_directory, "not a regular file (a directory)"),
    "huge": (_huge, "larger than 4 MiB; is this the right file?"),
    "list": (_a_list, "not a kubeconfig (its top level is a list, not a mapping)"),
    "nul": (_nul_bytes, "not valid YAML at line 2, column 1: unacceptable character #x0000"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_connecting_refuses_a_hostile_kubeconfig_with_what_is_wrong(tmp_path: Path, name: str) -> None:
    make, reason = HOSTILE[name]
    path = make(tmp_path)
    config = ClusterConfig(name="prod", kubeconfig=path, context="ctx")
    with pytest.raises(ConfigError) as caught:
        Cluster.connect(config)
    assert caught.value.user_message == f"cluster prod: kubeconfig {path}: {reason}"


def test_a_context_the_kubeconfig_lacks_names_the_cluster_s_entry_and_the_contexts_it_has(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(GOOD)
    config = ClusterConfig(name="prod", kubeconfig=path, context="kind-upgrade-bot")
    with pytest.raises(ConfigError) as caught:
        Cluster.connect(config)
    assert caught.value.user_message == (
        f"clusters.prod.context: no context named 'kind-upgrade-bot' in kubeconfig {path} (it has: ctx)"
    )
    # Without `context:` the kubeconfig's current one is used, and named as the cluster's.
    assert Cluster.connect(ClusterConfig(name="prod", kubeconfig=path)).context == "ctx"
    # A token pasted as the context's name is not said back (the message reaches Slack too).
    token = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
    with pytest.raises(ConfigError) as caught:
        Cluster.connect(ClusterConfig(name="prod", kubeconfig=path, context=token))
    assert token not in caught.value.user_message
    assert "no context named 'xoxb-…(redacted)' in kubeconfig" in caught.value.user_message


def test_in_cluster_outside_a_pod_says_it_is_not_in_one_and_what_to_name_instead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError) as caught:
        Cluster.connect(ClusterConfig(name="prod", in_cluster=True))
    assert caught.value.user_message == (
        "clusters.prod.in_cluster: this process is not running in a Kubernetes pod "
        "(KUBERNETES_SERVICE_HOST is not set); outside a pod, name a `kubeconfig` and `context` instead"
    )


def test_a_list_skips_missing_files_as_kubectl_does_but_not_a_fifo(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    check_kubeconfig(f"{tmp_path / 'missing'}{os.pathsep}{good}")
    fifo = _fifo(tmp_path)
    with pytest.raises(ConfigError, match=rf"^kubeconfig {fifo}: not a regular file \(a FIFO\)$"):
        check_kubeconfig(f"{good}{os.pathsep}{fifo}")
    with pytest.raises(ConfigError, match="no such file"):
        check_kubeconfig(str(tmp_path / "missing"))


def _config(write_config: Callable[..., Path], kubeconfig: Path) -> Path:
    return write_config(f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: ctx}}\n")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
    return subprocess.run(
        [*bot_command(), *args],
        capture_output=True,
        text=True,
        env=base | (env or {}),
        timeout=PROCESS_TIMEOUT,
    )


@pytest.mark.parametrize("name", ["garbage", "dev-zero", "fifo"])
def test_the_terminal_check_says_what_is_wrong_with_the_kubeconfig(
    tmp_path: Path, write_config: Callable[..., Path], name: str
) -> None:
    make, reason = HOSTILE[name]
    path = make(tmp_path)
    result = _run("check", "--config", str(_config(write_config, path)))
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert "internal error" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"upgrade-bot: cluster prod: kubeconfig {path}: {reason}"


def test_a_fifo_in_the_kubeconfig_list_does_not_hang_a_command_without_a_config(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    fifo = _fifo(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [*bot_command(), "check"],
        capture_output=True,
        text=True,
        cwd=work,
        env={k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
        | {"KUBECONFIG": f"{good}{os.pathsep}{fifo}", "XDG_STATE_HOME": str(tmp_path / "state")},
        timeout=PROCESS_TIMEOUT,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"upgrade-bot: kubeconfig {fifo}: not a regular file (a FIFO)"


@pytest.fixture
def front_with(
    write_config: Callable[..., Path], slack_stub: SlackStub
) -> Iterator[Callable[[Path], SlackStub]]:
    fronts = []

    def start(kubeconfig: Path) -> SlackStub:
        settings = load_settings(_config(write_config, kubeconfig), slack_env(slack_stub.api_url))
        front = start_front(settings, slack_stub)
        fronts.append(front)
        assert front.command("check").status == 200
        return slack_stub

    yield start
    for front in fronts:
        front.stop()


@pytest.mark.parametrize("name", ["garbage", "dev-zero", "fifo"])
def test_slack_check_says_what_is_wrong_with_the_kubeconfig_ephemerally(
    tmp_path: Path, front_with: Callable[[Path], SlackStub], name: str
) -> None:
    make, reason = HOSTILE[name]
    path = make(tmp_path)
    stub = front_with(path)
    (reply,) = stub.wait_for_responses(1, timeout=20)
    assert reply["response_type"] == "ephemeral"
    assert f"cluster prod: kubeconfig {path}: {reason}" in reply["text"]
    assert "internal error" not in reply["text"]


@pytest.mark.parametrize("name", ["dev-zero", "fifo"])
def test_a_kubeconfig_flag_naming_a_device_or_fifo_without_a_config_says_what_it_is(
    tmp_path: Path, name: str
) -> None:
    make, reason = HOSTILE[name]
    path = make(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [*bot_command(), "check", "--kubeconfig", str(path)],
        capture_output=True,
        text=True,
        cwd=work,
        env={
            k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_", "KUBECONFIG"))
        }
        | {"XDG_STATE_HOME": str(tmp_path / "state")},
        timeout=PROCESS_TIMEOUT,
    )
    assert result.returncode == 2, result.stderr
    # Not "no kubeconfig at …": the file is there, and is not one.
    assert result.stderr.strip() == f"upgrade-bot: kubeconfig {path}: {reason}"
