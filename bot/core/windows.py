"""Maintenance windows and change freezes: when an upgrade may run, and the next times it could.

A team allows upgrades only inside recurring *windows* (the seed team: office days, Monday to
Friday, 14:00–17:00 Asia/Tokyo) and never inside *freezes* (date ranges with a reason, such as the
year-end change freeze). Everything here is a pure function of aware datetimes: no clock is read.

Rules, decided here because the issue is silent on them:

- An upgrade fits when its whole span [start, end) lies inside allowed time. Windows that touch
  (14:00–17:00 and 17:00–19:00) merge, so a span may cross the seam; a gap splits them.
- A window whose end is not after its start crosses midnight (22:00–02:00); its weekday is the day
  it opens on.
- Window times are wall-clock times in the window's zone: 14:00 JST stays 14:00 JST across any
  daylight-saving change of the reader's zone. On a day when the zone's clocks jump, a wall time
  that does not exist is read the way `zoneinfo` reads it (fold 0), which is never the inside of a
  window anyone would configure.
- No window configured means every time is allowed; freezes still apply.
- A freeze is a half-open span [start, end). Configured by dates, it covers the whole days from
  its first date to its last date inclusive, in its zone.
- `next_slots` suggests one slot per stretch of free time (the earliest start in it, rounded up to
  a quarter hour), looking at most a year ahead, so a refusal can say "next: Tue 14:00, Wed 14:00".
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import TZPATH, ZoneInfo, ZoneInfoNotFoundError, available_timezones

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEKDAY_TITLES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: How far ahead `next_slots` looks before giving up (a freeze or a too-long duration).
SEARCH_HORIZON = timedelta(days=366)
#: Suggested slot starts are rounded up to this, so `after` = 14:07 suggests 14:15, not 14:07.
SLOT_STEP = timedelta(minutes=15)


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(unknown_zone(name)) from None


def is_zone(name: str) -> bool:
    """Whether `name` is a time zone this machine knows."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def unknown_zone(name: str) -> str:
    """Why `name` is no time zone, with the nearest IANA name when there is one: "unknown time zone
    'Asia/Calcuta' (use an IANA name such as Asia/Tokyo); did you mean Asia/Kolkata?"."""
    shown = name if len(name) <= 60 else name[:60] + "…"
    said = f"unknown time zone {shown!r} (use an IANA name such as Asia/Tokyo)"
    near = _nearest_zone(name[:60])
    return f"{said}; did you mean {near}?" if near else said


def _nearest_zone(name: str) -> str:
    """The IANA Area/Location name `name` was meant to be ("" when none is near): the same but for
    case, a city alone (`Tokyo`), or a typo (difflib); an old alias is given as its current name."""
    zones = sorted(
        z for z in available_timezones() if "/" in z and not z.startswith(("Etc/", "posix/", "right/"))
    )
    by_case = {z.lower(): z for z in zones}
    by_city: dict[str, str] = {}
    for z in zones:
        by_city.setdefault(z.rsplit("/", 1)[-1].lower(), z)
    key = name.strip().lower().replace(" ", "_")
    found = by_case.get(key) or by_city.get(key)
    if found is None:
        close = difflib.get_close_matches(name.strip(), zones, n=1, cutoff=0.8)
        found = close[0] if close else None
    return _links().get(found, found) if found else ""


@functools.cache
def _links() -> dict[str, str]:
    """Old alias → current name (Asia/Calcutta → Asia/Kolkata), from the system's tzdata.zi ("L
    TARGET LINK" lines), where there is one; empty where there is none (aliases are then kept)."""
    for directory in TZPATH:
        path = Path(directory) / "tzdata.zi"
        with contextlib.suppress(OSError):
            lines = path.read_text(encoding="utf-8").splitlines()
            return {
                parts[2]: parts[1] for line in lines if len(parts := line.split()) == 3 and parts[0] == "L"
            }
    return {}


@dataclass(frozen=True)
class WallClockProblem:
    """A local time that is not one instant in its zone: `repeated` (the clocks pass it twice that
    night) or skipped; `text` says which, with the date and the zone."""

    repeated: bool
    text: str


