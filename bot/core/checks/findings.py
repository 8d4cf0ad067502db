"""What a check reports: findings with a stable id and a severity, gathered in a report.

Every check module declares the ids it reports (`FINDINGS = declare(...)`, `FindingKind`); the
registry of every id the bot can report, rules' ids included, is `bot.core.checks.ids`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

# The severities are the rules' too (a rule names the one its findings take); they sit below.
from bot.core.rules.model import RECOMMENDED as RECOMMENDED
from bot.core.rules.model import REQUIRED as REQUIRED

_ID = re.compile(r"^[A-Z][A-Z0-9_-]{1,31}$")


def valid_id(finding: str) -> bool:
    """Is `finding` shaped like a finding's id (API001, KI004)?"""
    return bool(_ID.match(finding))


@dataclass(frozen=True, kw_only=True)
class FindingKind:
    """A finding id a check (or a rule) can report: what `waive` and `checks.ignore` accept."""

    id: str
    #: The strictest severity it is reported with: a Required finding's waiver takes two people.
    severity: str
    #: What it is about, in a few words (the registry's listing, "did you mean" hints).
    about: str
    #: Reported Recommended on some clusters and Required on others (a certificate that expires
    #: later or sooner): its waiver follows the stricter rule, since a waiver outlives the check
    #: that prompted it and covers the graver case too.
    varies: bool = False
    #: Where it comes from: `check bot.core.checks.eks`, `rule templates/rules/known-issues.yaml:60`.
    source: str = ""


def declare(source: str, *kinds: FindingKind) -> Mapping[str, FindingKind]:
    """A check module's `FINDINGS`: its ids, each once, with `source` set to the module."""
    out: dict[str, FindingKind] = {}
    for kind in kinds:
        if not valid_id(kind.id) or kind.severity not in (REQUIRED, RECOMMENDED):
            raise ValueError(f"{source}: {kind.id!r} {kind.severity!r} is not a finding id and severity")
        if kind.id in out:
            raise ValueError(f"{source}: {kind.id} is declared twice")
        out[kind.id] = replace(kind, source=source)
    return out


@dataclass(frozen=True, kw_only=True)
class Finding:
    id: str
    severity: str
    title: str
    objects: tuple[str, ...]
    why: str
    fix: str
    source: str = ""
    #: The gated one-step fix a Fix… button may start, as `/upgrade action` takes it
    #: (`uncordon node=a,b`); empty when the remedy is for people only.
    action: str = ""


def listed(objects: Sequence[str], most: int) -> tuple[str, ...]:
    """A finding's objects: the first `most` named, the rest counted (`… and 3 more`)."""
    shown = tuple(objects[:most])
    more = len(objects) - len(shown)
    return (*shown, f"… and {more} more") if more else shown


@dataclass(frozen=True, kw_only=True)
class Cover:
    """What accepts a finding: a waiver (`/upgrade waive`, stored, expiring) or an entry of the
    configuration's `checks.ignore` list (permanent, reviewed). No `objects`: the whole finding."""

    source: str  # "waiver" | "ignore"
    label: str  # "waiver 3" | "checks.ignore[0]"
    finding: str
    objects: tuple[str, ...]
    reason: str
    by: tuple[str, ...] = ()
    until: datetime | None = None
    #: A waiver made for a Recommended finding (one person's word): it does not cover the finding
    #: once it is Required (a team's rules raised it), which needs two people.
    one_person: bool = False


@dataclass(frozen=True, kw_only=True)
class Covered:
    """A finding's objects (or the whole finding) that covers accepted: not counted as failing."""

    finding: Finding
    covers: tuple[Cover, ...]


@dataclass(frozen=True, kw_only=True)
class Report:
    cluster: str
    target: str
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    #: Findings (or some of their objects) accepted by a waiver or the ignore list.
    covered: tuple[Covered, ...] = ()
    #: How many active waivers the check read from the store; None when it read none (the
    #: terminal without a configuration file, or over manifests alone), which its output says.
    waivers: int | None = None

    @property
    def failed(self) -> bool:
        return any(f.severity == REQUIRED for f in self.findings)

    @property
    def unread(self) -> list[str]:
        """The lists most checks rest on (`CORE_LISTS`) that the check could not read."""
        return unread_core(self.notes)

    @property
    def incomplete(self) -> bool:
        """No Required finding, but a list most checks rest on was not read: not a pass (it would
        vouch for what nobody looked at), and not a failure either. The verdict says INCOMPLETE."""
        return not self.failed and bool(self.unread)

    @property
    def verdict(self) -> str:
        """ "FAILED", "INCOMPLETE" or "passed", as every output says it."""
        return "FAILED" if self.failed else "INCOMPLETE" if self.incomplete else "passed"


