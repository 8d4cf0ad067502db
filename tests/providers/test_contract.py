"""One behaviour, every cloud (issue 46 item 5): the same runbook step on each provider's facade,
driven through a real `upgrade-bot run --http` and its Slack stub, asserting the same things.

- a planted failure of the control plane's update fails the step with the cloud's reason and
  pauses the run (the plan's `on_failure: pause`);
- `kill -9` in the middle of the update call (the facade has acted, its answer is held back) and a
  resume never repeat the call: the facade counts exactly one;
- the gate shows the exact call, with the cluster and the version;
- the cards read alike: the same shape of line, the cloud's own words for its operation.

Parametrised over the three providers: EKS (boto3 on the sim's AWS APIs), AKS
(azure-mgmt-containerservice on the sim's ARM surface) and GKE (google-cloud-container's REST
transport on the sim's GKE surface).
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.records import RunState, StepState
from bot.sim.world.scenario import Scenario
from tests.support.aws import aws_calls, aws_env, eks_scenario_in_step, provider_yaml
from tests.support.azure import (
    AKS_NAME,
    RESOURCE_GROUP,
    SUBSCRIPTION,
    aks_scenario,
    azure_calls,
    azure_post,
)
from tests.support.bot_process import PRIMARY, SHADOW, RunBot, team_bot, team_plan
from tests.support.gcp import GKE_NAME, LOCATION, PROJECT, gke_calls, gke_post, gke_scenario
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until


def _aws_post(sim: Any, what: str, body: dict[str, str] | None = None) -> None:
    request = urllib.request.Request(
        f"{sim.aws_url}/sim/{what}", data=json.dumps(body or {}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


@dataclass(frozen=True)
class Case:
    """What differs between the clouds; everything asserted is the same."""

    name: str
    scenario: Callable[..., Scenario]
    provider: Callable[[Any], str]
    env: Callable[[Path], dict[str, str]]
    action: str
    #: The facade's name for the update call, and its call counts.
    call: str
    calls: Callable[[Any], dict[str, int]]
    post: Callable[..., None]
    #: The gate's exact call, and the step's end, as the cloud words them.
    gate: str
    done: str
    failed: str


def _aks_provider(sim: Any) -> str:
    return (
        f"{{aks: {{subscription_id: {SUBSCRIPTION}, resource_group: {RESOURCE_GROUP}, name: {AKS_NAME}, "
        f"endpoint_url: '{sim.provider_url('aks')}'}}}}"
    )


def _gke_provider(sim: Any) -> str:
    return (
        f"{{gke: {{project: {PROJECT}, location: {LOCATION}, name: {GKE_NAME}, "
        f"endpoint_url: '{sim.provider_url('gke')}'}}}}"
    )


CASES = [
    Case(
        name="eks",
        scenario=eks_scenario_in_step,
        provider=provider_yaml,
        env=aws_env,
        action='eks-update-cluster: {version: "1.25"}',
        call="UpdateClusterVersion",
        calls=aws_calls,
        post=_aws_post,
        gate="• would call eks:UpdateClusterVersion name=runbook-prod version=1.25 clientRequestToken=",
        done=r"control plane 1\.24 → 1\.25: EKS update \S+ Successful and the API server reports v1\.25\.\S+",
        failed=r"control plane 1\.24 → 1\.25: EKS update \S+ Failed — Unknown: the control plane update failed "
        r"\(planted by the scenario\)",
    ),
    Case(
        name="aks",
        scenario=lambda **kw: aks_scenario(api_block=False, **kw),
        provider=_aks_provider,
        env=lambda tmp: {},
        action='aks-upgrade-control-plane: {version: "1.26.6"}',
        call="ManagedClusters_CreateOrUpdate",
        calls=azure_calls,
        post=azure_post,
        gate="• would call ManagedClusters_CreateOrUpdate (PUT managedClusters/shop-prod) with "
        "kubernetesVersion=1.26.6",
        done=r"control plane 1\.25\.11 → 1\.26\.6: (AKS operation \S+|shop-prod's provisioningState) Succeeded "
        r"and the API server reports v1\.26\.6",
        failed=r"control plane 1\.25\.11 → 1\.26\.6: AKS operation \S+ Failed — UpgradeFailed: the control plane "
        r"upgrade failed \(planted by the scenario\)",
    ),
    Case(
        name="gke",
        scenario=gke_scenario,
        provider=_gke_provider,
        env=lambda tmp: {},
        action='gke-update-master: {version: "1.30.4-gke.1348000"}',
        call="UpdateMaster",
        calls=gke_calls,
        post=gke_post,
        gate="• would call UpdateMaster (POST projects/shop-project/locations/europe-west1/clusters/shop-prod:updateMaster) "
        "with masterVersion=1.30.4-gke.1348000",
        done=r"control plane 1\.29\.8-gke\.1031000 → 1\.30\.4-gke\.1348000: (GKE operation \S+|shop-prod's version) "
        r"Successful and the API server reports v1\.30\.4-gke\.1348000",
        failed=r"control plane 1\.29\.8-gke\.1031000 → 1\.30\.4-gke\.1348000: GKE operation \S+ Failed — INTERNAL: the "
        r"master upgrade failed \(planted by the scenario\)",
    ),
]

#: The shape every cloud's live card line has: what, from → to, the cloud's operation, its state.
CARD = re.compile(
    r"^control plane \S+ → \S+: (EKS update|AKS operation|GKE operation|\S+'s provisioningState|\S+'s version) \S* ?"
    r"(InProgress|Successful|Succeeded)"
)


def _plan(case: Case) -> str:
    return team_plan(
        "cp-only",
        f"""\
  - id: control-plane
    title: Update the control plane
    gate: {{approve: [primary, shadow]}}
    on_failure: pause
    actions: [{{{case.action}}}]
