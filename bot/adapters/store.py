"""State store: the only module that imports SQLAlchemy.

One database holds everything that must survive a restart. SQLite (WAL mode) is the embedded
default; PostgreSQL is used by URL when several replicas run. The schema is versioned: migrations
are numbered, applied in order inside transactions, and recorded in `schema_migrations`, so a new
release upgrades an existing database in place and a second replica starting at the same moment
does not apply a migration twice.

Records cross this boundary as the frozen dataclasses of `bot.records` (plain data); this module
alone maps them to and from rows, and callers above never see SQLAlchemy rows or sessions.

**Leadership and fencing** (migration 9). With several replicas, one holds the `leadership` row
(a lease with an epoch, the fencing token): `acquire_lease` takes or renews it with a conditional
UPDATE (compare-and-set on holder and epoch; the epoch grows with every change of holder), timed
by the database's clock so replicas' clocks may disagree. The singleton duties (announcement jobs,
the run ticker, start-up recovery; next: watches, long-running actions) write inside
`with fencing(fence):` — every transaction the store opens with `self.engine.begin()` while that
block is active first locks the leadership row (`FOR SHARE` on PostgreSQL, so a takeover waits for
the write in flight) and checks that `fence` still holds it, else raises `Fenced` and writes
nothing. A new store method needs nothing for this (use `self.engine.begin()` as every method
does); a new duty wraps its work in `fencing(...)` (the triggers front door does so for every job
it runs), on every thread it starts, since the fence is a context variable.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)

from bot.errors import (
    ConcurrentUpdate,
    ConfigError,
    Fenced,
    PermanentError,
    StoreUnreachable,
    TemporaryError,
)
from bot.records import (
    AnnouncementRow,
    Approval,
    AuditEntry,
    Fence,
    InboxItem,
    JobRow,
    Lease,
    MessageRef,
    PlanRow,
    RunRow,
    ScheduleRow,
    SnapshotMeta,
    StepRun,
    StepState,
    WaiverRow,
    WatchRow,
)

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Schema. The table objects below describe the *current* schema for queries; migrations describe
# how each version got there and never change once released.

metadata = sa.MetaData()

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("channel_id", sa.String(64), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("subcommand", sa.String(64), nullable=False),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("outcome", sa.String(32), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("correlation_id", sa.String(32), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
)


snapshots = sa.Table(
    "snapshots",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(64), nullable=False),
    sa.Column("label", sa.String(200), nullable=False),
    sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("taken_by", sa.String(64), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
)


# Plans, runs, steps, approvals and Slack message references (migration 3).
plans = sa.Table(
    "plans",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("loaded_by", sa.String(64), nullable=False),
    sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("plan_id", sa.Integer, nullable=False),
    sa.Column("plan_name", sa.String(100), nullable=False),
    sa.Column("cluster", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("roster", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_by", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)

run_steps = sa.Table(
    "run_steps",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("step_id", sa.String(64), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("state", sa.String(24), nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("started_by", sa.String(64), nullable=False),
    sa.Column("opened_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("escalations", sa.Integer, nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    # Migration 11: the process running the step's action (see `StepRun.runner`).
    sa.Column("runner", sa.String(64), nullable=False, server_default=""),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("step_id", sa.String(64), nullable=False),
    sa.Column("phase", sa.String(8), nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("roles", sa.String(200), nullable=False),
    sa.Column("decision", sa.String(8), nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
)

run_messages = sa.Table(
    "run_messages",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("ts", sa.String(32), nullable=False),
    sa.Column("thread_ts", sa.String(32), nullable=False),
    sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
    # Migration 6: which process claimed it, so a claim left without a ts by a dead one is resolved;
    # and, for a thread line written in the commit that caused it (an outbox row), what to post.
    sa.Column("owner", sa.String(64), nullable=False, server_default=""),
    sa.Column("body", sa.Text, nullable=False, server_default=""),
)

# Requests acknowledged to Slack and not yet worked off (migration 6).
inbox = sa.Table(
    "inbox",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    # Migration 12: the replica working it off (see `InboxItem.owner`).
    sa.Column("owner", sa.String(64), nullable=False, server_default=""),
    # Migration 14: how its last attempt failed (see `InboxItem.failure`).
    sa.Column("failure", sa.Text, nullable=False, server_default=""),
)


# Schedules and their announcements (migration 4).
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("plan_id", sa.Integer, nullable=False),
    sa.Column("plan_name", sa.String(100), nullable=False),
    sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
    sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
    sa.Column("tz", sa.String(64), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("created_by", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("override_reason", sa.Text, nullable=False),
    # Migration 5: a schedule made by `schedule move` names the one it replaced and why.
    sa.Column("moved_from", sa.Integer, nullable=False, server_default="0"),
    sa.Column("move_reason", sa.Text, nullable=False, server_default=""),
)

scheduled_announcements = sa.Table(
    "scheduled_announcements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("schedule_id", sa.Integer, nullable=False),
    sa.Column("plan_name", sa.String(100), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("template", sa.String(32), nullable=False),
    sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
    sa.Column("dedup_key", sa.String(200), nullable=False, unique=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("ts", sa.String(32), nullable=False),
    sa.Column("delayed", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    # Migration 5: the step a `step-complete` announcement is about ("" for the others).
    sa.Column("step_id", sa.String(64), nullable=False, server_default=""),
)

# The leader's lease (one row, id 1) and the replicas' heartbeats (migration 9).
leadership = sa.Table(
    "leadership",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("holder", sa.String(64), nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)

replicas = sa.Table(
    "replicas",
    metadata,
    sa.Column("owner", sa.String(64), primary_key=True),
    sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
)


# Watches of a cluster's rollout status (migration 7): who drives each and what it last published.
watches = sa.Table(
    "watches",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(100), nullable=False),
    sa.Column("nodegroups", sa.Text, nullable=False),
    sa.Column("namespaces", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("stop", sa.Text, nullable=False),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("step_id", sa.String(64), nullable=True),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("started_by", sa.String(64), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("end_reason", sa.Text, nullable=False),
    sa.Column("end_requested_by", sa.String(64), nullable=False),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
)


# Cluster jobs (migration 10, issue 15): a long action's whole progress, who drives it, and the
# question it put to people.
jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("step_id", sa.String(64), nullable=False),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("cluster", sa.String(100), nullable=False),
    sa.Column("args", sa.Text, nullable=False),
    sa.Column("dry_run", sa.Boolean, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("ok", sa.Boolean, nullable=True),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("progress", sa.Text, nullable=False),
    sa.Column("card", sa.Text, nullable=False),
    sa.Column("choice_key", sa.String(200), nullable=False),
    sa.Column("choice", sa.Text, nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("started_by", sa.String(64), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
)

# What a gate's step will touch, read from the cluster once when the gate opened (migration 14):
# the posted gate message shows it, and a restart shows the same, never a second reading.
gate_dry_runs = sa.Table(
    "gate_dry_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("step_id", sa.String(64), primary_key=True),
    sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)

# A known issue's Fix button (migration 16): one run per finding, however often it is clicked.
finding_fixes = sa.Table(
    "finding_fixes",
    metadata,
    sa.Column("subject", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("clicked_by", sa.String(64), nullable=False),
    sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, server_default=""),
)


# Accepted findings (migration 15): a Required finding's waiver is "pending" until a second person
# of the approver roles confirms it; every change is a compare-and-set on `state`.
waivers = sa.Table(
    "waivers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("cluster", sa.String(64), nullable=False),
    sa.Column("finding", sa.String(64), nullable=False),
    sa.Column("objects", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("required", sa.Boolean, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("requested_by", sa.String(64), nullable=False),
    sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("confirmed_by", sa.String(64), nullable=False, default=""),
    sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("revoked_by", sa.String(64), nullable=False, default=""),
    sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
)


def _m001_audit_and_deliveries(conn: Connection) -> None:
    m = sa.MetaData()
    sa.Table(
        "audit_log",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("channel_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subcommand", sa.String(64), nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("correlation_id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
    )
    sa.Table(
        "deliveries",
        m,
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)


def _m002_snapshots(conn: Connection) -> None:
    m = sa.MetaData()
    table = sa.Table(
        "snapshots",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("taken_by", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    sa.Index("ix_snapshots_cluster_label_taken", table.c.cluster, table.c.label, table.c.taken_at)
    m.create_all(conn)


def _m003_runs(conn: Connection) -> None:
    m = sa.MetaData()
    sa.Table(
        "plans",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(100), nullable=False, index=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("loaded_by", sa.String(64), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "runs",
        m,
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("plan_name", sa.String(100), nullable=False),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("roster", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "run_steps",
        m,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("step_id", sa.String(64), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("escalations", sa.Integer, nullable=False),
        sa.Column("note", sa.Text, nullable=False),
    )
    table = sa.Table(
        "approvals",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("phase", sa.String(8), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("roles", sa.String(200), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    # A second click by the same person on the same gate state can never be stored twice.
    sa.Index(
        "ux_approvals_once",
        table.c.run_id,
        table.c.step_id,
        table.c.phase,
        table.c.epoch,
        table.c.user_id,
        table.c.decision,
        unique=True,
    )
    sa.Table(
        "run_messages",
        m,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)


def _m004_scheduled_announcements(conn: Connection) -> None:
    m = sa.MetaData()
    sa.Table(
        "schedules",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("plan_id", sa.Integer, nullable=False),
        sa.Column("plan_name", sa.String(100), nullable=False, index=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("override_reason", sa.Text, nullable=False),
    )
    sa.Table(
        "scheduled_announcements",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("schedule_id", sa.Integer, nullable=False, index=True),
        sa.Column("plan_name", sa.String(100), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("template", sa.String(32), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        # The same message (subject, template, due instant) can be stored only once.
        sa.Column("dedup_key", sa.String(200), nullable=False, unique=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("delayed", sa.Boolean, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)


def _m005_schedule_moves_and_step_announcements(conn: Connection) -> None:
    # ADD COLUMN with a constant default works the same on SQLite and PostgreSQL.
    for statement in (
        "ALTER TABLE schedules ADD COLUMN moved_from INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE schedules ADD COLUMN move_reason TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE scheduled_announcements ADD COLUMN step_id VARCHAR(64) NOT NULL DEFAULT ''",
    ):
        conn.execute(sa.text(statement))


def _m006_message_owners_and_inbox(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE run_messages ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT ''"))
    conn.execute(sa.text("ALTER TABLE run_messages ADD COLUMN body TEXT NOT NULL DEFAULT ''"))
    sa.Table(
        "inbox",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)


def _m007_watches(conn: Connection) -> None:
    sa.Table(
        "watches",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(100), nullable=False),
        sa.Column("nodegroups", sa.Text, nullable=False),
        sa.Column("namespaces", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("stop", sa.Text, nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("step_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.Text, nullable=False),
        sa.Column("end_requested_by", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)


def _m009_leadership(conn: Connection) -> None:
    m = sa.MetaData()
    table = sa.Table(
        "leadership",
        m,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        "replicas",
        m,
        sa.Column("owner", sa.String(64), primary_key=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    m.create_all(conn)
    # The one row exists from the start, so taking the lease is always an UPDATE (compare-and-set).
    never = datetime(1970, 1, 1, tzinfo=UTC)
    conn.execute(
        table.insert().values(id=1, holder="", epoch=0, acquired_at=never, renewed_at=never, expires_at=never)
    )


def _m010_jobs(conn: Connection) -> None:
    sa.Table(
        "jobs",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("cluster", sa.String(100), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("ok", sa.Boolean, nullable=True),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("progress", sa.Text, nullable=False),
        sa.Column("card", sa.Text, nullable=False),
        sa.Column("choice_key", sa.String(200), nullable=False),
        sa.Column("choice", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_by", sa.String(64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    ).create(conn)


def _m011_step_runners(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE run_steps ADD COLUMN runner VARCHAR(64) NOT NULL DEFAULT ''"))


def _m012_inbox_owners(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE inbox ADD COLUMN owner VARCHAR(64) NOT NULL DEFAULT ''"))


def _m013_one_abort_offer(conn: Connection) -> None:
    # A partial unique index (SQLite and PostgreSQL): whoever offers second — the replica that
    # aborted, or the leader's scan making up for a crash — inserts nothing.
    conn.execute(
        sa.text("CREATE UNIQUE INDEX ix_jobs_one_abort_offer ON jobs (run_id) WHERE step_id = 'after-abort'")
    )


def _m014_gate_dry_runs(conn: Connection) -> None:
    sa.Table(
        "gate_dry_runs",
        sa.MetaData(),
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("step_id", sa.String(64), primary_key=True),
        sa.Column("epoch", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
    ).create(conn)


def _m015_inbox_dead_letters(conn: Connection) -> None:
    # A dead letter is a state ('dead'), not a table: it keeps its row, key and payload, so an
    # operator can retry it as it was (`upgrade-bot inbox retry`).
    conn.execute(sa.text("ALTER TABLE inbox ADD COLUMN failure TEXT NOT NULL DEFAULT ''"))


def _m016_finding_fixes(conn: Connection) -> None:
    sa.Table(
        "finding_fixes",
        sa.MetaData(),
        sa.Column("subject", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("clicked_by", sa.String(64), nullable=False),
        sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, server_default=""),
    ).create(conn)


def _m017_waivers(conn: Connection) -> None:
    sa.Table(
        "waivers",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("finding", sa.String(64), nullable=False),
        sa.Column("objects", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("required", sa.Boolean, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("requested_by", sa.String(64), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_by", sa.String(64), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(64), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Index("ix_waivers_cluster_state", "cluster", "state"),
    ).create(conn)


#: Ordered, append-only. A released migration is never edited; a change is a new entry.
MIGRATIONS: Sequence[tuple[int, str, Callable[[Connection], None]]] = (
    (1, "audit log and delivery de-duplication", _m001_audit_and_deliveries),
    (2, "snapshots", _m002_snapshots),
    (3, "plans, runs, steps, approvals and Slack message references", _m003_runs),
    (4, "schedules and scheduled announcements", _m004_scheduled_announcements),
    (5, "schedule moves and step-complete announcements", _m005_schedule_moves_and_step_announcements),
    (6, "message claim owners and the inbox of acknowledged requests", _m006_message_owners_and_inbox),
    (7, "watches of a cluster's rollout status", _m007_watches),
    (9, "the leader's lease (epoch as fencing token) and replica heartbeats", _m009_leadership),
    (10, "cluster jobs: cordon, drain, restart and node-group waits", _m010_jobs),
    (11, "the process running a step's action", _m011_step_runners),
    (12, "the replica working off an inbox item", _m012_inbox_owners),
    (13, "at most one offer to uncordon per aborted run", _m013_one_abort_offer),
    (14, "a gate's dry run, read once when the gate opened", _m014_gate_dry_runs),
    (15, "inbox dead letters: how an item's last attempt failed", _m015_inbox_dead_letters),
    (16, "the run a known issue's Fix button started, one per finding", _m016_finding_fixes),
    (17, "waivers: accepted findings, confirmed by two people when Required", _m017_waivers),
)


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        # SQLite drops the offset; everything is written in UTC, so naive values are UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Store:
    """The database. `Store.open(url)` connects and migrates; methods are short transactions."""

    def __init__(self, engine: Engine) -> None:
        # Every `begin()` checks the fence of a duty in force (see the module docstring): the
        # engine stays an Engine (inspection, pool, events), with `begin` extended.
        if type(engine) is Engine:
            engine.__class__ = _FencingEngine
        self.engine = engine

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
            with _wrap_errors():
                store.migrate()
        return store

    def close(self) -> None:
        self.engine.dispose()

    # -- schema -------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("schema_migrations"):
                return 0
            value = conn.execute(sa.select(sa.func.max(schema_migrations.c.version))).scalar()
            return int(value or 0)

    def migrate(self, now: datetime | None = None) -> list[int]:
        """Apply pending migrations in order; return the versions applied."""
        applied: list[int] = []
        with self.engine.begin() as conn:
            metadata.tables["schema_migrations"].create(conn, checkfirst=True)
        for version, name, step in MIGRATIONS:
            try:
                with self.engine.begin() as conn:
                    done = conn.execute(
                        sa.select(schema_migrations.c.version).where(schema_migrations.c.version == version)
                    ).first()
                    if done:
                        continue
                    # Insert the marker first: a replica migrating concurrently fails on the
                    # primary key and rolls back instead of running the step twice.
                    conn.execute(
                        schema_migrations.insert().values(
                            version=version, name=name, applied_at=now or datetime.now(UTC)
                        )
                    )
                    step(conn)
                    applied.append(version)
                    log.info("applied schema migration %s: %s", version, name)
            except IntegrityError:
                log.info("schema migration %s was applied by another process", version)
        return applied

    def ping(self) -> bool:
        """True when the database answers; used by /readyz."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return True
        except SQLAlchemyError:
            log.warning("database ping failed", exc_info=True)
            return False

    # -- deliveries ---------------------------------------------------------------------------

    def claim_delivery(self, key: str, now: datetime) -> bool:
        """Record that the delivery `key` is being handled; False if it was seen before.

        Slack retries deliveries and users double-click; the primary key makes the first claim
        win even across processes sharing the database.
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(deliveries.insert().values(key=key[:200], received_at=_utc(now)))
            return True
        except IntegrityError:
            return False

    def forget_deliveries_before(self, cutoff: datetime) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(deliveries.delete().where(deliveries.c.received_at < _utc(cutoff)))
            return int(result.rowcount or 0)

    # -- audit ----------------------------------------------------------------------------------

    def record_audit(self, entry: AuditEntry) -> int:
        values = _audit_values(entry)
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(audit_log.insert().values(**values))
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def audit_entries(
        self,
        *,
        since: datetime | None = None,
        run_id: str | None = None,
        limit: int | None = None,
        correlation_id: str | None = None,
    ) -> list[AuditEntry]:
        query = sa.select(audit_log).order_by(audit_log.c.at, audit_log.c.id)
        if correlation_id is not None:
            query = query.where(audit_log.c.correlation_id == correlation_id)
        if since is not None:
            query = query.where(audit_log.c.at >= _utc(since))
        if run_id is not None:
            query = query.where(audit_log.c.run_id == run_id)
        if limit is not None:
            query = query.limit(limit)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            AuditEntry(
                id=row["id"],
                at=_utc(row["at"]),
                user_id=row["user_id"],
                channel_id=row["channel_id"],
                source=row["source"],
                kind=row["kind"],
                subcommand=row["subcommand"],
                arguments=row["arguments"],
                outcome=row["outcome"],
                detail=row["detail"],
                correlation_id=row["correlation_id"],
                run_id=row["run_id"],
            )
            for row in rows
        ]

    # -- snapshots -------------------------------------------------------------------------------

    def save_snapshot(
        self, *, cluster: str, label: str, taken_at: datetime, taken_by: str, summary: str, body: bytes
    ) -> int:
        """Store one snapshot in a single transaction: it is there whole, or not at all."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                snapshots.insert().values(
                    cluster=cluster[:64],
                    label=label[:200],
                    taken_at=_utc(taken_at),
                    taken_by=taken_by[:64],
                    summary=summary,
                    size=len(body),
                    body=body,
                )
            )
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def snapshot_body(self, snapshot_id: int) -> tuple[SnapshotMeta, bytes] | None:
        if not _storable_id(snapshot_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(snapshots).where(snapshots.c.id == snapshot_id)).mappings().first()
        if row is None:
            return None
        return _snapshot_meta(row), bytes(row["body"])

    def snapshots(
        self, *, cluster: str | None = None, label: str | None = None, limit: int = 20
    ) -> list[SnapshotMeta]:
        """Newest first, without bodies."""
        cols = [c for c in snapshots.c if c.name != "body"]
        query = sa.select(*cols).order_by(snapshots.c.taken_at.desc(), snapshots.c.id.desc()).limit(limit)
        if cluster is not None:
            query = query.where(snapshots.c.cluster == cluster)
        if label is not None:
            query = query.where(snapshots.c.label == label)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_snapshot_meta(r) for r in rows]

    # -- plans and runs ----------------------------------------------------------------------------

    def save_plan(self, *, name: str, text: str, loaded_by: str, loaded_at: datetime) -> int:
        """Store a plan's text; the newest plan under a name is the one `start` uses."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                plans.insert().values(
                    name=name[:100], text=text, loaded_by=loaded_by[:64], loaded_at=_utc(loaded_at)
                )
            )
            pk = result.inserted_primary_key
        return int(pk[0]) if pk else 0

    def plan(self, name: str) -> PlanRow | None:
        query = sa.select(plans).where(plans.c.name == name).order_by(plans.c.id.desc()).limit(1)
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _plan_row(row) if row else None

    def plan_by_id(self, plan_id: int) -> PlanRow | None:
        if not _storable_id(plan_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(plans).where(plans.c.id == plan_id)).mappings().first()
        return _plan_row(row) if row else None

    def create_run(
        self,
        run: RunRow,
        steps: Sequence[StepRun],
        audit: Sequence[AuditEntry] = (),
        outbox: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Insert a new run with its steps in plan order (and audit rows, and the thread lines it
        owes as outbox rows) in one transaction."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(runs.insert().values(**_run_values(run)))
            for position, step in enumerate(steps):
                conn.execute(run_steps.insert().values(**_step_values(run.id, position, step)))
            for entry in audit:
                conn.execute(audit_log.insert().values(**_audit_values(entry)))
            _insert_outbox(conn, run.id, outbox, run.updated_at)

    def run_rows(self, run_id: str) -> tuple[RunRow, list[StepRun], list[Approval]] | None:
        """A run, its steps in plan order and its approvals in the order given, read consistently."""
        with _wrap_errors(), self.engine.begin() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
            if row is None:
                return None
            steps = conn.execute(
                sa.select(run_steps).where(run_steps.c.run_id == run_id).order_by(run_steps.c.position)
            ).mappings()
            step_rows = [_step_run(s) for s in steps]
            given = conn.execute(
                sa.select(approvals).where(approvals.c.run_id == run_id).order_by(approvals.c.id)
            ).mappings()
            approval_rows = [_approval(a) for a in given]
        return _run_row(row), step_rows, approval_rows

    def runs(self, *, states: Sequence[str] | None = None, limit: int = 50) -> list[RunRow]:
        """Newest first."""
        query = sa.select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit)
        if states is not None:
            query = query.where(runs.c.state.in_(list(states)))
        with _wrap_errors(), self.engine.connect() as conn:
            return [_run_row(r) for r in conn.execute(query).mappings()]

    def commit_run(
        self,
        *,
        run_id: str,
        expected_version: int,
        state: str,
        roster: Mapping[str, Sequence[str]],
        reason: str,
        updated_at: datetime,
        steps: Sequence[tuple[int, StepRun]] = (),
        new_approvals: Sequence[Approval] = (),
        audit: Sequence[AuditEntry] = (),
        outbox: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Commit one transition: the run moves from `expected_version` to the next, or not at all.

        `UPDATE … WHERE version = :expected` is the optimistic lock: when another click, worker or
        replica committed first, no row matches and `ConcurrentUpdate` is raised with nothing
        written, so a step can never be advanced twice. `steps` are the changed ones, each with
        its position in the plan. `outbox` holds (key, body) of the thread lines the transition
        owes: committed with it, so a crash right after the commit cannot lose them.
        """
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                runs.update()
                .where(runs.c.id == run_id, runs.c.version == expected_version)
                .values(
                    version=expected_version + 1,
                    state=state,
                    roster=_roster_text(roster),
                    reason=reason,
                    updated_at=_utc(updated_at),
                )
            )
            if result.rowcount != 1:
                raise ConcurrentUpdate(f"run {run_id} changed since version {expected_version}")
            for position, step in steps:
                values = _step_values(run_id, position, step)
                conn.execute(
                    run_steps.update()
                    .where(run_steps.c.run_id == run_id, run_steps.c.step_id == step.step_id)
                    .values(**{k: v for k, v in values.items() if k not in ("run_id", "step_id")})
                )
            for approval in new_approvals:
                conn.execute(approvals.insert().values(**_approval_values(run_id, approval)))
            for entry in audit:
                conn.execute(audit_log.insert().values(**_audit_values(entry)))
            _insert_outbox(conn, run_id, outbox, updated_at)
        return expected_version + 1

    # -- Slack message references ------------------------------------------------------------------

    def claim_message(
        self, *, run_id: str, key: str, channel: str, thread_ts: str, at: datetime, owner: str = ""
    ) -> bool:
        """Claim the right to post message `key` of a run; False when it was claimed before.

        The claim is committed before the post, so a restart (or a second worker) never posts the
        same card or step message twice; the ts is recorded by `record_message` afterwards.
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    run_messages.insert().values(
                        run_id=run_id,
                        key=key[:200],
                        channel=channel[:64],
                        ts="",
                        thread_ts=thread_ts,
                        claimed_at=_utc(at),
                        owner=owner[:64],
                    )
                )
            return True
        except IntegrityError:
            return False
        except OperationalError as exc:
            raise TemporaryError("the database is busy or unreachable") from exc

    def record_message(self, *, run_id: str, key: str, channel: str, ts: str) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                run_messages.update()
                .where(run_messages.c.run_id == run_id, run_messages.c.key == key[:200])
                .values(ts=ts, channel=channel[:64])
            )

    def release_message(self, *, run_id: str, key: str) -> None:
        """Give up a claim whose post failed, so a later attempt may post it (an outbox row stays,
        unowned, with its body; a plain claim is deleted)."""
        mine = sa.and_(
            run_messages.c.run_id == run_id, run_messages.c.key == key[:200], run_messages.c.ts == ""
        )
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(run_messages.update().where(mine, run_messages.c.body != "").values(owner=""))
            conn.execute(run_messages.delete().where(mine, run_messages.c.body == ""))

    def claim_outbox(
        self, *, run_id: str, key: str, channel: str, thread_ts: str, owner: str, at: datetime
    ) -> bool:
        """Take an unowned outbox row to post it now; False when another process took it first."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                run_messages.update()
                .where(
                    run_messages.c.run_id == run_id,
                    run_messages.c.key == key[:200],
                    run_messages.c.ts == "",
                    run_messages.c.owner == "",
                )
                .values(owner=owner[:64], channel=channel[:64], thread_ts=thread_ts, claimed_at=_utc(at))
            )
        return bool(result.rowcount == 1)

    def messages(self, run_id: str) -> dict[str, MessageRef]:
        query = sa.select(run_messages).where(run_messages.c.run_id == run_id)
        with _wrap_errors(), self.engine.connect() as conn:
            return {r["key"]: _message_ref(r) for r in conn.execute(query).mappings()}

    def message_at(self, *, channel: str, ts: str) -> MessageRef | None:
        """The posted message recorded at (channel, ts), if the bot posted one there."""
        query = sa.select(run_messages).where(run_messages.c.channel == channel, run_messages.c.ts == ts)
        with _wrap_errors(), self.engine.connect() as conn:
            rows = [_message_ref(r) for r in conn.execute(query).mappings()]
        # A re-posted message's own claim row shares the ts; the reference it replaced wins.
        rows.sort(key=lambda r: ":repost:" in r.key)
        return rows[0] if rows else None

    def unposted_messages(self) -> list[MessageRef]:
        """Every claim still without a ts (in flight now, or left by a process that died)."""
        query = sa.select(run_messages).where(run_messages.c.ts == "").order_by(run_messages.c.claimed_at)
        with _wrap_errors(), self.engine.connect() as conn:
            return [_message_ref(r) for r in conn.execute(query).mappings()]

    # -- watches (issue 13) ---------------------------------------------------------------------
    # Every write to a watch is here, and every write by its driver names the owner: the leader
    # lease's fence check goes into these methods, in one place.

    def create_watch(self, row: WatchRow) -> int:
        values = _watch_values(row)
        values.pop("id")
        with _wrap_errors(), self.engine.begin() as conn:
            key = conn.execute(watches.insert().values(**values)).inserted_primary_key
        assert key is not None
        return int(key[0])

    def watch(self, watch_id: int) -> WatchRow | None:
        if not _storable_id(watch_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(watches).where(watches.c.id == watch_id)).mappings().first()
        return _watch_row(row) if row else None

    def watches(self, *, live: bool = True, limit: int = 100) -> list[WatchRow]:
        query = sa.select(watches).order_by(watches.c.id.desc()).limit(limit)
        if live:
            query = query.where(watches.c.state == "live")
        with _wrap_errors(), self.engine.connect() as conn:
            return [_watch_row(r) for r in conn.execute(query).mappings()]

    def watch_of_step(self, run_id: str, step_id: str) -> WatchRow | None:
        query = (
            sa.select(watches)
            .where(watches.c.run_id == run_id, watches.c.step_id == step_id)
            .order_by(watches.c.id.desc())
            .limit(1)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _watch_row(row) if row else None

    def claim_watch(self, watch_id: int, *, owner: str, now: datetime, stale_before: datetime) -> bool:
        """Take a live watch to drive it: True when it had no owner, was ours, or its owner's
        heartbeat is older than `stale_before` (a live owner's watch is never taken)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                watches.update()
                .where(
                    watches.c.id == watch_id,
                    watches.c.state == "live",
                    sa.or_(
                        watches.c.owner == "",
                        watches.c.owner == owner[:64],
                        watches.c.heartbeat_at.is_(None),
                        watches.c.heartbeat_at < _utc(stale_before),
                    ),
                )
                .values(owner=owner[:64], heartbeat_at=_utc(now))
            )
        return bool(result.rowcount == 1)

    def heartbeat_watch(self, watch_id: int, *, owner: str, now: datetime) -> bool:
        """Keep driving: False when the watch is no longer ours (ended, or taken over)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                watches.update()
                .where(watches.c.id == watch_id, watches.c.owner == owner[:64], watches.c.state == "live")
                .values(heartbeat_at=_utc(now))
            )
        return bool(result.rowcount == 1)

    def publish_watch(
        self,
        watch_id: int,
        *,
        owner: str,
        summary: str,
        at: datetime,
        outbox: Sequence[tuple[str, str]] = (),
        markers: Sequence[str] = (),
        end_reason: str | None = None,
    ) -> bool:
        """Persist a published summary and, in the same transaction, the thread posts it owes
        (`outbox`: key, body) and the milestone keys a batched post carries (`markers`); with
        `end_reason`, end the watch. False (nothing written) when the watch is not ours."""
        subject = f"watch:{watch_id}"
        values: dict[str, Any] = {"summary": summary, "published_at": _utc(at), "heartbeat_at": _utc(at)}
        if end_reason is not None:
            values.update(state="ended", ended_at=_utc(at), end_reason=end_reason)
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                watches.update()
                .where(watches.c.id == watch_id, watches.c.owner == owner[:64], watches.c.state == "live")
                .values(**values)
            )
            if result.rowcount != 1:
                return False
            _insert_outbox(conn, subject, outbox, at)
            for key in markers:
                conn.execute(
                    run_messages.insert().values(
                        run_id=subject,
                        key=key[:200],
                        channel="",
                        ts="batched",
                        thread_ts="",
                        claimed_at=_utc(at),
                        owner=owner[:64],
                        body="",
                    )
                )
        return True

    def request_watch_end(self, watch_id: int, *, by: str) -> bool:
        """Ask a live watch's driver to end it (`unwatch`); False when it is not live."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                watches.update()
                .where(watches.c.id == watch_id, watches.c.state == "live")
                .values(end_requested_by=by[:64] or "someone")
            )
        return bool(result.rowcount == 1)

    # -- cluster jobs (issue 15) ------------------------------------------------------------------
    # Every write by a job's driver names the owner and the live state, so a process that lost the
    # job (interrupted, taken over, deposed) writes nothing; the fence check rides on `begin()`.

    def create_job(self, row: JobRow) -> int:
        values = _job_values(row)
        values.pop("id")
        with _wrap_errors(), self.engine.begin() as conn:
            key = conn.execute(jobs.insert().values(**values)).inserted_primary_key
        assert key is not None
        return int(key[0])

    def create_job_once(self, row: JobRow) -> int | None:
        """`create_job` for a job of which a run may have only one (abort's offer, migration 13):
        None when the run has it already."""
        values = _job_values(row)
        values.pop("id")
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                key = conn.execute(jobs.insert().values(**values)).inserted_primary_key
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return None
            raise
        assert key is not None
        return int(key[0])

    def aborted_runs_without_job(self, step_id: str, *, since: datetime, kinds: Sequence[str]) -> list[str]:
        """Runs aborted since `since` that had a non-dry-run job of one of `kinds` and have no job
        for the pseudo-step `step_id` (what the leader's scan owes after a crash; oldest first)."""
        had = sa.exists().where(jobs.c.run_id == runs.c.id, jobs.c.kind.in_(list(kinds)), ~jobs.c.dry_run)
        offered = sa.exists().where(jobs.c.run_id == runs.c.id, jobs.c.step_id == step_id)
        query = (
            sa.select(runs.c.id)
            .where(runs.c.state == "aborted", runs.c.updated_at >= since, had, ~offered)
            .order_by(runs.c.updated_at)
            .limit(50)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            return [str(r) for r in conn.execute(query).scalars()]

    # -- waivers (migration 15) -----------------------------------------------------------------

    def add_waiver(
        self,
        *,
        cluster: str,
        finding: str,
        objects: Sequence[str],
        reason: str,
        required: bool,
        state: str,
        requested_by: str,
        requested_at: datetime,
        expires_at: datetime,
    ) -> WaiverRow:
        """Store a waiver ("pending" or "active"; an active one is its requester's alone)."""
        confirmed = state == "active"
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                waivers.insert().values(
                    cluster=cluster,
                    finding=finding,
                    objects=json.dumps(list(objects)),
                    reason=reason,
                    required=required,
                    state=state,
                    requested_by=requested_by,
                    requested_at=_utc(requested_at),
                    expires_at=_utc(expires_at),
                    confirmed_by=requested_by if confirmed else "",
                    confirmed_at=_utc(requested_at) if confirmed else None,
                    revoked_by="",
                    revoked_at=None,
                )
            )
            pk = result.inserted_primary_key
            assert pk is not None
        row = self.waiver(int(pk[0]))
        assert row is not None
        return row

    def waiver(self, waiver_id: int) -> WaiverRow | None:
        if not _storable_id(waiver_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(waivers).where(waivers.c.id == waiver_id)).first()
        return None if row is None else _waiver_row(row)

    def waivers(self, *, cluster: str | None = None, states: Sequence[str] = ()) -> list[WaiverRow]:
        """Waivers by id (a cluster's, in the given states, or all)."""
        query = sa.select(waivers).order_by(waivers.c.id)
        if cluster is not None:
            query = query.where(waivers.c.cluster == cluster)
        if states:
            query = query.where(waivers.c.state.in_(list(states)))
        with _wrap_errors(), self.engine.connect() as conn:
            return [_waiver_row(r) for r in conn.execute(query)]

    def set_waiver_state(self, waiver_id: int, *, expected: str, state: str, by: str, at: datetime) -> bool:
        """Compare-and-set: "pending" → "active" (confirmed by `by`) or any → "revoked"; False when
        the waiver was no longer in `expected` (someone else was first)."""
        values: dict[str, Any] = {"state": state}
        if state == "active":
            values.update(confirmed_by=by, confirmed_at=_utc(at))
        else:
            values.update(revoked_by=by, revoked_at=_utc(at))
        with _wrap_errors(), self.engine.begin() as conn:
            done = conn.execute(
                waivers.update()
                .where(waivers.c.id == waiver_id, waivers.c.state == expected)
                .values(**values)
            ).rowcount
        return bool(done)

    # -- gate dry runs (migration 14) -------------------------------------------------------------

    def save_gate_dry_run(self, *, run_id: str, step_id: str, epoch: int, at: datetime, body: str) -> bool:
        """Keep the dry run of a gate (a step at an epoch); False when one was kept before (another
        worker or replica was first: theirs is the one shown)."""
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                conn.execute(
                    gate_dry_runs.insert().values(
                        run_id=run_id, step_id=step_id, epoch=epoch, computed_at=_utc(at), body=body
                    )
                )
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False
            raise
        return True

    def gate_dry_run(self, *, run_id: str, step_id: str, epoch: int) -> str | None:
        """The kept dry run of a gate (its JSON body), or None."""
        query = sa.select(gate_dry_runs.c.body).where(
            gate_dry_runs.c.run_id == run_id,
            gate_dry_runs.c.step_id == step_id,
            gate_dry_runs.c.epoch == epoch,
        )
        with _wrap_errors(), self.engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else str(value)

    # -- a finding's fix (migration 16) -------------------------------------------------------------

    def claim_fix(self, *, subject: str, key: str, by: str, at: datetime) -> bool:
        """Claim the one fix of a finding (`subject`: its watch, `key`: its milestone) for `by`;
        False when it was claimed before (a double click, a second person)."""
        try:
            with _wrap_errors(), self.engine.begin() as conn:
                conn.execute(
                    finding_fixes.insert().values(
                        subject=subject[:64],
                        key=key[:200],
                        clicked_by=by[:64],
                        clicked_at=_utc(at),
                        run_id="",
                    )
                )
        except PermanentError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False
            raise
        return True

    def finding_fix(self, *, subject: str, key: str) -> tuple[str, str] | None:
        """(who clicked, the run it started or "" while it starts) of a finding's fix, or None."""
        query = sa.select(finding_fixes.c.clicked_by, finding_fixes.c.run_id).where(
            finding_fixes.c.subject == subject[:64], finding_fixes.c.key == key[:200]
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (str(row[0]), str(row[1])) if row is not None else None

    def record_fix(self, *, subject: str, key: str, run_id: str) -> None:
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                finding_fixes.update()
                .where(finding_fixes.c.subject == subject[:64], finding_fixes.c.key == key[:200])
                .values(run_id=run_id[:64])
            )

    def release_fix(self, *, subject: str, key: str) -> None:
        """Give up a claim whose run was refused (nothing started), so a later click may start one."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                finding_fixes.delete().where(
                    finding_fixes.c.subject == subject[:64],
                    finding_fixes.c.key == key[:200],
                    finding_fixes.c.run_id == "",
                )
            )

    def job(self, job_id: int) -> JobRow | None:
        if not _storable_id(job_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).mappings().first()
        return _job_row(row) if row else None

    def jobs(
        self, *, states: Sequence[str] = ("live",), run_id: str | None = None, limit: int = 200
    ) -> list[JobRow]:
        query = sa.select(jobs).where(jobs.c.state.in_(list(states))).order_by(jobs.c.id).limit(limit)
        if run_id is not None:
            query = query.where(jobs.c.run_id == run_id)
        with _wrap_errors(), self.engine.connect() as conn:
            return [_job_row(r) for r in conn.execute(query).mappings()]

    def job_of_step(self, run_id: str, step_id: str) -> JobRow | None:
        """The newest job a run's step started (a resumed step continues the same one)."""
        query = (
            sa.select(jobs)
            .where(jobs.c.run_id == run_id, jobs.c.step_id == step_id)
            .order_by(jobs.c.id.desc())
            .limit(1)
        )
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _job_row(row) if row else None

    def claim_job(self, job_id: int, *, owner: str, now: datetime) -> bool:
        """Take a live job nobody drives (just started or resumed) to drive it; a job with an owner
        is never taken over silently: a dead owner's job is interrupted instead (`interrupt_job`)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state == "live", jobs.c.owner == "")
                .values(owner=owner[:64], heartbeat_at=_utc(now))
            )
        return bool(result.rowcount == 1)

    def heartbeat_job(self, job_id: int, *, owner: str, now: datetime) -> bool:
        """Keep driving: False when the job is no longer ours (interrupted, ended)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.owner == owner[:64], jobs.c.state == "live")
                .values(heartbeat_at=_utc(now))
            )
        return bool(result.rowcount == 1)

    def interrupt_job(self, job_id: int, *, owner_was: str, at: datetime, note: str = "") -> bool:
        """Stop driving a live job whose owner is `owner_was` (gone, deposed, or its step stopped
        running); its progress stays for `resume`. False when someone changed it first."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state == "live", jobs.c.owner == owner_was[:64])
                .values(state="interrupted", owner="", updated_at=_utc(at), detail=note)
            )
        return bool(result.rowcount == 1)

    def reopen_job(self, job_id: int, *, epoch: int, at: datetime, progress: str | None = None) -> bool:
        """`resume` approved again: the same job continues from its progress (`progress`, when
        given, replaces it) under the step's new epoch (nobody drives it until a driver claims it)."""
        values: dict[str, Any] = {
            "state": "live",
            "owner": "",
            "epoch": epoch,
            "updated_at": _utc(at),
            "detail": "",
        }
        if progress is not None:
            values["progress"] = progress
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state.in_(["live", "interrupted"]))
                .values(**values)
            )
        return bool(result.rowcount == 1)

    def save_job_tick(
        self,
        job_id: int,
        *,
        owner: str,
        at: datetime,
        progress: str,
        card: str,
        choice_key: str = "",
        choice: str = "",
        clear_decision: bool = False,
        outbox: Sequence[tuple[str, str]] = (),
        audit: Sequence[AuditEntry] = (),
        done: tuple[bool, str] | None = None,
    ) -> bool:
        """Persist one tick in ONE transaction: the progress, the live card lines, the open
        question, the thread posts it owes (outbox rows of `job:ID`, each key once: a key posted
        before is not owed again) and its audit rows; with `done`, end the job. False (nothing
        written) when the job is not ours."""
        subject = f"job:{job_id}"
        values: dict[str, Any] = {
            "progress": progress,
            "card": card,
            "choice_key": choice_key[:200],
            "choice": choice,
            "heartbeat_at": _utc(at),
            "updated_at": _utc(at),
        }
        if clear_decision:
            values["decision"] = ""
        if done is not None:
            values.update(state="done", ok=done[0], detail=done[1], ended_at=_utc(at))
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.owner == owner[:64], jobs.c.state == "live")
                .values(**values)
            )
            if result.rowcount != 1:
                return False
            if outbox:
                known = set(
                    conn.execute(
                        sa.select(run_messages.c.key).where(
                            run_messages.c.run_id == subject,
                            run_messages.c.key.in_([k[:200] for k, _ in outbox]),
                        )
                    ).scalars()
                )
                fresh = [(k, b) for k, b in outbox if k[:200] not in known]
                _insert_outbox(conn, subject, list({k: (k, b) for k, b in fresh}.values()), at)
            for entry in audit:
                conn.execute(audit_log.insert().values(**_audit_values(entry)))
        return True

    def decide_job(self, job_id: int, *, choice_key: str, decision: str) -> bool:
        """Record people's answer to the job's open question; False when that question is no longer
        open (answered already, or a stale button)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(
                    jobs.c.id == job_id,
                    jobs.c.state.in_(["live", "interrupted"]),
                    jobs.c.choice_key == choice_key[:200],
                    jobs.c.choice_key != "",
                    jobs.c.decision == "",
                )
                .values(decision=decision)
            )
        return bool(result.rowcount == 1)

    def finish_job(self, job_id: int, *, ok: bool, detail: str, at: datetime) -> bool:
        """End a job that is not being driven (a dry run, a job refused before its first tick)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.state != "done")
                .values(state="done", ok=ok, detail=detail, ended_at=_utc(at), updated_at=_utc(at), owner="")
            )
        return bool(result.rowcount == 1)

    # -- the inbox of acknowledged requests ----------------------------------------------------

    def inbox_put(self, *, key: str, kind: str, payload: str, at: datetime, owner: str = "") -> int | None:
        """Store a request before it is acknowledged; None when the same key is already there."""
        try:
            with self.engine.begin() as conn:
                result = conn.execute(
                    inbox.insert().values(
                        key=key[:200],
                        kind=kind,
                        payload=payload,
                        received_at=_utc(at),
                        state="pending",
                        attempts=0,
                        owner=owner[:64],
                    )
                )
                return int(result.inserted_primary_key[0])  # type: ignore[index]
        except IntegrityError:
            return None
        except OperationalError as exc:
            raise TemporaryError("the database is busy or unreachable") from exc

    def inbox_take(self, item_id: int, *, owner: str, was: str) -> bool:
        """Take a pending item over from `was` (gone) to work it off here; False when another
        replica took it first or it was done meanwhile."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.update()
                .where(inbox.c.id == item_id, inbox.c.state == "pending", inbox.c.owner == was[:64])
                .values(owner=owner[:64])
            )
        return bool(result.rowcount == 1)

    def inbox_pending(self, *, limit: int = 500) -> list[InboxItem]:
        query = sa.select(inbox).where(inbox.c.state == "pending").order_by(inbox.c.id).limit(limit)
        with _wrap_errors(), self.engine.connect() as conn:
            return [_inbox_item(r) for r in conn.execute(query).mappings()]

    def inbox_item(self, item_id: int) -> InboxItem | None:
        if not _storable_id(item_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(inbox).where(inbox.c.id == item_id)).mappings().first()
        return _inbox_item(row) if row else None

    def inbox_attempt(self, item_id: int) -> None:
        """Count an attempt before working an item off (a request that kills the bot is not retried forever)."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(inbox.update().where(inbox.c.id == item_id).values(attempts=inbox.c.attempts + 1))

    def inbox_done(self, item_id: int, *, at: datetime) -> bool:
        """Mark an item worked off; False when it already was (someone else finished it first)."""
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.update()
                .where(inbox.c.id == item_id, inbox.c.state == "pending")
                .values(state="done", done_at=_utc(at))
            )
        return bool(result.rowcount == 1)

    def inbox_failed(self, item_id: int, *, failure: str) -> None:
        """Note how an attempt failed (the operator's `inbox list` shows it)."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(inbox.update().where(inbox.c.id == item_id).values(failure=failure[:1000]))

    def inbox_set_aside(self, item_id: int, *, at: datetime, failure: str = "") -> bool:
        """Set a pending item aside as a dead letter; False when it was not pending (so whoever
        sets it aside first is the only one who tells the person)."""
        values: dict[str, Any] = {"state": "dead", "done_at": _utc(at)}
        if failure:
            values["failure"] = failure[:1000]
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.update().where(inbox.c.id == item_id, inbox.c.state == "pending").values(**values)
            )
        return bool(result.rowcount == 1)

    def inbox_items(self, *, states: Sequence[str] = ("dead",), limit: int = 200) -> list[InboxItem]:
        """Items in `states`, oldest first (dead letters by default)."""
        query = sa.select(inbox).where(inbox.c.state.in_(list(states))).order_by(inbox.c.id).limit(limit)
        with _wrap_errors(), self.engine.connect() as conn:
            return [_inbox_item(r) for r in conn.execute(query).mappings()]

    def inbox_retry(self, item_id: int) -> bool:
        """A dead letter back to pending, its attempts from zero and no owner (so the leader's
        next pass works it off); False when it is not a dead letter."""
        if not _storable_id(item_id):
            return False
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.update()
                .where(inbox.c.id == item_id, inbox.c.state == "dead")
                .values(state="pending", attempts=0, owner="", done_at=None)
            )
        return bool(result.rowcount == 1)

    def inbox_drop(self, item_id: int, *, at: datetime) -> bool:
        """A dead letter dropped for good (kept until forgotten with the done ones)."""
        if not _storable_id(item_id):
            return False
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.update()
                .where(inbox.c.id == item_id, inbox.c.state == "dead")
                .values(state="dropped", done_at=_utc(at))
            )
        return bool(result.rowcount == 1)

    def forget_inbox_before(self, cutoff: datetime) -> int:
        with _wrap_errors(), self.engine.begin() as conn:
            result = conn.execute(
                inbox.delete().where(
                    inbox.c.state.in_(["done", "dropped"]), inbox.c.received_at < _utc(cutoff)
                )
            )
        return int(result.rowcount or 0)

    # -- schedules and announcements -------------------------------------------------------------

    def create_schedule(
        self, schedule: ScheduleRow, announcements: Callable[[int], Sequence[AnnouncementRow]]
    ) -> int:
        """Insert a schedule and its announcements in one transaction; the schedule's id.

        A dedup key already stored (the same message scheduled twice) fails the whole insert
        with ConcurrentUpdate, so nothing half-scheduled remains.
        """
        try:
            with self.engine.begin() as conn:
                values = _schedule_values(schedule)
                values.pop("id")
                pk = conn.execute(schedules.insert().values(**values)).inserted_primary_key
                schedule_id = int(pk[0]) if pk else 0
                # The announcements' dedup keys name the schedule, so they are built from its id.
                for a in announcements(schedule_id):
                    conn.execute(
                        scheduled_announcements.insert().values(
                            **_announcement_values(a, schedule_id=schedule_id)
                        )
                    )
        except IntegrityError as exc:
            raise ConcurrentUpdate("these announcements were scheduled already") from exc
        except OperationalError as exc:
            raise TemporaryError("the database is busy or unreachable") from exc
        return schedule_id

    def add_announcement(self, announcement: AnnouncementRow) -> int | None:
        """Store one more announcement (completed/aborted); None when its dedup key exists."""
        try:
            with self.engine.begin() as conn:
                values = _announcement_values(announcement, schedule_id=announcement.schedule_id)
                pk = conn.execute(scheduled_announcements.insert().values(**values)).inserted_primary_key
            return int(pk[0]) if pk else 0
        except IntegrityError:
            return None
        except OperationalError as exc:
            raise TemporaryError("the database is busy or unreachable") from exc

    def schedule(self, schedule_id: int) -> ScheduleRow | None:
        if not _storable_id(schedule_id):
            return None
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(sa.select(schedules).where(schedules.c.id == schedule_id)).mappings().first()
        return _schedule_row(row) if row else None

    def schedules(
        self, *, states: Sequence[str] | None = None, plan_name: str | None = None, limit: int = 50
    ) -> list[ScheduleRow]:
        """Newest first."""
        query = sa.select(schedules).order_by(schedules.c.id.desc()).limit(limit)
        if states is not None:
            query = query.where(schedules.c.state.in_(list(states)))
        if plan_name is not None:
            query = query.where(schedules.c.plan_name == plan_name)
        with _wrap_errors(), self.engine.connect() as conn:
            return [_schedule_row(r) for r in conn.execute(query).mappings()]

    def update_schedule(self, schedule_id: int, *, state: str, run_id: str | None = None) -> None:
        values: dict[str, Any] = {"state": state}
        if run_id is not None:
            values["run_id"] = run_id[:64]
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(schedules.update().where(schedules.c.id == schedule_id).values(**values))

    def scheduled_announcements(
        self, *, schedule_id: int | None = None, states: Sequence[str] | None = None, limit: int = 500
    ) -> list[AnnouncementRow]:
        """In due order."""
        query = (
            sa.select(scheduled_announcements)
            .order_by(scheduled_announcements.c.due_at, scheduled_announcements.c.id)
            .limit(limit)
        )
        if schedule_id is not None:
            query = query.where(scheduled_announcements.c.schedule_id == schedule_id)
        if states is not None:
            query = query.where(scheduled_announcements.c.state.in_(list(states)))
        with _wrap_errors(), self.engine.connect() as conn:
            return [_announcement_row(r) for r in conn.execute(query).mappings()]

    def scheduled_announcement(self, announcement_id: int) -> AnnouncementRow | None:
        if not _storable_id(announcement_id):
            return None
        query = sa.select(scheduled_announcements).where(scheduled_announcements.c.id == announcement_id)
        with _wrap_errors(), self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return _announcement_row(row) if row else None

    def finish_announcement(
        self,
        announcement_id: int,
        *,
        state: str,
        at: datetime,
        channel: str = "",
        ts: str = "",
        delayed: bool = False,
        reason: str = "",
        audit: Sequence[AuditEntry] = (),
    ) -> bool:
        """Move a scheduled announcement to sent/skipped/cancelled (with its audit rows) once.

        `WHERE state = 'scheduled'` makes the first writer win; False when it was not scheduled.
        """
        with _wrap_errors(), self.engine.begin() as conn:
            values: dict[str, Any] = {
                "state": state,
                "delayed": delayed,
                "reason": reason,
                "updated_at": _utc(at),
            }
            if channel:
                values["channel"] = channel[:64]
            if ts:
                values["ts"] = ts[:32]
            result = conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.id == announcement_id,
                    scheduled_announcements.c.state == "scheduled",
                )
                .values(**values)
            )
            if result.rowcount != 1:
                return False
            for entry in audit:
                conn.execute(audit_log.insert().values(**_audit_values(entry)))
        return True

    def record_announcement_ts(self, announcement_id: int, *, channel: str, ts: str) -> None:
        """The ts of a post that another worker marked sent while Slack was still answering."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.id == announcement_id,
                    scheduled_announcements.c.state == "sent",
                    scheduled_announcements.c.ts == "",
                )
                .values(channel=channel[:64], ts=ts[:32], reason="")
            )

    def cancel_schedule(
        self, schedule_id: int, *, at: datetime, reason: str, audit: Sequence[AuditEntry] = ()
    ) -> int:
        """Cancel a schedule and every announcement of it not yet posted; how many were cancelled."""
        with _wrap_errors(), self.engine.begin() as conn:
            conn.execute(schedules.update().where(schedules.c.id == schedule_id).values(state="cancelled"))
            result = conn.execute(
                scheduled_announcements.update()
                .where(
                    scheduled_announcements.c.schedule_id == schedule_id,
                    scheduled_announcements.c.state == "scheduled",
                )
                .values(state="cancelled", reason=reason, updated_at=_utc(at))
            )
            for entry in audit:
                conn.execute(audit_log.insert().values(**_audit_values(entry)))
            return int(result.rowcount or 0)

    def move_schedule(
        self,
        schedule_id: int,
        replacement: ScheduleRow,
        announcements: Callable[[int], Sequence[AnnouncementRow]],
        *,
        at: datetime,
        reason: str,
        audit: Sequence[AuditEntry] = (),
    ) -> tuple[int, int]:
        """Replace a pending schedule by one for another window, in one transaction.

        The old schedule becomes `moved` and its unposted announcements `cancelled`; the new one
        and its announcements are inserted. Returns (new schedule id, announcements withdrawn).
        ConcurrentUpdate when the old one is no longer pending (someone moved, cancelled or
        started it first) — nothing is changed then.
        """
        try:
            with self.engine.begin() as conn:
                moved = conn.execute(
                    schedules.update()
                    .where(schedules.c.id == schedule_id, schedules.c.state == "scheduled")
                    .values(state="moved")
                )
                if moved.rowcount != 1:
                    raise ConcurrentUpdate(f"schedule #{schedule_id} is no longer pending")
                withdrawn = conn.execute(
                    scheduled_announcements.update()
                    .where(
                        scheduled_announcements.c.schedule_id == schedule_id,
                        scheduled_announcements.c.state == "scheduled",
                    )
                    .values(state="cancelled", reason=reason, updated_at=_utc(at))
                )
                values = _schedule_values(replacement)
                values.pop("id")
                pk = conn.execute(schedules.insert().values(**values)).inserted_primary_key
                new_id = int(pk[0]) if pk else 0
                for a in announcements(new_id):
                    conn.execute(
                        scheduled_announcements.insert().values(**_announcement_values(a, schedule_id=new_id))
                    )
                for entry in audit:
                    conn.execute(audit_log.insert().values(**_audit_values(entry)))
        except IntegrityError as exc:
            raise ConcurrentUpdate("these announcements were scheduled already") from exc
        except OperationalError as exc:
            raise TemporaryError("the database is busy or unreachable") from exc
        return new_id, int(withdrawn.rowcount or 0)

    # -- leadership (migration 9): the lease, replicas' heartbeats, and the fence ------------------

    def acquire_lease(self, holder: str, *, epoch: int, duration: timedelta, force: bool = False) -> Lease:
        """Renew the lease when `holder` holds it with `epoch`, else take it when free or expired.

        The lease as it stands afterwards is returned: `lease.held_by(holder)` says this replica
        leads, with `lease.epoch`. Compare-and-set: the UPDATE matches only the holder and epoch
        read in the same transaction, so of two replicas racing for an expired lease one wins; the
        epoch grows with every change of holder. Times come from the database's clock (PostgreSQL
        `clock_timestamp()`), so replicas whose clocks disagree still agree on expiry. The
        heartbeat of `holder` (`live_replicas`) is written in the same transaction. `force` takes
        it even when another holds it (SQLite at start: its one replica is the leader, and a
        holder that is still there is fenced off by the new epoch).
        """
        with _wrap_errors(), self.engine.begin() as conn:
            now = _db_now(conn)
            row = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
            cur_holder, cur_epoch = str(row["holder"]), int(row["epoch"])
            mine = cur_holder == holder and cur_epoch == epoch and epoch > 0
            if mine:
                values: dict[str, Any] = {"renewed_at": now, "expires_at": now + duration}
            elif force or not cur_holder or _utc(row["expires_at"]) <= now:
                values = {
                    "holder": holder[:64],
                    "epoch": cur_epoch + 1,
                    "acquired_at": now,
                    "renewed_at": now,
                    "expires_at": now + duration,
                }
            else:
                values = {}
            if values:
                conn.execute(
                    leadership.update()
                    .where(
                        leadership.c.id == 1,
                        leadership.c.holder == cur_holder,
                        leadership.c.epoch == cur_epoch,
                    )
                    .values(**values)
                )
            seen = conn.execute(replicas.update().where(replicas.c.owner == holder[:64]).values(seen_at=now))
            if seen.rowcount == 0:
                conn.execute(replicas.insert().values(owner=holder[:64], seen_at=now))
            after = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
        return _lease(after, now)

    def release_lease(self, holder: str, *, epoch: int) -> bool:
        """Give the lease up (a graceful shutdown), so another replica takes it at once; False when
        `holder` no longer held it with `epoch`. Its heartbeat goes too: the process is leaving."""
        with _wrap_errors(), self.engine.begin() as conn:
            now = _db_now(conn)
            result = conn.execute(
                leadership.update()
                .where(leadership.c.id == 1, leadership.c.holder == holder, leadership.c.epoch == epoch)
                .values(holder="", expires_at=now)
            )
            conn.execute(replicas.delete().where(replicas.c.owner == holder[:64]))
        return bool(result.rowcount == 1)

    def lease(self) -> Lease:
        """The lease as it stands now (read only)."""
        with _wrap_errors(), self.engine.connect() as conn:
            now = _db_now(conn)
            row = conn.execute(sa.select(leadership).where(leadership.c.id == 1)).mappings().one()
        return _lease(row, now)

    def live_replicas(self, within: timedelta) -> set[str]:
        """The replicas (their owner names) that renewed or tried the lease within `within`."""
        with _wrap_errors(), self.engine.connect() as conn:
            cutoff = _db_now(conn) - within
            rows = conn.execute(sa.select(replicas.c.owner, replicas.c.seen_at)).all()
        return {str(owner) for owner, seen in rows if _utc(seen) >= cutoff}

    @property
    def single_host(self) -> bool:
        """SQLite: one file on one host, so one replica — it leads from its start."""
        return self.engine.dialect.name == "sqlite"

    def check_fence(self) -> None:
        """Raise `Fenced` when the fence in force (`fencing`) is stale; nothing outside a duty.

        For a duty about to do something that writes to Slack before the database (a card edit).
        """
        with _wrap_errors(), self.engine.begin():
            pass


