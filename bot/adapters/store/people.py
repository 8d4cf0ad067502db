"""Slack display names the bot has looked up (`users.info`), with when."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

import sqlalchemy as sa

from bot.adapters.store.base import StoreBase, _maybe_utc, _utc, _wrap_errors
from bot.adapters.store.schema import people


class People(StoreBase):
    """The cache of display names: one row per Slack user, replaced when looked up again."""

    def people_names(self, user_ids: Iterable[str] | None = None) -> dict[str, str]:
        """user id → display name, for `user_ids` (every cached one when None)."""
        query = sa.select(people.c.user_id, people.c.display_name)
        if user_ids is not None:
            wanted = sorted(set(user_ids))
            if not wanted:
                return {}
            query = query.where(people.c.user_id.in_(wanted))
        with _wrap_errors(), self.engine.connect() as conn:
            return {str(r.user_id): str(r.display_name) for r in conn.execute(query)}

    def people_fetched(self, user_ids: Iterable[str]) -> dict[str, datetime]:
        """user id → when its name was looked up, for those cached."""
        wanted = sorted(set(user_ids))
        if not wanted:
            return {}
        query = sa.select(people.c.user_id, people.c.fetched_at).where(people.c.user_id.in_(wanted))
        with _wrap_errors(), self.engine.connect() as conn:
            out: dict[str, datetime] = {}
            for r in conn.execute(query):
                at = _maybe_utc(r.fetched_at)
                if at is not None:
                    out[str(r.user_id)] = at
            return out

    def save_people_names(self, names: Mapping[str, str], *, at: datetime) -> None:
        """Cache `names` (user id → display name) as looked up at `at`."""
        if not names:
            return
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(people.delete().where(people.c.user_id.in_(sorted(names))))
            conn.execute(
                people.insert(),
                [{"user_id": u, "display_name": n, "fetched_at": _utc(at)} for u, n in sorted(names.items())],
            )
