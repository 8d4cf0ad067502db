"""What a YAML syntax error means, said in the terms of the file a person wrote by hand.

PyYAML (and libyaml, through the C loaders) describe a slip in the parser's own terms: "expected
<block end>, but found '<block mapping start>'", "mapping values are not allowed here", "could not
find expected ':'", "found character '\\t' that cannot start any token". `read_slip` turns each
common one into a reading of the text itself — which line, which column (1-based, as editors count),
and what is likely wrong there ("this line is indented deeper than `id:` above it …", "a tab
character: YAML indents with spaces") — and logs the parser's own words at DEBUG.

A leaf (it imports only PyYAML and the token mask) so that every loader of a person's YAML shares
it: the configuration, plans, fleet plans and rules files in core, and the kube adapter's kubeconfig
check and `check --manifests` alike.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

import yaml

from bot.logsetup import mask_tokens

log = logging.getLogger(__name__)

#: The line breaks PyYAML counts lines by (str.splitlines counts more, and would shift the lines).
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
#: A line's key: `name:` followed by a space or the line's end (after any `- ` of list items).
_KEY = re.compile(r"""("[^"]*"|'[^']*'|[^\s#:'"][^#]*?)\s*:(?=\s|$)""")
#: The header of a block of text (`key: |`, `- >-`): the lines under it are text, not keys.
_BLOCK_HEADER = re.compile(r"[|>][-+0-9]*\s*(#.*)?$")
_CLIP = 40


@dataclass(frozen=True, kw_only=True)
class Slip:
    """Where a YAML document cannot be read and why, in plain words."""

    line: int  #: 1-based
    column: int  #: 1-based, as editors count
    reading: str


def read_slip(exc: yaml.YAMLError, text: str, label: str) -> Slip | None:
    """The plain reading of `exc`, raised while reading `text` (the file `label`); None when the
    error has no position (the caller says its first line). PyYAML's own words go to the log at
    DEBUG only."""
    log.debug("%s: the YAML parser said: %s", label, exc)
    lines = _BREAK.split(text)
    if isinstance(exc, yaml.reader.ReaderError):
        before = _BREAK.split(text[: exc.position])
        char = exc.character
        code = f"#x{char:04x}" if isinstance(char, int) else repr(char)
        return Slip(line=len(before), column=len(before[-1]) + 1, reading=f"unacceptable character {code}")
    if not isinstance(exc, yaml.MarkedYAMLError):
        return None
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return None
    found = _Reader(lines, exc.problem or "", exc.context or "", mark, exc.context_mark).read()
    return Slip(line=found.line, column=found.column, reading=mask_tokens(found.reading))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _levels(line: str) -> list[int]:
    """The columns (0-based) where the line opens something: each `- ` of a list item, then its
    content (`  - id: x` opens a list item at 2 and a key at 4)."""
    at = _indent(line)
    levels = [at]
    while line[at : at + 2] == "- " or line[at:].rstrip() == "-":
        at += 1 + _indent(line[at + 1 :])
        levels.append(at)
    return levels


def _opens_block(line: str) -> bool:
    """`key:` with nothing after it (or a comment): its value is the block of lines under it."""
    content = line[_levels(line)[-1] :]
    key = _KEY.match(content)
    rest = content[key.end() :].strip() if key else "x"
    return not rest or rest.startswith("#")


def _clipped(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _CLIP else text[:_CLIP] + "…"


class _Reader:
    """One error's reading: `problem` and `context` are the parser's words, `mark` where it
    stopped (0-based), `opened` where the construct it was reading began."""

    def __init__(
        self, lines: list[str], problem: str, context: str, mark: yaml.Mark, opened: yaml.Mark | None
    ) -> None:
        self.lines, self.problem, self.context = lines, problem, context
        self.row, self.col = mark.line, mark.column
        self.opened = opened
        self.line = lines[self.row] if self.row < len(lines) else ""

    def at(self, reading: str, row: int | None = None, col: int | None = None) -> Slip:
        row = self.row if row is None else row
        col = self.col if col is None else col
        return Slip(line=row + 1, column=col + 1, reading=reading)

    def char(self) -> str:
        return self.line[self.col] if self.col < len(self.line) else ""

    def read(self) -> Slip:
        problem, context = self.problem, self.context
        if "tab character" in problem or (self.char() == "\t" and "cannot start any token" in problem):
            return self.at("a tab character: YAML indents with spaces (replace the tab with spaces)")
        if "escape" in problem or "hexdecimal" in problem or "hexadecimal" in problem:
            return self.escape()
        if "mapping values are not allowed" in problem:
            return self.colon()
        if "expected ':'" in problem and self.opened is not None:
            return self.no_colon()
        if "quoted scalar" in context and ("end of stream" in problem or "document " in problem):
            return self.unclosed_quote()
        if re.search(r"expected ',' or '[\]}]'", problem):
            return self.unclosed_flow()
        if "<block end>" in problem or "expected key" in problem or "'-' indicator" in problem:
            return self.block_end()
        if "cannot start any token" in problem:
            return self.reserved()
        if "sequence entries are not allowed" in problem:
            return self.at(
                "a `- ` list item on the same line as its key: start the list on the next line, "
                "indented under the key (or write it `[a, b]`)"
            )
        if "undefined alias" in problem or "scanning an alias" in context or "scanning an anchor" in context:
            return self.alias()
        if "another document" in problem or "document start" in problem:
            return self.second_document()
        if "node content" in problem and self.at_end():
            return self.never_closed() or self.at("the file ends where a value should be")
        if "node content" in problem or "mapping keys are not allowed" in problem:
            return self.reserved()
        if "duplicate anchor" in context and self.opened is not None:
            return self.at(
                f"the anchor `{_clipped(self.line[self.col :].split()[0])}` is defined a second time (first "
                f"on line {self.opened.line + 1}): give each anchor a name of its own"
            )
        return self.at(f"not readable as YAML here ({problem or context})")

    # -- the readings ----------------------------------------------------------------------------

    def colon(self) -> Slip:
        """`: ` where YAML cannot start a key: a value holding one, or a line indented too far."""
        before = self.line[: self.col]
        key = _KEY.match(before.lstrip(" -"))
        if key and key.end() < len(before.lstrip(" -")):
            value = before.lstrip(" -")[key.end() :].strip() + self.line[self.col :].rstrip()
            name = key.group(1)
            return self.at(
                f"the value of `{_clipped(name)}` holds `: `: quote it ({_clipped(name)}: "
                f"{json.dumps(_clipped(value), ensure_ascii=False)}), or put each key on a line of its own"
            )
        return (
            self.indentation()
            or self.run_on()
            or self.at(
                "a `: ` where YAML cannot start a key: quote the value if it holds `: `, "
                "or line this key up with the keys it belongs with"
            )
        )

    def no_colon(self) -> Slip:
        assert self.opened is not None
        row, col = self.opened.line, self.opened.column
        what = _clipped(self.lines[row][col:]) if row < len(self.lines) else ""
        # Text lines above it, up to a block's header (`key: |`): this line is that block's, dedented.
        text_above = False
        for r in range(row - 1, -1, -1):
            above = self.lines[r][_levels(self.lines[r])[-1] :]
            if _is_content(above) and (key := _KEY.match(above)):
                text_above = bool(_BLOCK_HEADER.match(above[key.end() :].strip()))
                break
        hint = " (or, if it goes on a block of text above, indent it as deep as the block's first line)"
        return self.at(
            f"`{what}` has no `:` after it: a key is written `key: value`, a list item `- item`"
            + (hint if text_above else ""),
            row,
            col,
        )

    def escape(self) -> Slip:
        slash = self.line.rfind("\\", 0, self.col + 1)
        slash = slash if slash >= 0 else self.col
        escape = self.line[slash : slash + 2]
        return self.at(
            f"`{escape}` is not an escape YAML knows inside double quotes: single-quote the value "
            "('…' keeps every backslash as written) or double the backslash (`\\\\`)",
            col=slash,
        )

    def unclosed_quote(self) -> Slip:
        row, col = (self.opened.line, self.opened.column) if self.opened is not None else (self.row, self.col)
        quote = self.lines[row][col : col + 1] or '"'
        where = f"the `---` on line {self.row + 1}" if "document " in self.problem else "the end of the file"
        return self.at(
            f"this {quote} is never closed: the value runs on to {where}; close it with {quote}",
            row,
            col,
        )

    def at_end(self) -> bool:
        """The parser stopped at the end of the file."""
        return not self.line[self.col :].strip() and not any(map(_is_content, self.lines[self.row + 1 :]))

    def never_closed(self) -> Slip | None:
        """At the end of the file, the innermost `[` or `{` left open: where it opened is the place
        to look, not the end where the parser gave up."""
        stack: list[tuple[int, int, str]] = []
        for row, line in enumerate(self.lines[: self.row + 1]):
            quote = ""
            for col, char in enumerate(line):
                if quote:
                    quote = "" if char == quote else quote
                elif char in "'\"" and (col == 0 or line[col - 1] in " [{,:"):
                    quote = char
                elif char == "#" and (col == 0 or line[col - 1] in " \t"):
                    break
                elif char in "[{":
                    stack.append((row, col, char))
                elif char in "]}" and stack:
                    stack.pop()
        if not stack:
            return None
        row, col, open_ = stack[-1]
        close = "]" if open_ == "[" else "}"
        return self.at(
            f"this `{open_}` is never closed: a missing `{close}`? (a value holding `:`, `,`, `[`, `]`, "
            "`{` or `}` needs quotes)",
            row,
            col,
        )

    def unclosed_flow(self) -> Slip:
        close = "]" if "']'" in self.problem else "}"
        open_ = "[" if close == "]" else "{"
        if self.at_end() and (slip := self.never_closed()) is not None:
            return slip
        opened = (
            f" opened at line {self.opened.line + 1}, column {self.opened.column + 1}"
            if self.opened is not None
            else ""
        )
        return self.at(
            f"the `{open_}`{opened} is not closed before this: a missing `{close}` or `,`? "
            f"(a value holding `:`, `,`, `[`, `]`, `{{` or `}}` needs quotes)"
        )

    def block_end(self) -> Slip:
        """A line the block above it cannot take: its indentation, or what starts it."""
        indentation = self.indentation()
        if indentation is not None:
            return indentation
        rest = self.line[self.col :]
        if self.line[: self.col].rstrip().endswith(("'", '"')) and _indent(self.line) < self.col:
            return self.at("text after a quoted value's closing quote: quote the whole value, or none of it")
        opened = f" (line {self.opened.line + 1})" if self.opened is not None else ""
        if rest.startswith("-") and "mapping" in self.context:
            return self.at(
                f"a `- ` list item among the keys of the mapping above{opened}: a list goes under a key "
                "of its own (`key:` alone on a line, the items indented under it)"
            )
        if rest.startswith(":"):
            return self.at("a `:` with no key before it")
        if "sequence" in self.context or "collection" in self.context or "'-' indicator" in self.problem:
            return self.at(
                f"a key where the list above{opened} expects another `- ` item: a list and keys cannot "
                "share one indentation (a `- ` missing, or the list's own `key:` missing above it?)"
            )
        return self.at("this line does not fit the lines above it: check its indentation against theirs")

    def indentation(self) -> Slip | None:
        """The line's indentation said against the lines above it: deeper than a line whose value
        is already written, or lined up with no key at all. None when it lines up with one (the slip
        is something else)."""
        row = self.row
        line = self.lines[row] if row < len(self.lines) else ""
        above = [r for r in range(row - 1, -1, -1) if _is_content(self.lines[r])]
        if not above or not _is_content(line):
            return None
        column, levels = _indent(line), _levels(self.lines[above[0]])
        if column > levels[-1]:
            return self.deeper(row, above[0])
        # The columns open above this line: the line before it, and each line it sits under.
        open_ = [(level, above[0]) for level in levels]
        lowest = levels[0]
        for r in above[1:]:
            if _indent(self.lines[r]) < lowest:
                open_ += [(level, r) for level in _levels(self.lines[r]) if level < lowest]
                lowest = _indent(self.lines[r])
        if any(level == column for level, _ in open_):
            return None
        nearest = (
            min(((level, r) for level, r in open_ if level > column), default=None),
            max(((level, r) for level, r in open_ if level < column), default=None),
        )
        sides = [
            f"{self.named(self.lines[r], level)} (line {r + 1}) starts at column {level + 1}"
            for level, r in (side for side in nearest if side is not None)
        ]
        return self.at(
            f"this line starts at column {column + 1}, where no key above it does: "
            f"{', '.join(sides)}; line it up with the keys it belongs with",
            row,
            column,
        )

    def deeper(self, row: int, prev_row: int) -> Slip | None:
        """A line indented deeper than the line above it, which cannot hold it: a key with its value
        written, a list item with its value, or a line of text (a key missing its `: `)."""
        line, prev = self.lines[row], self.lines[prev_row]
        column, at = _indent(line), _levels(prev)[-1]
        content = prev[at:]
        key = _KEY.match(content)
        value = content[key.end() :].strip() if key else content.strip()
        if _opens_block(prev) or (key and _BLOCK_HEADER.match(value)):
            return None  # `key:` alone (or `key: |`) opens a block: a deeper line is its content
        spaces = column - at
        too_far = f"a key indented {spaces} space{'s' if spaces > 1 else ''} too far?"
        before = [r for r in range(prev_row - 1, -1, -1) if _is_content(self.lines[r])]
        if key and before and _levels(self.lines[before[0]])[-1] == column:
            # The line above sits shallower than the lines on either side of it: it is the one that
            # slipped (`gate:` at column 1 between a step's keys at column 5).
            return self.at(
                f"{self.named(prev)} is indented less than the lines around it (lines {before[0] + 1} and "
                f"{row + 1} start at column {column + 1}): a key indented {spaces} space{'s' if spaces > 1 else ''} "
                f"too little? (or, if {self.named(prev)} is where it belongs, line {row + 1} is indented too far)",
                prev_row,
                at,
            )
        opener = self.lines[before[0]] if before else ""
        if key and _opens_block(opener) and _indent(prev) <= _indent(opener) < column:
            # `channels:` alone, then `operations: C0` at its column, then `announcements: C1` under
            # it: the key between them is the one that slipped out of the block.
            shortfall = column - _indent(prev)
            return self.at(
                f"{self.named(prev)} is not indented under {self.named(opener)} above it (line {before[0] + 1}), "
                f"whose value starts on the next line, but line {row + 1} below it is: a key indented "
                f"{shortfall} space{'s' if shortfall > 1 else ''} too little?",
                prev_row,
                at,
            )
        if key:
            reading = (
                f"{self.named(line)} is indented deeper than {self.named(prev)} above it (line {prev_row + 1}), "
                f"whose value is already on that line: {too_far}"
            )
        elif len(_levels(prev)) > 1:
            reading = (
                f"{self.named(line)} is indented deeper than the list item above it (line {prev_row + 1}), "
                f"whose value is already on that line: {too_far}"
            )
        else:
            return self.run_on()
        return self.at(reading, row, column)

    def run_on(self) -> Slip | None:
        """The line above is text, not `key: value` (`b:1`, or a word): YAML reads this line as
        more of it."""
        above = [r for r in range(self.row - 1, -1, -1) if _is_content(self.lines[r])]
        if not above or self.row >= len(self.lines):
            return None
        prev = self.lines[above[0]]
        content = prev[_levels(prev)[-1] :].strip()
        if len(_levels(prev)) > 1 or _KEY.match(content) or content.startswith(("[", "{", '"', "'")):
            return None
        unspaced = re.search(r"\S:\S", content)
        why = "has no space after its `:`" if unspaced else "is neither `key: value` nor a `- ` item"
        fix = "write `key: value`" if unspaced else "a missing `:`?"
        return self.at(
            f"`{_clipped(content)}` {why}, so YAML reads it and line {self.row + 1} below it as one text: {fix}",
            above[0],
            _indent(prev),
        )

    def named(self, line: str, level: int | None = None) -> str:
        """How a line is named in a reading: `title:` for a key, the `- ` for a list item."""
        at = _levels(line)[-1] if level is None else level
        content = line[at:]
        if content.startswith("- ") or content.rstrip() == "-":
            return "the `- `"
        key = _KEY.match(content)
        return f"`{_clipped(key.group(1))}:`" if key else f"`{_clipped(content)}`"

    def reserved(self) -> Slip:
        char = self.char() or "?"
        value = self.line[self.col :].split(" #")[0].strip()
        shown = "a backquote (`)" if char == "`" else f"`{char}`"
        if char == ",":
            return self.at(
                "a `,` where a value should be: an empty item (two commas?), or a value that needs quotes"
            )
        return self.at(
            f"{shown} cannot start a value (YAML reserves it): quote the value "
            f"({json.dumps(_clipped(value), ensure_ascii=False)})"
        )

    def alias(self) -> Slip:
        sign = "&" if "anchor" in self.context else "*"
        found = re.match(r"[*&]([^\s,\[\]{}]*)", self.line[self.col :])
        if found is None and self.opened is not None and self.opened.line < len(self.lines):
            found = re.match(r"[*&]([^\s,\[\]{}]*)", self.lines[self.opened.line][self.opened.column :])
        name = found.group(1) if found else ""
        value = json.dumps(_clipped(f"{sign}{name}"), ensure_ascii=False)
        if sign == "*" and name:
            return self.at(
                f"`*{name}` reads as a reference to an anchor `&{name}`, and none is defined above it: "
                f"quote the value if it is text ({value})"
            )
        what = "an anchor (`&name`)" if sign == "&" else "a reference to an anchor (`*name`)"
        return self.at(f"a value starting with `{sign}` reads as {what}: quote it ({value})")

    def second_document(self) -> Slip:
        if "another document" in self.problem:
            return self.at("a second document (`---`) starts here: the file holds one; remove the `---` line")
        return self.at(
            "a line after the end of the document's top level: a stray line, or one indented too little?"
        )
