"""Refuse before asking: what a cluster action names must exist before two people are asked to
approve it.

`preflight` plans the job as the click would (`Job.plan`: GETs and lists only, nothing written),
so a node that does not exist, a node group without nodes, a workload that is not there or a group
already on the version is the user's error now, with the job's own reason — not after the gate.
A cluster that cannot be read now is not a refusal: the cluster may answer by the time people
approve, so the caller says the check was skipped and goes on.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from bot.core.jobs.base import JobRegistry
from bot.core.jobs.common import JobCluster
from bot.core.jobs.registry import default_jobs, job_kind
from bot.core.kube.versions import parse_version
from bot.core.providers import SDKS, sdk_missing
from bot.errors import BotError, ClusterError, TemporaryError, UserError

if TYPE_CHECKING:
    from bot.core.snapshots.projection import ClusterReader
    from bot.records import ActionCall, ClusterConfig


class PlannedStep(Protocol):
    """What the check reads of a plan's step (`bot.core.runs.plans.Step`, above the jobs)."""

    @property
    def id(self) -> str: ...

    @property
    def actions(self) -> Sequence[ActionCall]: ...


class PlannedActions(Protocol):
    """What the check reads of a parsed plan (`bot.core.runs.plans.Plan`)."""

    @property
    def cluster(self) -> str: ...

    @property
    def steps(self) -> Sequence[PlannedStep]: ...

    @property
    def current_version(self) -> str: ...

    @property
    def target_version(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class Preflight:
    """What the check found: `skipped` says why it could not be made (empty when it was)."""

    kind: str
    targets: int = 0
    skipped: str = ""


def preflight(
    cluster: JobCluster,
    kind: str,
    args: Mapping[str, str],
    *,
    node_group_labels: Sequence[str],
    now: datetime,
    jobs: JobRegistry | None = None,
) -> Preflight:
    """Plan the `kind` job on `cluster` without acting; UserError when what it names is not there."""
    job = (jobs or default_jobs(node_group_labels)).jobs.get(kind)
    if job is None:
        return Preflight(kind=kind, skipped=f"`{kind}` is not a cluster job")
    try:
        progress = job.plan(cluster, args, now=now)
    except UserError:
        raise
    except (ClusterError, TemporaryError) as exc:
        return Preflight(kind=kind, skipped=exc.user_message)
    targets = progress.get("nodes") or progress.get("workloads") or ()
    return Preflight(kind=kind, targets=len(targets))


def plan_warnings(
    cluster: JobCluster | None,
    calls: Sequence[tuple[str, str, Mapping[str, str]]],
    *,
    node_group_labels: Sequence[str],
    now: datetime,
    unreachable: str = "",
    jobs: JobRegistry | None = None,
) -> list[str]:
    """A loaded plan's `(step id, action, args)` cluster actions checked against the cluster as it
    is now: warnings, not refusals — the cluster may change before the window (a group's new
    nodes arrive). `cluster` None (with `unreachable`, why) says the check was skipped. `jobs`:
    the bot's registry, with its cloud providers (without, a provider's action says it has none)."""
    jobs = jobs or default_jobs(node_group_labels)
    wanted = [(step, kind, args) for step, kind, args in calls if jobs.get(kind) is not None]
    if not wanted:
        return []
    if cluster is None:
        return [f"the check that the plan's nodes and workloads exist was skipped: {unreachable}"]
    warnings: list[str] = []
    for step, kind, args in wanted:
        try:
            found = preflight(cluster, kind, args, node_group_labels=node_group_labels, now=now, jobs=jobs)
        except UserError as exc:
            warnings.append(f"step `{step}` ({kind}): {exc.user_message}")
            continue
        if found.skipped:
            warnings.append(f"step `{step}` ({kind}): the check was skipped: {found.skipped}")
    return warnings


def check_plan(
    plan: PlannedActions,
    *,
    clusters: Mapping[str, ClusterConfig],
    connect: Callable[[ClusterConfig], ClusterReader],
    node_group_labels: Sequence[str],
    now: datetime,
    jobs: JobRegistry | None = None,
) -> list[str]:
    """`plan_warnings` for a parsed plan on its configured cluster (connected here, closed after);
    a cluster that is not configured or does not answer makes the check a skipped one."""
    calls = [(step.id, call.name, call.args) for step in plan.steps for call in step.actions]
    warn = functools.partial(
        plan_warnings, calls=calls, node_group_labels=node_group_labels, now=now, jobs=jobs
    )
    config = clusters.get(plan.cluster)
    if config is None:
        return warn(None, unreachable=f"no cluster `{plan.cluster}` is configured")
    try:
        reader = connect(config)
    except BotError as exc:
        return warn(None, unreachable=exc.user_message)
    with contextlib.closing(reader):
        try:
            version = reader.get_json("/version")
        except BotError as exc:
            return warn(None, unreachable=f"cluster {plan.cluster} did not answer: {exc.user_message}")
        # The kube adapter's Cluster: it serves every read a job's plan makes.
        return _version_warnings(plan, str(version.get("gitVersion") or "")) + warn(cast(JobCluster, reader))


#: The actions that roll a node group (its nodes replaced or drained), by the argument naming it.
ROLLING = {
    "drain": "nodegroup",
    "eks-update-nodegroup": "nodegroup",
    "aks-upgrade-nodepool": "nodepool",
    "gke-update-nodepool": "nodepool",
}


def order_warnings(plan: PlannedActions, order: Sequence[str]) -> list[str]:
    """The runbook's fixed order of node groups (`snapshot.node_group_order`) against the order the
    plan's steps roll them in: a warning naming both when a group comes before one the order puts
    first (groups the order does not name are left out of the comparison)."""
    if not order:
        return []
    rank = {group: i for i, group in enumerate(order)}
    target = _minor(plan.target_version)
    rolled: list[str] = []
    for step in plan.steps:
        for call in step.actions:
            arg = ROLLING.get(call.name)
            # Only the rolls to the target: a lagging group brought within the skew first (to the
            # current minor, before the control plane) is a prerequisite, not the order.
            to = _minor(str(call.args.get("version", "")))
            if arg is None or (to is not None and target is not None and to != target):
                continue
            for group in str(call.args.get(arg, "")).split(","):
                group = group.strip()
                if group in rank and group not in rolled:
                    rolled.append(group)
    if rolled == sorted(rolled, key=rank.__getitem__):
        return []
    return [
        f"the steps roll the node groups in the order {', '.join(rolled)}; the configured order "
        f"(`snapshot.node_group_order`) is {', '.join(g for g in order if g in rolled)}"
    ]


def sdk_warnings(plan: PlannedActions, *, missing: Callable[[str], str] = sdk_missing) -> list[str]:
    """One line per cloud whose actions the plan has but whose SDK this bot cannot import
    (`missing`: the reason, "" when it can): each such action would fail at its step, after
    its gate. The plan's checks are not counted: a check without the cloud's SDK says what it
    did not see (its cloud-only ids NOT CHECKED), which is its own answer."""
    clouds: dict[str, list[str]] = {}
    for step in plan.steps:
        for call in step.actions:
            kind = job_kind(call.name)
            if kind is not None and kind.cloud and call.name not in clouds.setdefault(kind.cloud, []):
                clouds[kind.cloud].append(call.name)
    out: list[str] = []
    for cloud, names in clouds.items():
        if missing(cloud):
            sdk, extra = SDKS[cloud]
            out.append(
                f"the plan's {cloud.upper()} actions ({', '.join(names)}) need {sdk}, which this bot "
                f"does not have ({extra})"
            )
    return out


#: The actions that take the control plane to their `version` (a wait for it reads it only).
CONTROL_PLANE = ("eks-update-cluster", "aks-upgrade-control-plane", "gke-update-master")


def step_version_warnings(plan: PlannedActions) -> list[str]:
    """The steps' versions against the plan's own: last quarter's plan copied with one step left on
    its old version. A control-plane update to a minor past the target or not above
    `current_version`, a wait for the control plane or a node roll past the target, and a last
    control-plane update that does not reach the target. Node rolls to an older minor are left
    alone: a lagging group is brought within the skew before the control plane moves."""
    start, to = _minor(plan.current_version), _minor(plan.target_version)
    if start is None or to is None:
        return []
    out: list[str] = []
    last: tuple[str, str, tuple[int, ...]] | None = None
    for step in plan.steps:
        for call in step.actions:
            version = str(call.args.get("version", "")).strip()
            have = _minor(version)
            if have is None or not (
                call.name in CONTROL_PLANE or call.name in ROLLING or call.name == "wait-controlplane"
            ):
                continue
            said = f"step `{step.id}`: {call.name} version={version}"
            if have > to:
                out.append(f"{said} goes past the plan's target_version ({plan.target_version})")
            elif call.name in CONTROL_PLANE and have <= start:
                out.append(
                    f"{said} is not above the plan's current_version ({plan.current_version}): "
                    "a step left from an earlier upgrade?"
                )
            if call.name in CONTROL_PLANE:
                last = (step.id, version, have)
    if last is not None and last[2] < to:
        out.append(
            f"the last control-plane update, step `{last[0]}`, goes to {last[1]}, short of the plan's "
            f"target_version ({plan.target_version})"
        )
    return out


def _version_warnings(plan: PlannedActions, running: str) -> list[str]:
    """The plan's versions against the cluster's: last quarter's plan copied, or the wrong cluster."""
    have, start, to = _minor(running), _minor(plan.current_version), _minor(plan.target_version)
    if have is None or start is None:
        return []
    if have == to and to is not None and to != start:
        return [f"the cluster runs {running}, the plan's target already ({plan.target_version}): is it done?"]
    if have != start:
        return [
            f"the plan says the cluster runs {plan.current_version}, but {plan.cluster} runs {running}: "
            "is this the right plan for this cluster (its `current_version`, its steps' versions)?"
        ]
    return []


def _minor(version: str) -> tuple[int, ...] | None:
    """(1, 25) of "v1.25.16-eks-abc", "1.25" or "1.25.16-gke.1" (`parse_version`'s first two)."""
    parsed = parse_version(version)
    return parsed[:2] if parsed else None
