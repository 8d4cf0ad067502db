"""The run report's pictures (issue 31), drawn with matplotlib — this module is its one home.

matplotlib is imported inside the functions (Agg backend, no display), so commands that draw
nothing do not pay its import time. It is the optional `charts` extra (`pip install
'upgrade-bot[charts]'`; the image has it): numpy, matplotlib, fonttools and pillow are 170 MB of
a 370 MB install, for pictures only. Without it `available()` is false and the report comes
without pictures (`bot.core.runs.report`). The report (`bot.core.runs.report.Report`) is read by attribute
only: this adapter does not import the core.

- `timeline_png`: the picture posted in a run's thread — the step Gantt on top (waiting for people
  amber, working blue, failed red, skipped grey; gate openings and approvals marked) and below it
  one lane per node group, each node of the group a thin bar inside the lane (cordoned grey,
  draining blue, skipped hatched; a red × where an eviction was first blocked; a black square where
  the abort stopped its drain, cross-hatched grey after it while it stays cordoned). A gate open
  while people had paused the run is lilac, dotted: paused, not waiting for people.
- `html_charts`: the HTML report's charts — the same step Gantt, a node timeline with one lane per
  node (grouped by node group; a group of more than `COLLAPSE_OVER` nodes collapses into one lane
  when the run has more than `MAX_NODE_LANES` nodes), the unhealthy pods over time (stacked by
  class, from the watches' samples, with the known issues marked where they fired) and the
  unhealthy-pod episodes.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

#: One lane per node up to this many nodes in a run; beyond it, large groups collapse.
MAX_NODE_LANES = 40
#: A group with more nodes than this collapses into one lane (when the run has many nodes).
COLLAPSE_OVER = 8

WAITING = "#f2b134"
#: A gate open while people had paused the run: not waiting for people.
PAUSED = "#b9b0d8"
WORKING = "#2f6fcf"
FAILED = "#d0352f"
SKIPPED = "#9a9a9a"
CORDONED = "#c5ced9"
DRAINING = "#2f6fcf"
APPROVAL = "#1b1b1b"
BLOCKED = "#d0352f"
#: The unhealthy pods' classes (the watches' names, `bot.core.kube.objects.CLASSES`) in the stack.
POD_CLASSES = {
    "CrashLoopBackOff": "#d0352f",
    "ImagePullBackOff/ErrImagePull": "#8e44ad",
    "Not ready": "#f2b134",
    "Pending/unschedulable stuck": "#2f6fcf",
    "Error": "#e67e22",
    "Init stuck": "#16a085",
    "Terminating stuck": "#7f8c8d",
}


#: What to install for the pictures (the message of a report without them).
INSTALL_HINT = "pip install 'upgrade-bot[charts]'"


def available() -> bool:
    """Whether matplotlib is installed (found, not imported: that takes a third of a second)."""
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _num(value: datetime) -> float:
    import matplotlib.dates as mdates

    return float(mdates.date2num(value))  # type: ignore[no-untyped-call]


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", facecolor="white")
    _pyplot().close(fig)
    return buffer.getvalue()


#: The shortest time axis drawn: a run of a few seconds (or none) still gets readable ticks.
MIN_SPAN = timedelta(seconds=10)


def _time_axis(ax: Any) -> None:
    """UTC ticks, at most 12: "13:05" a minute apart or more; "13:05:30" for ticks seconds apart (a
    rehearsal of a few minutes), else every label of its minute would read "13:05"."""
    import matplotlib.dates as mdates

    left, right = ax.get_xlim()
    if right - left < MIN_SPAN / timedelta(days=1):
        ax.set_xlim(left, left + MIN_SPAN / timedelta(days=1))
    locator = mdates.AutoDateLocator(maxticks=12, tz=UTC)  # type: ignore[no-untyped-call]
    formatter = mdates.AutoDateFormatter(locator, tz=UTC, defaultfmt="%H:%M")  # type: ignore[no-untyped-call]
    # By the locator's unit, in days: seconds (or less) show seconds; minutes, hours and days not.
    formatter.scaled = {1 / (24 * 3600): "%H:%M:%S"}
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.grid(axis="x", color="#e4e4e4", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel("time (UTC)")


def _end_of(report: Any) -> datetime:
    return report.ended_at  # type: ignore[no-any-return]


def _steps(ax: Any, report: Any) -> None:
    steps = list(report.steps)
    end = _end_of(report)
    drawn: set[str] = set()
    for y, bar in enumerate(steps):
        for kind, start, stop in bar.segments:
            left = _num(start)
            width = max(_num(stop or end) - left, 1e-5)
            if kind == "wait":
                ax.barh(y, width, left=left, height=0.6, color=WAITING)
                drawn.add("waiting for people")
            elif kind == "paused":
                ax.barh(y, width, left=left, height=0.6, color=PAUSED, hatch="..")
                drawn.add("paused by people")
            else:
                skipped = bar.state == "skipped" and kind == "work"
                colour = FAILED if kind == "failed" else (SKIPPED if skipped else WORKING)
                ax.barh(y, width, left=left, height=0.6, color=colour, hatch="//" if skipped else None)
                drawn.add("failed" if kind == "failed" else ("skipped" if skipped else "working"))
        if bar.state == "skipped" and bar.finished_at is not None:
            ax.plot([_num(bar.finished_at)], [y], marker=">", color=SKIPPED, markersize=7)
            drawn.add("skipped")
        for kind, start, _stop in bar.segments:
            if kind == "wait":
                ax.plot([_num(start)], [y], marker="|", color=APPROVAL, markersize=14)
                drawn.add("people asked")
        for at, _who, _phase, decision in bar.approvals:
            ax.plot(
                [_num(at)],
                [y - 0.38],
                marker="v",
                color=APPROVAL if decision in ("approve", "force") else FAILED,
                markersize=6,
            )
            drawn.add("approval")
    ax.set_yticks(range(len(steps)))
    ax.set_yticklabels([_short(f"{b.step_id} ({b.state})", 44) for b in steps], fontsize=9)
    ax.set_ylim(len(steps) - 0.4, -0.8)
    ax.set_title(f"Steps of run {report.run_id} — {report.outcome}", loc="left", fontsize=11)
    _legend(ax, _STEP_KEYS, drawn)
    _time_axis(ax)


#: The step chart's legend, in its order: each entry is shown only when the chart draws it.
_STEP_KEYS = (
    ("waiting for people", {"color": WAITING}),
    ("paused by people", {"facecolor": PAUSED, "hatch": ".."}),
    ("working", {"color": WORKING}),
    ("failed", {"color": FAILED}),
    ("skipped", {"facecolor": SKIPPED, "hatch": "//"}),
    ("people asked", {"marker": "|", "color": APPROVAL}),
    ("approval", {"marker": "v", "color": APPROVAL}),
)


def _legend(ax: Any, keys: Sequence[tuple[str, Mapping[str, Any]]], drawn: set[str]) -> None:
    """The chart's legend, right of it: only what it drew (a short rehearsal's chart is a lane or
    two high, and a legend of every kind would hang below it), in `keys`' order."""
    from matplotlib.patches import Patch

    handles = [
        _marker(style["marker"], style["color"], label) if "marker" in style else Patch(label=label, **style)
        for label, style in keys
        if label in drawn
    ]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, framealpha=0.9)


