"""Silences as leases (issue 39 item 5, after tuppr's pattern): a disruptive step's
`silence: {matchers: [...], max: 4h}` becomes an Alertmanager silence the bot holds only while the
step runs, so the alerts a drain is expected to cause page nobody — and the gate still counts them.

The rules, each kept here:
- created only after the step's first healthy check (`healthy=True`);
- while the step runs it is re-extended to now + `HOLD` (25 min); `startsAt` and the matchers
  stay as Alertmanager first stored them, so the id stays the same;
- when the step ends, the run pauses (a question to people, an interruption) or is aborted, it is
  cut to a `TAIL` (5 min): if the bot dies instead, its end time runs out by itself (≤ 25 min);
- `createdBy` is `upgrade-bot/RUN/STEP`; the id lives in the job's stored progress, so a restarted
  replica that resumes the job adopts it (and re-creates it if Alertmanager let it expire); a
  silence put just before the bot died, whose id never reached the store, is found by its
  `createdBy` (`adopted`) when the job is interrupted or resumed;
- it never outlives `max` from its creation;
- an Alertmanager error never blocks the step: it is kept as `error` and the gate shows it.

The lease (JSON, in the job's progress under `background.silence`):

    {"matchers": ["alertname=~\\"KubeNode.*\\""], "max": 14400, "id": "…", "starts_at": "…",
     "ends_at": "…", "since": "…", "created_by": "upgrade-bot/R1/drain-ng-1", "error": "", "spent": false}
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.durations import parse_duration
from bot.core.evidence.matchers import parse_matcher
from bot.core.evidence.ports import AlertSource
from bot.core.evidence.view import at_time
from bot.errors import EvidenceUnavailable, UserError, clip

HOLD = timedelta(minutes=25)
TAIL = timedelta(minutes=5)
#: Re-extend once less than this is left: about one write a minute, not one a tick.
RENEW_BELOW = HOLD - timedelta(minutes=1)
DEFAULT_MAX = timedelta(hours=4)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: Any) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def lease_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A lease not yet held, from the step's `silence:` (`{matchers: [...], max}`); UserError
    with a short reason when it is not one."""
    matchers = spec.get("matchers")
    if not isinstance(matchers, list) or not matchers or not all(isinstance(m, str) for m in matchers):
        raise UserError("silence: matchers is a list like ['alertname=\"KubeNodeNotReady\"']")
    for m in matchers:
        try:
            parse_matcher(m)
        except ValueError as exc:
            raise UserError(f"silence: {exc}") from None
    text = str(spec.get("max", "") or "").strip()
    try:
        longest = parse_duration(text) if text else DEFAULT_MAX
    except ValueError as exc:
        raise UserError(f"silence: max: {exc}") from None
    if longest <= timedelta(0) or longest > timedelta(days=7):
        raise UserError("silence: max must be longer than 0 and at most 7d")
    return {"matchers": list(matchers), "max": longest.total_seconds(), "id": None, "starts_at": None,
            "ends_at": None, "since": None, "created_by": "", "error": "", "spent": False}  # fmt: skip


def hold(
    source: AlertSource, lease: dict[str, Any], *, now: datetime, healthy: bool, created_by: str
) -> dict[str, Any]:
    """The lease while the step runs: created once healthy, re-extended to now + HOLD, never past
    `max`. Returns the new lease (the input is not changed)."""
    lease = dict(lease)
    if lease.get("spent"):
        return lease
    if lease.get("id") is None:
        if not healthy:
            return lease
        lease = adopted(source, lease, created_by=created_by)
        if lease.get("id") is None:
            first = {**lease, "created_by": created_by, "since": _iso(now)}
            return _put(source, first, now=now, starts=now, ends=now + HOLD)
    starts = _time(lease["starts_at"]) or now
    ends = _time(lease["ends_at"]) or now
    if now >= _limit(lease, starts):
        return {**lease, "spent": True}
    if ends <= now:
        # It ran out while nobody held it (the bot was away): a new silence under the same lease,
        # whose `max` still counts from the first.
        return _put(source, {**lease, "id": None}, now=now, starts=now, ends=now + HOLD)
    if ends - now >= RENEW_BELOW and not lease.get("error"):
        return lease
    return _put(source, lease, now=now, starts=starts, ends=now + HOLD)


