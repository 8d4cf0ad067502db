"""The revisions, a linear chain; a released one is never edited (a change is a new revision).

`0001`…`0017` are the hand-numbered migrations of the store before Alembic, carried over with
their numbers (there was no 8), so a database that recorded version N in `schema_migrations` is
stamped at revision `000N` and upgraded from there.
"""
