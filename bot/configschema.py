"""The configuration file's keys in one table: what the validator accepts, its JSON Schema, its reference.

`bot.settings.parse_settings` validates `upgrade-bot.yaml` by walking its YAML nodes, so every
problem names the file, the line and the dotted key, and it checks what a schema cannot say (a
path that exists, a time zone the system knows, a lease twice its renewal). The keys it accepts
at each level and the limits of its numbers come from `KEYS` below (`keys_of`, `bounds`); the
JSON Schema (`schemas/upgrade-bot.schema.json`, for editors and for the Helm chart's `config:`)
and the configuration reference (`docs/reference/configuration.md`) are generated from the same
table by `scripts/gen_docs.py`. A key added to the table is accepted, published and documented
at once; a key the validator reads without the table is refused as unknown by the validator
itself, so the two cannot diverge.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.core.durations import GRAMMAR
from bot.core.people import CHANNEL_ID, GROUP_ID, USER_ID
from bot.core.validation import NAME_PATTERN, Home

SCHEMA_ID = "https://upgrade-bot.example/upgrade-bot.schema.json"

#: Shapes that a YAML node's text must have (the validator parses the same text).
EKS_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
AKS_SUBSCRIPTION = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
AKS_GROUP = re.compile(r"^[-\w._()]{1,90}$")
AKS_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
GKE_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GKE_LOCATION = re.compile(r"^[a-z]+-[a-z]+\d(-[a-z])?$")
GKE_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
FINDING_ID = re.compile(r"^[A-Z][A-Z0-9_-]{1,31}$")
TIME_OF_DAY = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Kubernetes' label syntax (an optional DNS prefix, a name of at most 63 characters).
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _bare(pattern: re.Pattern[str]) -> str:
    return pattern.pattern.removeprefix("^").removesuffix("$")


_DURATION = {
    "oneOf": [
        {"type": "string", "pattern": f"^(0|{_bare(GRAMMAR)})$", "minLength": 1},
        {"const": 0},
    ],
    "description": "a duration like 90s, 30m, 1h30m, 2d (0: none)",
}
_OFFSET = {
    "oneOf": [
        {"type": "string", "pattern": f"^(0|[-+]0|start|t|t-0|t?-({_bare(GRAMMAR)}))$"},
        {"const": 0},
    ],
}
_STRING = {"type": "string", "minLength": 1}
_STRINGS = {"type": "array", "items": _STRING}
_PERSON = {"type": "string", "pattern": f"^({_bare(USER_ID)}|{_bare(GROUP_ID)})$"}
_ZONE = {**_STRING, "description": "an IANA time zone, like Europe/Berlin"}
#: Another API endpoint than the cloud's own (a VPC endpoint, a test double).
_ENDPOINT = r"^https?://[^\s/]+"


@dataclass(frozen=True, kw_only=True)
class Key:
    """One key of the file: what it means and its default (for the reference), and its shape.

    A leaf has a `schema` (a JSON Schema fragment). A mapping with fixed keys has `keys`; a mapping
    whose keys are names the operator chooses (clusters, roles) has `names`; a list of mappings
    has `items`. `extra` adds constraints the shape alone cannot say (one of two keys, say)."""

    doc: str
    default: str = ""
    schema: Mapping[str, Any] = field(default_factory=dict)
    keys: Mapping[str, Key] | None = None
    required: tuple[str, ...] = ()
    names: Key | None = None
    name_pattern: str = ""
    name_doc: str = "NAME"
    items: Key | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _number(doc: str, *, default: str, low: float, high: float) -> Key:
    """A number within inclusive limits (the validator reads them back with `bounds`)."""
    return Key(doc=doc, default=default, schema={"type": "number", "minimum": low, "maximum": high})


def _whole(doc: str, *, default: str, low: int, high: int) -> Key:
    """A whole number within inclusive limits (`int_bounds`)."""
    return Key(doc=doc, default=default, schema={"type": "integer", "minimum": low, "maximum": high})


def _shaped(pattern: re.Pattern[str] | str, doc: str, *, default: str = "") -> Key:
    """A string the regular expression `pattern` matches (the validator matches the same one)."""
    text = pattern if isinstance(pattern, str) else pattern.pattern
    return Key(doc=doc, default=default, schema={"type": "string", "pattern": text})


def _text(doc: str, *, default: str = "") -> Key:
    """A non-empty string: a name, a path, a URL the validator reads further."""
    return Key(doc=doc, default=default, schema=_STRING)


def _texts(doc: str, *, default: str = "") -> Key:
    """A list of non-empty strings."""
    return Key(doc=doc, default=default, schema=_STRINGS)


def _duration(doc: str, *, default: str) -> Key:
    """A duration as people write it (`90s`, `1h30m`; `0`: none)."""
    return Key(doc=doc, default=default, schema=_DURATION)


def _cloud(doc: str, ids: Mapping[str, Key], *, endpoint: str, endpoint_default: str) -> Key:
    """A cloud's cluster (`provider: {eks|aks|gke: …}`): the keys that name it, all required, and
    `endpoint_url`, another API endpoint than the cloud's own (`endpoint` says which)."""
    url = _shaped(_ENDPOINT, endpoint, default=endpoint_default)
    return Key(doc=doc, keys={**ids, "endpoint_url": url}, required=tuple(ids))