def _schedule_values(s: ScheduleRow) -> dict[str, Any]:
    return {
        "id": s.id,
        "plan_id": s.plan_id,
        "plan_name": s.plan_name[:100],
        "window_start": _utc(s.window_start),
        "window_end": _utc(s.window_end),
        "tz": s.tz[:64],
        "channel": s.channel[:64],
        "state": s.state,
        "run_id": s.run_id[:64],
        "created_by": s.created_by[:64],
        "created_at": _utc(s.created_at),
        "override_reason": s.override_reason,
        "moved_from": s.moved_from,
        "move_reason": s.move_reason,
    }


def _schedule_row(row: Any) -> ScheduleRow:
    return ScheduleRow(
        id=int(row["id"]),
        plan_id=int(row["plan_id"]),
        plan_name=row["plan_name"],
        window_start=_utc(row["window_start"]),
        window_end=_utc(row["window_end"]),
        tz=row["tz"],
        channel=row["channel"],
        state=row["state"],
        run_id=row["run_id"],
        created_by=row["created_by"],
        created_at=_utc(row["created_at"]),
        override_reason=row["override_reason"],
        moved_from=int(row["moved_from"]),
        move_reason=row["move_reason"],
    )


def _announcement_values(a: AnnouncementRow, *, schedule_id: int) -> dict[str, Any]:
    return {
        "schedule_id": schedule_id,
        "plan_name": a.plan_name[:100],
        "run_id": a.run_id[:64],
        "template": a.template[:32],
        "due_at": _utc(a.due_at),
        "window_start": _utc(a.window_start),
        "dedup_key": a.dedup_key[:200],
        "state": a.state,
        "channel": a.channel[:64],
        "ts": a.ts[:32],
        "delayed": a.delayed,
        "reason": a.reason,
        "updated_at": _utc(a.updated_at or a.due_at),
        "step_id": a.step_id[:64],
    }


