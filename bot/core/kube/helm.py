"""Helm v3 release records as the cluster stores them: Secret `sh.helm.release.v1.NAME.vN`, type
`helm.sh/release.v1`, whose `release` is base64 (Helm's own, inside the Secret's), gzip, JSON. The
removed-API check reads their manifests (`core/checks/apis.py`) and a snapshot keeps what they say
of old APIs (`core/snapshots/apiuse.py`), so both decode them here."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import msgspec

HELM_SECRET_TYPE = "helm.sh/release.v1"
#: Where release records are listed from, and how: release records can approach a megabyte each,
#: so small pages bound the memory.
HELM_SECRETS_PATH = "/api/v1/secrets"
HELM_SELECTOR = {"labelSelector": "owner=helm"}
HELM_PAGE = 20


class _HelmLabels(msgspec.Struct):
    name: str = ""
    version: str = ""
    status: str = ""


class _HelmMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    labels: _HelmLabels = msgspec.field(default_factory=_HelmLabels)


class _HelmData(msgspec.Struct):
    release: str = ""


class HelmSecret(msgspec.Struct):
    """A Secret reduced to what a Helm v3 release record needs."""

    type: str = ""
    metadata: _HelmMeta = msgspec.field(default_factory=_HelmMeta)
    data: _HelmData = msgspec.field(default_factory=_HelmData)


_HELM_NAME = re.compile(r"^sh\.helm\.release\.v1\.(?P<name>.+)\.v(?P<rev>\d+)$")


def release_of(secret: HelmSecret) -> tuple[str, str, int] | None:
    """(namespace, release, revision) of a Helm release Secret, None for any other Secret."""
    m = _HELM_NAME.match(secret.metadata.name)
    if secret.type != HELM_SECRET_TYPE or m is None:
        return None
    release = secret.metadata.labels.name or m.group("name")
    try:
        revision = int(secret.metadata.labels.version or m.group("rev"))
    except ValueError:
        revision = int(m.group("rev"))
    return secret.metadata.namespace, release, revision


def latest_releases(secrets: Iterable[HelmSecret]) -> list[HelmSecret]:
    """The newest revision of each release (older revisions are history, not what is deployed);
    releases uninstalled with --keep-history are left out."""
    newest: dict[tuple[str, str], tuple[int, HelmSecret]] = {}
    for secret in secrets:
        rev = release_of(secret)
        if rev is None:
            continue
        key = rev[:2]
        if key not in newest or rev[2] > newest[key][0]:
            newest[key] = (rev[2], secret)
    return [s for _, s in (newest[k] for k in sorted(newest)) if s.metadata.labels.status != "uninstalled"]


class SecretLister(Protocol):
    """What `listed_releases` needs of the kube adapter's `Cluster`."""

    def list_pages(
        self, path: str, query: Mapping[str, Any] | None = None, *, limit: int = 500, item_type: type[Any]
    ) -> Iterator[Any]: ...


def listed_releases(reader: SecretLister) -> list[HelmSecret]:
    """The latest revision of each release the cluster holds (`latest_releases`), listed in pages
    of `HELM_PAGE`; a ClusterError as the listing raised it."""
    pages = reader.list_pages(HELM_SECRETS_PATH, HELM_SELECTOR, limit=HELM_PAGE, item_type=HelmSecret)
    return latest_releases(item for page in pages for item in page.items)


def decode_release(secret_data: str) -> dict[str, Any]:
    """Secret data → release JSON: base64 (the Secret's), base64 (Helm's), gzip (if its magic is
    there: Helm writes it, older tools did not), JSON. Raises ValueError when it is none of that."""
    try:
        raw = base64.b64decode(base64.b64decode(secret_data, validate=True), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"bad gzip: {exc}") from exc
    loaded = json.loads(raw)
    if not isinstance(loaded, dict):
        raise ValueError("not a release object")
    return loaded
