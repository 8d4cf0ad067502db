"""docs/pipeline-hooks.md's snippets, each run exactly as written (the CI system's own substitutions
made the way it makes them) with real `sh`, `openssl` and `curl` against the in-process bot's HTTP
door; and `scripts/pipeline-hook-sign`, whose headers are checked against an HMAC computed here."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.records import PipelineBuild
from tests.support.awaited import Bot
from tests.support.hooks import PRIMARY, hook_bot_for, report
from tests.support.slack_stub import SlackStub

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "pipeline-hooks.md"
SIGN = ROOT / "scripts" / "pipeline-hook-sign"
SECRETS = {
    "concourse": "concourse-" + "c" * 40,
    "github-actions": "github-actions-" + "g" * 40,
    "argo": "argo-" + "a" * 40,
    "by-hand": "by-hand-" + "h" * 40,
}
REV = "4f1c2a3b9d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"


def snippets() -> dict[str, Any]:
    """The page's snippets by name: the YAML block after each `<!-- snippet: NAME -->`."""
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"<!-- snippet: ([a-z-]+) -->\n```yaml\n(.*?)\n```", text, re.DOTALL)
    return {name: yaml.safe_load(body) for name, body in found}


def test_the_page_has_the_three_snippets() -> None:
    assert sorted(snippets()) == ["argo-workflows", "concourse", "github-actions"]


@pytest.fixture
def hook_bot(write_config: Callable[..., Path], slack_stub: SlackStub, tmp_path: Path) -> Iterator[Bot]:
    for tool in ("sh", "bash", "openssl", "curl"):
        # Under CI a missing tool fails loudly: these snippets are what teams paste into their CI.
        assert shutil.which(tool), f"{tool} is needed to run docs/pipeline-hooks.md's snippets"
    with hook_bot_for(write_config, slack_stub, tmp_path / "bot", SECRETS) as bot:
        yield bot


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd)}
    return subprocess.run(
        argv, env=base | env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def _start(bot: Bot) -> str:
    assert "loaded" in bot.command("plan load pipes")
    assert "started" in bot.command("start pipes")
    (row,) = bot.services.store.runs(states=["active"])
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    return row.id


def _concourse(doc: dict[str, Any], bot: Bot, run: str, work: Path) -> subprocess.CompletedProcess[str]:
    config = doc["config"]
    # What Concourse interpolates into the task's params from its credential manager.
    credentials = {
        "((upgrade-bot.url))": bot.front.url,
        "((upgrade-bot.hook-secret))": SECRETS["concourse"],
        "((upgrade-bot.run))": run,
    }
    env = {k: credentials.get(str(v), str(v)) for k, v in config["params"].items()}
    # The task's inputs: the build-metadata resource's files and the git resource's checkout.
    metadata = {
        "build_name": "41",
        "build_job_name": "apply-istio",
        "build_pipeline_name": "eks-provision-configuration",
        "build_team_name": "infra",
        "atc_external_url": "https://ci.example.com",
    }
    (work / "metadata").mkdir(parents=True)
    for name, value in metadata.items():
        (work / "metadata" / name).write_text(value + "\n")
    (work / "eks-provision-configuration" / ".git").mkdir(parents=True)
    (work / "eks-provision-configuration" / ".git" / "ref").write_text(REV + "\n")
    assert [i["name"] for i in config["inputs"]] == ["metadata", "eks-provision-configuration"]
    return _run([config["run"]["path"], *config["run"]["args"]], env, work)


def _github_actions(doc: dict[str, Any], bot: Bot, run: str, work: Path) -> subprocess.CompletedProcess[str]:
    # What GitHub puts in for the step's `${{ }}` expressions, by their exact text (the job failed).
    expressions = {
        "vars.UPGRADE_BOT_URL": bot.front.url,
        "secrets.UPGRADE_BOT_HOOK_SECRET": SECRETS["github-actions"],
        "vars.UPGRADE_RUN": run,
        "job.status == 'success' && 'succeeded' || job.status == 'cancelled' && 'aborted' || 'failed'": "failed",
    }

    def evaluate(value: str) -> str:
        return re.sub(r"\$\{\{ (.*?) \}\}", lambda m: expressions[m[1]], value)

    assert doc["if"] == "always()"
    env = {k: evaluate(str(v)) for k, v in doc["env"].items()}
    # The runner's default variables for run 7 of the workflow's `apply-istio` job.
    env |= {
        "GITHUB_WORKFLOW": "eks-provision-configuration",
        "GITHUB_JOB": "apply-istio",
        "GITHUB_RUN_NUMBER": "7",
        "GITHUB_RUN_ID": "9912345678",
        "GITHUB_SHA": REV,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "org/eks-provision-configuration",
    }
    script = work / "step.sh"
    work.mkdir(parents=True)
    script.write_text(doc["run"])
    # GitHub's default shell for `run:` on Linux: bash --noprofile --norc -eo pipefail {0}.
    return _run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env, work)


