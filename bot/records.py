"""Records: the plain data that core, the adapters and the store all speak (a leaf).

This module imports nothing of the bot, so every layer can depend on it without a cycle. The
store maps these records to and from its rows (it alone knows the tables); core builds its models
from them (a `Run` is a `RunRow` plus its `StepRun`s and `Approval`s and the parsed plan).
Timestamps are timezone-aware UTC.

    AuditEntry        one line of the audit log
    ClusterConfig     where to find one cluster's API server
    PlanRow           a loaded plan, as stored (name, YAML text, who loaded it)
    RunRow            a run's header: plan, cluster, state, version, roster
    StepState, RunState, StepRun, Approval
                      the state of each step of a run, and each recorded confirmation
    MessageRef        a Slack message posted for a run (channel, ts, thread ts)
    SnapshotMeta      a stored snapshot's metadata (the body is fetched apart)
    ScheduleRow, AnnouncementRow
                      a scheduled window and the announcements it owes
    InboxItem         a Slack request acknowledged and not yet worked off
    WatchRow          a live (or ended) watch: scope, target, who drives it, what was published
    ActionCall, ActionRequest
                      an action as a plan step writes it, and one to perform now for a run
    EksProvider       where a cluster's cloud provider answers (the provider port's configuration)
    Versions, Operation, OperationError, PoolStrategy, MaintenancePolicy, Insight, SubnetCapacity
                      what the provider port (`bot.core.providers`) answers, whatever the cloud
    PipelineBuild     a CI build a pipeline hook reported for a run's step (issue 43)
    PrRef, PullRequest, Check
                      the PR a plan step names, and what the PR port reads of it (issue 43)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    """One line of the audit log: who did what, where, when, and how it ended."""

    at: datetime
    user_id: str
    channel_id: str
    source: str  # "slack" | "terminal" | "scheduler"
    kind: str  # "command" | "action" | …
    subcommand: str
    arguments: str
    outcome: str  # "ok" | "error" | "denied" | "usage" | …
    detail: str = ""
    correlation_id: str = ""
    run_id: str = ""
    id: int | None = None


@dataclass(frozen=True, kw_only=True)
class EksProvider:
    """The cluster is an EKS cluster: its name and region, and the API endpoint when it is not
    AWS's own (the simulator's `aws:` URL). Credentials come from the standard chain."""

    name: str
    region: str
    endpoint_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class AksProvider:
    """The cluster is an AKS managed cluster: its subscription, resource group and name, and the
    ARM endpoint when it is not Azure's own (the simulator's `azure:` URL, whose token is static).
    Credentials come from azure-identity's default chain (workload identity in the chart)."""

    subscription_id: str
    resource_group: str
    name: str
    endpoint_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class GkeProvider:
    """The cluster is a GKE cluster: its project, location (a region or a zone) and name, and the
    API endpoint when it is not Google's own (the simulator's `gke:` URL, which asks for no
    credentials). Credentials come from google-auth's default chain (Workload Identity in the chart)."""

    project: str
    location: str
    name: str
    endpoint_url: str | None = None


#: The statuses of a provider's `Operation`, whatever the cloud calls them (EKS's words; GKE's
#: PENDING/RUNNING/DONE and ARM's provisioning states map onto them in their adapters).
OPERATION_STATUSES = ("InProgress", "Successful", "Failed", "Cancelled")


@dataclass(frozen=True, kw_only=True)
class OperationError:
    """One reason a provider gives for a failed operation: its code (EKS's `errorCode`,
    `ConfigurationConflict`, `PodEvictionFailure` …), its message and the resources it names."""

    code: str
    message: str = ""
    resources: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Operation:
    """A provider's long-running update (EKS's update, GKE's operation, ARM's async operation):
    `kind` is the cloud's type (`VersionUpdate`, `AddonUpdate`, `UPGRADE_MASTER` …), `params` what
    it was asked (`Version: 1.25`), `status` one of OPERATION_STATUSES, `created` ISO-8601 UTC."""

    id: str
    kind: str
    status: str
    params: Mapping[str, str] = field(default_factory=dict)
    errors: tuple[OperationError, ...] = ()
    created: str = ""


