"""What a snapshot keeps of the containers' logs (`core/snapshots/projection.LogProbe`): the lines
that the log-reading rules match, from the containers they name, so that a twin of the cluster
replays them and its check finds the same known issues (KI002's read-only socket, say). The
snapshot reads no more logs than the check does (`MAX_LOG_READS`, two pods a workload).
A rule that reads the log of any container (it names none) is not probed: that would be every
container's log; its finding is not kept in a twin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.rules import Rule

# The check's log budget lives here, not in `podreducer` (which imports it): the snapshot needs the
# two numbers, and importing the pods' reducer for them cost the command ~0.1 s of start-up.

#: Container logs read per check at most (each is one request).
MAX_LOG_READS = 200

#: Pods of one workload whose logs are read: its pods share their configuration, and two tell a
#: pod's bad luck from the workload's problem.
LOGS_PER_WORKLOAD = 2


@dataclass(frozen=True)
class RuleLogProbe:
    rules: tuple[Rule, ...]
    reads: int = MAX_LOG_READS
    per_workload: int = LOGS_PER_WORKLOAD

    @property
    def containers(self) -> frozenset[str]:
        return frozenset().union(*(r.match.containers for r in self.rules))

    def wanted(self, containers: Sequence[str]) -> dict[str, int]:
        """Of a pod's containers, those whose log a rule reads, with how many lines of it."""
        out: dict[str, int] = {}
        for rule in self.rules:
            assert rule.match.log is not None
            for name in containers:
                if name in rule.match.containers:
                    out[name] = max(out.get(name, 0), rule.match.log.lines)
        return out

    def keep(self, container: str, tail: str) -> list[str]:
        """The lines of a container's log tail that a rule matches (the first of each rule)."""
        out: list[str] = []
        for rule in self.rules:
            log = rule.match.log
            if log is None or container not in rule.match.containers:
                continue
            last = "\n".join(tail.rstrip("\n").split("\n")[-log.lines :])
            found = log.regex.search(last, keep_end=True)
            if found is None:
                continue
            line = found.line
            if line not in out:
                out.append(line)
        return out


def log_probe(rules: Sequence[Rule]) -> RuleLogProbe | None:
    """The probe of the rules that read a named container's log; None when no rule does."""
    reading = tuple(r for r in rules if r.match.log is not None and r.match.containers)
    return RuleLogProbe(reading) if reading else None
