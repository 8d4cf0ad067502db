"""One duration grammar for the whole bot: plans, the configuration, `--since`, displayed ages.

Written as whole numbers with units, largest first, combined without spaces: `90s`, `30m`,
`1h30m`, `2d`, `1w2d`, `1d12h30m15s`; `0` alone is zero. Units: w (weeks), d, h, m, s. The same
text always means the same span wherever a user types it, and `format_duration` writes it back
the same way (`format_duration(parse_duration(t))` is `t` in its shortest form).
"""

from __future__ import annotations

import re
from datetime import timedelta

# re.ASCII: `\d` would also match "９" or "١" (and `int()` reads them), so `--for ９d` was 9 days.
GRAMMAR = re.compile(
    r"^(?:(\d{1,12})w)?(?:(\d{1,12})d)?(?:(\d{1,12})h)?(?:(\d{1,12})m)?(?:(\d{1,12})s)?$", re.ASCII
)
_UNITS = (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
#: Nothing the bot schedules or waits for is longer than this; a larger value is a typo.
LONGEST = timedelta(days=3650)
EXAMPLES = "90s, 30m, 1h30m, 2d or 1w"


def parse_duration(text: str, *, longest: timedelta = LONGEST) -> timedelta:
    """`90s`, `30m`, `1h30m`, `2d`, `1w` → a duration ≥ 0; ValueError says what was expected."""
    raw = str(text).strip().lower().replace(" ", "")
    if raw == "0":
        return timedelta(0)
    match = GRAMMAR.match(raw)
    if not raw or not match:
        typed = str(text).strip()
        shown = typed if len(typed) <= 40 else typed[:40] + "…"
        raise ValueError(f"{shown!r} is not a duration like {EXAMPLES}{_spelled(raw)}")
    seconds = sum(int(g) * size for g, (_, size) in zip(match.groups(), _UNITS, strict=True) if g)
    if seconds > longest.total_seconds():
        raise ValueError(f"{raw!r} is longer than {format_duration(longest)}")
    return timedelta(seconds=seconds)


#: Units written out ("15 minutes", "2hrs"), read only to say how the grammar writes them.
_WORDS = re.compile(r"^(\d{1,12})(w|d|h|m|s)(?:eeks?|ays?|ours?|rs?|inutes?|ins?|econds?|ecs?)$", re.ASCII)


def _spelled(raw: str) -> str:
    """ " (write 15m)" for a unit written out, so the person sees the form the grammar takes."""
    match = _WORDS.match(raw)
    return f" (write {match[1]}{match[2]})" if match else ""


def format_duration(value: timedelta) -> str:
    """`1h30m`, `2d`, `45s`, `0s`: the grammar's shortest form (weeks are shown as days)."""
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    parts = []
    for unit, size in _UNITS[1:]:
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return sign + ("".join(parts) or "0s")


def in_words(value: timedelta) -> str:
    """A span as people say it, coarser the longer it is: `7h30m` and `1d7h` (the grammar's form)
    under two days, then `12 days`, then `over a year`, `over 3 years` (never `367d7h30m`)."""
    seconds = abs(int(value.total_seconds()))
    days = seconds // 86400
    if days < 2:
        return format_duration(timedelta(seconds=seconds))
    if days < 365:
        return f"{days} days"
    years = days // 365
    return "over a year" if years == 1 else f"over {years} years"


#: kubectl's HumanDuration past two minutes, a unit a row: (the unit and its seconds, the next smaller
#: unit and its seconds, below how many of the unit the smaller one is shown too, below how many
#: the unit alone is shown; None: always).
_AGE_UNITS: tuple[tuple[str, int, str, int, int, int | None], ...] = (
    ("m", 60, "s", 1, 10, 180),
    ("h", 3600, "m", 60, 8, 48),
    ("d", 86400, "h", 3600, 8, 365 * 2),
    ("y", 365 * 86400, "d", 86400, 8, None),
)


def kubectl_age(span: timedelta) -> str:
    """The AGE column as kubectl prints it (its HumanDuration: coarser the older a thing is)."""
    seconds = int(span.total_seconds())
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    for unit, size, smaller, smaller_size, with_smaller_below, alone_below in _AGE_UNITS:
        count, rest = divmod(seconds, size)
        if count < with_smaller_below:
            rest //= smaller_size
            return f"{count}{unit}{rest}{smaller}" if rest else f"{count}{unit}"
        if alone_below is None or count < alone_below:
            break
    return f"{count}{unit}"
