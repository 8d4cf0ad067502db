"""A known issue's Fix… button (issue 25), end to end on the sim through the HTTP front door with the
real slack_sdk client against the Slack stub (which validates every Block Kit payload): a watch
posts the finding with its button; someone off the roster is refused; a double click starts one
run; the run's gate is passed by two people; the restart runs against the sim and the fault is gone.

The fault: payments-api's vault-agent cannot authenticate in the pods it runs now (a not_ready
fault on those pods' names), which is KI004; its fix is a rollout restart, whose new pods (new
names) authenticate. The bot's clock is the sim's, stepped with `advance`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.core.watches.service import subject
from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import (
    FIX,
    OPS,
    PRIMARY,
    SHADOW,
    STRANGER,
    fix_bot,
    fix_button,
    fix_posts,
    scanned_by_hand,
    wait_for,
)
from tests.support.slack_stub import SlackStub


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim_eks: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim_eks, tmp_path) as started:
        yield started


def _pods(core: client.CoreV1Api) -> list[Any]:
    return [
        p
        for p in core.list_namespaced_pod("payments", label_selector="app=payments-api").items
        if not p.metadata.deletion_timestamp
    ]


def test_a_known_issue_post_carries_a_fix_whose_run_approved_by_two_clears_the_fault(
    bot: tuple[Bot, Path], sim_eks: SimCluster
) -> None:
    front, kubeconfig = bot
    services = front.services
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)

    # The bot's watches and jobs, driven by the lanes of its own engine (scanned by hand).
    duties, watch_runner, job_runner = scanned_by_hand(front)
    try:
        # The vault-agent of the pods payments-api runs now cannot authenticate: KI004.
        old = sorted(p.metadata.name for p in _pods(core))
        assert old
        prefix = old[0].rsplit("-", 1)[0] + "-"  # the ReplicaSet's pods: payments-api-<hash>-
        assert all(name.startswith(prefix) for name in old)
        sim_eks.control.inject_fault(
            {
                "type": "not_ready",
                "match": {"namespace": "payments", "name_prefix": prefix, "container": "vault-agent"},
                "never_ready": "vault-agent: error authenticating: permission denied",
            }
        )
        row = services.watches.start(cluster="prod", channel=OPS, started_by=PRIMARY, namespaces=["payments"])
        assert watch_runner.scan() == [row.id]

        def step() -> None:
            sim_eks.control.advance(30)
            time.sleep(0.2)

        posts = wait_for(
            # KI004's own: another rule's post about the same workload (KI002, its istio-proxy) may
            # come first.
            lambda: [
                p
                for p in fix_posts(front.stub)
                if "`payments/payments-api`" in p["text"] and "*KI004*" in p["text"]
            ],
            what="KI004's post with its Fix button",
            tick=step,
            timeout=90,
        )
        post = posts[0]
        assert post["text"].startswith(":mag: Known issue *KI004*")  # the text stays as the fallback
        assert post["thread_ts"]  # in the card's thread
        value = fix_button(post)
        assert len(value) <= 2000
        assert value.startswith(f"{row.id}|rule:KI004:payments/Deployment/payments-api:")
        note = json.dumps(post["blocks"])
        assert "restart workloads=deployment/payments/payments-api" in note
        assert "*What to do*" in note

        # Not on the roster: refused ephemerally, nothing started.
        refused = front.click(STRANGER, value, FIX)
        assert refused is not None
        assert "only people on the roster can start a fix" in refused
        assert not services.store.runs()

        # A double click: two deliveries (two trigger ids), one run; the second is told which.
        jobs = front.pool.count()
        assert front.front.click(PRIMARY, value, FIX).status == 200
        assert front.front.click(PRIMARY, value, FIX).status == 200
        front.pool.wait_idle(jobs + 1)
        wait_for(lambda: front.pool.count() >= jobs + 2, what="both clicks worked off")
        front.pool.wait_idle(jobs + 1)
        runs = services.store.runs()
        assert len(runs) == 1, runs
        run_id = runs[0].id
        said = [str(r.get("text", "")) for r in front.stub.responses]
        # The second click is worked off while the first starts the run, or after: told either way.
        again = [s for s in said if f"a fix for this finding was already asked by <@{PRIMARY}>: " in s]
        assert len(again) == 1, said
        assert f"run `{run_id}`" in again[0] or "a run (starting now)" in again[0]
        fixes = [e for e in services.store.audit_entries() if e.subcommand == "action" and e.outcome == "ok"]
        assert [e.user_id for e in fixes] == [PRIMARY]
        thread = [
            p
            for p in front.posts()
            if p.get("thread_ts") == post["thread_ts"] and p["text"].startswith(":wrench:")
        ]
        assert len(thread) == 1
        assert f"run `{run_id}`" in thread[0]["text"]

        # The one-step run's gate: two people, the dry run shown; then the restart runs on the sim.
        gate = front.gate("restart")
        gate_post = next(p for p in reversed(front.posts()) if gate in json.dumps(p.get("blocks") or []))
        assert "payments-api" in json.dumps(gate_post.get("blocks"))
        assert front.click(PRIMARY, gate) is None
        assert front.click(SHADOW, front.gate("restart")) is None

        def drive() -> None:
            job_runner.scan()
            sim_eks.control.advance(5)
            time.sleep(0.2)

        wait_for(
            lambda: (r := services.store.run_rows(run_id)) and r[0].state == "completed",
            what="the fix's run to complete",
            tick=drive,
            timeout=120,
        )
        # The fault is gone: payments-api's pods are new ones, every container Ready.
        pods = wait_for(
            lambda: (ps := _pods(core)) and not any(p.metadata.name.startswith(prefix) for p in ps) and ps,
            what="the old pods gone",
            tick=drive,
        )
        for p in pods:
            assert all(cs.ready for cs in p.status.container_statuses), p.metadata.name
        # Audited like the rest of the upgrade: the click's command, and both approvals.
        approvals = services.store.run_rows(run_id)
        assert approvals is not None
        assert {a.user_id for a in approvals[2]} >= {PRIMARY, SHADOW}
        assert services.store.messages(subject(row.id))  # the finding's post is on record
    finally:
        duties.shutdown()
