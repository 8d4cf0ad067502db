"""The typed decoder changes how fast a snapshot is taken, never what it says.

Each test takes the same frozen sim over real HTTP through the production path (the kube adapter
decoding pages into `schema` structs, the projection over them; the pods in a helper process that
hands back their rows as JSON: compressed into the stored body as they arrive, or read back as
tuples), and once through the
old one (`json.loads` of each page, the projection on raw dicts, kept in reference_projection.py),
then compares them section by section and record by record, so a difference names its record.
Scenarios: `small`, and `eks-nodegroups` before, during and after its upgrade (replaced nodes,
pods that crash-loop or fail to pull, Warning events).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bot.adapters.kube import Cluster
from bot.core.snapshots.projection import take_snapshot, to_json
from bot.core.snapshots.service import StreamedBody
from bot.records import ClusterConfig
from bot.sim import SimCluster
from tests.core.snapshots import reference_projection as reference

LABELS = ("eks.amazonaws.com/nodegroup", "alpha.eksctl.io/nodegroup-name")


def both_ways(kubeconfig: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    # One moment for both, and a window of Warning events wide enough to hold every one of them.
    now = datetime.now(UTC)
    config = ClusterConfig(name="sim", kubeconfig=kubeconfig)
    new = Cluster.connect(config)
    old = reference.JsonLoadsReader(Cluster.connect(config))
    try:
        typed = take_snapshot(new, label="x", taken_by="U1", now=now, events_since=timedelta(days=3650))
        streamed = StreamedBody()
        stored = take_snapshot(
            new, label="x", taken_by="U1", now=now, events_since=timedelta(days=3650), pods_to=streamed
        )
        loaded = reference.take_snapshot(
            old, label="x", taken_by="U1", now=now, events_since=timedelta(days=3650)
        )
    finally:
        new.close()
        old.close()
    # What `take_and_store` stores (the pod rows as the helper process encoded them, never decoded
    # here, compressed while they arrived) is byte for byte what the rows read back encode to.
    assert stored["pods"] == []
    assert zlib.decompress(streamed.finish(stored)) == to_json(typed)
    return typed, loaded


def assert_same(typed: dict[str, Any], loaded: dict[str, Any]) -> None:
    # What is stored is the same, byte for byte (pod rows are tuples in memory, arrays in JSON).
    assert msgspec.json.encode(typed) == msgspec.json.encode(loaded)
    # And record by record, so that a difference names its record.
    assert sorted(typed) == sorted(loaded)
    for section in sorted(loaded):
        mine, theirs = typed[section], loaded[section]
        if isinstance(theirs, list):
            assert len(mine) == len(theirs), section
            for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
                if section == "pods":
                    a = list(a)
                assert a == b, f"{section}[{i}]"
                # Same types too: the stored JSON must not turn 0 into 0.0, or "" into null.
                assert type(a) is type(b), f"{section}[{i}]"
                if isinstance(a, list):
                    assert [type(v) for v in a] == [type(v) for v in b], f"{section}[{i}]"
        else:
            assert mine == theirs, section


def test_a_small_cluster_snapshots_the_same_through_the_typed_decoder(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory("small", speed=0.0, seed=1)
    typed, loaded = both_ways(sim_kubeconfig(sim))
    assert typed["counts"]["pods"] > 0
    assert typed["counts"]["workloads"] > 0
    assert_same(typed, loaded)


@pytest.mark.parametrize("minutes_into_the_upgrade", [0, 20, 30])
def test_an_eks_cluster_snapshots_the_same_before_and_during_its_upgrade(
    minutes_into_the_upgrade: int,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> None:
    if minutes_into_the_upgrade:
        sim_eks.control.run_upgrade()
        for _ in range(minutes_into_the_upgrade // 5):
            sim_eks.control.advance("5m")
    typed, loaded = both_ways(sim_kubeconfig(sim_eks))
    assert typed["counts"]["nodes"] > 0
    assert typed["counts"]["pods"] > 0
    if minutes_into_the_upgrade:
        # During and after the upgrade is where the unusual records are: check there are some.
        statuses = {row[7] for row in typed["pods"]}
        assert statuses - {"Running"}, statuses
        assert typed["events"], "no Warning events half-way"
    assert_same(typed, loaded)