@dataclass(frozen=True, kw_only=True)
class Versions:
    """The control plane's version now and the versions the provider offers to update it to
    (EKS: the next minor; GKE: `get_server_config`'s valid master versions; AKS: the upgrade
    profile's upgrades); `default` is the provider's own pick, when it has one."""

    current: str
    offered: tuple[str, ...] = ()
    default: str = ""


@dataclass(frozen=True, kw_only=True)
class PoolStrategy:
    """How a node pool is updated: `surge` (new nodes added, old ones drained and removed a few at
    a time: EKS managed node groups, GKE surge, AKS max surge) or `replace` (a whole new pool, the
    old one kept for `soak_seconds` to roll back to: GKE blue-green). `max_surge` and
    `max_unavailable` are counts or percentages as the cloud takes them ("" leaves the pool's own
    setting); `force` drains past disruption budgets (EKS's `force`) — only when people chose it."""

    kind: str = "surge"
    max_surge: str = ""
    max_unavailable: str = ""
    soak_seconds: float = 0.0
    force: bool = False


@dataclass(frozen=True, kw_only=True)
class MaintenanceExclusion:
    """A span the provider will not start updates in (GKE's maintenance exclusions, AKS's
    planned maintenance `notAllowedTime`): its name and bounds (ISO-8601 UTC) and its scope."""

    name: str
    start: str
    end: str
    scope: str = ""


@dataclass(frozen=True, kw_only=True)
class MaintenancePolicy:
    """When the provider may do its own maintenance: recurring windows as it writes them (an
    RRULE, a cron-like text) and exclusions; `note` says what the cloud has instead (EKS: none)."""

    windows: tuple[str, ...] = ()
    exclusions: tuple[MaintenanceExclusion, ...] = ()
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class Insight:
    """A provider's upgrade-readiness finding for a target version (EKS upgrade insights, GKE's
    deprecation insights, AKS's deprecated-API usage): `status` PASSING, WARNING, ERROR or UNKNOWN;
    `blocking` when the provider refuses the update while it stands (unless forced)."""

    id: str
    name: str
    status: str
    reason: str = ""
    category: str = ""
    kubernetes_version: str = ""
    recommendation: str = ""
    blocking: bool = False
    #: What it names, one line each: a removed API still called and its callers
    #: ("/apis/policy/v1beta1/poddisruptionbudgets → /apis/policy/v1/poddisruptionbudgets, called by
    #: helm/v3.8.2 8,640 times in 30 days"), an add-on and its compatible versions.
    uses: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SubnetCapacity:
    """Free addresses of one subnet the provider places control-plane or node interfaces in."""

    id: str
    zone: str = ""
    free: int = 0


@dataclass(frozen=True, kw_only=True)
class ImageChecks:
    """`checks.images`: whether every check asks the registries about the images the upgrade
    rolls out (IMG001), and how to reach them."""

    verify: bool = False
    docker_config: Path | None = None
    insecure: tuple[str, ...] = ()
    #: registry host → the base URL it is asked at (a mirror, the simulator's /v2 facade).
    endpoints: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SignalSource:
    """Where one of a cluster's evidence servers answers: `clusters.NAME.alertmanager` or
    `clusters.NAME.prometheus`. The token file is read on each request, so a rotated token is
    picked up without a restart; `ca_file` verifies a private CA (system roots otherwise)."""

    url: str
    bearer_token_file: Path | None = None
    ca_file: Path | None = None