def _marker(shape: str, colour: str, label: str) -> Any:
    from matplotlib.lines import Line2D

    return Line2D([], [], marker=shape, color=colour, linestyle="None", markersize=8, label=label)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _node_bar(ax: Any, node: Any, y: float, height: float, end: datetime) -> set[str]:
    """One node's bar; the legend's names of what it drew."""
    start = node.cordoned_at or node.began
    if start is None:
        return set()
    stop = node.ended or node.stopped_at or end
    began = node.began or stop
    ax.barh(y, max(_num(began) - _num(start), 1e-6), left=_num(start), height=height, color=CORDONED)
    drawn = {"cordoned, waiting to drain"}
    if node.began is not None:
        skipped = node.state == "skipped"
        ax.barh(
            y,
            max(_num(stop) - _num(began), 1e-6),
            left=_num(began),
            height=height,
            color=SKIPPED if skipped else DRAINING,
            hatch="//" if skipped else None,
        )
        drawn.add("skipped" if skipped else "draining")
    if node.blocked_at is not None:
        ax.plot([_num(node.blocked_at)], [y], marker="x", color=BLOCKED, markersize=6, mew=1.6)
        drawn.add("eviction blocked")
    if node.stopped_at is not None:
        # Its drain stopped unfinished (the abort): cordoned from then on, unless people uncordoned it.
        if node.after_abort in ("left cordoned", "not answered yet"):
            # Past the run's end too: at least a quarter of its time in the run, so that it shows.
            left = _num(node.stopped_at)
            width = max(_num(end) - left, (left - _num(start)) / 4, 1e-4)
            ax.barh(y, width, left=left, height=height, color=CORDONED, hatch="xx", edgecolor=SKIPPED)
            drawn.add("left cordoned")
        ax.plot([_num(node.stopped_at)], [y], marker="s", color=APPROVAL, markersize=5)
        drawn.add("drain stopped (abort)")
    return drawn


