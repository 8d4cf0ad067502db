"""A plan's snapshot and diff steps when a snapshot could not read a list (a 403): the snapshot
step says what it did not capture, and the diff step says what it could not compare. Without the
pods (or the nodes, or the workloads) "0 regressions" says nothing: the step fails, people decide."""

from __future__ import annotations

from pathlib import Path

from bot.adapters.store import Store
from bot.core.actions import BUILTIN
from bot.core.actions.base import ActionResult
from bot.core.runs.capabilities import action_context
from bot.errors import ClusterError
from bot.records import ActionCall, ActionRequest, ClusterConfig
from tests.support.diff_objects import NOW, base_objects
from tests.support.wire_cluster import WireCluster

ACTIONS = {spec.name: spec for spec in BUILTIN}


def steps(tmp_path: Path, cluster: WireCluster):  # type: ignore[no-untyped-def]
    ctx = action_context(
        store=Store.open(f"sqlite:///{tmp_path / 'bot.db'}"),
        clusters={"prod": ClusterConfig(name="prod")},
        connect_cluster=lambda _c: cluster,
        clock=lambda: NOW,
        restart_threshold=3,
        rules_paths=[],
    )

    def step(name: str, **args: str) -> ActionResult:
        run = ACTIONS[name].run
        assert run is not None
        return run(ctx, ActionRequest(run_id="R1", cluster="prod", call=ActionCall(name=name, args=args)))

    return step


def forbidden(resource: str) -> ClusterError:
    return ClusterError(f"cluster prod: the bot is not allowed to list {resource}", status=403)


def test_a_diff_without_the_pods_of_one_snapshot_is_not_compared_and_fails(tmp_path: Path) -> None:
    cluster = WireCluster(objects=base_objects(), version="v1.29.4", name="prod")
    step = steps(tmp_path, cluster)
    assert step("snapshot", label="pre").ok
    cluster.errors["pods"] = forbidden("pods")
    post = step("snapshot", label="post")
    assert post.ok  # stored all the same
    assert post.detail.startswith("snapshot #2 `post`: ")
    assert " 0 pods, " in post.detail
    assert post.detail.endswith(
        "; not captured: pods (forbidden by the bot's RBAC role: cluster prod: the bot is not allowed to list pods)"
    )
    result = step("diff", before="pre", after="post")
    assert not result.ok
    assert result.detail.startswith("diff: 0 regression(s), ")
    assert result.detail.endswith("; NOT COMPARED: pods (not readable in one of the snapshots)")


def test_a_diff_without_the_events_of_one_snapshot_says_so_and_passes_on_the_rest(tmp_path: Path) -> None:
    cluster = WireCluster(objects=base_objects(), version="v1.29.4", name="prod")
    step = steps(tmp_path, cluster)
    cluster.errors["events"] = forbidden("events")
    assert step("snapshot", label="pre").ok
    del cluster.errors["events"]
    assert step("snapshot", label="post").ok
    result = step("diff", before="pre", after="post")
    assert result.ok, result.detail
    assert result.detail == (
        "diff: 0 regression(s), 0 expected change(s); not compared: events (not readable in one of the snapshots)"
    )


def test_the_regressions_come_first_and_what_was_not_compared_last(tmp_path: Path) -> None:
    objects = base_objects()
    cluster = WireCluster(objects=objects, version="v1.29.4", name="prod")
    step = steps(tmp_path, cluster)
    assert step("snapshot", label="pre").ok
    # The logging group's one node is gone, and the later snapshot may not read the events.
    cluster.objects = {**objects, "nodes": [n for n in objects["nodes"] if n["metadata"]["name"] != "log-1"]}
    cluster.errors["events"] = forbidden("events")
    assert step("snapshot", label="post").ok
    result = step("diff", before="pre", after="post")
    assert not result.ok
    assert result.detail.startswith("diff: 1 regression(s), ")
    assert result.detail.endswith(
        ": node missing — node group logging; not compared: events (not readable in one of the snapshots)"
    )