@dataclass(frozen=True, kw_only=True)
class GrafanaConfig:
    """`grafana:`: where step annotations go. The token was read from `token_file` when the
    configuration was loaded (a rotated token needs a restart); it is kept out of `repr`, so a
    logged settings object never shows it."""

    url: str
    token_file: Path | None = None
    token: str = field(default="", repr=False)
    tags: tuple[str, ...] = ()
    timeout: float = 5.0


@dataclass(frozen=True, kw_only=True)
class AlertMatcher:
    """One Alertmanager matcher, `cluster="prod"` or `team=~"infra|sre"`: the same four operators
    as Alertmanager's own (`=`, `!=`, `=~`, `!~`), in the v2 API's silence-matcher shape."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def __str__(self) -> str:
        op = ("=" if self.is_equal else "!") + ("~" if self.is_regex else "")
        if op == "!":
            op = "!="
        value = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{op}"{value}"'


@dataclass(frozen=True, kw_only=True)
class Alert:
    """One alert as Alertmanager API v2 reports it (`gettableAlert`)."""

    fingerprint: str
    labels: Mapping[str, str]
    starts_at: datetime
    #: "active", "suppressed" (silenced or inhibited) or "unprocessed".
    state: str
    silenced_by: tuple[str, ...] = ()
    inhibited_by: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


@dataclass(frozen=True, kw_only=True)
class Silence:
    """One silence (`gettableSilence`); `state` is "active", "pending" or "expired"."""

    id: str
    matchers: tuple[AlertMatcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    state: str


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One element of an instant query's answer: a vector's series or a scalar (no labels)."""

    labels: Mapping[str, str]
    value: float
    at: datetime


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where to find one cluster's API server (and, for a managed cluster, its provider's API)."""

    name: str
    kubeconfig: Path | None = None
    context: str | None = None
    in_cluster: bool = False
    #: Seconds to wait for the API server before calling it unreachable.
    request_timeout: float = 10.0
    #: `provider: {eks: {…}}`: the EKS checks read the cloud's side through the `aws` extra.
    eks: EksProvider | None = None
    #: `provider: {aks: {…}}`: the AKS actions reach ARM through the `aks` extra.
    aks: AksProvider | None = None
    #: `provider: {gke: {…}}`: the GKE actions reach GKE's API through the `gke` extra.
    gke: GkeProvider | None = None
    #: The evidence gate's sources (docs/evidence-gate.md); None when the cluster names none.
    alertmanager: SignalSource | None = None
    prometheus: SignalSource | None = None
    #: Scopes Alertmanager's alerts to this cluster; empty: every alert counts.
    alert_matchers: tuple[AlertMatcher, ...] = ()
    #: `labels: {env: lab}`: what a fleet stage's selector matches (issue 41).
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    #: `scenario:` the sim that stands in for the cluster in `rehearse-fleet` ("" when unnamed).
    scenario: str = ""


@dataclass(frozen=True, kw_only=True)
class PlanRow:
    id: int
    name: str
    text: str
    loaded_by: str
    loaded_at: datetime


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    plan_id: int
    plan_name: str
    cluster: str
    state: str
    version: int
    #: Role → Slack IDs: the run's own roster, after hand-offs.
    roster: Mapping[str, tuple[str, ...]]
    reason: str
    created_by: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, kw_only=True)
class MessageRef:
    """A Slack message the bot posted for a run: the card, or one message in its thread."""

    run_id: str
    key: str
    channel: str
    #: Empty while the post is claimed but Slack has not answered yet.
    ts: str
    thread_ts: str = ""
    #: The process that claimed it (a claim without a ts from a process now gone is resolved).
    owner: str = ""
    claimed_at: datetime | None = None
    #: An outbox row's message (JSON: text, blocks, broadcast), written with the commit that owes
    #: it; "" for a plain claim.
    body: str = ""
    #: An outbox row's posts that failed the same way in a row, and how the last one failed.
    attempts: int = 0
    failure: str = ""
    #: When the row was set aside as a dead letter (never claimed again until retried); None while owed.
    dead_at: datetime | None = None
    #: When its current run of failures began; None while it has not failed.
    failing_since: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SnapshotMeta:
    id: int
    cluster: str
    label: str
    taken_at: datetime
    taken_by: str
    #: Small JSON object: counts, control-plane version, gaps. Readable without the body.
    summary: str
    size: int


@dataclass(frozen=True, kw_only=True)
class EvidenceBaselineRow:
    """What a run's snapshot recorded of the evidence sources (issue 39). `body` is JSON:
    `{"alerts": {fingerprint: {"labels": {...}, "startsAt": ISO}} | null, "analysis": {query:
    value | null}, "errors": {source: reason}}` — null where the source gave no answer."""

    snapshot_id: int
    run_id: str
    cluster: str
    taken_at: datetime
    body: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class ScheduleRow:
    """A plan scheduled for a window; `state` is scheduled, started (a run began) or cancelled."""

    id: int
    plan_id: int
    plan_name: str
    window_start: datetime
    window_end: datetime
    tz: str
    channel: str
    state: str
    run_id: str
    created_by: str
    created_at: datetime
    override_reason: str = ""
    #: Set by `schedule move`: the schedule this one replaced (0: none) and why it moved.
    moved_from: int = 0
    move_reason: str = ""


@dataclass(frozen=True, kw_only=True)
class AnnouncementRow:
    """One announcement to post: `state` is scheduled, sent, skipped or cancelled."""

    id: int
    schedule_id: int
    plan_name: str
    run_id: str
    template: str
    due_at: datetime
    window_start: datetime
    dedup_key: str
    state: str
    channel: str
    ts: str = ""
    delayed: bool = False
    reason: str = ""
    updated_at: datetime | None = None
    #: The step a `step-complete` announcement is about; "" for the others.
    step_id: str = ""


@dataclass(frozen=True, kw_only=True)
class VerificationRow:
    """One person's "Verified" on a completed announcement (once per person and announcement)."""

    announcement_id: int
    user_id: str
    at: datetime