def release(
    source: AlertSource, lease: dict[str, Any], *, now: datetime, created_by: str = ""
) -> dict[str, Any]:
    """Cut a held lease to now + TAIL (never later than it already ends, nor past `max`). With
    `created_by`, a lease stored without an id is first looked for in Alertmanager (`adopted`)."""
    lease = dict(lease)
    if created_by and not lease.get("spent"):
        lease = adopted(source, lease, created_by=created_by)
    if lease.get("id") is None or lease.get("spent"):
        return lease
    starts = _time(lease["starts_at"]) or now
    ends = _time(lease["ends_at"]) or now
    if ends <= now + TAIL:
        return lease
    return _put(source, lease, now=now, starts=starts, ends=now + TAIL)


def adopted(source: AlertSource, lease: dict[str, Any], *, created_by: str) -> dict[str, Any]:
    """A lease stored without an id whose silence may exist all the same: the bot stopped between
    Alertmanager's answer and the job's next save, so the id never reached the store. The newest
    active or pending silence with this step's `createdBy` is taken over (its id, start and end),
    so that it is cut or held rather than left to run out, and never put twice. The lease as it
    was when there is none, or with `error` when Alertmanager cannot be asked."""
    if lease.get("id") is not None:
        return lease
    try:
        ours = [
            s for s in source.silences() if s.created_by == created_by and s.state in ("active", "pending")
        ]
    except EvidenceUnavailable as exc:
        return {**lease, "error": clip(exc.reason, 200)}
    if not ours:
        return lease
    found = max(ours, key=lambda s: s.starts_at)
    return {
        **lease,
        "id": found.id,
        "created_by": created_by,
        "starts_at": _ms(found.starts_at),
        "ends_at": _iso(found.ends_at),
        "since": lease.get("since") or _iso(found.starts_at),
    }


def _ms(moment: datetime) -> str:
    """startsAt to the millisecond Alertmanager keeps: an update that repeats it keeps the id."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _put(
    source: AlertSource, lease: dict[str, Any], *, now: datetime, starts: datetime, ends: datetime
) -> dict[str, Any]:
    ends = min(ends, _limit(lease, starts))
    try:
        silence_id = source.put_silence(
            matchers=[parse_matcher(m) for m in lease["matchers"]],
            starts_at=starts,
            ends_at=ends,
            created_by=lease["created_by"],
            comment=f"upgrade-bot: held while {lease['created_by'].removeprefix('upgrade-bot/')} runs; "
            "ends by itself if the bot stops",
            silence_id=lease.get("id"),
        )
        stored_start = starts
        if lease.get("id") is None or silence_id != lease.get("id"):
            # Alertmanager may move a new silence's startsAt to its own now: keep ITS value, which
            # the updates must repeat for the id to stay the same.
            found = next((s for s in source.silences() if s.id == silence_id), None)
            if found is not None:
                stored_start = found.starts_at
    except EvidenceUnavailable as exc:
        return {**lease, "error": clip(exc.reason, 200)}
    return {**lease, "id": silence_id, "starts_at": _ms(stored_start), "ends_at": _iso(ends), "error": ""}


def _limit(lease: Mapping[str, Any], starts: datetime) -> datetime:
    """When the lease must be over: `max` after its first silence began."""
    return (_time(lease.get("since")) or starts) + timedelta(seconds=float(lease["max"]))


def line(lease: Mapping[str, Any]) -> str:
    """The gate's line for the lease."""
    if lease.get("error"):
        return f"Silence: Alertmanager error — {lease['error']} (the step goes on)"
    if lease.get("id") is None:
        return "Silence: not yet (created after the first healthy check)"
    if lease.get("spent"):
        return f"Silence {lease['id']}: reached its max"
    ends = _time(lease.get("ends_at"))
    return f"Silence {lease['id']} held" + (f" until {at_time(ends)}" if ends is not None else "")
