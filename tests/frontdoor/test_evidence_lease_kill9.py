"""A silence lease across `kill -9` (issue 39's acceptance): the real `upgrade-bot run --http` drives a
drain step with `background: [alerts]` and `silence:` against the sim and the REAL Alertmanager.
Killed with SIGKILL while the silence is held, then started again on the same database: the dead
driver's job is interrupted and its silence cut to its 5-minute tail; it never outlives `max`, nor
the run's abort by more than the tail."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.adapters.alertmanager import Alertmanager
from bot.core.evidence.leases import HOLD, TAIL
from bot.records import SignalSource, Silence
from tests.support.bot_process import PRIMARY, SHADOW, team_bot, team_plan
from tests.support.crash import SHORT_DUTIES
from tests.support.observability import Observability
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

#: Clocks of two processes and a second's rounding in Alertmanager's answers.
SLACK = timedelta(seconds=5)
STEPS = """\
  - id: drain
    title: Drain ng-shared
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-shared, allow_local_storage: "true", timeout: 15m}}]
    background: [alerts]
    silence: {matchers: ['alertname="KubeNodeNotReady"'], max: 1h}
"""


def test_kill9_while_a_silence_is_held_cuts_it_to_its_tail_and_abort_keeps_it_there(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
    observability: Callable[..., Observability],
) -> None:
    obs = observability()
    am = Alertmanager(SignalSource(url=obs.alertmanager.url))
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim, alertmanager: {{url: {obs.alertmanager.url}}}}}"
    with team_bot(
        write_config,
        slack_stub,
        bot_env,
        tmp_path,
        plans={"lease": team_plan("lease", STEPS)},
        cluster=cluster,
        extra_config=SHORT_DUTIES,
    ) as bot:
        assert "loaded" in bot.command("plan load lease")
        assert "started" in bot.command("start lease")
        bot.click(PRIMARY, bot.gate("drain"))
        bot.click(SHADOW, bot.gate("drain"))
        run_id = bot.run_ids()[0]

        def ours() -> list[Silence]:
            return [s for s in am.silences() if s.created_by == f"upgrade-bot/{run_id}/drain"]

        wait_until(lambda: ours(), timeout=60, what="the drain's silence lease")
        [held] = ours()
        assert held.state == "active"
        assert held.ends_at <= datetime.now(UTC) + HOLD + SLACK
        assert held.ends_at - held.starts_at <= timedelta(hours=1)  # max

        bot.kill9()
        bot.start()
        # The dead driver's job is interrupted once its heartbeat is stale; its lease keeps its tail.
        wait_until(
            lambda: ours()[0].ends_at <= datetime.now(UTC) + TAIL + SLACK,
            timeout=120,
            what="the interrupted job's silence cut to its tail",
        )
        [cut] = ours()
        assert cut.id == held.id
        assert cut.starts_at == held.starts_at
        assert bot.run().step_run("drain").state.value == "interrupted"

        aborted = datetime.now(UTC)
        assert "abort" in bot.command("abort --reason lease test").lower()
        [after] = ours()
        assert after.ends_at <= aborted + TAIL + SLACK
        assert after.ends_at <= held.starts_at + timedelta(hours=1)
