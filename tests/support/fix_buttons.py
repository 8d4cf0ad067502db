"""What the Fix… button tests share (tests/frontdoor/test_known_issue_fix*.py): the bot on the HTTP
front door against the Slack stub and the `sim_eks` cluster, its clock the sim's; waiting on a
condition while the sim is stepped; the known-issue posts that carry a Fix… button and its value."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.core.duties import Duties, Lane
from bot.frontdoor.acting import JOBS, JobDuty
from bot.frontdoor.watching import WATCHES
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

PRIMARY, SHADOW, STRANGER = "U0PRIMARY", "U0SHADOW", "U0STRANGER"
OPS = "C0OPS"
FIX = "known_issue_fix"
#: The assembled duty engine's beats in these tests: a job's heartbeat and a watch's card edits
#: every fraction of a second, so that a step driven by hand ends within a few sim steps.
DUTY_OPTIONS = {
    JOBS: {"heartbeat_seconds": 0.5},
    WATCHES: {"publish_seconds": 0.3, "heartbeat_seconds": 0.5},
}


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 60.0, what: str, tick: Callable[[], None] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if tick is not None:
            tick()
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def approve_and_complete(
    bot: Bot, gate: str, step: str, *, run_id: str, runner: JobDuty, sim: SimCluster
) -> None:
    """The fix's one-step run approved at `gate` by the primary, then by the shadow (at the gate
    as the first approval left it), and driven until it completes: the job runner scanned and the
    sim stepped 5 s at a time."""
    assert bot.click(PRIMARY, gate) is None
    assert bot.click(SHADOW, bot.gate(step)) is None

    def drive() -> None:
        runner.scan()
        sim.control.advance(5)
        time.sleep(0.2)

    wait_for(
        lambda: (r := bot.services.store.run_rows(run_id)) and r[0].state == "completed",
        what="the fix's run to complete",
        tick=drive,
        timeout=120,
    )


def approve_with_force(bot: Bot, step: str, user: str, reason: str) -> str:
    """Click the gate's "Approve with force…" as `user` and submit its modal with `reason`; the
    modal's HTTP answer ("" when accepted)."""
    opened = len(bot.stub.calls_to("views.open"))
    refused = bot.click(user, bot.gate(step), "gate_force")
    assert refused is None, refused
    view = bot.stub.calls_to("views.open")[opened].params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert view["callback_id"] == "gate_force_reason"
    jobs = bot.pool.count()
    result = bot.front.submit_view(
        user,
        callback_id="gate_force_reason",
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": reason}}},
    )
    assert result.status == 200
    if not result.body:
        bot.pool.wait_idle(jobs)
    return result.body


def complete(bot: Bot, *, run_id: str, runner: JobDuty, sim: SimCluster, state: str = "completed") -> None:
    """Drive the run's job until the run is `state`: the job runner scanned and the sim stepped 5 s
    at a time."""

    def drive() -> None:
        runner.scan()
        sim.control.advance(5)
        time.sleep(0.2)

    wait_for(
        lambda: (r := bot.services.store.run_rows(run_id)) and r[0].state == state,
        what=f"the run to be {state}",
        tick=drive,
        timeout=120,
    )


@contextmanager
def fix_bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim: SimCluster,
    tmp_path: Path,
    *,
    more_clusters: Sequence[str] = (),
) -> Iterator[tuple[Bot, Path]]:
    """The bot with `prod` = the sim, the roster's primary and shadow known to the stub;
    `more_clusters` are configured too, each the same sim (a command must then name one)."""
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    clusters = "".join(
        f"  {name}: {{kubeconfig: {kubeconfig}, context: sim}}\n" for name in ("prod", *more_clusters)
    )
    cfg = write_config(f"channels: {{operations: {OPS}}}\nclusters:\n{clusters}")
    for user in (PRIMARY, SHADOW, STRANGER):
        slack_stub.users[user] = {"id": user}
    clock = lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC)  # noqa: E731
    pool = TrackedPool(4)
    settings = load_settings(cfg, slack_env(slack_stub.api_url))
    with start_front(
        settings, slack_stub, workers=pool, threads=8, clock=clock, duty_options=DUTY_OPTIONS
    ) as front:
        yield Bot(front=front, pool=pool), kubeconfig


def scanned_by_hand(bot: Bot) -> tuple[Duties, Lane, Lane]:
    """The bot's own duty engine and its watch and job lanes, scanned by the test: the replica is
    on its own (solo) and its timers never start, so nothing but the test scans them (a row
    started is not woken either)."""
    services = bot.services
    services.leadership.go_solo()
    return services.duties, services.duties.lanes[WATCHES], services.duties.lanes[JOBS]


def fix_posts(stub: SlackStub) -> list[dict[str, Any]]:
    """Known-issue posts carrying a Fix… button, as Slack accepted them."""
    out = []
    for c in stub.calls_to("chat.postMessage"):
        blocks = c.params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
        if c.response.get("ok") and any(
            el.get("action_id") == FIX for b in blocks if b["type"] == "actions" for el in b["elements"]
        ):
            out.append({**c.params, "blocks": blocks})
    return out


def fix_button(post: dict[str, Any]) -> str:
    return next(
        str(el["value"])
        for b in post["blocks"]
        if b["type"] == "actions"
        for el in b["elements"]
        if el["action_id"] == FIX
    )
