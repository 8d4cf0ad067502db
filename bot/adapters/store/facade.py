"""The one facade: `Store` is every concern's part over one engine, opened and migrated here."""

from __future__ import annotations

import logging
import threading

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from bot.adapters.store import migrate as migrations
from bot.adapters.store.audit import AuditLog
from bot.adapters.store.base import _wrap_errors
from bot.adapters.store.engine import _engine_or_config_error, _masked, _reason
from bot.adapters.store.evidence import EvidenceBaselines
from bot.adapters.store.fence import _FencingEngine
from bot.adapters.store.findings import FindingFixes
from bot.adapters.store.fleets import Fleets
from bot.adapters.store.gates import GateDryRuns
from bot.adapters.store.inbox import Inbox
from bot.adapters.store.jobs import Jobs
from bot.adapters.store.lease import Leadership
from bot.adapters.store.messages import Messages
from bot.adapters.store.people import People
from bot.adapters.store.pipelines import PipelineHooks
from bot.adapters.store.runs import Runs
from bot.adapters.store.schedules import Schedules
from bot.adapters.store.snapshots import Snapshots
from bot.adapters.store.verifications import Verifications
from bot.adapters.store.waivers import Waivers
from bot.adapters.store.watches import Watches
from bot.errors import ConfigError, StoreUnreachable

log = logging.getLogger(__name__)


class Store(
    AuditLog,
    Inbox,
    Snapshots,
    Runs,
    Messages,
    Watches,
    Jobs,
    Waivers,
    GateDryRuns,
    FindingFixes,
    EvidenceBaselines,
    Fleets,
    Schedules,
    Leadership,
    People,
    PipelineHooks,
    Verifications,
):
    """The database. `Store.open(url)` connects and migrates; methods are short transactions."""

    def __init__(self, engine: Engine) -> None:
        # Every `begin()` checks the fence of a duty in force (see `fencing`): the engine stays an
        # Engine (inspection, pool, events), with `begin` extended.
        if type(engine) is Engine:
            engine.__class__ = _FencingEngine
        self.engine = engine
        # What `Runs.run_rows` keeps of each run as of a version (in memory: losing it costs a read).
        self._run_parts = {}
        self._run_parts_lock = threading.Lock()

    @classmethod
    def open(cls, url: str, *, migrate: bool = True) -> Store:
        """Connect (and migrate). A URL that does not parse, a driver that is not installed or a
        server that does not answer is a ConfigError naming `database_url`, never a traceback."""
        engine = _engine_or_config_error(url)
        try:
            # Connect once now, so a database that is down is said at start-up, in one line.
            with engine.connect():
                pass
        except DBAPIError as exc:
            engine.dispose()
            raise StoreUnreachable(
                f"database_url: cannot connect to {_masked(url)}: {_reason(exc.orig, url)}"
            ) from None
        except (TypeError, ValueError) as exc:
            # The driver refused a query parameter (`?foo=1`) before connecting at all.
            engine.dispose()
            raise ConfigError(f"database_url: {_masked(url)}: {_reason(exc, url)}") from None
        store = cls(engine)
        if migrate:
            try:
                with _wrap_errors():
                    store.migrate()
            except BaseException:
                engine.dispose()
                raise
        return store

    def close(self) -> None:
        self.engine.dispose()

    # -- schema -------------------------------------------------------------------------------

    def schema_version(self) -> str | None:
        """The database's Alembic revision (None before the first migration)."""
        return migrations.current_revision(self.engine)

    def migrate(self, target: str = "head") -> list[str]:
        """Alembic's `upgrade head` (a database of the hand-numbered migrator is stamped first);
        return the revisions applied, in order."""
        return migrations.upgrade(self.engine, target)

    def ping(self) -> bool:
        """True when the database answers; used by /readyz."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except SQLAlchemyError:
            log.warning("database ping failed", exc_info=True)
            return False
