"""The `kill -9` harness: a real `upgrade-bot run --http` on the sim, killed with SIGKILL in the
middle of a long action and started again on the same database (issue 45, item 6).

What the crash tests share, in one place: the bot with one team plan and the sim as its cluster
`prod` (with the sim's EKS as its provider when the plan drives EKS), the two approvals of a gate,
and the crash itself — SIGKILL, what happens in the world while the bot is down, the start again,
and the wait until the step the crash cut is interrupted (a long action is never continued
silently: people resume it). Each test keeps its own assertions.

The process itself is `tests.support.bot_process.RunBot` (its start, `kill9` and stop).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bot.records import StepState
from tests.support.aws import aws_env, provider_yaml
from tests.support.bot_process import PRIMARY, SHADOW, RunBot, team_bot
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

#: How long a restarted bot may take to start again and interrupt the step the crash cut.
INTERRUPTED_WITHIN = 60.0
#: The crash tests' timing of the long duties (`duties:` in the configuration): a job or a watch
#: whose driver was killed is taken for gone after 4 s without a beat and found by the next scan
#: (a second at most), not after the defaults' 15 s and a 5 s scan, which every test would wait out.
#: Eight beats fit in the interval: a live driver on two busy shared cores is never taken for gone.
SHORT_DUTIES = "duties: {scan_seconds: 1, heartbeat_seconds: 0.5, stale_after_seconds: 4}\n"


@contextlib.contextmanager
def crash_bot(
    write_config: Callable[..., Path],
    stub: SlackStub,
    env: dict[str, str],
    tmp_path: Path,
    *,
    plans: Mapping[str, str],
    sim: Any,
    sim_kubeconfig: Callable[[Any], Path],
    eks: bool = False,
) -> Iterator[RunBot]:
    """`upgrade-bot run --http` with the team's `plans` and the sim as the cluster `prod` (`eks`:
    with the sim's EKS as its provider, and the AWS environment that reaches it). Stopped on the
    way out."""
    cluster = f"kubeconfig: {sim_kubeconfig(sim)}, context: sim"
    if eks:
        cluster += f", provider: {provider_yaml(sim)}"
        env = {**env, **aws_env(tmp_path)}
    with team_bot(
        write_config, stub, env, tmp_path, plans=plans, cluster=f"{{{cluster}}}", extra_config=SHORT_DUTIES
    ) as bot:
        yield bot


def approve(bot: RunBot, step: str, *people: str) -> None:
    """Each of `people` (the primary and the shadow unless named) clicks the step's gate."""
    for who in people or (PRIMARY, SHADOW):
        bot.click(who, bot.gate(step))


def crash(bot: RunBot, *, while_down: Callable[[], object] = lambda: None) -> None:
    """SIGKILL the bot, let `while_down` happen (the world goes on), and start it again on the
    same database."""
    bot.kill9()
    while_down()
    bot.start()


def crash_mid_step(
    bot: RunBot,
    step: str,
    *,
    while_down: Callable[[], object] = lambda: None,
    timeout: float = INTERRUPTED_WITHIN,
) -> None:
    """`crash`, then wait until the restarted bot interrupted `step` (it waits for people)."""
    crash(bot, while_down=while_down)
    wait_until(
        lambda: bot.run().step_run(step).state is StepState.INTERRUPTED,
        timeout=timeout,
        what="the step to be interrupted (never continued silently)",
    )
