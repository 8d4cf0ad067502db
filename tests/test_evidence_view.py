"""What people see of the evidence (`bot.core.evidence.view`): the gate's summary line, each new
alert with its labels (bounded, hostile labels made inert), each analysis with its query, value,
baseline and last measurements as a sparkline, the card's Now line, and the gate's Block Kit
within Slack's limits, validated with slack_sdk's models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.core.evidence.view import (
    AlertRow,
    AlertsView,
    AnalysisView,
    EvidenceView,
    Point,
    alert_lines,
    alerts_summary,
    alerts_view,
    analysis_lines,
    evidence_blocks,
    label_text,
    now_line,
    number,
    sparkline,
    step_view,
)
from bot.frontdoor.termtext import TerminalText
from tests.support.blockkit import message_blocks, text_of

T0 = datetime(2026, 11, 29, 14, 2, tzinfo=UTC)


def _alert(i: int, **labels: str) -> AlertRow:
    return AlertRow(
        fingerprint=f"fp{i:04d}",
        labels={"alertname": f"Alert{i}", "cluster": "prod", **labels},
        starts_at=T0 + timedelta(minutes=3, seconds=i),
    )


def _analysis(name: str = "apiserver 4xx", values: tuple[float | None, ...] = (10, 11, 12.5)) -> AnalysisView:
    return AnalysisView(
        name=name,
        query='sum(rate(apiserver_request_total{code=~"4.."}[5m]))',
        baseline=10.0,
        points=tuple(Point(at=T0 + timedelta(minutes=i), value=v) for i, v in enumerate(values)),
        outcome="Running",
        success="result < 1.2 * baseline + 5",
        count=5,
    )


def test_the_summary_line_counts_new_pre_existing_and_silenced_by_this_run() -> None:
    view = AlertsView(since=T0, new_count=0, pre_existing=3, silenced_by_run=5)
    assert alerts_summary(view) == "Alerts: 0 new since 14:02 UTC · 3 pre-existing · 5 silenced by this run"


def test_a_sparkline_spans_the_values_range_and_shows_no_data_as_a_gap_not_a_zero() -> None:
    assert sparkline([1, 2, 3, 5, 8]) == "▁▂▃▅█"
    assert sparkline([4, None, 4]) == "▄·▄"
    assert sparkline([None, None]) == "··"
    assert sparkline([]) == ""


def test_numbers_are_short() -> None:
    assert [number(v) for v in (12.5, 0.0123, 1234.0, 3_400_000.0, 0.0, None)] == [
        "12.5",
        "0.012",
        "1.23k",
        "3.4M",
        "0",
        "no data",
    ]


def test_each_new_alert_is_listed_with_its_labels_and_beyond_the_limit_counted() -> None:
    rows = tuple(_alert(i, severity="warning") for i in range(20))
    view = AlertsView(since=T0, new=rows, new_count=37)
    lines = alert_lines(view, limit=10)
    assert lines[0] == '• `Alert0` {severity="warning", cluster="prod"} since 14:05 UTC'
    assert len(lines) == 11
    assert lines[-1] == "…and 27 more new alerts (see Alertmanager)"


def test_labels_beyond_a_lines_budget_are_counted_whole_never_cut() -> None:
    labels = {f"label{i:02d}": "x" * 20 for i in range(12)}
    text = label_text(labels, budget=120)
    assert len(text) <= 120
    assert text.endswith(", +9 labels}")
    assert text.count('="') == 3


def test_labels_from_alertmanager_are_inert_in_markup_and_raw_for_a_caller_that_escapes() -> None:
    row = _alert(1, summary="<!channel> & <https://evil|docs>")
    view = AlertsView(since=T0, new=(row,), new_count=1)
    assert "&lt;!channel&gt; &amp; &lt;https://evil|docs&gt;" in alert_lines(view)[0]
    assert "<!channel> & <https://evil|docs>" in alert_lines(view, markup=False)[0]


def test_the_now_line_counts_the_settle_window_down_to_the_second() -> None:
    view = AlertsView(since=T0, quiet_since=T0, settle=timedelta(minutes=10))
    now = T0 + timedelta(minutes=5, seconds=48)
    assert now_line(EvidenceView(alerts=view), now) == "Waiting on evidence: alerts settle 4m12s left · 0 new"


def test_the_now_line_names_new_alerts_firing_and_when_the_step_fails() -> None:
    view = AlertsView(since=T0, new=(_alert(1),), new_count=1, timeout=timedelta(minutes=30))
    line = now_line(EvidenceView(alerts=view), T0 + timedelta(minutes=10))
    assert line == "Waiting on evidence: alerts 1 new firing (Alert1) · fails in 20m unless they clear"


def test_the_now_line_says_why_evidence_is_inconclusive() -> None:
    view = AlertsView(since=T0, unavailable="Alertmanager refused the bot's credentials (HTTP 401)")
    assert now_line(EvidenceView(alerts=view), T0) == (
        "Waiting on evidence: alerts Inconclusive — Alertmanager refused the bot's credentials (HTTP 401)"
    )


def test_an_analysis_shows_its_query_value_baseline_condition_and_last_measurements() -> None:
    lines = analysis_lines(_analysis(values=(10, 11, None, 12.5)))
    assert lines == [
        ":hourglass_flowing_sand: *apiserver 4xx* — Running · 4/5 measured · value *12.5* vs baseline 10",
        'query `sum(rate(apiserver_request_total{code=~"4.."}[5m]))` · success: `result &lt; 1.2 * baseline + 5`',
        "last 4: ▁▄·█  10 11 – 12.5",
    ]


def test_a_background_analysis_that_measured_more_than_one_round_says_how_many_not_7_of_5() -> None:
    # A background analysis measures before every node: its `count` is one round's, not a cap.
    lines = analysis_lines(_analysis(values=(10, 11, 12, 10, 11, 12, 12.5)))
    assert lines[0].startswith(
        ":hourglass_flowing_sand: *apiserver 4xx* — Running · 7 measured · value *12.5*"
    )
    line = now_line(EvidenceView(analyses=(_analysis(values=(10, 11, 12, 10, 11, 12, 12.5)),)), T0)
    assert line == "Waiting on evidence: apiserver 4xx 7 · last 12.5"


def test_a_long_query_is_cut_at_a_space_outside_its_code_span() -> None:
    query = " + ".join(f'sum(rate(metric_{i}{{job="x"}}[5m]))' for i in range(30))
    line = analysis_lines(AnalysisView(name="long", query=query, baseline=None))[1]
    span = line.split("`")[1]
    assert line.count("`") == 2
    assert span.endswith(" …")
    assert len(span) <= 162


def test_the_alerts_jobs_progress_loads_into_the_view() -> None:
    progress = {
        "started": "2026-11-29T14:02:00Z",
        "settle": 600,
        "timeout": 1800,
        "quiet_since": None,
        "seen": {"new": 2, "pre_existing": 3, "silenced_by_run": 1},
        "new": [
            {
                "fingerprint": "a1",
                "labels": {"alertname": "KubeAPIErrorsHigh", "severity": "warning"},
                "startsAt": "2026-11-29T14:05:00Z",
                "silenced_by_run": True,
            }
        ],
    }
    view = alerts_view(progress)
    assert alerts_summary(view) == "Alerts: 2 new since 14:02 UTC · 3 pre-existing · 1 silenced by this run"
    assert alert_lines(view) == [
        '• `KubeAPIErrorsHigh` {severity="warning"} since 14:05 UTC _(silenced by this run: still counted)_',
        "…and 1 more new alert (see Alertmanager)",
    ]


def test_the_gates_evidence_blocks_stay_within_slack_limits_for_500_alerts_and_20_analyses() -> None:
    rows = tuple(_alert(i, severity="warning", pod="p" * 60, instance="10.0.0.1:9100") for i in range(20))
    long_query = "sum by (code, verb, resource) (rate(apiserver_request_total[5m])) " * 10
    analyses = tuple(
        AnalysisView(
            name=f"analysis {i}",
            query=long_query,
            baseline=float(i),
            points=tuple(Point(at=T0, value=float(v)) for v in range(30)),
            outcome="Successful",
            success="result < 1.2 * baseline + 5",
            failure="result > 3 * baseline && result > 10",
            count=30,
        )
        for i in range(20)
    )
    view = EvidenceView(
        alerts=AlertsView(since=T0, new=rows, new_count=500, pre_existing=12), analyses=analyses
    )
    blocks = message_blocks({"blocks": evidence_blocks(view)})
    text = text_of(blocks)
    assert (
        f"Alerts: 500 new since <!date^{int(T0.timestamp())}^{{time}}|2026-11-29 14:02 UTC> · 12 pre-existing"
        in text
    )
    assert "…and 490 more new alerts (see Alertmanager)" in text
    assert "…and 10 more analyses (the run report has them all)" in text or "more lines" in text
    # Each section ends on a whole line: code spans are balanced.
    for block in blocks:
        if block["type"] == "section":
            assert block["text"]["text"].count("`") % 2 == 0


def test_no_evidence_gives_no_blocks_and_no_now_line() -> None:
    assert evidence_blocks(EvidenceView()) == []
    assert now_line(EvidenceView(), T0) == ""


def test_evidence_people_waived_is_waived_never_successful_and_its_counts_not_measured() -> None:
    waived = "analysis: waived by <@U0PRIMARY> (Prometheus is down) and <@U0SHADOW> (Grafana is green)"
    progress = {"query": "sum(up)", "count": 5, "outcome": "Inconclusive", "measurements": []}
    (an,) = step_view("analysis", progress, done=True, ok=True, name="settle-4xx", detail=waived).analyses
    assert an.outcome == "Waived"
    assert analysis_lines(an)[0].startswith(":warning: *settle-4xx* — Waived")
    alerts = {"started": "2026-11-29T14:02:00Z", "unavailable": "Alertmanager answered 401"}
    view = step_view("alerts", alerts, done=True, ok=True, detail=waived.replace("analysis", "alerts")).alerts
    assert view is not None
    assert (view.outcome, alerts_summary(view)) == (
        "Waived",
        "Alerts: could not be read (Alertmanager answered 401)",
    )
    # Measured and passed, it is Successful with its counts.
    measured = {"started": "2026-11-29T14:02:00Z", "seen": {"new": 0, "pre_existing": 3}, "unavailable": ""}
    view = step_view("alerts", measured, done=True, ok=True, detail="alerts: no new alert for 10m").alerts
    assert view is not None
    assert (view.outcome, alerts_summary(view)) == (
        "Successful",
        "Alerts: 0 new since 14:02 UTC · 3 pre-existing · 0 silenced by this run",
    )


def test_the_gates_evidence_times_are_slack_dates_with_the_plans_zone_and_the_terminal_names_its_zone() -> (
    None
):
    # A team in Tokyo read "Alerts: 1 new since 14:02" as its own afternoon: the time was UTC.
    view = EvidenceView(alerts=AlertsView(since=T0, new=(_alert(0, severity="warning"),), new_count=1))
    (_, section) = evidence_blocks(view, "Asia/Tokyo")
    started, fired = int(T0.timestamp()), int(_alert(0).starts_at.timestamp())
    assert section["text"]["text"] == (
        f":rotating_light: *Alerts: 1 new since <!date^{started}^{{time}}|2026-11-29 23:02 Asia/Tokyo> · "
        "0 pre-existing · 0 silenced by this run*\n"
        f'• `Alert0` {{severity="warning", cluster="prod"}} since <!date^{fired}^{{time}}|2026-11-29 23:05 Asia/Tokyo>'
    )
    shown = TerminalText(zone=ZoneInfo("Asia/Tokyo"))(section["text"]["text"])
    assert "Alerts: 1 new since 2026-11-29 23:02 JST · " in shown
    assert "since 2026-11-29 23:05 JST" in shown
    # Outside Slack (the report, a job's plain lines), the time names its zone.
    assert view.alerts is not None
    assert alerts_summary(view.alerts).startswith("Alerts: 1 new since 14:02 UTC · ")
