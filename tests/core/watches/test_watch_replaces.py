"""A plan's `replaces:` for a watch (issue 29): which group replaces which, checked when the plan is
read, and kept with the watch's target in the database (a restarted watch maps it the same way)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.core.actions.watch import target_and_stop
from bot.core.watches.service import spec_of, target_json
from bot.errors import UserError
from bot.records import WatchRow


def test_replaces_names_each_new_group_and_the_old_one_it_replaces() -> None:
    target, _ = target_and_stop({"nodegroup": "istio,others-1-25", "replaces": "others-1-25=others"})
    assert target.replaces == (("others", "others-1-25"),)
    single, _ = target_and_stop({"nodegroup": "others-1-25", "replaces": "others"})
    assert single.replaces == (("others", "others-1-25"),)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            {"nodegroup": "istio,others-1-25", "replaces": "others"},
            "watch action: replaces: say which group replaces which, NEW=OLD (like others-1-25=others)",
        ),
        (
            {"nodegroup": "istio", "replaces": "others-1-25=others"},
            "watch action: replaces: 'others-1-25' is not one of the watched node groups",
        ),
        ({"nodegroup": "a", "replaces": "a=a"}, "watch action: replaces: 'a=a' names the same group twice"),
    ],
)
def test_a_replaces_that_cannot_be_read_is_refused_with_why(args: dict[str, str], reason: str) -> None:
    with pytest.raises(UserError) as refused:
        target_and_stop(args)
    assert refused.value.user_message == reason


def test_the_mapping_is_kept_with_the_stored_target() -> None:
    target, _ = target_and_stop({"nodegroup": "others-1-25", "version": "1.25.16", "replaces": "others"})
    row = WatchRow(
        id=1,
        cluster="prod",
        channel="C1",
        started_by="U1",
        started_at=datetime(2026, 11, 26, tzinfo=UTC),
        nodegroups=("others-1-25",),
        target=target_json(target),
    )
    spec = spec_of(row, ("eks.amazonaws.com/nodegroup",))
    assert spec.target is not None
    assert spec.target.replaces == (("others", "others-1-25"),)