class StepState(StrEnum):
    PENDING = "pending"
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"


class RunState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    ABORTED = "aborted"
    COMPLETED = "completed"


@dataclass(frozen=True, kw_only=True)
class Approval:
    step_id: str
    phase: str  # "start" | "done"
    epoch: int
    user_id: str
    roles: tuple[str, ...]
    decision: str  # "approve" | "reject"
    at: datetime
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class StepRun:
    step_id: str
    state: StepState = StepState.PENDING
    epoch: int = 0
    #: Whose approval set the step running (four-eyes on its "done" confirmation).
    started_by: str = ""
    opened_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    escalations: int = 0
    note: str = ""
    #: The process that set it running and runs its action (a replica's owner name): a new
    #: leader's recovery leaves a step alone while that replica is alive (migration 11).
    runner: str = ""
    #: What a succeeded step's action left for people (migration 26), in a few words: "1 node
    #: skipped, still cordoned: ip-10-0-3-7". Empty when it did all it was asked.
    left_behind: str = ""


@dataclass(frozen=True, kw_only=True)
class InboxItem:
    """A command or click stored before Slack was told "received": worked off exactly once."""

    id: int
    #: Slack's delivery identity (the de-duplication key): one row per request, whatever retries.
    key: str
    kind: str  # "command" | "action" | "view"
    #: The request as Slack sent it (JSON text): enough to do the work again after a restart.
    payload: str
    received_at: datetime
    state: str = "pending"  # "pending" | "done" | "dead" (set aside) | "dropped" (by an operator)
    attempts: int = 0
    #: The replica working it off (migration 12): the leader takes it over only once that
    #: replica is gone, never while it may still be working on it.
    owner: str = ""
    #: How its last attempt failed (migration 15): the exception and where, one line.
    failure: str = ""


