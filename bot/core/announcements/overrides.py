"""Overriding the maintenance windows: the refusal that says why, who may override, its audit.

Scheduling or starting outside the allowed windows (or in a freeze) is refused with the next
allowed slots; the coordinator may override with a reason, and the override is audited on its own
line, saying what it went past: the windows, a freeze, or both. Used by
`schedule`, `schedule move` and `start` alike, so all three refuse and override the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.core.audit import audit_entry
from bot.core.durations import format_duration
from bot.core.people import Directory, roles_of
from bot.core.windows import Policy
from bot.errors import PermissionDenied, UsageError
from bot.records import AuditEntry

#: How many next allowed slots a refusal suggests.
SUGGESTED_SLOTS = 3


def window_refusal(policy: Policy, start: datetime, end: datetime, tz: str) -> str | None:
    """None when [start, end) is allowed; else why not, with the next allowed slots in `tz`."""
    verdict = policy.check(start, end)
    if verdict.ok:
        return None
    zone = ZoneInfo(tz)
    slots = policy.next_slots(start, end - start, count=SUGGESTED_SLOTS)
    lines = [
        f"{start.astimezone(zone):%a %Y-%m-%d %H:%M}–{end.astimezone(zone):%H:%M} {tz} is "
        + "; ".join(verdict.reasons)
        + "."
    ]
    if slots:
        lines.append(
            "Next allowed: "
            + ", ".join(f"{s.start.astimezone(zone):%a %Y-%m-%d %H:%M}" for s in slots)
            + f" ({tz})."
        )
    elif (longest := _longest(policy)) is not None and end - start > longest:
        # Not a year-long freeze: the plan's window fits in none of the allowed ones.
        lines.append(
            f"The plan's window lasts {format_duration(end - start)}, longer than the longest allowed "
            f"window ({format_duration(longest)}): no slot can hold it; shorten the plan's window."
        )
    else:
        lines.append("No allowed slot in the next year.")
    lines.append('The coordinator may override with `--override --reason "…"` (audited).')
    return "\n".join(lines)


def _longest(policy: Policy) -> timedelta | None:
    """The longest of the allowed windows (one across midnight counted whole); None: no windows."""
    lengths = []
    for window in policy.windows:
        start = datetime.combine(date(2000, 1, 3), window.start)
        end = datetime.combine(date(2000, 1, 3), window.end)
        lengths.append(end - start if end > start else end + timedelta(days=1) - start)
    return max(lengths, default=None)


def overridden(policy: Policy, start: datetime, end: datetime) -> str:
    """What an override of [start, end) goes past, in words: "inside the freeze: year-end freeze
    (2026-12-24 to 2027-01-04 Europe/Berlin)", "outside the allowed windows (…)", or both."""
    return " and ".join(policy.check(start, end).reasons)


def authorize_override(
    *,
    user_id: str,
    roster: Mapping[str, Sequence[str]],
    directory: Directory,
    reason: str,
    refusal: str,
    past: str,
) -> str:
    """The override's text, what it goes past (`past`, from `overridden`) and why ("inside the
    freeze: year-end freeze (…) — vendor deadline"), kept with the schedule and said in the reply
    and the audit; or PermissionDenied/UsageError: only the coordinator, with a reason."""
    if "coordinator" not in roles_of(user_id, roster, directory):
        raise PermissionDenied(f"only the coordinator may override the maintenance windows.\n{refusal}")
    if not reason.strip():
        raise UsageError('an override needs a reason: `--override --reason "…"`')
    return f"{past} — {reason.strip()}" if past else reason.strip()


def override_audit(
    *,
    at: datetime,
    user_id: str,
    subcommand: str,
    arguments: str,
    done: str,
    reason: str,
    correlation_id: str,
    channel_id: str = "",
    source: str = "scheduler",
    run_id: str = "",
) -> AuditEntry:
    """The audit row of a coordinator's override of the maintenance windows (`done`: what was done;
    `reason`: `authorize_override`'s text, which says what the override went past and why)."""
    return audit_entry(
        at=at,
        user_id=user_id,
        channel_id=channel_id,
        source=source,
        kind="override",
        subcommand=subcommand,
        arguments=arguments,
        outcome="ok",
        detail=f"{done} {reason}",
        correlation_id=correlation_id,
        run_id=run_id,
    )


def merged_roster(*rosters: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Role → people from several rosters (the configuration's and the plan's)."""
    out: dict[str, tuple[str, ...]] = {}
    for roster in rosters:
        for role, people in roster.items():
            out[role] = tuple(dict.fromkeys([*out.get(role, ()), *people]))
    return out
