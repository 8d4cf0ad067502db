"""A node-group launch with its PR and its pipeline as evidence (issue 43's acceptance): the real
githubkit client against the sim's GitHub facade, signed pipeline hooks on the real HTTP door, the
card and thread through the real slack_sdk client against the Slack stub (Block Kit validated).

PR merged → pipeline started → failed at revision A → the re-run gate warns that A is not the PR's
merge commit → succeeded at revision B → a person confirms the step."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.awaited import Bot
from tests.support.hooks import HOOK_SECRET, PRIMARY, SHADOW, SOURCE, hook_bot_for, report, send
from tests.support.slack_stub import SlackStub, block_kit_problems

REPO = "example-org/eks-provision-configuration"
HEAD = "1111111111111111111111111111111111111111"
REV_A = "4f1c2a3b9d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"
MERGE = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"

PLAN = f"""\
name: pipes
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-29T00:00", end: "2026-12-10T00:00", timezone: UTC}}
channels: {{operations: C0OPS}}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: launch-istio
    title: Merge the node group PR for istio (its new 1.25 nodes join)
    gate: {{any_of: [primary]}}
    done: {{any_of: [primary, shadow]}}
    pr: {{repo: {REPO}, match: "istio.*1\\\\.25", require: {{merged: true, checks: success}}}}
    pipeline: {{pipeline: eks-provision-configuration, job: apply-istio}}
  - id: after
    title: Look at the dashboards
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
"""


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim_small: Any, tmp_path: Path
) -> Iterator[Bot]:
    github = sim_small.sim.github
    github.open_pull(
        REPO, 61, title="logging node group to 1.25", branch="eks-1.25-logging", head_sha="2" * 40
    )
    github.open_pull(REPO, 62, title="istio node group to 1.25", branch="eks-1.25-istio", head_sha=HEAD)
    github.check_run(REPO, HEAD, name="terraform plan", status="in_progress")
    token = tmp_path / "github.token"
    token.write_text("ghp_simulated_token_for_tests\n")
    extra = f"github: {{api_url: '{sim_small.url}/github', token_file: {token}}}\n"
    with hook_bot_for(
        write_config, slack_stub, tmp_path, {SOURCE: HOOK_SECRET}, plan=PLAN, extra=extra
    ) as bot:
        yield bot


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def card_when(bot: Bot, needle: str) -> tuple[str, list[dict[str, Any]]]:
    card_ts = bot.cards()[0]["ts"]

    def latest() -> tuple[str, list[dict[str, Any]]] | None:
        edits = [c.params for c in bot.stub.calls_to("chat.update") if c.params["ts"] == card_ts]
        if edits and needle in edits[-1]["text"]:
            return str(edits[-1]["text"]), _blocks(edits[-1])
        return None

    found: tuple[str, list[dict[str, Any]]] = bot.stub.wait_for(latest, timeout=30)
    return found


def posted(bot: Bot, needle: str) -> dict[str, Any]:
    def find() -> list[dict[str, Any]]:
        return [p for p in bot.posts() if needle in p["text"]]

    # The first PR read imports githubkit's models: slow on a loaded machine, hence the long wait.
    found: list[dict[str, Any]] = bot.stub.wait_for(find, timeout=90)
    assert block_kit_problems("chat.postMessage", {"blocks": _blocks(found[-1])}) == []
    return found[-1]


def test_pr_merged_pipeline_fails_then_rerun_warns_then_succeeds_and_a_person_confirms(
    bot: Bot, sim_small: Any
) -> None:
    github = sim_small.sim.github
    assert "loaded" in bot.command("plan load pipes")
    assert "started" in bot.command("start pipes")
    (row,) = bot.services.store.runs(states=["active"])
    run = row.id

    # The gate names the PR found by its title pattern: open, its check running, no approval yet.
    gate = posted(bot, "(`launch-istio`) — ready to start")
    assert (
        f"*PR* <https://github.com/{REPO}/pull/62|{REPO}#62 istio node group to 1.25> — open" in gate["text"]
    )
    assert "Checks: 0/1 passed · approvals: none" in gate["text"]
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    text, blocks = card_when(bot, f"PR <https://github.com/{REPO}/pull/62|{REPO}#62> open")
    assert "checks 0/1 · 0 approvals" in text
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []

    # Done is refused while the PR is open and its check has not passed; a person is told why.
    refused = bot.click(SHADOW, bot.gate("launch-istio"))
    assert refused is not None
    assert (
        f"`launch-istio` cannot be confirmed done yet: {REPO}#62 is open, not merged; "
        "checks not successful: terraform plan"
    ) in refused

    # The PR is approved, its check passes, it is merged.
    github.review(REPO, 62, user="alice", state="APPROVED")
    github.check_run(REPO, HEAD, name="terraform plan", status="completed", conclusion="success")
    github.merge(REPO, 62, merge_commit_sha=MERGE)

    # The pipeline starts, and fails at revision A (not the merge commit): the step stops.
    assert send(bot.front.url, report(run, "launch-istio", status="started", revision=REV_A)).status == 200
    card_when(bot, "started at `4f1c2a3b9d0e`")
    posted(bot, "build 41 started")
    assert send(bot.front.url, report(run, "launch-istio", status="failed", revision=REV_A)).status == 200
    text, blocks = card_when(bot, "Run *paused*")
    assert f"build 41 failed at revision {REV_A}" in text
    posted(bot, "build 41 failed>")

    # Re-run: the gate opens again and warns that the failed build did not run at the merge commit.
    (paused_row,) = [b for b in blocks if b.get("block_id") == "card_paused"]
    assert bot.click(PRIMARY, paused_row["elements"][0]["value"], "paused_resume") is None
    rerun = posted(bot, ":warning: *Re-run at the right revision:*")
    assert (
        "failed at `4f1c2a3b9d0e`, but the PR was merged at `9e8d7c6b5a4f`: run the pipeline again "
        "at the merge commit, not at `4f1c2a3b9d0e`"
    ) in rerun["text"]
    assert f"{REPO}#62 istio node group to 1.25> — merged, merge commit `9e8d7c6b5a4f`" in rerun["text"]
    assert "Checks: 1/1 passed · approvals: alice" in rerun["text"]
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None

    # The re-run succeeds at the merge commit; the card shows it, and a person confirms the step.
    url = report(run, "launch-istio")["url"][:-2] + "42"
    ok = report(run, "launch-istio", status="succeeded", revision=MERGE, build="42", url=url)
    assert send(bot.front.url, ok).status == 200
    text, blocks = card_when(bot, "succeeded at `9e8d7c6b5a4f`")
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []
    posted(bot, "build 42 succeeded")
    done_gate = posted(bot, "(`launch-istio`) — started; confirm when it is done")
    assert (
        "What `done` requires of the PR is met (merged, checks); a person still confirms."
        in done_gate["text"]
    )
    assert bot.click(SHADOW, bot.gate("launch-istio")) is None
    assert str(bot.services.runs.load(run).step_run("launch-istio").state) == "succeeded"
    posted(bot, "confirmed done: `launch-istio`")