_EKS = _cloud(
    "an EKS cluster, for the EKS checks of `check` (the `aws` extra; credentials from the "
    "standard chain: environment, IRSA / Pod Identity)",
    {
        "name": _shaped(EKS_NAME, "the EKS cluster's name"),
        "region": _shaped(REGION, "its AWS region, like `eu-west-1`"),
    },
    endpoint="another EKS API endpoint (a VPC endpoint, a test double)",
    endpoint_default="AWS's own",
)
_AKS = _cloud(
    "an AKS managed cluster, for the AKS actions (the `aks` extra; credentials from "
    "azure-identity's default chain: environment, workload identity, managed identity)",
    {
        "subscription_id": _shaped(AKS_SUBSCRIPTION, "its Azure subscription id (a GUID)"),
        "resource_group": _shaped(AKS_GROUP, "its resource group"),
        "name": _shaped(AKS_NAME, "the managed cluster's name"),
    },
    endpoint="another ARM endpoint (a test double: its token is a static one)",
    endpoint_default="Azure's own (https://management.azure.com)",
)
_GKE = _cloud(
    "a GKE cluster, for the GKE actions (the `gke` extra; credentials from google-auth's default "
    "chain: Workload Identity, the metadata server, GOOGLE_APPLICATION_CREDENTIALS)",
    {
        "project": _shaped(GKE_PROJECT, "its Google Cloud project id"),
        "location": _shaped(GKE_LOCATION, "its location: a region (europe-west1) or a zone (europe-west1-b)"),
        "name": _shaped(GKE_NAME, "the cluster's name"),
    },
    endpoint="another GKE API endpoint (a test double: no credentials are sent)",
    endpoint_default="Google's own (https://container.googleapis.com)",
)


def _signal(doc: str) -> Key:
    return Key(
        doc=doc,
        keys={
            "url": _text("its base URL (http or https)"),
            "bearer_token_file": _text(
                "a file holding the bearer token (read at every request)", default="none"
            ),
            "ca_file": _text("the CA bundle that signed its certificate", default="the system's"),
        },
        required=("url",),
    )


_CLUSTER = Key(
    doc="a cluster the bot manages, by the name commands use (`--cluster NAME`)",
    keys={
        "kubeconfig": _text(
            "kubeconfig path (relative to the configuration file); required unless `in_cluster`"
        ),
        "context": _text("context in that kubeconfig", default="its current context"),
        "in_cluster": Key(
            doc="`true` when the bot runs inside that cluster (its service account)",
            default="`false`",
            schema={"type": "boolean"},
        ),
        "request_timeout": _number(
            "seconds to connect before the API server counts as unreachable; once connected, an answer is "
            "awaited for at least 10 s (one object) or 60 s (a page of a list, a write), longer when this is "
            "longer",
            default="`10`",
            low=0.5,
            high=300,
        ),
        "provider": Key(
            doc="the cloud the cluster runs on (one key: `eks`, `aks` or `gke`)",
            keys={"eks": _EKS, "aks": _AKS, "gke": _GKE},
            extra={"minProperties": 1, "maxProperties": 1},
        ),
        "alertmanager": _signal("the cluster's Alertmanager (API v2), for the evidence gate's `alerts`"),
        "prometheus": _signal("the cluster's Prometheus (HTTP API), for the evidence gate's `analysis`"),
        "alert_matchers": Key(
            doc='matchers that scope Alertmanager\'s alerts to this cluster, like `cluster="prod"`',
            default="none: every alert counts",
            schema=_STRINGS,
        ),
        "scenario": Key(
            doc="the simulated cluster that stands in for it in `rehearse-fleet`: a built-in scenario "
            "(`upgrade-bot sim scenarios`) or a scenario file, relative to the configuration file",
            default="`small`",
            schema={"type": "string", "minLength": 1},
        ),
        "labels": Key(
            doc="labels of the cluster (`env: lab`), for a fleet stage's `selector`: the stage takes every "
            "configured cluster whose labels include all of the selector's",
            default="none",
            schema={
                "type": "object",
                "propertyNames": {"pattern": LABEL_KEY.pattern},
                "additionalProperties": {
                    "type": ["string", "number", "boolean"],
                    "pattern": LABEL_VALUE.pattern,
                },
            },
        ),
    },
    # The validator's rule: a kubeconfig, or in_cluster: true, and never both.
    extra={
        "oneOf": [
            {
                "required": ["kubeconfig"],
                "not": {"properties": {"in_cluster": {"const": True}}, "required": ["in_cluster"]},
            },
            {
                "required": ["in_cluster"],
                "properties": {"in_cluster": {"const": True}},
                "not": {"anyOf": [{"required": ["kubeconfig"]}, {"required": ["context"]}]},
            },
        ]
    },
)

