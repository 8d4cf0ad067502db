"""`upgrade-bot rehearse-fleet`: a fleet written outside the project, rehearsed through the documented
CLI on simulated clusters (one per cluster, served by the rehearsal's process), each from its
`clusters.NAME.scenario`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest

from tests.support.bot_process import bot_command
from tests.support.fleets import TINY_PLAN
from tests.support.testbed import wait_until

REPO = Path(__file__).resolve().parents[2]

#: 12 clusters in 3 stages, as the issue's acceptance: a canary that soaks with alerts evidence
#: behind a four-eyes gate, four labs two at a time, seven devs half at a time.
FLEET = """\
name: outside
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
plan: tiny
stages:
  - name: canary
    clusters: [ci]
    soak: 30m
    evidence: [alerts]
    after: {approve: [primary, shadow]}
  - name: lab
    selector: {env: lab}
    max_concurrency: 2
  - name: dev
    selector: {env: dev}
    max_concurrency: 50%
"""


def _write(tmp_path: Path, *, scenario_of_ci: str = "small") -> Path:
    """The fleet, its plan and its rehearsal configuration in a folder of the user's, not the project's."""
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "tiny.yaml").write_text(TINY_PLAN, encoding="utf-8")
    fleet = tmp_path / "outside.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    lines = [
        "clusters:",
        f"  ci: {{kubeconfig: ~/.kube/config, labels: {{env: ci}}, scenario: {scenario_of_ci}}}",
    ]
    lines += [f"  lab-{i}: {{kubeconfig: ~/.kube/config, labels: {{env: lab}}}}" for i in range(1, 5)]
    lines += [
        f"  dev-{i}: {{kubeconfig: ~/.kube/config, labels: {{env: dev}}, scenario: small}}"
        for i in range(1, 8)
    ]
    (tmp_path / "outside.config.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return fleet


def _rehearse(
    tmp_path: Path, *args: str, timeout: float = 600, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), "rehearse-fleet", *args, "--plain"],
        cwd=tmp_path,  # the user's folder: the fleet and its plan are found from there
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_fleet_written_outside_the_project_rehearses_to_its_end(tmp_path: Path) -> None:
    fleet = _write(tmp_path)
    result = _rehearse(tmp_path, str(fleet), "--auto-approve")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    # One sim per cluster, each from its scenario (lab-* name none: the default, small).
    assert len(re.findall(r"^sim small for \S+ at http://127\.0\.0\.1:\d+$", out, re.M)) == 12
    # Every child played once, in stage order, each completed.
    played = re.findall(r"^-- (\S+) \(stage (\w+)\): run R\w+ --$", out, re.M)
    assert [c for c, _ in played] == [
        "ci",
        "lab-1",
        "lab-2",
        "lab-3",
        "lab-4",
        *(f"dev-{i}" for i in range(1, 8)),
    ]
    assert len(re.findall(r"^-- \S+: run R\w+ completed --$", out, re.M)) == 12
    # The canary soaked with its evidence judged on its sim's Alertmanager, then two people let it on.
    assert out.index("Soak of `canary` passed") < out.index(
        "approves the fleet's `after` gate of stage canary"
    )
    assert out.index("Stage `canary` done") < out.index("-- lab-1 (stage lab)")
    assert out.rstrip().endswith("completed")
    assert re.search(r"rehearsal of fleet outside: fleet F\w+ completed$", out.rstrip())


def test_a_planted_canary_failure_stops_the_fleet_before_the_next_stage(tmp_path: Path) -> None:
    fleet = _write(tmp_path)
    result = _rehearse(tmp_path, str(fleet), "--auto-approve", "--fail", "ci:drain")
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "-> @U0PRIMARY (primary) rejects `drain`: rehearsal: planted failure of `drain` (--fail)" in out
    assert "Fleet paused: the canary failed: ci (drain failed in run R" in out
    # Nothing of stage 2 or 3 started: no child run was played or even created for them.
    assert re.findall(r"^-- (\S+) \(stage", out, re.M) == ["ci"]
    assert "lab-1 - pending" in out
    assert "dev-7 - pending" in out
    lines = out.rstrip().splitlines()
    assert lines[-2].startswith("why: the canary failed: ci (drain failed in run R")
    # The fleet's status and its last lines name the person who rejected it, never by a bare id.
    assert re.search(r"^  \[red\] ci - failed .* rejected by @U0PRIMARY: rehearsal: planted", out, re.M), out[
        -3000:
    ]
    assert "rejected by @U0PRIMARY: rehearsal: planted" in lines[-2]
    assert not re.findall(r".*(?<![@\w])U0(?:PRIMARY|SHADOW|COORD)\b.*", out)
    assert re.fullmatch(
        r"rehearsal of fleet outside: fleet F\w+ paused at stage canary \(never started: lab, dev\)",
        lines[-1],
    )


def test_a_planted_failure_that_names_no_step_of_the_cluster_s_plan_is_refused(tmp_path: Path) -> None:
    # A typo planted nothing, and the rehearsal completed as if the failure had been tried.
    fleet = _write(tmp_path)
    result = _rehearse(tmp_path, str(fleet), "--auto-approve", "--fail", "ci:drian")
    assert result.returncode == 2, result.stdout[-3000:] + result.stderr[-3000:]
    assert (
        result.stderr.strip().splitlines()[-1]
        == "upgrade-bot: --fail ci:drian: ci's plan has no step drian (its steps: drain)"
    )
    assert "fleet outside: run F" not in result.stdout
    other = _rehearse(tmp_path, str(fleet), "--auto-approve", "--fail", "prod:drain")
    assert other.returncode == 2
    assert (
        "upgrade-bot: --fail prod:drain: prod is not a cluster of fleet outside (its clusters: ci, lab-1"
        in (other.stderr)
    )


def test_an_empty_answer_at_a_fleet_gate_lets_the_roster_answer_it(tmp_path: Path) -> None:
    # At the terminal, Enter once named the first person again and again: the four-eyes gate
    # refused them each time for having approved already, and the prompt came back for good.
    fleet = _write(tmp_path)
    fleet.write_text(
        "name: outside\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: tiny\nstages:\n"
        "  - {name: canary, clusters: [ci], after: {approve: [primary, shadow]}}\n"
        "  - {name: lab, clusters: [lab-1]}\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [*bot_command(), "rehearse-fleet", str(fleet), "--interactive", "--plain"],
        cwd=tmp_path,
        input="\n" * 40,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert out.count("fleet gate `after` of stage canary: approve as [U0SHADOW/U0PRIMARY]") == 1
    # People by name and role, as the bot's own lines say them, never a bare id.
    assert "-> @U0SHADOW (shadow) approves the fleet's `after` gate of stage canary" in out
    assert "-> @U0PRIMARY (primary) approves the fleet's `after` gate of stage canary" in out
    assert re.search(r"rehearsal of fleet outside: fleet F\w+ completed$", out.rstrip())


def test_a_scenario_that_does_not_exist_is_named_and_nothing_runs(tmp_path: Path) -> None:
    fleet = _write(tmp_path, scenario_of_ci="nosuch")
    result = _rehearse(tmp_path, str(fleet), "--auto-approve")
    assert result.returncode == 2
    assert "nosuch" in result.stderr
    assert "Traceback" not in result.stderr
    bad = _rehearse(tmp_path, str(fleet), "--auto-approve", "--fail", "drain")
    assert (bad.returncode, bad.stderr.strip()) == (
        2,
        "upgrade-bot: --fail drain: expected CLUSTER:STEP, like agora-ci:drain",
    )


def test_a_fleet_that_does_not_exist_is_named_with_the_shipped_ones_not_its_missing_config(
    tmp_path: Path,
) -> None:
    # Without --config the configuration is looked for beside the fleet; a mistyped name used to
    # be said as "configuration file not found" at a path inside the installed package.
    for fleet in ("exampel", str(tmp_path / "nosuch.yaml")):
        result = _rehearse(tmp_path, fleet, "--auto-approve")
        assert (result.returncode, result.stderr.strip()) == (
            1,
            f"upgrade-bot: no fleet plan {fleet!r} (a path, or a shipped fleet: example)",
        )
    # With --config the fleet is looked for in its templates_dir too, and said the same way.
    (tmp_path / "rehearsal.yaml").write_text("clusters: {}\n", encoding="utf-8")
    result = _rehearse(tmp_path, "exampel", "--config", "rehearsal.yaml")
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "upgrade-bot: no fleet plan 'exampel' (a path, or a shipped fleet: example)",
    )


@pytest.mark.slow  # six eks-nodegroups runbooks end to end: minutes on a loaded 2-core machine
def test_the_example_fleet_rehearses_to_its_end_with_its_timeline(tmp_path: Path) -> None:
    """The shipped example (3 stages over the 6 clusters its config defines, the eks-nodegroups
    runbook with its analyses) through the documented CLI: every child completes, stage after
    stage, each soak passing before its `after` gate and the next stage, and the timeline is
    written with every lane, stage, soak and bar. The sims answer the analyses' queries as a
    quiet cluster would; without that every analysis is Inconclusive and the canary pauses."""
    # About 510 CPU-seconds (2026-11-29: 16 min of wall on a 2-core machine at load 17, where the
    # process got half a core); before the sim's read path and stage clocks it did not finish.
    result = _rehearse(
        tmp_path,
        str(REPO / "templates" / "fleets" / "example.yaml"),
        "--auto-approve",
        "--report",
        "report",
        timeout=1500,
    )
    # Each child completes past the failed steps the rehearsal skips (the sims' planted findings,
    # as `rehearse eks-nodegroups` exits 3 for): the fleet completes, and says so, exiting 3.
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    stages = {
        "canary": ["agora-ci"],
        "lab": ["agora-lab", "cityos-lab"],
        "dev": ["agora-dev", "cityos-dev-east", "cityos-dev-west"],
    }
    clusters = [c for members in stages.values() for c in members]
    played = re.findall(r"^-- (\S+) \(stage (\w+)\): run (R\w+) --$", out, re.M)
    assert [(c, s) for c, s, _ in played] == [(c, s) for s, members in stages.items() for c in members]
    for cluster, _, run in played:
        assert f"-- {cluster}: run {run} completed --" in out
    # The whole timeline, in order: each stage starts, its children play and complete, its soak
    # (canary and lab have one) starts and passes, its `after` gate is approved, the stage is done.
    at = 0
    for stage, members in stages.items():
        at = out.index(f"Stage `{stage}` started", at)
        for cluster in members:
            at = out.index(f"-- {cluster}: run ", out.index(f"-- {cluster} (stage {stage})", at))
        if stage != "dev":
            at = out.index(f"Soak of `{stage}` passed", out.index(f"Soak of `{stage}` started", at))
            at = out.index(f"approves the fleet's `after` gate of stage {stage}", at)
        at = out.index(f"Stage `{stage}` done", at)
    assert "paused" not in out.split("-- cityos-dev-west: run ")[-1]
    (page,) = (tmp_path / "report").glob("fleet-F*.html")
    assert re.search(r"^report: .*fleet-F\w+\.html$", out, re.M)
    html = page.read_text(encoding="utf-8")
    assert "6 clusters in 3 stages" in html
    assert re.findall(r'<text class="lane"[^>]*>([^<]+)</text>', html) == clusters
    # Every child went past the failed steps the rehearsal skipped: amber, not a green success,
    # each saying so in its run's own words, with the steps it went past listed under the picture.
    assert len(re.findall(r'<rect class="bar loose"', html)) == 6
    assert 'class="bar succeeded"' not in html
    assert (
        re.findall(r'<text class="ending"[^>]*>([^<]+)</text>', html)
        == ["completed with 4 failed steps skipped"] * 6
    )
    assert (
        re.findall(r"<li><b>([^<]+)</b> \(run R\w+\): Completed with 4 failed steps skipped<ul>", html)
        == clusters
    )
    assert len(re.findall(r"<li>diff \(Compare before and after\) failed: ", html)) == 6
    assert re.findall(r'<rect class="soak" data-stage="(\w+)"', html) == ["canary", "lab"]
    assert 'class="pause"' not in html
    went_past = "agora-ci, agora-lab, cityos-lab, agora-dev, cityos-dev-east, cityos-dev-west"
    assert re.search(
        rf"rehearsal of fleet example: fleet F\w+ completed, but 6 went past failed steps \({went_past}\)$",
        out.rstrip(),
    )
    assert re.search(r"^\s*\[yellow\] agora-ci - succeeded \* 1\.24\.17 -> 1\.25\.16 \* run `R\w+` \* completed "
                     r"with 4 failed steps skipped in run R\w+: checks, restart-istio-data-plane, watch-settle, diff$",
                     out, re.M)  # fmt: skip


def _status(sim_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{sim_url}/sim/status", timeout=30) as response:
        return cast(dict[str, Any], json.load(response))


def test_an_alert_in_a_later_stage_s_soak_pauses_the_fleet(tmp_path: Path) -> None:
    # The lab stage soaks with alerts evidence too. Its sims stood still while the canary's stage
    # ran and between their own turns: each is brought up to the bot's clock as it resumes, so an
    # alert one fires during the soak starts after the soak did, and counts as new.
    fleet = _write(tmp_path)
    fleet.write_text(
        FLEET.replace(
            "    max_concurrency: 2\n", "    max_concurrency: 2\n    soak: 30m\n    evidence: [alerts]\n"
        ),
        encoding="utf-8",
    )
    lines: list[str] = []
    sims: dict[str, str] = {}
    with subprocess.Popen(
        [*bot_command(), "rehearse-fleet", str(fleet), "--auto-approve", "--plain"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if found := re.match(r"sim small for (\S+) at (http://\S+)$", line.strip()):
                    sims[found.group(1)] = found.group(2)
                if "Soak of `lab` started" in line:
                    # Once lab-3's sim runs again for the soak (the line comes just before), an
                    # alert starts firing there, at the sim's own time.
                    wait_until(lambda: _status(sims["lab-3"])["speed"] > 0, timeout=30, what="lab-3 soaking")
                    body = json.dumps({"labels": {"alertname": "KubeNodeNotReady", "severity": "critical"}})
                    request = urllib.request.Request(
                        f"{sims['lab-3']}/evidence/alerts",
                        data=body.encode(),
                        method="POST",
                        headers={"Content-Type": "application/json"},
                    )
                    with urllib.request.urlopen(request, timeout=30):
                        pass
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
    out = "".join(lines)
    assert process.returncode == 3, out[-3000:]
    assert "Soak of `canary` passed" in out
    assert "Soak of `lab` passed" not in out
    assert "KubeNodeNotReady" in out
    # Nothing of the dev stage started.
    assert not re.findall(r"^-- dev-\d \(stage", out, re.M)
    assert re.search(r"rehearsal of fleet outside: fleet F\w+ paused at stage lab", out), out[-2000:]


def test_each_childs_window_opens_at_its_turn_on_whatever_day(tmp_path: Path) -> None:
    # The plan's window was written for a day long gone (as the example's 2026-12-01 is, the day
    # after): every card said "window ended … ago" and every step was worked past it. Each
    # child's window opens as the rehearsal plays it, as long as written and in its zone. The labs
    # the stage starts together are played one after the other: opened with the stage, lab-2's
    # window ran while lab-1 was played, and ended before lab-2's turn when lab-1 took long.
    fleet = _write(tmp_path)
    fleet.write_text(
        "name: outside\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: tiny\nstages:\n"
        "  - {name: canary, clusters: [ci]}\n"
        "  - {name: lab, clusters: [lab-1, lab-2], max_concurrency: 2}\n",
        encoding="utf-8",
    )
    (tmp_path / "plans" / "tiny.yaml").write_text(
        TINY_PLAN.replace("2026-12-01", "2020-03-02"), encoding="utf-8"
    )
    # The cards' dates are in the terminal's zone.
    result = _rehearse(tmp_path, str(fleet), "--auto-approve", env={"TZ": "UTC"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "window ended" not in out.lower()
    opened = re.findall(
        r"^rehearsal: (\S+)'s window \(2020-03-02 14:00 - 17:00 Asia/Tokyo, 3h\) opens as the run starts: "
        r"(\d{4}-\d\d-\d\d \d\d:\d\d) - \d\d:\d\d Asia/Tokyo on the sim's clock$",
        out,
        re.M,
    )
    assert [c for c, _ in opened] == ["ci", "lab-1", "lab-2"], out[-3000:]
    # Each at its turn: after its header and the earlier child's end, its window's line, then its
    # card and its run; the bot's clock only moves on from one opening to the next.
    at = 0
    for cluster, _ in opened:
        header = out.index(f"\n-- {cluster} (stage ", at)
        line = out.index(f"\nrehearsal: {cluster}'s window", header)
        ended = re.compile(rf"^-- {cluster}: run \w+ completed --$", re.M).search(out, line)
        assert ended is not None, out[line : line + 3000]
        at = ended.end()
    starts = [datetime.fromisoformat(start) for _, start in opened]
    assert starts == sorted(starts), opened
    for cluster, start in opened:
        # The child's cards count down to its moved window's end (the first, just after the line).
        end = datetime.fromisoformat(start).replace(tzinfo=ZoneInfo("Asia/Tokyo")) + timedelta(hours=3)
        cards = re.findall(r"^Run active .*$", out.split(f"rehearsal: {cluster}'s window", 1)[1], re.M)
        assert re.search(
            rf" window ends {end.astimezone(UTC):%Y-%m-%d %H:%M} UTC \((3h|2h\d+m) left\)$", cards[0]
        ), cards[0]
    for card in re.findall(r"^Run active .*$", out, re.M):
        assert re.search(r" window ends 20\S+ \S+ UTC \((3h|2h\d+m) left\)$", card), card
        assert "2020-" not in card
