"""Alertmanager matchers as people write them (`cluster="prod"`, `team=~"infra|sre"`), parsed
into `AlertMatcher` records: for `clusters.NAME.alert_matchers`, for a step's `silence.matchers`,
and turned back into the text Alertmanager's `filter` parameter takes."""

from __future__ import annotations

import re

from bot.records import AlertMatcher

# Alertmanager's label names are Prometheus' (UTF-8 names need quoting there; not accepted here,
# so a typo cannot become a matcher that quietly matches nothing).
_MATCHER = re.compile(
    r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|([^"\s,{}]*))\s*$'
)


def parse_matcher(text: str) -> AlertMatcher:
    """`name="value"` (or `!=`, `=~`, `!~`); raises ValueError with a short reason."""
    m = _MATCHER.match(text)
    if not m:
        raise ValueError(f'{text!r} is not a matcher like cluster="prod" (operators =, !=, =~, !~)')
    name, op, quoted, bare = m.groups()
    value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
    is_regex = op in ("=~", "!~")
    if is_regex:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{text!r}: the regular expression does not compile ({exc})") from None
    return AlertMatcher(name=name, value=value, is_regex=is_regex, is_equal=op in ("=", "=~"))


def matches(matcher: AlertMatcher, labels: dict[str, str]) -> bool:
    """Alertmanager's semantics: a missing label is the empty string; regexes are anchored."""
    value = labels.get(matcher.name, "")
    hit = re.fullmatch(matcher.value, value) is not None if matcher.is_regex else value == matcher.value
    return hit if matcher.is_equal else not hit
