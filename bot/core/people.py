"""People and roles: who holds which role in a roster.

A roster maps a role to Slack user IDs and user-group IDs. Expanding a user group needs Slack, so
the lookup goes through a `Directory` that the front door injects: the Slack adapter's in
production, a static one in the terminal without a workspace and in tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from bot.errors import PermissionDenied

# The shapes of Slack's ids: users (U…, or W… on Enterprise Grid), user groups, channels.
USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")
CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")

#: In a subcommand's roles: anyone holding any role of the roster.
ANY_ROLE = "*"


class Directory(Protocol):
    def group_members(self, group_id: str) -> frozenset[str]:
        """User IDs in a user group (empty when unknown)."""
        ...


class StaticDirectory:
    """A directory from a fixed mapping; knows no groups unless given them."""

    def __init__(self, groups: Mapping[str, Sequence[str]] | None = None) -> None:
        self._groups = {g: frozenset(m) for g, m in (groups or {}).items()}

    def group_members(self, group_id: str) -> frozenset[str]:
        return self._groups.get(group_id, frozenset())


def roles_of(user_id: str, roster: Mapping[str, Sequence[str]], directory: Directory) -> set[str]:
    """Every role the user holds, directly or through a user group."""
    held: set[str] = set()
    for role, people in roster.items():
        for entry in people:
            if entry == user_id or (entry.startswith("S") and user_id in directory.group_members(entry)):
                held.add(role)
                break
    return held


def require_any_role(
    user_id: str,
    allowed: frozenset[str],
    roster: Mapping[str, Sequence[str]],
    directory: Directory,
    *,
    action: str,
) -> set[str]:
    """Raise PermissionDenied unless the user holds one of `allowed`; return the roles held.

    `ANY_ROLE` in `allowed` accepts anyone who holds some role in the roster.
    """
    held = roles_of(user_id, roster, directory)
    if ANY_ROLE in allowed:
        if not held:
            raise PermissionDenied(f"{action} is for the people in the upgrade roster; you are not in it")
        return held
    if allowed and not (held & allowed):
        needed = " or ".join(sorted(allowed))
        you = ", ".join(sorted(held)) if held else "not in the roster"
        raise PermissionDenied(f"{action} needs the {needed} role; you are {you}")
    return held
