"""What the bot offers to copy is a command `/upgrade action` takes whole: the "Still held by this
run" line of a run that suspended Flux, pasted back through the HTTP front door (the real slack_sdk
client, the Slack stub) where two clusters are configured, names its cluster, is refused only for
its reason's placeholder, asking for the reason, and with a reason in its place starts the run.
The copied commands once lacked `--reason` and `--cluster`, and `/upgrade action` refused them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import approve_and_complete, fix_bot, scanned_by_hand, wait_for
from tests.support.slack_stub import SlackStub

#: A command the bot offers, in its own code span on the card and in the thread.
_HELD = re.compile(r"Still held by this run\* — [^`]*`(/upgrade action [^`]+)`")


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim, tmp_path, more_clusters=("staging",)) as started:
        yield started


def _offered(front: Bot) -> str:
    """The resuming command the run's end offers (the thread's line, as Slack has it)."""
    found = (_HELD.search(str(p.get("text", ""))) for p in front.posts())
    return next((m[1] for m in found if m), "")


def test_the_held_owners_command_pasted_back_asks_for_its_reason_then_runs(
    bot: tuple[Bot, Path], sim: SimCluster
) -> None:
    front, _ = bot
    duties, _, runner = scanned_by_hand(front)
    try:
        said = front.command(
            "action flux-suspend object=kustomization/flux-system/apps --cluster prod --reason fix aws-node by hand"
        )
        assert "is run `R" in said, said
        run_id = str(front.services.store.runs()[0].id)
        approve_and_complete(
            front, front.gate("flux-suspend"), "flux-suspend", run_id=run_id, runner=runner, sim=sim
        )
        offered = wait_for(lambda: _offered(front), what="the run's end offering to resume Flux")
    finally:
        duties.stop_all()
    assert offered == (
        '/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"'
    )
    pasted = offered.removeprefix("/upgrade ")
    # Pasted as it is: the placeholder is refused, and the refusal asks for the reason itself.
    refused = front.command(pasted)
    assert "replace the `…` after `--reason` with why" in refused, refused
    assert "Traceback" not in refused
    # Without the cluster it names, two configured clusters would leave the command asking which.
    assert "which cluster? use --cluster with one of: prod, staging" in front.command(
        pasted.replace(" --cluster prod", "").replace("…", "the fix is merged")
    )
    # With a reason in its place, the command is taken: a one-step run on prod, behind its gate.
    said = front.command(pasted.replace("…", "the fix is merged"))
    assert re.fullmatch(
        r"`flux-resume` on prod is run `R\w+`; it waits for the primary and the shadow to approve it in its thread\.",
        said,
    ), said
