"""Finding ids as the source reports them, read with `ast` (not from the registry): which modules
build a check `Finding` and which ids each can report. `tests/core/checks/test_finding_ids.py`
holds the registry to it; `tests/commands/test_waive_every_id.py` waives each id it finds.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FINDINGS_MODULE = "bot.core.checks.findings"
#: What a finding id looks like in source (`findings.valid_id` takes more shapes, for teams' rules).
ID_LITERAL = re.compile(r"^[A-Z]{2,}[0-9]{3}$")
#: The one module that builds findings from data: a rule's id is the rule's (`r.id`).
RULES_MODULE = "bot.core.checks.rulehits"


def sources() -> Iterator[tuple[str, Path]]:
    for base in ("bot", "commands"):
        for path in sorted((ROOT / base).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("bot", "sim"):
                continue  # the sim is a separate subsystem; it reports no findings of the bot's
            yield ".".join(rel.with_suffix("").parts).removesuffix(".__init__"), path


class Emits:
    """The `Finding(...)` calls of one module and the ids each can take."""

    def __init__(self, source: str) -> None:
        self.tree = ast.parse(source)
        self.names = {
            alias.asname or alias.name
            for node in ast.walk(self.tree)
            if isinstance(node, ast.ImportFrom) and node.module == FINDINGS_MODULE
            for alias in node.names
            if alias.name == "Finding"
        }
        #: `from bot.core.checks import findings` (then `findings.Finding(...)`).
        self.modules = {
            alias.asname or alias.name
            for node in ast.walk(self.tree)
            if isinstance(node, ast.ImportFrom) and node.module == FINDINGS_MODULE.rpartition(".")[0]
            for alias in node.names
            if alias.name == "findings"
        }
        self.calls = [
            node for node in ast.walk(self.tree) if isinstance(node, ast.Call) and self._builds(node)
        ]

    def _builds(self, call: ast.Call) -> bool:
        f = call.func
        if isinstance(f, ast.Name):
            return f.id in self.names
        return (
            isinstance(f, ast.Attribute)
            and f.attr == "Finding"
            and isinstance(f.value, ast.Name)
            and f.value.id in self.modules
        )

    def ids(self) -> tuple[set[str], list[str]]:
        """(the ids the calls can report, the calls whose id cannot be told from the source)."""
        found: set[str] = set()
        unknown: list[str] = []
        for call in self.calls:
            mine, unknowable = self.ids_of(call)
            found |= mine
            unknown += unknowable
        return found, unknown

    def ids_of(self, call: ast.Call) -> tuple[set[str], list[str]]:
        """The ids one `Finding(...)` call can report (or why they cannot be told)."""
        given = next((k.value for k in call.keywords if k.arg == "id"), None)
        values = self._values(given) if given is not None else None
        if values is None:
            return set(), [f"line {call.lineno}: id={ast.unparse(given) if given else '(none)'}"]
        return values, []

    def reports(self, call: ast.Call) -> dict[str, set[str]]:
        """id → the severities (`REQUIRED`, `RECOMMENDED`) one `Finding(...)` call reports it with.
        `id="A" if x else "B", severity=REQUIRED if x else RECOMMENDED` pairs A with REQUIRED only."""
        given = next((k.value for k in call.keywords if k.arg == "id"), None)
        severity = next((k.value for k in call.keywords if k.arg == "severity"), None)
        assert given is not None, ast.unparse(call)
        assert severity is not None, ast.unparse(call)
        if (
            isinstance(given, ast.IfExp)
            and isinstance(severity, ast.IfExp)
            and ast.unparse(given.test) == ast.unparse(severity.test)
        ):
            arms = ((given.body, severity.body), (given.orelse, severity.orelse))
        else:
            arms = ((given, severity),)
        out: dict[str, set[str]] = {}
        for id_node, severity_node in arms:
            names = {n.id for n in ast.walk(severity_node) if isinstance(n, ast.Name)}
            for finding in self._values(id_node) or ():
                out.setdefault(finding, set()).update(names)
        return out

    def literals(self) -> set[str]:
        """Every string literal in the module shaped like a finding id."""
        return {
            node.value
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ID_LITERAL.match(node.value)
        }

    def _values(self, node: ast.expr) -> set[str] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            body, orelse = self._values(node.body), self._values(node.orelse)
            return None if body is None or orelse is None else body | orelse
        if isinstance(node, ast.Name):
            return self._bound(node.id)
        return None

    def _bound(self, name: str) -> set[str] | None:
        """The values `name` is bound to: `NAME = "API001"`, or a loop over a literal table
        (`for code, … in ((\"RES001\", …), …)` or over a name bound to one)."""
        out: set[str] = set()
        seen = False
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            ):
                seen = True
                values = self._values(node.value)
                if values is None:
                    return None
                out |= values
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Tuple):
                slots = [
                    i for i, t in enumerate(node.target.elts) if isinstance(t, ast.Name) and t.id == name
                ]
                if not slots:
                    continue
                seen = True
                rows = self._table(node.iter)
                if rows is None:
                    return None
                for row in rows:
                    if not isinstance(row, ast.Tuple | ast.List) or len(row.elts) <= slots[0]:
                        return None
                    values = self._values(row.elts[slots[0]])
                    if values is None:
                        return None
                    out |= values
        return out if seen else None

    def _table(self, node: ast.expr) -> list[ast.expr] | None:
        if isinstance(node, ast.Tuple | ast.List):
            return list(node.elts)
        if isinstance(node, ast.Name):
            for a in ast.walk(self.tree):
                if isinstance(a, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == node.id for t in a.targets
                ):
                    return self._table(a.value)
        return None


@functools.cache
def emitting_modules() -> dict[str, Emits]:
    out = {}
    for module, path in sources():
        text = path.read_text(encoding="utf-8")
        if "bot.core.checks" not in text:
            continue  # cannot import Finding (nor build one): not worth a parse
        emits = Emits(text)
        if emits.calls:
            out[module] = emits
    return out


def reported_ids(modules: tuple[str, ...]) -> set[str]:
    """Every id the `Finding(...)` calls of `modules` can report, told from their source."""
    out: set[str] = set()
    for module in modules:
        found, unknown = emitting_modules()[module].ids()
        assert not unknown, (module, unknown)
        out |= found
    return out
