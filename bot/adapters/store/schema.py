"""The current schema, for queries. Migrations (`migrations/versions/`) say how each version got here."""

from __future__ import annotations

import sqlalchemy as sa

# ---------------------------------------------------------------------------------------------
# The table objects below describe the *current* schema for queries; the Alembic revisions describe
# how each version got there and never change once released. A test compares the two.

metadata = sa.MetaData()

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
sa.Index("ix_snapshots_cluster_label_taken", snapshots.c.cluster, snapshots.c.label, snapshots.c.taken_at)


# Plans, runs, steps, approvals and Slack message references (revision 0003).
plans = sa.Table(
    "plans",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False, index=True),
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
    sa.Column("state", sa.String(16), nullable=False, index=True),
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
    # Revision 0011: the process running the step's action (see `StepRun.runner`).
    sa.Column("runner", sa.String(64), nullable=False, server_default=""),
    # Revision 0026: what a succeeded step left for people (see `StepRun.left_behind`).
    sa.Column("left_behind", sa.Text, nullable=False, server_default=""),
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
# A second click by the same person on the same gate state can never be stored twice.
sa.Index(
    "ux_approvals_once",
    approvals.c.run_id,
    approvals.c.step_id,
    approvals.c.phase,
    approvals.c.epoch,
    approvals.c.user_id,
    approvals.c.decision,
    unique=True,
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
    # Revision 0006: which process claimed it, so a claim left without a ts by a dead one is resolved;
    # and, for a thread line written in the commit that caused it (an outbox row), what to post.
    sa.Column("owner", sa.String(64), nullable=False, server_default=""),
    sa.Column("body", sa.Text, nullable=False, server_default=""),
    # Revision 0018: an outbox row Slack refused the same way `attempts` times in a row (the last
    # `failure`) is set aside at `dead_at` (see `MessageRef.dead_at`).
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failure", sa.Text, nullable=False, server_default=""),
    sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True),
    # Revision 0022: when the current run of failures began (a post failing for longer than the
    # configured time is set aside too, whatever the failure).
    sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
)

# Requests acknowledged to Slack and not yet worked off (revision 0006).
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
    # Revision 0012: the replica working it off (see `InboxItem.owner`).
    sa.Column("owner", sa.String(64), nullable=False, server_default=""),
    # Revision 0015: how its last attempt failed (see `InboxItem.failure`).
    sa.Column("failure", sa.Text, nullable=False, server_default=""),
)


# Schedules and their announcements (revision 0004).
schedules = sa.Table(
    "schedules",
    metadata,
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
    # Revision 0005: a schedule made by `schedule move` names the one it replaced and why.
    sa.Column("moved_from", sa.Integer, nullable=False, server_default="0"),
    sa.Column("move_reason", sa.Text, nullable=False, server_default=""),
)

