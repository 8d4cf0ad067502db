"""The sections of `upgrade-bot.yaml` that need more than a line or two, one parser each.

`bot.settings.parse_settings` walks the top-level keys and hands each of these sections' YAML
nodes to its parser here (clusters and their cloud providers, checks, evidence sources, Grafana,
GitHub, pipeline hooks, windows and freezes, the database and data directory). Every parser reports
through the same `YamlValidator`, so each problem names the file, the line and the dotted key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar

import yaml

from bot.configschema import (
    AKS_GROUP,
    AKS_NAME,
    AKS_SUBSCRIPTION,
    EKS_NAME,
    GKE_LOCATION,
    GKE_NAME,
    GKE_PROJECT,
    LABEL_KEY,
    LABEL_VALUE,
    REGION,
    bounds,
    keys_of,
)
from bot.core import windows as _windows
from bot.core.checks.findings import Cover, valid_id
from bot.core.checks.ids import FindingIds, builtin_findings, finding_ids
from bot.core.durations import parse_duration
from bot.core.evidence.matchers import parse_matcher
from bot.core.validation import (
    NAME_PATTERN,
    YamlValidator,
    compose_document,
    is_null,
    read_document,
    shown,
)
from bot.errors import ConfigError
from bot.files import Unreadable, read_bounded
from bot.records import (
    AksProvider,
    AlertMatcher,
    ClusterConfig,
    EksProvider,
    GitHubAccess,
    GkeProvider,
    GrafanaConfig,
    ImageChecks,
    SignalSource,
)
from bot.resources import BUILTIN_RULES

_T = TypeVar("_T")


def images_section(v: YamlValidator, node: yaml.Node, base_dir: Path) -> ImageChecks:
    key = "checks.images"
    m = v.mapping(node, key, keys_of(key))
    verify = v.boolean(m.get("verify"), f"{key}.verify") if "verify" in m else False
    docker_config = v.path(m.get("docker_config"), f"{key}.docker_config", base_dir)
    if docker_config is not None and not docker_config.is_file():
        v.error(m["docker_config"], f"{key}.docker_config", f"{docker_config} is not a file")
    insecure = v.strings(m["insecure"], f"{key}.insecure") if "insecure" in m else ()
    endpoints: dict[str, str] = {}
    if "endpoints" in m:
        for host, url_node in v.mapping(m["endpoints"], f"{key}.endpoints", None).items():
            url = v.string(url_node, f"{key}.endpoints.{host}")
            if url is not None and not re.match(r"^https?://[^/\s]+/?$", url):
                v.error(
                    url_node,
                    f"{key}.endpoints.{host}",
                    f"{url!r} is not a base URL like http://127.0.0.1:5000",
                )
            elif url is not None:
                endpoints[host] = url
    return ImageChecks(
        verify=bool(verify), docker_config=docker_config, insecure=tuple(insecure), endpoints=endpoints
    )


def _config_top(path: Path) -> tuple[YamlValidator, dict[str, yaml.Node]]:
    """A configuration file's validator and its top-level keys ({} when it is empty), to read one
    of its sections alone; a ConfigError when there is no such file."""
    label = str(path)
    try:
        text = read_document(path, what="configuration file")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    node = compose_document(text, label)
    v = YamlValidator(label)
    return v, (v.mapping(node, "", None) if node is not None and not is_null(node) else {})


def _checks_entry(v: YamlValidator, top: dict[str, yaml.Node], name: str) -> yaml.Node | None:
    """The node of `checks.<name>`, if the file has one."""
    if "checks" not in top:
        return None
    return v.mapping(top["checks"], "checks", keys_of("checks")).get(name)


def read_image_checks(path: Path) -> ImageChecks:
    """The `checks.images` of a configuration file alone (a rehearsal runs IMG001 when the team's
    configuration does); a ConfigError names the key and line."""
    v, top = _config_top(path)
    images = _checks_entry(v, top, "images")
    out = ImageChecks() if images is None else images_section(v, images, path.parent)
    v.raise_if_errors()
    return out


def read_check_ignores(path: Path) -> tuple[Cover, ...]:
    """The `checks.ignore` list of a configuration file alone (a rehearsal takes the team's
    reviewed exceptions, not its clusters or secrets); a ConfigError names the key and line."""
    v, top = _config_top(path)
    # The team's rules files too: an ignore entry may name one of their rules' ids.
    rules_files: list[Path] = []
    if "rules_files" in top:
        for i, item in enumerate(list_items(v, top["rules_files"], "rules_files")):
            found = v.path(item, f"rules_files[{i}]", path.parent)
            if found is not None and found.is_file():
                rules_files.append(found)
    ignore = _checks_entry(v, top, "ignore")
    out = [] if ignore is None else ignores_section(v, ignore, rules_files)
    v.raise_if_errors()
    return tuple(out)


def _reported(rules_files: Sequence[Path]) -> FindingIds | None:
    """Every id a check or rule reports (`bot.core.checks.ids`, the list `/upgrade waive` reads),
    with the shipped rules and `rules_files`; None when a rules file is not valid: its own error,
    naming its line, is what people see (`rules check`, `check`, the bot's start)."""
    # Imported here: only a configuration with an ignore list pays for reading the rules.
    from bot.core.rules import load_rules

    try:
        return finding_ids(load_rules([BUILTIN_RULES, *rules_files]))
    except ConfigError:
        return None


def ignores_section(v: YamlValidator, node: yaml.Node, rules_files: Sequence[Path] = ()) -> list[Cover]:
    """`checks.ignore: [{finding: API001, objects: [kube-system/x], reason: "…"}]`: each finding an
    id some check or rule reports, as `/upgrade waive` takes it (a typo would accept nothing)."""
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, "checks.ignore", "expected a list of {finding, objects, reason}")
        return []
    out: list[Cover] = []
    known: FindingIds | None = None
    for i, item in enumerate(node.value):
        key = f"checks.ignore[{i}]"
        entry = v.mapping(item, key, keys_of("checks.ignore[]"))
        finding = v.string(entry.get("finding"), f"{key}.finding") if "finding" in entry else None
        reason = v.string(entry.get("reason"), f"{key}.reason") if "reason" in entry else None
        if "finding" in entry and finding is not None and not valid_id(finding):
            v.error(entry["finding"], f"{key}.finding", f"{shown(finding)} is not a finding id like API001")
            finding = None
        if finding is not None and finding not in builtin_findings():
            known = known or _reported(rules_files)
            if known is not None and finding not in known:
                near = known.near(finding)
                hint = f" (did you mean {' or '.join(near)}?)" if near else ""
                v.error(entry["finding"], f"{key}.finding", f"no check or rule reports {finding}{hint}")
                finding = None
        if "finding" not in entry:
            v.error(item, f"{key}.finding", "missing: the finding's id (like API001)")
        if "reason" not in entry or (reason is not None and not reason.strip()):
            # A permanent exception is reviewed: its reason is what the next reviewer reads.
            v.error(entry.get("reason", item), f"{key}.reason", "missing: say why this finding is accepted")
            reason = None
        objects = v.strings(entry["objects"], f"{key}.objects") if "objects" in entry else ()
        if finding and reason:
            out.append(
                Cover(
                    source="ignore",
                    label=key,
                    finding=finding,
                    objects=tuple(o.strip() for o in objects if o.strip()),
                    reason=reason.strip(),
                )
            )
    return out


