"""Pipeline hooks as a CI system sends them: a JSON build report, signed with the source's secret.

The signature is computed here from the documented scheme (docs/pipeline-hooks.md), not with the
bot's own `sign`, so a test that passes holds the bot to what the page tells CI authors to send.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from tests.support.signing import HttpResult, post

HOOK_SECRET = "c0ncourse-hook-secret-0123456789abcdef"
SOURCE = "concourse"


def report(run: str, step: str, **fields: Any) -> dict[str, Any]:
    """A build report for `run`'s `step`, with these fields changed."""
    body = {
        "run": run,
        "step": step,
        "pipeline": "eks-provision-configuration",
        "job": "apply-istio",
        "build": "41",
        "status": "started",
        "revision": "4f1c2a3b9d0e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
        "url": "https://ci.example.com/teams/infra/pipelines/eks-provision-configuration/jobs/apply-istio/builds/41",
    }
    body.update(fields)
    return body


def hook_headers(
    body: bytes, *, secret: str = HOOK_SECRET, source: str = SOURCE, timestamp: int | None = None
) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), b"v1:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Upgrade-Bot-Source": source,
        "X-Upgrade-Bot-Timestamp": ts,
        "X-Upgrade-Bot-Signature": f"v1={digest}",
    }


def send(base_url: str, document: dict[str, Any], **signing: Any) -> HttpResult:
    """POST `document` to the bot's `/hooks/pipeline`, signed (`hook_headers`' options)."""
    body = json.dumps(document).encode()
    return post(f"{base_url}/hooks/pipeline", body, hook_headers(body, **signing))
