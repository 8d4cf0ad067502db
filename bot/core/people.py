"""People and roles: who holds which role in a roster.

A roster maps a role to Slack user IDs and user-group IDs. Expanding a user group needs Slack, so
the lookup goes through a `Directory` that the front door injects: the Slack adapter's in
production, a static one in the terminal without a workspace and in tests.

People are shown by their Slack display names where the bot knows them (the report, the terminal):
`display_names` reads them from the store's cache and asks the directory (`users.info`) for the
ones missing or older than `NAME_TTL`, keeping what it learns; without Slack, or when Slack does not
answer, the cache alone names people and the rest stay ids.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from bot.errors import BotError, PermissionDenied

log = logging.getLogger(__name__)

# The shapes of Slack's ids: users (U…, or W… on Enterprise Grid), user groups, channels.
USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")
CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")

#: In a subcommand's roles: anyone holding any role of the roster.
ANY_ROLE = "*"


#: How long a cached display name is used before Slack is asked again (people rename themselves).
NAME_TTL = timedelta(days=1)


class Directory(Protocol):
    def group_members(self, group_id: str) -> frozenset[str]:
        """User IDs in a user group (empty when unknown)."""
        ...

    def display_name(self, user_id: str) -> str | None:
        """The user's display name (`users.info`), None when unknown."""
        ...

    def user_exists(self, user_id: str) -> bool | None:
        """Whether the workspace has this (active) user; None when this directory cannot tell."""
        ...


class StaticDirectory:
    """A directory from fixed mappings; knows no groups or names unless given them."""

    def __init__(
        self, groups: Mapping[str, Sequence[str]] | None = None, names: Mapping[str, str] | None = None
    ) -> None:
        self._groups = {g: frozenset(m) for g, m in (groups or {}).items()}
        self._names = dict(names or {})

    def group_members(self, group_id: str) -> frozenset[str]:
        return self._groups.get(group_id, frozenset())

    def display_name(self, user_id: str) -> str | None:
        return self._names.get(user_id)

    def user_exists(self, user_id: str) -> bool | None:
        """True for a user it has a name for; otherwise it cannot tell (no workspace to ask)."""
        return True if user_id in self._names else None


class NameCache(Protocol):
    """The store's cache of display names (`bot.adapters.store.people`)."""

    def people_names(self, user_ids: Iterable[str] | None = None) -> dict[str, str]: ...
    def people_fetched(self, user_ids: Iterable[str]) -> dict[str, datetime]: ...
    def save_people_names(self, names: Mapping[str, str], *, at: datetime) -> None: ...


def display_names(
    cache: NameCache,
    ids: Iterable[str],
    *,
    now: datetime,
    directory: Directory | None = None,
    ttl: timedelta = NAME_TTL,
) -> dict[str, str]:
    """Slack user id → display name for the user ids among `ids` the bot knows (see the module
    docstring); user groups and anything else are left out. Never fails for Slack's sake."""
    users = sorted({i for i in ids if USER_ID.match(i)})
    names = cache.people_names(users)
    if directory is None or not users:
        return names
    fetched = cache.people_fetched(users)
    learnt: dict[str, str] = {}
    for user in users:
        at = fetched.get(user)
        if at is not None and now - at < ttl:
            continue
        try:
            name = directory.display_name(user)
        except BotError as exc:
            # Slack down or refusing: the cached name (or the id) will do for now.
            log.warning("the display name of %s was not looked up: %s", user, exc)
            break
        if name:
            learnt[user] = name
    if learnt:
        cache.save_people_names(learnt, at=now)
    return {**names, **learnt}


def named(user_id: str, names: Mapping[str, str]) -> str:
    """`user_id` by its display name when known (`@Alice`), else the id itself."""
    name = names.get(user_id)
    return f"@{name}" if name else user_id


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