def _provider(v: YamlValidator, key: str, node: yaml.Node) -> EksProvider | AksProvider | GkeProvider | None:
    """`provider: {eks: {name, region, endpoint_url?}}` or `{aks: {subscription_id, resource_group,
    name, endpoint_url?}}`: one cloud per cluster."""
    p = v.mapping(node, key, keys_of("clusters.*.provider"))
    if not p:
        if isinstance(node, yaml.MappingNode) and not node.value:
            v.error(node, key, "name a provider: eks, aks or gke")
        return None
    if len(p) > 1:
        v.error(node, key, "name one provider: eks, aks or gke")
        return None
    cloud = next(iter(p))  # the one cloud named
    if cloud in _CLOUDS:
        return _cloud(v, key, p[cloud], cloud)
    eks_node = p["eks"]
    e = v.mapping(eks_node, f"{key}.eks", keys_of("clusters.*.provider.eks"))
    name = v.string(e.get("name"), f"{key}.eks.name")
    region = v.string(e.get("region"), f"{key}.eks.region")
    endpoint = v.string(e.get("endpoint_url"), f"{key}.eks.endpoint_url")
    for missing in sorted({"name", "region"} - set(e)):
        if isinstance(eks_node, yaml.MappingNode):
            v.error(eks_node, f"{key}.eks.{missing}", "missing key")
    if name is not None and not EKS_NAME.match(name):
        v.error(e["name"], f"{key}.eks.name", f"{shown(name)} is not an EKS cluster name")
        name = None
    if region is not None and not REGION.match(region):
        v.error(e["region"], f"{key}.eks.region", f"{shown(region)} is not an AWS region (like eu-west-1)")
        region = None
    if endpoint is not None and not re.match(r"^https?://[^\s/]+", endpoint):
        v.error(e["endpoint_url"], f"{key}.eks.endpoint_url", "expected an http(s) URL")
        endpoint = None
    if name is None or region is None:
        return None
    return EksProvider(name=name, region=region, endpoint_url=endpoint)


