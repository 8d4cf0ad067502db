"""The OCI distribution API, as IMG001 asks it: does this image's manifest exist in its registry?

One call per image, `HEAD /v2/NAME/manifests/REFERENCE`, with the Accept headers of every manifest
kind a node may pull (OCI index and manifest, Docker manifest list and v2 manifest): a registry
answers 404 for a kind it was not asked for, so leaving one out would report a present image as
missing. A registry that wants authentication answers 401 with a challenge:
- `Bearer realm=…,service=…,scope=…` (Docker Hub, ECR, Artifactory, distribution's token auth):
  the client asks the realm for a token — anonymously, or with the Basic credentials of the
  registry's host from a docker `config.json` — and sends the HEAD again with it;
- `Basic realm=…` (distribution's htpasswd): the credentials go with the HEAD itself.

The answer is `present` (with the digest), `missing` (404), `denied` (401/403 even after
authenticating: the credentials do not reach the image) or `unreachable` (a connection that
failed, timed out or answered 5xx or nonsense). Only `present` and `missing` are facts about the
image; the check reports the other two as "could not verify", never as a pass.

Plain HTTP is used for loopback registries (as Docker does) and for hosts named in `insecure`;
`endpoints` maps a registry host to another base URL (a mirror, or the simulator's /v2 facade);
`*` there stands for every other host (a rehearsal sends every image to the simulator).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: Every manifest media type a node may pull, best first (a registry picks what it has).
MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
DOCKER_HUB = "docker.io"
#: Where Docker Hub's API answers (its images are named `docker.io/…` or with no registry at all).
DOCKER_HUB_API = "registry-1.docker.io"
DEFAULT_TIMEOUT = 10.0

Status = Literal["present", "missing", "denied", "unreachable"]


@dataclass(frozen=True, kw_only=True)
class ImageRef:
    """An image reference split as the distribution API needs it."""

    registry: str  # host[:port], `docker.io` for Docker Hub
    repository: str  # `eks/kube-proxy`, `library/nginx`
    reference: str  # a tag, or a digest (`sha256:…`)

    def __str__(self) -> str:
        sep = "@" if self.reference.startswith("sha256:") else ":"
        return f"{self.registry}/{self.repository}{sep}{self.reference}"


_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


def parse_image(text: str) -> ImageRef:
    """`602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/kube-proxy:v1.29.15-eksbuild.16`,
    `nginx` (Docker Hub's `library/nginx:latest`), `host:5000/a/b@sha256:…`; a ValueError says why
    a text is not an image reference."""
    name = text.strip()
    digest = ""
    if "@" in name:
        name, digest = name.split("@", 1)
        if not _DIGEST.match(digest):
            raise ValueError(f"{text[:120]!r}: the digest is not sha256:<64 hex digits>")
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
        if not _TAG.match(tag):
            raise ValueError(f"{text[:120]!r}: {tag[:60]!r} is not a tag")
    first, _, rest = name.partition("/")
    # Docker's rule: the first part is a registry when it has a dot or a port, or is localhost.
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = DOCKER_HUB, name
        if "/" not in repository:
            repository = f"library/{repository}"
    if not _REPOSITORY.match(repository):
        raise ValueError(f"{text[:120]!r}: {repository[:80]!r} is not a repository name")
    return ImageRef(registry=registry, repository=repository, reference=digest or tag or "latest")


@dataclass(frozen=True, kw_only=True)
class Answer:
    status: Status
    #: Why, for people: the HTTP status and the registry's words, or the connection's error.
    detail: str = ""
    digest: str = ""


def load_docker_config(path: Path) -> dict[str, tuple[str, str]]:
    """The `auths` of a docker `config.json`: registry host → (user, password). Entries with
    `auth` (base64 of `user:password`) or `username`/`password`; keys may be URLs
    (`https://index.docker.io/v1/` is Docker Hub). Credential helpers (`credsStore`) are not run.
    A ValueError names what is wrong, never the secret."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read a docker config.json ({type(exc).__name__})") from None
    auths = data.get("auths") if isinstance(data, dict) else None
    if not isinstance(auths, dict):
        return {}
    out: dict[str, tuple[str, str]] = {}
    for key, entry in auths.items():
        if not isinstance(entry, dict):
            continue
        host = _config_host(str(key))
        if isinstance(entry.get("auth"), str) and entry["auth"]:
            try:
                user, sep, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise ValueError(f"{path}: auths[{key!r}].auth is not base64 of user:password") from None
            if not sep:
                raise ValueError(f"{path}: auths[{key!r}].auth is not base64 of user:password")
            out[host] = (user, password)
        elif isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
            out[host] = (entry["username"], entry["password"])
    return out


def _config_host(key: str) -> str:
    host = urllib.parse.urlsplit(key).netloc if "://" in key else key.split("/", 1)[0]
    return DOCKER_HUB if host in ("index.docker.io", DOCKER_HUB_API) else host


