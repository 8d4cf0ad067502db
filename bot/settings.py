"""One settings object: the YAML configuration file plus secrets from the environment.

Loaded once at start-up and validated before anything starts; every problem is reported with the
file, the YAML line and the dotted key, so an operator can fix it without reading a traceback.
Nothing in the bot reads the environment elsewhere: the loaded `Settings` is passed down.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar
from zoneinfo import ZoneInfo

import yaml

from bot.configschema import (
    bounds,
    homes,
    int_bounds,
    keys_of,
)
from bot.configsections import (
    check_data_dir,
    check_database_url,
    cluster_section,
    freezes_section,
    github_section,
    grafana_section,
    ignores_section,
    images_section,
    list_items,
    parse_node,
    pipeline_hooks_section,
    windows_section,
)
from bot.configsections import read_check_ignores as read_check_ignores
from bot.configsections import read_image_checks as read_image_checks
from bot.core import windows as _windows
from bot.core.announcements import timing as _announcements
from bot.core.checks.findings import Cover
from bot.core.durations import parse_duration
from bot.core.people import CHANNEL_ID
from bot.core.validation import (
    NAME_PATTERN,
    YamlValidator,
    compose_document,
    read_document,
)
from bot.errors import ConfigError
from bot.records import (
    ClusterConfig,
    GitHubAccess,
    GrafanaConfig,
    ImageChecks,
)
from bot.resources import BUILTIN_RULES, BUILTIN_TEMPLATES

_T = TypeVar("_T")

DEFAULT_CONFIG_NAME = "upgrade-bot.yaml"
CONFIG_ENV = "UPGRADE_BOT_CONFIG"


@dataclass(frozen=True, kw_only=True)
class Channels:
    announcements: str | None = None
    operations: str | None = None


@dataclass(frozen=True, kw_only=True)
class Secrets:
    """Tokens from the environment. `repr` never shows a value, so logging the settings is safe."""

    bot_token: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    api_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Secrets:
        def get(key: str) -> str | None:
            value = env.get(key, "").strip()
            return value or None

        return cls(
            bot_token=get("SLACK_BOT_TOKEN"),
            app_token=get("SLACK_APP_TOKEN"),
            signing_secret=get("SLACK_SIGNING_SECRET"),
            api_url=get("SLACK_API_URL"),
        )

    def values(self) -> list[str]:
        """Every secret value that is set, for the log redaction filter."""
        return [v for v in (self.bot_token, self.app_token, self.signing_secret) if v]

    def require(self, *names: str) -> None:
        """Raise ConfigError naming every missing environment variable among `names`: a first start
        without tokens says all it needs at once, not one per try."""
        attrs = {
            "SLACK_BOT_TOKEN": "bot_token",
            "SLACK_APP_TOKEN": "app_token",
            "SLACK_SIGNING_SECRET": "signing_secret",
        }
        missing = [name for name in names if not getattr(self, attrs[name])]
        if missing:
            said = " and ".join(missing) + (" is" if len(missing) == 1 else " are")
            raise ConfigError(f"environment: {said} not set (secrets come only from the environment)")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything the bot is configured with. Built by `load_settings`, then passed down."""

    source: Path | None
    clusters: Mapping[str, ClusterConfig]
    channels: Channels
    roster: Mapping[str, tuple[str, ...]]
    database_url: str
    data_dir: Path
    timezone: str
    templates_dir: Path | None
    workers: int
    secrets: Secrets
    #: Node labels that name a node's group, tried in order (None: the built-in list).
    node_group_labels: tuple[str, ...] | None = None
    #: The order `plan draft` upgrades node groups in (the rest follow, by its heuristic).
    node_group_order: tuple[str, ...] = ()
    #: Restarts since the first snapshot that make the diff call it a regression.
    restart_threshold: int = 3
    #: Allowed maintenance windows and change freezes (no windows: any time outside freezes).
    windows: _windows.Policy = field(default_factory=_windows.Policy)
    #: Announcement offsets before a window opens, and the grace for ones due while the bot was down.
    announcement_offsets: tuple[timedelta, ...] = tuple(
        _announcements.parse_offset(o) for o in _announcements.DEFAULT_OFFSETS
    )
    announcement_grace: timedelta = _announcements.DEFAULT_GRACE
    #: The team's known-issue rules files, after the shipped ones: a rule with a shipped id replaces it.
    rules_files: tuple[Path, ...] = ()

    def rules_paths(self) -> list[Path]:
        return [BUILTIN_RULES, *self.rules_files]

    #: Slack's budget (`slack:` in the file): one `chat.update` per card per `edit_interval`,
    #: `updates_per_minute` edits for the whole workspace, `posts_per_second` per channel.
    slack_edit_interval: timedelta = timedelta(seconds=2)
    slack_updates_per_minute: int = 50
    slack_posts_per_second: float = 1.0
    #: The leader's lease (several replicas): how long it lasts unrenewed, and how often it is renewed.
    lease_duration: timedelta = timedelta(seconds=15)
    lease_renew: timedelta = timedelta(seconds=5)
    #: How long past its expiry another replica's lease (and what it reserved) is left alone: its
    #: last calls may still be inside Slack or the API server (`leader.takeover_margin_seconds`).
    lease_grace: timedelta = timedelta(seconds=5)
    #: The timeout of each Slack call the bot makes by itself (`slack.timeout_seconds`): a replica
    #: makes one only while its lease has at least this left (`bot.core.tenure`), so it must be
    #: well inside the lease; by default 6 s, less for a lease shorter than 15 s.
    slack_timeout: float = 6.0
    #: A thread post that keeps failing is set aside (a dead letter, `upgrade-bot outbox`) after
    #: this many failures in a row, or at its first failure this long after they began
    #: (`outbox.dead_after_failures`, `outbox.dead_after`; docs/delivery.md).
    outbox_dead_after_failures: int = 10
    outbox_dead_after: timedelta = timedelta(minutes=5)
    #: The long duties (jobs and watches, `duties:`): how often the live ones are scanned for work
    #: nobody drives, how often a driver beats, and how long without a beat before its driver is
    #: taken for gone (a crash, a deposed leader): a job is then interrupted, a watch taken over.
    duty_scan: timedelta = timedelta(seconds=5)
    duty_heartbeat: timedelta = timedelta(seconds=3)
    duty_stale_after: timedelta = timedelta(seconds=15)
    #: Who approves `/upgrade action …` outside a plan: every one of these roles (four eyes).
    action_approvers: tuple[str, ...] = ("primary", "shadow")
    #: Grafana annotations of each step's start and end (`grafana:`); None: off.
    grafana: GrafanaConfig | None = None
    #: GitHub access for the steps' pull requests (`github:`): a token or an App; None: off.
    github: GitHubAccess | None = field(default=None, repr=False)
    #: Pipeline hooks (`pipeline_hooks:`): each source's signing secret, by source name; empty: off.
    pipeline_hooks: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    #: Permanent, reviewed exceptions (`checks.ignore`): findings (or some of their objects) every
    #: check reports as accepted instead of failing — like Pluto's and kubent's ignore lists.
    check_ignores: tuple[Cover, ...] = ()
    #: IMG001 (`checks.images`): off unless `verify: true`, since it asks registries over the network.
    image_checks: ImageChecks = field(default_factory=ImageChecks)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def template_dirs(self) -> list[Path]:
        """Search path for templates: the team's override directory first, then the built-ins."""
        dirs = [self.templates_dir] if self.templates_dir else []
        return [*dirs, BUILTIN_TEMPLATES]


