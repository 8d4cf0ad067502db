"""The `watch` action: stream the rollout status into the run's thread until a target or a stop.

A LONG action (`long=True`): the click that opens the step only starts the watch (a row in the
database) and the step stays running; the triggers front door drives the watch and commits
`action_finished` when its verdict is in — target reached: the step succeeds; a stop condition
(CrashLoopBackOff or image pull past its limit, kube-system first) or the timeout: it fails and the
run pauses (`on_failure`). Arguments (all optional): `nodegroup` (comma-separated), `namespace`
(comma-separated), `version` (the kubelet version to reach), `settle`, `crashloop_after`,
`imagepull_after`, `timeout` (durations like 5m), `replaces` (`others-1-25=others`: a node group
recreated under a new name; the old group's nodes count as old nodes of the new one).
"""

from __future__ import annotations

from datetime import timedelta

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.core.durations import parse_duration
from bot.core.jobs.common import label_value
from bot.core.watches.spec import StopRules, Target
from bot.errors import UserError, clip
from bot.records import ActionRequest

ARGUMENTS = frozenset(
    {
        "nodegroup",
        "namespace",
        "version",
        "settle",
        "crashloop_after",
        "imagepull_after",
        "timeout",
        "replaces",
    }
)


def words(value: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in value.split(",") if w.strip())


def _duration(args: dict[str, str], name: str) -> timedelta | None:
    if not args.get(name):
        return None
    try:
        return parse_duration(args[name])
    except ValueError as exc:
        raise UserError(f"watch action: {name}: {exc}") from None


def replaces_arg(args: dict[str, str], groups: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`replaces: "others-1-25=others,…"` (NEW=OLD: each new group and the old one it replaces), or
    `replaces: others` when the watch names one node group: (old, new) pairs."""
    pairs: list[tuple[str, str]] = []
    for part in words(args.get("replaces", "")):
        new, sep, old = (p.strip() for p in part.partition("="))
        if not sep:
            if len(groups) != 1:
                raise UserError(
                    "watch action: replaces: say which group replaces which, NEW=OLD (like others-1-25=others)"
                )
            new, old = groups[0], part
        label_value("replaces", new)
        label_value("replaces", old)
        if new == old:
            raise UserError(f"watch action: replaces: {clip(part, 60)!r} names the same group twice")
        if groups and new not in groups:
            raise UserError(
                f"watch action: replaces: {clip(new, 60)!r} is not one of the watched node groups"
            )
        pairs.append((old, new))
    return tuple(pairs)


def target_and_stop(args: dict[str, str]) -> tuple[Target, StopRules]:
    """The watch's target and stop rules from the action's arguments."""
    settle = _duration(args, "settle")
    groups = words(args.get("nodegroup", ""))
    try:
        target = Target(
            nodegroups=groups,
            kubelet_version=args.get("version", ""),
            settle=settle if settle is not None else Target().settle,
            replaces=replaces_arg(args, groups),
        )
    except ValueError as exc:
        raise UserError(f"watch action: {exc}") from None
    defaults = StopRules()
    stop = StopRules(
        crashloop_after=_duration(args, "crashloop_after") or defaults.crashloop_after,
        imagepull_after=_duration(args, "imagepull_after") or defaults.imagepull_after,
        timeout=_duration(args, "timeout"),
    )
    return target, stop


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.start_watch is None:
        return ActionResult(ok=False, detail="this front door cannot run the `watch` action")
    target_and_stop(dict(request.call.args))  # refuse bad arguments before anything starts
    return ActionResult(ok=True, detail=ctx.start_watch(request))


SPEC = ActionSpec(
    name="watch",
    summary="stream rollout status into the run's thread until the target holds (or a stop condition)",
    optional=ARGUMENTS,
    long=True,
    run=run,
    check=lambda args: target_and_stop(dict(args)),
)
