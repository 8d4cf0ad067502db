"""Plans and runs as stored: the one way to find a plan by name, and to load a run whole.

"Load a plan by name or refuse" used to be written six times with two parse paths; every caller
now comes here, so the refusal reads the same everywhere and a stored plan is parsed one way.
"""

from __future__ import annotations

import functools

from bot.adapters.store import Store
from bot.core.runs.machine import Run
from bot.core.runs.plans import Plan, parse_plan
from bot.errors import PermanentError, PlanInvalid, UserError, clip
from bot.records import PlanRow


def find_plan(store: Store, name: str) -> tuple[PlanRow, Plan]:
    """The loaded plan called `name`, parsed; a short refusal when there is none."""
    row = store.plan(name)
    if row is None:
        raise UserError(f"no plan `{clip(name)}` is loaded; `/upgrade plan load {clip(name)}` loads it")
    return row, _parse(row)


def stored_plan(store: Store, plan_id: int) -> Plan:
    """The plan a run or schedule was made from (by id: a reload under the same name is new)."""
    row = store.plan_by_id(plan_id)
    if row is None:
        raise PermanentError(f"plan #{plan_id} is missing from the database")
    return _parse(row)


def _parse(row: PlanRow) -> Plan:
    return _parsed(row.name, row.text)


@functools.lru_cache(maxsize=128)
def _parsed(name: str, text: str) -> Plan:
    """A stored plan's text never changes (a reload is a new row), and every load of a run parses
    it again: a rehearsal that follows a run loads it many times a second, and the YAML parse was
    a third of its time. The Plan is frozen, so one parse serves every load of the same text."""
    try:
        return parse_plan(text, source=f"plan {name}")
    except PlanInvalid as exc:
        # It validated when it was loaded; a newer bot may be stricter.
        raise PermanentError(f"stored plan {name} no longer validates: {exc.errors[0]}") from None


def assemble_run(store: Store, run_id: str) -> Run | None:
    """The run with its steps, approvals and plan, or None when there is no such run."""
    found = store.run_rows(run_id)
    if found is None:
        return None
    row, steps, approvals = found
    return Run.from_records(row, steps, approvals, stored_plan(store, row.plan_id))
