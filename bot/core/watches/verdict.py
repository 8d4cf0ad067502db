"""Where a watch stands: still running, target reached, stopped by a stop rule, or out of time.

A pure function of a Summary, the spec and the time. Order of decision:
1. stop rules (only for a watch with a target: a plain `/upgrade watch` is an observation and
   ends only at its time limit or on `unwatch`): a workload whose CrashLoopBackOff or
   ImagePullBackOff/ErrImagePull episode has lasted longer than its limit stops the watch —
   unlike `kubectl rollout status`, which waits on a crash loop until its progress deadline.
   kube-system workloads are named first (a broken DNS or CNI explains the rest), then the
   longest-running episode;
2. the target, once it has held, with no new unhealthy pod and the cluster readable, for its settle
   time — "target reached" only when no known-issue finding the watch posted is still open and no
   pod in its view is unhealthy (whenever it became so); otherwise "target reached with open
   findings" (`TARGET_OPEN`, code "open_findings"), and the plan step decides (`on_open_findings`,
   fail by default);
3. the deadline (`ends_at`, or `started_at + stop.timeout`).
`code` is a stable word for machine use (milestone keys): "crashloop", "imagepull", "timeout",
"open_findings", or "" while running / on target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core.durations import format_duration, kubectl_age
from bot.core.kube.objects import KUBE_SYSTEM
from bot.core.watches.spec import WatchSpec
from bot.core.watches.summary import FLAP_WINDOW, RuleEpisode, Summary
from bot.errors import clip

RUNNING, TARGET_REACHED, STOPPED, TIMED_OUT = "running", "target_reached", "stopped", "timed_out"
#: The target held and settled, but a known issue the watch posted is still open.
TARGET_OPEN = "target_reached_with_open_findings"
OPEN_FINDINGS = "open_findings"
FINAL = frozenset({TARGET_REACHED, TARGET_OPEN, STOPPED, TIMED_OUT})

#: The states as people read them (an end reason is stored as "<state>: <reason>", and the code
#: reads the state back; the thread, the card and the step's line say the words).
STATE_WORDS = {
    RUNNING: "running",
    TARGET_REACHED: "target reached",
    TARGET_OPEN: "target reached with open findings",
    STOPPED: "stopped",
    TIMED_OUT: "timed out",
}


def said(end_reason: str) -> str:
    """A stored end reason ("target_reached_with_open_findings: 1 open finding: …") in words
    ("target reached with open findings: 1 open finding: …"); other text unchanged."""
    state, sep, rest = end_reason.partition(": ")
    if sep and state in STATE_WORDS:
        return f"{STATE_WORDS[state]}: {rest}"
    return STATE_WORDS.get(end_reason, end_reason)


_EPISODE_WORDS = {"crashloop": "CrashLoopBackOff", "imagepull": "ImagePullBackOff/ErrImagePull"}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    state: str  # "running" | "target_reached" | "target_reached_with_open_findings" | "stopped" | "timed_out"
    reason: str  # one line for people
    code: str = ""  # "crashloop" | "imagepull" | "timeout" | ""

    @property
    def final(self) -> bool:
        return self.state in FINAL


def verdict(summary: Summary, spec: WatchSpec, now: datetime) -> Verdict:
    target = spec.target
    if target is not None:
        limits = {"crashloop": spec.stop.crashloop_after, "imagepull": spec.stop.imagepull_after}
        over = [
            ep
            for ep in summary.episodes
            if ep.open and ep.kind in limits and now - ep.since > limits[ep.kind]
        ]
        if over:
            over.sort(key=lambda ep: (not ep.workload.startswith(KUBE_SYSTEM + "/"), ep.since, ep.workload))
            first = over[0]
            namespace, _kind, name = first.workload.split("/", 2)
            reason = (
                f"{namespace}/{name} in {_EPISODE_WORDS[first.kind]} for {kubectl_age(now - first.since)}"
                f" (limit {format_duration(limits[first.kind])})"
            )
            if len(over) > 1:
                reason += f"; {len(over) - 1} more workload{'s' if len(over) > 2 else ''} over the limit"
            return Verdict(state=STOPPED, reason=reason, code=first.kind)
        # Blind (a list or watch failing): the target cannot be confirmed, and settle time counts
        # again only from when the cluster could be read (`calm_since`).
        if summary.target_holds and summary.target_since is not None and summary.blind_since is None:
            calm_since = _calm_since(summary)
            if now - calm_since >= target.settle:
                # What still needs people: known issues still open, and what is broken now even if
                # it was before the watch began (settle counts *new* unhealthy pods only).
                findings = open_findings(summary)
                left = [findings_text(findings)] if findings else []
                if broken := _still_broken(summary):
                    left.append(broken)
                if flapping := flapping_text(summary):
                    left.append(flapping)
                if left:
                    return Verdict(
                        state=TARGET_OPEN,
                        reason=f"{'; '.join(left)}; {_target_text(summary, spec)}",
                        code=OPEN_FINDINGS,
                    )
                return Verdict(state=TARGET_REACHED, reason=_target_text(summary, spec))
    deadline = spec.deadline
    if deadline is not None and now >= deadline:
        return Verdict(
            state=TIMED_OUT,
            reason=f"time limit reached after {kubectl_age(deadline - spec.started_at)}"
            + _blind_text(summary, before="; "),
            code="timeout",
        )
    # Blind first: the card's head line is clipped, and that is what people must read.
    return Verdict(
        state=RUNNING, reason=_blind_text(summary, after="; ") + _progress_text(summary, spec, now)
    )


def _calm_since(summary: Summary) -> datetime:
    """Since when the target has held with no new unhealthy pod and the cluster read all along."""
    assert summary.target_since is not None
    moments = [summary.target_since, summary.last_unhealthy_at, summary.seen_again_at]
    return max(m for m in moments if m is not None)


def _blind_text(summary: Summary, *, before: str = "", after: str = "") -> str:
    """ "the cluster could not be read since 14:02 UTC (pod: HTTP 503 …): …", between `before` and
    `after` ("" when it could be read)."""
    if summary.blind_since is None:
        return ""
    return (
        f"{before}the cluster could not be read since {summary.blind_since:%H:%M} UTC ({clip(summary.blind, 160)}): "
        f"what is shown is from before, and the target is not confirmed until it can{after}"
    )


def _still_broken(summary: Summary) -> str:
    """ "3 unhealthy pods (payments/worker (Error), …)" ("" when none): the pods in the watch's view
    that are unhealthy now, whenever they became so (a rollout that failed shows as its pods)."""
    n = summary.unhealthy_pods
    if not n:
        return ""
    top = [w for g in summary.unhealthy for w in g.top][:3]
    named = ", ".join(f"{w.namespace}/{w.name} ({w.detail})" for w in top)
    return f"{n} unhealthy pod{'s' if n != 1 else ''} ({named}{', …' if n > len(top) else ''})"


def flapping_text(summary: Summary) -> str:
    """ "2 pods flapping readiness (shop/web ×2, 7 times not Ready in 10m)" ("" when none): pods
    that keep dropping out of their Services' endpoints, each time too briefly to count as
    unhealthy."""
    n = summary.flapping_pods
    if not n:
        return ""
    named = ", ".join(f"{f.namespace}/{f.name} ×{f.pods}" for f in summary.flapping[:3])
    spells = sum(f.spells for f in summary.flapping)
    window = format_duration(FLAP_WINDOW)
    more = ", …" if len(summary.flapping) > 3 else ""
    return (
        f"{n} pod{'s' if n != 1 else ''} flapping readiness ({named}{more}: "
        f"{spells} times not Ready in {window})"
    )


def open_findings(summary: Summary) -> list[RuleEpisode]:
    """The known-issue episodes (each posted in the thread) that are still open."""
    return [e for e in summary.rule_episodes if e.open]


def findings_text(findings: Sequence[RuleEpisode]) -> str:
    """`2 open findings: KI004 payments/payments-worker, KI005 kube-system/kube-proxy`."""
    shown = []
    for e in findings[:3]:
        namespace, _kind, name = e.workload.split("/", 2)
        shown.append(f"{e.rule} {namespace}/{name}" if namespace else f"{e.rule} {name}")
    more = f", +{len(findings) - 3} more" if len(findings) > 3 else ""
    n = len(findings)
    return f"{n} open finding{'s' if n != 1 else ''}: {', '.join(shown)}{more}"


def _target_groups(summary: Summary, spec: WatchSpec) -> list[str]:
    target = spec.target
    if target is not None and target.nodegroups:
        return list(target.nodegroups)
    return [g.name for g in summary.groups]


def _target_text(summary: Summary, spec: WatchSpec) -> str:
    target = spec.target
    assert target is not None
    groups = {g.name: g for g in summary.groups}
    names = _target_groups(summary, spec)
    nodes = sum(groups[n].total for n in names if n in groups)
    version = f" on {target.kubelet_version}" if target.kubelet_version else ""
    old = ", no old node left" if target.kubelet_version and target.no_old_nodes else ""
    return (
        f"{', '.join(names)}: {nodes} node{'s' if nodes != 1 else ''} Ready{version}{old}; "
        f"no new unhealthy pod for {format_duration(target.settle)}"
    )


def _progress_text(summary: Summary, spec: WatchSpec, now: datetime) -> str:
    target = spec.target
    if target is None:
        return "watching"
    groups = {g.name: g for g in summary.groups}
    names = _target_groups(summary, spec)
    missing = [n for n in names if n not in groups]
    total = sum(groups[n].total for n in names if n in groups)
    good = sum(groups[n].on_target_ready for n in names if n in groups)
    old = sum(groups[n].old for n in names if n in groups)
    parts = [
        f"{good}/{total} nodes Ready" + (f" on {target.kubelet_version}" if target.kubelet_version else "")
    ]
    if old:
        parts.append(f"{old} old node{'s' if old != 1 else ''} left")
    if missing:
        parts.append(f"no node yet in {', '.join(missing)}")
    if summary.target_holds and summary.target_since is not None and summary.blind_since is None:
        left = target.settle - (now - _calm_since(summary))
        parts.append(f"target holds, settling ({format_duration(max(left, timedelta(0)))} to go)")
    return "; ".join(parts)