_HTTP_URL = (re.compile(r"^https?://[^\s/]+"), "expected an http(s) URL")


def _cloud_fields(
    v: YamlValidator, key: str, node: yaml.Node, cloud: str, checks: dict[str, tuple[re.Pattern[str], str]]
) -> dict[str, str] | None:
    """`provider.aks` / `provider.gke`: each of `checks`' fields a string matching its pattern (all
    required), and an optional `endpoint_url`; None when any is wrong or missing (each said once)."""
    m = v.mapping(node, f"{key}.{cloud}", keys_of(f"clusters.*.provider.{cloud}"))
    values: dict[str, str | None] = {}
    for field_, (pattern, why) in {**checks, "endpoint_url": _HTTP_URL}.items():
        text = values[field_] = v.string(m.get(field_), f"{key}.{cloud}.{field_}")
        if text is not None and not pattern.match(text):
            v.error(m[field_], f"{key}.{cloud}.{field_}", f"{shown(text)} {why}" if field_ in checks else why)
            values[field_] = None
    for missing in sorted(set(checks) - set(m)):
        if isinstance(node, yaml.MappingNode):
            v.error(node, f"{key}.{cloud}.{missing}", "missing key")
    if any(values[f] is None for f in checks):
        return None
    return {f: text for f, text in values.items() if text is not None}


#: The clouds read by `_cloud_fields`: the section's type, and each required field's pattern and
#: what a value that does not match it is not.
_CLOUDS: dict[str, tuple[type[AksProvider] | type[GkeProvider], dict[str, tuple[re.Pattern[str], str]]]] = {
    "aks": (
        AksProvider,
        {
            "subscription_id": (AKS_SUBSCRIPTION, "is not an Azure subscription id (a GUID)"),
            "resource_group": (AKS_GROUP, "is not an Azure resource group name"),
            "name": (AKS_NAME, "is not an AKS cluster name"),
        },
    ),
    "gke": (
        GkeProvider,
        {
            "project": (GKE_PROJECT, "is not a Google Cloud project id"),
            "location": (GKE_LOCATION, "is not a GKE region or zone (europe-west1, europe-west1-b)"),
            "name": (GKE_NAME, "is not a GKE cluster name"),
        },
    ),
}


def _cloud(v: YamlValidator, key: str, node: yaml.Node, cloud: str) -> AksProvider | GkeProvider | None:
    """`provider.aks` / `provider.gke` (`_CLOUDS`), checked field by field."""
    section, checks = _CLOUDS[cloud]
    got = _cloud_fields(v, key, node, cloud, checks)
    return None if got is None else section(**got)


def _signal_source(v: YamlValidator, key: str, node: yaml.Node, base_dir: Path) -> SignalSource | None:
    """`alertmanager:` / `prometheus:` `{url, bearer_token_file?, ca_file?}`: the files must exist
    now, so a typo is caught at start rather than as an Inconclusive gate on upgrade day."""
    s = v.mapping(node, key, keys_of(f"clusters.*.{key.rsplit('.', 1)[-1]}"))
    if not s:
        if isinstance(node, yaml.MappingNode):
            v.error(node, f"{key}.url", "missing key")
        return None
    url = v.string(s.get("url"), f"{key}.url")
    if "url" not in s:
        v.error(node, f"{key}.url", "missing key")
    elif url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
        v.error(s["url"], f"{key}.url", f"{shown(url)} is not an http(s) URL")
        url = None
    files: dict[str, Path | None] = {}
    for k in ("bearer_token_file", "ca_file"):
        path = v.path(s.get(k), f"{key}.{k}", base_dir)
        if path is not None and not path.is_file():
            v.error(s[k], f"{key}.{k}", f"no such file: {path}")
            path = None
        files[k] = path
    if url is None:
        return None
    return SignalSource(
        url=url.rstrip("/"), bearer_token_file=files["bearer_token_file"], ca_file=files["ca_file"]
    )