_WINDOW = Key(
    doc="an allowed maintenance window",
    keys={
        "days": Key(
            doc="weekdays: `mon-fri`, `sat,sun` or a list like `[mon, wed]`",
            schema={"oneOf": [_STRING, {"type": "array", "minItems": 1, "items": _STRING}]},
        ),
        "start": _shaped(TIME_OF_DAY, '24-hour time, quoted: `"14:00"`'),
        "end": _shaped(TIME_OF_DAY, "24-hour time; a window ending before it starts crosses midnight"),
        "zone": Key(doc="its time zone", default="`timezone`", schema=_ZONE),
    },
    required=("days", "start", "end"),
)

_FREEZE = Key(
    doc="a change freeze, whole days",
    keys={
        "from": _shaped(ISO_DATE, "its first day, `2026-12-25`"),
        "to": _shaped(ISO_DATE, "its last day (inclusive)"),
        "reason": _text("shown when scheduling is refused"),
        "zone": Key(doc="its time zone", default="`timezone`", schema=_ZONE),
    },
    required=("from", "to", "reason"),
)

_IGNORE = Key(
    doc="a permanent, reviewed exception, like Pluto's and kubent's ignore lists: every check "
    "(`/upgrade check`, `upgrade-bot check`, a plan's `check` step) lists what it ignores in its "
    "own section and does not fail on it",
    keys={
        "finding": _shaped(FINDING_ID, "the finding's id, like `API001`"),
        "objects": _texts(
            "only these objects, as findings name them (`namespace/name`, or `Kind namespace/name`)",
            default="the whole finding",
        ),
        "reason": _shaped(r"\S", "why it is accepted: what the next reviewer reads"),
    },
    required=("finding", "reason"),
)

_IMAGES = Key(
    doc="IMG001: ask each image's registry whether the images the upgrade rolls out exist (the "
    "target kube-proxy and EKS add-ons, the `--manifests`), with the OCI distribution API",
    keys={
        "verify": Key(
            doc="run IMG001 in every check (it asks the registries over the network)",
            default="`false`",
            schema={"type": "boolean"},
        ),
        "docker_config": _text(
            "a docker `config.json` whose `auths` hold the registries' credentials (relative to "
            "the configuration file; credential helpers are not run)",
            default="none: anonymous",
        ),
        "insecure": _texts("registry hosts asked over plain HTTP (loopback ones always are)", default="none"),
        "endpoints": Key(
            doc="a registry host asked at another base URL (a mirror, or the simulator's `/v2` facade); "
            "`*` for every other host",
            default="none",
            names=_text("the base URL, like `http://127.0.0.1:5000`"),
            name_doc="HOST",
        ),
    },
)

