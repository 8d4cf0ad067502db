"""Readiness that flaps, on the sim: a watch through the real kube adapter, the real Slack client
against the Slack stub and a real SQLite store. podinfo's two pods go not Ready for 20 s three
times (the sim's `not_ready` fault, injected and cleared): each spell is far shorter than the
not-ready grace, so no pod is ever unhealthy, and before `Summary.flapping` the card said nothing
of them. Now the card names the workload."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.watches.service import subject
from bot.sim import SimCluster
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import WatchHarness, published, step, wait

CHANNEL = "C0WATCH"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def test_pods_in_and_out_of_ready_are_named_on_the_card(
    sim_factory: Callable[..., SimCluster], store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    sim = sim_factory("gitops", speed=0.0, seed=1)
    harness = WatchHarness(store, slack_stub, sim.write_kubeconfig(tmp_path / "kubeconfig"))
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE", namespaces=("apps",))
    try:
        assert harness.runner.scan() == [row.id]
        card = wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts)
        driver = harness.runner.drivers[row.id]
        step(sim, 60, steps=2, driver=driver)  # Ready well after they started
        for _ in range(3):
            fault = sim.control.inject_fault(
                {"type": "not_ready", "match": {"namespace": "apps", "name_prefix": "podinfo"}}
            )
            step(sim, 10, steps=2, driver=driver)
            sim.control.clear_fault(fault)
            step(sim, 10, steps=4, driver=driver)
        summary = published(store, row.id)
        assert summary.unhealthy == ()  # no spell outlasted the grace
        assert summary.flapping_pods == 2
        [flap] = summary.flapping
        assert (flap.namespace, flap.name, flap.pods, flap.spells) == ("apps", "podinfo", 2, 6)
        edits = [c.params for c in slack_stub.calls_to("chat.update") if c.params.get("ts") == card]
        assert any(
            "*Readiness flapping*: 2 pods not Ready again and again (3+ times in 10m) — apps/podinfo ×2 (6 times)"
            in str(e.get("text", ""))
            for e in edits
        )
    finally:
        harness.runner.shutdown()
