"""The run report (issue 31) as a person looks at it: the HTML in a real headless Chromium, the
picture's pixels, the Markdown's Mermaid gantt, and the terminal and `/upgrade report` doors."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store import Store
from bot.core.runs.report import build_report, render
from tests.support.bot_process import bot_command
from tests.support.browser import chromium, console_errors
from tests.support.report_runs import GROUPS, WATCH_KNOWN_ISSUE, stored_run

__all__ = ["chromium"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store.open(f"sqlite:///{tmp_path}/bot.db")
    yield store  # type: ignore[misc]
    store.close()


def test_the_html_report_opens_in_chromium_with_every_chart_and_no_console_error(
    store: Store, tmp_path: Path, chromium: Any
) -> None:
    run_id = stored_run(
        store, nodes={"control-plane": 3, "istio": 4, "ng-shared": 60, "others": 20, "logging": 5}
    )
    page = tmp_path / "report.html"
    page.write_bytes(render(build_report(store, run_id), "html"))
    html = page.read_bytes()
    assert b"http://" not in html  # nothing is fetched: the charts are inline
    assert b"https://" not in html
    chromium.get(page.as_uri())
    shot = tmp_path / "report.png"
    chromium.save_screenshot(str(shot))
    where = f"(screenshot: {shot})"
    assert console_errors(chromium) == [], where
    images = chromium.execute_script(
        "return Array.from(document.images).map(i => [i.id, i.complete, i.naturalWidth, i.naturalHeight])"
    )
    assert [i[0] for i in images] == ["chart-steps", "chart-nodes", "chart-unhealthy", "chart-pods"], where
    for name, complete, width, height in images:
        assert complete, f"{name} did not load {where}"
        assert width > 600, f"{name} is {width} px wide {where}"
        assert height > 100, f"{name} is {height} px high {where}"
    text = chromium.find_element("tag name", "body").text
    assert f"Upgrade report: run {run_id}" in text, where
    shown = [h.text for h in chromium.find_elements("css selector", "h3.node-group")]
    assert shown == [f"{g} ({n} nodes)" for g, n in zip(GROUPS, (3, 4, 60, 20, 5), strict=True)], where
    assert "1.24.17 → 1.25.16" in text
    peaks = chromium.find_element("id", "unhealthy-peaks").text
    assert "CrashLoopBackOff 16 2026-11-28 20:31:00 UTC" in peaks, where
    # Full page, as it prints: the screenshot of the whole document, kept as the test's artifact.
    height = chromium.execute_script("return document.documentElement.scrollHeight")
    chromium.set_window_size(1400, min(int(height) + 100, 12000))
    chromium.save_screenshot(str(shot))
    assert shot.stat().st_size > 50_000, where


def test_the_picture_is_large_and_not_blank(store: Store) -> None:
    from PIL import Image, ImageStat

    run_id = stored_run(store)
    png = render(build_report(store, run_id), "png")
    image = Image.open(io.BytesIO(png)).convert("L")
    assert image.width >= 1000
    assert image.height >= 700
    stat = ImageStat.Stat(image)
    assert stat.stddev[0] > 25  # drawn on, not an empty white (or black) canvas
    # The lanes are coloured: enough non-white pixels for the bars of 25 steps and 10 nodes.
    dark = sum(count for value, count in enumerate(image.histogram()) if value < 200)
    assert dark > image.width * image.height * 0.03


def test_the_markdown_carries_a_mermaid_gantt_of_every_step(store: Store) -> None:
    run_id = stored_run(store)
    report = build_report(store, run_id)
    md = render(report, "md").decode()
    gantt = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert gantt.startswith("gantt\n")
    for bar in report.steps:
        assert f"section {bar.step_id}\n" in gantt
    # checks failed after working, waited for people, then was skipped: red, then amber.
    section = gantt.split("section checks\n", 1)[1].split("section", 1)[0]
    assert "failed :crit, checks-1, " in section
    assert "waiting for people (skipped) :checks-2, " in section
    assert "| checks | skipped |" in md
    assert "- known issue KI006 on payments/api\n" in md
    # A watch's key names the workload as ns/Kind/name; the report writes it as people do.
    assert "- known issue KI003 on Deployment payments/payments-worker\n" in md
    assert "(crashloop)" in md.split("## Unhealthy pods", 1)[1].split("##", 1)[0]
    body = json.loads(render(report, "json"))
    assert body["run_id"] == run_id
    assert {n["group"] for n in body["nodes"]} == set(GROUPS)
    assert body["steps"][0]["waiting_seconds"] == 120


def test_the_unhealthy_pods_over_time_come_from_the_watchs_samples_with_the_known_issues_marked(
    store: Store, tmp_path: Path
) -> None:
    import numpy as np
    from PIL import Image

    from bot.adapters.charts import html_charts

    run_id = stored_run(store)
    report = build_report(store, run_id)
    # 1 sample as the watch starts, 5 in each of the 5 drains and 1 as each ends.
    assert len(report.pods_over_time) == 31
    crash = [
        (p.at, p.counts["CrashLoopBackOff"]) for p in report.pods_over_time if "CrashLoopBackOff" in p.counts
    ]
    assert [n for _, n in crash] == [8, 12, 16]
    rule, workload = WATCH_KNOWN_ISSUE
    (mark,) = [m for m in report.known_issues if m.rule == rule]
    assert (mark.workload, mark.at) == (workload, crash[0][0])  # posted as the crash loop began
    assert f"known issue {rule} on Deployment payments/payments-worker" in report.findings
    assert not any("Unhealthy pods over time" in g for g in report.gaps)
    md = render(report, "md").decode()
    section = md.split("## Unhealthy pods", 1)[1].split("## Findings", 1)[0]
    assert "Sampled 31 times by the run's watches" in section
    assert f"| CrashLoopBackOff | 16 | {crash[-1][0]:%Y-%m-%d %H:%M:%S} UTC |" in section
    assert (
        f"- known issue {rule} on Deployment payments/payments-worker at {mark.at:%Y-%m-%d %H:%M:%S} UTC"
        in section
    )
    body = json.loads(render(report, "json"))
    assert body["pods_over_time"][0] == {
        "at": f"{report.pods_over_time[0].at:%Y-%m-%dT%H:%M:%SZ}",
        "counts": {},
    }
    assert max(p["counts"].get("CrashLoopBackOff", 0) for p in body["pods_over_time"]) == 16
    assert {"at": f"{mark.at:%Y-%m-%dT%H:%M:%SZ}", "rule": rule, "workload": workload} in body["known_issues"]
    # The chart: wide, and the crash loop's red is drawn (the stack's CrashLoopBackOff colour).
    png = html_charts(report)["unhealthy"]
    (tmp_path / "unhealthy.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width >= 1000
    pixels = np.asarray(image)
    red = int(((pixels[:, :, 0] > 190) & (pixels[:, :, 1] < 110) & (pixels[:, :, 2] < 100)).sum())
    assert red > 1000  # the legend's patch alone is about 200


def test_a_run_without_samples_keeps_the_gap_and_has_no_series_chart(store: Store) -> None:
    run_id = stored_run(store, watch=False)
    report = build_report(store, run_id)
    assert report.pods_over_time == ()
    assert any(
        g.startswith("Unhealthy pods over time: this run's watches recorded no samples") for g in report.gaps
    )
    html = render(report, "html").decode()
    assert 'id="chart-unhealthy"' not in html
    assert 'id="chart-pods"' in html
    assert "Sampled" not in render(report, "md").decode()


def test_the_series_sums_the_runs_watches_each_counting_until_it_ended(store: Store) -> None:
    from datetime import timedelta

    from bot.records import WatchRow

    run_id = stored_run(store, watch=False)
    t0 = build_report(store, run_id).started_at
    ids = []
    for offset in (0, 10):
        row = WatchRow(id=0, cluster="prod", channel="C0OPS", run_id=run_id, step_id=f"w{offset}",
                       started_by="U0A", started_at=t0 + timedelta(minutes=offset))  # fmt: skip
        ids.append(store.create_watch(row))
        assert store.claim_watch(ids[-1], owner="p1", now=row.started_at, stale_before=row.started_at)
    first, second = ids
    assert store.add_watch_sample(first, owner="p1", at=t0, counts={"Not ready": 3})
    assert store.add_watch_sample(second, owner="p1", at=t0 + timedelta(minutes=10), counts={"Not ready": 1})
    assert store.add_watch_sample(first, owner="p1", at=t0 + timedelta(minutes=20), counts={"Not ready": 2})
    assert store.publish_watch(
        first, owner="p1", summary="{}", at=t0 + timedelta(minutes=20), end_reason="done"
    )
    assert store.add_watch_sample(
        second, owner="p1", at=t0 + timedelta(minutes=30), counts={"Pending/unschedulable stuck": 4}
    )
    # Another run's watch is not this run's.
    other = store.create_watch(
        WatchRow(id=0, cluster="prod", channel="C0OPS", run_id="ROTHER", started_by="U0A", started_at=t0)
    )
    assert store.claim_watch(other, owner="p1", now=t0, stale_before=t0)
    assert store.add_watch_sample(other, owner="p1", at=t0 + timedelta(minutes=5), counts={"Not ready": 50})
    series = [
        (round((p.at - t0).total_seconds() / 60), dict(p.counts))
        for p in build_report(store, run_id).pods_over_time
    ]
    assert series == [
        (0, {"Not ready": 3}),
        (10, {"Not ready": 4}),
        (20, {"Not ready": 3}),
        (30, {"Pending/unschedulable stuck": 4}),
    ]


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "upgrade-bot.yaml"
    config.write_text(
        f"data_dir: {tmp_path / 'data'}\nclusters:\n  prod: {{kubeconfig: {tmp_path / 'kubeconfig'}}}\n"
        "roster:\n  primary: [U0PRIMARY]\n"
    )
    (tmp_path / "kubeconfig").write_text(
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"
    )
    return config


def test_the_terminal_and_the_slash_command_give_the_report(tmp_path: Path) -> None:
    config = _config(tmp_path)
    store = Store.open(f"sqlite:///{tmp_path / 'data'}/upgrade-bot.db")
    run_id = stored_run(store)
    store.close()
    md = subprocess.run(
        [*bot_command(), "report", run_id, "-o", "md", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith(f"# Upgrade report: run {run_id}\n")
    out = tmp_path / "picture.png"
    png = subprocess.run(
        [*bot_command(), "report", run_id, "--format", "png", "--out", str(out), "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert png.returncode == 0, png.stderr
    assert out.read_bytes().startswith(b"\x89PNG")
    missing = subprocess.run(
        [*bot_command(), "report", "RNOPE", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.strip() == "upgrade-bot: no run `RNOPE` (see `/upgrade status`)"
    files = tmp_path / "files"
    slash = subprocess.run(
        [*bot_command(), "exec", f"report {run_id}", "--as", "U0PRIMARY", "--config", str(config), "--out", str(files)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert slash.returncode == 0, slash.stdout + slash.stderr
    assert (
        f"*Report of run `{run_id}`* (eks-nodegroups on prod, 1.24.17 → 1.25.16): completed" in slash.stdout
    )
    assert "Slowest drains: `ip-10-0-" in slash.stdout
    assert sorted(p.name for p in files.iterdir()) == [
        f"upgrade-bot-run-{run_id}.{ext}" for ext in ("html", "md", "png")
    ]


#: The bot's CLI in an interpreter where matplotlib cannot be imported (`sys.modules[name] = None`
#: is Python's documented way to make an import fail), as in an install without the `charts` extra.
WITHOUT_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None; sys.argv[0] = 'upgrade-bot'; "
    "from bot.frontdoor.cli import main; sys.exit(main())"
)


def test_without_matplotlib_the_report_comes_without_pictures_and_says_what_to_install(
    tmp_path: Path,
) -> None:
    import sys

    config = _config(tmp_path)
    store = Store.open(f"sqlite:///{tmp_path / 'data'}/upgrade-bot.db")
    run_id = stored_run(store)
    store.close()
    bot = [sys.executable, "-c", WITHOUT_MATPLOTLIB]
    png = subprocess.run(
        [*bot, "report", run_id, "-o", "png", "--out", str(tmp_path / "p.png"), "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert png.returncode == 1
    assert png.stderr.strip() == (
        "upgrade-bot: the timeline picture needs matplotlib, which is not installed:"
        " pip install 'upgrade-bot[charts]'"
    )
    assert not (tmp_path / "p.png").exists()
    html = subprocess.run(
        [*bot, "report", run_id, "-o", "html", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert html.returncode == 0, html.stderr
    assert 'id="no-charts"' in html.stdout
    assert "<img" not in html.stdout
    # The tables stay: every node, the peaks of the sampled series, the workloads that went unhealthy.
    assert html.stdout.count("<td>ip-10-0-") == 10
    assert 'id="unhealthy-peaks"' in html.stdout
    assert 'id="unhealthy-episodes"' in html.stdout
    files = tmp_path / "files"
    slash = subprocess.run(
        [*bot, "exec", f"report {run_id}", "--as", "U0PRIMARY", "--config", str(config), "--out", str(files)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert slash.returncode == 0, slash.stdout + slash.stderr
    assert (
        "no timeline picture: this install lacks matplotlib (`pip install 'upgrade-bot[charts]'`)"
        in slash.stdout
    )
    assert sorted(p.name for p in files.iterdir()) == [
        f"upgrade-bot-run-{run_id}.{ext}" for ext in ("html", "md")
    ]


def test_with_matplotlib_the_html_has_no_missing_charts_note(store: Store) -> None:
    html = render(build_report(store, stored_run(store)), "html").decode()
    assert 'id="no-charts"' not in html
    assert 'id="unhealthy-episodes"' not in html  # the chart shows them


def test_the_unhealthy_chart_leaves_a_gap_where_no_watch_sampled(store: Store) -> None:
    from datetime import timedelta

    from matplotlib.collections import PolyCollection

    from bot.adapters.charts import _pyplot, _unhealthy_over_time
    from bot.records import WatchRow

    run_id = stored_run(store, watch=False)
    t0 = build_report(store, run_id).started_at
    ids = []
    for offset in (0, 30):
        row = WatchRow(id=0, cluster="prod", channel="C0OPS", run_id=run_id, step_id=f"w{offset}",
                       started_by="U0A", started_at=t0 + timedelta(minutes=offset))  # fmt: skip
        ids.append(store.create_watch(row))
        assert store.claim_watch(ids[-1], owner="p1", now=row.started_at, stale_before=row.started_at)
    first, second = ids
    assert store.add_watch_sample(first, owner="p1", at=t0, counts={"Not ready": 3})
    assert store.add_watch_sample(first, owner="p1", at=t0 + timedelta(minutes=20), counts={"Not ready": 2})
    assert store.publish_watch(
        first, owner="p1", summary="{}", at=t0 + timedelta(minutes=20), end_reason="done"
    )
    assert store.add_watch_sample(second, owner="p1", at=t0 + timedelta(minutes=30), counts={"Not ready": 1})
    report = build_report(store, run_id)
    gap = (t0 + timedelta(minutes=20), t0 + timedelta(minutes=30))
    assert report.unsampled == [gap]
    md = render(report, "md").decode()
    assert (
        f"Not sampled (no watch ran; the chart leaves these blank): {gap[0]:%Y-%m-%d %H:%M:%S} UTC – "
        f"{gap[1]:%Y-%m-%d %H:%M:%S} UTC" in md
    )
    # The drawn stacks: nothing is filled strictly inside the gap (no held count, no zero line).
    plt = _pyplot()
    fig, ax = plt.subplots()
    _unhealthy_over_time(ax, report)
    fills = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(fills) == 2  # one stack per stretch a watch sampled
    left, right = (mdates_num(t) for t in gap)
    for fill in fills:
        for path in fill.get_paths():
            xs = path.vertices[:, 0]
            assert not ((xs > left + 1e-9) & (xs < right - 1e-9)).any()
    plt.close(fig)


def mdates_num(value: Any) -> float:
    from matplotlib import dates

    return float(dates.date2num(value))


def test_the_report_keeps_what_a_skipped_check_found(store: Store) -> None:
    from tests.support.report_runs import CHECK_FAILED

    report = build_report(store, stored_run(store))
    # The outcome counts it as failed and skipped, as the card does (it once said "1 skipped").
    assert report.outcome == "completed: 27 of 28 steps succeeded (1 failed and skipped)"
    line = f"checks failed and was skipped by U0PRIMARY (the findings were reviewed): {CHECK_FAILED}"
    assert line in report.findings
    md = render(report, "md").decode()
    assert f"- {line}" in md.split("## Findings\n", 1)[1].split("\n## ", 1)[0]
    html = render(report, "html").decode()
    assert "API001 (HorizontalPodAutoscaler shop/web)" in html.split("<h2>Findings</h2>", 1)[1]


def test_an_aborted_runs_reason_is_said_as_why_it_was_aborted_not_beside_who_started_it(store: Store) -> None:
    report = build_report(store, stored_run(store))
    aborted = dataclasses.replace(report, state="aborted", reason="the upgrade: checks failed")
    md = render(aborted, "md").decode()
    assert "- **Started by**: U0PRIMARY\n" in md
    assert "- **Why it was aborted**: the upgrade: checks failed\n" in md
    html = render(aborted, "html").decode()
    assert "U0PRIMARY — the upgrade" not in html
    assert "Why it was aborted" in html


def test_a_run_in_which_no_watch_ran_says_so_not_that_its_watches_kept_no_samples(store: Store) -> None:
    # No watch row and no watch's post in the thread: nothing counted the pods.
    report = build_report(store, stored_run(store, watch=False, watch_posts=False))
    assert "Unhealthy pods over time: no watch ran in this run, so nothing counted them." in report.gaps


def test_the_known_issues_a_job_posted_in_its_own_thread_are_in_the_report_and_a_stop_is_no_episode(
    store: Store,
) -> None:
    """A drain posts KI006 in its job's thread (`job:N`, key `rule:KI006:…`), which the report did
    not read; and a watch's `stopped:imagepull` milestone names a kind but no workload, which made
    an unlabelled row of "workloads that went unhealthy"."""
    run_id = stored_run(store)
    job = next(j for j in store.jobs(states=("done",), run_id=run_id) if j.kind == "drain")
    at = build_report(store, run_id).started_at
    assert store.claim_message(
        run_id=f"job:{job.id}",
        key="rule:KI006:checkout/Deployment/checkout:1",
        channel="C0OPS",
        thread_ts="1.2",
        at=at,
    )
    watch = store.watches(live=False, run_id=run_id)[0]
    assert store.claim_message(
        run_id=f"watch:{watch.id}", key="stopped:imagepull", channel="C0OPS", thread_ts="1.3", at=at
    )
    report = build_report(store, run_id)
    md = render(report, "md").decode()
    assert "- known issue KI006 on Deployment checkout/checkout\n" in md
    assert ("KI006", "checkout/Deployment/checkout") in {(m.rule, m.workload) for m in report.known_issues}
    assert all(e.workload for e in report.episodes)


def test_a_node_group_drained_twice_counts_its_nodes_once(store: Store) -> None:
    """Two drain steps of one group (the second finds the nodes drained) made "(4 nodes)" of two."""
    run_id = stored_run(store)
    first = next(j for j in store.jobs(states=("done",), run_id=run_id) if j.kind == "drain")
    store.create_job(dataclasses.replace(first, id=0, step_id=f"{first.step_id}-again"))
    report = build_report(store, run_id)
    group = next(g for g in report.groups if sum(1 for n in report.nodes if n.group == g) > 2)
    names = {n.name for n in report.nodes if n.group == group}
    md = render(report, "md").decode()
    assert f"### {group} ({len(names)} nodes, drained {2 * len(names)} times)" in md
    html = render(report, "html").decode()
    assert f"{group} ({len(names)} nodes, drained {2 * len(names)} times)" in html
