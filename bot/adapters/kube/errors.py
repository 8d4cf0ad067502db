"""The client's failures as the bot's error tree reads them: Status bodies, Retry-After, and what
happened to a request that got no answer (connect or read timeout, refused, reset)."""

from __future__ import annotations

import json
from typing import Any

import urllib3


def _retry_after(headers: Any) -> float | None:
    try:
        value = (headers or {}).get("Retry-After")
        return float(value) if value else None
    except (TypeError, ValueError, AttributeError):
        return None


def _status_cause(body: Any) -> str:
    """The first cause's message in a Status body ("The disruption budget web needs 2 healthy …")."""
    try:
        loaded = json.loads(body) if body else {}
    except (TypeError, ValueError):
        return ""
    if not isinstance(loaded, dict):
        return ""
    causes = (loaded.get("details") or {}).get("causes") or []
    return str(causes[0].get("message", "")) if causes and isinstance(causes[0], dict) else ""


def _what_happened(exc: BaseException, connect: float, read: float) -> str:
    """Refused, dropped or silent: an operator fixes each differently, so the message says which."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = (
            getattr(seen, "reason", None)
            if isinstance(seen, urllib3.exceptions.MaxRetryError)
            else (seen.__cause__ or seen.__context__)
        )
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or any(
        isinstance(e, urllib3.exceptions.NewConnectionError) and "refused" in str(e).lower() for e in chain
    ):
        return "refused the connection"
    if any(isinstance(e, urllib3.exceptions.NameResolutionError) for e in chain):
        return "has a name that does not resolve"
    if any(isinstance(e, urllib3.exceptions.ConnectTimeoutError) for e in chain):
        return f"did not accept a connection within {connect:g}s"
    if any(isinstance(e, (urllib3.exceptions.TimeoutError, TimeoutError)) for e in chain):
        return f"did not answer within {read:g}s"
    if any(isinstance(e, urllib3.exceptions.SSLError) for e in chain):
        return "failed the TLS handshake"
    if any(isinstance(e, (urllib3.exceptions.ProtocolError, ConnectionError)) for e in chain):
        return "dropped the connection"
    return "could not be reached"


def _status_message(body: Any) -> str:
    """The `message` of a Kubernetes Status object in an error body, if there is one."""
    if not body:
        return ""
    try:
        loaded = json.loads(body)
    except (TypeError, ValueError):
        return ""
    return str(loaded.get("message", "")) if isinstance(loaded, dict) else ""
