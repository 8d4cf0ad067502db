"""Label and field selectors, parsed and matched the way the API server does.

Label selectors come in two shapes: the query-string syntax (`app=web,tier in (a,b),!canary`) and
the object form in Deployments, PDBs and Services (`matchLabels` / `matchExpressions`). Field
selectors accept `=`, `==` and `!=` on the fields each kind declares selectable; anything else is a
400, as on a real server ("field label not supported: foo").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector that does not parse; the API answers 400 BadRequest with this message."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("gt", "lt"):
            if not present or value is None:
                return False
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == "gt" else have < want
        return False


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    #: A nil selector in an object (e.g. a PDB without one) selects nothing, unlike an empty one.
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.nothing

    def exact(self, key: str) -> str | None:
        """The value this selector requires for `key` with `=`, if it does (used for index lookups)."""
        for r in self.requirements:
            if r.key == key and r.op == "=" and len(r.values) == 1:
                return r.values[0]
        return None


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the query-string syntax."""
    if not text or not text.strip():
        return EVERYTHING
    parser = _LabelParser(text)
    return LabelSelector(tuple(parser.parse()))


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> str:
        self._skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _ident(self) -> str:
        self._skip()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "-_./"):
            self.pos += 1
        return self.text[start : self.pos]

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            reqs.append(self._requirement())
            ch = self._peek()
            if ch == "":
                return reqs
            if ch != ",":
                raise SelectorError(f"unable to parse requirement: found '{ch}', expected: ','")
            self.pos += 1

    def _requirement(self) -> Requirement:
        if self._peek() == "!":
            self.pos += 1
            key = self._ident()
            if not key:
                raise SelectorError("unable to parse requirement: found '', expected: identifier")
            return Requirement(key, "!")
        key = self._ident()
        if not key:
            found = self._peek()
            raise SelectorError(f"unable to parse requirement: found '{found}', expected: identifier")
        self._skip()
        rest = self.text[self.pos :]
        for token, op in (("==", "="), ("!=", "!="), ("=", "="), (">", "gt"), ("<", "lt")):
            if rest.startswith(token):
                self.pos += len(token)
                value = self._ident()
                if op in ("gt", "lt") and not value.lstrip("-").isdigit():
                    raise SelectorError(f"for 'Gt', 'Lt' operators, the value must be an integer: {value}")
                return Requirement(key, op, (value,))
        word_start = self.pos
        word = self._ident()
        if word in ("in", "notin"):
            if self._peek() != "(":
                raise SelectorError(f"unable to parse requirement: found '{self._peek()}', expected: '('")
            self.pos += 1
            values: list[str] = []
            while True:
                values.append(self._ident())
                ch = self._peek()
                if ch == ",":
                    self.pos += 1
                    continue
                if ch == ")":
                    self.pos += 1
                    break
                raise SelectorError(f"unable to parse requirement: found '{ch}', expected: ',' or ')'")
            return Requirement(key, word, tuple(values))
        self.pos = word_start
        return Requirement(key, "exists")


def selector_from_object(sel: Any) -> LabelSelector:
    """A `metav1.LabelSelector` object (matchLabels + matchExpressions); None selects nothing."""
    if sel is None:
        return NOTHING
    if not isinstance(sel, dict):
        raise SelectorError("selector must be an object")
    reqs: list[Requirement] = [
        Requirement(k, "=", (str(v),)) for k, v in (sel.get("matchLabels") or {}).items()
    ]
    for expr in sel.get("matchExpressions") or []:
        op = str(expr.get("operator", ""))
        values = tuple(str(v) for v in expr.get("values") or [])
        mapping = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
        if op not in mapping:
            raise SelectorError(f"{op!r} is not a valid label selector operator")
        reqs.append(Requirement(str(expr.get("key", "")), mapping[op], values))
    return LabelSelector(tuple(reqs))


def selector_from_map(labels: Mapping[str, str] | None) -> LabelSelector:
    """A Service's or ReplicationController's plain map selector; empty/None selects nothing."""
    if not labels:
        return NOTHING
    return LabelSelector(tuple(Requirement(k, "=", (str(v),)) for k, v in labels.items()))


def selector_to_string(sel: Any) -> str:
    """The query-string form of an object selector (kubectl's wide columns show it)."""
    if not isinstance(sel, dict):
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        op, key = expr.get("operator"), expr.get("key")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    negate: bool = False


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, values: Mapping[str, str]) -> bool:
        for r in self.requirements:
            have = values.get(r.field, "")
            if (have == r.value) == r.negate:
                return False
        return True

    def exact(self, name: str) -> str | None:
        for r in self.requirements:
            if r.field == name and not r.negate:
                return r.value
        return None

    @property
    def fields(self) -> set[str]:
        return {r.field for r in self.requirements}


def parse_field_selector(text: str | None, allowed: Sequence[str]) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    reqs: list[FieldRequirement] = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue
        found = next(
            (
                (t, n, i)
                for t, n in (("!=", True), ("==", False), ("=", False))
                if (i := _find_unescaped(term, t)) >= 0
            ),
            None,
        )
        if found is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        token, negate, idx = found
        name = term[:idx].strip()
        value = _unescape(term[idx + len(token) :].strip())
        if name not in allowed:
            raise SelectorError(f"field label not supported: {name}")
        reqs.append(FieldRequirement(name, value, negate))
    return FieldSelector(tuple(reqs))


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur += text[i : i + 2]
            i += 2
            continue
        if ch == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    parts.append(cur)
    return parts


def _find_unescaped(text: str, token: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(token, i):
            return i
        i += 1
    return -1


def _unescape(text: str) -> str:
    out, i = "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out += text[i + 1]
            i += 2
        else:
            out += text[i]
            i += 1
    return out
