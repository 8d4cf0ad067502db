"""Every built-in rule against the literal lines operators saw (`tests/data/seed_lines/`, a copy of
`../shared/docs/SEED_LINES.md`), through `run_rules_test`, the engine of `upgrade-bot rules test`.

Each rule that reads a log or an event names the seed section whose line it claims; each line must
match its rule and no other. A rule that matches pod state only (a waiting reason, a readiness, a
deletion) has no line to match and says so here, so a pattern added to one without a seed line
fails the coverage test.
"""

from __future__ import annotations

import io
import re

import pytest

from bot.core.rules import read_rules
from bot.frontdoor.rules_tester import EXIT_FOUND, run_rules_test
from bot.resources import BUILTIN_RULES
from tests.support.seed_lines import (
    CLAIMS,
    CNI002_LINE,
    COPY,
    KI012_LINE,
    NO_SEED_LINE,
    ROOT,
    SHARED,
    STATE_ONLY,
    Seed,
    section,
    seed_text,
)


def rules_test(seed: Seed, text: str) -> tuple[int, str]:
    out = io.StringIO()
    if seed.signal == "log":
        rc = run_rules_test(None, text, seed.container, None, out)
    else:
        rc = run_rules_test(None, None, None, text, out, reason=seed.reason)
    return rc, out.getvalue()


def matched_ids(output: str) -> set[str]:
    return set(re.findall(r"^([A-Z][A-Z0-9]*-?[0-9]{3})  (?!no:)", output, flags=re.MULTILINE))


def test_the_copy_is_the_shared_seed_lines_where_ci_has_them() -> None:
    copy = COPY.read_text(encoding="utf-8")
    # What every claim below relies on, whether or not the shared folder is beside the clone.
    assert copy.startswith("# Lines from real upgrades that the known-issue rules must match")
    for seed in CLAIMS.values():
        assert seed_text(seed)
    if SHARED.is_file():
        assert copy == SHARED.read_text(encoding="utf-8"), (
            f"{SHARED} changed: copy it to {COPY.relative_to(ROOT)} and check the rules against it"
        )


def test_every_built_in_rule_is_held_to_a_line_or_matches_pod_state_only() -> None:
    rules = {r.id: r for r in read_rules(BUILTIN_RULES)}
    assert set(rules) == set(CLAIMS) | set(STATE_ONLY) | set(NO_SEED_LINE)
    for rid in STATE_ONLY:
        assert rules[rid].match.log is None, rid
        assert rules[rid].match.events is None or rules[rid].match.events.message is None, rid
    for rid in (*CLAIMS, *NO_SEED_LINE):
        assert rules[rid].match.log is not None or rules[rid].match.events is not None, rid
    for title in filter(None, STATE_ONLY.values()):
        assert section(title)


@pytest.mark.parametrize("rule_id", sorted(CLAIMS))
def test_rules_test_matches_each_rule_on_its_seed_line_and_no_other_rule_does(rule_id: str) -> None:
    seed = CLAIMS[rule_id]
    text = seed_text(seed)
    rc, output = rules_test(seed, text)
    assert rc == EXIT_FOUND, output
    assert matched_ids(output) == {rule_id}, output
    if seed.signal == "log":
        # One line of the block is the one the rule claims: as a log line alone it matches too.
        alone = [line for line in text.splitlines() if rules_test(seed, line)[0] == EXIT_FOUND]
        assert alone, text
        # And no other seed section's line matches this rule.
    for other, other_seed in CLAIMS.items():
        if other != rule_id and other_seed.signal == seed.signal:
            _, output = rules_test(other_seed, seed_text(other_seed))
            assert rule_id not in matched_ids(output), (other, output)


def test_ki003_matches_the_operators_own_error_and_shows_what_it_captured() -> None:
    seed = CLAIMS["KI003"]
    (line,) = seed_text(seed).splitlines()
    assert line.endswith(".spec.metrics[0].resource.targetAverageUtilization: field not declared in schema")
    rc, output = rules_test(seed, line)
    assert rc == EXIT_FOUND
    assert "  field: targetAverageUtilization\n" in output
    assert "  hpa: istio-system/istio-ingressgateway\n" in output
    # The other direction (an operator applying v2beta1, an hpaSpec in the v2 form) still matches.
    rc, output = rules_test(
        seed,
        "error installer failed to update resource with server-side apply for obj "
        "HorizontalPodAutoscaler/istio-system/istiod: failed to create typed patch object "
        "(istio-system/istiod; autoscaling/v2beta1, Kind=HorizontalPodAutoscaler): "
        ".spec.metrics[0].resource.target: field not declared in schema",
    )
    assert rc == EXIT_FOUND
    assert "  field: target\n" in output
    # What the rule now says is the seed's cause, with the v2 form as the remedy.
    ki003 = next(r for r in read_rules(BUILTIN_RULES) if r.id == "KI003")
    assert "targetAverageUtilization" in ki003.explanation
    assert "target: {type: Utilization, averageUtilization: 80}" in ki003.remediation


def test_cni002_matches_the_vpc_cnis_sandbox_event() -> None:
    rc, output = rules_test(NO_SEED_LINE["CNI002"], CNI002_LINE)
    assert rc == EXIT_FOUND
    assert matched_ids(output) == {"CNI002"}


def test_envoys_accept_failure_is_the_open_files_limit_ki012_not_inotifys_ki001() -> None:
    """Both say "too many open files"; only the agent's watches are inotify's (the seed's Istio line,
    KI001, whose remedy raises the inotify sysctls). Envoy failing to accept is its open-files limit:
    KI012, whose remedy raises containerd's LimitNOFILE."""
    rc, output = rules_test(NO_SEED_LINE["KI012"], KI012_LINE)
    assert rc == EXIT_FOUND
    assert matched_ids(output) == {"KI012"}
    seed = CLAIMS["KI001"]
    _, output = rules_test(seed, seed_text(seed))
    assert "KI012" not in matched_ids(output)
