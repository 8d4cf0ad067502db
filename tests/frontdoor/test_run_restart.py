"""Restart safety: `upgrade-bot run --http` is killed with SIGKILL mid-action, mid-gate and between
steps, and started again on the same database. No approval is lost, nothing is posted twice,
buttons posted before the restart still work, and an action that was running is marked
interrupted and waits for a human instead of running again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import COORD, PRIMARY, SHADOW, RunBot
from tests.support.plans import eks_with_human_checks
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    # The runbook with `checks` as a human step (see eks_with_human_checks), by name in the team's
    # templates: these kills fall between plain gates, not in the pre-flight check's findings.
    team = tmp_path / "team-templates"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "eks-nodegroups.yaml").write_text(eks_with_human_checks())
    config = write_config(
        f"templates_dir: {team}\nchannels: {{operations: C0OPS}}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    b = RunBot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


@pytest.mark.slow
def test_sigkill_at_any_point_loses_nothing_and_repeats_nothing(bot: RunBot, sim_eks: Any) -> None:
    assert "loaded" in bot.command("plan load eks-nodegroups")
    assert "started" in bot.command("start eks-nodegroups")

    # 1. Killed while the snapshot action runs: the step is interrupted, never re-run silently.
    sim_eks.control.set_transport(latency=60.0, path_prefix="/api/v1/pods")
    bot.click(PRIMARY, bot.gate("snapshot-pre"))
    wait_until(lambda: bot.run().step_run("snapshot-pre").state == "running", timeout=10, what="running")
    bot.kill9()
    sim_eks.control.set_transport()
    bot.start()
    run = bot.run()
    assert run.step_run("snapshot-pre").state == "interrupted"
    assert run.state == "paused"
    snapshots = bot.store()
    assert snapshots.snapshots() == []  # nothing ran again by itself
    snapshots.close()
    broadcast = [c for c in bot.stub.calls_to("chat.postMessage") if c.params.get("reply_broadcast")]
    # The plan's window (28 November) is over: said once, across the kill -9 and the restart.
    ended = [c for c in broadcast if "The upgrade window ended" in c.params["text"]]
    assert len(ended) <= 1
    broadcast = [c for c in broadcast if c not in ended]
    assert len(broadcast) == 1
    assert "was interrupted" in broadcast[0].params["text"]
    assert "active" in bot.command(f"resume {run.id} --reason restarted", user=COORD)
    bot.click(SHADOW, bot.gate("snapshot-pre"))
    wait_until(lambda: bot.run().step_run("snapshot-pre").state == "succeeded", timeout=60, what="snapshot")

    # 2. Killed between two steps.
    bot.click(PRIMARY, bot.gate("checks"))
    bot.click(SHADOW, bot.gate("checks"))
    bot.kill9()
    bot.start()
    bot.click(COORD, bot.gate("announce-start"))
    bot.click(PRIMARY, bot.gate("announce-start"))

    # 3. Killed in the middle of a gate: the first approval survives, the old button still works.
    button = bot.gate("control-plane")
    bot.click(SHADOW, button)
    bot.kill9()
    bot.start()
    assert [a.user_id for a in bot.run().approvals if a.step_id == "control-plane"] == [SHADOW]
    bot.click(PRIMARY, button)
    assert bot.run().step_run("control-plane").state == "running"
    bot.click(SHADOW, bot.gate("control-plane"))

    # The rest of the run, with one more restart in a "done" gate.
    for group in ("ng-control-plane", "ng-istio", "ng-shared", "ng-others", "ng-logging"):
        bot.click(PRIMARY, bot.gate(group))
        if group == "ng-shared":
            bot.kill9()
            bot.start()
        bot.click(SHADOW, bot.gate(group))
    bot.click(SHADOW, bot.gate("snapshot-post"))
    bot.click(PRIMARY, bot.gate("diff"))
    wait_until(lambda: bot.run().step_run("diff").state == "succeeded", timeout=60, what="diff")
    bot.click(COORD, bot.gate("announce-done"))
    bot.click(PRIMARY, bot.gate("announce-done"))
    assert bot.run().state == "completed"

    # Posts go out after the clicks' answers: let the thread catch up.
    # The last gate's buttons are retired after the run completes (claimed, edited, then recorded):
    # caught up means that edit is on record too, not only the lines claimed so far.
    def caught_up() -> bool:
        run = bot.run()
        store = bot.store()
        try:
            refs = store.messages(run.id)
        finally:
            store.close()
        open_gates = {f"gate:{sr.step_id}:{sr.epoch}" for sr in run.steps}
        closed = [
            k for k in refs if k.startswith("gate:") and not k.endswith(":retired") and k not in open_gates
        ]
        return all(ref.ts for ref in refs.values()) and all(f"{k}:retired" in refs for k in closed)

    wait_until(caught_up, timeout=30, what="every thread line posted")
    # Nothing was posted twice: one card, one message per gate state, one line per event.
    posts = [c.params for c in bot.stub.calls_to("chat.postMessage")]
    cards = [p for p in posts if p["text"].startswith(":clipboard: *Upgrade run")]
    assert len(cards) == 1
    gates = Counter(
        el["value"]
        for p in posts
        if p.get("thread_ts")
        for block in (p.get("blocks") or [])
        if block.get("type") == "actions"
        for el in block["elements"]
        if el["action_id"] == "gate_approve"
    )
    assert gates
    assert max(gates.values()) == 1
    # The window's end, past since 28 November, was told once across the four kill -9s.
    assert len([p for p in posts if "The upgrade window ended" in p["text"]]) == 1
    # Each post of the run is exactly one claimed message key (claimed before posting, so a
    # restart finds it claimed and does not post again).
    store = bot.store()
    store_refs = store.messages(bot.run().id)
    # (The report's key is an upload into the thread, not a message: checked below.)
    # (`shown:` keys are edits of an open gate's message to whom it waits for, not posts.)
    keys = [
        k for k in store_refs if not k.endswith(":retired") and k != "report" and not k.startswith("shown:")
    ]
    store.close()
    card_ts = bot.stub.calls_to("chat.postMessage")[posts.index(cards[0])].response["ts"]
    run_posts = [p for p in posts if p.get("thread_ts") == card_ts or p is cards[0]]
    unposted = {k: v for k, v in store_refs.items() if not v.ts}
    assert unposted == {}
    assert len(run_posts) == len(keys) == len(set(keys))
    # The run ended: its report went into the thread once (picture, HTML, Markdown), restarts
    # and all — its key claimed before the upload, like every post.
    assert store_refs["report"].ts == "uploaded"
    uploads = [c.params for c in bot.stub.calls_to("files.completeUploadExternal")]
    assert [u.get("thread_ts") for u in uploads] == [card_ts] * 3
    # Every approval is in the database, once.
    approvals = [(a.step_id, a.phase, a.user_id) for a in bot.run().approvals]
    assert len(approvals) == len(set(approvals))
    assert ("control-plane", "start", SHADOW) in approvals
    assert (
        "control-plane",
        "start",
        PRIMARY,
    ) in approvals
