"""What the cluster says of old APIs, kept in a snapshot (`snap["api_uses"]`) so that a twin of the
cluster gives the removed-API check (`core/checks/apis.py`) the same findings. The check's four
signals on a cluster, each kept as far as it names an API version before GA (alpha or beta: the
versions Kubernetes deprecates and removes):

- `calls`: the samples of `apiserver_requested_deprecated_apis` (group, version, resource,
  subresource, removed_release) that counted a request;
- `helm`: each Helm release's latest revision (namespace, name, revision, chart) with only the
  documents of its stored manifest on such a version (the rest of a chart is neither read nor kept);
- `applied`: each object of the applied kinds whose last-applied configuration or managedFields
  name such a version, pruned to its kind, name, labels, spec, that configuration's apiVersion and
  kind, and those managedFields entries (manager, operation, apiVersion).

Whatever could not be read is a gap, as for the other lists. A snapshot from before this section
has none: its twin has no old API uses.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

import msgspec

from bot.core.kube.applied import APPLIED_KINDS
from bot.core.kube.helm import (
    HelmSecret,
    decode_release,
    listed_releases,
    release_of,
)
from bot.errors import ClusterError, ClusterUnreachable

log = logging.getLogger(__name__)

METRIC = "apiserver_requested_deprecated_apis"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: A version before GA: `v1beta1`, `v2alpha1`.
_PRE_GA = re.compile(r"^v\d+(alpha|beta)\d*$")
_SAMPLE = re.compile(r"^" + METRIC + r"\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_DOCUMENT = re.compile(r"^---[ \t]*$", re.MULTILINE)
_API_VERSION = re.compile(r"^apiVersion:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)


class EvidenceReader(Protocol):
    def get_raw(self, path: str, query: Mapping[str, Any] | None = None) -> bytes: ...

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500, item_type: type[Any]
    ) -> Iterator[Any]: ...


def pre_ga(group_version: str) -> bool:
    return bool(_PRE_GA.match(group_version.rsplit("/", 1)[-1]))


def api_uses(
    reader: EvidenceReader,
    served: list[str],
    gap: Callable[[str, ClusterError], None],
    *,
    listed: Mapping[str, list[dict[str, Any]]] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The three signals' old API uses, read from the cluster; `served` are its group-versions.

    `listed` are the applied records (`applied_in`) of the kinds the caller's own lists read
    already, by list path: those kinds are not listed a second time."""
    listed = listed or {}
    out: dict[str, list[dict[str, Any]]] = {"calls": [], "helm": [], "applied": []}
    with _gap_on_error(gap, "apiserver metrics"):
        out["calls"] = calls(reader.get_raw("/metrics").decode("utf-8", "replace"))
    for kind in APPLIED_KINDS:
        if kind.group_version not in served:
            continue
        if kind.path in listed:
            out["applied"].extend(listed[kind.path])
            continue
        # A kind this cluster's version does not serve (404) has nothing to read: no gap.
        with _gap_on_error(gap, f"{kind.resource}.{kind.group_version}", unsaid=404):
            for page in reader.list_pages(kind.path, item_type=msgspec.Raw):
                for item in page.items:
                    record = applied_in(item, kind.group_version, kind.kind)
                    if record is not None:
                        out["applied"].append(record)
    # Listing Secrets is an opt-in role (the chart's `helmReleases: true`): a bot without it
    # reads no release, as its check does (which says so in its own note), and the snapshot
    # has no gap of its own for it.
    with _gap_on_error(gap, "helm releases", unsaid=403):
        for secret in listed_releases(reader):
            release = helm_release(secret)
            if release is not None:
                out["helm"].append(release)
    return out


@contextmanager
def _gap_on_error(
    gap: Callable[[str, ClusterError], None], what: str, *, unsaid: int | None = None
) -> Iterator[None]:
    """A read of `what` that fails is a gap of the snapshot (what was read before the error is
    kept), unless it failed with the status `unsaid`; an unreachable cluster ends the snapshot."""
    try:
        yield
    except ClusterUnreachable:
        raise
    except ClusterError as exc:
        if exc.status != unsaid:
            gap(what, exc)


