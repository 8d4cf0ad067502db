"""Pull requests as evidence (issue 43): the PR a plain step names, what its gate and the card
show of it, and what its `done` confirmation may require.

A step names its PR in the plan — by number, by branch, or by a title pattern:

    pr: {repo: org/eks-provision-configuration, number: 62}
    pr: {repo: org/eks-provision-configuration, branch: eks-1.25-istio}
    pr: {repo: org/eks-provision-configuration, match: "istio.*1\\.25", require: {merged: true, checks: success}}

`require` is what its `done` confirmation needs besides the people: the PR `merged`, its checks
(check runs and commit statuses on the PR's head) all `success`. A person still confirms.

The PR is read through the `PullRequests` port (GitHub's adapter is `bot.adapters.github`, with
the `github` extra); this module is pure: the port, the records, the requirement's verdict and
the view the templates show.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from bot.errors import BotError

# The records the port answers with live in the leaf (`bot.records`): the adapter builds them.
from bot.records import PASSED as PASSED
from bot.records import Check as Check
from bot.records import PrRef as PrRef
from bot.records import PullRequest as PullRequest

REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")


class PullRequests(Protocol):
    """Reads the PR a step names (GitHub: `bot.adapters.github.GitHubPullRequests`)."""

    def find(self, ref: PrRef, *, fresh: bool = False) -> PullRequest | None:
        """The PR `ref` names (the newest one for a branch or a pattern); None: there is none.
        `fresh`: not from a cache (a gate, a done click). Raises BotError when the forge cannot be asked."""


def unmet(ref: PrRef, pr: PullRequest | None) -> str:
    """Why the step's `done` may not be confirmed yet, by `ref.require`; "" when nothing is missing."""
    if not ref.require:
        return ""
    if pr is None:
        return f"no PR found for {ref.describe()}"
    missing = []
    if "merged" in ref.require and pr.state != "merged":
        missing.append(f"{pr.repo}#{pr.number} is {pr.state}, not merged")
    if "checks" in ref.require:
        waiting = [c.name for c in pr.checks if not c.passed]
        if waiting:
            missing.append(f"checks not successful: {', '.join(waiting[:5])}")
    return "; ".join(missing)


def view(ref: PrRef, pr: PullRequest | None, *, error: str = "") -> dict[str, Any]:
    """What the gate and the card show of a step's PR."""
    if pr is None:
        why = error or "no such PR found"
        if ref.require:
            # Its `done` cannot be confirmed while the PR is not read: the gate says so up front.
            needs = " and ".join(
                {"merged": "merged", "checks": "its checks successful"}.get(r, r) for r in ref.require
            )
            why += f"; `done` requires it {needs}, so the step cannot be confirmed done until it is read"
        return {"ref": ref.describe(), "found": False, "error": why}
    passed = sum(1 for c in pr.checks if c.passed)
    failed = [c.name for c in pr.checks if c.failed]
    return {
        "ref": ref.describe(),
        "found": True,
        "error": "",
        "repo": pr.repo,
        "number": pr.number,
        "title": pr.title,
        "url": pr.url,
        "state": pr.state,
        "icon": {"merged": ":large_purple_circle:", "open": ":large_green_circle:"}.get(
            pr.state, ":red_circle:"
        ),
        "merge_commit": pr.merge_commit,
        "short": pr.merge_commit[:12],
        "checks": {"passed": passed, "total": len(pr.checks), "failed": failed[:5]},
        "approvals": list(pr.approvals),
        "changes_requested": list(pr.changes_requested),
        "require": list(ref.require),
        "unmet": unmet(ref, pr),
    }


def read(prs: PullRequests | None, ref: PrRef, *, fresh: bool = False) -> tuple[PullRequest | None, str]:
    """The PR, or why it could not be read (a forge down never stops the card)."""
    if prs is None:
        return None, "no GitHub access is configured (`github:`)"
    try:
        return prs.find(ref, fresh=fresh), ""
    except BotError as exc:
        return None, exc.user_message


def parse_ref(document: Mapping[str, Any]) -> PrRef:
    """A `PrRef` from already-validated plan data (`bot.core.runs.plans` checks the shapes)."""
    require = document.get("require") or {}
    wanted = tuple(
        name
        for name, on in (
            ("merged", require.get("merged") is True),
            ("checks", require.get("checks") == "success"),
        )
        if on
    )
    number = document.get("number")
    return PrRef(
        repo=str(document["repo"]),
        number=int(number) if number is not None else None,
        branch=str(document.get("branch") or ""),
        match=str(document.get("match") or ""),
        require=wanted,
    )
