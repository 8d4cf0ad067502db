"""Pipeline hooks as a CI system sends them: a JSON build report, signed with the source's secret.

The signature is computed here from the documented scheme (docs/pipeline-hooks.md), not with the
bot's own `sign`, so a test that passes holds the bot to what the page tells CI authors to send.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.secrets import slack_env
from tests.support.signing import HttpResult, post
from tests.support.slack_stub import SlackStub

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


PRIMARY, SHADOW = "U0PRIMARY", "U0SHADOW"
#: A plan whose first step is a node group's launch: people merge its PR, a CI job applies it.
PLAN = """\
name: pipes
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {start: "2026-11-29T00:00", end: "2026-12-10T00:00", timezone: UTC}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
steps:
  - id: launch-istio
    title: Merge the node group PR for istio (its new 1.25 nodes join)
    gate: {any_of: [primary]}
    done: {any_of: [primary, shadow]}
    pipeline: {pipeline: eks-provision-configuration, job: apply-istio}
  - id: after
    title: Look at the dashboards
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
"""


@contextlib.contextmanager
def hook_bot_for(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    tmp_path: Path,
    sources: Mapping[str, str],
    *,
    plan: str = PLAN,
    plan_name: str = "pipes",
    extra: str = "",
) -> Iterator[Bot]:
    """The in-process bot with `pipeline_hooks:` for `sources` (name → secret) and `plan` in its
    team directory (`extra`: more configuration); no cluster is reached (the plan's steps are plain)."""
    team = tmp_path / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / f"{plan_name}.yaml").write_text(plan)
    hooks = ""
    for name, secret in sources.items():
        (tmp_path / f"{name}.secret").write_text(secret + "\n")
        hooks += f"  {name}: {{secret_file: {tmp_path / f'{name}.secret'}}}\n"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    config = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}}}\n"
        f"pipeline_hooks:\n{hooks}" + extra
    )
    for user in (PRIMARY, SHADOW):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)