_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="…",service="…",scope="…"` → ("bearer", {realm, service, scope})."""
    scheme, _, params = header.strip().partition(" ")
    return scheme.lower(), {k.lower(): v for k, v in _CHALLENGE.findall(params)}


def _loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    return name in ("localhost", "[::1]") or name.startswith("127.")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A HEAD that is redirected (a registry's storage) still answered: 3xx counts as present."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@dataclass
class RegistryClient:
    """Asks registries whether manifests exist (see the module docstring)."""

    credentials: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    insecure: Collection[str] = ()
    endpoints: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    _tokens: dict[tuple[str, str, str], str] = field(default_factory=dict, repr=False)
    #: Registries that could not be asked, with why: their other images are not waited for again
    #: (a registry that drops packets would cost `timeout` per image).
    _down: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoRedirect())

    def base_url(self, registry: str) -> str:
        endpoint = self.endpoints.get(registry) or self.endpoints.get("*")
        if endpoint:
            return endpoint.rstrip("/")
        host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        scheme = "http" if _loopback(host) or registry in self.insecure else "https"
        return f"{scheme}://{host}"

    def ask(self, image: str) -> Answer:
        """`manifest` for an image reference's text; a ValueError says why it is not one."""
        return self.manifest(parse_image(image))

    def manifest(self, image: ImageRef) -> Answer:
        """Whether `image`'s manifest exists (see `Answer`); never raises for what a registry or
        the network does."""
        url = f"{self.base_url(image.registry)}/v2/{image.repository}/manifests/{image.reference}"
        if image.registry in self._down:
            return Answer(status="unreachable", detail=self._down[image.registry])
        try:
            status, headers = self._head(url, self._cached_auth(image))
            if status == 401:
                auth = self._authenticate(image, headers.get("www-authenticate", ""))
                if auth is None:
                    return Answer(status="denied", detail=f"HTTP 401: {self._denied(image, headers)}")
                status, headers = self._head(url, auth)
        except RegistryUnreachable as exc:
            log.info("registry %s: %s", image.registry, exc)
            self._down[image.registry] = str(exc)
            return Answer(status="unreachable", detail=str(exc))
        if 200 <= status < 400:
            return Answer(
                status="present", detail=f"HTTP {status}", digest=headers.get("docker-content-digest", "")
            )
        if status == 404:
            return Answer(status="missing", detail="HTTP 404: no such manifest")
        if status in (401, 403):
            return Answer(status="denied", detail=f"HTTP {status}: {self._denied(image, headers)}")
        return Answer(status="unreachable", detail=f"HTTP {status} from {image.registry}")

    def _denied(self, image: ImageRef, headers: Mapping[str, str]) -> str:
        if image.registry in self.credentials:
            return f"the credentials for {image.registry} were refused"
        scheme, _ = parse_challenge(headers.get("www-authenticate", ""))
        return (
            f"{image.registry} wants {scheme or 'authentication'} credentials and the docker config has none"
        )

    def _cached_auth(self, image: ImageRef) -> str | None:
        scope = f"repository:{image.repository}:pull"
        return next(
            (
                f"Bearer {t}"
                for (reg, _, s), t in self._tokens.items()
                if reg == image.registry and s == scope
            ),
            None,
        )

    def _authenticate(self, image: ImageRef, challenge: str) -> str | None:
        """The Authorization header that answers `challenge`, or None when there is none to give."""
        scheme, params = parse_challenge(challenge)
        creds = self.credentials.get(image.registry)
        basic = "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode() if creds else None
        if scheme == "basic":
            return basic
        if scheme != "bearer" or not params.get("realm"):
            return None
        scope = params.get("scope") or f"repository:{image.repository}:pull"
        query = {"scope": scope, **({"service": params["service"]} if params.get("service") else {})}
        url = f"{params['realm']}{'&' if '?' in params['realm'] else '?'}{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, method="GET")
        if basic:
            request.add_header("Authorization", basic)
        body = self._send(request, what="token")
        if body is None:
            return None
        try:
            data = json.loads(body)
            token = str(data.get("token") or data.get("access_token") or "")
        except (json.JSONDecodeError, AttributeError):
            raise RegistryUnreachable(
                f"the token service {params['realm']} answered something that is not JSON"
            ) from None
        if not token:
            return None
        self._tokens[(image.registry, params.get("service", ""), scope)] = token
        return f"Bearer {token}"

    def _head(self, url: str, auth: str | None) -> tuple[int, Mapping[str, str]]:
        request = urllib.request.Request(url, method="HEAD", headers={"Accept": MANIFEST_ACCEPT})
        if auth:
            request.add_header("Authorization", auth)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return int(response.status), _lower(response.headers.items())
        except urllib.error.HTTPError as exc:
            return int(exc.code), _lower(exc.headers.items()) if exc.headers else {}
        except (urllib.error.URLError, OSError, HTTPException, ValueError) as exc:
            raise RegistryUnreachable(_reason(url, exc)) from None

    def _send(self, request: urllib.request.Request, *, what: str) -> bytes | None:
        """A token request's body; None when the service refuses the credentials (401/403)."""
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return bytes(response.read(1 << 20))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return None
            raise RegistryUnreachable(
                f"the {what} service {request.full_url.split('?')[0]} answered HTTP {exc.code}"
            ) from None
        except (urllib.error.URLError, OSError, HTTPException, ValueError) as exc:
            raise RegistryUnreachable(_reason(request.full_url.split("?")[0], exc)) from None


def _lower(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-case name (Go writes `Www-Authenticate`, others `WWW-Authenticate`)."""
    return {k.lower(): v for k, v in items}


class RegistryUnreachable(Exception):
    """The registry (or its token service) could not be asked."""


def _reason(url: str, exc: BaseException) -> str:
    inner = getattr(exc, "reason", None) or exc
    host = urllib.parse.urlsplit(url).netloc
    return f"{host}: {type(inner).__name__}: {inner}"[:300]
