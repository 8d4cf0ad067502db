"""Two real `upgrade-bot run --http` replicas on one PostgreSQL, the sim and the Slack stub: `kill -9`
of the leader in the middle of a drain (issues 15 and 16). The other replica leads within the lease
time; the drain's step is interrupted and waits for people (it is never continued silently by the
new leader); the approvals given before stay; `resume` and a fresh approval continue the SAME job
from its recorded progress on the new leader — every pod evicted exactly once."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.people import StaticDirectory
from bot.core.runs.service import RunService
from bot.records import StepState
from tests.support.bot_process import BotProcess
from tests.support.crash import SHORT_DUTIES
from tests.support.postgres import drop_every_table
from tests.support.replicas import LEASE_SECONDS, RENEW_SECONDS, Replicas, leader_yaml
from tests.support.secrets import SIGNING_SECRET
from tests.support.signing import block_actions_body, post, signed_headers
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PRIMARY, SHADOW, COORD = "U0PRIMARY", "U0SHADOW", "U0COORD"
GROUP = "ng-shared"
TAKEOVER_BOUND = LEASE_SECONDS + RENEW_SECONDS + 2.0
PLAN = f"""\
name: drain-failover
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T02:00", timezone: Asia/Tokyo}}
channels: {{operations: C0OPS}}
roster:
  primary: [{PRIMARY}]
  shadow: [{SHADOW}]
  coordinator: [{COORD}]
steps:
  - id: drain-shared
    title: Drain {GROUP}
    gate: {{approve: [primary, shadow]}}
    actions: [{{drain: {{nodegroup: {GROUP}, allow_local_storage: "true", parallel: "2", timeout: 6s}}}}]
"""


@pytest.fixture
def replicas(
    postgres_url: str,
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[Replicas]:
    drop_every_table(postgres_url)
    plans = tmp_path / "team" / "plans"
    plans.mkdir(parents=True)
    (plans / "drain-failover.yaml").write_text(PLAN, encoding="utf-8")
    config = write_config(
        f"roster: {{primary: [{PRIMARY}], shadow: [{SHADOW}], coordinator: [{COORD}]}}\n"
        f"database_url: {postgres_url}\n"
        "channels: {operations: C0OPS}\n"
        f"templates_dir: {tmp_path / 'team'}\n"
        f"clusters:\n  prod: {{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}\n"
        + leader_yaml()
        + SHORT_DUTIES,
        roster=False,
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    group = Replicas(config=config, env=bot_env, stub=slack_stub)
    try:
        group.start(2)
        yield group
    finally:
        group.stop_all()
        drop_every_table(postgres_url)


def command(member: BotProcess, stub: SlackStub, text: str, user: str = PRIMARY) -> str:
    before = len(stub.responses)
    in_ops = len([c for c in stub.calls_to("chat.postMessage") if c.params["channel"] == "C0OPS"])
    member.send_command(text, user)

    def reply() -> str | None:
        if len(stub.responses) > before:
            return str(stub.responses[before]["text"])
        posted = [c for c in stub.calls_to("chat.postMessage") if c.params["channel"] == "C0OPS"][in_ops:]
        plain = [c for c in posted if not c.params.get("thread_ts") and "Upgrade run" not in c.params["text"]]
        return str(plain[0].params["text"]) if plain else None

    return str(stub.wait_for(reply, timeout=30))


def run(group: Replicas) -> Any:
    (row,) = group.store.runs()
    return RunService(store=group.store, directory=StaticDirectory(), clock=lambda: row.updated_at).load(
        row.id
    )


def approve(group: Replicas, via: BotProcess) -> None:
    """The primary and the shadow approve the drain's open gate, through `via`."""
    for n, who in enumerate((PRIMARY, SHADOW)):
        current = run(group)
        epoch = current.step_run("drain-shared").epoch
        value = f"{current.id}|drain-shared|{epoch}"
        body = block_actions_body(
            user=who,
            value=value,
            response_url=group.stub.response_url(f"c-{epoch}-{n}"),
            trigger_id=f"t{epoch}-{n}",
        )
        version = current.version
        assert post(f"{via.url}/slack/events", body, signed_headers(body, SIGNING_SECRET)).status == 200
        wait_until(lambda v=version: run(group).version > v, timeout=30, what=f"{who}'s approval to count")


@pytest.mark.slow
def test_kill9_of_the_leader_mid_drain_the_other_leads_and_the_step_waits_for_people(
    replicas: Replicas, sim_eks: Any
) -> None:
    first, other = replicas.members
    assert replicas.wait_leader() is first
    assert "loaded" in command(other, replicas.stub, "plan load drain-failover")
    assert "started" in command(other, replicas.stub, "start drain-failover")
    approve(replicas, other)  # clicked on the follower: the leader drives the job
    wait_until(lambda: sim_eks.control.evictions(), timeout=60, what="the leader's first evictions")
    (job,) = replicas.store.jobs()
    assert job.owner.startswith(f"{first.process.pid}-")  # type: ignore[union-attr]

    sent = replicas.signal(first, signal.SIGKILL)
    new, took = replicas.failover(first, sent)
    assert new is other
    assert took <= TAKEOVER_BOUND
    evicted_at_kill = len(sim_eks.control.evictions())
    wait_until(
        lambda: run(replicas).step_run("drain-shared").state is StepState.INTERRUPTED,
        timeout=30,
        what="the new leader to leave the step waiting for people",
    )
    assert run(replicas).state.value == "paused"
    # The job is interrupted once its dead driver's heartbeat is stale, and nothing more happens.
    wait_until(
        lambda: replicas.store.job(job.id).state == "interrupted",  # type: ignore[union-attr]
        timeout=40,
        what="the job to be interrupted",
    )
    sim_eks.control.advance(120)  # the pods evicted before the kill finish terminating
    time.sleep(2 * RENEW_SECONDS + 5)
    assert len(sim_eks.control.evictions()) == evicted_at_kill
    # The approvals given before the kill are all there.
    approvals = [(a.user_id, a.phase) for a in run(replicas).approvals]
    assert (PRIMARY, "start") in approvals
    assert (SHADOW, "start") in approvals

    assert "active" in command(other, replicas.stub, "resume")
    approve(replicas, other)

    answered: list[str] = []

    def drained() -> bool:
        sim_eks.control.advance(30)
        # The scenario's payments-api budget holds its pod: past the timeout the coordinator says.
        row = replicas.store.job(job.id)
        if row is not None and row.choice and not row.decision and row.choice not in answered:
            answered.append(row.choice)
            reply = command(
                other, replicas.stub, f"choose {row.id} delete --reason held by its PDB", user=COORD
            )
            assert "recorded" in reply
        return run(replicas).step_run("drain-shared").state is StepState.SUCCEEDED

    wait_until(drained, timeout=180, interval=1.0, what="the drain to finish on the new leader")
    counts = Counter(e["uid"] for e in sim_eks.control.evictions())
    assert [uid for uid, n in counts.items() if n > 1] == []  # every pod evicted once, across replicas
    (same,) = replicas.store.jobs(states=("live", "interrupted", "done"))
    assert same.id == job.id
    assert same.owner == "" or same.owner.startswith(f"{other.process.pid}-")  # type: ignore[union-attr]