def _announcement_row(row: Any) -> AnnouncementRow:
    return AnnouncementRow(
        id=int(row["id"]),
        schedule_id=int(row["schedule_id"]),
        plan_name=row["plan_name"],
        run_id=row["run_id"],
        template=row["template"],
        due_at=_utc(row["due_at"]),
        window_start=_utc(row["window_start"]),
        dedup_key=row["dedup_key"],
        state=row["state"],
        channel=row["channel"],
        ts=row["ts"],
        delayed=bool(row["delayed"]),
        reason=row["reason"],
        updated_at=_utc(row["updated_at"]),
        step_id=row["step_id"],
    )


def _plan_row(row: Any) -> PlanRow:
    return PlanRow(
        id=int(row["id"]),
        name=row["name"],
        text=row["text"],
        loaded_by=row["loaded_by"],
        loaded_at=_utc(row["loaded_at"]),
    )


def _run_values(run: RunRow) -> dict[str, Any]:
    return {
        "id": run.id,
        "plan_id": run.plan_id,
        "plan_name": run.plan_name[:100],
        "cluster": run.cluster[:64],
        "state": run.state,
        "version": run.version,
        "roster": _roster_text(run.roster),
        "reason": run.reason,
        "created_by": run.created_by[:64],
        "created_at": _utc(run.created_at),
        "updated_at": _utc(run.updated_at),
    }


