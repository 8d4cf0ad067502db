"""Readiness before a campaign: `/upgrade check --fleet` and `upgrade-bot check --fleet` check every
cluster at once and give a clusters × findings matrix (Required / Recommended / waived), the CSV
and the Markdown attached in Slack (uploaded to the stub by the real slack_sdk client)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.checks.findings import REQUIRED, Finding, Report
from bot.core.checks.fleet import check_fleet, render_csv
from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.bot_process import bot_command
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

PRIMARY = "U0PRIMARY"
DEAD = (
    "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
    "clusters: [{name: dead, cluster: {server: 'http://127.0.0.1:9'}}]\n"
    "contexts: [{name: dead, context: {cluster: dead, user: dead}}]\nusers: [{name: dead, user: {}}]\n"
)


@pytest.fixture
def config(
    write_config: Callable[..., Path], tmp_path: Path, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> Path:
    # Two clusters on the EKS sim, one whose API server is not there; POD001 ignored by the team.
    (tmp_path / "dead.kubeconfig").write_text(DEAD, encoding="utf-8")
    kc = sim_kubeconfig(sim_eks)
    return write_config(
        "channels: {operations: C0OPS}\n"
        f"clusters:\n  ci: {{kubeconfig: {kc}, context: sim}}\n  lab: {{kubeconfig: {kc}, context: sim}}\n"
        f"  gone: {{kubeconfig: {tmp_path / 'dead.kubeconfig'}, request_timeout: 1}}\n"
        "checks: {ignore: [{finding: POD001, reason: batch pods are reviewed}]}\n"
    )


@pytest.fixture
def bot(config: Path, slack_stub: SlackStub) -> Iterator[Bot]:
    slack_stub.users[PRIMARY] = {"id": PRIMARY}
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


def _rows(text: str) -> dict[str, list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    return {r[0]: r[1:] for r in rows}


def test_check_fleet_in_slack_posts_a_line_per_cluster_and_attaches_the_matrix(bot: Bot) -> None:
    uploads = len(bot.stub.uploads)
    reply = bot.command("check --fleet --to 1.25", user=PRIMARY)
    assert reply.startswith("*Pre-flight check of 3 clusters for 1.25: FAILED — 0 ready, 1 not checked")
    assert "*ci* — 6 required, 16 recommended, 1 waived" in reply
    assert "*gone* — not checked: cluster gone (context dead) refused the connection" in reply
    assert "Traceback" not in reply
    files = list(bot.stub.uploads.values())[uploads:]
    assert len(files) == 2
    table = next(f.decode() for f in files if f.startswith(b"finding,"))
    markdown = next(f.decode() for f in files if f.startswith(b"# "))
    rows = _rows(table)
    assert rows["finding"] == ["ci", "lab", "gone"]
    assert rows["API001"] == ["Required", "Required", "?"]
    assert rows["POD001"] == ["waived", "waived", "?"]
    assert any(v == ["Recommended", "Recommended", "?"] for v in rows.values())
    assert rows["not checked: gone"][2].startswith("cluster gone (context dead) refused the connection")
    assert "| ci | 6 | 16 | 1 | FAILED |" in markdown
    assert "| API001 | Required | Required |" in markdown


def test_check_fleet_in_the_terminal_prints_the_csv_and_exits_3(config: Path) -> None:
    done = subprocess.run(
        [*bot_command(), "check", "--fleet", "--to", "1.25", "-o", "csv", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    rows = _rows(done.stdout)
    assert rows["finding"] == ["ci", "lab", "gone"]
    # A cluster not checked has "?" in every finding's row and its reason in a row of its own.
    assert rows["API001"] == ["Required", "Required", "?"], (
        [r for r in rows.items() if r[0].startswith("not checked")],
        done.stderr[-1500:],
    )
    as_json = subprocess.run(
        [*bot_command(), "check", "--fleet", "--to", "1.25", "-o", "json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    data = json.loads(as_json.stdout)
    assert data["clusters"]["lab"] == {"required": 6, "recommended": 16, "waived": 1, "verdict": "FAILED"}
    assert data["findings"]["POD001"] == {"ci": "waived", "lab": "waived"}
    one = subprocess.run(
        [*bot_command(), "check", "--cluster", "ci", "-o", "csv", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert one.returncode == 2
    assert "-o csv is the matrix of `check --fleet`" in one.stderr


def test_the_clusters_are_checked_at_once_not_one_after_another() -> None:
    # Each check waits until all three are in flight: a matrix computed one cluster at a time
    # never gets there (the barrier breaks after its timeout and the check fails).
    barrier = threading.Barrier(3, timeout=10)

    def one(cluster: str) -> Report:
        barrier.wait()
        found = Finding(id="API001", severity=REQUIRED, title="removed API", objects=(), why="", fix="")
        return Report(cluster=cluster, target="1.25", findings=(found,) if cluster == "b" else ())

    matrix = check_fleet(["a", "b", "c"], one, target="1.25")
    assert render_csv(matrix) == "finding,a,b,c\nAPI001,,Required,\n"
    assert matrix.failed


def test_a_fleet_check_refuses_the_target_on_a_cluster_already_past_it_and_checks_the_others(
    write_config: Callable[..., Path],
    sim_eks: Any,
    sim_small: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> None:
    # `eks` is on 1.24, `small` on 1.29: --to 1.25 is an upgrade of the one and older than the other.
    config = write_config(
        f"clusters:\n  eks: {{kubeconfig: {sim_kubeconfig(sim_eks)}}}\n"
        f"  small: {{kubeconfig: {sim_kubeconfig(sim_small)}}}\n"
    )
    refused = (
        "the cluster is on v1.29.4-eks-38482b3 already: --to 1.25 is an older minor "
        "(check 1.29, the minor it is on, or a newer one)"
    )
    done = subprocess.run(
        [*bot_command(), "check", "--fleet", "--to", "1.25", "-o", "json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    clusters = json.loads(done.stdout)["clusters"]
    assert clusters["small"] == {"error": refused}
    assert clusters["eks"]["verdict"] == "FAILED"
    assert clusters["eks"]["required"] > 0
    # `/upgrade check --fleet` says the same on the cluster's line.
    built = assemble(load_settings(config, {}), with_slack=False)
    try:
        reply = built.router.handle(
            CommandRequest(text="check --fleet --to 1.25", user_id=PRIMARY, source="terminal")
        )
    finally:
        built.close()
    assert reply.rendered.text.startswith(
        "*Pre-flight check of 2 clusters for 1.25: FAILED — 0 ready, 1 not checked"
    )
    assert f"*small* — not checked: {refused}" in reply.rendered.text
    assert "*eks* — " in reply.rendered.text
