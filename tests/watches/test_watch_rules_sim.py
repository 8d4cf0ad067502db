"""Issue 14's rules in issue 13's stream, on the sim: faults planted in `eks-nodegroups` are explained
in the watch's thread (title, explanation, remediation, links) once per rule, workload and episode,
and a restarted watch driver (a fresh state seeded from the stored summary) repeats none of them.

The bot's clock is the sim's (frozen, stepped with `advance`), so "not Ready for longer than five
minutes" is five simulated minutes."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.adapters.store import Store
from bot.core.rules import load_rules
from bot.core.watches.service import subject
from bot.frontdoor.watching import WatchSource
from bot.records import ClusterConfig
from bot.settings import BUILTIN_RULES
from bot.sim import SimCluster
from tests.support.forbidden import LogsForbidden
from tests.support.slack_stub import SlackStub
from tests.support.watch_harness import WatchHarness
from tests.support.watch_harness import step as _step

CHANNEL = "C0RULES"
RULES = load_rules([BUILTIN_RULES])
TITLES = {r.id: r.title for r in RULES}
#: What the faults make the rules find: (rule id, the workload or object the post names).
EXPECTED = {
    ("KI012", "Deployment `checkout/checkout`"),
    # The scenario's own: sidecars still on the old proxy log the workload-spiffe-uds error, and
    # payments-worker's vault-agent never authenticates.
    ("KI002", "Deployment `checkout/checkout`"),
    ("KI002", "Deployment `payments/payments-worker`"),
    ("KI004", "Deployment `payments/payments-worker`"),
    ("KI005", "DaemonSet `kube-system/kube-proxy`"),
    ("KI007", "Pod `logging/es-1`"),
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    yield s
    s.close()


def _wait(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _rule_posts(stub: SlackStub, card_ts: str) -> list[str]:
    return [
        m["text"]
        for m in stub.posted(CHANNEL)
        if m.get("thread_ts") == card_ts and m["text"].startswith(":mag: Known issue")
    ]


def _found(posts: list[str]) -> Counter[tuple[str, str]]:
    """(rule id, the post's second line: the workload it names) per post."""
    out: Counter[tuple[str, str]] = Counter()
    for text in posts:
        first, second = text.splitlines()[:2]
        rule = first.split("*")[1]
        out[(rule, second.split(" (")[0].split(" — ")[0])] += 1
    return out


def test_planted_faults_are_explained_once_per_workload_and_episode_across_a_driver_restart(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    clock = lambda: datetime.fromtimestamp(sim_eks.core.clock.now(), UTC)  # noqa: E731
    first = WatchHarness(store, slack_stub, kubeconfig, "p1", clock=clock, rules=RULES)
    row = first.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE")
    second: WatchHarness | None = None
    try:
        assert first.runner.scan() == [row.id]
        card = _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts, what="the card")
        # KI005: kube-proxy's image tag does not exist: the new node's kube-proxy cannot pull it.
        sim_eks.control.inject_fault(
            {"type": "image_pull_error", "match": {"namespace": "kube-system", "container": "kube-proxy"}}
        )
        sim_eks.control.add_node("ng-shared")
        # KI012: Envoy runs out of open files and crash-loops, saying so in its log.
        sim_eks.control.inject_fault(
            {
                "type": "crash_loop",
                "match": {"namespace": "checkout", "name_prefix": "checkout-", "container": "istio-proxy"},
                "crash_after": "5s",
                "crash_logs": ["warning envoy main listener accept failure: Too many open files"],
            }
        )
        # KI007: a Multi-Attach error for the Elasticsearch volume.
        sim_eks.control.inject_fault(
            {
                "type": "event",
                "object": {"kind": "Pod", "namespace": "logging", "name": "es-1"},
                "event_type": "Warning",
                "reason": "FailedAttachVolume",
                "component": "attachdetach-controller",
                "message": 'Multi-Attach error for volume "pvc-es-1" Volume is already exclusively attached'
                " to one node and can't be attached to another",
            }
        )
        # KI004 is the scenario's own: payments-worker's vault-agent never becomes Ready; it is a
        # known issue once it has lasted five (simulated) minutes.
        _step(sim_eks, 30, steps=14, driver=first.runner.drivers[row.id])
        try:
            _wait(
                lambda: set(_found(_rule_posts(slack_stub, card))) >= EXPECTED,
                timeout=30,
                what="every planted known issue in the thread",
            )
        except AssertionError:
            raise AssertionError(f"found only {_found(_rule_posts(slack_stub, card))}") from None
        # The driver dies; another takes the watch over (the old heartbeat is stale in sim time),
        # lists again from a state seeded with the stored summary, while the faults go on.
        first.runner.shutdown()
        sim_eks.control.advance(10)
        second = WatchHarness(store, slack_stub, kubeconfig, "p2", clock=clock, rules=RULES)
        assert second.runner.scan() == [row.id]
        _wait(lambda: second.runner.drivers[row.id].published >= 3, what="publishes after the restart")
        _step(sim_eks, 30, steps=6, driver=second.runner.drivers[row.id])
        second.service.request_end(row.id, by="U0ALICE")
        _wait(lambda: (w := store.watch(row.id)) and w.state == "ended", what="the end")
        second.runner.drivers[row.id].thread.join(timeout=15)
        posts = _rule_posts(slack_stub, card)
        found = _found(posts)
        assert set(found) == EXPECTED, found
        repeated = {k: n for k, n in found.items() if n > 1}
        assert not repeated, repeated
        for rule, _where in EXPECTED:
            text = next(t for t in posts if t.startswith(f":mag: Known issue *{rule}*"))
            assert TITLES[rule] in text
            assert "*What to do*" in text
            assert "Evidence: <https://" in text
        # Keyed on (rule, workload, episode) in the database, never on text.
        keys = [k for k in store.messages(subject(row.id)) if k.startswith("rule:")]
        assert sorted(k.rsplit(":", 1)[0] for k in keys) == sorted(
            f"rule:{r}:{w}" for r, w in _keys_of(found)
        )
    finally:
        first.runner.shutdown()
        if second is not None:
            second.runner.shutdown()


def _keys_of(found: Counter[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for rule, where in found:
        kind, name = where.split(" ", 1)
        namespace, _, short = name.strip("`").rpartition("/")
        out.append((rule, f"{namespace}/{kind}/{short}"))
    return out


def test_a_watch_that_may_not_read_logs_says_so_once_and_asks_no_more(
    sim_eks: SimCluster, store: Store, slack_stub: SlackStub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    clock = lambda: datetime.fromtimestamp(sim_eks.core.clock.now(), UTC)  # noqa: E731
    sources: list[LogsForbidden] = []

    class Refused(WatchHarness):
        def connect(self, name: str) -> WatchSource:
            sources.append(
                LogsForbidden(Cluster.connect(ClusterConfig(name=name, kubeconfig=self.kubeconfig)))
            )
            return sources[-1]  # type: ignore[return-value]

    harness = Refused(store, slack_stub, kubeconfig, "p1", clock=clock, rules=RULES)
    row = harness.service.start(cluster="sim", channel=CHANNEL, started_by="U0ALICE")
    try:
        assert harness.runner.scan() == [row.id]
        card = _wait(lambda: (ref := store.messages(subject(row.id)).get("card")) and ref.ts, what="the card")
        # KI012 is matched on the log text: a crash loop saying "Too many open files".
        sim_eks.control.inject_fault(
            {
                "type": "crash_loop",
                "match": {"namespace": "checkout", "name_prefix": "checkout-", "container": "istio-proxy"},
                "crash_after": "5s",
                "crash_logs": ["warning envoy main listener accept failure: Too many open files"],
            }
        )
        driver = harness.runner.drivers[row.id]
        _step(sim_eks, 30, steps=12, driver=driver)
        _wait(lambda: sum(s.log_reads for s in sources) >= 1, what="a log read")
        _step(sim_eks, 30, steps=4, driver=driver)
    finally:
        harness.runner.shutdown()
    assert sum(s.log_reads for s in sources) == 1  # refused once: no more are asked for
    said = [r.getMessage() for r in caplog.records if "container logs not read (forbidden)" in r.getMessage()]
    assert len(said) == 1
    assert "`upgrade-bot-pod-logs`" in said[0]
    # The rule that matches the log text cannot match without it.
    found = _found(_rule_posts(slack_stub, card))
    assert ("KI012", "Deployment `checkout/checkout`") not in found