def _run_row(row: Any) -> RunRow:
    return RunRow(
        id=row["id"],
        plan_id=int(row["plan_id"]),
        plan_name=row["plan_name"],
        cluster=row["cluster"],
        state=row["state"],
        version=int(row["version"]),
        roster={k: tuple(v) for k, v in json.loads(row["roster"]).items()},
        reason=row["reason"],
        created_by=row["created_by"],
        created_at=_utc(row["created_at"]),
        updated_at=_utc(row["updated_at"]),
    )


def _maybe_utc(value: datetime | None) -> datetime | None:
    return _utc(value) if value is not None else None


def _insert_outbox(conn: Connection, run_id: str, outbox: Sequence[tuple[str, str]], at: datetime) -> None:
    for key, body in outbox:
        conn.execute(
            run_messages.insert().values(
                run_id=run_id,
                key=key[:200],
                channel="",
                ts="",
                thread_ts="",
                claimed_at=_utc(at),
                owner="",
                body=body,
            )
        )


def _message_ref(r: Any) -> MessageRef:
    return MessageRef(
        run_id=r["run_id"],
        key=r["key"],
        channel=r["channel"],
        ts=r["ts"],
        thread_ts=r["thread_ts"],
        owner=r["owner"],
        claimed_at=_utc(r["claimed_at"]),
        body=r["body"],
    )


