"""Grafana annotations of a run's steps (issue 44 item 6): a real `upgrade-bot run --http` with
`grafana:` configured runs a gated snapshot step on the sim, and a loopback Grafana receives a
point annotation when the step starts and a region from its start to its end when it succeeds,
tagged with the bot, the cluster, the run, the step (and the outcome) and the configured tags, with
the bearer token from the token file. A 500 is retried and the annotation delivered; a Grafana
that is down costs the run nothing."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bot.records import RunState
from tests.support.bot_process import PRIMARY, RunBot, team_bot, team_plan
from tests.support.grafana_stub import GrafanaStub
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

TOKEN = "glsa_s3cret-token-for-tests"
PLAN = team_plan(
    "annotated",
    """\
  - id: snapshot-pre
    title: Snapshot before
    gate: {approve: [primary]}
    actions: [{snapshot: {label: pre}}]
""",
)
BotFactory = Callable[..., RunBot]


@pytest.fixture
def grafana() -> Iterator[GrafanaStub]:
    with GrafanaStub() as stub:
        yield stub


@pytest.fixture
def start_bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
    tmp_path: Path,
) -> Iterator[BotFactory]:
    """Starts the bot with `grafana: {url: URL, token_file, tags: [team-infra], timeout}`."""
    token_file = tmp_path / "grafana-token"
    token_file.write_text(TOKEN + "\n")
    cluster = f"{{kubeconfig: {sim_kubeconfig(sim_eks)}, context: sim}}"
    bots: list[Any] = []

    def start(url: str, timeout: str = "5s") -> RunBot:
        cm = team_bot(
            write_config,
            slack_stub,
            bot_env,
            tmp_path,
            plans={"annotated": PLAN},
            cluster=cluster,
            extra_config=(
                f"grafana: {{url: '{url}', token_file: {token_file}, tags: [team-infra], timeout: {timeout}}}\n"
            ),
        )
        bots.append(cm)
        return cm.__enter__()

    yield start
    for cm in reversed(bots):
        cm.__exit__(None, None, None)


def _run_the_plan(bot: RunBot, *, timeout: float = 120) -> str:
    assert "loaded" in bot.command("plan load annotated")
    assert "started" in bot.command("start annotated")
    bot.click(PRIMARY, bot.gate("snapshot-pre"))
    wait_until(lambda: bot.run().state is RunState.COMPLETED, timeout=timeout, what="the run to complete")
    return str(bot.run().id)


def _ms(at: datetime | None) -> int:
    assert at is not None
    return int(at.timestamp() * 1000)


def test_a_steps_start_and_end_arrive_as_annotations_with_tags_times_and_the_token(
    start_bot: BotFactory, grafana: GrafanaStub
) -> None:
    bot = start_bot(grafana.url)
    run_id = _run_the_plan(bot)
    step = bot.run().step_run("snapshot-pre")
    got = wait_until(
        lambda: d if len(d := grafana.delivered()) >= 2 else None, timeout=30, what="two annotations"
    )
    assert len(got) == 2
    started, ended = got
    assert started.path == ended.path == "/api/annotations"
    assert started.headers["authorization"] == ended.headers["authorization"] == f"Bearer {TOKEN}"
    assert started.body == {
        "time": _ms(step.started_at),
        "tags": ["upgrade-bot", "prod", run_id, "snapshot-pre", "team-infra"],
        "text": f"{run_id} step `snapshot-pre` started (cluster prod)",
    }
    assert ended.body["time"] == _ms(step.started_at)
    # A region ends at the step's end (a step quicker than a millisecond is a point).
    assert ended.body.get("timeEnd", ended.body["time"]) == _ms(step.finished_at)
    assert ended.body["tags"] == ["upgrade-bot", "prod", run_id, "snapshot-pre", "succeeded", "team-infra"]
    assert ended.body["text"] == f"{run_id} step `snapshot-pre` succeeded (cluster prod)"
    assert TOKEN not in bot.stop()


def test_grafana_answering_500_is_retried_and_the_annotation_delivered(
    start_bot: BotFactory, grafana: GrafanaStub
) -> None:
    grafana.script = [500]
    bot = start_bot(grafana.url)
    _run_the_plan(bot)
    wait_until(lambda: len(grafana.delivered()) >= 2, timeout=30, what="both annotations delivered")
    first, *rest = grafana.all()
    assert first.status == 500
    # The refused start annotation came again, then the end: nothing lost, nothing twice.
    assert [r.status for r in rest] == [200, 200]
    assert rest[0].body == first.body
    assert "started" in rest[0].body["text"]
    assert "succeeded" in rest[1].body["text"]


def test_a_grafana_that_hangs_or_is_down_does_not_hold_the_run(start_bot: BotFactory) -> None:
    # Grafana hung: it accepts connections (the listen backlog) and never answers. Each request
    # may take 30s; posted in the run's path, the start annotation alone would hold the run that long.
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)
        bot = start_bot(f"http://127.0.0.1:{hung.getsockname()[1]}", timeout="30s")
        _run_the_plan(bot, timeout=20)
        assert bot.run().step_run("snapshot-pre").state.value == "succeeded"
        # Stopping does not wait out the retries either (the bot exits within its 20s).
        err = bot.stop()
    assert TOKEN not in err
    assert "Traceback" not in err
