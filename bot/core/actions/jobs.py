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

from bot.core.actions.base import ActionContext, ActionRequest, ActionResult, ActionSpec

NODES = frozenset({"node", "nodegroup", "version"})
DRAIN = NODES | {"timeout", "parallel", "allow_local_storage", "allow_unmanaged"}
RESTART = frozenset(
    {"workloads", "namespace", "selector", "kinds", "timeout", "crashloop_after", "imagepull_after"}
)
WAIT = frozenset({"nodegroup", "version", "timeout"})
DRY_RUN = frozenset({"dry_run"})


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.start_job is None:
        return ActionResult(ok=False, detail=f"this front door cannot run the `{request.call.name}` action")
    return ActionResult(ok=True, detail=ctx.start_job(request))


def _spec(
    name: str,
    summary: str,
    optional: frozenset[str],
    *,
    mutating: bool,
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
    )


CORDON = _spec(
    "cordon", "mark nodes (a node, a list, or a node group's old nodes) unschedulable", NODES, mutating=True
)
UNCORDON = _spec("uncordon", "make nodes schedulable again", NODES, mutating=True)
DRAIN_SPEC = _spec(
    "drain",
    "cordon and drain nodes through the eviction API (PDBs respected; a per-node timeout asks people)",
    DRAIN,
    mutating=True,
)
RESTART_SPEC = _spec(
    "restart",
    "rollout restart of Deployments/DaemonSets/StatefulSets, then wait for each rollout's verdict",
    RESTART,
    mutating=True,
)
WAIT_SPEC = _spec(
    "wait-nodegroup",
    "wait until a node group is entirely on a kubelet version and Ready",
    WAIT - {"nodegroup", "version"},
    mutating=False,
    required=frozenset({"nodegroup", "version"}),
)

SPECS: tuple[ActionSpec, ...] = (CORDON, UNCORDON, DRAIN_SPEC, RESTART_SPEC, WAIT_SPEC)