def _watch_values(w: WatchRow) -> dict[str, Any]:
    return {
        "id": w.id,
        "cluster": w.cluster,
        "nodegroups": json.dumps(list(w.nodegroups)),
        "namespaces": json.dumps(list(w.namespaces)),
        "target": w.target,
        "stop": w.stop,
        "channel": w.channel,
        "run_id": w.run_id or None,
        "step_id": w.step_id or None,
        "state": w.state,
        "started_by": w.started_by[:64],
        "started_at": _utc(w.started_at),
        "ends_at": _maybe_utc(w.ends_at),
        "ended_at": _maybe_utc(w.ended_at),
        "end_reason": w.end_reason,
        "end_requested_by": w.end_requested_by[:64],
        "owner": w.owner[:64],
        "heartbeat_at": _maybe_utc(w.heartbeat_at),
        "summary": w.summary,
        "published_at": _maybe_utc(w.published_at),
    }


def _watch_row(r: Any) -> WatchRow:
    return WatchRow(
        id=int(r["id"]),
        cluster=r["cluster"],
        nodegroups=tuple(json.loads(r["nodegroups"])),
        namespaces=tuple(json.loads(r["namespaces"])),
        target=r["target"],
        stop=r["stop"],
        channel=r["channel"],
        run_id=r["run_id"] or "",
        step_id=r["step_id"] or "",
        state=r["state"],
        started_by=r["started_by"],
        started_at=_utc(r["started_at"]),
        ends_at=_maybe_utc(r["ends_at"]),
        ended_at=_maybe_utc(r["ended_at"]),
        end_reason=r["end_reason"],
        end_requested_by=r["end_requested_by"],
        owner=r["owner"],
        heartbeat_at=_maybe_utc(r["heartbeat_at"]),
        summary=r["summary"],
        published_at=_maybe_utc(r["published_at"]),
    )


