"""Revision 0025 on SQLite and PostgreSQL: a completed announcement's Verified presses, one per
person (the second press stores nothing, not even its audit entry), read back in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.adapters.store import Store
from bot.core.audit import audit_entry
from bot.records import VerificationRow

NOW = datetime(2026, 12, 1, 5, 2, tzinfo=UTC)


def _press(store: Store, user: str, at: datetime, announcement_id: int = 7) -> bool:
    entry = audit_entry(
        at=at, user_id=user, channel_id="C0ANNOUNCE", source="slack", kind="announcement",
        subcommand="verified", arguments="run:R1/completed",
    )  # fmt: skip
    return store.record_verification(
        VerificationRow(announcement_id=announcement_id, user_id=user, at=at), audit=[entry]
    )


def test_each_person_is_recorded_once_per_announcement_in_order(store: Store) -> None:
    assert _press(store, "U0PAYMENTS", NOW)
    assert not _press(store, "U0PAYMENTS", NOW + timedelta(seconds=1))
    assert _press(store, "U0SEARCH", NOW + timedelta(minutes=3))
    # The same person on another announcement is another confirmation.
    assert _press(store, "U0PAYMENTS", NOW, announcement_id=8)

    assert store.verifications(7) == [
        VerificationRow(announcement_id=7, user_id="U0PAYMENTS", at=NOW),
        VerificationRow(announcement_id=7, user_id="U0SEARCH", at=NOW + timedelta(minutes=3)),
    ]
    assert [v.user_id for v in store.verifications(8)] == ["U0PAYMENTS"]
    assert store.verifications(9) == []
    audit = [e for e in store.audit_entries() if e.subcommand == "verified"]
    assert sorted(e.user_id for e in audit) == ["U0PAYMENTS", "U0PAYMENTS", "U0SEARCH"]