#: A service account token is a few hundred bytes; anything near this is not a token file.
MAX_TOKEN_BYTES = 16 * 1024
#: The longest a Grafana request may take: the queue behind it waits that long per attempt.
MAX_GRAFANA_TIMEOUT = timedelta(seconds=60)


def grafana_section(v: YamlValidator, node: yaml.Node, base_dir: Path) -> GrafanaConfig | None:
    """`grafana: {url, token_file?, tags?, timeout?}`: the token file is read now, so a wrong
    path is caught at start; the token itself never appears in an error or a log line."""
    g = v.mapping(node, "grafana", keys_of("grafana"))
    url = v.string(g.get("url"), "grafana.url")
    if "url" not in g:
        v.error(node, "grafana.url", "missing key")
    elif url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
        v.error(g["url"], "grafana.url", f"{shown(url)} is not an http(s) URL")
        url = None
    token_file = v.path(g.get("token_file"), "grafana.token_file", base_dir)
    token = ""
    if token_file is not None:
        try:
            token = read_bounded(token_file, MAX_TOKEN_BYTES).decode("utf-8").strip()
        except FileNotFoundError:
            v.error(g["token_file"], "grafana.token_file", f"no such file: {token_file}")
        except Unreadable as exc:
            v.error(g["token_file"], "grafana.token_file", f"{token_file}: {exc.reason}")
        except UnicodeDecodeError:
            v.error(g["token_file"], "grafana.token_file", f"{token_file}: not UTF-8 text")
        else:
            if not token:
                v.error(g["token_file"], "grafana.token_file", f"{token_file} is empty")
    tags: tuple[str, ...] = ()
    if "tags" in g:
        tags = v.strings(g["tags"], "grafana.tags") or ()
    timeout = 5.0
    if "timeout" in g:
        chosen = parse_node(v, g["timeout"], "grafana.timeout", parse_duration)
        if chosen is not None and not timedelta(0) < chosen <= MAX_GRAFANA_TIMEOUT:
            v.error(g["timeout"], "grafana.timeout", "must be more than 0 and at most 60s")
        elif chosen is not None:
            timeout = chosen.total_seconds()
    if url is None:
        return None
    return GrafanaConfig(url=url.rstrip("/"), token_file=token_file, token=token, tags=tags, timeout=timeout)


def github_section(
    v: YamlValidator, node: yaml.Node, base_dir: Path, env: Mapping[str, str]
) -> GitHubAccess | None:
    """`github: {api_url?, token_file?}` or `github: {api_url?, app_id, installation_id,
    private_key_file}`: the token or the App's key is read now (or the environment's), so a bot that
    cannot read its PRs says so at start; a secret never appears in an error."""
    g = v.mapping(node, "github", keys_of("github"))
    api_url = v.string(g.get("api_url"), "github.api_url") if "api_url" in g else "https://api.github.com"
    if api_url is not None and not re.match(r"^https?://[^\s/]+(/\S*)?$", api_url):
        v.error(g["api_url"], "github.api_url", f"{shown(api_url)} is not an http(s) URL")
        api_url = None
    app_keys = [k for k in APP_KEYS if k in g]
    if app_keys and "token_file" in g:
        v.error(
            node,
            "github",
            "either token_file or a GitHub App (app_id, installation_id, private_key_file), not both",
        )
        return None
    if app_keys or ("token_file" not in g and not env.get("GITHUB_TOKEN", "").strip() and _app_env(env)):
        app = _github_app(v, node, g, base_dir, env, from_config=bool(app_keys))
        if api_url is None or app is None:
            return None
        app_id, installation_id, private_key = app
        return GitHubAccess(
            api_url=api_url.rstrip("/"),
            app_id=app_id,
            installation_id=installation_id,
            private_key=private_key,
        )
    token = ""
    if "token_file" in g:
        token = _secret_file(v, g["token_file"], "github.token_file", base_dir)
    else:
        token = env.get("GITHUB_TOKEN", "").strip()
        if not token:
            v.error(
                node,
                "github",
                "no token: set `token_file`, or GITHUB_TOKEN in the environment, or a GitHub App "
                "(app_id, installation_id, private_key_file)",
            )
    if api_url is None or not token:
        return None
    return GitHubAccess(api_url=api_url.rstrip("/"), token=token)


