"""Rule patterns are data: RE2 compiles them (refusing what needs backtracking, with the file and
line), `search` looks at bounded text, and a run of the rules stops at its budget and says so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.rules import (
    ContainerView,
    EventRecord,
    PodState,
    match_rules,
    parse_rules,
    read_rules,
)
from bot.core.rules.patterns import (
    MAX_TEXT_CHARS,
    MatchBudget,
    PatternError,
    compile_pattern,
)
from bot.errors import ConfigError

EVIL = "a" * 34 + "!"


def test_a_pattern_that_backtracks_exponentially_in_re_is_linear_here() -> None:
    pattern = compile_pattern("(a+)+$")
    started = time.perf_counter()
    assert pattern.search(EVIL) is None
    assert pattern.search("a" * 100_000 + "!") is None
    assert time.perf_counter() - started < 0.5
    found = pattern.search("xx\naaaa\nyy")  # multi-line: `$` ends a line
    assert found is not None
    assert found.text[found.start : found.end] == "aaaa"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "backreferences are not supported"),
        (r"foo(?=bar)", "lookahead is not supported"),
        (r"foo(?!bar)", "lookahead is not supported"),
        (r"(?<=foo)bar", "lookbehind is not supported"),
        (r"end\Z", "write \\z for the end of the text"),
        (r"(unclosed", "missing ): (unclosed"),
        (r"a{2000}", "invalid repetition size: {2000}"),
        (r"(\w{1,20}\s?){50}q", "too complex for a rule: RE2 compiles it to 4255 instructions (at most 3000"),
    ],
)
def test_what_re2_cannot_match_in_linear_time_is_refused_with_the_reason(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as err:
        compile_pattern(pattern)
    assert reason in str(err.value)
    assert "(?m)" not in str(err.value)


def test_rules_check_refuses_a_backreference_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "rules:\n"
        "  - id: TEAM001\n"
        "    title: t\n"
        "    match:\n"
        "      log: {regex: '(\\w+) \\1'}\n"
        "    explanation: e\n"
        "    remediation: r\n"
        "    links: [https://example.com/evidence]\n"
    )
    with pytest.raises(ConfigError) as err:
        read_rules(path)
    assert err.value.user_message.startswith(
        f"{path}:5: rules[0].match.log.regex: '(\\\\w+) \\\\1' is not a regular expression RE2 accepts: "
        "invalid escape sequence: \\1 — backreferences are not supported"
    )


def test_search_looks_at_the_start_of_a_message_and_the_end_of_a_log() -> None:
    pattern = compile_pattern("NEEDLE")
    late = "x" * MAX_TEXT_CHARS + "NEEDLE"
    early = "NEEDLE" + "x" * MAX_TEXT_CHARS
    assert pattern.search(late) is None
    assert pattern.search(late, keep_end=True) is not None
    assert pattern.search(early) is not None
    assert pattern.search(early, keep_end=True) is None


RULES = parse_rules(
    """\
