"""The real OCI registry (distribution v3) for IMG001's tests, on a loopback port.

The binary is built by `scripts/registry/build` into `.cache/registry/<hash of pins.env>/bin`;
`bin_dir()` finds it by the same hash. Without it the `oci_registry` fixture skips locally with
the reason, and fails under CI (`CI=true`), where a missing binary is a defect (scripts/test
builds it).

`oci_registry()` starts an open registry; `oci_registry(token=True)` starts one that answers 401
with a Bearer challenge whose realm is `TokenServer`, a small loopback token service (the
registry itself is the real one: it verifies the token's EdDSA signature against the JWKS file
the fixture writes, its issuer, audience, expiry and the access it grants). The token service
grants pull (and push) to anonymous callers only when `anonymous=True`, and to `USER`/`PASSWORD`
always, as a registry behind Artifactory or ECR does for a docker login.

`push(...)` puts a small image (one config blob, a manifest) with the distribution API itself,
so a test names tags that exist and tags that do not.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "scripts" / "registry" / "pins.env"
START_TIMEOUT = 60.0
USER = "ci-puller"
PASSWORD = "not-a-real-secret-1"
SERVICE = "upgrade-bot-test-registry"
ISSUER = "upgrade-bot-test-token-service"
KEY_ID = "test-key-1"


def bin_dir(repo: Path = REPO) -> Path:
    """Where scripts/registry/build puts the binary (same hash as the script)."""
    digest = hashlib.sha256(PINS.read_bytes()).hexdigest()[:12]
    return repo / ".cache" / "registry" / digest / "bin"


def missing_binary(directory: Path | None = None) -> bool:
    return not os.access((directory or bin_dir()) / "registry", os.X_OK)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----- Ed25519 (RFC 8032 §6), to sign the tokens: the venv has no crypto library, and the
# registry accepts EdDSA tokens whose key it reads from a JWKS file. -----------------------------

_P = 2**255 - 19
_Q = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
Point = tuple[int, int, int, int]


def _add(a: Point, b: Point) -> Point:
    x = (a[1] - a[0]) * (b[1] - b[0]) % _P
    y = (a[1] + a[0]) * (b[1] + b[0]) % _P
    c = 2 * a[3] * b[3] * _D % _P
    d = 2 * a[2] * b[2] % _P
    e, f, g, h = y - x, d - c, d + c, y + x
    return (e * f, g * h, f * g, e * h)


def _mul(s: int, point: Point) -> Point:
    out: Point = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            out = _add(out, point)
        point = _add(point, point)
        s >>= 1
    return out


def _recover_x(y: int, sign: int) -> int:
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P)
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    return _P - x if (x & 1) != sign else x


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
_G: Point = (_GX, _GY, 1, _GX * _GY % _P)


def _compress(point: Point) -> bytes:
    zinv = pow(point[2], _P - 2, _P)
    x, y = point[0] * zinv % _P, point[1] * zinv % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _expand(secret: bytes) -> tuple[int, bytes]:
    h = hashlib.sha512(secret).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public(secret: bytes) -> bytes:
    return _compress(_mul(_expand(secret)[0], _G))


def ed25519_sign(secret: bytes, message: bytes) -> bytes:
    a, prefix = _expand(secret)
    public = _compress(_mul(a, _G))
    r = int.from_bytes(hashlib.sha512(prefix + message).digest(), "little") % _Q
    big_r = _compress(_mul(r, _G))
    h = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % _Q
    return big_r + int.to_bytes((r + h * a) % _Q, 32, "little")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# ----- the token service ---------------------------------------------------------------------------


@dataclass
class TokenServer:
    """A loopback Docker token service (the `realm` of the registry's Bearer challenge)."""

    anonymous: bool = False
    secret: bytes = field(default_factory=lambda: os.urandom(32))
    #: Every request's (Authorization header or "", query) in order, for the tests to read.
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def jwks(self) -> dict[str, object]:
        x = _b64url(ed25519_public(self.secret))
        return {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": KEY_ID, "alg": "EdDSA"}]}

    def token(self, subject: str, scope: str) -> str:
        access = []
        for one in scope.split(" ") if scope else []:
            kind, _, rest = one.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"alg": "EdDSA", "typ": "JWT", "kid": KEY_ID}
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": _b64url(os.urandom(12)),
            "access": access,
        }
        signing = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        return f"{signing}.{_b64url(ed25519_sign(self.secret, signing.encode()))}"

    def start(self) -> ThreadingHTTPServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                auth = self.headers.get("Authorization", "")
                owner.requests.append((auth, query))
                expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                if auth == expected:
                    subject = USER
                elif not auth and owner.anonymous:
                    subject = ""
                else:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"token": owner.token(subject, query.get("scope", ""))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}/token"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