#: A GitHub App's keys under `github:`, and the environment variables that stand for them.
APP_KEYS = {
    "app_id": "GITHUB_APP_ID",
    "installation_id": "GITHUB_APP_INSTALLATION_ID",
    "private_key_file": "GITHUB_APP_PRIVATE_KEY_FILE",
}


def _app_env(env: Mapping[str, str]) -> bool:
    return any(env.get(var, "").strip() for var in APP_KEYS.values())


def _secret_file(v: YamlValidator, node: yaml.Node, key: str, base_dir: Path) -> str:
    """A secret file's text, stripped; "" after an error (which never shows the text)."""
    path = v.path(node, key, base_dir)
    if path is None:
        return ""
    try:
        text = read_bounded(path, MAX_TOKEN_BYTES).decode("utf-8").strip()
    except FileNotFoundError:
        v.error(node, key, f"no such file: {path}")
    except Unreadable as exc:
        v.error(node, key, f"{path}: {exc.reason}")
    except UnicodeDecodeError:
        v.error(node, key, f"{path}: not UTF-8 text")
    else:
        if not text:
            v.error(node, key, f"{path} is empty")
        return text
    return ""


def _github_app(
    v: YamlValidator,
    node: yaml.Node,
    g: Mapping[str, yaml.Node],
    base_dir: Path,
    env: Mapping[str, str],
    *,
    from_config: bool,
) -> tuple[str, int, str] | None:
    """The App's (id, installation id, private key), from `github:` or else from the environment."""
    missing = [
        (k if from_config else var)
        for k, var in APP_KEYS.items()
        if (k not in g if from_config else not env.get(var, "").strip())
    ]
    if missing:
        where = "under github" if from_config else "in the environment"
        v.error(node, "github", f"a GitHub App needs {', '.join(missing)} {where} as well")
        return None
    if from_config:
        app_id = v.integer(g["app_id"], "github.app_id", low=1, high=2**53)
        installation = v.integer(g["installation_id"], "github.installation_id", low=1, high=2**53)
        key = _secret_file(v, g["private_key_file"], "github.private_key_file", base_dir)
        key_name = "github.private_key_file"
    else:
        app_id = _env_id(v, node, env, "GITHUB_APP_ID")
        installation = _env_id(v, node, env, "GITHUB_APP_INSTALLATION_ID")
        key_name = "GITHUB_APP_PRIVATE_KEY_FILE"
        path = Path(env[key_name].strip())
        try:
            key = read_bounded(path, MAX_TOKEN_BYTES).decode("utf-8").strip()
        except (OSError, Unreadable, UnicodeDecodeError):
            v.error(node, "github", f"{key_name}: {path} cannot be read as a text file")
            key = ""
    # The shape only (the key itself is never shown): GitHub's download is a PKCS#1 PEM.
    if key and not ("-----BEGIN" in key and "PRIVATE KEY-----" in key):
        v.error(node, "github", f"{key_name}: not a private key in PEM form (-----BEGIN … PRIVATE KEY-----)")
        key = ""
    if app_id is None or installation is None or not key:
        return None
    return str(app_id), installation, key


def _env_id(v: YamlValidator, node: yaml.Node, env: Mapping[str, str], var: str) -> int | None:
    text = env.get(var, "").strip()
    if not text.isdigit() or int(text) < 1:
        v.error(node, "github", f"{var}: {shown(text)} is not a GitHub id (a whole number)")
        return None
    return int(text)


#: A hook's signing secret: shorter than this is guessable (Slack's are 32 hex characters).
MIN_HOOK_SECRET = 32


