"""The simulator's OCI registry facade on `/v2`: what IMG001 asks, answered as distribution v3 does.

A rehearsal or a test points `checks.images.endpoints` at the simulator (`{registry host:
sim URL}`), so the bot's real registry client asks here instead of the network. The facade holds
every image the scenario's workloads ran when it was built (a cluster's images were pulled from
somewhere) and whatever `publish` adds; a tag the scenario never ran — the next version's
kube-proxy — is missing until a test publishes it, as it is in a registry nobody pushed to.

Only the calls the client makes are served, with the real registry's answers (held to them by
tests/test_registry_contract.py): `GET|HEAD /v2/` (200, `{}`), and `GET|HEAD
/v2/NAME/manifests/REFERENCE` (200 with the manifest, its media type and `Docker-Content-Digest`;
404 `MANIFEST_UNKNOWN` for a tag or digest it does not have, in a repository it has or not, as
distribution's filesystem storage answers). Registry hosts are not told apart: the path is the
repository.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from bot.sim.apiserver.server import Raw, SimHTTPServer
from bot.sim.apiserver.store import Store

PREFIX = "/v2"
MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
#: The workload kinds whose pod templates name the images a cluster pulled.
WORKLOAD_BUCKETS = (
    "deployments.apps",
    "daemonsets.apps",
    "statefulsets.apps",
    "cronjobs.batch",
    "jobs.batch",
)
_MANIFESTS = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<reference>[^/]+)$")
_API_VERSION = {"Docker-Distribution-Api-Version": "registry/2.0"}


def _split(image: str) -> tuple[str, str]:
    """`host/eks/kube-proxy:v1` → ("eks/kube-proxy", "v1"); the registry host is dropped."""
    name, _, digest = image.partition("@")
    tag = ""
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest
    elif "/" not in name:
        name = f"library/{name}"
    return name, digest or tag or "latest"


def _images_in(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (str(c["image"]) for c in value if isinstance(c, dict) and c.get("image"))
            else:
                yield from _images_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images_in(item)


class Registry:
    """The images the facade has: repository → tag → manifest bytes."""

    def __init__(self, images: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._repos: dict[str, dict[str, bytes]] = {}
        for image in images:
            self.publish(image)

    @classmethod
    def from_store(cls, store: Store) -> Registry:
        images: list[str] = []
        for bucket in WORKLOAD_BUCKETS:
            if bucket in store.buckets:
                for obj in store.objects(bucket):
                    images.extend(_images_in(obj.get("spec") or {}))
        return cls(images)

    def publish(self, image: str) -> str:
        """Adds `image` (a tag: a small OCI manifest of its own); its digest."""
        name, reference = _split(image)
        config = hashlib.sha256(f"{name}:{reference}".encode()).hexdigest()
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_TYPE,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": f"sha256:{config}",
                    "size": 2,
                },
                "layers": [],
            },
            separators=(",", ":"),
        ).encode()
        with self._lock:
            self._repos.setdefault(name, {})[reference] = manifest
        return "sha256:" + hashlib.sha256(manifest).hexdigest()

    def manifest(self, name: str, reference: str) -> bytes | None:
        """The manifest of `name` at a tag or digest; None when there is none."""
        with self._lock:
            tags = self._repos.get(name) or {}
            if reference.startswith("sha256:"):
                return next(
                    (m for m in tags.values() if "sha256:" + hashlib.sha256(m).hexdigest() == reference), None
                )
            return tags.get(reference)


def _error(code: str, message: str, detail: Any) -> Raw:
    body = json.dumps({"errors": [{"code": code, "message": message, "detail": detail}]}).encode()
    return Raw(body=body, content_type="application/json", headers=dict(_API_VERSION))


def handle(registry: Registry, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
    if method != "GET":  # HEAD arrives as GET; the server leaves the body out
        return 405, _error("UNSUPPORTED", "The operation is unsupported.", {})
    if path.rstrip("/") == PREFIX:
        return 200, Raw(body=b"{}", content_type="application/json", headers=dict(_API_VERSION))
    m = _MANIFESTS.match(path)
    if m is None:
        return 404, _error("UNSUPPORTED", "The operation is unsupported.", {})
    name, reference = m.group("name"), m.group("reference")
    found = registry.manifest(name, reference)
    if found is None:
        detail = (
            f"unknown manifest name={name} revision={reference}"
            if reference.startswith("sha256:")
            else f"unknown tag={reference}"
        )
        return 404, _error("MANIFEST_UNKNOWN", "manifest unknown", detail)
    digest = "sha256:" + hashlib.sha256(found).hexdigest()
    return 200, Raw(
        body=found,
        content_type=MEDIA_TYPE,
        headers={**_API_VERSION, "Docker-Content-Digest": digest, "Etag": f'"{digest}"'},
    )


def register(server: SimHTTPServer, registry: Registry) -> None:
    server.add_route(PREFIX, lambda method, path, query, body: handle(registry, method, path, query, body))
