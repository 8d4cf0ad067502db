"""Files the image and the Slack app depend on: what the Dockerfile copies exists, the manifest fits."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_every_file_the_dockerfile_copies_exists() -> None:
    copies = [
        line.split()[1:-1]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
    ]
    sources = [s for group in copies for s in group]
    assert {"bot", "commands", "templates", "pyproject.toml"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source


def test_the_image_runs_as_a_non_root_user_with_the_bot_as_entrypoint() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER (?!root|0\b)\S+", text, re.MULTILINE)
    assert 'ENTRYPOINT ["upgrade-bot", "run"]' in text


def test_the_manifest_declares_the_command_interactivity_and_least_scopes() -> None:
    manifest = yaml.safe_load((ROOT / "slack-app-manifest.yaml").read_text())
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == "/upgrade"
    assert command["url"].endswith("/slack/events")
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    assert manifest["settings"]["socket_mode_enabled"] is True
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert scopes == {
        "commands",
        "chat:write",
        "files:read",
        "files:write",
        "im:write",
        "usergroups:read",
        "users:read",
    }
    assert not any(s.endswith(":history") or s.startswith("admin") for s in scopes)
