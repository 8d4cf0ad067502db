"""What an action is: its spec (name, arguments, and the function that performs it), a call of
it in a plan, the context it runs in, and the registry plans are validated against.

An action's runner gets an `ActionContext` of capabilities (take a snapshot, compare two), not
the store or the Kubernetes client: the assembly (`bot.core.runs.capabilities.action_context`)
binds those to the services, so an action module stays plain core code and a test can hand it a
context of its own. A call and a request are records (`bot.records.ActionCall`, `ActionRequest`):
the jobs, below the actions, take them too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.core.checks.findings import Report
from bot.records import ActionRequest, FileAttachment


def fitting(entries: Sequence[str], budget: int, *, at_least_one: bool = True) -> list[str]:
    """The first `entries` whose lengths, two characters of separator each, fit in `budget`: whole
    entries, for a step's line (which the event line clips at 500 characters); with `at_least_one`,
    the first entry even past the budget, so a line names something."""
    listed: list[str] = []
    for entry in entries:
        if (listed or not at_least_one) and sum(len(e) + 2 for e in listed) + len(entry) > budget:
            break
        listed.append(entry)
    return listed


@dataclass(frozen=True, kw_only=True)
class ActionResult:
    """How an action ended; `detail` is one line for the run's thread, `files` go with that line
    (uploaded into the thread once, like the line itself: the full report of a check)."""

    ok: bool
    detail: str
    files: tuple[FileAttachment, ...] = ()


class DiffSummary(Protocol):
    """What the diff action reads of a diff report (`bot.core.snapshots.diff.DiffReport`)."""

    @property
    def regressions(self) -> list[Any]: ...

    @property
    def expected(self) -> list[Any]: ...

    @property
    def has_regressions(self) -> bool: ...

    @property
    def not_compared(self) -> list[str]: ...


@dataclass(frozen=True, kw_only=True)
class ActionContext:
    """The capabilities actions use, bound by `bot.core.runs.capabilities.action_context` to the services and adapters."""

    #: (cluster, label, taken_by) → the stored snapshot's id, label, counts and gaps (what it could
    #: not capture, as (resource, reason) pairs).
    take_snapshot: Callable[[str, str, str], tuple[int, str, Mapping[str, int], tuple[tuple[str, str], ...]]]
    #: (cluster, before, after) → the diff report of two stored snapshots.
    #: (cluster, before, after, replaces: new node group → the old one it replaces)
    compare_snapshots: Callable[[str, str, str, Mapping[str, str]], DiffSummary]
    #: (cluster, target or None) → the pre-flight report (`bot.core.checks.findings.Report`).
    run_check: Callable[[str, str | None], Report] | None = None
    #: Starts a LONG action's work (a watch) for the request; its one-line detail. The triggers
    #: front door drives it and commits `action_finished` when it ends. None: not available here.
    start_watch: Callable[[ActionRequest], str] | None = None
    #: Starts a LONG cluster job (cordon, uncordon, drain, restart, wait-nodegroup; see
    #: `bot.core.jobs.base`) for the request, or performs its dry run; its one-line detail. None:
    #: not available here.
    start_job: Callable[[ActionRequest], str] | None = None
    #: (request, snapshot id) → records the evidence baseline (alerts firing, the plan's analysis
    #: values) with the run's snapshot; its one-line summary ("" when the cluster has no evidence
    #: source). None: not available here.
    record_baseline: Callable[[ActionRequest, int], str] | None = None


Runner = Callable[[ActionContext, ActionRequest], ActionResult]


@dataclass(frozen=True, kw_only=True)
class ActionSpec:
    """One action: what a plan may write for it, and the function that performs it."""

    name: str
    summary: str
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    #: True when the action changes the cluster (the step must then be gated by two people).
    mutating: bool = False
    #: True when it runs for minutes (a watch): started by the click, finished by the triggers door.
    long: bool = False
    defaults: Mapping[str, str] = field(default_factory=dict)
    #: Performs the action; None for a spec that only validates (tests, planned actions).
    run: Runner | None = None
    #: Checks the arguments' values without a cluster (raises UserError); the plan validator
    #: calls it, so a bad value is refused with its line when the plan is loaded.
    check: Callable[[Mapping[str, str]], object] | None = None

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
