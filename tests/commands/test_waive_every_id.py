"""`waive` accepts every finding id the code can report, each with the rules of its severity.

The ids are enumerated from the code, not from the registry `waive` reads: the ids the check
modules' `Finding(...)` calls can report, read from their source with `ast`
(`tests/support/finding_ids.py`), the shipped rules file's ids, and a team rule's id from
`rules_files`. Each is waived through the router as `/upgrade waive` arrives from Slack, and
through the terminal's `upgrade-bot exec "waive …"`: a Required id's waiver waits for a second
person, a Recommended one's is active at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.store import Store
from bot.core.checks.findings import RECOMMENDED, REQUIRED
from bot.core.checks.ids import CHECK_MODULES
from bot.core.rules import read_rules
from bot.frontdoor.assemble import Services, assemble
from bot.frontdoor.cli import main
from bot.resources import BUILTIN_RULES
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.clock import FakeClock
from tests.support.finding_ids import emitting_modules, reported_ids

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TEAM_RULES = """\
rules:
  - id: TEAM001
    title: the payments team's own Required rule
    severity: required
    match: {containers: [ledger], waiting_reasons: [CrashLoopBackOff]}
    explanation: the ledger cannot start
    remediation: kubectl -n {namespace} logs {pod} -c ledger
    links: [https://example.com/runbooks/ledger]
"""


def every_id() -> dict[str, str]:
    """id → the severity its waiver follows, from the code: a check's id is Required when any of
    its `Finding(...)` calls may report it Required (read from the source), a rule's is its own."""
    ids: dict[str, str] = {}
    for module in CHECK_MODULES:
        emits = emitting_modules()[module]
        for call in emits.calls:
            for finding, severities in emits.reports(call).items():
                if "REQUIRED" in severities or finding not in ids:
                    ids[finding] = REQUIRED if "REQUIRED" in severities else RECOMMENDED
    for rule in read_rules(BUILTIN_RULES):
        ids[rule.id] = rule.severity
    return ids


@pytest.fixture
def config(write_config: Callable[..., Path], tmp_path: Path) -> Path:
    rules = tmp_path / "team-rules.yaml"
    rules.write_text(TEAM_RULES, encoding="utf-8")
    # Waiving reads no cluster: the kubeconfig is never opened.
    return write_config(
        f"clusters:\n  prod:\n    kubeconfig: {tmp_path / 'kubeconfig'}\nrules_files: [{rules}]\n"
    )


@pytest.fixture
def services(config: Path) -> Iterator[Services]:
    built = assemble(load_settings(config, {}), with_slack=False, clock=FakeClock(T0))
    yield built
    built.close()


def test_the_enumeration_sees_the_new_checks_ids() -> None:
    ids = every_id()
    # The ids issue 40 found refused, each as the code reports it.
    for finding, severity in {
        "EKS001": REQUIRED,
        "EKS009": RECOMMENDED,
        "CRD001": RECOMMENDED,
        "CRD002": REQUIRED,  # Required when a stored version is no longer served
        "CERT002": RECOMMENDED,
        "CNI001": RECOMMENDED,
        "CNI002": REQUIRED,  # a rule
        "CAP001": REQUIRED,
        "ISTIO002": RECOMMENDED,
    }.items():
        assert ids[finding] == severity, finding
    assert len(ids) >= 55
    assert ids.keys() >= reported_ids(CHECK_MODULES)


def test_slash_waive_accepts_every_id_the_code_can_report(services: Services) -> None:
    ids = {**every_id(), "TEAM001": REQUIRED}
    for n, (finding, severity) in enumerate(sorted(ids.items()), start=1):
        out = services.router.handle(
            CommandRequest(
                text=f'waive {finding} --for 7d --reason "accepted for the window (CHG-40)"',
                user_id="U0PRIMARY",
                channel_id="C0OPS",
                source="slack",
            )
        )
        assert out.ok, (finding, out.rendered.text)
        row = services.store.waiver(n)
        assert row is not None
        assert (row.finding, row.required, row.state) == (
            finding,
            severity == REQUIRED,
            "pending" if severity == REQUIRED else "active",
        ), finding
        assert f"Waiver *{n}* of `{finding}`" in out.rendered.text
    assert len(services.store.waivers()) == len(ids)


def test_terminal_exec_waive_accepts_every_id_the_code_can_report(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {**every_id(), "TEAM001": REQUIRED}
    for finding in sorted(ids):
        rc = main(
            [
                "exec",
                f'waive {finding} --for 7d --reason "accepted for the window"',
                "--as",
                "U0PRIMARY",
                "--config",
                str(config),
            ]
        )
        out = capsys.readouterr()
        assert rc == 0, (finding, out.out, out.err)
        assert f"of `{finding}`" in out.out, out.out
    settings = load_settings(config, {})
    store = Store.open(settings.database_url)
    try:
        rows = {w.finding: w for w in store.waivers()}
    finally:
        store.close()
    assert set(rows) == set(ids)
    assert {f for f, w in rows.items() if w.state == "pending"} == {
        f for f, s in ids.items() if s == REQUIRED
    }


def test_an_id_nothing_reports_is_refused_with_the_ids_it_may_mean(services: Services) -> None:
    for text, reason in (
        ("waive EKS011 --for 1d --reason x", "no check or rule reports `EKS011` (did you mean `EKS010` or"),
        ("waive eks001 --for 1d --reason x", "is not a finding id (did you mean `EKS001`?)"),
        ("waive TEAM002 --for 1d --reason x", "did you mean `TEAM001`"),
    ):
        out = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", channel_id="C0OPS"))
        assert not out.ok
        assert reason in out.rendered.text, out.rendered.text
    assert services.store.waivers() == []
