"""`success:` / `failure:` conditions of an `analysis`, evaluated safely over two variables:
`result` (the query's value: a number for a single sample, a list of numbers otherwise) and
`baseline` (the value the `snapshot` recorded, or null).

The grammar is the common core of CEL and of the expressions Argo Rollouts' AnalysisTemplates
use: numbers, strings, `true`/`false`/`null`, `result[0]`, `+ - * / %`, comparisons, `&&`, `||`,
`!`, parentheses, and `size()`, `abs()`, `min()`, `max()`. It is parsed with Python's own parser
into a tree and walked here node by node against that list: nothing is ever passed to `eval`, no
attribute, call or name outside it exists, and numbers mix freely (`result < 1.2 * baseline + 5`).

Why not a CEL package: `common-expression-language` brings typer, pydantic and prompt-toolkit for
its own REPL, which put the install over its 160 MB budget (tests/test_packaging.py)."""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

#: Variables a condition may name.
VARIABLES = ("result", "baseline")
_FUNCTIONS: dict[str, Callable[..., Any]] = {"size": len, "abs": abs, "min": min, "max": max}
_BIN: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
_CMP: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
# CEL's spelling → Python's, outside string literals.
_TOKEN = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(&&)|(\|\|)|(!(?!=))|\b(true|false|null)\b""")
_WORDS = {"true": "True", "false": "False", "null": "None"}
MAX_LENGTH = 500


class ConditionError(ValueError):
    """The condition does not parse, uses what conditions do not have, or cannot be decided."""


def _python(expr: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1)
        if m.group(2):
            return " and "
        if m.group(3):
            return " or "
        if m.group(4):
            return " not "
        return _WORDS[m.group(5)]

    return _TOKEN.sub(sub, expr)


def _check(node: ast.AST, expr: str) -> None:
    """Every node must be one the grammar has; a Python keyword spelled out (`and`, `not`,
    `True`) is refused too, so a condition reads the same in CEL."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id not in VARIABLES and n.id not in _FUNCTIONS and n.id not in ("True", "False", "None"):
                raise ConditionError(f"{expr!r} names {n.id}; a condition may use only result and baseline")
        elif isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.func.id not in _FUNCTIONS or n.keywords:
                name = n.func.id if isinstance(n.func, ast.Name) else ast.unparse(n.func)
                raise ConditionError(f"{expr!r} calls {name}, which conditions do not have")
        elif isinstance(n, ast.Constant):
            if not isinstance(n.value, int | float | str | bool | type(None)):
                raise ConditionError(f"{expr!r}: {n.value!r} is not a number or a string")
        elif (
            not isinstance(
                n,
                ast.Expression
                | ast.BoolOp
                | ast.And
                | ast.Or
                | ast.UnaryOp
                | ast.Not
                | ast.USub
                | ast.UAdd
                | ast.BinOp
                | ast.Compare
                | ast.Subscript
                | ast.Load
                | ast.List
                | ast.operator
                | ast.cmpop,
            )
            or (isinstance(n, ast.operator) and type(n) not in _BIN)
            or (isinstance(n, ast.cmpop) and type(n) not in _CMP)
        ):
            raise ConditionError(f"{expr!r}: {type(n).__name__.lower()} is not part of a condition")


class Condition:
    """A parsed condition; `holds(result, baseline)` is True or False, or raises ConditionError
    when it cannot be decided (arithmetic on a null baseline, an index out of range, not a
    boolean)."""

    def __init__(self, expr: str) -> None:
        self.expr = expr
        if len(expr) > MAX_LENGTH:
            raise ConditionError(f"a condition of {len(expr)} characters is too long (at most {MAX_LENGTH})")
        source = _python(expr)
        if re.search(r"\b(and|or|not|True|False|None|lambda|if|else|for|in|is)\b", _strip_strings(expr)):
            raise ConditionError(f"{expr!r} is not a valid condition: write &&, ||, !, true, false, null")
        try:
            self._tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            raise ConditionError(f"{expr!r} is not a valid condition: {exc.msg}") from None
        _check(self._tree, expr)

    def holds(self, result: float | list[float], baseline: float | list[float] | None) -> bool:
        try:
            value = _eval(self._tree.body, {"result": result, "baseline": baseline})
        except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as exc:
            raise ConditionError(f"{self.expr!r}: {type(exc).__name__}: {exc}") from None
        if not isinstance(value, bool):
            raise ConditionError(f"{self.expr!r} gave {value!r}, not true or false")
        return value


def _strip_strings(expr: str) -> str:
    return re.sub(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""", "''", expr)


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return {"True": True, "False": False, "None": None}.get(node.id, env.get(node.id))
    if isinstance(node, ast.BoolOp):
        values = (_truth(_eval(v, env)) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not _truth(v)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise TypeError(f"{v!r} is not a number")
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        for v in (left, right):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise TypeError(f"{v!r} is not a number")
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript):
        seq, index = _eval(node.value, env), _eval(node.slice, env)
        if not isinstance(seq, list) or isinstance(index, bool) or not isinstance(index, int):
            raise TypeError("only a list is indexed, by a whole number")
        return seq[index]
    if isinstance(node, ast.List):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _FUNCTIONS[node.func.id](*(_eval(a, env) for a in node.args))
    raise TypeError(f"{type(node).__name__} is not part of a condition")


def _truth(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{v!r} is not true or false")
    return v
