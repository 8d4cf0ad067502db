"""Line-numbered validation of YAML documents: configuration, plans, and (next) rules files.

`read_document` and `compose_document` are the one safe way in: a regular file only (never a
FIFO or a device, which would block or never end), at most `MAX_DOCUMENT_BYTES`, strict UTF-8,
nesting at most `MAX_DEPTH` levels, and only the standard YAML tags (nothing is ever constructed
from a tag such as `!!python/name`). Each refuses with a `ConfigError`: one line naming the
file, the line and, where there is one, the dotted key (plans turn it into `PlanInvalid`); a
YAML syntax error names the column too and is said in plain words (`bot.yamlsyntax`), not the
parser's.

`YamlValidator` walks PyYAML's node tree instead of the loaded objects, so every problem names
the file, the line and the dotted key, and every problem is collected before one error is raised.
Settings, plans and rules files share it; it knows nothing of what the documents mean.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.core.people import GROUP_ID, USER_ID
from bot.errors import ConfigError
from bot.files import NotRegular, TooLarge, Unreadable, read_bounded
from bot.logsetup import mask_tokens
from bot.yamlsyntax import read_slip

# Names of clusters, roles and plans: lower case, digits, and . _ -
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")

#: A configuration or a plan is a page or two of YAML; a bigger file is the wrong file.
MAX_DOCUMENT_BYTES = 1024 * 1024
#: Real documents nest a handful of levels; PyYAML's composer recurses per level, so a
#: pathological file would otherwise end in RecursionError instead of a message.
MAX_DEPTH = 50
#: Said wherever a document holds a Slack token, or a key that looks meant for one: a file is
#: read by people, printed in errors and kept in Helm values and git; the environment is not.
TOKEN_HINT = (
    "Slack tokens and the signing secret go in the environment "
    "(SLACK_BOT_TOKEN, SLACK_APP_TOKEN, SLACK_SIGNING_SECRET), never in the file"
)
#: A key a Slack secret was meant for (`slack_bot_token`, `slack.bot_token`, `signing_secret`):
#: one at the top level or under `slack:` (a `prometheus.token` is another service's).
_SECRET_KEY = re.compile(r"token|secret", re.IGNORECASE)
_SLACK_SECTIONS = ("", "slack")
#: A number longer than this is a typo (and Python refuses int() past 4,300 digits anyway).
MAX_NUMBER_CHARS = 100
#: Only what the safe loader itself understands; anything else (`!!python/name:…`, `!custom`)
#: is refused by name at composition and never reaches a constructor.
STANDARD_TAGS = frozenset(
    {
        *(tag for tag in yaml.SafeLoader.yaml_constructors if tag is not None),
        "tag:yaml.org,2002:merge",
    }
)


def shown(value: object, limit: int = 40) -> str:
    """`value` quoted for a message, cut to `limit` characters so one bad value stays one line; a
    Slack token in it is masked first (`xoxb-…(redacted)`), so no cut leaves a readable part of it."""
    text = mask_tokens(str(value))
    return repr(text if len(text) <= limit else text[:limit] + "…")


def read_document(path: Path, *, what: str, limit: int = MAX_DOCUMENT_BYTES, label: str | None = None) -> str:
    """The text of a regular file of at most `limit` bytes, decoded as strict UTF-8.

    FileNotFoundError passes through (callers word it); every other problem is a ConfigError
    whose message starts with `label` (default: the path).
    """
    label = str(path) if label is None else label
    try:
        data = read_bounded(path, limit)
    except NotRegular as exc:
        raise ConfigError(f"{label}: the {what} must be a regular file, not {exc.kind}") from None
    except TooLarge:
        raise ConfigError(
            f"{label}: the {what} is larger than {limit // 1024} KiB; is this the right file?"
        ) from None
    except Unreadable as exc:
        raise ConfigError(
            f"{label}: cannot read the {what}: {exc.reason.removeprefix('cannot read it: ')}"
        ) from None
    return decode_document(data, label, what=what)


def decode_document(data: bytes, label: str, *, what: str) -> str:
    """Strict UTF-8; the error names the line and the byte offset of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{label}:{line}: the {what} is not UTF-8 text (byte {exc.start})") from None


