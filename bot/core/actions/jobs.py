"""The cluster actions (issue 15): cordon, uncordon, drain, restart and wait-nodegroup.

Each is a LONG action (`long=True`): the approval that runs the step only stores a job (a row in
the database, `bot.core.jobs.service`) and the step stays running; the triggers front door drives
the job on the leader, persisting its progress after every tick, and commits the step's end when
the job ends (`RunService.finish_long`). A restart in the middle leaves the step interrupted, and
`resume` continues the SAME job from its recorded progress — never from scratch, never twice.

Arguments are those of `bot.core.jobs` (see each job's module); every action also takes
`dry_run: true`, which lists exactly what would happen and changes nothing. The mutating ones
need a gate of two people (the plan validator says so), unless they are dry runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta

from bot.core.actions.base import ActionContext, ActionRequest, ActionResult, ActionSpec
from bot.core.jobs.common import (
    MAX_SELECTOR,
    duration_arg,
    int_arg,
    label_value,
    names_arg,
    namespace_name,
    object_name,
    version_arg,
)
from bot.errors import UserError, clip

NODES = frozenset({"node", "nodegroup", "version"})
DRAIN = NODES | {"timeout", "parallel", "allow_local_storage", "allow_unmanaged"}
RESTART = frozenset(
    {
        "workloads",
        "namespace",
        "namespaces",
        "selector",
        "kinds",
        "timeout",
        "crashloop_after",
        "imagepull_after",
    }
)
WAIT = frozenset({"nodegroup", "version", "timeout"})
DRY_RUN = frozenset({"dry_run"})


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.start_job is None:
        return ActionResult(ok=False, detail=f"this front door cannot run the `{request.call.name}` action")
    return ActionResult(ok=True, detail=ctx.start_job(request))


def _nodes(args: Mapping[str, str]) -> None:
    nodes, group = names_arg(args, "node"), str(args.get("nodegroup", "")).strip()
    if bool(nodes) == bool(group):
        raise UserError("name the nodes: either node (comma-separated names) or nodegroup, not both")
    for node in nodes:
        object_name("node", node)
    if group:
        label_value("nodegroup", group)
    version_arg(args)


def _check_drain(args: Mapping[str, str]) -> None:
    _nodes(args)
    duration_arg(args, "timeout", timedelta(minutes=15))
    int_arg(args, "parallel", 5)


def _check_restart(args: Mapping[str, str]) -> None:
    from bot.core.jobs.restart import FROM_CHECK, check_scope

    check_scope(args)
    for text in names_arg(args, "workloads"):
        parts = text.split("/")
        if len(parts) != 3:
            raise UserError(f"workloads: {clip(text, 60)!r} is not like deployment/NS/NAME")
        namespace_name("workloads", parts[1])
        object_name("workloads", parts[2])
    namespace = str(args.get("namespace", "")).strip()
    if namespace:
        namespace_name("namespace", namespace)
    listed = str(args.get("namespaces", "")).strip()
    if listed and not listed.startswith(FROM_CHECK):
        for name in names_arg(args, "namespaces"):
            namespace_name("namespaces", name)
    if len(str(args.get("selector", ""))) > MAX_SELECTOR:
        raise UserError(f"selector: at most {MAX_SELECTOR} characters")
    for name in ("timeout", "crashloop_after", "imagepull_after"):
        duration_arg(args, name, timedelta(minutes=15))


def _check_wait(args: Mapping[str, str]) -> None:
    label_value("nodegroup", str(args.get("nodegroup", "")).strip())
    version_arg(args, required=True)
    duration_arg(args, "timeout", timedelta(hours=1))


def _spec(
    name: str,
    summary: str,
    optional: frozenset[str],
    *,
    mutating: bool,
    check: Callable[[Mapping[str, str]], object],
    required: frozenset[str] = frozenset(),
) -> ActionSpec:
    return ActionSpec(
        name=name,
        summary=summary,
        required=required,
        optional=(optional | DRY_RUN) - required,
        mutating=mutating,
        long=True,
        run=run,
        check=check,
    )


CORDON = _spec(
    "cordon",
    "mark nodes (a node, a list, or a node group's old nodes) unschedulable",
    NODES,
    mutating=True,
    check=_nodes,
)
UNCORDON = _spec("uncordon", "make nodes schedulable again", NODES, mutating=True, check=_nodes)
DRAIN_SPEC = _spec(
    "drain",
    "cordon and drain nodes through the eviction API (PDBs respected; a per-node timeout asks people)",
    DRAIN,
    mutating=True,
    check=_check_drain,
)
RESTART_SPEC = _spec(
    "restart",
    "rollout restart of Deployments/DaemonSets/StatefulSets, then wait for each rollout's verdict",
    RESTART,
    mutating=True,
    check=_check_restart,
)
WAIT_SPEC = _spec(
    "wait-nodegroup",
    "wait until a node group is entirely on a kubelet version and Ready",
    WAIT - {"nodegroup", "version"},
    mutating=False,
    check=_check_wait,
    required=frozenset({"nodegroup", "version"}),
)

SPECS: tuple[ActionSpec, ...] = (CORDON, UNCORDON, DRAIN_SPEC, RESTART_SPEC, WAIT_SPEC)
