"""A paused replica never posts what another replica took over (issue 38), on PostgreSQL.

Two real replicas; the leader is stopped (SIGSTOP) past its lease before it claims the run's first
thread line, between the claim and the call, and during the call (`tests.support.paused_sends`).
The other replica takes over and posts; the paused one, woken, sends nothing it no longer holds:
every keyed message is in Slack once. `benchmarks/soak_replica_sends.py` runs each point ten times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.paused_sends import POINTS, paused_send, write_files
from tests.support.postgres import drop_every_table
from tests.support.replicas import Replicas
from tests.support.slack_stub import SlackStub


@pytest.fixture
def replicas(
    postgres_url: str,
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    tmp_path: Path,
) -> Iterator[Replicas]:
    drop_every_table(postgres_url)
    config = write_files(write_config(), tmp_path, postgres_url)
    group = Replicas(config=config, env=bot_env, stub=slack_stub)
    try:
        yield group
    finally:
        group.stop_all()
        drop_every_table(postgres_url)


@pytest.mark.parametrize("point", POINTS)
def test_a_replica_paused_past_its_lease_at_any_point_of_a_send_never_posts_twice(
    replicas: Replicas, point: str
) -> None:
    outcome = paused_send(replicas, point)
    assert outcome.duplicates == {}
    assert outcome.watched == 1
