"""Removed and deprecated APIs for a target version: who calls them, what was applied with them.

A live cluster serves every stored object under every served version, so listing through an old
group-version proves nothing. The signals that do, each with its blind spot:

- **calls** — the apiserver metric `apiserver_requested_deprecated_apis` (group, version, resource,
  subresource, removed_release). It lives in each apiserver process and starts empty when that
  process restarts; with several replicas the answer is the replica that served `/metrics`.
- **last-applied** — the `kubectl.kubernetes.io/last-applied-configuration` annotation: what
  `kubectl apply` last sent. Server-side apply and Argo CD do not write it; it can be stale.
- **managedFields** — the `apiVersion` of each field manager's entry: server-side apply, Argo CD
  and controllers. An entry keeps the version of that manager's last write, even a manager long gone.
- **Helm** — the latest revision of each Helm v3 release (Secret `sh.helm.release.v1.NAME.vN`, type
  `helm.sh/release.v1`: base64, gzip, JSON; `manifest` is multi-document YAML). Helm refuses to
  upgrade a release whose stored manifest names an API the cluster no longer serves.
- **manifests** — YAML files and directories (multi-document, `List` kinds), file and line of each.

Every use of a group-version removed at or before the target becomes part of one Required finding
per group-version-kind (`API001`, "removed in 1.NN", with the replacement), every use of one that is
deprecated but still served part of a Recommended one (`API002`), and files that are not YAML are
named (`API003`). The answer to "served in 1.N?" comes from `apidata`.

Which kinds `cluster_api_findings` reads for last-applied and managedFields: those people and
GitOps tools apply and whose API had a version removed or deprecated (`APPLIED_KINDS`), each
listed through its GA version (a list through a deprecated version would itself count in the
metric). Pods, ReplicaSets, ControllerRevisions, Events, EndpointSlices, Leases, CSINodes and
VolumeAttachments are written by controllers and kubelets, never by hand; at 150,000 pods they
would be most of the bytes, and their writers' API use shows in the metric instead. Items are
decoded by msgspec into structs holding only the kind, name, namespace, the last-applied annotation
and each managedFields entry's manager, operation and apiVersion.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec
import yaml

from bot.core.checks.apidata import (
    DEPRECATED,
    REMOVALS,
    REMOVED,
    SERVED,
    UNKNOWN,
    ApiStatus,
    describe_data,
    minor_of,
    schema_data,
    split_group_version,
)
from bot.core.checks.apidata import served as _served_status
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, FindingKind, declare
from bot.core.durations import kubectl_age
from bot.core.kube.applied import APPLIED_KINDS, AppliedKind
from bot.core.kube.helm import (
    HelmSecret,
    decode_release,
    latest_releases,
    listed_releases,
    release_of,
)
from bot.decoders import convert
from bot.errors import ClusterError, ClusterUnreachable, UsageError, UserError
from bot.yamlsyntax import read_slip

log = logging.getLogger(__name__)

API_REMOVED = "API001"
API_DEPRECATED = "API002"
API_UNREADABLE = "API003"
#: The ids these checks report (see `bot.core.checks.ids`).
FINDINGS = declare(
    __name__,
    FindingKind(id=API_REMOVED, severity=REQUIRED, about="an API the target no longer serves is in use"),
    FindingKind(id=API_DEPRECATED, severity=RECOMMENDED, about="a deprecated API is in use"),
    FindingKind(
        id=API_UNREADABLE, severity=RECOMMENDED, about="Helm releases or manifests that could not be read"
    ),
)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
METRIC = "apiserver_requested_deprecated_apis"

#: Where each signal comes from and what it cannot see, for the findings' `source`.
SIGNALS = {
    "metric": "calls: apiserver metric apiserver_requested_deprecated_apis{age} (kept per apiserver "
    "process and reset when it restarts; other replicas keep their own)",
    "last-applied": "kubectl last-applied-configuration annotations (missed by server-side apply and "
    "Argo CD; can be stale)",
    "managedFields": "managedFields apiVersion of each field manager (server-side apply, Argo CD, "
    "controllers; a manager's entry keeps the version of its last write)",
    "helm": "Helm v3 release Secrets, latest revision of each release",
    "manifest": "manifest files",
}

FIXES = {
    "metric": "Find the callers: the apiserver audit log marks these requests (annotation "
    "k8s.io/deprecated) with their user agent; update or reconfigure those clients.",
    "last-applied": "Change apiVersion in the source manifests and re-apply them with kubectl apply "
    "(the kubectl-convert plugin rewrites a file).",
    "managedFields": "Re-apply from the tool named in managedFields with the new apiVersion (Argo CD, "
    "Flux: update the manifest in git and sync).",
    "helm": "Upgrade the release with a chart that uses the new apiVersion; a release whose stored manifest "
    "names an API the cluster no longer serves is rewritten with the helm-mapkubeapis plugin.",
    "manifest": "Change apiVersion in these files (and any field the new version renamed).",
}


@dataclass(frozen=True)
class Use:
    """One sighting of a group-version-kind: where, and through which signal."""

    group_version: str
    kind: str
    where: str
    signal: str
    #: The metric's own verdict (its removed_release), when the kind cannot be looked up.
    status: ApiStatus | None = None
    #: How long the metric has been counting ("3h"), for the finding's source.
    age: str = ""


def target_minor(target: str) -> int:
    try:
        return minor_of(target)
    except ValueError:
        raise UserError(f"`{target}` is not a Kubernetes version (like 1.25 or 1.25.16)") from None


def served(group_version: str, kind: str, minor: int) -> ApiStatus:
    """Served / deprecated (replacement, removed_in) / removed (in, replacement) in 1.`minor`."""
    return _served_status(group_version, kind, minor)


def classify(uses: Iterable[Use], target: str) -> list[Finding]:
    """One finding per removed or deprecated group-version-kind, Required (removed) first."""
    minor = target_minor(target)
    groups: dict[tuple[str, str, str], tuple[ApiStatus, list[Use]]] = {}
    for use in uses:
        status = use.status or _served_status(use.group_version, use.kind, minor)
        if status.state in (SERVED, UNKNOWN):
            continue
        key = (status.state, use.group_version, use.kind)
        if key not in groups:
            groups[key] = (status, [])
        groups[key][1].append(use)
    findings = [_finding(status, found, minor) for status, found in groups.values()]
    return sorted(findings, key=lambda f: (f.id, f.title))


def _finding(status: ApiStatus, uses: list[Use], minor: int) -> Finding:
    gvk = f"{status.group_version} {status.kind}"
    use_instead = f"use {status.replacement}" if status.replacement else "no replacement is known to the data"
    signals = sorted({u.signal for u in uses}, key=list(SIGNALS).index)
    objects = tuple(dict.fromkeys(u.where for u in uses))
    ages = sorted({u.age for u in uses if u.age})
    counted = f", counted since the apiserver started {ages[0]} ago" if len(ages) == 1 else ""
    source = "; ".join(SIGNALS[s].format(age=counted) for s in signals)
    fix = " ".join(FIXES[s] for s in signals)
    if status.state == REMOVED:
        when = (
            f"removed in 1.{status.removed_in}" if status.removed_in else f"removed (not served in 1.{minor})"
        )
        return Finding(
            id=API_REMOVED,
            severity=REQUIRED,
            title=f"{gvk}: {when}; {use_instead}",
            objects=objects,
            why=(
                f"Kubernetes 1.{minor} does not serve {status.group_version} {status.kind}: requests, kubectl "
                "apply, GitOps syncs and Helm upgrades that send it fail after the upgrade"
                + (
                    " (objects already stored stay readable through the newer version)."
                    if status.replacement and not status.replacement.startswith("nothing")
                    else "."
                )
            ),
            fix=f"Move to {status.replacement or 'a served version'}. {fix}",
            source=source,
        )
    until = (
        f"unavailable from 1.{status.removed_in}" if status.removed_in else "no release announced to stop it"
    )
    since = f" since 1.{status.deprecated_in}" if status.deprecated_in else ""
    return Finding(
        id=API_DEPRECATED,
        severity=RECOMMENDED,
        title=f"{gvk}: deprecated{since}, still served in 1.{minor}, {until}; {use_instead}",
        objects=objects,
        why=(
            f"1.{minor} still serves it, so this upgrade is not blocked, but a later one is: move while "
            "both versions are served."
        ),
        fix=f"Move to {status.replacement or 'the version named in the apiserver Warning header'}. {fix}",
        source=source,
    )


# ---- calls: the apiserver metric -----------------------------------------------------------------

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric_samples(metrics_text: str, name: str) -> Iterator[tuple[dict[str, str], float]]:
    """(labels, value) of each sample of `name` in Prometheus text format."""
    for line in metrics_text.splitlines():
        if not line.startswith(name):
            continue
        m = _SAMPLE.match(line)
        if m is None or m.group("name") != name:
            continue
        labels = {
            k: v.replace(r"\"", '"').replace(r"\n", "\n").replace("\\\\", "\\")
            for k, v in _LABEL.findall(m.group("labels") or "")
        }
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        yield labels, value


def process_start(metrics_text: str) -> float | None:
    """The apiserver process's start (Unix seconds) from `process_start_time_seconds`, if exposed."""
    for _labels, value in metric_samples(metrics_text, "process_start_time_seconds"):
        return value
    return None


