"""GitHub App auth (issue 43): githubkit's own `AppInstallationAuthStrategy` against the sim's GitHub
facade, which checks the App's JWT with the public key this test made and hands out installation
tokens; `github:` reads the App's ids and key from the configuration or the environment, and never
shows the key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.adapters.github import GitHubPullRequests
from bot.core.runs import prs as pr_view
from bot.errors import ConfigError, TemporaryError
from bot.records import GitHubAccess, PrRef
from bot.settings import parse_settings

REPO = "org/eks-provision-configuration"
APP_ID, INSTALLATION = "123456", 7890


def keypair() -> tuple[str, str]:
    """(private key, public key), PEM: the private one as GitHub downloads it (PKCS#1)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture(scope="module")
def app_key() -> tuple[str, str]:
    return keypair()


def _github(sim_small: Any, public: str) -> Any:
    github = sim_small.sim.github
    github.open_pull(REPO, 62, title="istio node group to 1.25", branch="eks-1.25-istio", head_sha="b" * 40)
    github.check_run(REPO, "b" * 40, name="terraform plan", status="completed", conclusion="success")
    github.review(REPO, 62, user="alice", state="APPROVED")
    github.merge(REPO, 62, merge_commit_sha="c" * 40)
    github.install_app(APP_ID, INSTALLATION, public_key=public)
    return github


def test_the_bot_reads_a_pr_as_a_github_app(sim_small: Any, app_key: tuple[str, str]) -> None:
    private, public = app_key
    github = _github(sim_small, public)
    access = GitHubAccess(
        api_url=f"{sim_small.url}/github", app_id=APP_ID, installation_id=INSTALLATION, private_key=private
    )
    prs = GitHubPullRequests(access, clock=lambda: 100.0)
    pr = prs.find(PrRef(repo=REPO, number=62))
    assert pr is not None
    assert (pr.state, pr.merge_commit, pr.approvals) == ("merged", "c" * 40, ("alice",))
    # The installation token is kept and reused, not asked for on every read.
    assert prs.find(PrRef(repo=REPO, number=62), fresh=True) is not None
    assert github.tokens_issued == 1
    # The secrets stay out of the access's repr (a log line, a traceback's locals).
    assert "PRIVATE KEY" not in repr(access)


def test_a_wrong_key_gets_a_clear_refusal_without_a_traceback(
    sim_small: Any, app_key: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    _, public = app_key
    github = _github(sim_small, public)
    wrong, _ = keypair()
    access = GitHubAccess(
        api_url=f"{sim_small.url}/github", app_id=APP_ID, installation_id=INSTALLATION, private_key=wrong
    )
    prs = GitHubPullRequests(access)
    with pytest.raises(TemporaryError) as refused:
        prs.find(PrRef(repo=REPO, number=62))
    reason = refused.value.user_message
    assert reason == (
        f"GitHub refused GitHub App {APP_ID} (installation {INSTALLATION}) an installation token "
        "(401: A JSON web token could not be decoded): check github.app_id, installation_id and private_key_file"
    )
    # No chained exception to print, no key or JWT anywhere.
    assert refused.value.__cause__ is None
    assert refused.value.__suppress_context__
    assert github.tokens_issued == 0
    logged = caplog.text
    assert "PRIVATE KEY" not in logged
    assert not re.search(r"eyJ[\w-]+\.", logged + reason)  # a JWT's header
    # What the card says of the step's PR: the reason, as a line.
    pr, why = pr_view.read(prs, PrRef(repo=REPO, number=62))
    assert pr is None
    assert why == reason


def test_a_token_the_facade_did_not_issue_is_not_accepted_once_an_app_is_installed(
    sim_small: Any, app_key: tuple[str, str]
) -> None:
    _github(sim_small, app_key[1])
    prs = GitHubPullRequests(token="ghp_not_the_apps", api_url=f"{sim_small.url}/github")
    with pytest.raises(TemporaryError, match=r"^GitHub did not accept the token \(401\) for org/"):
        prs.find(PrRef(repo=REPO, number=62))


# -- the configuration -----------------------------------------------------------------------------


def test_an_app_is_read_from_the_configuration_and_its_key_is_never_shown(
    tmp_path: Path, app_key: tuple[str, str]
) -> None:
    private, _ = app_key
    (tmp_path / "app.pem").write_text(private)
    text = f"github: {{app_id: {APP_ID}, installation_id: {INSTALLATION}, private_key_file: app.pem}}\n"
    settings = parse_settings(text, source=tmp_path / "cfg.yaml", env={"GITHUB_TOKEN": "ghp_ignored"})
    assert settings.github == GitHubAccess(
        api_url="https://api.github.com",
        app_id=APP_ID,
        installation_id=INSTALLATION,
        private_key=private.strip(),
    )
    assert "PRIVATE KEY" not in repr(settings)


def test_an_app_is_read_from_the_environment(tmp_path: Path, app_key: tuple[str, str]) -> None:
    private, _ = app_key
    (tmp_path / "app.pem").write_text(private)
    env = {
        "GITHUB_APP_ID": APP_ID,
        "GITHUB_APP_INSTALLATION_ID": str(INSTALLATION),
        "GITHUB_APP_PRIVATE_KEY_FILE": str(tmp_path / "app.pem"),
    }
    settings = parse_settings(
        "github: {api_url: 'https://ghe.example/api/v3'}\n", source=tmp_path / "c.yaml", env=env
    )
    assert settings.github is not None
    assert (settings.github.api_url, settings.github.app_id, settings.github.installation_id) == (
        "https://ghe.example/api/v3",
        APP_ID,
        INSTALLATION,
    )
    # A token in the environment is the simpler way, and wins.
    settings = parse_settings(
        "github: {}\n", source=tmp_path / "c.yaml", env={**env, "GITHUB_TOKEN": "ghp_x"}
    )
    assert settings.github == GitHubAccess(api_url="https://api.github.com", token="ghp_x")


@pytest.mark.parametrize(
    ("text", "env", "reason"),
    [
        (
            "github: {app_id: 1, installation_id: 2}\n",
            {},
            "a GitHub App needs private_key_file under github as well",
        ),
        (
            "github: {app_id: 1, installation_id: 2, private_key_file: app.pem, token_file: app.pem}\n",
            {},
            "either token_file or a GitHub App (app_id, installation_id, private_key_file), not both",
        ),
        (
            "github: {app_id: 1, installation_id: 2, private_key_file: not-a-key.txt}\n",
            {},
            "github.private_key_file: not a private key in PEM form",
        ),
        (
            "github: {}\n",
            {"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY_FILE": "app.pem"},
            "a GitHub App needs GITHUB_APP_INSTALLATION_ID in the environment as well",
        ),
        (
            "github: {app_id: one, installation_id: 2, private_key_file: app.pem}\n",
            {},
            "github.app_id",
        ),
    ],
)
def test_an_incomplete_or_wrong_app_is_refused_at_load_naming_what(
    tmp_path: Path, app_key: tuple[str, str], text: str, env: dict[str, str], reason: str
) -> None:
    (tmp_path / "app.pem").write_text(app_key[0])
    (tmp_path / "not-a-key.txt").write_text("hunter2-not-a-key\n")
    with pytest.raises(ConfigError) as refused:
        parse_settings(text, source=tmp_path / "cfg.yaml", env=env)
    message = str(refused.value)
    assert reason in message
    assert "PRIVATE KEY" not in message.replace("PRIVATE KEY-----)", "")
    assert "hunter2" not in message


def test_a_key_that_cannot_sign_is_said_so_without_a_traceback(
    sim_small: Any, app_key: tuple[str, str]
) -> None:
    _github(sim_small, app_key[1])
    broken = "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
    access = GitHubAccess(
        api_url=f"{sim_small.url}/github", app_id=APP_ID, installation_id=INSTALLATION, private_key=broken
    )
    with pytest.raises(TemporaryError) as refused:
        GitHubPullRequests(access).find(PrRef(repo=REPO, number=62))
    assert refused.value.user_message == (
        f"GitHub App {APP_ID} (installation {INSTALLATION}): its private key cannot sign a JWT "
        "(check github.private_key_file)"
    )
    assert refused.value.__cause__ is None