""",
    )


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    param: Case = request.param
    return param


@contextlib.contextmanager
def _bot(
    case: Case,
    sim: Any,
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[RunBot]:
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim)}, context: sim, provider: {case.provider(sim)}}}"
    with team_bot(
        write_config,
        slack_stub,
        {**bot_env, **case.env(tmp_path)},
        tmp_path,
        plans={"cp-only": _plan(case)},
        cluster=cluster,
    ) as bot:
        yield bot


def _approve(bot: RunBot) -> None:
    for who in (PRIMARY, SHADOW):
        bot.click(who, bot.gate("control-plane"))


def _progress(bot: RunBot) -> dict[str, Any]:
    job = bot.store().job_of_step(bot.run().id, "control-plane")
    return json.loads(job.progress) if job is not None and job.progress else {}


def _posted(slack_stub: SlackStub) -> list[str]:
    return [str(c.params.get("text", "")) for c in slack_stub.calls_to("chat.postMessage")]


def _cards(slack_stub: SlackStub) -> list[str]:
    """Every edit of the run's card, its blocks as text."""
    return [
        json.dumps(c.params.get("blocks", ""), ensure_ascii=False) for c in slack_stub.calls_to("chat.update")
    ]


def _live_lines(slack_stub: SlackStub) -> list[str]:
    """The card's lines of the job following the cloud's operation, in every edit so far."""
    return [
        line
        for card in _cards(slack_stub)
        for line in re.findall(r"control plane \S+ → [^\"\\]*", card)
        if re.search(
            r": (EKS update|AKS operation|GKE operation|\S+'s provisioningState|\S+'s version) ", line
        )
    ]


def test_kill9_in_the_middle_of_the_update_call_never_repeats_it(
    case: Case,
    sim_factory: Callable[..., Any],
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> None:
    sim = sim_factory(case.scenario(), speed=0.0, seed=1)
    with _bot(case, sim, write_config, slack_stub, bot_env, sim_kubeconfig, tmp_path) as bot:
        assert "loaded" in bot.command("plan load cp-only")
        assert "started" in bot.command("start cp-only")
        # The gate shows the exact call before anyone approves it.
        gate = wait_until(
            lambda: next((t for t in _posted(slack_stub) if case.gate in t), None),
            timeout=60,
            what="the gate's dry run",
        )
        assert case.gate in gate
        # The facade acts on the call but holds its answer: the bot dies mid-call.
        case.post(sim, "hold", {"operation": case.call})
        _approve(bot)
        wait_until(lambda: case.calls(sim).get(case.call, 0) == 1, timeout=60, what="the update call")
        bot.kill9()
        case.post(sim, "release")
        assert _progress(bot).get("intent", {}).get("call") == case.call  # stored before the call
        sim.control.advance(60)
        bot.start()
        wait_until(
            lambda: bot.run().step_run("control-plane").state is StepState.INTERRUPTED,
            timeout=60,
            what="the step to be interrupted (never continued silently)",
        )
        assert case.calls(sim)[case.call] == 1
        assert "active" in bot.command("resume")
        _approve(bot)

        def done() -> bool:
            # The sim's time in small steps until the card has shown the job following the
            # operation (a tick falls while it runs: it takes a minute or so of the sim's time and
            # the card is edited at each tick), then in large ones.
            sim.control.advance(60 if _live_lines(slack_stub) else 5)
            return bot.run().step_run("control-plane").state is StepState.SUCCEEDED

        wait_until(done, timeout=180, interval=0.5, what="the update to be followed to its end")
        assert case.calls(sim)[case.call] == 1  # exactly one update call, ever
        detail = bot.run().step_run("control-plane").note
        assert re.search(case.done, detail), detail
        # The cards read alike: every live line of the job has the same shape on every cloud.
        lines = _live_lines(slack_stub)
        assert lines, "no live card line of the job"
        assert all(CARD.match(line) for line in lines), lines


def test_a_planted_failure_fails_the_step_with_the_clouds_reason_and_pauses_the_run(
    case: Case,
    sim_factory: Callable[..., Any],
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> None:
    sim = sim_factory(case.scenario(fail_updates=["cluster"]), speed=0.0, seed=1)
    with _bot(case, sim, write_config, slack_stub, bot_env, sim_kubeconfig, tmp_path) as bot:
        assert "loaded" in bot.command("plan load cp-only")
        assert "started" in bot.command("start cp-only")
        _approve(bot)

        def failed() -> bool:
            sim.control.advance(60)
            return bot.run().step_run("control-plane").state is StepState.FAILED

        wait_until(failed, timeout=180, interval=0.5, what="the planted failure")
        run = bot.run()
        assert run.state is RunState.PAUSED
        assert re.search(case.failed, run.step_run("control-plane").note), run.step_run("control-plane").note
        assert case.calls(sim)[case.call] == 1
        # Said in the channel, with the cloud's reason.
        assert any(re.search(case.failed, t) for t in _posted(slack_stub))
