"""A check that could not read what most checks rest on is INCOMPLETE, not passed: in the terminal
(exit 1, "could not look"), in its JSON and in Slack; with the budgets unread, no workload is called
unprotected (RES002) and no waiver of a budget is called a typo. On sims, through the real kube
client, with the sim's transport refusing a path (403)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bot.frontdoor.cli import main
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub


@contextmanager
def refused(sim: SimCluster, path: str) -> Iterator[None]:
    sim.control.set_transport(error_rate=1.0, error_status=403, path_prefix=path)
    try:
        yield
    finally:
        sim.control.set_transport()


def test_a_check_that_could_not_read_the_pods_is_incomplete_in_the_terminal_and_in_slack(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = sim_factory("small", speed=0.0, seed=1)
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim)}\n")
    assert main(["check", "--config", str(config), "-o", "json"]) == 0  # it passes when it can look
    assert json.loads(capsys.readouterr().out)["verdict"] == "passed"
    with refused(sim, "/api/v1/pods"):
        status = main(["check", "--config", str(config), "-o", "json"])
        report = json.loads(capsys.readouterr().out)
        text_status = main(["check", "--config", str(config)])
        text = capsys.readouterr().out
        front = start_front(load_settings(config, slack_env(slack_stub.api_url)), slack_stub)
        try:
            slack = front.services.router.handle(
                CommandRequest(text="check", user_id="U0PRIMARY", channel_id="C0OPS", source="slack")
            )
        finally:
            front.stop()
    assert (status, text_status) == (1, 1)  # could not look: not 0
    assert (report["failed"], report["incomplete"], report["verdict"], report["not_read"]) == (
        False,
        True,
        "incomplete",
        ["pods"],
    )
    assert text.splitlines()[0].startswith("Pre-flight check of prod for ")
    assert ": INCOMPLETE — 0 required, " in text.splitlines()[0]
    assert text.splitlines()[0].endswith("; not read: pods, so the checks on them did not run")
    assert slack.ok
    assert slack.rendered.text.startswith(":warning: Pre-flight check of *prod* for *")
    assert "*INCOMPLETE* — 0 required, " in slack.rendered.text
    assert "*not read: pods*, so the checks on them did not run" in slack.rendered.text


def test_with_the_budgets_unread_no_workload_is_called_unprotected_and_no_waiver_a_typo(
    write_config: Callable[..., Path],
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_eks)}\n")
    for user, command in (
        ("U0PRIMARY", 'waive PDB001 billing/ledger --for 7d --reason "ledger team drains it by hand"'),
        ("U0SHADOW", "waive confirm 1"),
    ):
        assert main(["exec", "--config", str(config), "--as", user, command]) == 0
    capsys.readouterr()
    main(["check", "--config", str(config), "--to", "1.25", "-o", "json"])
    seen = json.loads(capsys.readouterr().out)
    assert any(f["id"] == "PDB001" and f["waived_by"] for f in seen["findings"])
    with refused(sim_eks, "/apis/policy/v1/poddisruptionbudgets"):
        main(["check", "--config", str(config), "--to", "1.25", "-o", "json"])
    blind = json.loads(capsys.readouterr().out)
    assert blind["not_read"] == ["poddisruptionbudgets"]
    ids = {f["id"] for f in blind["findings"]}
    assert not ids & {"RES002", "PDB001", "PDB002"}, ids
    assert not [n for n in blind["notes"] if n.startswith("waiver 1 (PDB001) names")]


def test_diagnose_gives_no_all_clear_over_no_pods_or_pods_it_could_not_read(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> None:
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_eks)}\n")
    front = start_front(load_settings(config, slack_env(slack_stub.api_url)), slack_stub)

    def diagnose(target: str) -> str:
        asked = CommandRequest(
            text=f"diagnose {target}", user_id="U0PRIMARY", channel_id="C0OPS", source="slack"
        )
        return front.services.router.handle(asked).rendered.text

    try:
        assert diagnose("payments").startswith(":mag: 3 known issues in *payments* on *prod*")
        assert diagnose("kube-public").startswith(
            ":warning: No pod in *kube-public* on *prod*: nothing to diagnose (`kubectl get pods -n kube-public` "
            "lists what there is)."
        )
        assert diagnose("payments/nope").startswith(":warning: No pod named *payments/nope* on *prod*")
        healthy = diagnose("cert-manager")
        assert healthy.startswith(":white_check_mark: No known issue matches in *cert-manager* on *prod* (")
        assert re.search(r"\(1 pod, \d+ rules\)\.$", healthy.splitlines()[0]), healthy
        with refused(sim_eks, "/api/v1/namespaces/payments/pods"):
            blind = diagnose("payments")
    finally:
        front.stop()
    assert blind.startswith(
        ":warning: Not diagnosed: the rules could not read what they match in *payments* on *prod*, so no "
        "match says nothing."
    )
    assert ":warning: not read: pods: " in blind


def test_a_snapshot_that_could_not_read_the_pods_says_so_above_its_empty_pods_table(
    write_config: Callable[..., Path],
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = sim_factory("small", speed=0.0, seed=1)
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim)}\n")
    with refused(sim, "/api/v1/pods"):
        assert main(["snapshot", "nopods", "--config", str(config)]) == 0
    assert "gap: pods: " in capsys.readouterr().out
    assert main(["snapshot", "export", "nopods", "-o", "wide", "--config", str(config)]) == 0
    wide = capsys.readouterr().out
    pods = wide.split("$ kubectl get pods -A -o wide\n", 1)[1].splitlines()
    assert pods[0].startswith("# NOT READ: pods: ")
    assert pods[0].endswith("(the table below is empty for that reason)")
    assert pods[1].split() == [
        "NAMESPACE",
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
        "READINESS",
        "GATES",
    ]
    assert len(pods) == 2
    nodes = wide.split("$ kubectl get nodes -o wide\n", 1)[1].splitlines()
    assert nodes[0].startswith("NAME ")  # the nodes were read