rules:
  - id: TEAM001
    title: events
    match: {events: {message: "(a+)+$"}}
    explanation: e
    remediation: r
    links: [https://example.com/1]
  - id: TEAM002
    title: deleting
    match: {deleting: true}
    explanation: e
    remediation: r
    links: [https://example.com/2]
""",
    source="team.yaml",
)


def _pods(n: int) -> list[PodState]:
    return [
        PodState(
            namespace="shop",
            name=f"api-{i}",
            workload=f"Deployment shop/api-{i}",
            deleting=True,
            containers=(ContainerView(name="api"),),
        )
        for i in range(n)
    ]


def _events(n: int, message: str) -> list[EventRecord]:
    return [
        EventRecord(namespace="shop", kind="Pod", name=f"api-{i}", reason="R", message=message)
        for i in range(n)
    ]


class Ticks:
    """A clock that moves a fixed step each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_a_spent_budget_stops_the_pattern_rules_and_says_which_while_the_others_finish() -> None:
    budget = MatchBudget(seconds=1.0, clock=Ticks(0.1))
    hits = match_rules(RULES, _pods(50), _events(50, "aaaa"), budget=budget)
    by_rule = {r: [h for h in hits if h.rule.id == r] for r in ("TEAM001", "TEAM002")}
    assert len(by_rule["TEAM002"]) == 50  # no pattern: always finishes
    assert 0 < len(by_rule["TEAM001"]) < 50
    assert budget.exhausted
    assert budget.cut == {"TEAM001"}
    assert budget.describe() == (
        "known-issue rules stopped matching after their 1 s budget: TEAM001 did not look at every "
        "pod or event (findings may be missing)"
    )


def test_a_budget_left_is_silent_and_only_time_spent_matching_counts() -> None:
    clock = Ticks(0.0)
    budget = MatchBudget(seconds=1.0, clock=clock)
    hits = match_rules(RULES, _pods(5), _events(5, "aaaa"), budget=budget)
    assert len(hits) == 10
    clock.now += 3600  # time between two batches (reading pages) is not matching
    match_rules(RULES, _pods(5), _events(5, "aaaa"), budget=budget)
    assert not budget.exhausted
    assert budget.describe() == ""


# ----- fuzz: any pattern that compiles × any bounded text stays within the budget -------------------

_TOKENS = st.sampled_from(
    [
        "a", "b", "x", ".", "\\w", "\\d", "\\s", "[a-z]", "[^x]", "(", ")", "(?:", "|", "*", "+", "?",
        "{1,9}", "{0,50}", "{3}", "^", "$", "\\b", "(?i)", "(?s)", "(a+)+", "(a|aa)*", "(.*)*",
    ]
)  # fmt: skip
#: Well-formed patterns, nested (repetitions of repetitions are what backtracking engines choke on)…
_WELL_FORMED = st.recursive(
    st.sampled_from(["a", "b", "!", ".", "\\w", "\\s", "[a-z]", "[^x]", "^", "$", "\\b"]),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        inner.map(lambda p: f"({p})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,9}", "{0,50}", "{3}", "*?"])).map("".join),
        # A repetition of a repetition, anchored: exponential for a backtracking engine.
        inner.map(lambda p: f"(?:({p})+)+$"),
    ),
    max_leaves=25,
)
#: …and token soup, most of which RE2 refuses (the refusal is what is tested then).
_PATTERNS = st.one_of(_WELL_FORMED, st.lists(_TOKENS, min_size=1, max_size=40).map("".join))
#: Texts up to twice the bound: a short random piece repeated (so long texts are cheap to
#: generate) and a short random tail — "aaaa…a!" is what makes a backtracking engine give up.
_TEXTS = st.tuples(
    st.text(alphabet=st.sampled_from("aab!x \n\té9_"), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=MAX_TEXT_CHARS * 2),
    st.text(alphabet=st.sampled_from("!ab \n"), max_size=3),
).map(lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]] + t[2])

#: One search on the largest text takes ≤ 0.6 s on this machine for the worst pattern known
#: (bench_rules.py; most take milliseconds); the bound leaves room for a loaded CI machine and
#: still catches anything super-linear (Python's re needs minutes for these).
ONE_SEARCH = 2.0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_PATTERNS, texts=st.lists(_TEXTS, min_size=1, max_size=4))
def test_fuzz_random_patterns_on_random_texts_never_exceed_the_budget(pattern: str, texts: list[str]) -> None:
    try:
        compiled = compile_pattern(pattern)
    except PatternError:
        return
    for text in texts:
        started = time.perf_counter()
        compiled.search(text)
        compiled.search(text, keep_end=True)
        assert time.perf_counter() - started < 2 * ONE_SEARCH, (pattern, len(text))
    rules = parse_rules(
        "rules:\n  - id: FUZZ001\n    title: t\n    match:\n      events:\n        message: "
        + _yaml_string(pattern)
        + "\n    explanation: e\n    remediation: r\n    links: [https://example.com/f]\n",
        source="fuzz.yaml",
    )
    events = [
        EventRecord(namespace="ns", kind="Node", name=f"n{i}", reason="R", message=texts[i % len(texts)])
        for i in range(20)
    ]
    budget = MatchBudget(seconds=0.2)
    started = time.perf_counter()
    match_rules(rules, [], events, budget=budget)
    assert time.perf_counter() - started < budget.seconds + ONE_SEARCH


def _yaml_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
