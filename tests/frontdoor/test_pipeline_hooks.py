"""Pipelines as evidence (issue 43): CI builds reported on `POST /hooks/pipeline`, signed with real
HMAC, through the real HTTP door (waitress) of the in-process bot; the card and the thread through
the real slack_sdk client against the Slack stub, every Block Kit payload validated."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.awaited import Bot
from tests.support.hooks import (
    HOOK_SECRET,
    PLAN,
    PRIMARY,
    SHADOW,
    SOURCE,
    hook_bot_for,
    hook_headers,
    report,
    send,
)
from tests.support.signing import post
from tests.support.slack_stub import SlackStub, block_kit_problems

REV_A = "4f1c2a3b9d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a"
REV_B = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"


@pytest.fixture
def hook_bot(write_config: Callable[..., Path], slack_stub: SlackStub, tmp_path: Path) -> Iterator[Bot]:
    with hook_bot_for(write_config, slack_stub, tmp_path, {SOURCE: HOOK_SECRET}) as bot:
        yield bot


def started_run(bot: Bot) -> str:
    assert "loaded" in bot.command("plan load pipes")
    assert "started" in bot.command("start pipes")
    (row,) = bot.services.store.runs(states=["active"])
    return row.id


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def card_when(bot: Bot, needle: str) -> tuple[str, list[dict[str, Any]]]:
    """The card as Slack shows it once its text holds `needle` (edits follow the hook's answer)."""
    card_ts = bot.cards()[0]["ts"]

    def latest() -> tuple[str, list[dict[str, Any]]] | None:
        edits = [c.params for c in bot.stub.calls_to("chat.update") if c.params["ts"] == card_ts]
        if edits and needle in edits[-1]["text"]:
            return str(edits[-1]["text"]), _blocks(edits[-1])
        return None

    found: tuple[str, list[dict[str, Any]]] = bot.stub.wait_for(latest, timeout=30)
    return found


def thread_line(bot: Bot, needle: str) -> dict[str, Any]:
    """The one thread post holding `needle`, once it is posted."""

    def find() -> list[dict[str, Any]]:
        return [p for p in bot.posts() if p.get("thread_ts") and needle in p["text"]]

    (found,) = bot.stub.wait_for(find, timeout=30)
    return found


def gate_post(bot: Bot, step: str, needle: str) -> dict[str, Any]:
    def find() -> list[dict[str, Any]]:
        return [p for p in bot.posts() if f"(`{step}`)" in p["text"] and needle in p["text"]]

    found: list[dict[str, Any]] = bot.stub.wait_for(find, timeout=30)
    return found[-1]


def test_builds_show_on_the_card_and_in_the_thread_and_a_failed_one_pauses_its_step(hook_bot: Bot) -> None:
    bot = hook_bot
    run = started_run(bot)
    # Before any build the card says which job the step waits for.
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    text, _ = card_when(bot, "no build of eks-provision-configuration/apply-istio reported yet")

    answer = send(bot.front.url, report(run, "launch-istio", status="started", revision=REV_A))
    assert answer.status == 200, answer.body
    url = report(run, "launch-istio")["url"]
    text, blocks = card_when(bot, "started at `4f1c2a3b9d0e`")
    assert (
        f":arrows_counterclockwise: build <{url}|eks-provision-configuration/apply-istio #41> started" in text
    )
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []
    line = thread_line(bot, "build 41 started")
    assert (
        f"<{url}|eks-provision-configuration/apply-istio build 41 started> at revision `{REV_A}`"
        in line["text"]
    )

    # A failed build: the step fails with the build and its revision, and the run pauses.
    assert send(bot.front.url, report(run, "launch-istio", status="failed", revision=REV_A)).status == 200
    text, blocks = card_when(bot, "Run *paused*")
    assert f"pipeline eks-provision-configuration/apply-istio build 41 failed at revision {REV_A}" in text
    assert f":x: build <{url}|eks-provision-configuration/apply-istio #41> failed at `4f1c2a3b9d0e`" in text
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []
    thread_line(bot, ":x: `launch-istio`: pipeline <")
    step = bot.services.runs.load(run).step_run("launch-istio")
    assert str(step.state) == "failed"

    # Resumed: the gate opens again and says at which revision the failed build ran.
    (paused_row,) = [b for b in blocks if b.get("block_id") == "card_paused"]
    assert bot.click(PRIMARY, paused_row["elements"][0]["value"], "paused_resume") is None
    gate = gate_post(bot, "launch-istio", "ready to start")
    assert f"failed at revision `{REV_A}`: check that the re-run uses the right revision" in gate["text"]
    assert block_kit_problems("chat.postMessage", {"blocks": _blocks(gate)}) == []
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None

    # The re-run succeeds at another revision; a person still confirms the step.
    rerun = report(run, "launch-istio", status="succeeded", revision=REV_B, build="42", url=url[:-2] + "42")
    assert send(bot.front.url, rerun).status == 200
    text, _ = card_when(bot, "succeeded at `9e8d7c6b5a4f`")
    assert str(bot.services.runs.load(run).step_run("launch-istio").state) == "running"
    # A late report of the older build's failure: kept and said, but the step is not failed for
    # it, and the card goes on showing build 42 (it once failed the step and showed #41).
    late_report = report(
        run, "launch-istio", status="failed", revision=REV_A, build="40", url=url[:-2] + "40"
    )
    assert send(bot.front.url, late_report).status == 200
    late = thread_line(bot, "older than build 42")
    assert late["text"].endswith(
        f"at revision `{REV_A}` — older than build 42 (succeeded): the step is not failed for it"
    )
    assert str(bot.services.runs.load(run).step_run("launch-istio").state) == "running"
    assert (
        f":white_check_mark: build <{url[:-2]}42|eks-provision-configuration/apply-istio #42> succeeded"
        in (bot.card())
    )
    assert bot.click(SHADOW, bot.gate("launch-istio")) is None
    assert str(bot.services.runs.load(run).step_run("launch-istio").state) == "succeeded"
    # A failure after the step was confirmed done says it does not reopen it.
    assert (
        send(bot.front.url, report(run, "launch-istio", status="failed", revision=REV_B, build="43")).status
        == 200
    )
    done_then = thread_line(bot, "build 43 failed")
    assert done_then["text"].endswith(
        "— `launch-istio` was confirmed done before; this failure does not reopen it: check what the build applied"
    )
    # The CI system retries its notification (a new signature, the same build and status): said once.
    again = report(run, "launch-istio", status="failed", revision=REV_B, build="43")
    answer = send(bot.front.url, again, timestamp=int(time.time()) + 1)  # not a replay
    assert answer.status == 200
    assert answer.body.startswith(f"build 43 of {run}/launch-istio: failed, already recorded [")
    thread_line(bot, "build 43 failed")  # still the one line
    assert [(b.build, b.status, b.revision) for b in bot.services.store.pipeline_builds(run)] == [
        ("41", "started", REV_A),
        ("41", "failed", REV_A),
        ("42", "succeeded", REV_B),
        ("40", "failed", REV_A),
        ("43", "failed", REV_B),
    ]


TWO_LAUNCHES = PLAN.replace(
    "  - id: after\n",
    "  - id: launch-web\n"
    "    title: Merge the node group PR for web\n"
    "    gate: {any_of: [primary]}\n"
    "    done: {any_of: [primary, shadow]}\n"
    "    pipeline: {pipeline: eks-provision-configuration, job: apply-web}\n"
    "  - id: after\n",
)


def test_a_failed_build_fails_its_step_in_a_paused_run_and_is_said_of_a_step_not_started(
    write_config: Callable[..., Path], slack_stub: SlackStub, tmp_path: Path
) -> None:
    with hook_bot_for(write_config, slack_stub, tmp_path, {SOURCE: HOOK_SECRET}, plan=TWO_LAUNCHES) as bot:
        _paused_and_early_failures(bot)


def _paused_and_early_failures(bot: Bot) -> None:
    run = started_run(bot)
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    assert "paused" in bot.command(f"pause {run} --reason lunch")
    # Paused by hand, then the build fails: the step fails, the run stays paused on the failure
    # (it was only recorded, and the step could be confirmed done after a resume).
    assert send(bot.front.url, report(run, "launch-istio", status="failed", revision=REV_A)).status == 200
    card_when(bot, "it failed")
    assert str(bot.services.runs.load(run).step_run("launch-istio").state) == "failed"
    assert bot.services.runs.load(run).reason.startswith("step launch-istio failed: pipeline ")
    # A failed build of a step not started yet: recorded and said, the step not failed for it.
    early = report(run, "launch-web", job="apply-web", status="failed", revision=REV_A, build="7")
    assert send(bot.front.url, early).status == 200
    line = thread_line(bot, "build 7 failed")
    assert line["text"].endswith(
        "— `launch-web` has not started, so this does not fail it: look at this build before approving its gate"
    )
    assert str(bot.services.runs.load(run).step_run("launch-web").state) == "pending"


def _state(bot: Bot, run: str) -> tuple[Any, ...]:
    store = bot.services.store
    loaded = bot.services.runs.load(run)
    return (
        loaded.version,
        [(s.step_id, str(s.state), s.epoch, s.note) for s in loaded.steps],
        len(store.audit_entries()),
        store.pipeline_builds(run),
        store.hook_signature_count(),
        sorted(store.messages(run)),
        len(bot.stub.calls),
    )


def test_twenty_forged_stale_and_replayed_hooks_get_401_and_change_nothing(hook_bot: Bot) -> None:
    import time

    bot = hook_bot
    run = started_run(bot)
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    good = json.dumps(report(run, "launch-istio", status="failed")).encode()
    good_headers = hook_headers(good)
    url = f"{bot.front.url}/hooks/pipeline"
    assert post(url, good, good_headers).status == 200
    card_when(bot, "Run *paused*")
    thread_line(bot, ":x: `launch-istio`: pipeline <")
    before = _state(bot, run)

    now = int(time.time())
    other = json.dumps(report(run, "launch-istio", status="succeeded")).encode()
    forged: list[tuple[bytes, dict[str, str]]] = [
        (other, hook_headers(other, secret="not-the-secret-0123456789abcdefghij")),
        (other, hook_headers(other, source="jenkins")),
        (other, {**hook_headers(other), "X-Upgrade-Bot-Signature": ""}),
        (other, {k: v for k, v in hook_headers(other).items() if k != "X-Upgrade-Bot-Signature"}),
        (other, {**hook_headers(other), "X-Upgrade-Bot-Signature": good_headers["X-Upgrade-Bot-Signature"]}),
        (other + b" ", hook_headers(other)),  # the body changed after it was signed
        (other, {**hook_headers(other), "X-Upgrade-Bot-Timestamp": str(now - 1)}),  # signed at another time
    ]
    stale: list[tuple[bytes, dict[str, str]]] = [
        (other, hook_headers(other, timestamp=now - 301)),
        (other, hook_headers(other, timestamp=now - 86_400)),
        (other, hook_headers(other, timestamp=now + 600)),
        (other, hook_headers(other, timestamp=0)),
        (other, {**hook_headers(other), "X-Upgrade-Bot-Timestamp": "soon"}),
        (other, {k: v for k, v in hook_headers(other).items() if k != "X-Upgrade-Bot-Timestamp"}),
    ]
    replayed = [(good, good_headers)] * 7
    requests = forged + stale + replayed
    assert len(requests) == 20
    answers = [post(url, body, headers) for body, headers in requests]
    assert [a.status for a in answers] == [401] * 20, [a.body for a in answers]
    assert "a replay" in answers[-1].body
    assert "invalid signature" in answers[0].body
    assert "outside the five-minute window" in answers[len(forged)].body
    assert _state(bot, run) == before


def test_a_report_that_does_not_fit_gets_a_specific_reason_and_changes_nothing(hook_bot: Bot) -> None:
    bot = hook_bot
    run = started_run(bot)
    assert bot.click(PRIMARY, bot.gate("launch-istio")) is None
    before = _state(bot, run)
    cases = [
        (report(run, "launch-istio", status="exploded"), 400, "'status' must be one of started, succeeded"),
        (report(run, "launch-istio", revison="x"), 400, "unknown field 'revison'"),
        (report(run, "launch-istio", url="javascript:alert(1)"), 400, "'url' must be an http(s) URL"),
        (report("R000000", "launch-istio"), 404, "there is no run R000000"),
        (report(run, "no-such-step"), 409, f"run {run} has no step `no-such-step`"),
        (
            report(run, "launch-istio", job="apply-logging"),
            409,
            "takes builds of eks-provision-configuration/apply-istio, not eks-provision-configuration/apply-logging",
        ),
        # A step naming no pipeline takes no builds: any source's failed build once failed it.
        (
            report(run, "after", status="failed", pipeline="anything", job="whatever"),
            409,
            "step `after` names no pipeline (`pipeline:` in the plan); it takes no builds",
        ),
    ]
    for document, status, reason in cases:
        answer = send(bot.front.url, document)
        assert (answer.status, reason in answer.body) == (status, True), answer.body
    after = _state(bot, run)
    # Only the signatures were kept (each request was signed, and a replay of it is refused) and
    # the refusals audited; the run, its builds and Slack are as they were.
    assert after[:2] == before[:2]
    assert after[3] == before[3]
    assert after[5:] == before[5:]


def test_without_pipeline_hooks_configured_the_path_is_not_there(make_front: Callable[..., Any]) -> None:
    front = make_front()
    answer = send(front.url, report("R000000", "launch-istio"))
    assert answer.status == 404
