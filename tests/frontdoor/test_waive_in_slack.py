"""`/upgrade waive` in Slack (signed slash commands, the real slack_sdk client against the stub): a
Required finding's waiver is asked by one person and covers nothing until a second role confirms
it; the asker alone is refused with a short reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub


def test_two_people_waive_a_required_finding_and_one_alone_is_refused(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_small: SimCluster,
    sim_kubeconfig: Callable[[SimCluster], Path],
) -> None:
    config = write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_small)}\n")
    front = start_front(load_settings(config, slack_env(slack_stub.api_url)), slack_stub)
    try:
        asked = front.command(
            'waive API001 kube-system/pod-identity-webhook --for 14d --reason "EKS ships the fix in CHG-7"'
        )
        assert asked.status == 200
        # Public: posted in the channel, where the second person sees it.
        reply = slack_stub.wait_for_calls("chat.postMessage", 1)[0].params
        assert reply["channel"] == "C0OPS"
        assert (
            "Waiver *1* of `API001` for kube-system/pod-identity-webhook on *prod* asked by <@U0PRIMARY>"
            in reply["text"]
        )
        assert "`/upgrade waive confirm 1`" in reply["text"]
        assert front.services.store.waiver(1).state == "pending"  # type: ignore[union-attr]

        front.command("waive confirm 1")  # the asker alone
        refused = slack_stub.wait_for_responses(1)[0]
        assert refused["response_type"] == "ephemeral"
        assert "a Required finding's waiver needs a second person to confirm it" in refused["text"]
        assert "Traceback" not in refused["text"]
        assert front.services.store.waiver(1).state == "pending"  # type: ignore[union-attr]

        front.command("waive confirm 1", user="U0SHADOW")
        confirmed = slack_stub.wait_for_calls("chat.postMessage", 2)[1].params
        assert "confirmed by <@U0SHADOW> (asked by <@U0PRIMARY>)" in confirmed["text"]
        row = front.services.store.waiver(1)
        assert row is not None
        assert (row.state, row.requested_by, row.confirmed_by) == ("active", "U0PRIMARY", "U0SHADOW")
        entries = [
            (e.user_id, e.subcommand, e.outcome)
            for e in front.services.store.audit_entries()
            if e.kind == "waiver"
        ]
        assert entries == [("U0PRIMARY", "waive", "ok"), ("U0SHADOW", "waive confirm", "ok")]
    finally:
        front.stop()
