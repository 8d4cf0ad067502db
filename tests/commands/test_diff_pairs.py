"""A diff compares one cluster's before and after: a snapshot named by id that is another cluster's
is refused naming both, a snapshot compared with itself is refused (and so is a plan's diff step
that names one label twice), and a label `diff` would read as an id (a number, "#…") or could name
only in quotes (a space) is refused when the snapshot is taken, or when the plan that names it is
read; a label with a space stored before that is still found. Through the router against the sim,
as `/upgrade` and `exec` run them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.snapshots.service import decode, encode
from bot.errors import UserError
from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.plans import GOOD

HEADER = GOOD.split("steps:")[0]


@pytest.fixture
def config(
    write_config: Callable[..., Path],
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> Path:
    kubeconfig = sim_kubeconfig(sim_factory("small", speed=0.0, seed=1))
    return write_config(f"""clusters:
  blue: {{kubeconfig: {kubeconfig}, context: sim}}
  green: {{kubeconfig: {kubeconfig}, context: sim}}
""")


def run(config: Path, *commands: str) -> list[tuple[bool, str]]:
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        out = []
        for text in commands:
            outcome = services.router.handle(
                CommandRequest(text=text, user_id="U0PRIMARY", source="terminal")
            )
            out.append((outcome.ok, outcome.rendered.text))
        return out
    finally:
        services.close()


def test_a_diff_across_clusters_or_of_one_snapshot_with_itself_is_refused(config: Path) -> None:
    taken = run(
        config, "snapshot pre --cluster blue", "snapshot pre --cluster green", "snapshot post --cluster blue"
    )
    assert all(ok for ok, _ in taken), taken
    across, itself, by_label, fine = run(
        config,
        "diff 1 2 --cluster blue",
        "diff 1 1 --cluster blue",
        "diff pre 1 --cluster blue",
        "diff pre post --cluster blue",
    )
    assert not across[0]
    assert (
        "snapshot #2 `pre` is of cluster green, not blue: a diff compares one cluster's snapshots"
        in across[1]
    )
    assert not itself[0]
    assert "are the same snapshot (#1): nothing to compare" in itself[1]
    assert not by_label[0]  # `pre` on blue is #1 too
    assert "are the same snapshot (#1)" in by_label[1]
    assert fine[0], fine[1]


@pytest.mark.parametrize("label", ["12", "#3"])
def test_a_label_diff_would_read_as_an_id_is_refused(config: Path, label: str) -> None:
    [(ok, text)] = run(config, f"snapshot {label} --cluster blue")
    assert not ok
    assert "a snapshot label cannot be a number or start with #" in text


def test_a_plans_diff_of_one_label_with_itself_and_a_numeric_snapshot_label_are_refused_when_read() -> None:
    from bot.core.runs.plans import parse_plan

    same = (
        HEADER + "steps:\n  - id: d\n    title: Compare\n    actions: [{diff: {before: pre, after: pre}}]\n"
    )
    with pytest.raises(UserError, match="before and after are both `pre`"):
        parse_plan(same, source="plan.yaml")
    numeric = HEADER + 'steps:\n  - id: s\n    title: Snap\n    actions: [{snapshot: {label: "3"}}]\n'
    with pytest.raises(UserError, match="cannot be a number"):
        parse_plan(numeric, source="plan.yaml")


def test_a_label_of_two_words_is_refused_and_one_stored_before_still_diffs(config: Path) -> None:
    """`/upgrade snapshot pre pre` stored `pre pre`, which `diff` could name only in quotes."""
    two, quoted, word = run(
        config,
        "snapshot pre pre --cluster blue",
        'snapshot "pre pre" --cluster blue',
        "snapshot pre-pre --cluster blue",
    )
    assert not two[0]
    assert two[1].startswith(
        ":warning: `snapshot` takes one label, one word: `pre pre` is 2 words; use `pre-pre`\n"
    )
    assert not quoted[0]
    assert "a snapshot label is one word: `pre pre` has a space" in quoted[1]
    assert "use `pre-pre`" in quoted[1]
    assert word[0], word[1]
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        assert [m.label for m in services.store.snapshots(cluster="blue", limit=10)] == ["pre-pre"]
        # A label with a space, as an older bot stored it (the row and the body): `diff` still
        # finds it, quoted.
        found = services.store.snapshot_body(1)
        assert found is not None
        meta, body = found
        older = {**decode(body), "label": "pre upgrade"}
        services.store.save_snapshot(
            cluster="blue",
            label="pre upgrade",
            taken_at=meta.taken_at,
            taken_by="U0OLD",
            summary=meta.summary,
            body=encode(older),
        )
    finally:
        services.close()
    [(ok, text)] = run(config, 'diff "pre upgrade" pre-pre --cluster blue')
    assert ok, text
    assert text.startswith(":white_check_mark: Diff *#2* `pre upgrade` → *#1* `pre-pre`: *0 regressions*"), (
        text
    )


def test_a_plans_snapshot_label_with_a_space_is_refused_when_read() -> None:
    from bot.core.runs.plans import parse_plan

    spaced = HEADER + (
        "steps:\n  - id: s\n    title: Snap\n    gate: {any_of: [primary]}\n"
        '    actions: [{snapshot: {label: "pre upgrade"}}]\n'
    )
    with pytest.raises(UserError) as refused:
        parse_plan(spaced, source="plan.yaml")
    # With its line, when the plan is read: not at the step, when the window has opened.
    assert refused.value.user_message == (
        "the plan has 1 problem(s):\n• plan.yaml:13: steps[0](s).actions.snapshot: a snapshot label is one word: "
        "`pre upgrade` has a space, which `diff` could name only in quotes; use `pre-upgrade`"
    )