class _TooDeep(yaml.YAMLError):
    def __init__(self, mark: yaml.Mark | None, path: str) -> None:
        self.mark, self.path = mark, path


class _UnknownTag(yaml.YAMLError):
    def __init__(self, node: yaml.Node, path: str) -> None:
        self.node, self.path = node, path


def _at(label: str, exc: _UnknownTag | _MergeKey | _LoneSurrogate) -> str:
    """`FILE:LINE: KEY:`, where a refused node stands."""
    key = f" {exc.path}:" if exc.path else ""
    return f"{label}:{exc.node.start_mark.line + 1}:{key}"


class _MergeKey(yaml.YAMLError):
    def __init__(self, node: yaml.Node, path: str) -> None:
        self.node, self.path = node, path


class _LoneSurrogate(yaml.YAMLError):
    def __init__(self, node: yaml.Node, path: str, code: int) -> None:
        self.node, self.path, self.code = node, path, code


#: Half of a UTF-16 pair: a `\\uD83D`-style escape in a double-quoted YAML string.
_SURROGATE = re.compile("[\ud800-\udfff]")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader's composer with a depth limit, a tag check, and the dotted key of each node."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # PyYAML passes a value's key node as `index`, a sequence item's position as an int.
        if isinstance(index, yaml.ScalarNode):
            part = str(index.value)
        elif isinstance(index, int) and not isinstance(index, bool):
            part = f"[{index}]"
        else:
            part = ""
        self._path.append(part)
        try:
            if len(self._path) > MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark, self.dotted())  # type: ignore[no-untyped-call]
            node = super().compose_node(parent, index)
            if node is not None and node.tag not in STANDARD_TAGS:
                raise _UnknownTag(node, self.dotted())
            if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:merge":
                raise _MergeKey(node, self.dotted())
            if isinstance(node, yaml.ScalarNode) and _SURROGATE.search(node.value):
                return self._mended(node)
            return node
        finally:
            self._path.pop()

    def _mended(self, node: yaml.ScalarNode) -> yaml.ScalarNode:
        """A string holding UTF-16 surrogates: a pair escaped as JSON writes an emoji
        ("\\ud83d\\ude80", which YAML reads as two code points) becomes its character; a lone one,
        which no text can hold (Slack, the report and the terminal would refuse it), is refused."""
        value = node.value.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        lone = _SURROGATE.search(value)
        if lone:
            raise _LoneSurrogate(node, self.dotted(), ord(lone.group()))
        return yaml.ScalarNode(node.tag, value, node.start_mark, node.end_mark, node.style)

    def dotted(self, limit: int = 4) -> str:
        parts = [p for p in self._path if p][:limit]
        text = "".join(p if p.startswith("[") else f".{p}" for p in parts).lstrip(".")
        return shown(text, 80)[1:-1] + ("…" if len([p for p in self._path if p]) > limit else "")


def compose_document(text: str, label: str) -> yaml.Node | None:
    """The node tree of one YAML document, or ConfigError (one line: file, line, key)."""
    loader: _BoundedLoader | None = None
    try:
        # The reader checks for unprintable characters already in its constructor.
        loader = _BoundedLoader(text)
        return loader.get_single_node()
    except _TooDeep as exc:
        line = f":{exc.mark.line + 1}" if exc.mark else ""
        key = f" {exc.path}:" if exc.path else ""
        raise ConfigError(f"{label}{line}:{key} nested deeper than {MAX_DEPTH} levels") from None
    except _UnknownTag as exc:
        raise ConfigError(
            f"{_at(label, exc)} unknown tag {_short_tag(exc.node.tag)} "
            "(only plain YAML values are read; nothing is constructed from tags)"
        ) from None
    except _MergeKey as exc:
        raise ConfigError(
            f"{_at(label, exc)} YAML merge keys (`<<: *anchor`) are not read: "
            "write the keys out (plain anchors and aliases, `key: *anchor`, work)"
        ) from None
    except _LoneSurrogate as exc:
        raise ConfigError(
            f"{_at(label, exc)} \\u{exc.code:04x} is half of a UTF-16 pair, "
            "not a character: write the character itself, or \\U0001F680-style for one beyond \\uFFFF"
        ) from None
    except yaml.YAMLError as exc:
        slip = read_slip(exc, text, label)
        if slip is not None:
            raise ConfigError(f"{label}:{slip.line}:{slip.column}: invalid YAML: {slip.reading}") from None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{label}: invalid YAML: {first}") from None
    except RecursionError:
        # Belt and braces: the depth limit above should make this unreachable.
        raise ConfigError(f"{label}: nested too deeply to read") from None
    finally:
        if loader is not None:
            loader.dispose()


