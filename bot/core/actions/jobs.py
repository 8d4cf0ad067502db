"""The cluster actions (issue 15): cordon, uncordon, drain, restart and wait-nodegroup.

Each is a LONG action (`long=True`): the approval that runs the step only stores a job (a row in
the database, `bot.core.jobs.service`) and the step stays running; the triggers front door drives
the job on the leader, persisting its progress after every tick, and commits the step's end when
the job ends (`RunService.finish_long`). A restart in the middle leaves the step interrupted, and
`resume` continues the SAME job from its recorded progress — never from scratch, never twice.

The kinds, their arguments and the arguments' checks are declared once, in
`bot.core.jobs.registry.KINDS`; this module turns each into an action. Every action also takes
`dry_run: true`, which lists exactly what would happen and changes nothing. The mutating ones
need a gate of two people (the plan validator says so), unless they are dry runs.
"""

from __future__ import annotations

from bot.core.actions.base import ActionContext, ActionResult, ActionSpec
from bot.core.jobs.registry import KINDS
from bot.records import ActionRequest


def run(ctx: ActionContext, request: ActionRequest) -> ActionResult:
    if ctx.start_job is None:
        return ActionResult(ok=False, detail=f"this front door cannot run the `{request.call.name}` action")
    return ActionResult(ok=True, detail=ctx.start_job(request))


SPECS: tuple[ActionSpec, ...] = tuple(
    ActionSpec(
        name=kind.name,
        summary=kind.summary,
        required=kind.required,
        optional=kind.arguments - kind.required,
        mutating=kind.mutating,
        long=True,
        run=run,
        check=kind.check,
    )
    for kind in KINDS
)
