"""`upgrade-bot rules test [FILE] --log LINE [--container NAME] | --event MESSAGE [--reason R]`.

Which known-issue rules a line matches, as an operator pastes it from a runbook or a terminal: each
matching rule with the text its pattern matched, the pattern's named groups (its captured fields),
and what else the rule needs of the pod that a line cannot show (its container, a waiting reason,
an annotation…). A rule whose pattern matches but that `--container` or `--reason` rule out is
named too, with why: that is usually the answer to "why does this rule not fire?".

FILE is the rules file to test (alone, as `rules check FILE` takes it); without it, the rules a
configuration file given with `--config` names (the shipped ones, then the team's, as the bot merges
them), else the shipped rules. Exit status as every command's: 3 when a rule matches, 0 when none
does, 2 for a rules file that is missing or not valid (its problems listed). Nothing here reads the
cluster, so a team runs it in CI over its own rules and lines. A log line no log rule matches is
tried as an event message too (kubectl's eviction errors repeat the API's words, which the event
rules match), and the answer says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from bot.core.rules import LineMatch, NearMiss, Rule, read_rules, try_event, try_log
from bot.errors import ConfigError
from bot.resources import BUILTIN_RULES

#: The terminal's exit statuses (`bot.frontdoor.cli`): a match is "found something".
EXIT_OK, EXIT_USAGE, EXIT_FOUND = 0, 2, 3


def run_rules_test(
    rules_path: Path | None,
    log: str | None,
    container: str | None,
    event: str | None,
    out: TextIO,
    *,
    reason: str | None = None,
    err: TextIO | None = None,
    configured: tuple[Sequence[Rule], str] | None = None,
) -> int:
    """Print which rules of `rules_path` (None: the shipped ones) match the log line `log` (from
    `container`, when given) or the event message `event` (of `reason`, when given); the exit
    status: 3 a rule matches, 0 none does, 2 a bad rules file or a wrong mix of arguments."""
    err = err or out
    if (log is None) == (event is None):
        print("upgrade-bot: rules test: give one of --log LINE or --event MESSAGE", file=err)
        return EXIT_USAGE
    if container is not None and log is None:
        print("upgrade-bot: rules test: --container goes with --log (an event has no container)", file=err)
        return EXIT_USAGE
    if reason is not None and event is None:
        print("upgrade-bot: rules test: --reason goes with --event", file=err)
        return EXIT_USAGE
    path = rules_path or BUILTIN_RULES
    # The shipped file by the name a team reads it under (`templates/rules/…`), not this host's path.
    source = str(rules_path) if rules_path is not None else f"templates/rules/{BUILTIN_RULES.name}"
    label = str(rules_path) if rules_path is not None else "the shipped rules"
    rules: Sequence[Rule]
    if configured is not None and rules_path is None:
        rules, label = configured
    else:
        try:
            rules = read_rules(path, label=source)
        except FileNotFoundError:
            print(f"upgrade-bot: {path}: no such file", file=err)
            return EXIT_USAGE
        except ConfigError as exc:
            print(exc.user_message, file=err)
            return EXIT_USAGE
    if log is not None:
        hits, misses = try_log(rules, log, container=container)
        what = f"log line{f' of container {container}' if container else ''}"
        candidates = [r.id for r in rules if r.match.log is not None]
    else:
        assert event is not None
        hits, misses = try_event(rules, event, reason=reason)
        what = f"{reason} event" if reason else "event"
        candidates = [r.id for r in rules if r.match.events is not None]
    text = log if log is not None else event
    for hit in hits:
        _print_hit(hit, out, several=len((text or "").strip().splitlines()) > 1)
    for miss in misses:
        print(f"{miss.rule.id}  no: {miss.why}", file=out)
    looked = f"{len(candidates)} of the {len(rules)} rules in {label} read {'logs' if log else 'events'}"
    if hits:
        ids = ", ".join(h.rule.id for h in hits)
        print(
            f"{len(hits)} rule{'s' if len(hits) != 1 else ''} match{'' if len(hits) != 1 else 'es'} this {what}: {ids} ({looked})",
            file=out,
        )
        return EXIT_FOUND
    print(f"no rule matches this {what} ({looked}: {', '.join(candidates) or 'none'})", file=out)
    if log is not None:
        as_event, _ = try_event(rules, log)
        if as_event:
            # kubectl's eviction error repeats the API's refusal, which an event rule matches.
            ids = ", ".join(h.rule.id for h in as_event)
            print(
                f"as an event message it matches {ids}: the bot reads these words in the cluster's events "
                "(and a drain's refusals), not in a container's log — `--event` tests it that way",
                file=out,
            )
    on_state = [r.id for r in rules if r.match.log is None and r.match.events is None]
    if on_state:
        # kube-proxy's ImagePullBackOff or a vault-agent not ready is KI005's and KI004's through
        # the pod, which no pasted line shows: say so rather than leave "no rule" as the answer.
        print(
            f"not tried: {len(on_state)} rule{'s' if len(on_state) != 1 else ''} match on a pod's state "
            f"(waiting reasons, readiness, annotations), not on a line: {', '.join(on_state)}; "
            "`upgrade-bot check` and a watch find those on the cluster",
            file=out,
        )
    return EXIT_OK


def _print_hit(hit: LineMatch, out: TextIO, *, several: bool) -> None:
    print(f"{hit.rule.id}  {hit.rule.title}  ({hit.rule.severity}; {hit.rule.source})", file=out)
    if several:
        # A pasted tail: which of its lines the rule matched (a finding's evidence shows the same).
        print(f"  {hit.signal} line: {hit.line}", file=out)
    if hit.matched:
        print(f"  matched: {hit.matched.strip()}", file=out)
    for name, value in hit.fields.items():
        print(f"  {name}: {value}", file=out)
    if hit.also:
        # A line cannot show these; the rule fires on a pod only if they hold too.
        print(f"  when also: {'; '.join(hit.also)}", file=out)


__all__ = ["EXIT_FOUND", "EXIT_OK", "EXIT_USAGE", "LineMatch", "NearMiss", "run_rules_test"]