def _short_tag(tag: str) -> str:
    prefix = "tag:yaml.org,2002:"
    text = "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag
    return shown(text, 60)[1:-1]


def is_null(node: yaml.Node | None) -> bool:
    """An empty value (`key:` or `key: ~`): written, but with nothing in it."""
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def _item_key(name: str, value: yaml.Node, item_keys: set[str]) -> bool:
    """An entry of a mapping of named items that is one of an item's keys (`YamlValidator.items`):
    its name is one, and its value is no item (a scalar or list, or a mapping of other keys:
    `provider: {eks: …}`). A cluster named `labels` whose keys are a cluster's is one."""
    if name not in item_keys:
        return False
    if not isinstance(value, yaml.MappingNode):
        return True
    return any(not isinstance(k, yaml.ScalarNode) or str(k.value) not in item_keys for k, _ in value.value)


def _comment_hint(node: yaml.Node) -> str:
    """`operations: #ops` reads as empty: YAML takes ` #` as a comment. Say so."""
    mark = node.start_mark
    buffer = getattr(mark, "buffer", None)
    if not buffer:
        return ""
    rest = buffer[mark.pointer : buffer.find("\n", mark.pointer)].strip()
    return f" ({shown(rest)} is a YAML comment; quote it)" if rest.startswith("#") else ""


_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


@dataclass(frozen=True)
class Home:
    """A section of a document (`channels:`, `steps:`) by the keys that belong under it: one of them
    found a level up, among the section names, was meant under it (a line indented too little).
    `entry` names one entry of a list or of a mapping of named entries ("step", "cluster"); a
    mapping of fixed keys has none."""

    keys: frozenset[str]
    entry: str = ""


def _home_of(
    node: yaml.MappingNode, knode: yaml.Node, name: str, homes: Mapping[str, Home]
) -> tuple[str, yaml.Node | None] | None:
    """Where `name`, unknown at this level, belongs: the section written nearest above it whose
    keys hold it (said with that section's line, or its entry's), else any section that has it;
    and the mapping it was meant in (the section's, or its entry's), if there is one."""
    owners = [section for section, home in homes.items() if name in home.keys]
    if not owners:
        return None
    line = knode.start_mark.line
    above = [
        (k, v)
        for k, v in node.value
        if isinstance(k, yaml.ScalarNode) and str(k.value) in owners and k.start_mark.line < line
    ]
    if not above:
        places = [f"a {homes[o].entry} under `{o}:`" if homes[o].entry else f"`{o}:`" for o in owners]
        return f"`{name}` is a key of {' or '.join(places)}, not a key of the top level", None
    section_node, value = above[-1]
    section, entry = str(section_node.value), homes[str(section_node.value)].entry
    entries: list[tuple[str, yaml.Node, yaml.Node]] = []
    if isinstance(value, yaml.SequenceNode):
        entries = [(f"the {entry} above it", item, item) for item in value.value]
    elif isinstance(value, yaml.MappingNode) and entry:
        entries = [
            (f"`{shown(k.value)[1:-1]}`", k, v) for k, v in value.value if isinstance(k, yaml.ScalarNode)
        ]
    entries = [e for e in entries if e[1].start_mark.line < line]
    if entry and entries:
        label, at, meant = entries[-1]
        return (
            f"`{name}` is a key of a {entry} under `{section}:`: indent it under {label} "
            f"(line {at.start_mark.line + 1})",
            meant,
        )
    return (
        f"`{name}` is a key of `{section}:`: indent it under `{section}:` (line {section_node.start_mark.line + 1})",
        value,
    )