def _job_values(j: JobRow) -> dict[str, Any]:
    choice_key = ""
    if j.choice:
        try:
            choice_key = str(json.loads(j.choice).get("key", ""))
        except (ValueError, AttributeError):
            choice_key = ""
    return {
        "id": j.id,
        "run_id": j.run_id[:64],
        "step_id": j.step_id[:64],
        "epoch": j.epoch,
        "kind": j.kind[:32],
        "cluster": j.cluster[:100],
        "args": j.args,
        "dry_run": j.dry_run,
        "state": j.state,
        "ok": j.ok,
        "detail": j.detail,
        "progress": j.progress,
        "card": j.card,
        "choice_key": choice_key[:200],
        "choice": j.choice,
        "decision": j.decision,
        "owner": j.owner[:64],
        "heartbeat_at": _maybe_utc(j.heartbeat_at),
        "started_by": j.started_by[:64],
        "started_at": _utc(j.started_at),
        "updated_at": _maybe_utc(j.updated_at),
        "ended_at": _maybe_utc(j.ended_at),
    }


def _job_row(r: Any) -> JobRow:
    return JobRow(
        id=int(r["id"]),
        run_id=r["run_id"],
        step_id=r["step_id"],
        epoch=int(r["epoch"]),
        kind=r["kind"],
        cluster=r["cluster"],
        args=r["args"],
        dry_run=bool(r["dry_run"]),
        state=r["state"],
        ok=None if r["ok"] is None else bool(r["ok"]),
        detail=r["detail"],
        progress=r["progress"],
        card=r["card"],
        choice=r["choice"],
        decision=r["decision"],
        owner=r["owner"],
        heartbeat_at=_maybe_utc(r["heartbeat_at"]),
        started_by=r["started_by"],
        started_at=_utc(r["started_at"]),
        updated_at=_maybe_utc(r["updated_at"]),
        ended_at=_maybe_utc(r["ended_at"]),
    )


