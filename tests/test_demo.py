"""scripts/demo, the README's first command: it serves the sim, plays the upgrade and diffs it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_demo_rehearses_the_runbook_then_snapshots_and_diffs_the_upgrade(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "UPGRADE_BOT_"))}
    env["TMPDIR"] = str(tmp_path)
    state = tmp_path_factory.mktemp("state")
    env["XDG_STATE_HOME"] = str(state)
    # Its own process group: a demo that runs out of time is killed with the sim it serves in the
    # background (a SIGKILL of the script alone skips its trap and left the sim running).
    demo = subprocess.Popen(
        [str(ROOT / "scripts" / "demo")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        stdout, stderr = demo.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        stdout, stderr = demo.communicate()
        pytest.fail(f"the demo ran for more than 300 s:\n{stdout[-3000:]}{stderr[-3000:]}")
    result = subprocess.CompletedProcess(demo.args, demo.returncode, stdout, stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    # Part 1: the whole runbook rehearsed on the sim, every gate answered by the roster.
    assert "$ upgrade-bot rehearse eks-nodegroups --auto-approve" in out
    # The planted faults fail steps the roster skips: the ending says so (issue 40).
    assert re.search(
        r"^rehearsal of eks-nodegroups: run \S+ completed with \d+ failed steps skipped$", out, re.MULTILINE
    )
    assert "✔️ @U0SHADOW (shadow) approved the start of `control-plane`" in out
    # The pre-flight check finds the scenario's planted blockers; the roster reviews and skips it.
    assert "❌ *`checks` failed* in run" in out
    # The cluster's side and the cloud's: the rehearsal points the EKS provider at the sim's AWS APIs.
    assert "pre-flight check for 1.25 FAILED: 10 Required — API001 (" in out
    assert "EKS005 (Add-on kube-proxy)" in out
    assert "  ↳ file attached: check-prod-1.25.md" in out
    assert "↳ rehearsal: @U0PRIMARY reviewed why `checks` failed and skips it" in out
    assert "⏩ `checks` Pre-flight checks — skipped" in out
    # Part 2: snapshot, upgrade, snapshot, diff through the terminal front door.
    url = re.search(r"^url: http://127\.0\.0\.1:(\d+)$", out, re.MULTILINE)
    assert url
    assert "• `/upgrade snapshot [LABEL …] [options]` — Take a snapshot of the cluster" in out  # help
    assert re.search(r"Snapshot \*#1\* `pre` of \*sim\* .*\nControl plane v1\.24\.17-eks-\S+ · 14 nodes", out)
    assert "step 6/6: NodeGroupUpdate logging → 1.25.16" in out
    assert "upgrade op-1: Successful" in out
    assert re.search(
        r"Snapshot \*#2\* `post` of \*sim\* .*\nControl plane v1\.25\.16-eks-\S+ · 14 nodes", out
    )
    assert "🚨 Diff *#1* `pre` → *#2* `post`: *7 regressions*" in out
    assert "# Cluster diff: #1 pre → #2 post" in out
    assert "| new CrashLoopBackOff pods | kube-system | Deployment kube-system/cluster-autoscaler |" in out
    assert "| new ImagePullBackOff pods | kube-system | Deployment kube-system/metrics-server |" in out
    assert "(exit status 3: 3 means regressions were found" in out
    assert "(exit status 3: 3 means steps failed and were skipped, or the run paused)" in out
    assert "• *#2* `post` sim · " in out
    assert "• *#1* `pre` sim · " in out
    assert "Traceback" not in out + result.stderr
    # It ends with the rehearsal's report: the picture (five node-group lanes and the step Gantt,
    # tests/frontdoor/test_rehearse.py), with the HTML and the Markdown beside it.
    picture = re.search(r"report \(HTML and Markdown beside it\): (\S+\.png)$", out.rstrip())
    assert picture, out[-500:]
    path = Path(picture.group(1))
    assert path.parent == state / "upgrade-bot" / "demo-report"
    assert path.read_bytes().startswith(b"\x89PNG")
    assert path.with_suffix(".html").is_file()
    assert path.with_suffix(".md").is_file()
    # The sim it started is gone, and so is its temp dir.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(url.group(1))), timeout=5).close()
    assert list(tmp_path.iterdir()) == []
