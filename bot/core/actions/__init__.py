"""The actions a plan step may ask the bot to perform once its gate opens: one module each.

Adding an action is adding a module here that defines `SPEC` (name, arguments, runner) and
listing it in `BUILTIN`. Plans are checked against the registry, so a typo in an action name is a
validation error, not a surprise at 3 a.m. Until an action exists, a plan expresses that work as
a *plain gated step* (no `actions:`): the bot gates and records it, people do it. Names that are
planned but not built yet are in `PLANNED`, so the validator can say so instead of "unknown".
"""

from __future__ import annotations

from bot.core.actions import check, diff, jobs, snapshot, watch
from bot.core.actions.base import ActionRegistry, ActionSpec

BUILTIN: tuple[ActionSpec, ...] = (snapshot.SPEC, diff.SPEC, check.SPEC, watch.SPEC, *jobs.SPECS)

#: Promised by the roadmap, not built yet: a plan uses a plain gated step for these meanwhile.
PLANNED = frozenset({"announce"})


def default_registry() -> ActionRegistry:
    return ActionRegistry(BUILTIN)