def _argo(doc: dict[str, Any], bot: Bot, run: str, work: Path) -> subprocess.CompletedProcess[str]:
    # What Argo substitutes into the template before its container starts (the workflow failed).
    variables = {
        "workflow.status": "Failed",
        "workflow.name": "apply-istio-x7k2p",
        "workflow.namespace": "ci",
        "workflow.parameters.revision": REV,
        "workflow.parameters.upgrade-run": run,
    }

    def substitute(value: str) -> str:
        return re.sub(r"\{\{([a-z.-]+)\}\}", lambda m: variables[m[1]], value)

    container = doc["container"]
    env: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            assert item["valueFrom"] == {"secretKeyRef": {"name": "upgrade-bot-hook", "key": "secret"}}
            env[item["name"]] = SECRETS["argo"]
        else:
            env[item["name"]] = substitute(item["value"])
    # The bot's in-cluster Service, here the in-process door.
    assert env["UPGRADE_BOT_URL"] == "http://upgrade-bot.upgrade-bot.svc:3000"
    env["UPGRADE_BOT_URL"] = bot.front.url
    work.mkdir(parents=True)
    return _run([*container["command"], *[substitute(a) for a in container["args"]]], env, work)


RUNNERS = {"concourse": _concourse, "github-actions": _github_actions, "argo-workflows": _argo}
EXPECTED = {
    "concourse": (
        "concourse",
        "41",
        "https://ci.example.com/teams/infra/pipelines/eks-provision-configuration/jobs/apply-istio/builds/41",
    ),
    "github-actions": (
        "github-actions",
        "7",
        "https://github.com/org/eks-provision-configuration/actions/runs/9912345678",
    ),
    "argo-workflows": (
        "argo",
        "apply-istio-x7k2p",
        "https://argo.example.com/workflows/ci/apply-istio-x7k2p",
    ),
}


def test_each_snippet_sends_a_build_the_bot_accepts_and_the_first_failure_pauses_the_run(
    hook_bot: Bot, tmp_path: Path
) -> None:
    run = _start(hook_bot)
    for name, doc in snippets().items():
        done = RUNNERS[name](doc, hook_bot, run, tmp_path / name)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        assert f"of {run}/launch-istio: failed" in done.stdout, (name, done.stdout)
    builds = hook_bot.services.store.pipeline_builds(run)
    assert [(b.source, b.build, b.url) for b in builds] == list(EXPECTED.values())
    assert {(b.pipeline, b.job, b.status, b.revision, b.step_id) for b in builds} == {
        ("eks-provision-configuration", "apply-istio", "failed", REV, "launch-istio")
    }
    loaded = hook_bot.services.runs.load(run)
    assert (str(loaded.state), str(loaded.step_run("launch-istio").state)) == ("paused", "failed")


def test_the_sign_script_prints_the_documented_headers_and_sends_a_build(
    hook_bot: Bot, tmp_path: Path
) -> None:
    run = _start(hook_bot)
    import json

    body = json.dumps(report(run, "launch-istio", status="started", build="43")) + "\n"
    (tmp_path / "build.json").write_text(body)
    secret_file = tmp_path / "by-hand.secret"
    secret_file.write_text(SECRETS["by-hand"] + "\n")
    printed = _run([str(SIGN), "by-hand", str(secret_file), str(tmp_path / "build.json")], {}, tmp_path)
    assert printed.returncode == 0, printed.stderr
    headers = dict(line.split(": ", 1) for line in printed.stdout.splitlines())
    assert headers["X-Upgrade-Bot-Source"] == "by-hand"
    ts = headers["X-Upgrade-Bot-Timestamp"]
    # The trailing newline of the file is part of what is signed (and sent).
    mac = hmac.new(SECRETS["by-hand"].encode(), f"v1:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    assert headers["X-Upgrade-Bot-Signature"] == f"v1={mac}"

    sent = _run(
        [str(SIGN), "--send", hook_bot.front.url, "by-hand", str(secret_file), "-"],
        {},
        tmp_path,
    )
    assert sent.returncode != 0  # standard input was empty: a body the bot refuses, said so
    assert "the body is not JSON" in sent.stdout
    sent = subprocess.run(
        [str(SIGN), "--send", hook_bot.front.url, "by-hand", str(secret_file), "-"],
        input=body,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert sent.returncode == 0, (sent.stdout, sent.stderr)
    assert f"build 43 of {run}/launch-istio: started" in sent.stdout
    (build,) = hook_bot.services.store.pipeline_builds(run)
    assert isinstance(build, PipelineBuild)
    assert (build.source, build.build, build.status) == ("by-hand", "43", "started")