# ----- the registry --------------------------------------------------------------------------------


@dataclass
class Registry:
    url: str
    host: str  # 127.0.0.1:PORT, as an image names it
    process: subprocess.Popen[bytes]
    log: Path
    workdir: Path
    tokens: TokenServer | None = None
    servers: list[ThreadingHTTPServer] = field(default_factory=list)

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            text = []
        return f"--- registry ({self.log}) ---\n" + "\n".join(text)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def _auth(self, repository: str) -> dict[str, str]:
        if self.tokens is None:
            return {}
        return {"Authorization": f"Bearer {self.tokens.token(USER, f'repository:{repository}:pull,push')}"}

    def push(self, repository: str, tag: str) -> str:
        """A small image at `repository:tag`, pushed with the distribution API; its digest."""
        config = json.dumps(
            {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}
        )
        blob = config.encode()
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        request = urllib.request.Request(
            f"{self.url}/v2/{repository}/blobs/uploads/", method="POST", headers=self._auth(repository)
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            location = urllib.parse.urljoin(self.url, r.headers["Location"])
        sep = "&" if "?" in location else "?"
        request = urllib.request.Request(
            f"{location}{sep}digest={digest}",
            data=blob,
            method="PUT",
            headers={"Content-Type": "application/octet-stream", **self._auth(repository)},
        )
        urllib.request.urlopen(request, timeout=10).close()
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": digest,
                    "size": len(blob),
                },
                "layers": [],
            }
        ).encode()
        request = urllib.request.Request(
            f"{self.url}/v2/{repository}/manifests/{tag}",
            data=manifest,
            method="PUT",
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json", **self._auth(repository)},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            return str(r.headers["Docker-Content-Digest"])


def _wait_ready(registry: Registry) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            raise RuntimeError(f"the registry exited with {registry.process.returncode}\n{registry.tail()}")
        try:
            with urllib.request.urlopen(f"{registry.url}/v2/", timeout=2):
                return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # token auth: up, and asking for a token
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the registry was not ready within {START_TIMEOUT:.0f}s\n{registry.tail()}")


def start_registry(workdir: Path, *, token: bool = False, anonymous: bool = False) -> Registry:
    port = _free_port()
    tokens: TokenServer | None = None
    servers: list[ThreadingHTTPServer] = []
    auth = ""
    if token:
        tokens = TokenServer(anonymous=anonymous)
        servers.append(tokens.start())
        (workdir / "jwks.json").write_text(json.dumps(tokens.jwks()))
        auth = (
            "auth:\n  token:\n"
            f"    realm: {tokens.url}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    jwks: {workdir / 'jwks.json'}\n    signingalgorithms: [EdDSA]\n"
        )
    (workdir / "config.yml").write_text(
        "version: 0.1\n"
        "log: {level: info, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {workdir / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: not-secret-test-only}}\n" + auth
    )
    log = workdir / "registry.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(bin_dir() / "registry"), "serve", str(workdir / "config.yml")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            # The registry reads OTEL_* variables; no exporter is wanted in the tests.
            env={
                **os.environ,
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_METRICS_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
            },
        )
    registry = Registry(
        url=f"http://127.0.0.1:{port}",
        host=f"127.0.0.1:{port}",
        process=process,
        log=log,
        workdir=workdir,
        tokens=tokens,
        servers=servers,
    )
    try:
        _wait_ready(registry)
    except Exception:
        registry.stop()
        raise
    return registry


@pytest.fixture
def oci_registry() -> Iterator[Callable[..., Registry]]:
    """A factory: `oci_registry()` (open) or `oci_registry(token=True, anonymous=False)`."""
    if missing_binary():
        reason = (
            f"the real OCI registry is not built (no registry in {bin_dir()}): run scripts/registry/build"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    started: list[Registry] = []

    def start(*, token: bool = False, anonymous: bool = False) -> Registry:
        workdir = Path(tempfile.mkdtemp(prefix="upgrade-bot-registry-"))
        try:
            registry = start_registry(workdir, token=token, anonymous=anonymous)
        except RuntimeError as exc:
            pytest.fail(f"the registry did not start: {exc}", pytrace=False)
        started.append(registry)
        return registry

    yield start
    for registry in started:
        registry.stop()
        shutil.rmtree(registry.workdir, ignore_errors=True)
