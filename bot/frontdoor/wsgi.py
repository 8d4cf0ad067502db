"""What the bot's HTTP ports share (the front door's `bot.frontdoor.http`, the probes' own port
`bot.frontdoor.probes`, and `/metrics` on either): a plain-text answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wsgiref.types import StartResponse


def plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    """A WSGI answer of `status` with `body` as plain text (every answer of the bot's HTTP ports
    that is not Slack's, or the metrics' exposition)."""
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]
