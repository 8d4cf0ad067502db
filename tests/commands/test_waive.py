"""`/upgrade waive`, `waive confirm`, `waive revoke` and `waivers` through the router (the terminal
front door's path), on the sim's eks-nodegroups scenario: one person for a Recommended finding, two
roles for a Required one, expiry on the injected clock, and what `check` and a plan's check step
make of waivers and of the configuration's `checks.ignore` list."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.core.actions import check as check_action
from bot.frontdoor.assemble import Services, assemble
from bot.records import ActionCall, ActionRequest
from bot.router import CommandRequest, Outcome
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.bot_process import bot_command
from tests.support.clock import FakeClock

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
IGNORE = """\
checks:
  ignore:
    - finding: HOOK001
      objects: [gatekeeper-system/gatekeeper-webhook-service, gatekeeper-validating-webhook-configuration]
      reason: gatekeeper is rebuilt by its own pipeline after the upgrade (reviewed in CHG-1125)
"""


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def config(
    write_config: Callable[..., Path], sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> Path:
    return write_config(f"clusters:\n  prod:\n    kubeconfig: {sim_kubeconfig(sim_eks)}\n{IGNORE}")


@pytest.fixture
def services(config: Path, clock: FakeClock) -> Iterator[Services]:
    built = assemble(load_settings(config, {}), with_slack=False, clock=clock)
    yield built
    built.close()


def ask(services: Services, text: str, *, user: str = "U0PRIMARY") -> Outcome:
    return services.router.handle(
        CommandRequest(text=text, user_id=user, channel_id="C0OPS", source="terminal")
    )


def test_a_recommended_finding_is_waived_by_one_person_listed_and_revoked(services: Services) -> None:
    out = ask(services, 'waive ISTIO001 checkout/checkout --for 3d --reason "checkout restarts on Monday"')
    assert out.ok, out.rendered.text
    (row,) = services.store.waivers()
    assert (row.finding, row.objects, row.state, row.required) == (
        "ISTIO001",
        ("checkout/checkout",),
        "active",
        False,
    )
    assert row.expires_at == T0 + timedelta(days=3)
    assert f"Waiver *{row.id}* of `ISTIO001` for checkout/checkout on *prod*" in out.rendered.text
    listed = ask(services, "waivers", user="U0SHADOW")
    assert f"*{row.id}* prod · `ISTIO001` checkout/checkout · *active*" in listed.rendered.text
    assert "`HOOK001` gatekeeper-system/gatekeeper-webhook-service" in listed.rendered.text  # the ignore list
    revoked = ask(services, f"waive revoke {row.id}", user="U0SHADOW")
    assert revoked.ok, revoked.rendered.text
    assert services.store.waiver(row.id).revoked_by == "U0SHADOW"  # type: ignore[union-attr]
    assert "No waiver is in force" in ask(services, "waivers").rendered.text
    assert "*revoked*" in ask(services, "waivers --all").rendered.text
    audit = [(e.kind, e.subcommand) for e in services.store.audit_entries() if e.kind == "waiver"]
    assert audit == [("waiver", "waive"), ("waiver", "waive revoke")]


def test_a_required_finding_waits_for_a_second_role_and_one_person_cannot_confirm_their_own(
    services: Services,
) -> None:
    out = ask(services, 'waive PDB001 billing/ledger --for 2d --reason "ledger is drained by hand"')
    assert out.ok, out.rendered.text
    (row,) = services.store.waivers()
    assert row.state == "pending"
    assert "covers nothing until the primary and the shadow confirm it" in out.rendered.text
    alone = ask(services, f"waive confirm {row.id}")
    assert not alone.ok
    assert "needs a second person" in alone.rendered.text
    stranger = ask(services, f"waive confirm {row.id}", user="U0STRANGER")
    assert not stranger.ok
    assert services.store.waiver(row.id).state == "pending"  # type: ignore[union-attr]
    confirmed = ask(services, f"waive confirm {row.id}", user="U0SHADOW")
    assert confirmed.ok, confirmed.rendered.text
    done = services.store.waiver(row.id)
    assert done is not None
    assert (done.state, done.confirmed_by) == ("active", "U0SHADOW")
    assert not ask(services, f"waive confirm {row.id}", user="U0SHADOW").ok  # once


def test_bad_waivers_get_a_short_specific_reason(services: Services) -> None:
    for text, reason in (
        ("waive NOPE001 --for 1d --reason x", "no check or rule reports `NOPE001`"),
        ("waive api001 --for 1d --reason x", "is not a finding id"),
        ("waive API001 --reason x", "say for how long with `--for`"),
        ("waive API001 --for 1y --reason x", "--for 1y"),
        ("waive API001 --for 200d --reason x", "a permanent exception goes in `checks.ignore`"),
        ("waive API001 --for 1d", "say why with `--reason"),
        ("waive confirm 99", "no waiver 99"),
        ("waive revoke x", "name one waiver by its number"),
    ):
        out = ask(services, text)
        assert not out.ok, text
        assert reason in out.rendered.text, (text, out.rendered.text)
        assert "Traceback" not in out.rendered.text
    assert services.store.waivers() == []


def test_check_shows_ignored_and_waived_findings_in_their_own_section_until_the_waiver_expires(
    services: Services, clock: FakeClock
) -> None:
    ask(services, 'waive PDB001 billing/ledger --for 1d --reason "ledger is drained by hand"')
    ask(services, "waive confirm 1", user="U0SHADOW")
    text = ask(services, "check --to 1.25").rendered.text
    assert "FAILED* — 4 required, 17 recommended, 2 waived or ignored" in text
    required, accepted = text.split("*Waived or ignored*", 1)
    assert "`HOOK001`" not in required
    assert "`PDB001`" not in required
    assert "`HOOK001` (Required)" in accepted
    assert "checks.ignore[0] (permanent): _gatekeeper is rebuilt by its own pipeline" in accepted
    assert "`PDB001` (Required)" in accepted
    assert (
        "waiver 1 by <@U0PRIMARY> and <@U0SHADOW> until 2026-11-29 12:00 UTC: _ledger is drained by hand_"
        in accepted
    )
    clock.advance(timedelta(days=1))
    later = ask(services, "check --to 1.25").rendered.text
    assert "FAILED* — 5 required" in later
    assert "`PDB001` PodDisruptionBudget billing/ledger" in later.split("*Waived or ignored*", 1)[0]


def test_check_names_a_waiver_whose_objects_no_finding_names(services: Services) -> None:
    # A typo in the object ("ledgr") once gave a waiver that covered nothing, and nothing said so:
    # people believed the finding waived while the check still failed on it.
    ask(services, 'waive PDB001 billing/ledgr --for 1d --reason "ledger is drained by hand"')
    ask(services, "waive confirm 1", user="U0SHADOW")
    text = ask(services, "check --to 1.25").rendered.text
    assert "`PDB001` PodDisruptionBudget billing/ledger" in text.split("*Waived or ignored*", 1)[0]
    assert (
        "waiver 1 (PDB001) names billing/ledgr, which no PDB001 finding of this check names: a typo, or no "
        "longer found (`/upgrade waive revoke 1`)"
    ) in text
    # The right name: the waiver covers it, and nothing is said.
    ask(services, 'waive PDB001 billing/ledger --for 1d --reason "ledger is drained by hand"')
    ask(services, "waive confirm 2", user="U0SHADOW")
    ask(services, "waive revoke 1", user="U0SHADOW")
    again = ask(services, "check --to 1.25").rendered.text
    assert "which no PDB001 finding" not in again
    assert "`PDB001` (Required)" in again.split("*Waived or ignored*", 1)[1]


def test_a_waiver_that_matches_no_finding_of_the_last_check_is_said_at_once_and_still_kept(
    services: Services, clock: FakeClock
) -> None:
    """A typo ("billing/ledgr") made a waiver that matched nothing; nobody was told until the next
    check, if anyone read its notes. Waivers may come before their findings: kept, but said."""
    # No check kept yet: nothing to compare with, nothing said.
    first = ask(services, 'waive PDB001 billing/ledgr --for 1d --reason "ledger is drained by hand"')
    assert first.ok, first.rendered.text
    assert "matches no finding" not in first.rendered.text
    checked = clock()
    ask(services, "check --to 1.25")
    clock.advance(timedelta(minutes=5))
    typo = ask(services, 'waive PDB001 billing/ledgr --for 1d --reason "ledger is drained by hand"')
    assert typo.ok, typo.rendered.text
    stamp = int(checked.timestamp())
    assert (
        f":warning: It matches no finding of the last check of *prod* (<!date^{stamp}^" in typo.rendered.text
    )
    assert (
        "): no PDB001 finding of it names billing/ledgr (did you mean billing/ledger?). "
        "A typo covers nothing: `/upgrade waive revoke 2` and ask again"
    ) in typo.rendered.text
    assert services.store.waiver(2) is not None  # recorded all the same
    # An id the check did not report at all; and the right name, of which nothing is said.
    absent = ask(services, 'waive ISTIO002 --for 1d --reason "no sidecars here"')
    assert "): it reported no ISTIO002 finding. A typo covers nothing" in absent.rendered.text
    right = ask(services, 'waive PDB001 billing/ledger --for 1d --reason "ledger is drained by hand"')
    assert "matches no finding" not in right.rendered.text


def test_the_plan_check_step_passes_when_every_required_finding_is_waived_and_names_the_waivers(
    services: Services, clock: FakeClock
) -> None:
    # A fixture team that reviewed every Required finding of the scenario and accepted each.
    for finding in ("API001", "PDB001", "SKEW004"):
        assert ask(services, f'waive {finding} --for 1d --reason "accepted in review {finding}"').ok
    for row in services.store.waivers():
        assert ask(services, f"waive confirm {row.id}", user="U0SHADOW").ok
    ctx = services.runs.action_context  # the bot's, as its assembly bound it
    assert ctx is not None
    request = ActionRequest(run_id="R1", cluster="prod", call=ActionCall(name="check", args={"to": "1.25"}))
    result = check_action.run(ctx, request)
    assert result.ok, result.detail
    assert result.detail.startswith("pre-flight check for 1.25 passed: no Required findings left unaccepted")
    for wid, finding in ((1, "API001"), (2, "PDB001"), (3, "SKEW004")):
        assert f"waiver {wid} ({finding} by U0PRIMARY and U0SHADOW until" in result.detail
    assert "checks.ignore[0] (HOOK001 gatekeeper-system/gatekeeper-webhook-service" in result.detail
    ask(services, "waive revoke 3")
    again = check_action.run(ctx, request)
    assert not again.ok
    assert "FAILED: 1 Required — SKEW004 (Node " in again.detail


def test_the_terminal_twin_waives_through_the_same_registry(config: Path) -> None:
    done = subprocess.run(
        [*bot_command(), "exec", "--config", str(config), "--as", "U0PRIMARY",
         'waive ISTIO001 --for 1d --reason "restarted on Monday"'],
        capture_output=True, text=True, check=False, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Waiver 1 of `ISTIO001` (the whole finding) on prod" in done.stdout.replace("*", "")