# ---------------------------------------------------------------------------------------------
# Loading


def resolve_config_path(explicit: str | None, env: Mapping[str, str], cwd: Path) -> Path:
    """`--config PATH`, else `$UPGRADE_BOT_CONFIG`, else `./upgrade-bot.yaml`."""
    if explicit:
        return Path(explicit).expanduser()
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return cwd / DEFAULT_CONFIG_NAME


def state_dir(env: Mapping[str, str]) -> Path:
    """Where the terminal keeps its snapshots without a configuration file: the XDG state home."""
    xdg = env.get("XDG_STATE_HOME", "").strip()
    # The XDG spec ignores a relative path; so does this.
    base = (
        Path(xdg)
        if xdg and Path(xdg).is_absolute()
        else Path(env.get("HOME") or Path.home()) / ".local/state"
    )
    return base / "upgrade-bot"


def cluster_name_of(context: str) -> str:
    """A cluster name (lower-case letters, digits, '.', '-', '_') for a kube context's name:
    `kind-kind` stays, `arn:aws:eks:eu-west-1:1234:cluster/prod` is `arn-aws-eks-eu-west-1-1234-cluster-prod`."""
    name = re.sub(r"[^a-z0-9_.-]+", "-", context.lower()).strip("-_.")
    return name or "default"


