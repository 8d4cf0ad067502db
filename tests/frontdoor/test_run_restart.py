"""Restart safety: `upgrade-bot run --http` is killed with SIGKILL mid-action, mid-gate and between
steps, and started again on the same database. No approval is lost, nothing is posted twice,
buttons posted before the restart still work, and an action that was running is marked
interrupted and waits for a human instead of running again."""

from __future__ import annotations

import json
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.people import StaticDirectory
from bot.core.runs.service import RunService
from bot.settings import load_settings
from tests.conftest import SIGNING_SECRET
from tests.support.bot_process import BotProcess
from tests.support.signing import post, signed_headers
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PRIMARY, SHADOW, COORD = "U0PRIMARY", "U0SHADOW", "U0COORD"


@dataclass
class Bot(BotProcess):
    def store(self) -> Store:
        return Store.open(load_settings(self.config, {}).database_url)

    def run(self) -> Any:
        store = self.store()
        try:
            (row,) = store.runs()
            return RunService(store=store, directory=StaticDirectory(), clock=lambda: row.updated_at).load(
                row.id
            )
        finally:
            store.close()

    def command(self, text: str, user: str = PRIMARY) -> str:
        """Run a slash command; its reply, ephemeral or posted in the channel."""
        before, posted = len(self.stub.responses), len(self.stub.calls_to("chat.postMessage"))
        self.send_command(text, user)

        def reply() -> str | None:
            if len(self.stub.responses) > before:
                return str(self.stub.responses[-1]["text"])
            new = [
                c.params
                for c in self.stub.calls_to("chat.postMessage")[posted:]
                if not c.params.get("thread_ts")
            ]
            plain = [p for p in new if not p["text"].startswith(":clipboard:")]
            return str(plain[-1]["text"]) if plain else None

        return self.stub.wait_for(reply, timeout=30)

    def click(self, user: str, value: str) -> None:
        """Click Approve and wait until the run's version moves (the click counted)."""
        version = self.run().version
        self._click(user, value)
        wait_until(
            lambda: self.run().version > version, timeout=30, what=f"{user}'s click on {value} to count"
        )

    def _click(self, user: str, value: str) -> None:
        self.requests += 1
        payload = {
            "type": "block_actions",
            "trigger_id": f"click-{self.requests}",
            "user": {"id": user},
            "channel": {"id": "C0OPS"},
            "team": {"id": "T0TEAM"},
            "api_app_id": "A0STUB",
            "response_url": self.stub.response_url(f"click-{self.requests}"),
            "actions": [{"action_id": "gate_approve", "value": value, "type": "button", "action_ts": "1.2"}],
        }
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        assert post(f"{self.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200

    def gate(self, step: str) -> str:
        """Wait for the gate message of the step's current state; its button value."""

        def find() -> str | None:
            epoch = self.run().step_run(step).epoch
            value = f"{self.run().id}|{step}|{epoch}"
            for call in self.stub.calls_to("chat.postMessage"):
                if value in json.dumps(call.params.get("blocks") or []):
                    return value
            return None

        return wait_until(find, timeout=30, what=f"the gate message of {step}")


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Bot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    config = write_config(
        f"channels: {{operations: C0OPS}}\nclusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    b = Bot(config=config, env=bot_env, stub=slack_stub)
    b.start()
    yield b
    b.stop()


def test_sigkill_at_any_point_loses_nothing_and_repeats_nothing(bot: Bot, sim_eks: Any) -> None:
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
    assert run.step_run("snapshot-pre").state == "interrupted" and run.state == "paused"
    snapshots = bot.store()
    assert snapshots.snapshots() == []  # nothing ran again by itself
    snapshots.close()
    broadcast = [c for c in bot.stub.calls_to("chat.postMessage") if c.params.get("reply_broadcast")]
    assert len(broadcast) == 1 and "was interrupted" in broadcast[0].params["text"]
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
    assert gates and max(gates.values()) == 1
    # Each post of the run is exactly one claimed message key (claimed before posting, so a
    # restart finds it claimed and does not post again).
    store = bot.store()
    keys = [k for k in store.messages(bot.run().id) if not k.endswith(":retired")]
    store.close()
    card_ts = bot.stub.calls_to("chat.postMessage")[posts.index(cards[0])].response["ts"]
    run_posts = [p for p in posts if p.get("thread_ts") == card_ts or p is cards[0]]
    assert len(run_posts) == len(keys) == len(set(keys))
    # Every approval is in the database, once.
    approvals = [(a.step_id, a.phase, a.user_id) for a in bot.run().approvals]
    assert len(approvals) == len(set(approvals))
    assert ("control-plane", "start", SHADOW) in approvals and (
        "control-plane",
        "start",
        PRIMARY,
    ) in approvals