class YamlValidator:
    """Walks the YAML node tree, collecting errors that name the file, line and dotted key."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.errors: list[str] = []
        # (the mapping a key was meant in, the key; and "") for each key found a level up: said
        # once, as that slip, and not again as a key missing from where it was meant, or that
        # mapping left empty by it.
        self._slipped: set[tuple[int, str]] = set()

    def error(self, node: yaml.Node | None, key: str, message: str) -> None:
        if (message.startswith("missing key") and (id(node), key.rsplit(".", 1)[-1]) in self._slipped) or (
            message.startswith("missing value") and (id(node), "") in self._slipped
        ):
            return
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        # A runaway value must not turn one problem into a screenful.
        message = message if len(message) <= 600 else message[:600] + "…"
        # A token pasted into a value (or a key) must not be printed back to a terminal or a pod's
        # log; `shown` has masked the values it quoted, this masks the rest.
        entry = mask_tokens(f"{self.label}{line}: {key}: {message}")
        if "…(redacted)" in entry and TOKEN_HINT not in entry:
            entry += f"; {TOKEN_HINT}"
        self.errors.append(entry)

    def missing_value(self, node: yaml.Node, key: str) -> None:
        self.error(node, key, "missing value" + _comment_hint(node))

    def raise_if_errors(self) -> None:
        if self.errors:
            more = f" (and {len(self.errors) - 1} more problem(s))" if len(self.errors) > 1 else ""
            raise ConfigError(self.errors[0] + more, problems=tuple(self.errors))

    def mapping(
        self, node: yaml.Node, key: str, allowed: set[str] | None, homes: Mapping[str, Home] | None = None
    ) -> dict[str, yaml.Node]:
        """The mapping's entries by key. With `allowed`, any other key is refused: as one of the
        `homes` sections' keys written a level too shallow when it is one, else with a "did you mean"."""
        where = key or "top level"
        if is_null(node) and key:
            self.missing_value(node, where)
            return {}
        if not isinstance(node, yaml.MappingNode):
            self.error(node, where, "expected a mapping")
            return {}
        out: dict[str, yaml.Node] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode):
                self.error(knode, where, "keys are plain names, not lists or mappings")
                continue
            name = str(knode.value)
            dotted = f"{key}.{name}" if key else name
            if allowed is not None and name not in allowed:
                home = _home_of(node, knode, name, homes) if homes else None
                if home is not None:
                    self.error(knode, dotted, home[0])
                    if home[1] is not None:
                        self._slipped |= {(id(home[1]), name), (id(home[1]), "")}
                    continue
                hint = difflib.get_close_matches(name, sorted(allowed), n=1)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                if not hint and key in _SLACK_SECTIONS and _SECRET_KEY.search(name):
                    suggestion = f"; {TOKEN_HINT}"
                self.error(knode, dotted, f"unknown key{suggestion}")
                continue
            if name in out:
                self.error(knode, dotted, "duplicate key")
            out[name] = vnode
        return out

    def items(self, node: yaml.Node, key: str, item_keys: set[str], what: str) -> dict[str, yaml.MappingNode]:
        """A mapping of named mappings (`clusters:`: a name → a cluster, whose keys are
        `item_keys`): the entries that are mappings. Any other entry is one problem, not one more
        for each key it then lacks. One of an item's keys written at the names' level (a line
        indented too little: `request_timeout:` under `clusters:` as a cluster's name) is said as
        that slip, under the item above it; an item left empty by it is not said again."""
        entries = self.mapping(node, key, None)
        keys = {str(k.value): k for k, _ in node.value} if entries else {}
        out: dict[str, yaml.MappingNode] = {}
        # The item above → its keys written at the names' level below it (None: above the first).
        slipped: dict[str | None, list[str]] = {}
        owner: str | None = None
        for name, value in entries.items():
            if _item_key(name, value, item_keys):
                slipped.setdefault(owner, []).append(name)
                continue
            owner = name
            if isinstance(value, yaml.MappingNode):
                out[name] = value
        for above, names in slipped.items():
            under = f"`{above}` (line {keys[above].start_mark.line + 1})" if above else f"a {what}'s name"
            first, *more = names
            also = f" (and {', '.join(more)} after it), but these are keys" if more else ", but it is a key"
            them = "them" if more else "it"
            message = f"indented as a {what}'s name{also} of a {what}: indent {them} under {under}"
            self.error(keys[first], f"{key}.{first}", message)
        for name, value in entries.items():
            if name not in out and name not in slipped and not _item_key(name, value, item_keys):
                self.mapping(value, f"{key}.{name}", None)  # says what it is instead
        return out

    def _scalar(self, node: yaml.Node | None, key: str, kind: str) -> Any:
        """The scalar's value; None when absent, or (reported) empty, not a scalar, or unreadable."""
        if node is None:
            return None
        if is_null(node):
            self.missing_value(node, key)
            return None
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, key, f"expected {kind}")
            return None
        if node.tag in (_INT, _FLOAT) and len(str(node.value)) > MAX_NUMBER_CHARS:
            self.error(node, key, f"a number of {len(str(node.value))} characters is not a sensible value")
            return None
        try:
            # Constructed directly (no round trip through text); a fresh constructor each time
            # so nothing is cached between documents.
            return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            reason = exc.problem if isinstance(exc, yaml.MarkedYAMLError) and exc.problem else str(exc)
            self.error(node, key, f"{shown(node.value)} is not {kind}: {reason}")
            return None

    def string(self, node: yaml.Node | None, key: str) -> str | None:
        value = self._scalar(node, key, "a string")
        if value is None:
            return None
        if isinstance(value, bool) and isinstance(node, yaml.ScalarNode):
            # YAML reads yes/no/on/off/true/false unquoted as a boolean.
            self.error(
                node,
                key,
                f'{node.value} is read as {str(value).lower()}, not a string: quote it ("{node.value}")',
            )
            return None
        if not isinstance(value, str) or not value.strip():
            self.error(node, key, "expected a non-empty string")
            return None
        return value.strip()

    def boolean(self, node: yaml.Node | None, key: str) -> bool | None:
        value = self._scalar(node, key, "true or false")
        if value is not None and not isinstance(value, bool):
            self.error(node, key, "expected true or false")
            return None
        return value

    def number(self, node: yaml.Node | None, key: str, *, low: float, high: float) -> float | None:
        value = self._scalar(node, key, "a number")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            self.error(node, key, f"expected a number from {low:g} to {high:g}")
            return None
        return float(value)

    def integer(self, node: yaml.Node | None, key: str, *, low: int, high: int) -> int | None:
        value = self._scalar(node, key, "a whole number")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.error(node, key, f"expected a whole number from {low} to {high}")
            return None
        return value

    def path(self, node: yaml.Node | None, key: str, base_dir: Path) -> Path | None:
        value = self.string(node, key)
        if value is None:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else (base_dir / p)

    def slack_id(self, node: yaml.Node, key: str, pattern: re.Pattern[str], what: str) -> str | None:
        value = self.string(node, key)
        if value is not None and not pattern.match(value):
            self.error(node, key, f"{shown(value)} is not a Slack {what} ID")
            return None
        return value

    def strings(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, key, "expected a list of strings")
            return ()
        return tuple(v for item in node.value if (v := self.string(item, key)) is not None)

    def people(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        items: list[yaml.Node]
        items = list(node.value) if isinstance(node, yaml.SequenceNode) else [node]
        out: list[str] = []
        check: Callable[[str], bool] = lambda s: bool(USER_ID.match(s) or GROUP_ID.match(s))  # noqa: E731
        for item in items:
            value = self.string(item, key)
            if value is None:
                continue
            if not check(value):
                self.error(item, key, f"{shown(value)} is not a Slack user ID (U…/W…) or user-group ID (S…)")
                continue
            out.append(value)
        if not out and not self.errors:
            self.error(node, key, "a role needs at least one person or user group")
        return tuple(out)
