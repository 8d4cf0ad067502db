"""The action registry: built-in things a plan step may ask the bot to do once its gate opens.

An action is a name, the arguments it accepts, and (at run time) a function. Plans are checked
against this registry, so a typo in an action name is a validation error, not a surprise at 3 a.m.
Later work (watch, pre-flight checks, announcements, cordon/drain/restart) plugs in by adding an
`ActionSpec` here. Until an action exists, a plan expresses that work as a *plain gated step*
(no `actions:`): the bot gates and records it, people do it. Names that are planned but not built
yet are listed in `PLANNED` so the validator can say so instead of "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class ActionSpec:
    """What a plan may write for one action: its name and its arguments."""

    name: str
    summary: str
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    #: True when the action changes the cluster (the step must then be gated by two people).
    mutating: bool = False
    defaults: Mapping[str, str] = field(default_factory=dict)

    @property
    def arguments(self) -> frozenset[str]:
        return self.required | self.optional


class ActionRegistry:
    """Action specs by name; plans are validated against one of these."""

    def __init__(self, specs: tuple[ActionSpec, ...] = ()) -> None:
        self._specs: dict[str, ActionSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: ActionSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"action {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ActionSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)


#: Built today. `snapshot` stores a labelled snapshot; `diff` compares two stored ones.
BUILTIN = (
    ActionSpec(
        name="snapshot",
        summary="take and store a snapshot of the cluster under a label",
        required=frozenset({"label"}),
    ),
    ActionSpec(
        name="diff",
        summary="compare two stored snapshots (by label or id) and post the report",
        required=frozenset({"before", "after"}),
    ),
)

#: Promised by the roadmap, not built yet: a plan uses a plain gated step for these meanwhile.
PLANNED = frozenset({"announce", "checks", "watch", "cordon", "drain", "restart"})


def default_registry() -> ActionRegistry:
    return ActionRegistry(BUILTIN)