#: The node charts' legend, in its order: each entry is shown only when the chart draws it.
_NODE_KEYS = (
    ("cordoned, waiting to drain", {"color": CORDONED}),
    ("draining", {"color": DRAINING}),
    ("skipped", {"facecolor": SKIPPED, "hatch": "//"}),
    ("eviction blocked", {"marker": "x", "color": BLOCKED}),
    ("drain stopped (abort)", {"marker": "s", "color": APPROVAL}),
    ("left cordoned", {"facecolor": CORDONED, "hatch": "xx", "edgecolor": SKIPPED}),
)


def _groups(ax: Any, report: Any) -> None:
    """One lane per node group, each node a thin bar inside it."""
    groups = list(report.groups)
    end = _end_of(report)
    drawn: set[str] = set()
    for y, group in enumerate(groups):
        lanes = [n for n in report.nodes if n.group == group]
        height = 0.8 / max(len(lanes), 1)
        for i, node in enumerate(lanes):
            drawn |= _node_bar(ax, node, y - 0.4 + height * (i + 0.5), height * 0.85, end)
    ax.set_yticks(range(len(groups)))
    counts = {g: sum(1 for n in report.nodes if n.group == g) for g in groups}
    ax.set_yticklabels([f"{_short(g, 32)} ({counts[g]} nodes)" for g in groups], fontsize=9)
    ax.set_ylim(len(groups) - 0.5, -0.6)
    ax.set_title("Node groups: each node cordoned → drained", loc="left", fontsize=11)
    _legend(ax, _NODE_KEYS, drawn)
    _time_axis(ax)


def _nodes(ax: Any, report: Any) -> int:
    """One lane per node, grouped; large groups collapse into a band three lanes high when the
    run has many nodes (each node a thin bar in it). The number of lane heights drawn."""
    end = _end_of(report)
    many = len(report.nodes) > MAX_NODE_LANES
    ticks: list[float] = []
    labels: list[str] = []
    drawn: set[str] = set()
    y = 0
    for group in report.groups:
        lanes = [n for n in report.nodes if n.group == group]
        if many and len(lanes) > COLLAPSE_OVER:
            height = 2.6 / len(lanes)
            for i, node in enumerate(lanes):
                drawn |= _node_bar(ax, node, y - 0.3 + height * (i + 0.5), height * 0.85, end)
            ticks.append(y + 1)
            labels.append(f"{_short(group, 28)}: {len(lanes)} nodes")
            y += 3
        else:
            for node in lanes:
                drawn |= _node_bar(ax, node, y, 0.6, end)
                ticks.append(y)
                labels.append(f"{_short(group, 20)} / {_short(node.name, 28)}")
                y += 1
        ax.axhline(y - 0.5, color="#bbbbbb", linewidth=0.8)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(y - 0.5, -0.6)
    ax.set_title("Nodes by node group: cordoned → drained", loc="left", fontsize=11)
    _legend(ax, _NODE_KEYS, drawn)
    _time_axis(ax)
    return y


def _episodes(ax: Any, report: Any) -> None:
    workloads = list(dict.fromkeys(e.workload for e in report.episodes))
    colours = {"crashloop": FAILED, "imagepull": "#8e44ad", "error": "#e67e22", "init": WAITING}
    for e in report.episodes:
        ax.plot([_num(e.at)], [workloads.index(e.workload)], marker="o", color=colours.get(e.kind, FAILED))
        ax.annotate(e.kind, (_num(e.at), workloads.index(e.workload)), xytext=(6, -3),
                    textcoords="offset points", fontsize=8)  # fmt: skip
    ax.set_yticks(range(len(workloads)))
    ax.set_yticklabels([_short(w, 40) for w in workloads], fontsize=8)
    ax.set_ylim(len(workloads) - 0.5, -0.5)
    ax.set_xlim(_num(report.started_at), _num(report.ended_at))
    ax.set_title("Workloads that went unhealthy (as the watches posted them)", loc="left", fontsize=11)
    _time_axis(ax)


