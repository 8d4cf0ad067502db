"""Readiness before a campaign (`check --fleet`, `/upgrade check --fleet`): the pre-flight check of
every cluster of a fleet, run concurrently, as a clusters × findings matrix.

Each cell says how a finding stands on a cluster: `Required`, `Recommended`, `waived` (accepted by
a waiver or `checks.ignore`: it does not fail the check) or nothing. A cluster that could not be
checked (its API server did not answer) gets a line of its own and fails the matrix: no data never
passes. The matrix is given as Markdown and CSV (attached in Slack, printed or written in the
terminal); each cluster's check is the same `check_cluster` as `/upgrade check`'s, with its own
waivers.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bot.core.checks.findings import REQUIRED, Report
from bot.errors import BotError
from bot.records import FileAttachment

#: Clusters checked at once: each check waits mostly on its API server, not on this process.
WORKERS = 8
REQUIRED_CELL, RECOMMENDED_CELL, WAIVED_CELL = "Required", "Recommended", "waived"


@dataclass(frozen=True, kw_only=True)
class FleetCheck:
    target: str
    #: In the order asked (a fleet's stage order).
    clusters: tuple[str, ...]
    reports: Mapping[str, Report]
    #: Cluster → why it could not be checked.
    errors: Mapping[str, str]
    #: Wall time of the whole matrix, and each cluster's own check (seconds).
    seconds: float
    each: Mapping[str, float]

    @property
    def failed(self) -> bool:
        return bool(self.errors) or any(r.failed or r.incomplete for r in self.reports.values())

    def cells(self) -> tuple[list[str], dict[tuple[str, str], str]]:
        """(finding ids, Required ones first then by id; (finding, cluster) → its cell)."""
        cell: dict[tuple[str, str], str] = {}
        strict: dict[str, bool] = {}
        for cluster, report in self.reports.items():
            for c in report.covered:
                cell.setdefault((c.finding.id, cluster), WAIVED_CELL)
                strict.setdefault(c.finding.id, False)
            for f in report.findings:
                required = f.severity == REQUIRED
                # A finding partly waived still fails where some of its objects are not: the
                # severity wins over `waived`.
                if cell.get((f.id, cluster)) != REQUIRED_CELL:
                    cell[(f.id, cluster)] = REQUIRED_CELL if required else RECOMMENDED_CELL
                strict[f.id] = strict.get(f.id, False) or required
        ids = sorted(strict, key=lambda i: (not strict[i], i))
        return ids, cell


def check_fleet(
    clusters: Sequence[str],
    check_one: Callable[[str], Report],
    *,
    target: str,
    workers: int = WORKERS,
    monotonic: Callable[[], float] = time.monotonic,
) -> FleetCheck:
    """Check every cluster at once (at most `workers` together); one failing does not stop the others."""
    each: dict[str, float] = {}

    def one(cluster: str) -> Report | str:
        started = monotonic()
        try:
            return check_one(cluster)
        except BotError as exc:
            return exc.user_message
        finally:
            each[cluster] = monotonic() - started

    started = monotonic()
    with ThreadPoolExecutor(
        max_workers=max(1, min(workers, len(clusters))), thread_name_prefix="fleet-check"
    ) as pool:
        results = dict(zip(clusters, pool.map(one, clusters), strict=True))
    return FleetCheck(
        target=target,
        clusters=tuple(clusters),
        reports={c: r for c, r in results.items() if isinstance(r, Report)},
        errors={c: r for c, r in results.items() if isinstance(r, str)},
        seconds=monotonic() - started,
        each=each,
    )


def _target(fc: FleetCheck) -> str:
    targets = sorted({r.target for r in fc.reports.values()})
    return fc.target or ", ".join(targets) or "the next minor"


def counts(fc: FleetCheck, cluster: str) -> tuple[int, int, int]:
    """(Required, Recommended, waived) findings of one cluster."""
    report = fc.reports.get(cluster)
    if report is None:
        return 0, 0, 0
    required = sum(1 for f in report.findings if f.severity == REQUIRED)
    return required, len(report.findings) - required, len(report.covered)


def headline(fc: FleetCheck) -> str:
    ready = [c for c in fc.clusters if c in fc.reports and fc.reports[c].verdict == "passed"]
    verdict = "FAILED" if fc.failed else "passed"
    incomplete = sum(1 for r in fc.reports.values() if r.incomplete)
    unread = f", {incomplete} incomplete (lists not read)" if incomplete else ""
    unchecked = f", {len(fc.errors)} not checked" if fc.errors else ""
    return (
        f"Pre-flight check of {len(fc.clusters)} clusters for {_target(fc)}: {verdict} — "
        f"{len(ready)} ready{unread}{unchecked} (checked at once in {fc.seconds:.1f}s)"
    )


def render_markdown(fc: FleetCheck) -> str:
    ids, cell = fc.cells()
    lines = [f"# {headline(fc)}", ""]
    lines += ["| cluster | Required | Recommended | waived | verdict |", "|---|---|---|---|---|"]
    for c in fc.clusters:
        if c in fc.errors:
            lines.append(f"| {c} | ? | ? | ? | not checked: {_cell(fc.errors[c])} |")
            continue
        required, recommended, waived = counts(fc, c)
        verdict = _verdict(fc.reports[c])
        lines.append(f"| {c} | {required} | {recommended} | {waived} | {verdict} |")
    lines += ["", "## Findings by cluster", ""]
    if not ids:
        lines.append("No finding on any cluster.")
    else:
        checked = [c for c in fc.clusters if c in fc.reports]
        lines.append("| finding | " + " | ".join(checked) + " |")
        lines.append("|---|" + "---|" * len(checked))
        for fid in ids:
            lines.append(f"| {fid} | " + " | ".join(cell.get((fid, c), "") for c in checked) + " |")
    return "\n".join(lines) + "\n"


def render_csv(fc: FleetCheck) -> str:
    """One row per finding (then one per cluster not checked), one column per cluster."""
    ids, cell = fc.cells()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["finding", *fc.clusters])
    for fid in ids:
        writer.writerow([fid, *(cell.get((fid, c), "") if c in fc.reports else "?" for c in fc.clusters)])
    for c in fc.clusters:
        if c in fc.errors:
            writer.writerow([f"not checked: {c}", *(fc.errors[c] if x == c else "" for x in fc.clusters)])
    return out.getvalue()


def attachments(fc: FleetCheck) -> tuple[FileAttachment, FileAttachment]:
    stem = f"check-fleet-{_target(fc).replace(', ', '-').replace(' ', '-')}"
    title = f"Pre-flight check of {len(fc.clusters)} clusters for {_target(fc)}"
    return (
        FileAttachment(filename=f"{stem}.csv", content=render_csv(fc).encode(), title=title, filetype="csv"),
        FileAttachment(
            filename=f"{stem}.md", content=render_markdown(fc).encode(), title=title, filetype="markdown"
        ),
    )


def _verdict(report: Report) -> str:
    """A cluster's verdict in the matrix: FAILED, INCOMPLETE (not read: the lists) or ready."""
    if report.incomplete:
        return f"INCOMPLETE (not read: {', '.join(report.unread)})"
    return "FAILED" if report.failed else "ready"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def as_json(fc: FleetCheck) -> dict[str, object]:
    """The matrix as data: each cluster's counts and verdict, each finding's cells."""
    ids, cell = fc.cells()
    return {
        "target": _target(fc),
        "failed": fc.failed,
        "seconds": round(fc.seconds, 3),
        "clusters": {
            c: {"error": fc.errors[c]}
            if c in fc.errors
            else dict(
                zip(("required", "recommended", "waived"), counts(fc, c), strict=True),
                verdict=_verdict(fc.reports[c]),
            )
            for c in fc.clusters
        },
        "findings": {fid: {c: cell[(fid, c)] for c in fc.clusters if (fid, c) in cell} for fid in ids},
    }


def summary_context(fc: FleetCheck) -> dict[str, object]:
    """What the chat's reply shows: the headline and a line per cluster (the matrix is attached)."""
    rows = []
    for c in fc.clusters:
        if c in fc.errors:
            rows.append({"cluster": c, "state": "error", "text": f"not checked: {fc.errors[c]}"})
            continue
        required, recommended, waived = counts(fc, c)
        rows.append(
            {
                "cluster": c,
                "state": {"FAILED": "failed", "INCOMPLETE": "incomplete"}.get(fc.reports[c].verdict, "ready"),
                "text": f"{required} required, {recommended} recommended, {waived} waived"
                + (f"; not read: {', '.join(fc.reports[c].unread)}" if fc.reports[c].unread else ""),
            }
        )
    return {"headline": headline(fc), "rows": rows}
