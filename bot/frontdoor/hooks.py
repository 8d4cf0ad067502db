"""`POST /hooks/pipeline` on the HTTP door: CI builds reported as evidence on a run's step (issue 43).

The request is guarded the way Slack's are (`bot.frontdoor.http`), in this order, so that nothing
from an unsigned sender is parsed and nothing it sends changes any state: only POST; a body of at
most `MAX_BODY` bytes; a source named in `pipeline_hooks:`; a timestamp, a whole number within
the five-minute replay window; a valid `v1=` signature over the raw body with that source's
secret (401 for any of these); then the signature is claimed in the store, once — the same
signed request sent again within its window is a replay (401), on any replica. Only then is the
body read (`bot.core.runs.pipelines.parse_report`: 400 with the field at fault) and the build
handed to the runs (`RunService.report_build`: 404 for an unknown run, 409 for a run that takes
no more builds). Each refusal is one log line with a correlation id, which the answer also
carries; never a traceback, never a 500 with the exception's text.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from bot.adapters.store import Store
from bot.core.runs import pipelines
from bot.core.runs.service import RunService
from bot.errors import BotError, RunNotFound, UserError

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

log = logging.getLogger(__name__)

HOOKS_PATH = "/hooks/pipeline"


def _header(name: str) -> str:
    return "HTTP_" + name.upper().replace("-", "_")


class PipelineHookDoor:
    """Answers `POST /hooks/pipeline`: (status line, body) for the HTTP door's POST routes."""

    def __init__(
        self,
        *,
        secrets: Mapping[str, bytes],
        store: Store,
        runs: RunService,
        clock: Callable[[], float] = time.time,
    ) -> None:
        #: Each source's signing secret (`pipeline_hooks:`).
        self.secrets = dict(secrets)
        self.store = store
        self.runs = runs
        self.clock = clock

    def __call__(self, environ: WSGIEnvironment) -> tuple[str, bytes]:
        correlation = secrets.token_hex(4)
        try:
            status, reason = self._handle(environ, correlation)
        except BotError as exc:
            log.warning("pipeline hook [%s]: %s", correlation, exc, exc_info=True)
            status, reason = "503 Service Unavailable", "the bot could not take the build now; send it again"
        if not status.startswith("200"):
            log.warning("pipeline hook refused [%s]: %s %s", correlation, status, reason)
        else:
            log.info("pipeline hook [%s]: %s", correlation, reason)
        return status, f"{reason} [{correlation}]\n".encode()

    def _handle(self, environ: WSGIEnvironment, correlation: str) -> tuple[str, str]:
        if environ.get("REQUEST_METHOD", "GET") != "POST":
            return "405 Method Not Allowed", "only POST"
        raw_length = str(environ.get("CONTENT_LENGTH") or "0")
        if not raw_length.isdigit():
            return "400 Bad Request", "malformed Content-Length"
        if int(raw_length) > pipelines.MAX_BODY:
            return "413 Content Too Large", f"body larger than {pipelines.MAX_BODY} bytes"
        body: bytes = environ["wsgi.input"].read(int(raw_length)) if int(raw_length) else b""
        source = str(environ.get(_header(pipelines.SOURCE_HEADER), ""))
        timestamp = str(environ.get(_header(pipelines.TIMESTAMP_HEADER), ""))
        signature = str(environ.get(_header(pipelines.SIGNATURE_HEADER), ""))
        secret = self.secrets.get(source)
        if secret is None:
            return "401 Unauthorized", f"unknown source in {pipelines.SOURCE_HEADER}"
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            return "401 Unauthorized", f"missing or malformed {pipelines.TIMESTAMP_HEADER}"
        now = self.clock()
        if abs(now - int(timestamp)) > pipelines.MAX_AGE_SECONDS:
            return "401 Unauthorized", "request timestamp outside the five-minute window"
        expected = pipelines.sign(secret, timestamp, body)
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            return "401 Unauthorized", "invalid signature"
        # Kept until no clock could still find the request fresh: its timestamp's window, or now's.
        until = max(now, float(timestamp)) + pipelines.MAX_AGE_SECONDS
        if not self.store.claim_hook_signature(
            source=source,
            signature=signature,
            now=datetime.fromtimestamp(now, UTC),
            expires_at=datetime.fromtimestamp(until, UTC) + timedelta(seconds=1),
        ):
            return "401 Unauthorized", "this signed request was sent before (a replay)"
        try:
            report = pipelines.parse_report(body)
        except UserError as exc:
            return "400 Bad Request", exc.user_message
        try:
            out = self.runs.report_build(report, source=source, correlation_id=correlation)
        except RunNotFound:
            return "404 Not Found", f"there is no run {report.run}"
        if not out.accepted:
            return "409 Conflict", out.message
        return "200 OK", out.message or f"build {report.build} of {report.run}/{report.step}: {report.status}"