def metric_uses(metrics_text: str, target: str, *, age: str = "") -> list[Use]:
    minor = target_minor(target)
    uses = []
    for labels, value in metric_samples(metrics_text, METRIC):
        if value <= 0:
            continue
        group, version = labels.get("group", ""), labels.get("version", "")
        resource, sub = labels.get("resource", ""), labels.get("subresource", "")
        group_version = f"{group}/{version}" if group else version
        kind = _kind_of_resource(group, version, resource)
        status = _served_status(group_version, kind, minor) if kind else None
        if status is None or status.state in (SERVED, UNKNOWN):
            status = _status_from_label(
                group_version, kind or resource, minor, labels.get("removed_release", "")
            )
        named = f"{resource}.{version}.{group}" if group else f"{resource}.{version}"
        where = f"requests to {named}{'/' + sub if sub else ''} (apiserver metric)"
        uses.append(Use(group_version, kind or resource, where, "metric", status, age))
    return uses


def metric_findings(metrics_text: str, target: str, *, age: str = "") -> list[Finding]:
    """Findings from `/metrics` text; `age` says how long that apiserver has been counting."""
    return classify(metric_uses(metrics_text, target, age=age), target)


def _status_from_label(group_version: str, kind: str, minor: int, removed_release: str) -> ApiStatus:
    """The metric's own verdict: it is only set for deprecated APIs, with the release that removes
    them ("" when none is planned)."""
    removed_in = None
    if removed_release:
        try:
            removed_in = minor_of(removed_release)
        except ValueError:
            removed_in = None
    state = REMOVED if removed_in is not None and removed_in <= minor else DEPRECATED
    return ApiStatus(group_version=group_version, kind=kind, minor=minor, state=state, removed_in=removed_in)


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("s") and lower.endswith("points"):
        return lower  # Endpoints
    if lower.endswith("y") and not lower.endswith(("ay", "ey", "oy", "uy")):
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def _kind_of_resource(group: str, version: str, resource: str) -> str:
    """The kind behind a resource name, from the kinds the data knows in that group."""
    kinds = {k for kinds in schema_data().served.values() for g, _, k in kinds if g == group}
    kinds |= {r.kind for r in REMOVALS if split_group_version(r.group_version)[0] == group}
    return next((k for k in sorted(kinds) if _plural(k) == resource), "")