#: Every key of `upgrade-bot.yaml`.
KEYS: Mapping[str, Key] = {
    "clusters": Key(doc="the clusters, by name", names=_CLUSTER, name_pattern=NAME_PATTERN.pattern),
    "channels": Key(
        doc="Slack channel IDs (not names)",
        keys={
            "announcements": _shaped(CHANNEL_ID, "channel ID for announcements (`C…`)"),
            "operations": _shaped(CHANNEL_ID, "channel ID for run cards and threads"),
        },
    ),
    "roster": Key(
        doc="the default roster; plans may override it",
        names=Key(
            doc="Slack user IDs (`U…`/`W…`) or user-group IDs (`S…`) holding the role: one, or a list",
            schema={"oneOf": [_PERSON, {"type": "array", "minItems": 1, "items": _PERSON}]},
        ),
        name_pattern=NAME_PATTERN.pattern,
        name_doc="ROLE",
    ),
    "data_dir": _text(
        "where the SQLite file lives (relative to the configuration file)", default="`./.data`"
    ),
    "database_url": _shaped(
        r"^(sqlite|postgresql)(\+[A-Za-z0-9_]+)?://",
        "SQLAlchemy URL; `postgresql://…` for several replicas",
        default="SQLite in `data_dir`",
    ),
    "timezone": Key(
        doc="the team's IANA time zone, for windows and announcements", default="`UTC`", schema=_ZONE
    ),
    "templates_dir": _text("files here override `templates/` by name"),
    "workers": _whole("the bot's worker threads for slow commands", default="`8`", low=1, high=64),
    "snapshot": Key(
        doc="how snapshots read the cluster",
        keys={
            "node_group_labels": _texts(
                "node labels naming a node's group, tried in order",
                default="EKS, eksctl, GKE, AKS, Karpenter labels",
            ),
            "node_group_order": _texts(
                "the order `plan draft` upgrades node groups in (groups not named follow, by its heuristic); "
                "`plan load` and `plan validate --check-cluster` warn of a plan that rolls them out of it",
                default="none (the heuristic)",
            ),
            "restart_threshold": _whole(
                "restarts since the first snapshot that the diff calls a regression",
                default="`3`",
                low=1,
                high=1000,
            ),
        },
    ),
    "windows": Key(
        doc="allowed maintenance windows; scheduling outside them is refused with the next slots",
        default="any time",
        items=_WINDOW,
    ),
    "freezes": Key(doc="change freezes", default="none", items=_FREEZE),
    "announcements": Key(
        doc="when announcements go out",
        keys={
            "offsets": Key(
                doc="reminders before a window opens (`-24h`, `-1h30m`; elapsed time across DST changes); `0` is the start",
                default="`[-24h, -1h, 0]`",
                schema={"type": "array", "items": _OFFSET},
            ),
            "grace": _duration(
                "an announcement due while the bot was down is sent marked delayed within this, skipped after",
                default="`30m`",
            ),
        },
    ),
    "rules_files": _texts(
        "the team's known-issue rules files (relative to the configuration file), after the shipped "
        "ones; a rule with a shipped id replaces it",
        default="none",
    ),
    "slack": Key(
        doc="the bot's budget of Slack calls",
        keys={
            "edit_interval": _duration(
                "at most one edit of each card per this interval (the last state is always sent)",
                default="`2s`",
            ),
            "updates_per_minute": _whole(
                "`chat.update` budget for the whole workspace (Slack's Tier 3)",
                default="`50`",
                low=1,
                high=1000,
            ),
            "posts_per_second": _whole(
                "posts per channel (`chat.postMessage`)", default="`1`", low=1, high=20
            ),
            "timeout_seconds": _number(
                "the timeout of each Slack call; shorter than `leader.lease_seconds` − "
                "`leader.renew_seconds`, since a replica sends only while its lease outlasts the call",
                default="min(6, 0.6 × (lease − renew))",
                low=0.5,
                high=120,
            ),
        },
    ),
    "outbox": Key(
        doc="thread posts Slack keeps failing (5xx, no answer): when they are set aside",
        keys={
            "dead_after_failures": _whole(
                "set aside after this many failures in a row", default="`10`", low=1, high=1000
            ),
            "dead_after": _duration(
                "or at the first failure this long after they began (at least 10s)", default="`5m`"
            ),
        },
    ),
    "leader": Key(
        doc="the leader's lease, when several replicas share a PostgreSQL store",
        keys={
            "lease_seconds": _number(
                "how long the lease lasts unrenewed: the failover time after a crash",
                default="`15`",
                low=1,
                high=600,
            ),
            "renew_seconds": _number(
                "how often the lease is renewed, or tried by a follower (at most half the lease)",
                default="`5`",
                low=0.1,
                high=300,
            ),
            "takeover_margin_seconds": _number(
                "how long past another replica's expired lease before its claims are taken over",
                default="`renew_seconds`",
                low=0,
                high=600,
            ),
        },
    ),
    "duties": Key(
        doc="the long duties (cluster jobs and watches): how a driver that is gone is noticed",
        keys={
            "scan_seconds": _number(
                "how often the live jobs and watches are scanned for work nobody drives",
                default="`5`",
                low=0.1,
                high=300,
            ),
            "heartbeat_seconds": _number(
                "how often a job's or a watch's driver beats (at most half of `stale_after_seconds`)",
                default="`3`",
                low=0.1,
                high=300,
            ),
            "stale_after_seconds": _number(
                "how long without a beat before a driver is taken for gone (a crash, a deposed "
                "leader): its job is interrupted, its watch taken over",
                default="`15`",
                low=1,
                high=3600,
            ),
        },
    ),
    "actions": Key(
        doc="cluster actions outside a plan",
        keys={
            "approvers": Key(
                doc="the roles (at least two) that approve `/upgrade action …` — and that, two people "
                "together, confirm a waiver of a Required finding",
                default="`[primary, shadow]`",
                schema={"type": "array", "minItems": 2, "uniqueItems": True, "items": _STRING},
            ),
        },
    ),
    "grafana": Key(
        doc="Grafana annotations for each step's start and end (an optional side channel: off when "
        "absent; a Grafana that is slow or down never holds a run)",
        default="off",
        keys={
            "url": _text("Grafana's base URL (http or https); annotations go to `/api/annotations`"),
            "token_file": _text(
                "a file holding a service account token (sent as `Authorization: Bearer`)", default="none"
            ),
            "tags": _texts(
                "tags added to every annotation, after `upgrade-bot`, the cluster, the run and the step",
                default="none",
            ),
            "timeout": _duration("how long one request may take", default="`5s`"),
        },
        required=("url",),
    ),
    "github": Key(
        doc="GitHub access for the pull requests plan steps name (`pr:`); needs "
        "the `github` extra. A token comes from `token_file`, else the `GITHUB_TOKEN` environment variable; "
        "or a GitHub App: `app_id`, `installation_id` and `private_key_file` (else `GITHUB_APP_ID`, "
        "`GITHUB_APP_INSTALLATION_ID` and `GITHUB_APP_PRIVATE_KEY_FILE`)",
        default="off",
        keys={
            "api_url": _text(
                "the REST API's base URL (GitHub Enterprise: `https://HOST/api/v3`)",
                default="`https://api.github.com`",
            ),
            "token_file": _text(
                "a file holding a token that may read the repositories' pull requests, checks and statuses",
                default="`GITHUB_TOKEN` from the environment",
            ),
            "app_id": Key(
                doc="a GitHub App's id, instead of a token (with `installation_id` and `private_key_file`; "
                "the App needs read access to pull requests, checks and commit statuses)",
                default="`GITHUB_APP_ID` from the environment",
                schema={"type": "integer", "minimum": 1},
            ),
            "installation_id": Key(
                doc="the App's installation on the repositories' organisation",
                default="`GITHUB_APP_INSTALLATION_ID` from the environment",
                schema={"type": "integer", "minimum": 1},
            ),
            "private_key_file": _text(
                "a file holding the App's private key (PEM, as GitHub downloads it); never logged",
                default="`GITHUB_APP_PRIVATE_KEY_FILE` from the environment",
            ),
        },
    ),
    "pipeline_hooks": Key(
        doc="who may report builds on `POST /hooks/pipeline`, the evidence of the plan steps that name a "
        "`pipeline:`: one secret per source (a CI system, a team); a request names its source in "
        "`X-Upgrade-Bot-Source` and is signed with its secret (`X-Upgrade-Bot-Signature`: `v1=` and the "
        "hex HMAC-SHA256 of `v1:{timestamp}:{raw body}`, the timestamp in `X-Upgrade-Bot-Timestamp`)",
        default="off",
        names=Key(
            doc="one source",
            keys={
                "secret_file": _text(
                    "a file holding the source's signing secret (at least 32 characters); "
                    "relative to the configuration file"
                ),
            },
            required=("secret_file",),
        ),
        name_pattern=NAME_PATTERN.pattern,
        name_doc="SOURCE",
    ),
    "checks": Key(
        doc="the pre-flight checks",
        keys={
            "ignore": Key(doc="permanent exceptions", default="none", items=_IGNORE),
            "images": _IMAGES,
        },
    ),
}