@dataclass(frozen=True, kw_only=True)
class WatchRow:
    """A watch of a cluster's rollout status (issue 13): one row, whoever drives it.

    `target`/`stop` are JSON (the watch's target and stop rules); `summary` is the last PUBLISHED
    summary (JSON, "" before the first), persisted in the same step as the posts it caused. `owner`
    is the process driving it, alive while it keeps `heartbeat_at` fresh; `run_id`/`step_id` are
    set for a watch a plan step runs ("" for a standalone one).
    """

    id: int
    cluster: str
    nodegroups: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    target: str = ""
    stop: str = ""
    channel: str = ""
    run_id: str = ""
    step_id: str = ""
    state: str = "live"  # "live" | "ended"
    started_by: str = ""
    started_at: datetime
    ends_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str = ""
    #: Asked to end (`unwatch`) by this person; the driver ends it with a final summary.
    end_requested_by: str = ""
    owner: str = ""
    heartbeat_at: datetime | None = None
    summary: str = ""
    published_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class JobRow:
    """A cluster job (issue 15: cordon, uncordon, drain, restart, wait-nodegroup): one row.

    `args` is JSON (the action's arguments); `progress` is the job's whole state (JSON, see
    `bot.core.jobs.base`), stored after every tick in the same transaction as the thread posts it
    owes and its audit rows. `state`: "live" (driven by `owner` while its heartbeat is fresh),
    "interrupted" (its driver died or was deposed: the step waits for people, and `resume`
    continues from `progress`), "done". `choice` is the open question for people (JSON, "" when
    none) and `decision` their answer (JSON, "" until given). `epoch` is the step's epoch that
    started (or resumed) it: a job drives only while its step runs under that epoch.
    """

    id: int
    run_id: str
    step_id: str
    epoch: int = 0
    kind: str
    cluster: str
    args: str = "{}"
    dry_run: bool = False
    state: str = "live"  # "live" | "interrupted" | "done"
    ok: bool | None = None
    detail: str = ""
    progress: str = ""
    card: str = ""  # JSON list of the live section's lines
    choice: str = ""
    decision: str = ""
    owner: str = ""
    heartbeat_at: datetime | None = None
    started_by: str = ""
    started_at: datetime
    updated_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Fence:
    """The epoch a replica believes it leads with: a duty's writes are refused once it is stale."""

    holder: str
    epoch: int


@dataclass(frozen=True, kw_only=True)
class Lease:
    """The leader's lease as the database holds it (one row), with the database's time `now`."""

    holder: str  # "" when nobody holds it (released)
    epoch: int  # grows by one with every change of holder: the fencing token
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    now: datetime

    def held_by(self, holder: str) -> bool:
        return self.holder == holder and self.expires_at > self.now


@dataclass(frozen=True, kw_only=True)
class FileAttachment:
    """A file that goes with a reply or a run's thread line: uploaded in Slack, written to disk
    in the terminal (a check's full report, a diff, an audit trail)."""

    filename: str
    content: bytes
    title: str = ""
    filetype: str = ""


@dataclass(frozen=True, kw_only=True)
class WaiverRow:
    """An accepted finding on a cluster (migration 15): `objects` empty covers the finding wholly.

    `state` is "pending" (a Required finding's waiver waiting for its second person), "active"
    or "revoked"; a waiver past `expires_at` covers nothing whatever its state."""

    id: int
    cluster: str
    finding: str
    objects: tuple[str, ...]
    reason: str
    required: bool
    state: str
    requested_by: str
    requested_at: datetime
    expires_at: datetime
    confirmed_by: str = ""
    confirmed_at: datetime | None = None
    revoked_by: str = ""
    revoked_at: datetime | None = None

    def active_at(self, now: datetime) -> bool:
        return self.state == "active" and now < self.expires_at


