"""The HTTP transport the Alertmanager and Prometheus adapters share: JSON over urllib3 (already a
dependency, through the kube adapter), a bearer token read from its file on every request (so a
rotated token is used at once), a private CA, a short timeout, no retries (the jobs poll anyway).

Every failure becomes `EvidenceUnavailable` with a short reason naming the server; the detail (the
body's first bytes) goes to the log."""

from __future__ import annotations

import json
import logging
from typing import Any

import urllib3

from bot.errors import EvidenceUnavailable
from bot.records import SignalSource

log = logging.getLogger(__name__)


class JsonHttp:
    def __init__(self, source: SignalSource, *, what: str, timeout: float = 5.0) -> None:
        self.source = source
        self.what = what
        ca = str(source.ca_file) if source.ca_file else None
        self._pool = urllib3.PoolManager(
            ca_certs=ca,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
            maxsize=4,
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.source.bearer_token_file is not None:
            try:
                token = self.source.bearer_token_file.read_text().strip()
            except OSError as exc:
                raise EvidenceUnavailable(
                    f"{self.what}: cannot read its bearer token file ({exc.strerror})"
                ) from None
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        fields: list[tuple[str, str]] | None = None,
        body: Any = None,
        accept: tuple[int, ...] = (200,),
    ) -> tuple[int, Any]:
        """(status, decoded JSON) for an accepted status; raises EvidenceUnavailable otherwise."""
        url = self.source.url + path
        headers = self._headers()
        try:
            if body is not None:
                headers["Content-Type"] = "application/json"
                r = self._pool.request(method, url, body=json.dumps(body).encode(), headers=headers)
            else:
                r = self._pool.request(method, url, fields=fields or None, headers=headers)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.info("%s %s %s: %r", self.what, method, path, exc)
            if isinstance(exc, urllib3.exceptions.ReadTimeoutError) or isinstance(
                getattr(exc, "reason", None), urllib3.exceptions.ReadTimeoutError
            ):
                # It took the request and never answered: not the same trouble as a refused connection.
                raise EvidenceUnavailable(f"{self.what} did not answer in time (ReadTimeoutError)") from None
            raise EvidenceUnavailable(f"{self.what} is unreachable ({type(exc).__name__})") from None
        data: Any = None
        if r.data:
            try:
                data = json.loads(r.data)
            except ValueError:
                data = None
                if r.status in accept:
                    log.info("%s %s %s: not JSON: %r", self.what, method, path, r.data[:200])
                    raise EvidenceUnavailable(
                        f"{self.what} answered {method} {path} with something not JSON"
                    ) from None
        if r.status in (401, 403):
            raise EvidenceUnavailable(f"{self.what} refused the bot's credentials (HTTP {r.status})")
        if r.status not in accept:
            log.info("%s %s %s: HTTP %s: %r", self.what, method, path, r.status, r.data[:300])
            raise EvidenceUnavailable(f"{self.what} answered HTTP {r.status}{_said(data)}")
        return r.status, data


def _said(data: Any) -> str:
    """Prometheus' `error`, or Alertmanager's plain message, cut short."""
    text = ""
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        text = data["error"]
    elif isinstance(data, str):
        text = data
    text = " ".join(text.split())
    return f": {text[:160]}" if text else ""