def _inbox_item(r: Any) -> InboxItem:
    return InboxItem(
        id=int(r["id"]),
        key=r["key"],
        kind=r["kind"],
        payload=r["payload"],
        received_at=_utc(r["received_at"]),
        state=r["state"],
        attempts=int(r["attempts"]),
        owner=r["owner"],
        failure=r["failure"],
    )


def _waiver_row(r: Any) -> WaiverRow:
    return WaiverRow(
        id=int(r.id),
        cluster=r.cluster,
        finding=r.finding,
        objects=tuple(str(o) for o in json.loads(r.objects)),
        reason=r.reason,
        required=bool(r.required),
        state=r.state,
        requested_by=r.requested_by,
        requested_at=_utc(r.requested_at),
        expires_at=_utc(r.expires_at),
        confirmed_by=r.confirmed_by or "",
        confirmed_at=_maybe_utc(r.confirmed_at),
        revoked_by=r.revoked_by or "",
        revoked_at=_maybe_utc(r.revoked_at),
    )


def _storable_id(value: int) -> bool:
    # Ids are typed by people (`diff 12 13`, `schedule cancel 7`); one past a 64-bit integer would
    # make the database driver raise instead of simply finding nothing.
    return 0 < value < 2**63


def _roster_text(roster: Mapping[str, Sequence[str]]) -> str:
    return json.dumps({k: list(v) for k, v in roster.items()}, sort_keys=True)