def _at(path: str) -> Key:
    """The key at a dotted path: `snapshot`, `clusters.*.provider.eks`, `windows[]`, `checks.ignore[]`."""
    key = Key(doc="upgrade-bot.yaml", keys=KEYS)
    for part in path.split(".") if path else []:
        if part == "*":
            if key.names is None:
                raise KeyError(f"{path}: not a mapping of names")
            key = key.names
            continue
        name, listed = part.removesuffix("[]"), part.endswith("[]")
        if key.keys is None or name not in key.keys:
            raise KeyError(f"{path}: no key {name!r}")
        key = key.keys[name]
        if listed:
            if key.items is None:
                raise KeyError(f"{path}: {name} is not a list of mappings")
            key = key.items
    return key


#: What one entry of a top-level list, or of a mapping of named entries, is called in messages.
_ENTRY = {"clusters": "cluster", "pipeline_hooks": "source", "windows": "window", "freezes": "freeze"}


def homes() -> dict[str, Home]:
    """The top-level sections by the keys under them (under each entry, for a list or a mapping of
    names): one of those keys written at the top level was meant under its section."""
    out: dict[str, Home] = {}
    for name, key in KEYS.items():
        entry = key.items or key.names
        if key.keys is not None:
            out[name] = Home(frozenset(key.keys))
        elif entry is not None and entry.keys is not None:
            out[name] = Home(frozenset(entry.keys), entry=_ENTRY.get(name, "entry"))
    return out


