"""Pipelines as evidence (issue 43): what a CI build reported about a run's step, and how it is shown.

A pipeline (Concourse, GitHub Actions, Argo Workflows, Jenkins) calls the bot's HTTP door,
`POST /hooks/pipeline` (`bot.frontdoor.hooks`), with one JSON object:

    {"run": "R1A2B3C", "step": "launch-istio", "pipeline": "eks-provision", "job": "apply-istio",
     "build": "41", "status": "failed", "revision": "4f1c…", "url": "https://ci…/builds/41"}

signed like Slack's requests: `X-Upgrade-Bot-Signature: v1=HEX(HMAC-SHA256(secret,
"v1:{timestamp}:{raw body}"))`, with `X-Upgrade-Bot-Timestamp` (Unix seconds, within five minutes)
and `X-Upgrade-Bot-Source` naming whose secret signed it (`pipeline_hooks:` in the configuration).

This module is pure: the signature (`sign`), the body's checks (`parse_report`, a short reason
for anything else), the views the card and the gate show (`latest_builds`, `rerun_view`), and
what a build does to its step (a failed one pauses the run with the revision): `build_reported`,
a transition of the run's state machine (`machine`) over plain data, as its own are.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.core.runs import machine as R
from bot.errors import UserError
from bot.records import PipelineBuild

#: The signature's scheme, as Slack's `v0`: the version, then the hex digest.
SIGNATURE_VERSION = "v1"
SOURCE_HEADER = "X-Upgrade-Bot-Source"
TIMESTAMP_HEADER = "X-Upgrade-Bot-Timestamp"
SIGNATURE_HEADER = "X-Upgrade-Bot-Signature"
#: A request signed longer ago (or further ahead) than this is refused: Slack's window.
MAX_AGE_SECONDS = 5 * 60
#: A build report is a few hundred bytes; anything near this is not one.
MAX_BODY = 16 * 1024

STATUSES = ("started", "succeeded", "failed", "errored", "aborted")
#: A build that ended like this did not do the step's work: the step fails and the run pauses.
#: An aborted build is shown, not failed on: people abort a build to run it again.
FAILING = frozenset({"failed", "errored"})
ICONS: Mapping[str, str] = {
    "started": ":arrows_counterclockwise:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "errored": ":x:",
    "aborted": ":black_square_for_stop:",
}
FIELDS = ("run", "step", "pipeline", "job", "build", "status", "revision", "url")
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
_SHORT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,99}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_URL = re.compile(r"^https?://[^\s<>|]{1,2000}$")


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The `X-Upgrade-Bot-Signature` of `body` sent at `timestamp` (Unix seconds) with `secret`."""
    base = f"{SIGNATURE_VERSION}:{timestamp}:".encode() + body
    return f"{SIGNATURE_VERSION}={hmac.new(secret, base, hashlib.sha256).hexdigest()}"


@dataclass(frozen=True, kw_only=True)
class Report:
    """A build report as its body said it, checked (`parse_report`)."""

    run: str
    step: str
    pipeline: str
    job: str
    build: str
    status: str
    revision: str
    url: str

    def record(self, *, source: str, at: datetime) -> PipelineBuild:
        # The row keeps the report as it came: its fields under their names, but the run's and the step's.
        said = dataclasses.asdict(self)
        return PipelineBuild(run_id=said.pop("run"), step_id=said.pop("step"), source=source, at=at, **said)


def parse_report(body: bytes) -> Report:
    """The build report in `body`; UserError with a short reason naming the field otherwise."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UserError("the body is not JSON") from None
    if not isinstance(document, dict):
        raise UserError("the body is not a JSON object")
    unknown = sorted(set(document) - set(FIELDS))
    if unknown:
        raise UserError(f"unknown field {unknown[0][:40]!r} (fields: {', '.join(FIELDS)})")
    missing = [f for f in FIELDS if f not in document]
    if missing:
        raise UserError(f"missing field {missing[0]!r}")
    values: dict[str, str] = {}
    for name in FIELDS:
        value: Any = document[name]
        if name == "build" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # GitHub's run number, Concourse's build name: either is fine
        if not isinstance(value, str):
            raise UserError(f"{name!r} must be a string")
        values[name] = value.strip()
    checks = {
        "run": (_ID, "a run id like R1A2B3C"),
        "step": (_ID, "a step id"),
        "pipeline": (_NAME, "1 to 200 printable characters"),
        "job": (_NAME, "1 to 200 printable characters"),
        "build": (_SHORT, "a build number or name (letters, digits, . _ : / + -)"),
        "revision": (_SHORT, "a commit SHA or tag (letters, digits, . _ : / + -)"),
        "url": (_URL, "an http(s) URL"),
    }
    for name, (pattern, what) in checks.items():
        if not pattern.match(values[name]):
            raise UserError(f"{name!r} must be {what}")
    if values["status"] not in STATUSES:
        raise UserError(f"'status' must be one of {', '.join(STATUSES)}")
    return Report(**values)


def summary(build: PipelineBuild | Report) -> str:
    """One line about a build, for the thread, a failed step's note and the audit log."""
    return f"{build.pipeline}/{build.job} build {build.build} {build.status} at revision {build.revision}"


def build_view(build: PipelineBuild) -> dict[str, Any]:
    return {
        "pipeline": build.pipeline,
        "job": build.job,
        "build": build.build,
        "status": build.status,
        "revision": build.revision,
        "short": build.revision[:12],
        "url": build.url,
        "icon": ICONS.get(build.status, ":grey_question:"),
        "at": build.at,
    }


