"""Line-numbered validation of YAML documents: configuration, plans, and (next) rules files.

`YamlValidator` walks PyYAML's node tree instead of the loaded objects, so every problem names
the file, the line and the dotted key, and every problem is collected before one error is raised.
Settings, plans and rules files share it; it knows nothing of what the documents mean.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bot.core.people import GROUP_ID, USER_ID
from bot.errors import ConfigError

# Names of clusters, roles and plans: lower case, digits, and . _ -
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


class YamlValidator:
    """Walks the YAML node tree, collecting errors that name the file, line and dotted key."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.errors: list[str] = []

    def error(self, node: yaml.Node | None, key: str, message: str) -> None:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        self.errors.append(f"{self.label}{line}: {key}: {message}")

    def raise_if_errors(self) -> None:
        if self.errors:
            more = f" (and {len(self.errors) - 1} more problem(s))" if len(self.errors) > 1 else ""
            raise ConfigError(self.errors[0] + more)

    def mapping(self, node: yaml.Node, key: str, allowed: set[str] | None) -> dict[str, yaml.Node]:
        where = key or "top level"
        if not isinstance(node, yaml.MappingNode):
            self.error(node, where, "expected a mapping")
            return {}
        out: dict[str, yaml.Node] = {}
        for knode, vnode in node.value:
            name = str(knode.value)
            dotted = f"{key}.{name}" if key else name
            if allowed is not None and name not in allowed:
                hint = difflib.get_close_matches(name, sorted(allowed), n=1)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                self.error(knode, dotted, f"unknown key{suggestion}")
                continue
            if name in out:
                self.error(knode, dotted, "duplicate key")
            out[name] = vnode
        return out

    def _scalar(self, node: yaml.Node | None, key: str, kind: str) -> Any:
        if node is None:
            return None
        if not isinstance(node, yaml.ScalarNode):
            self.error(node, key, f"expected {kind}")
            return None
        return yaml.safe_load(yaml.serialize(node))

    def string(self, node: yaml.Node | None, key: str) -> str | None:
        value = self._scalar(node, key, "a string")
        if value is None:
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
            self.error(node, key, f"{value!r} is not a Slack {what} ID")
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
                self.error(item, key, f"{value!r} is not a Slack user ID (U…/W…) or user-group ID (S…)")
                continue
            out.append(value)
        if not out and not self.errors:
            self.error(node, key, "a role needs at least one person or user group")
        return tuple(out)