@dataclass(frozen=True, kw_only=True)
class CheckSeen:
    """What the last check of a cluster found (revision 0027): each finding id with the objects
    it named, waived or not, so `/upgrade waive` can tell a waiver that matches nothing. `clipped`:
    the ids whose objects were too many to keep (an object not kept may still be named)."""

    cluster: str
    checked_at: datetime
    target: str
    findings: Mapping[str, tuple[str, ...]]
    clipped: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class ActionCall:
    """One action as a plan step writes it: `{snapshot: {label: pre}}`."""

    name: str
    args: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ActionRequest:
    """An action to perform now, for a run: which call, on which cluster, asked by which run."""

    run_id: str
    cluster: str
    call: ActionCall
    step_id: str = ""
    #: The run's plan's `target_version`: what a `check` without `to` checks for (its minor).
    target_version: str = ""


@dataclass(frozen=True, kw_only=True)
class FleetRow:
    """A fleet run's header (issue 41); `plan_text` is the fleet plan as it was started."""

    id: str
    name: str
    plan_text: str
    state: str
    reason: str
    stage: int
    phase: str
    soak_started_at: datetime | None
    version: int
    created_by: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, kw_only=True)
class FleetMemberRow:
    """One cluster of a fleet run: its stage, state and child run, and its pinned plan."""

    fleet_id: str
    cluster: str
    stage: int
    position: int
    state: str
    run_id: str
    attempts: int
    reason: str
    plan_text: str


@dataclass(frozen=True, kw_only=True)
class FleetVoteRow:
    """One approval of a fleet stage's `before` or `after` gate."""

    fleet_id: str
    stage: int
    gate: str
    user_id: str
    roles: tuple[str, ...]
    at: datetime


@dataclass(frozen=True, kw_only=True)
class PipelineBuild:
    """One report of a CI build for a run's step, as a signed pipeline hook sent it (issue 43):
    which pipeline, job and build, its status, the revision it ran at and a link to it."""

    run_id: str
    step_id: str
    source: str
    pipeline: str
    job: str
    build: str
    status: str
    revision: str
    url: str
    at: datetime


#: A check that ended like this counts as passed (GitHub's conclusions).
PASSED = frozenset({"success", "neutral", "skipped"})


@dataclass(frozen=True, kw_only=True)
class PrRef:
    """Which PR a step names: its repository and one of a number, a branch or a title pattern."""

    repo: str
    number: int | None = None
    branch: str = ""
    match: str = ""
    #: What the step's `done` needs of it: "merged", "checks" (all success).
    require: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.number is not None:
            return f"{self.repo}#{self.number}"
        if self.branch:
            return f"{self.repo} branch {self.branch}"
        return f"{self.repo} PR matching /{self.match}/"


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check run or commit status on the PR's head: its name, state and conclusion."""

    name: str
    #: "queued", "in_progress", "completed" (a status' pending is "in_progress").
    status: str
    #: When completed: success, failure, neutral, cancelled, skipped, timed_out, action_required.
    conclusion: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "completed" and self.conclusion in PASSED

    @property
    def failed(self) -> bool:
        return self.status == "completed" and self.conclusion not in PASSED


@dataclass(frozen=True, kw_only=True)
class PullRequest:
    """A PR as the port reads it."""

    repo: str
    number: int
    title: str
    url: str
    #: "open", "closed" or "merged".
    state: str
    head_sha: str
    merge_commit: str = ""
    checks: tuple[Check, ...] = ()
    #: People whose latest review approves, and those whose latest asks for changes.
    approvals: tuple[str, ...] = ()
    changes_requested: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GitHubAccess:
    """How the bot reads GitHub (`github:`): its REST API's URL, and either a token or a GitHub
    App (its id, the installation's id and its private key, PEM). Secrets stay out of `repr`."""

    api_url: str
    token: str = field(default="", repr=False)
    app_id: str = ""
    installation_id: int = 0
    private_key: str = field(default="", repr=False)

    @property
    def app(self) -> bool:
        return bool(self.app_id)