def keys_of(path: str) -> set[str]:
    """The keys the mapping at `path` may hold (the validator refuses any other)."""
    keys = _at(path).keys
    if keys is None:
        raise KeyError(f"{path}: not a mapping with fixed keys")
    return set(keys)


def bounds(path: str) -> dict[str, float]:
    """The inclusive limits of the number at `path`, as the validator's `low=`/`high=`."""
    schema = _at(path).schema
    return {"low": schema["minimum"], "high": schema["maximum"]}


def int_bounds(path: str) -> dict[str, int]:
    """The inclusive limits of the whole number at `path`."""
    schema = _at(path).schema
    if schema.get("type") != "integer":
        raise KeyError(f"{path}: not a whole number")
    return {"low": int(schema["minimum"]), "high": int(schema["maximum"])}


def _schema_of(key: Key) -> dict[str, Any]:
    out: dict[str, Any] = {"description": key.doc}
    if key.keys is not None:
        out |= {
            "type": "object",
            "additionalProperties": False,
            "properties": {name: _schema_of(child) for name, child in key.keys.items()},
        }
        if key.required:
            out["required"] = list(key.required)
    elif key.names is not None:
        out |= {
            "type": "object",
            "propertyNames": {"pattern": key.name_pattern},
            "additionalProperties": _schema_of(key.names),
        }
    elif key.items is not None:
        out |= {"type": "array", "items": _schema_of(key.items)}
    else:
        out |= {k: v for k, v in key.schema.items() if k != "description"}
        if "description" in key.schema:
            out["description"] = f"{key.doc} ({key.schema['description']})"
    if key.default:
        out["default"] = key.default.strip("`")
    return out | dict(key.extra)


def settings_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07: Helm's `values.schema.json` and editors read it) of the file."""
    body = _schema_of(Key(doc="", keys=KEYS))
    body.pop("description")
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": SCHEMA_ID,
        "title": "upgrade-bot configuration (upgrade-bot.yaml)",
        "description": "Generated from bot/configschema.py by scripts/gen_docs.py: do not edit. "
        "The bot's own validation (`upgrade-bot run`, `exec`) also checks paths, time zones and "
        "the relations between keys.",
        **body,
    }


def render() -> str:
    """The schema file's text."""
    return json.dumps(settings_schema(), indent=2, ensure_ascii=False) + "\n"


def rows() -> Iterator[tuple[str, Key]]:
    """(dotted key as written in the reference, key) for every key, in the table's order."""

    def walk(prefix: str, key: Key) -> Iterator[tuple[str, Key]]:
        if key.keys is not None:
            for name, child in key.keys.items():
                dotted = f"{prefix}.{name}" if prefix else name
                yield dotted, child
                yield from walk(dotted, child)
        elif key.names is not None:
            dotted = f"{prefix}.{key.name_doc}"
            yield dotted, key.names
            yield from walk(dotted, key.names)
        elif key.items is not None:
            yield from walk(f"{prefix}[]", key.items)

    yield from walk("", Key(doc="", keys=KEYS))