def pipeline_hooks_section(v: YamlValidator, node: yaml.Node, base_dir: Path) -> dict[str, bytes]:
    """`pipeline_hooks: {SOURCE: {secret_file}}`: each secret is read now, so a wrong path or a
    short secret is caught at start; a secret never appears in an error or a log line."""
    out: dict[str, bytes] = {}
    for name, source in v.items(node, "pipeline_hooks", keys_of("pipeline_hooks.*"), "source").items():
        key = f"pipeline_hooks.{name}"
        if not NAME_PATTERN.match(name):
            v.error(source, key, "source names are lower-case letters, digits, '.', '-' and '_'")
            continue
        m = v.mapping(source, key, keys_of("pipeline_hooks.*"))
        if "secret_file" not in m:
            v.error(source, f"{key}.secret_file", "missing key")
            continue
        path = v.path(m["secret_file"], f"{key}.secret_file", base_dir)
        if path is None:
            continue
        try:
            secret = read_bounded(path, MAX_TOKEN_BYTES).decode("utf-8").strip()
        except FileNotFoundError:
            v.error(m["secret_file"], f"{key}.secret_file", f"no such file: {path}")
        except Unreadable as exc:
            v.error(m["secret_file"], f"{key}.secret_file", f"{path}: {exc.reason}")
        except UnicodeDecodeError:
            v.error(m["secret_file"], f"{key}.secret_file", f"{path}: not UTF-8 text")
        else:
            if len(secret) < MIN_HOOK_SECRET:
                v.error(
                    m["secret_file"],
                    f"{key}.secret_file",
                    f"{path}: the secret must be at least {MIN_HOOK_SECRET} characters",
                )
            else:
                out[name] = secret.encode()
    return out


def _alert_matchers(v: YamlValidator, key: str, node: yaml.Node) -> tuple[AlertMatcher, ...]:
    """`alert_matchers: ['cluster="prod"']`: Alertmanager's matcher syntax, one per item."""
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, key, "expected a list of matchers like 'cluster=\"prod\"'")
        return ()
    out: list[AlertMatcher] = []
    for i, item in enumerate(node.value):
        text = v.string(item, f"{key}[{i}]")
        if text is None:
            continue
        try:
            out.append(parse_matcher(text))
        except ValueError as exc:
            v.error(item, f"{key}[{i}]", str(exc))
    return tuple(out)


def cluster_section(v: YamlValidator, name: str, node: yaml.Node, base_dir: Path) -> ClusterConfig:
    key = f"clusters.{name}"
    if not NAME_PATTERN.match(name):
        v.error(node, key, "cluster names are lower-case letters, digits, '.', '-' and '_'")
    c = v.mapping(node, key, keys_of("clusters.*"))
    in_cluster = v.boolean(c.get("in_cluster"), f"{key}.in_cluster")
    kubeconfig = v.path(c.get("kubeconfig"), f"{key}.kubeconfig", base_dir)
    context = v.string(c.get("context"), f"{key}.context")
    if in_cluster and (kubeconfig or context):
        v.error(node, key, "use either in_cluster: true or kubeconfig/context, not both")
    # Missing, not merely unread: a `kubeconfig:` or `in_cluster:` whose value was refused is said once.
    if "kubeconfig" not in c and in_cluster is not True and (in_cluster is False or "in_cluster" not in c):
        v.error(node, f"{key}.kubeconfig", "missing key (or set in_cluster: true)")
    timeout = v.number(
        c.get("request_timeout"), f"{key}.request_timeout", **bounds("clusters.*.request_timeout")
    )
    provider = _provider(v, f"{key}.provider", c["provider"]) if "provider" in c else None
    eks = provider if isinstance(provider, EksProvider) else None
    aks = provider if isinstance(provider, AksProvider) else None
    gke = provider if isinstance(provider, GkeProvider) else None
    alertmanager = (
        _signal_source(v, f"{key}.alertmanager", c["alertmanager"], base_dir) if "alertmanager" in c else None
    )
    prometheus = (
        _signal_source(v, f"{key}.prometheus", c["prometheus"], base_dir) if "prometheus" in c else None
    )
    matchers = (
        _alert_matchers(v, f"{key}.alert_matchers", c["alert_matchers"]) if "alert_matchers" in c else ()
    )
    labels = _labels(v, f"{key}.labels", c["labels"]) if "labels" in c else {}
    scenario = v.string(c.get("scenario"), f"{key}.scenario") or ""
    if scenario.endswith((".yaml", ".yml")):
        # A scenario file is relative to the configuration, as a kubeconfig is.
        scenario = str(base_dir / Path(scenario).expanduser())
    return ClusterConfig(
        name=name,
        kubeconfig=kubeconfig,
        context=context,
        in_cluster=bool(in_cluster),
        request_timeout=timeout if timeout is not None else 10.0,
        eks=eks,
        aks=aks,
        gke=gke,
        alertmanager=alertmanager,
        prometheus=prometheus,
        alert_matchers=matchers,
        labels=labels,
        scenario=scenario,
    )


