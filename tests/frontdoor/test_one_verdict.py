"""One verdict everywhere: waivers made through the Slack door (signed slash commands, the real
slack_sdk client against the stub) count in `/upgrade check` and in the terminal's `check` on the
same store, and `check -o json` lists findings as objects that `jq` filters."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.cli import main
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

#: The eks-nodegroups scenario's Required findings, all accepted: two waived in Slack (PDB001 for
#: its one object, SKEW004 whole), API001 waived for the whole finding, HOOK001 in the ignore list.
IGNORE = """\
checks:
  ignore:
    - finding: HOOK001
      reason: gatekeeper is rebuilt by its own pipeline after the upgrade (reviewed in CHG-1125)
"""
WAIVED = ("PDB001 billing/ledger", "SKEW004", "API001")


def _jq(program: str, text: str) -> list[object]:
    done = subprocess.run(
        ["jq", "-c", program], input=text, capture_output=True, text=True, check=True, timeout=30
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_waiver_made_in_slack_gives_the_terminal_and_slack_the_same_verdict(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_eks)}\n{IGNORE}")
    front = start_front(load_settings(config, slack_env(slack_stub.api_url)), slack_stub)
    try:
        for n, waived in enumerate(WAIVED, start=1):
            asked = front.command(f'waive {waived} --for 7d --reason "accepted in review {n}"')
            assert asked.status == 200
            slack_stub.wait_for_calls("chat.postMessage", 2 * n - 1)
            assert front.command(f"waive confirm {n}", user="U0SHADOW").status == 200
            slack_stub.wait_for_calls("chat.postMessage", 2 * n)
        assert [w.state for w in front.services.store.waivers()] == ["active"] * 3

        slack = front.services.router.handle(
            CommandRequest(text="check --to 1.25", user_id="U0PRIMARY", channel_id="C0OPS", source="slack")
        )
    finally:
        front.stop()
    assert slack.ok, slack.rendered.text
    context = slack.reply.context
    slack_waived = sorted(c["id"] for c in context["covered"])  # type: ignore[attr-defined]
    # API001 is three findings (two apiserver metrics, one object), each accepted by the one waiver.
    assert slack_waived == ["API001", "API001", "API001", "HOOK001", "PDB001", "SKEW004"]
    assert context["failed"] is False

    status = main(["check", "--config", str(config), "--to", "1.25", "-o", "json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert status == 0  # passed, as in Slack: not 3
    assert (report["failed"], report["verdict"], report["waivers_read"]) == (False, "passed", True)
    terminal_waived = sorted(f["id"] for f in report["findings"] if f["waived_by"] is not None)
    assert terminal_waived == slack_waived
    # Who accepted each, as the store has it; the ignore entry has no person, so its label.
    by = {f["id"]: (f["waived_by"], f["waiver_reason"]) for f in report["findings"] if f["waived_by"]}
    assert by["PDB001"] == ("U0PRIMARY", "accepted in review 1")
    assert by["HOOK001"][0] == "checks.ignore[0]"

    # The text output gives the same verdict line as the Slack summary's.
    assert main(["check", "--config", str(config), "--to", "1.25"]) == 0
    text = capsys.readouterr().out
    verdict = "passed — 0 required, 17 recommended, 6 waived or ignored"
    assert text.startswith(f"Pre-flight check of prod for 1.25: {verdict}\n")
    assert f"Pre-flight check of *prod* for *1.25*: {verdict}\n" in slack.rendered.text


def test_check_json_lists_findings_as_objects_jq_can_filter(
    write_config: Callable[..., Path],
    sim_eks: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_eks)}\n")
    assert main(["check", "--config", str(config), "--to", "1.25", "-o", "json"]) == 3
    out = capsys.readouterr().out
    required = _jq('.findings[] | select(.severity=="Required") | [.id, .kind, .namespace, .name]', out)
    assert ["PDB001", "PodDisruptionBudget", "billing", "ledger"] in required
    hook = ["HOOK001", "ValidatingWebhookConfiguration", None, "gatekeeper-validating-webhook-configuration"]
    assert hook in required  # cluster-scoped: no namespace
    assert {r[0] for r in required} == {"API001", "HOOK001", "PDB001", "SKEW004"}  # type: ignore[index]
    (pdb,) = _jq('.findings[] | select(.id=="PDB001")', out)
    assert isinstance(pdb, dict)
    assert set(pdb) >= {"id", "severity", "kind", "namespace", "name", "message", "remedy", "waived_by"}
    assert pdb["message"] == "PodDisruptionBudget billing/ledger allows no disruption"
    assert pdb["waived_by"] is None
    assert "(kubectl -n billing edit pdb ledger)" in pdb["remedy"]
    # In the billing namespace, by object rather than by display string.
    billing = _jq('[.findings[] | select(.namespace=="billing") | .id] | unique', out)
    assert billing == [["PDB001", "POD001", "RES001"]]
    # -o yaml is the same data.
    assert main(["check", "--config", str(config), "--to", "1.25", "-o", "yaml"]) == 3
    as_yaml = capsys.readouterr().out
    assert "  kind: PodDisruptionBudget\n  namespace: billing\n  name: ledger\n" in as_yaml
