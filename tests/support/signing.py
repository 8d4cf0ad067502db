"""Signed Slack requests: what Slack sends to the bot's HTTP endpoint, signed for real."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from slack_sdk.signature import SignatureVerifier


@dataclass
class HttpResult:
    status: int
    body: str
    seconds: float


def slash_command_body(
    text: str,
    *,
    user: str = "U0PRIMARY",
    channel: str = "C0OPS",
    response_url: str,
    trigger_id: str = "111.222.abc",
) -> bytes:
    return urllib.parse.urlencode(
        {
            "token": "deprecated-verification-token",
            "team_id": "T0TEAM",
            "team_domain": "stub",
            "channel_id": channel,
            "channel_name": "upgrades",
            "user_id": user,
            "user_name": "someone",
            "command": "/upgrade",
            "text": text,
            "api_app_id": "A0STUB",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    ).encode()


def signed_headers(body: bytes, secret: str, *, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10.0) -> HttpResult:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return HttpResult(resp.status, resp.read().decode(), time.monotonic() - started)
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpResult(exc.code, exc.read().decode(), time.monotonic() - started)


def get(url: str, timeout: float = 10.0) -> HttpResult:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return HttpResult(resp.status, resp.read().decode(), time.monotonic() - started)
    except urllib.error.HTTPError as exc:
        with exc:
            return HttpResult(exc.code, exc.read().decode(), time.monotonic() - started)


def block_actions_body(
    *,
    user: str,
    value: str,
    action: str = "gate_approve",
    response_url: str,
    trigger_id: str,
    message_ts: str = "",
) -> bytes:
    """A button click as Slack posts it: a form with one `payload` field holding JSON."""
    payload = {
        "type": "block_actions",
        "trigger_id": trigger_id,
        "user": {"id": user},
        "channel": {"id": "C0OPS"},
        "team": {"id": "T0TEAM"},
        "api_app_id": "A0STUB",
        "response_url": response_url,
        "actions": [{"action_id": action, "value": value, "type": "button", "action_ts": "1.2"}],
    }
    if message_ts:  # the message the button is on, as Slack sends it
        payload["container"] = {"type": "message", "message_ts": message_ts, "channel_id": "C0OPS"}
        payload["message"] = {"type": "message", "ts": message_ts}
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


def view_submission_body(
    *, user: str, callback_id: str, private_metadata: str, values: dict[str, Any], trigger_id: str
) -> bytes:
    """A modal submitted: its callback id, private metadata and the state of its inputs."""
    payload = {
        "type": "view_submission",
        "trigger_id": trigger_id,
        "user": {"id": user},
        "team": {"id": "T0TEAM"},
        "api_app_id": "A0STUB",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "state": {"values": values},
        },
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