#: Why a cloud's checks were skipped on a cluster whose configuration names no provider of that
#: cloud: a choice of the configuration (every cluster without one, EKS or not, says it), not a
#: failure, so it is no blind spot of a check's verdict; a step that asks for that cloud's ids only
#: is still not checked.
NO_PROVIDER = "the cluster's configuration names no provider"


def cloud_skipped(cloud: str, why: str) -> str:
    """The note of a cloud's checks that did not run (its SDK is not installed, no provider is named)."""
    return f"{cloud} checks skipped: {why}"


def cloud_not_completed(cloud: str, why: str) -> str:
    """The note of a cloud's checks that started and did not finish (the cloud did not answer)."""
    return f"{cloud} checks not completed: {why}"


#: A note that says part of the checks saw nothing, so its findings are missing from the report: a
#: list the bot could not read (`not read: …`), or a cloud's checks skipped or not completed (the
#: two notes above; `cloud` is the prefix of that cloud's finding ids: EKS, AKS, GKE).
_BLIND = re.compile(r"^(?:not read\b|(?P<cloud>[A-Z]+) checks (?:skipped|not completed): (?P<why>.*))", re.S)


#: The lists most checks rest on: one the check could not read leaves its verdict INCOMPLETE, not
#: passed (the nodes: skew, capacity, cordons; the pods: crash loops, drains, known issues; the
#: workloads and their budgets: PDB and RES). Other lists not read (events, Services, webhooks,
#: certificates, the containers' logs, an opt-in role) stay notes beside the verdict.
CORE_LISTS = ("nodes", "pods", "deployments", "statefulsets", "daemonsets", "poddisruptionbudgets")
_UNREAD = re.compile(r"^not read: ([\w.-]+):")


def unread_core(notes: Iterable[str]) -> list[str]:
    """The `CORE_LISTS` that `notes` say were not read, in that order."""
    unread = {m.group(1) for n in notes if (m := _UNREAD.match(n))}
    return [name for name in CORE_LISTS if name in unread]


def blind_spots(notes: Iterable[str]) -> list[str]:
    """The notes that say what the checks did not see (people read them beside the verdict); not a
    cloud's checks left out because no provider of it is named (`NO_PROVIDER`)."""
    return [n for n in notes if (m := _BLIND.match(n)) and not (m.group("why") or "").startswith(NO_PROVIDER)]


def unchecked_clouds(notes: Iterable[str]) -> dict[str, str]:
    """Each cloud whose checks did not run or finish (the prefix of its finding ids) → its note."""
    out: dict[str, str] = {}
    for note in notes:
        match = _BLIND.match(note)
        if match and match.group("cloud"):
            out.setdefault(match.group("cloud"), note)
    return out


#: Kinds whose objects the chat summary names as `namespace/name` alone (the report keeps the kind).
_WORKLOAD = re.compile(
    r"^(?:Deployment|StatefulSet|DaemonSet|ReplicaSet|Job|CronJob|Pod|Rollout) ([^\s/]+/[^\s:,()]+)"
)
#: Lines of a finding's objects that only count what came before (`… and 3 more pods`).
_COUNTED = re.compile(r"^…\s*and \d+ more")


@dataclass(frozen=True, kw_only=True)
class SummaryLine:
    """One line of a check's chat summary: a finding id and title, and the objects it concerns."""

    id: str
    severity: str
    title: str
    objects: tuple[str, ...]
    #: How many more objects the line concerns than it names ("…and N more").
    more: int


def _named(obj: str) -> str:
    """`Deployment payments/api (2 pods)` → `payments/api`; other objects lose their details."""
    workload = _WORKLOAD.match(obj)
    if workload:
        return workload.group(1)
    return re.split(r" \(|: ", obj, maxsplit=1)[0]


def summary_lines(findings: Iterable[Finding], *, shown: int = 3) -> list[SummaryLine]:
    """The findings as chat lines: one per id and title, in first-seen order, naming at most
    `shown` objects each (a known issue seen in four workloads is one line naming them, not four
    lines of "(3 objects)"). A workload's pods are not named beside it; the report lists them."""
    groups: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for f in findings:
        _, names = groups.setdefault((f.id, f.title), (f.severity, []))
        listed = [o for o in f.objects if not _COUNTED.match(o)]
        # The pods of a workload the finding names are that workload's; name the workload only.
        if any(not o.startswith("Pod ") for o in listed):
            listed = [o for o in listed if not o.startswith("Pod ")]
        for obj in listed:
            name = _named(obj)
            if name and name not in names:
                names.append(name)
    return [
        SummaryLine(
            id=key[0],
            severity=severity,
            title=key[1],
            objects=tuple(names[:shown]),
            more=max(len(names) - shown, 0),
        )
        for key, (severity, names) in groups.items()
    ]
