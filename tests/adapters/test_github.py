"""The GitHub adapter (issue 43): the real githubkit client against the sim's GitHub REST facade,
finding a PR by number, branch and title pattern, with its reviews, check runs and commit statuses;
and githubkit never imported by a bot that has no `github:`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bot.adapters.github import GitHubPullRequests
from bot.core.runs.prs import Check, PrRef, unmet

REPO = "org/eks-provision-configuration"
ROOT = Path(__file__).parents[2]


def test_a_pr_is_found_by_number_branch_and_title_with_its_checks_and_reviews(sim_small: Any) -> None:
    github = sim_small.sim.github
    github.open_pull(
        REPO, 61, title="logging node group to 1.25", branch="eks-1.25-logging", head_sha="a" * 40
    )
    github.open_pull(REPO, 62, title="istio node group to 1.25", branch="eks-1.25-istio", head_sha="b" * 40)
    github.check_run(REPO, "b" * 40, name="terraform plan", status="completed", conclusion="success")
    github.status(REPO, "b" * 40, context="atlantis/plan", state="pending")
    github.review(REPO, 62, user="bob", state="CHANGES_REQUESTED")
    github.review(REPO, 62, user="alice", state="APPROVED")
    github.review(REPO, 62, user="bob", state="APPROVED")
    github.review(REPO, 62, user="carol", state="COMMENTED")
    # A clock that stands still: the card's cached read never expires in this test.
    prs = GitHubPullRequests(token="ghp_test", api_url=f"{sim_small.url}/github", clock=lambda: 100.0)

    by_number = prs.find(PrRef(repo=REPO, number=62))
    assert by_number is not None
    assert (by_number.number, by_number.state, by_number.merge_commit) == (62, "open", "")
    assert by_number.url == f"https://github.com/{REPO}/pull/62"
    assert by_number.checks == (
        Check(name="terraform plan", status="completed", conclusion="success"),
        Check(name="atlantis/plan", status="in_progress", conclusion=""),
    )
    # Each person's latest deciding review: bob changed his mind, carol only commented.
    assert (by_number.approvals, by_number.changes_requested) == (("alice", "bob"), ())
    assert prs.find(PrRef(repo=REPO, branch="eks-1.25-logging")).number == 61  # type: ignore[union-attr]
    assert prs.find(PrRef(repo=REPO, match=r"istio.*1\.25")).number == 62  # type: ignore[union-attr]
    assert prs.find(PrRef(repo=REPO, number=99)) is None
    assert prs.find(PrRef(repo=REPO, match="nothing like it")) is None

    required = PrRef(repo=REPO, number=62, require=("merged", "checks"))
    assert (
        unmet(required, by_number) == f"{REPO}#62 is open, not merged; checks not successful: atlantis/plan"
    )
    github.status(REPO, "b" * 40, context="atlantis/plan", state="success")
    github.merge(REPO, 62, merge_commit_sha="c" * 40)
    # The card's read is kept a few seconds; a gate's or a click's is fresh.
    assert prs.find(PrRef(repo=REPO, number=62)).state == "open"  # type: ignore[union-attr]
    merged = prs.find(PrRef(repo=REPO, number=62), fresh=True)
    assert merged is not None
    assert (merged.state, merged.merge_commit) == ("merged", "c" * 40)
    assert unmet(required, merged) == ""


def test_a_bot_without_github_never_imports_githubkit(tmp_path: Path) -> None:
    config = tmp_path / "upgrade-bot.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\nroster: {{primary: [U0PRIMARY]}}\n")
    code = (
        "import sys; from pathlib import Path; from bot.settings import load_settings; "
        "from bot.frontdoor.assemble import assemble; "
        f"s = assemble(load_settings(Path({str(config)!r}), {{}}), with_slack=False); "
        "print('githubkit' in sys.modules); s.close()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
