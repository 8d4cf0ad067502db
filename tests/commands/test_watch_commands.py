"""`/upgrade watch`, `watches`, `unwatch` through the router (the terminal front door's path):
rows in the store, roster members only, short answers to bad input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings
from bot.sim import SimCluster


@pytest.fixture
def services(
    write_config: Callable[..., Path], sim_small: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> Iterator[Services]:
    config = write_config(f"clusters:\n  sim:\n    kubeconfig: {sim_kubeconfig(sim_small)}\n")
    built = assemble(load_settings(config, {}), with_slack=False)
    yield built
    built.close()


def ask(services: Services, text: str, *, user: str = "U0PRIMARY", channel: str = "C0OPS") -> Outcome:
    return services.router.handle(
        CommandRequest(text=text, user_id=user, channel_id=channel, source="terminal")
    )


def test_watch_starts_a_live_row_listed_by_watches_and_ended_by_unwatch(services: Services) -> None:
    out = ask(services, "watch --nodegroup ng-a --nodegroup ng-b --namespace web --for 30m")
    assert out.ok, out.rendered.text
    (row,) = services.store.watches()
    assert (row.cluster, row.channel, row.nodegroups, row.namespaces) == (
        "sim",
        "C0OPS",
        ("ng-a", "ng-b"),
        ("web",),
    )
    assert row.ends_at is not None
    assert row.ends_at - row.started_at == timedelta(minutes=30)
    assert f"Watch {row.id} on *sim* started" in out.rendered.text

    listed = ask(services, "watches")
    assert listed.ok
    assert f"*{row.id}* sim" in listed.rendered.text

    ended = ask(services, "unwatch")
    assert ended.ok, ended.rendered.text
    assert services.store.watch(row.id).end_requested_by == "U0PRIMARY"  # type: ignore[union-attr]
    again = ask(services, f"unwatch {row.id}")
    assert again.ok  # still live until its driver ends it: asking twice is harmless


def test_only_roster_members_may_watch(services: Services) -> None:
    out = ask(services, "watch", user="U0STRANGER")
    assert not out.ok
    assert out.audit_outcome == "denied"
    assert services.store.watches() == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("watch --for soon", "--for soon"),
        ("watch --cluster prod", "no cluster named `prod`"),
        ("unwatch 99", "no watch 99"),
        ("unwatch", "no watch is live"),
    ],
)
def test_bad_input_gets_a_short_specific_answer(services: Services, text: str, expected: str) -> None:
    out = ask(services, text)
    assert not out.ok
    assert expected in out.rendered.text
    assert "Traceback" not in out.rendered.text


def test_a_watch_needs_a_channel(services: Services) -> None:
    out = ask(services, "watch", channel="")
    assert not out.ok
    assert "channel" in out.rendered.text
    assert ask(services, "watch --channel C0OTHER", channel="").ok
    assert services.store.watches()[0].channel == "C0OTHER"
