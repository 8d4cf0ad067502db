"""State store: the only package that imports SQLAlchemy (and Alembic).

One database holds everything that must survive a restart. SQLite (WAL mode) is the embedded
default; PostgreSQL is used by URL when several replicas run. The schema is versioned with
Alembic: `Store.open` runs `upgrade head` with the revisions shipped in `migrations/versions/`
(see `migrate`), so a new release upgrades an existing database in place and a second replica
starting at the same moment does not apply a revision twice.

Records cross this boundary as the frozen dataclasses of `bot.records` (plain data); this package
alone maps them to and from rows, and callers above never see SQLAlchemy rows or sessions.

The package, room by room: `schema` (the current tables), `migrate` and `migrations/` (Alembic),
`engine` (connecting), `fence` and `lease` (leadership), `base` (what the parts share), one
module per concern (`audit`, `inbox`, `snapshots`, `runs`, `messages`, `watches`, `jobs`,
`waivers`, `gates`, `findings`, `schedules`), and `facade`, whose `Store` joins them over one
engine.

**Leadership and fencing** (revision 0009). With several replicas, one holds the `leadership` row
(a lease with an epoch, the fencing token): `acquire_lease` takes or renews it with a conditional
UPDATE (compare-and-set on holder and epoch; the epoch grows with every change of holder), timed
by the database's clock so replicas' clocks may disagree. The singleton duties (announcement jobs,
the run ticker, start-up recovery, watches, long-running actions) write inside
`with fencing(fence):` — every transaction the store opens with `self.engine.begin()` while that
block is active first locks the leadership row (`FOR SHARE` on PostgreSQL, so a takeover waits for
the write in flight) and checks that `fence` still holds it, else raises `Fenced` and writes
nothing. A new store method needs nothing for this (use `self.engine.begin()` as every method
does); a new duty wraps its work in `fencing(...)` (the triggers front door does so for every job
it runs), on every thread it starts, since the fence is a context variable.
"""

from __future__ import annotations

from bot.adapters.store.base import driver_words
from bot.adapters.store.engine import CONNECT_TIMEOUT_SECONDS, create_engine
from bot.adapters.store.facade import Store
from bot.adapters.store.fence import current_fence, fencing
from bot.adapters.store.schema import metadata

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "Store",
    "create_engine",
    "current_fence",
    "driver_words",
    "fencing",
    "metadata",
]