def kube_context_settings(
    *, kubeconfig: str, context: str, env: Mapping[str, str], data_dir: Path | None = None
) -> Settings:
    """Settings without a configuration file, for the read-only terminal commands: one cluster,
    the kube context kubectl would use (`kubeconfig` may be a colon-separated list), named after
    it; the store under the user's state directory. Nothing of Slack or a roster is set, so a
    command that needs one still names the missing key."""
    data_dir = data_dir or state_dir(env)
    v = YamlValidator("state directory (no configuration file)")
    check_data_dir(v, None, data_dir)
    v.raise_if_errors()
    name = cluster_name_of(context)
    return Settings(
        source=None,
        clusters={name: ClusterConfig(name=name, kubeconfig=Path(kubeconfig), context=context)},
        channels=Channels(),
        roster={},
        database_url=f"sqlite:///{data_dir / 'upgrade-bot.db'}",
        data_dir=data_dir,
        timezone="UTC",
        templates_dir=None,
        workers=8,
        secrets=Secrets.from_env(env),
    )


def load_settings(
    path: Path,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Read and validate the configuration file; raise ConfigError with a one-line reason."""
    env = os.environ if env is None else env
    try:
        text = read_document(path, what="configuration file")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: configuration file not found (pass --config PATH or set {CONFIG_ENV}; "
            f"`upgrade-bot init` writes an example to start from)"
        ) from None
    return parse_settings(text, source=path, env=env)


def parse_settings(text: str, *, source: Path | None, env: Mapping[str, str]) -> Settings:
    label = str(source) if source else "<config>"
    node = compose_document(text, label)
    if node is None:
        node = yaml.MappingNode("tag:yaml.org,2002:map", [])
    v = YamlValidator(label)
    top = v.mapping(node, "", keys_of(""), homes())
    base_dir = source.parent if source else Path.cwd()

    clusters = _clusters(v, top, base_dir)
    channels = _channels(v, top)
    roster = _roster(v, top)
    data_dir, database_url, timezone, templates_dir = _storage(v, top, base_dir)
    workers = v.integer(top.get("workers"), "workers", **int_bounds("workers")) or 8
    node_group_labels, node_group_order, restart_threshold = _snapshot(v, top)
    # An unknown `timezone` is said once, on its own line: the windows and freezes that default to
    # it are read in UTC meanwhile, not refused again on lines that name no zone.
    default_zone = timezone if _windows.is_zone(timezone) else "UTC"
    policy = _windows.Policy(
        windows=tuple(windows_section(v, top["windows"], default_zone)) if "windows" in top else (),
        freezes=tuple(freezes_section(v, top["freezes"], default_zone)) if "freezes" in top else (),
    )
    offsets, grace = _announcement_timing(v, top)
    rules_files = _rules_files(v, top, base_dir)
    slack_budget, slack_timeout_node = _slack_budget(v, top)
    lease_duration, lease_renew, lease_grace = _lease(v, top)
    slack_timeout = _slack_timeout(v, slack_timeout_node, lease_duration, lease_renew)
    outbox_limits = _outbox_limits(v, top)
    duty_timing = _duty_timing(v, top["duties"]) if "duties" in top else {}
    action_approvers = _action_approvers(v, top, roster)
    check_ignores, image_checks = _checks(v, top, rules_files, base_dir)
    grafana = grafana_section(v, top["grafana"], base_dir) if "grafana" in top else None
    pipeline_hooks = (
        pipeline_hooks_section(v, top["pipeline_hooks"], base_dir) if "pipeline_hooks" in top else {}
    )
    github = github_section(v, top["github"], base_dir, env) if "github" in top else None
    v.raise_if_errors()

    return Settings(
        source=source,
        clusters=clusters,
        channels=channels,
        roster=roster,
        database_url=database_url,
        data_dir=data_dir,
        timezone=timezone,
        templates_dir=templates_dir,
        workers=workers,
        secrets=Secrets.from_env(env),
        node_group_labels=node_group_labels,
        node_group_order=node_group_order,
        restart_threshold=restart_threshold,
        windows=policy,
        announcement_offsets=offsets,
        announcement_grace=grace,
        rules_files=tuple(rules_files),
        **slack_budget,  # type: ignore[arg-type]
        lease_duration=lease_duration,
        lease_renew=lease_renew,
        # By default a renewal interval: a call still inside Slack when its client gave up.
        lease_grace=lease_grace if lease_grace is not None else lease_renew,
        slack_timeout=slack_timeout,
        **outbox_limits,  # type: ignore[arg-type]
        **duty_timing,  # type: ignore[arg-type]
        action_approvers=action_approvers,
        check_ignores=tuple(check_ignores),
        image_checks=image_checks,
        grafana=grafana,
        pipeline_hooks=pipeline_hooks,
        github=github,
    )


_Top = Mapping[str, yaml.Node]


def _clusters(v: YamlValidator, top: _Top, base_dir: Path) -> dict[str, ClusterConfig]:
    clusters: dict[str, ClusterConfig] = {}
    if "clusters" in top:
        for name, cnode in v.items(top["clusters"], "clusters", keys_of("clusters.*"), "cluster").items():
            clusters[name] = cluster_section(v, name, cnode, base_dir)
    return clusters


def _channels(v: YamlValidator, top: _Top) -> Channels:
    channels = Channels()
    if "channels" in top:
        ch = v.mapping(top["channels"], "channels", keys_of("channels"))
        channels = Channels(
            announcements=v.slack_id(ch["announcements"], "channels.announcements", CHANNEL_ID, "channel")
            if "announcements" in ch
            else None,
            operations=v.slack_id(ch["operations"], "channels.operations", CHANNEL_ID, "channel")
            if "operations" in ch
            else None,
        )
    return channels


#: The roles the bot's defaults and drafted plans name (`actions.approvers`, escalation, `plan draft`).
KNOWN_ROLES = ("primary", "shadow", "coordinator")


def _roster(v: YamlValidator, top: _Top) -> dict[str, tuple[str, ...]]:
    roster: dict[str, tuple[str, ...]] = {}
    if "roster" in top:
        fields = v.mapping(top["roster"], "roster", None)
        for role, rnode in fields.items():
            if not NAME_PATTERN.match(role):
                v.error(rnode, f"roster.{role}", "role names are lower-case letters, digits, - and _")
            # A team's own roles (mesh, dba) are welcome; one a letter or two from a role the bot
            # knows is a typo that would leave that role empty, its gates and escalations with it.
            near = difflib.get_close_matches(role, KNOWN_ROLES, n=1, cutoff=0.75)
            if role not in KNOWN_ROLES and near and near[0] not in fields:
                v.error(rnode, f"roster.{role}", f"not a role the bot knows; did you mean `{near[0]}`?")
            roster[role] = v.people(rnode, f"roster.{role}")
    return roster


def _storage(v: YamlValidator, top: _Top, base_dir: Path) -> tuple[Path, str, str, Path | None]:
    """`data_dir`, `database_url`, `timezone` and `templates_dir`."""
    data_dir = v.path(top.get("data_dir"), "data_dir", base_dir) or (base_dir / ".data")
    check_data_dir(v, top.get("data_dir"), data_dir)
    database_url = (
        v.string(top.get("database_url"), "database_url") or f"sqlite:///{data_dir / 'upgrade-bot.db'}"
    )
    if "database_url" in top:
        check_database_url(v, top["database_url"], database_url)
    timezone = v.string(top.get("timezone"), "timezone") or "UTC"
    if "timezone" in top and not _windows.is_zone(timezone):
        v.error(top["timezone"], "timezone", _windows.unknown_zone(timezone))
    templates_dir = v.path(top.get("templates_dir"), "templates_dir", base_dir)
    if templates_dir is not None and not templates_dir.is_dir():
        v.error(top["templates_dir"], "templates_dir", f"{templates_dir} is not a directory")
    return data_dir, database_url, timezone, templates_dir


def _snapshot(v: YamlValidator, top: _Top) -> tuple[tuple[str, ...] | None, tuple[str, ...], int]:
    """`snapshot:`: the node-group labels, the groups' order and the restart threshold."""
    node_group_labels: tuple[str, ...] | None = None
    node_group_order: tuple[str, ...] = ()
    restart_threshold = 3
    if "snapshot" in top:
        snap = v.mapping(top["snapshot"], "snapshot", keys_of("snapshot"))
        if "node_group_labels" in snap:
            node_group_labels = v.strings(snap["node_group_labels"], "snapshot.node_group_labels")
        if "node_group_order" in snap:
            node_group_order = v.strings(snap["node_group_order"], "snapshot.node_group_order") or ()
        threshold = v.integer(
            snap.get("restart_threshold"),
            "snapshot.restart_threshold",
            **int_bounds("snapshot.restart_threshold"),
        )
        restart_threshold = threshold if threshold is not None else 3
    return node_group_labels, node_group_order, restart_threshold


def _announcement_timing(v: YamlValidator, top: _Top) -> tuple[tuple[timedelta, ...], timedelta]:
    offsets: tuple[timedelta, ...] = tuple(
        _announcements.parse_offset(o) for o in _announcements.DEFAULT_OFFSETS
    )
    grace = _announcements.DEFAULT_GRACE
    if "announcements" in top:
        ann = v.mapping(top["announcements"], "announcements", keys_of("announcements"))
        if "offsets" in ann:
            parsed = [
                parse_node(v, n, "announcements.offsets", _announcements.parse_offset)
                for n in list_items(v, ann["offsets"], "announcements.offsets")
            ]
            offsets = tuple(o for o in parsed if o is not None)
        if "grace" in ann:
            chosen = parse_node(v, ann["grace"], "announcements.grace", parse_duration)
            grace = grace if chosen is None else chosen
    return offsets, grace


def _rules_files(v: YamlValidator, top: _Top, base_dir: Path) -> list[Path]:
    rules_files: list[Path] = []
    if "rules_files" in top:
        for i, item in enumerate(list_items(v, top["rules_files"], "rules_files")):
            path = v.path(item, f"rules_files[{i}]", base_dir)
            if path is not None and not path.is_file():
                v.error(item, f"rules_files[{i}]", f"{path} is not a file")
            elif path is not None:
                rules_files.append(path)
    return rules_files


def _slack_budget(v: YamlValidator, top: _Top) -> tuple[dict[str, object], yaml.Node | None]:
    """`slack:`'s budget as Settings fields, and the `timeout_seconds` node, read once the lease is."""
    slack_budget: dict[str, object] = {}
    slack_timeout_node = None
    if "slack" in top:
        sl = v.mapping(top["slack"], "slack", keys_of("slack"))
        slack_timeout_node = sl.get("timeout_seconds")
        if "edit_interval" in sl:
            interval = parse_node(v, sl["edit_interval"], "slack.edit_interval", parse_duration)
            if interval is not None:
                slack_budget["slack_edit_interval"] = interval
        if "updates_per_minute" in sl:
            per_minute = v.integer(
                sl["updates_per_minute"], "slack.updates_per_minute", **int_bounds("slack.updates_per_minute")
            )
            if per_minute is not None:
                slack_budget["slack_updates_per_minute"] = per_minute
        if "posts_per_second" in sl:
            per_second = v.integer(
                sl["posts_per_second"], "slack.posts_per_second", **int_bounds("slack.posts_per_second")
            )
            if per_second is not None:
                slack_budget["slack_posts_per_second"] = float(per_second)
    return slack_budget, slack_timeout_node


def _lease(v: YamlValidator, top: _Top) -> tuple[timedelta, timedelta, timedelta | None]:
    """`leader:`: the lease's duration, its renewal interval and the takeover margin (None: unset)."""
    lease_duration, lease_renew = timedelta(seconds=15), timedelta(seconds=5)
    lease_grace: timedelta | None = None
    if "leader" in top:
        lead = v.mapping(top["leader"], "leader", keys_of("leader"))
        lease_s = v.number(
            lead.get("lease_seconds"), "leader.lease_seconds", **bounds("leader.lease_seconds")
        )
        renew_s = v.number(
            lead.get("renew_seconds"), "leader.renew_seconds", **bounds("leader.renew_seconds")
        )
        margin_s = v.number(
            lead.get("takeover_margin_seconds"),
            "leader.takeover_margin_seconds",
            **bounds("leader.takeover_margin_seconds"),
        )
        lease_duration = timedelta(seconds=lease_s) if lease_s is not None else lease_duration
        lease_renew = timedelta(seconds=renew_s) if renew_s is not None else lease_renew
        lease_grace = timedelta(seconds=margin_s) if margin_s is not None else None
        if lease_renew * 2 > lease_duration:
            # Two renewals must fit in a lease: one lost to a slow database must not cost it.
            v.error(top["leader"], "leader.renew_seconds", "must be at most half of leader.lease_seconds")
    return lease_duration, lease_renew, lease_grace


def _slack_timeout(
    v: YamlValidator, slack_timeout_node: yaml.Node | None, lease_duration: timedelta, lease_renew: timedelta
) -> float:
    # What is left of a lease between two renewals: every call outside must fit in it.
    room = (lease_duration - lease_renew).total_seconds()
    slack_timeout: float = min(6.0, round(0.6 * room, 2))
    if slack_timeout_node is not None:
        chosen_timeout = v.number(
            slack_timeout_node, "slack.timeout_seconds", **bounds("slack.timeout_seconds")
        )
        if chosen_timeout is not None:
            if chosen_timeout >= room:
                v.error(
                    slack_timeout_node,
                    "slack.timeout_seconds",
                    "must be shorter than leader.lease_seconds - leader.renew_seconds "
                    f"({room:g}s): a replica sends only while its lease outlasts the call",
                )
            slack_timeout = chosen_timeout
    return slack_timeout


def _outbox_limits(v: YamlValidator, top: _Top) -> dict[str, object]:
    outbox_limits: dict[str, object] = {}
    if "outbox" in top:
        ob = v.mapping(top["outbox"], "outbox", keys_of("outbox"))
        if "dead_after_failures" in ob:
            failures = v.integer(
                ob["dead_after_failures"],
                "outbox.dead_after_failures",
                **int_bounds("outbox.dead_after_failures"),
            )
            if failures is not None:
                outbox_limits["outbox_dead_after_failures"] = failures
        if "dead_after" in ob:
            after = parse_node(v, ob["dead_after"], "outbox.dead_after", parse_duration)
            if after is not None:
                if after < timedelta(seconds=10):
                    v.error(ob["dead_after"], "outbox.dead_after", "must be at least 10s")
                outbox_limits["outbox_dead_after"] = after
    return outbox_limits


def _action_approvers(v: YamlValidator, top: _Top, roster: Mapping[str, object]) -> tuple[str, ...]:
    action_approvers: tuple[str, ...] = ("primary", "shadow")
    if "actions" in top:
        acts = v.mapping(top["actions"], "actions", keys_of("actions"))
        if "approvers" in acts:
            approvers = v.strings(acts["approvers"], "actions.approvers")
            if approvers is not None:
                if len(set(approvers)) < 2:
                    # A cluster mutation outside a plan is still approved by two people.
                    v.error(acts["approvers"], "actions.approvers", "name at least two roles (four eyes)")
                unknown = sorted(set(approvers) - set(roster))
                if roster and unknown:
                    v.error(
                        acts["approvers"], "actions.approvers", f"not in the roster: {', '.join(unknown)}"
                    )
                action_approvers = tuple(approvers)
    return action_approvers


def _checks(
    v: YamlValidator, top: _Top, rules_files: Sequence[Path], base_dir: Path
) -> tuple[list[Cover], ImageChecks]:
    """`checks:`: the ignore list (`checks.ignore`) and the image checks (`checks.images`)."""
    check_ignores: list[Cover] = []
    image_checks = ImageChecks()
    if "checks" in top:
        chk = v.mapping(top["checks"], "checks", keys_of("checks"))
        if "ignore" in chk:
            check_ignores = ignores_section(v, chk["ignore"], rules_files)
        if "images" in chk:
            image_checks = images_section(v, chk["images"], base_dir)
    return check_ignores, image_checks


def _duty_timing(v: YamlValidator, node: yaml.Node) -> dict[str, timedelta]:
    """`duties:`: the scan, heartbeat and stale-after intervals of the jobs and watches."""
    m = v.mapping(node, "duties", keys_of("duties"))
    timing: dict[str, timedelta] = {}
    for key, field_name in (
        ("scan_seconds", "duty_scan"),
        ("heartbeat_seconds", "duty_heartbeat"),
        ("stale_after_seconds", "duty_stale_after"),
    ):
        if key in m:
            seconds = v.number(m[key], f"duties.{key}", **bounds(f"duties.{key}"))
            if seconds is not None:
                timing[field_name] = timedelta(seconds=seconds)
    heartbeat = timing.get("duty_heartbeat", Settings.duty_heartbeat)
    stale_after = timing.get("duty_stale_after", Settings.duty_stale_after)
    if heartbeat * 2 > stale_after:
        # Two beats must fit before a driver is taken for gone: one beat late on a busy database
        # must not interrupt a job that is still driven.
        v.error(
            m.get("heartbeat_seconds", m.get("stale_after_seconds", node)),
            "duties.heartbeat_seconds",
            "must be at most half of duties.stale_after_seconds",
        )
    return timing