# ---- what was applied: last-applied and managedFields ------------------------------------------


class _Head(msgspec.Struct):
    api_version: str = msgspec.field(default="", name="apiVersion")
    kind: str = ""


class _LastApplied(msgspec.Struct):
    text: str = msgspec.field(default="", name=LAST_APPLIED)


class _Manager(msgspec.Struct):
    manager: str = ""
    operation: str = ""
    api_version: str = msgspec.field(default="", name="apiVersion")
    subresource: str = ""


class _AppliedMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    annotations: _LastApplied | None = None
    managed_fields: list[_Manager] | None = msgspec.field(default=None, name="managedFields")


class AppliedItem(msgspec.Struct):
    """A list item reduced to what the applied-version signals read (see the module docstring)."""

    kind: str = ""
    metadata: _AppliedMeta = msgspec.field(default_factory=_AppliedMeta)


_HEAD = msgspec.json.Decoder(_Head)


def _named(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def applied_uses(item: AppliedItem, kind: str = "") -> list[Use]:
    """The group-versions an object was applied or written with; `kind` when the list left it out."""
    kind = item.kind or kind
    meta = item.metadata
    uses = []
    text = meta.annotations.text if meta.annotations else ""
    if text:
        try:
            head = _HEAD.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            head = _Head()
        if head.api_version:
            where = f"{_named(kind, meta.namespace, meta.name)} (last-applied-configuration)"
            uses.append(Use(head.api_version, head.kind or kind, where, "last-applied"))
    for entry in meta.managed_fields or ():
        if entry.api_version:
            what = " ".join(x for x in (entry.manager, entry.operation, entry.subresource) if x)
            where = f"{_named(kind, meta.namespace, meta.name)} (managedFields: {what})"
            uses.append(Use(entry.api_version, kind, where, "managedFields"))
    return uses


_APPLIED = msgspec.json.Decoder(AppliedItem)


def object_findings(objects: Iterable[Mapping[str, Any]], target: str) -> list[Finding]:
    """Findings from live objects' last-applied annotation and managedFields (raw JSON, any kind)."""
    uses: list[Use] = []
    for obj in objects:
        item = _APPLIED.decode(msgspec.json.encode(obj))
        uses.extend(applied_uses(item))
    return classify(uses, target)


# ---- Helm v3 releases ------------------------------------------------------------------------------


def helm_uses(secret: HelmSecret) -> list[Use]:
    """The objects of a release's stored manifest. Raises ValueError naming the release when the
    record or its manifest cannot be read."""
    rev = release_of(secret)
    if rev is None:
        return []
    namespace, release, revision = rev
    label = f"Helm release {namespace}/{release} revision {revision}"
    try:
        body = decode_release(secret.data.release)
        objects = list(manifest_objects(str(body.get("manifest") or ""), label))
    except (ValueError, yaml.YAMLError) as exc:
        log.warning("%s: release record not readable: %s", label, exc)
        raise ValueError(f"{label}: release record not readable ({exc})") from exc
    uses = []
    for obj in objects:
        source = f", {obj.helm_source}" if obj.helm_source else ""
        where = f"{label}: {_named(obj.kind, obj.namespace, obj.name)}{source}"
        uses.append(Use(obj.api_version, obj.kind, where, "helm"))
    return uses


def helm_findings(release_secrets: Iterable[Mapping[str, Any]], target: str) -> list[Finding]:
    """Findings from Helm v3 release Secrets (raw JSON); only each release's latest revision counts."""
    uses, unreadable = _helm_uses_of(latest_releases(convert(s, HelmSecret) for s in release_secrets))
    findings = classify(uses, target)
    if unreadable:
        findings.append(_unreadable_helm(unreadable))
    return findings


def _helm_uses_of(releases: Iterable[HelmSecret]) -> tuple[list[Use], list[str]]:
    """The API uses of these releases (each one's latest revision), and why each release that
    could not be read could not."""
    uses: list[Use] = []
    unreadable: list[str] = []
    for secret in releases:
        try:
            uses.extend(helm_uses(secret))
        except ValueError as exc:
            unreadable.append(str(exc))
    return uses, unreadable


def _unreadable_helm(unreadable: list[str]) -> Finding:
    return _unreadable(
        "helm",
        "Helm release record(s)",
        unreadable,
        why="A release whose stored manifest names a removed API cannot be upgraded by Helm.",
        fix="Look at the release with `helm get manifest RELEASE -n NAMESPACE`.",
    )


def _unreadable(signal: str, what: str, unreadable: list[str], *, why: str, fix: str) -> Finding:
    """API003: the `what` (Helm records, manifest files) that could not be read, so were not checked."""
    return Finding(
        id=API_UNREADABLE,
        severity=RECOMMENDED,
        title=f"{len(unreadable)} {what} could not be read, so were not checked",
        objects=tuple(unreadable),
        why=why,
        fix=fix,
        source=SIGNALS[signal],
    )


# ---- manifest files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestObject:
    api_version: str
    kind: str
    namespace: str
    name: str
    line: int  # 1-based line of the object's first key
    helm_source: str = ""  # the `# Source:` comment Helm writes above each template's output


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)