def _unhealthy_over_time(ax: Any, report: Any) -> None:
    """The run's unhealthy pods stacked by class (each count holds until the next sample), the
    known issues as dashed lines labelled with their rule and workload."""
    points = list(report.pods_over_time)
    end = _end_of(report)
    present = {cls for p in points for cls, pods in p.counts.items() if pods}
    classes = [c for c in POD_CLASSES if c in present] + sorted(present - set(POD_CLASSES))
    labelled = False
    # One stack per stretch some watch sampled: where none ran the count is unknown, so the chart
    # leaves a hatched gap instead of holding the last count or drawing a zero.
    for start, stop in report.sampled:
        seg = [p for p in points if start <= p.at <= stop]
        if not seg or not classes:
            continue
        # A label that starts with "_" is left out of the legend: each class is listed once.
        xs = [_num(p.at) for p in seg] + [_num(stop)]
        rows = [[p.counts.get(c, 0) for p in seg] + [seg[-1].counts.get(c, 0)] for c in classes]
        ax.stackplot(
            xs, rows, step="post", labels=[f"_{c}" for c in classes] if labelled else classes,
            colors=[POD_CLASSES.get(c, SKIPPED) for c in classes], alpha=0.85,
        )  # fmt: skip
        labelled = True
    for i, (start, stop) in enumerate(report.unsampled):
        ax.axvspan(
            _num(start), _num(stop), facecolor="none", edgecolor=SKIPPED, hatch="//", linewidth=0,
            label=None if i else "not sampled",
        )  # fmt: skip
    top = max([sum(p.counts.values()) for p in points] + [1])
    left, right = _num(report.started_at), _num(end)
    for i, mark in enumerate(report.known_issues):
        x = _num(mark.at)
        ax.axvline(x, color=APPROVAL, linestyle="--", linewidth=1)
        # A label near the right edge is written leftwards, so it stays inside the chart.
        leftwards = x > left + (right - left) * 0.7
        ax.annotate(
            _short(f"{mark.rule} on {mark.workload}", 44), (x, top * (1.12 - 0.09 * (i % 4))),
            xytext=(-4 if leftwards else 4, 0), textcoords="offset points", fontsize=8, va="top",
            ha="right" if leftwards else "left",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )  # fmt: skip
    handles, _labels = ax.get_legend_handles_labels()
    if report.known_issues:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=APPROVAL, linestyle="--", label="known issue"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, framealpha=0.9)
    ax.set_xlim(left, right)
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("unhealthy pods")
    ax.set_title("Unhealthy pods over time, by class (the watches' samples)", loc="left", fontsize=11)
    _time_axis(ax)


def timeline_png(report: Any) -> bytes:
    """The run's picture: the step Gantt above one lane per node group."""
    plt = _pyplot()
    steps = len(report.steps)
    groups = len(report.groups)
    heights: Sequence[float] = [max(2.0, 0.32 * steps + 1.2)] + (
        [max(1.6, 0.55 * groups + 1.0)] if groups else []
    )
    fig, axes = plt.subplots(
        len(heights), 1, figsize=(13, sum(heights) + 0.6), height_ratios=heights, sharex=True, squeeze=False
    )
    _steps(axes[0][0], report)
    if groups:
        _groups(axes[1][0], report)
        axes[0][0].set_xlabel("")
    fig.suptitle(
        f"{report.cluster}: {report.current_version} → {report.target_version} — run {report.run_id}",
        x=0.01, ha="left", fontsize=13, fontweight="bold",
    )  # fmt: skip
    fig.tight_layout()
    return _png(fig)


def html_charts(report: Any) -> dict[str, bytes]:
    """The HTML report's charts by name: steps, nodes (when a drain ran), unhealthy (when the
    watches sampled), pods (when posted)."""
    plt = _pyplot()
    charts: dict[str, bytes] = {}
    fig, ax = plt.subplots(figsize=(12, max(2.2, 0.32 * len(report.steps) + 1.4)))
    _steps(ax, report)
    fig.tight_layout()
    charts["steps"] = _png(fig)
    if report.nodes:
        many = len(report.nodes) > MAX_NODE_LANES
        lanes = sum(
            3 if many and n > COLLAPSE_OVER else n
            for n in (sum(1 for x in report.nodes if x.group == g) for g in report.groups)
        )
        fig, ax = plt.subplots(figsize=(12, max(2.2, 0.24 * lanes + 1.4)))
        _nodes(ax, report)
        fig.tight_layout()
        charts["nodes"] = _png(fig)
    if report.pods_over_time:
        fig, ax = plt.subplots(figsize=(12, 3.2))
        _unhealthy_over_time(ax, report)
        fig.tight_layout()
        charts["unhealthy"] = _png(fig)
    if report.episodes:
        fig, ax = plt.subplots(figsize=(12, max(1.8, 0.3 * len({e.workload for e in report.episodes}) + 1.2)))
        _episodes(ax, report)
        fig.tight_layout()
        charts["pods"] = _png(fig)
    return charts