def wall_clock_problem(naive: datetime, zone: ZoneInfo) -> WallClockProblem | None:
    """None when `naive`, read in `zone`, is one instant; else why not: the clocks skip it that
    night, or pass it twice (a daylight-saving change), so a window would open an hour off."""
    early, late = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    if early.utcoffset() == late.utcoffset():
        return None
    when, tz = f"{naive:%Y-%m-%d %H:%M}", zone.key
    if early.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
        return WallClockProblem(
            repeated=False,
            text=f"{when} does not exist in {tz}: the clocks skip it that night (daylight saving)",
        )
    return WallClockProblem(
        repeated=True,
        text=f"{when} happens twice in {tz} that night (daylight saving: {early:%H:%M %Z}, then {late:%H:%M %Z})",
    )


def _require_aware(moment: datetime, what: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware")


@dataclass(frozen=True, kw_only=True)
class Window:
    """A recurring allowed window: on these weekdays (0 = Monday), from `start` to `end` in `zone`."""

    weekdays: frozenset[int]
    start: time
    end: time
    zone: str

    def __post_init__(self) -> None:
        if not self.weekdays or not all(0 <= d <= 6 for d in self.weekdays):
            raise ValueError("a window needs at least one weekday (0 = Monday … 6 = Sunday)")
        if self.start == self.end:
            raise ValueError("a window's start and end are the same time")
        if self.start.tzinfo is not None or self.end.tzinfo is not None:
            raise ValueError("window times are wall-clock times; the zone goes in `zone`")
        _zone(self.zone)

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start

    def describe(self) -> str:
        """`Mon–Fri 14:00–17:00 Asia/Tokyo`, for refusals and help."""
        return f"{describe_weekdays(self.weekdays)} {self.start:%H:%M}–{self.end:%H:%M} {self.zone}"

    def intervals(self, since: datetime, until: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The window's occurrences (UTC) that overlap [since, until), in order."""
        zone = _zone(self.zone)
        # Start a day early: yesterday's occurrence may cross midnight into `since`.
        day = since.astimezone(zone).date() - timedelta(days=1)
        last = until.astimezone(zone).date()
        while day <= last:
            if day.weekday() in self.weekdays:
                opens = datetime.combine(day, self.start, tzinfo=zone).astimezone(UTC)
                end_day = day + timedelta(days=1) if self.crosses_midnight else day
                closes = datetime.combine(end_day, self.end, tzinfo=zone).astimezone(UTC)
                if closes > since and opens < until and closes > opens:
                    yield opens, closes
            day += timedelta(days=1)


@dataclass(frozen=True, kw_only=True)
class Freeze:
    """No upgrades in [start, end), for `reason`."""

    start: datetime
    end: datetime
    reason: str
    #: The zone the freeze was written in; used only to describe it.
    zone: str = "UTC"

    def __post_init__(self) -> None:
        _require_aware(self.start, "a freeze's start")
        _require_aware(self.end, "a freeze's end")
        if self.end <= self.start:
            raise ValueError("a freeze must end after it starts")
        if not self.reason.strip():
            raise ValueError("a freeze needs a reason")

    @classmethod
    def from_dates(cls, first: date, last: date, *, reason: str, zone: str) -> Freeze:
        """A freeze of whole days, `first` to `last` inclusive, in `zone`."""
        tz = _zone(zone)
        if last < first:
            raise ValueError("a freeze's last day is before its first day")
        return cls(
            start=datetime.combine(first, time(0), tzinfo=tz),
            end=datetime.combine(last + timedelta(days=1), time(0), tzinfo=tz),
            reason=reason,
            zone=zone,
        )

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return start < self.end and self.start < end

    def describe(self) -> str:
        tz = _zone(self.zone)
        start, end = self.start.astimezone(tz), self.end.astimezone(tz)
        if start.time() == time(0) and end.time() == time(0):
            last = end.date() - timedelta(days=1)
            span = f"{start:%Y-%m-%d}" if last == start.date() else f"{start:%Y-%m-%d} to {last:%Y-%m-%d}"
        else:
            span = f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"
        return f"{self.reason} ({span} {self.zone})"


@dataclass(frozen=True, kw_only=True)
class Slot:
    """A suggested start and end that fit inside a window and outside every freeze."""

    start: datetime
    end: datetime


@dataclass(frozen=True, kw_only=True)
class WindowCheck:
    """The verdict on a proposed span: ok, or refused with the reasons a person can act on."""

    ok: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The allowed windows and the freezes, from the configuration (a plan may bring its own)."""

    windows: tuple[Window, ...] = ()
    freezes: tuple[Freeze, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        return "; ".join(w.describe() for w in self.windows) if self.windows else "any time"

    def check(self, start: datetime, end: datetime) -> WindowCheck:
        """Is [start, end) entirely inside allowed time and clear of every freeze?"""
        _require_aware(start, "start")
        _require_aware(end, "end")
        if end <= start:
            return WindowCheck(ok=False, reasons=("the upgrade must end after it starts",))
        reasons: list[str] = []
        if self.windows and not any(
            a <= start and end <= b for a, b in self._allowed(start - timedelta(days=1), end)
        ):
            reasons.append(f"outside the allowed windows ({self.describe()})")
        for freeze in self.freezes:
            if freeze.overlaps(start, end):
                reasons.append(f"inside the freeze: {freeze.describe()}")
        return WindowCheck(ok=not reasons, reasons=tuple(reasons))

    def next_slots(self, after: datetime, duration: timedelta, count: int = 3) -> list[Slot]:
        """Up to `count` slots of `duration` starting at or after `after`, earliest first."""
        _require_aware(after, "after")
        if duration <= timedelta(0):
            raise ValueError("the duration must be positive")
        earliest = _ceil(after.astimezone(UTC), SLOT_STEP)
        horizon = earliest + SEARCH_HORIZON
        slots: list[Slot] = []
        for a, b in _subtract(self._allowed(earliest, horizon), self.freezes):
            start = _ceil(max(a, earliest), SLOT_STEP)
            if start + duration <= b:
                slots.append(Slot(start=start, end=start + duration))
                if len(slots) >= count:
                    break
        return slots

    def _allowed(self, since: datetime, until: datetime) -> list[tuple[datetime, datetime]]:
        """Allowed time overlapping [since, until) as merged, sorted UTC intervals."""
        since, until = since.astimezone(UTC), until.astimezone(UTC)
        if not self.windows:
            return [(since, until)]
        spans = sorted(span for w in self.windows for span in w.intervals(since, until))
        return _merge(spans)


def _merge(spans: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _subtract(
    spans: Sequence[tuple[datetime, datetime]], freezes: Sequence[Freeze]
) -> list[tuple[datetime, datetime]]:
    """`spans` with every freeze cut out."""
    out = list(spans)
    for freeze in freezes:
        fa, fb = freeze.start.astimezone(UTC), freeze.end.astimezone(UTC)
        cut: list[tuple[datetime, datetime]] = []
        for a, b in out:
            if fb <= a or b <= fa:
                cut.append((a, b))
                continue
            if a < fa:
                cut.append((a, fa))
            if fb < b:
                cut.append((fb, b))
        out = cut
    return out


def _ceil(moment: datetime, step: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    remainder = (moment - epoch) % step
    return moment if not remainder else moment + (step - remainder)


# ---------------------------------------------------------------------------------------------
# Parsing the configuration's spellings (`mon-fri`, `14:00`)

_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$", re.ASCII)  # "２２:００" is not a time anyone typed


def parse_weekdays(spec: str | Sequence[str]) -> frozenset[int]:
    """`mon-fri`, `sat,sun`, or a list of day names → weekday numbers (0 = Monday)."""
    parts = [spec] if isinstance(spec, str) else list(spec)
    days: set[int] = set()
    for part in (p.strip().lower() for chunk in parts for p in str(chunk).split(",")):
        if not part:
            continue
        first, sep, last = part.partition("-")
        if first[:3] not in WEEKDAYS or (sep and last[:3] not in WEEKDAYS):
            raise ValueError(f"{part!r} is not a weekday or a range like mon-fri")
        a = WEEKDAYS.index(first[:3])
        b = WEEKDAYS.index(last[:3]) if sep else a
        # A range may wrap past Sunday: fri-mon is Friday, Saturday, Sunday, Monday.
        span = range(a, b + 1) if a <= b else [*range(a, 7), *range(b + 1)]
        days.update(span)
    if not days:
        raise ValueError("no weekdays given")
    return frozenset(days)


def parse_time(text: str) -> time:
    """`14:00` → a wall-clock time (24-hour clock)."""
    match = _TIME.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a time like 14:00")
    return time(int(match.group(1)), int(match.group(2)))


def describe_weekdays(days: frozenset[int]) -> str:
    """{0,1,2,3,4} → `Mon–Fri`; {5,6,0} → `Mon, Sat, Sun`."""
    ordered = sorted(days)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{_WEEKDAY_TITLES[ordered[0]]}–{_WEEKDAY_TITLES[ordered[-1]]}"
    return ", ".join(_WEEKDAY_TITLES[d] for d in ordered)
