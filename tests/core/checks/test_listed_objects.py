"""A finding's objects as the EKS, image and pre-flight checks list them: the first ones named,
the rest counted, never dropped silently."""

from __future__ import annotations

from bot.core.checks import preflight
from bot.core.checks.findings import listed


def test_objects_past_the_most_are_counted_on_one_line() -> None:
    assert listed(["a", "b", "c", "d"], 2) == ("a", "b", "… and 2 more")


def test_objects_within_the_most_are_all_named() -> None:
    assert listed(["a", "b"], 2) == ("a", "b")
    assert listed([], 5) == ()


def test_the_pre_flight_checks_name_at_most_their_own_count() -> None:
    nodes = [f"node-{i}" for i in range(preflight.MAX_OBJECTS + 3)]
    shown = preflight._listed(nodes)
    assert shown[:-1] == tuple(nodes[: preflight.MAX_OBJECTS])
    assert shown[-1] == "… and 3 more"
