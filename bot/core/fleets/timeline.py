"""The fleet run's timeline for its post-run report: clusters as lanes, with the stages and their soaks.

Built from the fleet's audit log (every milestone is there with its time: a stage started or
done, a soak started or passed, each cluster's child started, succeeded, failed or skipped, the
fleet paused), so a report of a fleet that ended long ago, or of a rehearsal's store, draws the
same picture. How a child that completed ended is its run's own `ending` (what its card and
report say: "completed with 1 failed step skipped", which, and who skipped it), given by the
caller (`FleetService.timeline`): such a child is amber and says so, never a plain green
success. A child that failed or was skipped says why on its lane, after its bar, and in a list
under the picture (in its audit row's words, people by name): read without hovering, as a
printed or pasted report is. `to_html` is a standalone page (inline SVG, no script, no external
file), as the run report's HTML is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from bot.core.runs.paused import Ending
from bot.core.runs.reportevents import name_ids
from bot.errors import clip
from bot.records import AuditEntry

#: A child that completed only past failed steps its people skipped, or with steps that
#: succeeded leaving work for people (the fleet card's amber row).
LOOSE = "loose"
#: A lane's bar colour by how the cluster's child ended (running: not ended when the report was made).
COLOURS = {
    "succeeded": "#2e7d32",
    LOOSE: "#f9a825",
    "failed": "#c62828",
    "skipped": "#9e9e9e",
    "running": "#1565c0",
}
#: The legend's words for a colour, where its key is not them.
LEGEND = {LOOSE: "completed with failed steps skipped (or steps not all done)"}


@dataclass
class Lane:
    cluster: str
    stage: str
    #: (start, end, outcome, run id) of each child the cluster had (a retry adds one).
    bars: list[tuple[datetime, datetime | None, str, str]] = field(default_factory=list)
    #: Why its last child ended as it did (its audit row's words, people by name): a failure's or
    #: a skip's reason, said on the lane and listed under the picture.
    note: str = ""
    #: Run id → how that child's run ended, in words, for each of its `LOOSE` bars: its
    #: `Ending.honest` ("completed with 1 failed step skipped"), then each step it went past.
    ends: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)


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


def build(
    fleet_id: str,
    audit: Sequence[AuditEntry],
    *,
    now: datetime,
    endings: Mapping[str, Ending] | None = None,
    people: Mapping[str, str] | None = None,
) -> Timeline:
    """The timeline of the fleet's audit rows; `endings` (run id → its `ending`) of the child runs
    that completed, and `people` (user id → display name) to name who skipped a step."""
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
            lane.note = name_ids(e.detail, people or {})
    for lane in lanes.values():
        _loose(lane, endings or {}, people or {})
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


def run_ids(audit: Sequence[AuditEntry], fleet_id: str) -> list[str]:
    """The child runs the fleet started, retries too, in the order it started them."""
    return [
        e.detail
        for e in audit
        if e.kind == "fleet" and e.run_id == fleet_id and e.subcommand == "cluster_started" and e.detail
    ]


def _loose(lane: Lane, endings: Mapping[str, Ending], people: Mapping[str, str]) -> None:
    """Each succeeded bar whose run completed past failed steps (or not all done) made `LOOSE`,
    with its run's words, as the run's card says them (each failure and reason clipped as there:
    the run's own report has them whole)."""
    for i, (begun, ended, outcome, run) in enumerate(lane.bars):
        end = endings.get(run)
        if outcome != "succeeded" or end is None or not (end.skipped or end.left):
            continue
        lane.bars[i] = (begun, ended, LOOSE, run)
        steps = [
            f"{s.step_id} ({s.title}) failed: {clip(name_ids(s.failure, people), 220)} — skipped by "
            f"{name_ids(s.by, people)}: {clip(s.reason, 160)}"
            for s in end.skipped
        ]
        steps += [f"{step} succeeded, leaving for people: {clip(what, 220)}" for step, what in end.left]
        lane.ends[run] = (end.honest, tuple(steps))


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
            honest, steps = lane.ends.get(run, ("", ()))
            title = (
                f"{lane.cluster} {honest or outcome}"
                + (f" (run {run})" if run else "")
                + (f": {'; '.join(steps)}" if steps else "")
                + (f": {lane.note}" if lane.note and outcome not in ("succeeded", LOOSE) else "")
            )
            out.append(
                f'<rect class="bar {outcome}" x="{x0:.1f}" y="{y + 5}" width="{max(x1 - x0, 3):.1f}" '
                f'height="{ROW - 10}" rx="3" fill="{COLOURS.get(outcome, "#555")}">'
                f"<title>{escape(title)}</title></rect>"
            )
            if honest:
                out.append(_said(honest, x0, x1, y))
        if why := _why(lane):
            _, ended, outcome, _ = lane.bars[-1]
            out.append(_said(clip(why, WHY_CHARS), x(lane.bars[-1][0]), x(ended or tl.end), y, kind=outcome))
    for at, why in tl.pauses:
        px = x(at)
        out.append(
            f'<line class="pause" x1="{px:.1f}" x2="{px:.1f}" y1="{TOP - 20}" y2="{TOP + ROW * len(tl.lanes)}" '
            f'stroke="#c62828" stroke-dasharray="4 3"><title>paused: {escape(why)}</title></line>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _why(lane: Lane) -> str:
    """Why the lane's last child failed or was skipped ("" when it did neither, or nothing says)."""
    return lane.note if lane.bars and lane.bars[-1][2] in ("failed", "skipped") and lane.note else ""


#: The most of a failure's reason said on its lane (the list under the picture has it whole).
WHY_CHARS = 110
#: The words beside a bar, by how its child ended: their class and their colour beside the bar
#: (and on it, where they span the picture).
_WORDS = {
    LOOSE: ("ending", "#8d6e00", "#3e2a00"),
    "failed": ("reason failed", "#b71c1c", "#ffffff"),
    "skipped": ("reason skipped", "#616161", "#212121"),
}


def _said(words: str, x0: float, x1: float, y: int, *, kind: str = LOOSE) -> str:
    """A bar's words on its lane (how a loose child ended, why one failed or was skipped): after
    the bar, before it where the picture ends, or on it when it spans the picture."""
    # The lane is the cluster's own: nothing else is drawn on it beside its bars.
    css, beside, on = _WORDS[kind]
    wide = len(words) * CHAR
    if x1 + 6 + wide <= WIDTH:
        at, anchor, colour = x1 + 6, "start", beside
    elif x0 - 6 - wide >= LABEL:
        at, anchor, colour = x0 - 6, "end", beside
    else:
        at, anchor, colour = x0 + 4, "start", on
    return (
        f'<text class="{css}" x="{at:.1f}" y="{y + 16}" text-anchor="{anchor}" fill="{colour}">'
        f"{escape(words)}</text>"
    )


#: About how wide a character of the picture's 12-pixel sans-serif is.
CHAR = 6.5


def to_html(tl: Timeline, *, title: str = "") -> str:
    heading = escape(title or f"Fleet {tl.fleet_id}")
    legend = " ".join(
        f'<span><i style="background:{c}"></i>{escape(LEGEND.get(k, k))}</span>' for k, c in COLOURS.items()
    )
    pauses = "".join(f"<li>{at:%Y-%m-%d %H:%M} UTC — paused: {escape(why)}</li>" for at, why in tl.pauses)
    whys = "".join(
        f"<li><b>{escape(lane.cluster)}</b>{f' (run {escape(lane.bars[-1][3])})' if lane.bars[-1][3] else ''}: "
        f"{escape(lane.bars[-1][2])}: {escape(_why(lane))}</li>"
        for lane in tl.lanes
        if _why(lane)
    )
    ends = "".join(
        f"<li><b>{escape(lane.cluster)}</b> (run {escape(run)}): {escape(honest[:1].upper() + honest[1:])}"
        f"<ul>{''.join(f'<li>{escape(step)}</li>' for step in steps)}</ul></li>"
        for lane in tl.lanes
        for run, (honest, steps) in lane.ends.items()
    )
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
{f'<h2>Failed or skipped</h2><ul class="whys">{whys}</ul>' if whys else ""}
{f'<h2>Completed with loose ends</h2><ul class="ends">{ends}</ul>' if ends else ""}
</body></html>
"""