def _labels(v: YamlValidator, key: str, node: yaml.Node) -> dict[str, str]:
    """`labels: {env: lab}`: Kubernetes label syntax, so a fleet's selector reads like one."""
    out: dict[str, str] = {}
    for name, vnode in v.mapping(node, key, None).items():
        value = v._scalar(vnode, f"{key}.{name}", "a label value")
        if value is None:
            continue
        # `canary: true` and `tier: 1` are meant as text: labels are strings.
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not LABEL_KEY.match(name):
            v.error(vnode, f"{key}.{name}", "not a Kubernetes label key")
        elif not LABEL_VALUE.match(text):
            v.error(vnode, f"{key}.{name}", f"{shown(text)} is not a label value")
        else:
            out[name] = text
    return out


def list_items(v: YamlValidator, node: yaml.Node, key: str) -> list[yaml.Node]:
    if is_null(node):
        v.missing_value(node, key)
        return []
    if not isinstance(node, yaml.SequenceNode):
        v.error(node, key, "expected a list")
        return []
    return list(node.value)


def parse_node(v: YamlValidator, node: yaml.Node, key: str, parse: Callable[[str], _T]) -> _T | None:
    """Parse a scalar's text as written (YAML 1.1 would read `14:00` as the number 840)."""
    if is_null(node):
        v.missing_value(node, key)
        return None
    if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
        v.error(node, key, "expected a value")
        return None
    try:
        return parse(str(node.value))
    except ValueError as exc:
        v.error(node, key, str(exc))
        return None


def _zone_of(v: YamlValidator, node: yaml.Node | None, key: str, default: str) -> str | None:
    if node is None:
        return default
    zone = v.string(node, key)
    if zone is None:
        return None
    if not _windows.is_zone(zone):
        v.error(node, key, _windows.unknown_zone(zone))
        return None
    return zone


def _entries(
    v: YamlValidator, node: yaml.Node, section: str, required: Sequence[str]
) -> Iterator[tuple[str, yaml.Node, dict[str, yaml.Node]]]:
    """Each entry of the list `section` (`windows`, `freezes`) as its key, its node and its mapping,
    when it has every `required` key (each one missing is said, and the entry skipped)."""
    for i, item in enumerate(list_items(v, node, section)):
        key = f"{section}[{i}]"
        entry = v.mapping(item, key, keys_of(f"{section}[]"))
        missing = [k for k in required if k not in entry]
        for k in missing:
            v.error(item, f"{key}.{k}", "missing key")
        if not missing:
            yield key, item, entry


def windows_section(v: YamlValidator, node: yaml.Node, default_zone: str) -> list[_windows.Window]:
    """`windows: [{days: mon-fri, start: "14:00", end: "17:00", zone: Asia/Tokyo}]`."""
    out: list[_windows.Window] = []
    for key, item, w in _entries(v, node, "windows", ("days", "start", "end")):
        days = _weekdays(v, w["days"], f"{key}.days")
        start = parse_node(v, w["start"], f"{key}.start", _windows.parse_time)
        end = parse_node(v, w["end"], f"{key}.end", _windows.parse_time)
        zone = _zone_of(v, w.get("zone"), f"{key}.zone", default_zone)
        if days is None or start is None or end is None or zone is None:
            continue
        try:
            out.append(_windows.Window(weekdays=days, start=start, end=end, zone=zone))
        except ValueError as exc:
            v.error(item, key, str(exc))
    return out


