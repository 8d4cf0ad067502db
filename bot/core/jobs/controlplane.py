"""The `wait-controlplane` job: wait until the API server's `/version` reports a version on several
answers in a row (any provider: the control plane's upgrade may be the cloud's, a pipeline's or
people's), or give up after a timeout. It writes nothing.

Arguments: `version` (required, like 1.25), `answers` (how many in a row, default 3) and `timeout`
(default 30m). Several answers in a row because an upgrading control plane runs old and new API
servers side by side behind one endpoint: one new answer does not mean every server is new.

Progress (JSON):

    {"version": "1.25", "answers": 3, "started": "…", "timeout": 1800, "streak": 1,
     "seen": "v1.25.16-eks-…"}
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from bot.core.durations import format_duration
from bot.core.jobs.base import Decision, Post, Progress, Tick
from bot.core.jobs.common import JobCluster, duration_arg, int_arg, iso, timer_start
from bot.core.kube.versions import parse_version, reports
from bot.errors import ClusterError, UserError, clip

DEFAULT_TIMEOUT = timedelta(minutes=30)
DEFAULT_ANSWERS = 3
#: Seconds between two reads of /version.
EVERY = 5.0


def version_target(args: Mapping[str, str]) -> str:
    text = str(args.get("version", "")).strip()
    if not text:
        raise UserError("version: required (the control plane's version, like 1.25)")
    if parse_version(text) is None:
        raise UserError(f"version: {clip(text, 20)!r} is not a version like 1.25 or v1.25.16")
    return text


def _span(progress: Progress) -> str:
    return format_duration(timedelta(seconds=float(progress["timeout"])))


class WaitControlPlaneJob:
    """`wait-controlplane`: see the module docstring."""

    kind = "wait-controlplane"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        return {
            "version": version_target(args),
            "answers": int_arg(args, "answers", DEFAULT_ANSWERS, low=1, high=20),
            "started": iso(now),
            "timeout": duration_arg(args, "timeout", DEFAULT_TIMEOUT).total_seconds(),
            "streak": 0,
            "seen": "",
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        seen = str(cluster.get_json("/version").get("gitVersion", ""))
        return [
            f"would read the API server's /version every {EVERY:g} s, writing nothing, until {progress['answers']} "
            f"answers in a row report {progress['version']} (up to {_span(progress)})",
            f"/version now: {seen or '?'}"
            + (" (already on it)" if reports(seen, parse_version(progress["version"])) else ""),
        ]

    def tick(
        self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Decision | None = None
    ) -> Tick:
        version, needed = progress["version"], int(progress["answers"])
        try:
            seen = str(cluster.get_json("/version").get("gitVersion", ""))
        except ClusterError as exc:
            # An API server restarting mid-upgrade: not an answer, and the streak starts again.
            seen = ""
            note = f"/version did not answer: {clip(exc.user_message, 80)}"
        else:
            note = f"/version: {seen or '?'}"
        streak = int(progress["streak"]) + 1 if seen and reports(seen, parse_version(version)) else 0
        new: Progress = {**progress, "streak": streak, "seen": seen or progress["seen"]}
        card = (note, f"{streak}/{needed} answers in a row on {version}")
        if streak >= needed:
            text = f"control plane: {needed} answers in a row from /version report {seen} (target {version})"
            return Tick(progress=new, posts=(Post(key=f"controlplane-on:{version}", text=text),), card=card,
                        done=True, ok=True, detail=text, wait=0.0)  # fmt: skip
        started = timer_start(progress, progress["started"], now)
        # A streak under way is let finish: the timeout is for a control plane not on the version.
        if not streak and now - started >= timedelta(seconds=float(progress["timeout"])):
            text = (
                f"control plane: /version did not report {version} {needed} times in a row within "
                f"{_span(progress)} (last: {new['seen'] or 'no answer'})"
            )
            return Tick(progress=new, posts=(Post(key=f"controlplane-timeout:{version}", text=text),),
                        card=card, done=True, ok=False, detail=text, wait=0.0)  # fmt: skip
        return Tick(progress=new, card=card, wait=EVERY)
