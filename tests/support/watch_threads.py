"""Reading a watch's thread back from the Slack stub: every milestone line once, every known issue
once per (rule, workload) — a rule's explanation is the same text for each workload it names."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

KNOWN_ISSUE = ":mag: Known issue"


def milestone_lines_once(thread: Sequence[str]) -> list[str]:
    """The thread's milestone lines (known-issue posts left out), asserting none is repeated and no
    known issue is posted twice for the same workload."""
    rules = [text for text in thread if text.startswith(KNOWN_ISSUE)]
    heads = Counter("\n".join(text.splitlines()[:2]) for text in rules)
    assert [head for head, n in heads.items() if n > 1] == []
    lines = [line for text in thread if not text.startswith(KNOWN_ISSUE) for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    assert [line for line, n in Counter(lines).items() if n > 1] == []
    return lines
