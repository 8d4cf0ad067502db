"""The fleet run's timeline for its post-run report: clusters as lanes, with the stages and their soaks.

Built from the fleet's audit log alone (every milestone is there with its time: a stage started or
done, a soak started or passed, each cluster's child started, succeeded, failed or skipped, the
fleet paused), so a report of a fleet that ended long ago, or of a rehearsal's store, draws the
same picture. `to_html` is a standalone page (inline SVG, no script, no external file), as the run
report's HTML is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from bot.records import AuditEntry

#: A lane's bar colour by how the cluster's child ended (running: not ended when the report was made).
COLOURS = {"succeeded": "#2e7d32", "failed": "#c62828", "skipped": "#9e9e9e", "running": "#1565c0"}


@dataclass
class Lane:
    cluster: str
    stage: str
    #: (start, end, outcome, run id) of each child the cluster had (a retry adds one).
    bars: list[tuple[datetime, datetime | None, str, str]] = field(default_factory=list)
    note: str = ""


@dataclass
class Band:
    """A stage from its start to its end, and its soak within it."""

    stage: str
    start: datetime
    end: datetime | None = None
    soak_start: datetime | None = None
    soak_end: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class Timeline:
    fleet_id: str
    start: datetime
    end: datetime
    lanes: tuple[Lane, ...]
    bands: tuple[Band, ...]
    #: (when, what) the fleet paused.
    pauses: tuple[tuple[datetime, str], ...]


def build(fleet_id: str, audit: Sequence[AuditEntry], *, now: datetime) -> Timeline:
    entries = sorted((e for e in audit if e.kind == "fleet" and e.run_id == fleet_id), key=lambda e: e.at)
    lanes: dict[str, Lane] = {}
    bands: dict[str, Band] = {}
    pauses: list[tuple[datetime, str]] = []
    for e in entries:
        words = e.arguments.split()
        stage, cluster = [*words, "", ""][:2]
        if e.subcommand == "stage_started":
            bands[stage] = Band(stage=stage, start=e.at)
        elif e.subcommand == "stage_done" and stage in bands:
            bands[stage].end = e.at
        elif e.subcommand == "soak_started" and stage in bands:
            bands[stage].soak_start = e.at
        elif e.subcommand == "soak_passed" and stage in bands:
            bands[stage].soak_end = e.at
        elif e.subcommand == "fleet_paused":
            pauses.append((e.at, e.detail))
        elif e.subcommand == "cluster_started" and cluster:
            lane = lanes.setdefault(cluster, Lane(cluster=cluster, stage=stage))
            lane.bars.append((e.at, None, "running", e.detail))
        elif e.subcommand.startswith("cluster_") and cluster:
            lane = lanes.setdefault(cluster, Lane(cluster=cluster, stage=stage))
            outcome = e.subcommand.removeprefix("cluster_")
            if lane.bars and lane.bars[-1][1] is None:
                begun, _, _, run = lane.bars[-1]
                lane.bars[-1] = (begun, e.at, outcome, run)
            elif outcome == "skipped":
                lane.bars.append((e.at, e.at, outcome, ""))
            lane.note = e.detail
    start = entries[0].at if entries else now
    end = max([now if any(b[1] is None for lane in lanes.values() for b in lane.bars) else start]
              + [e.at for e in entries])  # fmt: skip
    order = list(bands)
    return Timeline(
        fleet_id=fleet_id,
        start=start,
        end=end if end > start else start,
        lanes=tuple(sorted(lanes.values(), key=lambda lane: (_index(order, lane.stage), lane.bars[0][0]))),
        bands=tuple(bands.values()),
        pauses=tuple(pauses),
    )


def _index(order: list[str], stage: str) -> int:
    return order.index(stage) if stage in order else len(order)


LABEL, WIDTH, ROW, TOP = 170, 1100, 26, 44


def to_svg(tl: Timeline) -> str:
    span = max((tl.end - tl.start).total_seconds(), 1.0)
    plot = WIDTH - LABEL - 20

    def x(at: datetime) -> float:
        return LABEL + plot * (at - tl.start).total_seconds() / span

    height = TOP + ROW * len(tl.lanes) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="fleet {escape(tl.fleet_id)} timeline">'
    ]
    for i, band in enumerate(tl.bands):
        x0, x1 = x(band.start), x(band.end or tl.end)
        fill = "#f3f6fb" if i % 2 == 0 else "#eef3ee"
        out.append(
            f'<rect class="stage" data-stage="{escape(band.stage)}" x="{x0:.1f}" y="{TOP - 20}" '
            f'width="{max(x1 - x0, 1):.1f}" height="{ROW * len(tl.lanes) + 24}" fill="{fill}"/>'
        )
        out.append(f'<text x="{x0 + 4:.1f}" y="{TOP - 6}" font-weight="bold">{escape(band.stage)}</text>')
        if band.soak_start is not None:
            s0, s1 = x(band.soak_start), x(band.soak_end or band.end or tl.end)
            out.append(
                f'<rect class="soak" data-stage="{escape(band.stage)}" x="{s0:.1f}" y="{TOP - 20}" '
                f'width="{max(s1 - s0, 1):.1f}" height="{ROW * len(tl.lanes) + 24}" fill="#fff3c4" '
                'fill-opacity="0.8"/>'
            )
            out.append(
                f'<text x="{s0 + 4:.1f}" y="{TOP + ROW * len(tl.lanes) + 16}" fill="#8d6e00">soak</text>'
            )
    for row, lane in enumerate(tl.lanes):
        y = TOP + ROW * row
        out.append(
            f'<text class="lane" x="{LABEL - 8}" y="{y + 16}" text-anchor="end">{escape(lane.cluster)}</text>'
        )
        for begun, ended, outcome, run in lane.bars:
            x0, x1 = x(begun), x(ended or tl.end)
            title = (
                f"{lane.cluster} {outcome}"
                + (f" (run {run})" if run else "")
                + (f": {lane.note}" if lane.note and outcome != "succeeded" else "")
            )
            out.append(
                f'<rect class="bar {outcome}" x="{x0:.1f}" y="{y + 5}" width="{max(x1 - x0, 3):.1f}" '
                f'height="{ROW - 10}" rx="3" fill="{COLOURS.get(outcome, "#555")}">'
                f"<title>{escape(title)}</title></rect>"
            )
    for at, why in tl.pauses:
        px = x(at)
        out.append(
            f'<line class="pause" x1="{px:.1f}" x2="{px:.1f}" y1="{TOP - 20}" y2="{TOP + ROW * len(tl.lanes)}" '
            f'stroke="#c62828" stroke-dasharray="4 3"><title>paused: {escape(why)}</title></line>'
        )
    out.append("</svg>")
    return "\n".join(out)


def to_html(tl: Timeline, *, title: str = "") -> str:
    heading = escape(title or f"Fleet {tl.fleet_id}")
    legend = " ".join(f'<span><i style="background:{c}"></i>{escape(k)}</span>' for k, c in COLOURS.items())
    pauses = "".join(f"<li>{at:%Y-%m-%d %H:%M} UTC — paused: {escape(why)}</li>" for at, why in tl.pauses)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{heading}: timeline</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
.legend span {{ margin-right: 16px; }}
.legend i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; border-radius: 2px; }}
</style></head>
<body>
<h1>{heading}</h1>
<p>{tl.start:%Y-%m-%d %H:%M} → {tl.end:%Y-%m-%d %H:%M} UTC · {len(tl.lanes)} clusters in {len(tl.bands)} stages
(shaded; the soak in yellow)</p>
<p class="legend">{legend}<span><i style="background:#fff3c4"></i>soak</span></p>
{to_svg(tl)}
{f"<ul>{pauses}</ul>" if pauses else ""}
</body></html>
"""
