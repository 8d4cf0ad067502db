"""One line given by hand against the rules' patterns (`upgrade-bot rules test`).

`try_log` and `try_event` hold a log line or an event's message against the rules, and say what else
each matching rule needs of a pod, and which rules a stated container or reason rules out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.rules.model import Match, Rule, _last_lines
from bot.core.rules.patterns import Found


@dataclass(frozen=True, kw_only=True)
class LineMatch:
    """A rule whose pattern matches a log line or an event message given by hand."""

    rule: Rule
    signal: str  # "log" | "event"
    #: The line the pattern matched in (the first 200 characters, as a finding's evidence).
    line: str
    matched: str
    #: The pattern's named groups that took part in the match (`(?P<field>…)`).
    fields: Mapping[str, str]
    #: What else the rule needs of the pod that a line cannot show ("container istio-proxy").
    also: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NearMiss:
    """A rule whose pattern matches, ruled out by what was said of the line (its container, the
    event's reason): worth saying, since that is usually why a rule "does not fire"."""

    rule: Rule
    why: str


def _listed(values: Iterable[str]) -> str:
    return " or ".join(sorted(values))


def _pod_conditions(m: Match, *, container_known: bool, signal: str) -> tuple[str, ...]:
    """What `m` needs besides the line: the pod's and container's conditions, in words."""
    named = (
        ("container", () if container_known else m.containers),
        ("namespace", m.namespaces),
        ("a pod of a", m.kinds),
    )
    out = [f"{words} {_listed(values)}" for words, values in named if values]
    out += [f"label {k}" + ("" if v == "*" else f"={v}") for k, v in sorted(m.labels.items())]
    out += [f"annotation {k}" + ("" if v == "*" else f"={v}") for k, v in sorted(m.annotations.items())]
    if m.images is not None:
        out.append(f"an image matching /{m.images.pattern}/")
    states = (
        ("a container waiting:", m.waiting_reasons),
        ("a container terminated:", m.terminated_reasons),
    )
    out += [f"{words} {_listed(reasons)}" for words, reasons in states if reasons]
    flags = (
        (m.not_ready, "the container not ready"),
        (m.deleting, "the pod being deleted"),
        (m.node_not_ready, "its node NotReady"),
        (m.tolerates_all_taints, "a toleration of every taint"),
        (signal == "log" and m.events is not None, "an event about the pod too"),
    )
    out += [words for shown, words in flags if shown]
    if signal == "event" and m.log is not None:
        out.append(f"a log line matching /{m.log.regex.pattern}/ too")
    return tuple(out)


def _line_of(found: Found) -> str:
    return found.line.strip()[:200]


def try_log(
    rules: Sequence[Rule], text: str, *, container: str | None = None
) -> tuple[list[LineMatch], list[NearMiss]]:
    """The rules whose log pattern matches `text` (one line, or a pasted tail: each rule looks at
    its last `lines` lines, as it does a container's log), and those ruled out only by `container`."""
    hits: list[LineMatch] = []
    misses: list[NearMiss] = []
    for rule in rules:
        m = rule.match
        if m.log is None:
            continue
        found = m.log.regex.search(_last_lines(text, m.log.lines), keep_end=True)
        if found is None:
            continue
        if container is not None and m.containers and container not in m.containers:
            misses.append(
                NearMiss(
                    rule=rule, why=f"its pattern matches, but it reads only {_listed(m.containers)}'s log"
                )
            )
            continue
        hits.append(
            LineMatch(
                rule=rule,
                signal="log",
                line=_line_of(found),
                matched=found.text[found.start : found.end],
                fields=found.groups,
                also=_pod_conditions(m, container_known=container is not None, signal="log"),
            )
        )
    return hits, misses


def try_event(
    rules: Sequence[Rule], message: str, *, reason: str | None = None
) -> tuple[list[LineMatch], list[NearMiss]]:
    """The rules whose event pattern matches `message` (and `reason`, when given: without it, a
    rule's reasons are listed as what it also needs), and those ruled out only by `reason`."""
    hits: list[LineMatch] = []
    misses: list[NearMiss] = []
    for rule in rules:
        ev = rule.match.events
        if ev is None:
            continue
        found = ev.message.search(message) if ev.message is not None else None
        if ev.message is not None and found is None:
            continue
        if ev.message is None and (reason is None or reason not in ev.reasons):
            continue  # a rule on reasons alone: a message says nothing to it
        if reason is not None and ev.reasons and reason not in ev.reasons:
            misses.append(
                NearMiss(
                    rule=rule, why=f"its pattern matches, but only events of reason {_listed(ev.reasons)}"
                )
            )
            continue
        also = _pod_conditions(rule.match, container_known=False, signal="event")
        if reason is None and ev.reasons:
            also = (f"the event's reason {_listed(ev.reasons)}", *also)
        hits.append(
            LineMatch(
                rule=rule,
                signal="event",
                line=message.strip()[:200] if found is None else _line_of(found),
                matched=(reason or "") if found is None else found.text[found.start : found.end],
                fields=found.groups if found is not None else {},
                also=also,
            )
        )
    return hits, misses
