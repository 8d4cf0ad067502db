"""`run_rules_test`, the engine of `upgrade-bot rules test [FILE] --log LINE [--container NAME] |
--event MESSAGE [--reason REASON]`: which rules match, their captured fields, what else they
need of a pod, and the exit status (3 a match, 0 none, 2 a bad rules file or arguments)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.frontdoor.rules_tester import EXIT_FOUND, EXIT_OK, EXIT_USAGE, run_rules_test

TEAM = """\
rules:
  - id: PAY001
    title: ledger cannot reach its database
    severity: required
    match:
      namespaces: [payments]
      annotations: {vault.hashicorp.com/agent-inject: "true"}
      containers: [ledger]
      log: {regex: 'dial tcp (?P<address>[0-9.]+:[0-9]+): connect: connection refused', lines: 2}
    explanation: the database is not reachable from the new nodes
    remediation: kubectl -n {namespace} logs {pod} -c {container}
    links: [https://example.com/runbooks/ledger]
  - id: PAY002
    title: ledger pods evicted for ephemeral storage
    match:
      events: {reasons: [Evicted], message: 'ephemeral local storage usage exceeds'}
    explanation: the ledger's scratch space outgrows the node's
    remediation: kubectl -n {namespace} describe pod {pod}
    links: [https://example.com/runbooks/ledger-storage]
"""
REFUSED = "2026-11-28T12:00:01Z error dial tcp 10.0.4.12:5432: connect: connection refused"


def run(*args: object, **kwargs: object) -> tuple[int, str]:
    out = io.StringIO()
    rc = run_rules_test(*args, out, **kwargs)  # type: ignore[arg-type]
    return rc, out.getvalue()


@pytest.fixture
def team(tmp_path: Path) -> Path:
    path = tmp_path / "team-rules.yaml"
    path.write_text(TEAM, encoding="utf-8")
    return path


def test_a_matching_log_line_prints_the_rule_its_captured_fields_and_what_else_it_needs(team: Path) -> None:
    rc, out = run(team, REFUSED, None, None)
    assert rc == EXIT_FOUND
    assert out.splitlines() == [
        f"PAY001  ledger cannot reach its database  (required; {team}:2)",
        "  matched: dial tcp 10.0.4.12:5432: connect: connection refused",
        "  address: 10.0.4.12:5432",
        "  when also: container ledger; namespace payments; annotation vault.hashicorp.com/agent-inject=true",
        f"1 rule matches this log line: PAY001 (1 of the 2 rules in {team} read logs)",
    ]


def test_the_right_container_drops_it_from_the_conditions_and_another_rules_the_rule_out(team: Path) -> None:
    rc, out = run(team, REFUSED, "ledger", None)
    assert rc == EXIT_FOUND
    assert "  when also: namespace payments; annotation" in out
    assert "1 rule matches this log line of container ledger: PAY001" in out
    rc, out = run(team, REFUSED, "vault-agent", None)
    assert rc == EXIT_OK
    assert out.splitlines() == [
        "PAY001  no: its pattern matches, but it reads only ledger's log",
        f"no rule matches this log line of container vault-agent (1 of the 2 rules in {team} read logs: PAY001)",
    ]


def test_a_pasted_tail_is_read_as_the_rule_reads_a_log_its_last_lines(team: Path) -> None:
    # The rule reads the last 2 lines of the log: an error 3 lines back is not what it sees.
    tail = f"{REFUSED}\nretrying in 5s\nretrying in 10s\n"
    assert run(team, tail, "ledger", None)[0] == EXIT_OK
    rc, out = run(team, f"retrying in 5s\n{REFUSED}\n", "ledger", None)
    assert rc == EXIT_FOUND
    assert f"  log line: {REFUSED}" in out


def test_an_event_matches_on_its_message_and_its_reason_when_given(team: Path) -> None:
    message = "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi."
    rc, out = run(team, None, None, message)
    assert rc == EXIT_FOUND
    assert "  when also: the event's reason Evicted" in out
    rc, out = run(team, None, None, message, reason="Evicted")
    assert rc == EXIT_FOUND
    assert "when also" not in out
    assert "1 rule matches this Evicted event: PAY002" in out
    rc, out = run(team, None, None, message, reason="Killing")
    assert rc == EXIT_OK
    assert "PAY002  no: its pattern matches, but only events of reason Evicted" in out


def test_no_match_exits_0_naming_the_rules_that_read_that_kind_of_line() -> None:
    rc, out = run(None, None, None, "Successfully assigned payments/ledger-0 to ip-10-0-4-12")
    assert rc == EXIT_OK
    assert out.splitlines() == [
        "no rule matches this event (3 of the 13 rules in the shipped rules read events: KI006, KI007, CNI002)",
        "not tried: 6 rules match on a pod's state (waiting reasons, readiness, annotations), not on a line: "
        "KI004, KI005, KI008, KI009, KI010, KI011; `upgrade-bot check` and a watch find those on the cluster",
    ]


def test_the_shipped_rules_are_named_by_their_place_in_templates_not_this_hosts_path() -> None:
    rc, out = run(None, None, None, "Cannot evict pod as it would violate the pod's disruption budget.")
    assert rc == EXIT_FOUND
    assert (
        "KI006  Eviction refused by a PodDisruptionBudget (drain stalled)  (recommended; templates/rules/known-issues.yaml:"
        in out
    )
    assert str(Path.cwd()) not in out


def test_a_missing_or_invalid_rules_file_exits_2_listing_its_problems(tmp_path: Path) -> None:
    rc, out = run(tmp_path / "nope.yaml", "x", None, None)
    assert (rc, out.strip()) == (EXIT_USAGE, f"upgrade-bot: {tmp_path / 'nope.yaml'}: no such file")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rules:\n  - id: X1\n    title: t\n    match: {log: {regex: '(a'}}\n"
        "    explanation: e\n    remediation: r\n    links: [http://x]\n",
        encoding="utf-8",
    )
    rc, out = run(bad, "x", None, None)
    assert rc == EXIT_USAGE
    # Its first problem named by file and line (how many more is `rules check`'s to list).
    assert f"{bad}:2: rules[0].id: 'X1' is not an id like ISTIO001" in out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((None, None, None), {}, "give one of --log LINE or --event MESSAGE"),
        (("x", None, "y"), {}, "give one of --log LINE or --event MESSAGE"),
        ((None, "ledger", "y"), {}, "--container goes with --log"),
        (("x", None, None), {"reason": "Evicted"}, "--reason goes with --event"),
    ],
)
def test_a_wrong_mix_of_arguments_exits_2(
    args: tuple[object, ...], kwargs: dict[str, str], error: str
) -> None:
    rc, out = run(None, *args, **kwargs)
    assert rc == EXIT_USAGE
    assert error in out