def later(a: str, b: str) -> bool:
    """Build `a` was started after build `b`, by their numbers (CI systems number builds upward:
    Concourse, Jenkins, GitHub's run numbers); False when either is not a number."""
    return a.isascii() and a.isdigit() and b.isascii() and b.isdigit() and int(a) > int(b)


def latest_builds(builds: Sequence[PipelineBuild]) -> dict[str, dict[str, Any]]:
    """Each step's latest build (the card shows one line a step): the last reported, unless a
    build with a higher number of the same job was reported before it (a late report of an older
    build does not hide a newer one)."""
    out: dict[str, PipelineBuild] = {}
    for b in builds:
        shown = out.get(b.step_id)
        if shown is None or not (
            (shown.pipeline, shown.job) == (b.pipeline, b.job) and later(shown.build, b.build)
        ):
            out[b.step_id] = b
    return {step: build_view(b) for step, b in out.items()}


def already_recorded(builds: Sequence[PipelineBuild], report: Report) -> bool:
    """The same build of the same job was already reported with this status for this step."""
    key = (report.step, report.pipeline, report.job, report.build, report.status)
    return any((b.step_id, b.pipeline, b.job, b.build, b.status) == key for b in builds)


def superseding(builds: Sequence[PipelineBuild], report: Report) -> PipelineBuild | None:
    """A build of the same step and job numbered after `report`'s that did not fail (it started or
    succeeded): a late failure of an older build says nothing about the step now."""
    newer = [
        b
        for b in builds
        if (b.step_id, b.pipeline, b.job) == (report.step, report.pipeline, report.job)
        and later(b.build, report.build)
        and b.status not in FAILING
    ]
    return max(newer, key=lambda b: int(b.build), default=None)


def rerun_view(
    builds: Sequence[PipelineBuild], step_id: str, *, merge_commit: str = ""
) -> dict[str, Any] | None:
    """What a step's gate shows when it opens again after a failed build (the runbook's "re-run
    with the correct revision"): the revision the failed build ran at, the PR's merge commit when
    known, and whether they differ. None when no build of the step failed."""
    failed = [b for b in builds if b.step_id == step_id and b.status in FAILING]
    if not failed:
        return None
    last = failed[-1]
    return {
        "failed": build_view(last),
        "merge_commit": merge_commit,
        "differs": bool(merge_commit) and not _same_commit(last.revision, merge_commit),
    }


def _same_commit(a: str, b: str) -> bool:
    # A pipeline may report an abbreviated SHA (7 or 12 characters); the PR's is the full 40.
    a, b = a.lower(), b.lower()
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    return len(shorter) >= 7 and longer.startswith(shorter)


#: The build statuses that fail the plain step a build reports on (`build_reported`).
BUILD_FAILING = frozenset({"failed", "errored"})


def build_reported(
    run: R.Run,
    *,
    step_id: str,
    pipeline: str,
    job: str,
    status: str,
    summary: str,
    url: str,
    source: str,
    now: datetime,
    superseded_by: str = "",
) -> R.Outcome:
    """A pipeline reported a build of `step_id` (issue 43): a line in the thread with its link;
    a failed or errored build of a plain step that is waiting or running fails it with the build
    and its revision, and the run pauses (or aborts, as the step's `on_failure` says), so a re-run
    goes through the step's gate again — unless a later build of the job did not fail
    (`superseded_by` names it): then the line says why the step goes on. A failure after the
    step was confirmed done says that it does not reopen it. Refusals (an ended run, an unknown
    step, a step naming no `pipeline:`, a build of another job) change nothing."""

    refuse = functools.partial(R.refused, run, step_id, f"pipeline:{source}")

    if run.state in (R.RunState.ABORTED, R.RunState.COMPLETED):
        return refuse(f"run {run.id} is {run.state}; it takes no more builds")
    if step_id not in {s.step_id for s in run.steps}:
        return refuse(f"run {run.id} has no step `{step_id}`")
    sr = run.step_run(step_id)
    step = run.plan.step(step_id)
    expected = step.pipeline
    if expected is None:
        # Only a step that names its CI job takes its builds: any source could fail any step else.
        return refuse(f"step `{step_id}` names no pipeline (`pipeline:` in the plan); it takes no builds")
    if (expected.pipeline, expected.job) != (pipeline, job):
        return refuse(
            f"step `{step_id}` takes builds of {expected.pipeline}/{expected.job}, not {pipeline}/{job}"
        )
    failing = status in BUILD_FAILING
    remark = ""
    if failing and superseded_by:
        remark = f" — older than {superseded_by}: the step is not failed for it"
    elif failing and sr.state is R.StepState.SUCCEEDED:
        remark = f" — `{step_id}` was confirmed done before; this failure does not reopen it: check what the build applied"
    elif failing and sr.state is R.StepState.PENDING:
        remark = (
            f" — `{step_id}` has not started, so this does not fail it: look at this build before "
            "approving its gate"
        )
    events = [
        R.Event(
            kind="pipeline_build",
            step_id=step_id,
            actor=f"pipeline:{source}",
            detail=summary + remark,
            note=url,
        )
    ]
    if (
        failing
        and not superseded_by
        # A paused run's step fails too, and the run stays paused on the failure (`_fail`).
        and run.state in (R.RunState.ACTIVE, R.RunState.PAUSED)
        and step.manual
        and sr.state in (R.StepState.AWAITING_APPROVAL, R.StepState.RUNNING)
    ):
        return R.fail(run, sr, step, now, f"pipeline {summary}", events)
    # Shown and recorded only: a new Run value so the line is committed like any transition.
    return R.Outcome(run=dataclasses.replace(run), events=tuple(events))
