"""The watch card's Stop button (`watch_stop`) through the HTTP front door, really signed: someone on
the roster stops a standalone watch (durably: the end request is in the database, audited), anyone
else is refused ephemerally, and a plan step's watch is refused (it ends with its step)."""

from __future__ import annotations

from collections.abc import Callable

from bot.core.watches.model import WatchState
from tests.support.front import Front
from tests.support.watch_harness import wait


def _refusals(front: Front, path: str) -> list[str]:
    return [
        str(c.params.get("text", "")) for c in front.stub.calls_to("response_url") if c.path.endswith(path)
    ]


def test_the_stop_button_stops_the_watch_for_the_roster_and_refuses_anyone_else(
    make_front: Callable[..., Front],
) -> None:
    front = make_front()
    watches = front.services.watches
    row = watches.start(cluster="prod", channel="C0OPS", started_by="U0PRIMARY")

    # Not on the roster: refused, ephemerally, and the watch goes on.
    assert front.click("U0STRANGER", str(row.id), action="watch_stop").status == 200
    refused = wait(lambda: _refusals(front, f"click-{front.requests}"), timeout=10)
    assert refused[0].startswith(":no_entry: only people on the roster can stop a watch _(ref ")
    assert front.stub.calls_to("response_url")[-1].params["response_type"] == "ephemeral"
    assert watches.get(row.id).end_requested_by == ""

    # The shadow is on the roster: the end request is stored; the watch's driver ends it from there.
    assert front.click("U0SHADOW", str(row.id), action="watch_stop").status == 200
    stopped = wait(lambda: (w := front.services.store.watch(row.id)) and w.end_requested_by and w)
    assert stopped.end_requested_by == "U0SHADOW"
    assert stopped.state == "live"  # until its driver publishes the final summary
    # Both clicks' entries (the second is written after its end request: waiting for one raced).
    audit = wait(
        lambda: (
            len(e := [e for e in front.services.store.audit_entries() if e.subcommand == "watch_stop"]) > 1
            and e
        ),
        timeout=10,
    )
    assert [(e.user_id, e.outcome) for e in audit] == [("U0STRANGER", "refused"), ("U0SHADOW", "ok")]

    # Clicked again by someone else: the first stop stands, said so; once ended, said so too.
    front.click("U0PRIMARY", str(row.id), action="watch_stop")
    again = wait(lambda: _refusals(front, f"click-{front.requests}"), timeout=10)
    assert f"watch {row.id} is already ending: stopped by <@U0SHADOW>" in again[0]
    # The driver (here: the service, as the driver calls it) ends the watch from the stored request.
    assert watches.claim(stopped)
    state = WatchState(watches.spec(stopped))
    for kind in ("node", "pod"):
        state.sync(kind, [], watches.clock())
    assert watches.publish(stopped, state).ended == "unwatched by <@U0SHADOW>"
    # The card names who stopped it, as a mention (it showed `&lt;@U0SHADOW&gt;`).
    card = [c.params["text"] for c in front.stub.calls if c.method in ("chat.postMessage", "chat.update")]
    assert any("*ended*: unwatched by <@U0SHADOW>" in t for t in card), card[-3:]
    front.click("U0PRIMARY", str(row.id), action="watch_stop")
    ended = wait(lambda: _refusals(front, f"click-{front.requests}"), timeout=10)
    assert f"watch {row.id} has already ended (unwatched by <@U0SHADOW>)" in ended[0]


def test_a_plan_steps_watch_is_not_stopped_by_the_button(make_front: Callable[..., Front]) -> None:
    front = make_front()
    row = front.services.watches.start(
        cluster="prod", channel="C0OPS", started_by="run:R1", run_id="R1", step_id="settle"
    )
    front.click("U0PRIMARY", str(row.id), action="watch_stop")
    refused = wait(lambda: _refusals(front, f"click-{front.requests}"), timeout=10)
    assert f"watch {row.id} belongs to run `R1`; it ends with its step" in refused[0]
    assert front.services.watches.get(row.id).end_requested_by == ""
