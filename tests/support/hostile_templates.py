"""Team template overrides that try to hang or crash rendering (issue 11, item 5).

Each case is a real announcement override: the first line is harmless, the hostile part sits on a
known line, so every surface can be asked to name the right file, line and reason. The same cases
run through the renderer, `upgrade-bot templates check` (a real process) and `/upgrade announce
preview` (the router in-process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HEAD = "Heads up: {{ plan.cluster }}\n"


@dataclass(frozen=True, kw_only=True)
class Hostile:
    id: str
    #: The announcement it overrides (`reminder` renders in every context variant).
    template: str = "reminder"
    #: The override's body: its line 2 is the hostile one unless `blamed` says otherwise.
    body: str
    #: What the user must be told (a substring of the reason).
    reason: str
    line: int = 2
    #: Other files in the team's `announcements/` folder (partials), by name.
    partials: dict[str, str] = field(default_factory=dict)
    #: The file the failure is reported against, when it is not the override itself.
    blamed: str | None = None

    def write(self, templates_dir: Path) -> Path:
        """Write the override (and partials) under `templates_dir`; return the blamed file."""
        folder = templates_dir / "announcements"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.template}.txt.j2").write_text(self.body, encoding="utf-8")
        for name, text in self.partials.items():
            (folder / name).write_text(text, encoding="utf-8")
        return folder / (self.blamed or f"{self.template}.txt.j2")


CASES = [
    Hostile(
        id="nested-range-100000",
        body=HEAD + "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}\n",
        reason="range() of 100,000 items (at most 10,000)",
    ),
    Hostile(
        id="nested-loops-within-the-range-cap",
        # 10,000 × 10,000 × 10,000 silent iterations: no single value is big, only the time is.
        body=HEAD
        + "{% for i in range(10000) %}{% for j in range(10000) %}{% for k in range(10000) %}"
        + "{% endfor %}{% endfor %}{% endfor %}\n",
        reason="rendering took longer than 1 s",
    ),
    Hostile(
        id="list-appended-inside-its-own-loop",
        body=HEAD + "{% set items = [1] %}{% for x in items %}{{ items.append(x) }}{% endfor %}\n",
        reason="access to attribute 'append' of 'list' object is unsafe",
    ),
    Hostile(
        id="lipsum-100000",
        body=HEAD + "{{ lipsum(100000) }}\n",
        reason="lipsum() of 100,000 paragraphs (at most 5)",
    ),
    Hostile(
        id="string-repeated-a-billion-times",
        body=HEAD + "{{ 'a' * 10**9 }}\n",
        reason="a string of 1,000,000,000 characters (at most 200,000)",
    ),
    Hostile(
        id="string-doubled-in-a-recursive-macro",
        body=HEAD
        + "{% macro grow(s, n) %}{{ grow(s ~ s, n + 1) if n < 60 else s|length }}{% endmacro %}"
        + "{{ grow('ab', 0) }}\n",
        reason="(at most 200,000)",
    ),
    Hostile(
        id="int-plus-str",
        body=HEAD + "{{ 1 + 'a' }}\n",
        reason="unsupported operand type(s) for +: 'int' and 'str'",
    ),
    Hostile(id="division-by-zero", body=HEAD + "{{ 1/0 }}\n", reason="division by zero"),
    Hostile(
        id="macro-calling-itself",
        body=HEAD + "{% macro again(n) %}{{ again(n + 1) }}{% endmacro %}{{ again(0) }}\n",
        reason="nested too deeply",
    ),
    Hostile(
        id="template-including-itself",
        body=HEAD + '{% include "reminder.txt.j2" %}\n',
        reason="nested too deeply",
    ),
    Hostile(
        id="range-of-a-billion",
        body=HEAD + "{{ range(10**9) | length }}\n",
        reason="range() of 1,000,000,000 items (at most 10,000)",
    ),
    Hostile(
        id="missing-include",
        body=HEAD + '{% include "_nowhere.txt.j2" %}\n',
        reason="includes _nowhere.txt.j2, which does not exist",
    ),
    Hostile(
        id="error-inside-an-included-partial",
        body=HEAD + '{% include "_footer.txt.j2" %}\n',
        partials={"_footer.txt.j2": "Thanks!\n\n{{ plan.cluster / 2 }}\n"},
        blamed="_footer.txt.j2",
        line=3,
        reason="unsupported operand type(s) for /: 'str' and 'int'",
    ),
    Hostile(
        id="output-past-the-size-cap",
        body=HEAD + "{% for i in range(10000) %}{{ 'x' * 100 }}{% endfor %}\n",
        reason="output longer than 200,000 characters",
    ),
]