def freezes_section(v: YamlValidator, node: yaml.Node, default_zone: str) -> list[_windows.Freeze]:
    """`freezes: [{from: 2026-12-25, to: 2027-01-04, reason: year-end freeze}]` (whole days)."""
    out: list[_windows.Freeze] = []
    for key, _, f in _entries(v, node, "freezes", ("from", "to", "reason")):
        first = parse_node(v, f["from"], f"{key}.from", _iso_date)
        last = parse_node(v, f["to"], f"{key}.to", _iso_date)
        reason = v.string(f["reason"], f"{key}.reason")
        zone = _zone_of(v, f.get("zone"), f"{key}.zone", default_zone)
        if first is None or last is None or reason is None or zone is None:
            continue
        try:
            out.append(_windows.Freeze.from_dates(first, last, reason=reason, zone=zone))
        except (ValueError, OverflowError) as exc:
            v.error(f["to"], f"{key}.to", str(exc))
    return out


def _weekdays(v: YamlValidator, node: yaml.Node, key: str) -> frozenset[int] | None:
    """`mon-fri`, `sat,sun` or a list of day names."""
    items = node.value if isinstance(node, yaml.SequenceNode) else [node]
    if not all(isinstance(i, yaml.ScalarNode) for i in items):
        v.error(node, key, "expected weekdays like mon-fri or [mon, wed]")
        return None
    try:
        return _windows.parse_weekdays([str(i.value) for i in items])
    except ValueError as exc:
        v.error(node, key, str(exc))
        return None


#: Freezes are planned months ahead, not centuries: a later year is a typo (and 9999-12-31 plus
#: the freeze's last day would overflow the date type).
FIRST_YEAR, LAST_YEAR = 2000, 2099


def _iso_date(text: str) -> date:
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{shown(text)} is not a date like 2026-12-25") from None
    if not FIRST_YEAR <= day.year <= LAST_YEAR:
        raise ValueError(f"{day.isoformat()} is not between {FIRST_YEAR} and {LAST_YEAR}; a typo?")
    return day


def check_data_dir(v: YamlValidator, node: yaml.Node | None, data_dir: Path) -> None:
    """The state lives here: a file in the way, or a parent we cannot write to, is said now."""
    if data_dir.exists():
        if not data_dir.is_dir():
            v.error(node, "data_dir", f"{data_dir} is a file, not a directory")
        elif not os.access(data_dir, os.W_OK | os.X_OK):
            v.error(node, "data_dir", f"{data_dir} is not writable by this user")
        return
    # Created on first use: the nearest existing ancestor decides whether that can work.
    parent = data_dir.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        v.error(node, "data_dir", f"{data_dir} cannot be created: {parent} is a file")
    elif not os.access(parent, os.W_OK | os.X_OK):
        v.error(node, "data_dir", f"{data_dir} cannot be created: {parent} is not writable by this user")


#: SQLAlchemy's URL shape, `backend[+driver]://[user[:password]@][host][:port][/database][?query]`.
_DB_URL = re.compile(
    r"^(?P<backend>[A-Za-z][A-Za-z0-9]*)(?:\+(?P<driver>[A-Za-z0-9_]+))?://"
    r"(?:(?P<user>[^:/@]*)(?::[^@]*)?@)?(?P<host>\[[^/?\]]+\]|[^/?:]*)?(?::(?P<port>[^/?]*))?"
    r"(?P<rest>[/?].*)?$",
    re.DOTALL,
)
_BACKENDS = ("sqlite", "postgresql")


def mask_password(url: str) -> str:
    """`postgresql://bot:***@db/upgrade`: a URL as it may appear in a message or a log."""
    return re.sub(r"^([^:/]+://[^:/@]*):[^@]*@", r"\1:***@", url)


def check_database_url(v: YamlValidator, node: yaml.Node, url: str) -> None:
    """The URL's shape; whether its driver is installed and the server answers is Store.open's."""
    match = _DB_URL.match(url)
    if not match:
        v.error(
            node,
            "database_url",
            f"{shown(mask_password(url), 80)} is not a URL like postgresql://user@host/db",
        )
        return
    backend = match["backend"].lower()
    if backend == "postgres":
        v.error(node, "database_url", "write postgresql://…, not postgres://… (SQLAlchemy's name)")
    elif backend not in _BACKENDS:
        v.error(node, "database_url", f"{shown(backend)} is not supported (use {' or '.join(_BACKENDS)})")
    port = match["port"]
    if port is not None and not (
        port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) <= 65535
    ):
        v.error(node, "database_url", f"port {shown(port)} is not a number from 1 to 65535")
