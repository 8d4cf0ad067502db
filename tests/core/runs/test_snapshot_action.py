"""The `snapshot` plan action's line: the counts, and what the snapshot could not capture."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.actions import snapshot
from bot.core.actions.base import ActionContext
from bot.records import ActionCall, ActionRequest

COUNTS = {"nodes": 14, "pods": 0, "workloads": 23}


def run_with(gaps: tuple[tuple[str, str], ...]) -> str:
    def take(
        cluster: str, label: str, taken_by: str
    ) -> tuple[int, str, Mapping[str, int], tuple[tuple[str, str], ...]]:
        assert (cluster, label, taken_by) == ("prod", "pre", "run:R1")
        return 7, label, COUNTS, gaps

    def unused(*_: Any) -> Any:
        raise AssertionError("not used by the snapshot action")

    request = ActionRequest(
        run_id="R1", cluster="prod", call=ActionCall(name="snapshot", args={"label": "pre"})
    )
    result = snapshot.run(ActionContext(take_snapshot=take, compare_snapshots=unused), request)
    assert result.ok  # stored all the same: a diff says what it cannot compare
    return result.detail


def test_a_whole_snapshot_says_its_counts() -> None:
    assert run_with(()) == "snapshot #7 `pre`: 14 nodes, 0 pods, 23 workloads"


def test_a_snapshot_with_gaps_says_what_it_did_not_capture_so_0_pods_is_not_read_as_none() -> None:
    forbidden = (
        'forbidden by the bot\'s RBAC role: pods is forbidden: User "upgrade-bot" cannot list ' + "x" * 200
    )
    assert run_with((("pods", forbidden), ("provider", "boto3 is not installed"))) == (
        "snapshot #7 `pre`: 14 nodes, 0 pods, 23 workloads; not captured: "
        f"pods ({forbidden[:99]}…), provider (boto3 is not installed)"
    )
    many = tuple((f"list{i}", "forbidden") for i in range(5))
    assert run_with(many).endswith(
        "; not captured: list0 (forbidden), list1 (forbidden), list2 (forbidden) …and 2 more"
    )