def calls(metrics_text: str) -> list[dict[str, Any]]:
    """The metric's samples that counted a request, as their labels."""
    out = []
    for line in metrics_text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            if float(m.group("value")) <= 0:
                continue
        except ValueError:
            continue
        labels = dict(_LABEL.findall(m.group("labels")))
        out.append(
            {k: labels.get(k, "") for k in ("group", "version", "resource", "subresource", "removed_release")}
        )
    return sorted(out, key=lambda c: tuple(c.values()))


def helm_release(secret: HelmSecret) -> dict[str, Any] | None:
    """A release's latest revision with the documents of its manifest on a pre-GA version (None
    when it has none, or cannot be read: the check says so of it, from the cluster)."""
    rev = release_of(secret)
    if rev is None:
        return None
    namespace, name, revision = rev
    try:
        body = decode_release(secret.data.release)
    except (ValueError, json.JSONDecodeError) as exc:
        log.info("Helm release %s/%s revision %s not readable: %s", namespace, name, revision, exc)
        return None
    documents = [
        doc.strip("\n")
        for doc in _DOCUMENT.split(str(body.get("manifest") or ""))
        if (m := _API_VERSION.search(doc)) is not None and pre_ga(m.group(1))
    ]
    if not documents:
        return None
    chart = (body.get("chart") or {}).get("metadata") or {}
    return {
        "namespace": namespace,
        "name": name,
        "revision": revision,
        "chart": str(chart.get("name") or name),
        "chart_version": str(chart.get("version") or ""),
        "app_version": str(chart.get("appVersion") or ""),
        "manifest": "".join(f"---\n{doc}\n" for doc in documents),
    }


class _Manager(msgspec.Struct):
    manager: str = ""
    operation: str = ""
    apiVersion: str = ""


class _AppliedMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    managedFields: list[_Manager] | None = None


class _Applied(msgspec.Struct):
    metadata: _AppliedMeta = msgspec.field(default_factory=_AppliedMeta)
    spec: Any = None


def applied(obj: _Applied, api_version: str, kind: str) -> dict[str, Any] | None:
    """The object (listed through `api_version`: a list's items say no kind) pruned to what the
    check and a twin need, when it names a pre-GA version."""
    meta = obj.metadata
    record: dict[str, Any] = {}
    text = (meta.annotations or {}).get(LAST_APPLIED)
    if text:
        try:
            head = json.loads(text)
        except json.JSONDecodeError:
            head = None
        if isinstance(head, dict) and pre_ga(str(head.get("apiVersion") or "")):
            record["last_applied"] = {
                "apiVersion": str(head["apiVersion"]),
                "kind": str(head.get("kind") or ""),
            }
    managers = [
        {"manager": m.manager, "operation": m.operation, "apiVersion": m.apiVersion}
        for m in meta.managedFields or ()
        if pre_ga(m.apiVersion)
    ]
    if managers:
        record["managed_fields"] = managers
    if not record:
        return None
    slim: dict[str, Any] = {"name": meta.name}
    if meta.namespace:
        slim["namespace"] = meta.namespace
    if meta.labels:
        slim["labels"] = dict(meta.labels)
    manifest: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": slim}
    if obj.spec is not None:
        manifest["spec"] = obj.spec
    return {"manifest": manifest, **record}


_APPLIED = msgspec.json.Decoder(_Applied)


def applied_in(raw: msgspec.Raw | bytes, api_version: str, kind: str) -> dict[str, Any] | None:
    """`applied` of an object still in its JSON. Most objects name no version before GA at all:
    neither their managedFields nor their last-applied configuration (JSON inside a string, which
    the API server writes with its letters unescaped) has `alpha` or `beta` anywhere in its bytes,
    and those are not decoded (their managedFields were most of the cost of this scan)."""
    data = memoryview(raw).tobytes() if isinstance(raw, msgspec.Raw) else raw
    if b"alpha" not in data and b"beta" not in data:
        return None
    return applied(_APPLIED.decode(data), api_version, kind)