def _get(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                found: yaml.Node = v
                return found
    return None


def _text(node: yaml.Node | None) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else ""


def _objects_in(node: yaml.Node) -> Iterator[yaml.MappingNode]:
    if not isinstance(node, yaml.MappingNode):
        return
    items = _get(node, "items")
    kind = _text(_get(node, "kind"))
    if kind.endswith("List") and isinstance(items, yaml.SequenceNode):
        for item in items.value:
            yield from _objects_in(item)
    else:
        yield node


def manifest_objects(text: str, path: str) -> Iterator[ManifestObject]:
    """Every object of a YAML text (multi-document, `List` kinds expanded) with its line. Raises
    yaml.YAMLError when the text is not YAML."""
    sources = [(text.count("\n", 0, m.start()), m.group(1).strip()) for m in _SOURCE.finditer(text)]
    for document in yaml.compose_all(text, Loader=_LOADER):
        if document is None:
            continue
        for node in _objects_in(document):
            api_version, kind = _text(_get(node, "apiVersion")), _text(_get(node, "kind"))
            if not api_version or not kind:
                continue
            meta = _get(node, "metadata")
            line = node.start_mark.line
            source = next((s for at, s in reversed(sources) if at < line), "")
            yield ManifestObject(
                api_version=api_version,
                kind=kind,
                namespace=_text(_get(meta, "namespace")) if meta is not None else "",
                name=(_text(_get(meta, "name")) or _text(_get(meta, "generateName")))
                if meta is not None
                else "",
                line=line + 1,
                helm_source=source,
            )


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(paths: Sequence[Path]) -> list[Path]:
    """Files named, and YAML/JSON files under directories named (hidden folders skipped), sorted;
    a path that does not exist is a usage error (`-`, standard input, always does)."""
    missing = [str(p) for p in paths if p != STDIN and not p.exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    found: list[Path] = []
    for path in paths:
        if path != STDIN and path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix.lower() in MANIFEST_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            found.append(path)
    return found


#: The path that stands for standard input (`--manifests -`); its objects are named `stdin:LINE …`.
STDIN = Path("-")


def manifest_findings(paths: Sequence[Path], target: str, *, stdin: str | None = None) -> list[Finding]:
    """Findings over manifest files and directories; objects named `file:line Kind ns/name`.
    `-` among the paths is the multi-document YAML text `stdin` (a `helm template` piped in).
    A missing path is a usage error; a file that is not YAML is named in an API003 finding."""
    target_minor(target)
    uses: list[Use] = []
    unreadable: list[str] = []
    for path in manifest_files(paths):
        try:
            if path == STDIN:
                text, path = stdin or "", Path("stdin")
            else:
                text = path.read_text(encoding="utf-8")
            objects = list(manifest_objects(text, str(path)))
        except (OSError, UnicodeDecodeError) as exc:
            unreadable.append(f"{path}: {exc}")
            continue
        except yaml.YAMLError as exc:
            slip = read_slip(exc, text, str(path))
            where = f"{path}:{slip.line}:{slip.column}" if slip is not None else str(path)
            unreadable.append(f"{where}: not YAML: {slip.reading if slip is not None else exc}")
            continue
        for obj in objects:
            where = f"{path}:{obj.line} {_named(obj.kind, obj.namespace, obj.name)}"
            uses.append(Use(obj.api_version, obj.kind, where, "manifest"))
    findings = classify(uses, target)
    if unreadable:
        findings.append(
            _unreadable(
                "manifest",
                "manifest file(s)",
                unreadable,
                why="A file that is not YAML (a Helm template, say) may still name a removed API.",
                fix="Render templates first (helm template …) and check the output, or fix the file.",
            )
        )
    return findings


# ---- the cluster ----------------------------------------------------------------------------------

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PageLike(Protocol[T_co]):
    @property
    def items(self) -> Sequence[T_co]: ...


class ApiReader(Protocol):
    """What `cluster_api_findings` needs of the kube adapter's `Cluster`."""

    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes: ...

    def get_json(self, path: str, query: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500, item_type: type[T]
    ) -> Iterator[PageLike[T]]: ...


def cluster_api_findings(
    reader: ApiReader,
    target: str,
    *,
    now: float | None = None,
    notes: list[str] | None = None,
) -> list[Finding]:
    """Read the metric, the applied kinds and the Helm releases, and merge them into one finding
    per removed or deprecated group-version-kind. `now` (Unix seconds) dates the metric; `notes`
    receives the data's version and whatever could not be read (forbidden, not served)."""
    target_minor(target)
    said = notes if notes is not None else []
    said.append(describe_data())
    data = schema_data()
    if data.last is not None and target_minor(target) > data.last:
        said.append(
            f"target {target} is newer than the API data (1.{data.last}): removals after 1.{data.last} are not known"
        )
    uses: list[Use] = []
    # The metric first: nothing the bot reads afterwards goes through a deprecated version, but
    # the order makes that obvious.
    try:
        text = reader.get_raw("/metrics").decode("utf-8", "replace")
    except ClusterUnreachable:
        raise
    except ClusterError as exc:
        said.append(f"apiserver metric not read: {exc}")
    else:
        started = process_start(text)
        age = kubectl_age_seconds(now - started) if now is not None and started is not None else ""
        uses.extend(metric_uses(text, target, age=age))
    skipped: list[str] = []
    try:
        readable = served_kinds(reader, APPLIED_KINDS)
    except ClusterUnreachable:
        raise
    except ClusterError as exc:
        said.append(f"API discovery failed, last-applied/managedFields not read: {_reason(exc)}")
        readable = []
    for kind in readable:
        try:
            for page in reader.list_pages(kind.path, item_type=AppliedItem):
                for item in page.items:
                    uses.extend(applied_uses(item, kind.kind))
        except ClusterUnreachable:
            raise
        except ClusterError as exc:
            if exc.status == 404:
                continue  # not served by this cluster's version: nothing of it to find
            skipped.append(f"{kind.resource}.{kind.group_version} ({_reason(exc)})")
    if skipped:
        said.append("not read for last-applied/managedFields: " + ", ".join(skipped))
    try:
        helm, unreadable = _helm_uses_of(listed_releases(reader))
        uses.extend(helm)
    except ClusterUnreachable:
        raise
    except ClusterError as exc:
        said.append(f"Helm releases not read: {_reason(exc)}")
        unreadable = []
    findings = classify(uses, target)
    if unreadable:
        findings.append(_unreadable_helm(unreadable))
    return findings


def served_kinds(reader: ApiReader, kinds: Sequence[AppliedKind]) -> list[AppliedKind]:
    """The kinds this cluster serves, from discovery: one `/apis` and one document per
    group-version, instead of a 404 per kind an older (or smaller) cluster does not have."""
    groups = reader.get_json("/apis").get("groups") or []
    offered = {v.get("groupVersion") for g in groups for v in g.get("versions") or []} | {"v1"}
    resources: dict[str, set[str]] = {}
    for group_version in sorted({k.group_version for k in kinds} & offered):
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        try:
            listed = reader.get_json(path).get("resources") or []
        except ClusterUnreachable:
            raise
        except ClusterError:
            continue  # removed between the two reads, or not discoverable: nothing to list
        resources[group_version] = {str(r.get("name")) for r in listed}
    return [k for k in kinds if k.resource in resources.get(k.group_version, set())]


def _reason(exc: ClusterError) -> str:
    return "forbidden" if exc.status == 403 else str(exc)


def kubectl_age_seconds(seconds: float) -> str:
    return kubectl_age(timedelta(seconds=max(0.0, seconds)))