scheduled_announcements = sa.Table(
    "scheduled_announcements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("schedule_id", sa.Integer, nullable=False, index=True),
    sa.Column("plan_name", sa.String(100), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("template", sa.String(32), nullable=False),
    sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
    sa.Column("dedup_key", sa.String(200), nullable=False, unique=True),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("channel", sa.String(64), nullable=False),
    sa.Column("ts", sa.String(32), nullable=False),
    sa.Column("delayed", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    # Revision 0005: the step a `step-complete` announcement is about ("" for the others).
    sa.Column("step_id", sa.String(64), nullable=False, server_default=""),
)

#: Revision 0025 (issue 39): who pressed "Verified" on a completed announcement, once per person.
announcement_verifications = sa.Table(
    "announcement_verifications",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("announcement_id", sa.Integer, nullable=False, index=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("announcement_id", "user_id", name="uq_announcement_verifications_once"),
)

# The leader's lease (one row, id 1) and the replicas' heartbeats (revision 0009).
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


# Watches of a cluster's rollout status (revision 0007): who drives each and what it last published.
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


# A watch's unhealthy pods by class over time (revision 0018, issue 31): `counts` is a JSON object
# {class: pods}, written when the counts changed, at most every 30 s of the watch's clock.
watch_samples = sa.Table(
    "watch_samples",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("watch_id", sa.Integer, nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("counts", sa.Text, nullable=False),
    sa.Index("ix_watch_samples_watch_at", "watch_id", "at"),
)

# Evidence baselines (revision 0021, issue 39): what a run's snapshot recorded of the evidence
# sources — `body` is JSON {"alerts": {fingerprint: {labels, startsAt}} | null, "analysis":
# {query: value | null}, "errors": {source: reason}} — the earliest of a run is its baseline.
evidence_baselines = sa.Table(
    "evidence_baselines",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("snapshot_id", sa.Integer, nullable=False, unique=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("cluster", sa.String(64), nullable=False),
    sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Index("ix_evidence_baselines_run", "run_id", "taken_at"),
)

# Cluster jobs (revision 0010, issue 15): a long action's whole progress, who drives it, and the
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
# At most one offer to uncordon per aborted run (revision 0013): a partial unique index.
sa.Index(
    "ix_jobs_one_abort_offer",
    jobs.c.run_id,
    unique=True,
    sqlite_where=sa.text("step_id = 'after-abort'"),
    postgresql_where=sa.text("step_id = 'after-abort'"),
)

# What a gate's step will touch, read from the cluster once when the gate opened (revision 0014):
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

# A known issue's Fix button (revision 0016): one run per finding, however often it is clicked.
finding_fixes = sa.Table(
    "finding_fixes",
    metadata,
    sa.Column("subject", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("clicked_by", sa.String(64), nullable=False),
    sa.Column("clicked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, server_default=""),
)


# Accepted findings (revision 0017): a Required finding's waiver is "pending" until a second person
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
sa.Index("ix_waivers_cluster_state", waivers.c.cluster, waivers.c.state)


# The last check of each cluster (revision 0027): its finding ids and the objects each named
# (`CheckSeen`), one row per cluster, replaced by every check; `/upgrade waive` compares with it.
checks_seen = sa.Table(
    "checks_seen",
    metadata,
    sa.Column("cluster", sa.String(64), primary_key=True),
    sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("target", sa.String(32), nullable=False),
    sa.Column("findings", sa.Text, nullable=False),
)


# Slack display names (revision 0020): `users.info` answers cached, so the report and the terminal
# name people without asking Slack each time, and name them when Slack cannot be reached.
people = sa.Table(
    "people",
    metadata,
    sa.Column("user_id", sa.String(64), primary_key=True),
    sa.Column("display_name", sa.Text, nullable=False),
    sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
)


# Fleet runs (revision 0023, issue 41): a parent over child runs. `version` is the fleet row's
# optimistic concurrency (every change is a compare-and-set on it); a member's `plan_text` is the
# plan its cluster runs, pinned when the fleet started (a retry runs the same target version).
fleet_runs = sa.Table(
    "fleet_runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("plan_text", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("stage", sa.Integer, nullable=False),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("soak_started_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("created_by", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)
fleet_members = sa.Table(
    "fleet_members",
    metadata,
    sa.Column("fleet_id", sa.String(64), primary_key=True),
    sa.Column("cluster", sa.String(64), primary_key=True),
    sa.Column("stage", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("plan_text", sa.Text, nullable=False),
)
fleet_votes = sa.Table(
    "fleet_votes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("fleet_id", sa.String(64), nullable=False),
    sa.Column("stage", sa.Integer, nullable=False),
    sa.Column("gate", sa.String(16), nullable=False),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("roles", sa.Text, nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.UniqueConstraint("fleet_id", "stage", "gate", "user_id", name="uq_fleet_votes_one_per_person"),
)

#: Pipeline hooks (issue 43): each build report a signed hook sent, in the order it came.
pipeline_builds = sa.Table(
    "pipeline_builds",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("step_id", sa.String(64), nullable=False),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("pipeline", sa.String(200), nullable=False),
    sa.Column("job", sa.String(200), nullable=False),
    sa.Column("build", sa.String(100), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("revision", sa.String(100), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
)
#: The signatures of the pipeline hooks accepted, kept until their replay window is over: the
#: same signed request sent again is refused, on every replica (the database is shared).
hook_signatures = sa.Table(
    "hook_signatures",
    metadata,
    sa.Column("signature", sa.String(128), primary_key=True),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False, index=True),
)