def _step_values(run_id: str, position: int, step: StepRun) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step_id": step.step_id,
        "position": position,
        "state": str(step.state),
        "epoch": step.epoch,
        "started_by": step.started_by[:64],
        "opened_at": _maybe_utc(step.opened_at),
        "started_at": _maybe_utc(step.started_at),
        "finished_at": _maybe_utc(step.finished_at),
        "escalations": step.escalations,
        "note": step.note,
        "runner": step.runner[:64],
    }


def _step_run(row: Any) -> StepRun:
    return StepRun(
        step_id=row["step_id"],
        state=StepState(row["state"]),
        epoch=int(row["epoch"]),
        started_by=row["started_by"],
        opened_at=_maybe_utc(row["opened_at"]),
        started_at=_maybe_utc(row["started_at"]),
        finished_at=_maybe_utc(row["finished_at"]),
        escalations=int(row["escalations"]),
        note=row["note"],
        runner=row["runner"],
    )


def _approval_values(run_id: str, a: Approval) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step_id": a.step_id,
        "phase": a.phase,
        "epoch": a.epoch,
        "user_id": a.user_id[:64],
        "roles": ",".join(a.roles)[:200],
        "decision": a.decision,
        "at": _utc(a.at),
        "reason": a.reason,
    }


def _approval(row: Any) -> Approval:
    return Approval(
        step_id=row["step_id"],
        phase=row["phase"],
        epoch=int(row["epoch"]),
        user_id=row["user_id"],
        roles=tuple(r for r in row["roles"].split(",") if r),
        decision=row["decision"],
        at=_utc(row["at"]),
        reason=row["reason"],
    )


def _snapshot_meta(row: Any) -> SnapshotMeta:
    return SnapshotMeta(
        id=int(row["id"]),
        cluster=row["cluster"],
        label=row["label"],
        taken_at=_utc(row["taken_at"]),
        taken_by=row["taken_by"],
        summary=row["summary"],
        size=int(row["size"]),
    )


def _audit_values(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": _utc(entry.at),
        "user_id": entry.user_id[:64],
        "channel_id": entry.channel_id[:64],
        "source": entry.source[:16],
        "kind": entry.kind[:32],
        "subcommand": entry.subcommand[:64],
        "arguments": entry.arguments,
        "outcome": entry.outcome[:32],
        "detail": entry.detail,
        "correlation_id": entry.correlation_id[:32],
        "run_id": entry.run_id[:64],
    }


@contextlib.contextmanager
def _wrap_errors() -> Iterator[None]:
    """Translate SQLAlchemy failures into the bot's error tree (locked/unreachable → temporary)."""
    try:
        yield
    except OperationalError as exc:
        raise TemporaryError("the database is busy or unreachable") from exc
    except SQLAlchemyError as exc:
        raise PermanentError("the database refused the operation") from exc


def _masked(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"^([^:/]+://[^:/@]*):[^@]*@", r"\1:***@", url)


def _reason(error: BaseException | None, url: str) -> str:
    """The driver's first line (psycopg adds hints on further lines), with no password in it."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    try:
        password = sa.engine.make_url(url).password
    except (ArgumentError, ValueError):
        password = None
    return text.replace(str(password), "***") if password else text


def _engine_or_config_error(url: str) -> Engine:
    try:
        return create_engine(url)
    except NoSuchModuleError:
        scheme = url.split("://", 1)[0]
        raise ConfigError(f"database_url: SQLAlchemy has no dialect or driver {scheme!r}") from None
    except ImportError as exc:
        # A known dialect whose DBAPI module is missing (psycopg without the `postgres` extra).
        raise ConfigError(
            f"database_url: the database driver {exc.name or 'module'} is not installed "
            "(postgresql://… uses psycopg, which the `postgres` extra installs)"
        ) from None
    except (ArgumentError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"database_url: {_masked(url)} does not parse: {reason[:200]}") from None
    except OSError as exc:
        # The SQLite file's directory could not be created (a file in the way, no permission).
        why = "a file is in the way" if isinstance(exc, FileExistsError) else exc.strerror
        raise ConfigError(
            f"database_url: cannot create the SQLite file's directory {exc.filename}: {why}"
        ) from None


#: libpq waits for a TCP connection indefinitely by default; a start-up must not hang on a
#: black-holed address. A `connect_timeout` in the URL wins.
CONNECT_TIMEOUT_SECONDS = 10


def create_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get their directory, WAL and a busy timeout."""
    if url.startswith("sqlite"):
        db_path = sa.engine.make_url(url).database
        if db_path and db_path != ":memory:":
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        # Worker threads share the engine; SQLite's own locking serialises writers, and the busy
        # timeout makes a writer wait for the lock instead of failing at once.
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    if url.startswith("postgresql://"):
        # psycopg 3 is the driver we ship in the `postgres` extra.
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    parsed = sa.engine.make_url(url)
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    return sa.create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)


# ---------------------------------------------------------------------------------------------
# Fencing: the check every transaction of a duty makes (see the module docstring).

_FENCE: contextvars.ContextVar[tuple[Fence, Callable[[Fenced], object] | None] | None] = (
    contextvars.ContextVar("upgrade_bot_fence", default=None)
)


@contextlib.contextmanager
def fencing(fence: Fence, on_fenced: Callable[[Fenced], object] | None = None) -> Iterator[None]:
    """Within this block (on this thread or task), every store transaction checks `fence` first.

    `on_fenced` is told at once when a check fails (the replica steps down), even when the caller
    swallows the error as one more failed post.
    """
    token = _FENCE.set((fence, on_fenced))
    try:
        yield
    finally:
        _FENCE.reset(token)


def current_fence() -> Fence | None:
    active = _FENCE.get()
    return active[0] if active is not None else None


class _FencingEngine(Engine):
    """The store's engine, whose `begin()` checks the fence of the duty in force, if any."""

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        with super().begin() as conn:
            active = _FENCE.get()
            if active is not None:
                _check_fence(conn, *active)
            yield conn


def _check_fence(conn: Connection, fence: Fence, on_fenced: Callable[[Fenced], object] | None) -> None:
    query = sa.select(leadership.c.holder, leadership.c.epoch).where(leadership.c.id == 1)
    if conn.dialect.name == "postgresql":
        # A shared row lock held to the commit: a takeover's UPDATE waits for this write, so no
        # write of the old epoch can land after the new leader's first one.
        query = query.with_for_update(read=True)
    row = conn.execute(query).first()
    holder, epoch = (str(row[0]), int(row[1])) if row is not None else ("", 0)
    if (holder, epoch) != (fence.holder, fence.epoch):
        error = Fenced(
            f"this replica's epoch {fence.epoch} is stale (the lease: {holder or 'nobody'}, epoch {epoch})"
        )
        log.warning("fenced: %s", error.user_message)
        if on_fenced is not None:
            on_fenced(error)
        raise error


def _db_now(conn: Connection) -> datetime:
    """The database's time: replicas on several hosts agree on it, whatever their own clocks say.
    (SQLite has no server: its one replica's clock is the database's.)"""
    if conn.dialect.name == "postgresql":
        return _utc(conn.execute(sa.select(sa.func.clock_timestamp())).scalar_one())
    return datetime.now(UTC)


def _lease(row: Any, now: datetime) -> Lease:
    return Lease(
        holder=str(row["holder"]),
        epoch=int(row["epoch"]),
        acquired_at=_utc(row["acquired_at"]),
        renewed_at=_utc(row["renewed_at"]),
        expires_at=_utc(row["expires_at"]),
        now=now,
    )
