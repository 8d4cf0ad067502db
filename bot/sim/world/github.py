"""A GitHub REST facade on the sim's port, under `/github` (issue 43): what the bot's real githubkit
client asks of a pull request, answered in GitHub's shapes from PRs a test or scenario states.

Served (the documented REST calls, fields as GitHub writes them, the ones a client reads):

    GET /github/repos/{owner}/{repo}/pulls?state=&head=&sort=&direction=&per_page=
    GET /github/repos/{owner}/{repo}/pulls/{number}
    GET /github/repos/{owner}/{repo}/pulls/{number}/reviews
    GET /github/repos/{owner}/{repo}/commits/{ref}/check-runs
    GET /github/repos/{owner}/{repo}/commits/{ref}/status

The sim's extra routes are not given the request's headers, so the token githubkit sends is not
checked here. State is changed through `GitHub`'s methods (`open_pull`, `merge`, `review`,
`check_run`, `status`), thread-safe, from tests and rehearsals in the same process.
"""

from __future__ import annotations

import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

PREFIX = "/github"
HTML = "https://github.com"


@dataclass
class _Pull:
    repo: str
    number: int
    title: str
    branch: str
    head_sha: str
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str = ""
    merged_at: str | None = None
    reviews: list[dict[str, Any]] = field(default_factory=list)


class GitHub:
    """The PRs, reviews, check runs and commit statuses the facade answers with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pulls: dict[tuple[str, int], _Pull] = {}
        self._check_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}

    # -- stating the world -------------------------------------------------------------------------

    def open_pull(self, repo: str, number: int, *, title: str, branch: str, head_sha: str) -> None:
        with self._lock:
            self._pulls[(repo, number)] = _Pull(
                repo=repo, number=number, title=title, branch=branch, head_sha=head_sha
            )

    def merge(
        self, repo: str, number: int, *, merge_commit_sha: str, at: str = "2026-12-01T05:10:00Z"
    ) -> None:
        with self._lock:
            pull = self._pulls[(repo, number)]
            pull.state, pull.merged, pull.merge_commit_sha, pull.merged_at = (
                "closed",
                True,
                merge_commit_sha,
                at,
            )

    def review(self, repo: str, number: int, *, user: str, state: str) -> None:
        """A review: APPROVED, CHANGES_REQUESTED, COMMENTED or DISMISSED."""
        with self._lock:
            pull = self._pulls[(repo, number)]
            pull.reviews.append(
                {
                    "id": len(pull.reviews) + 1,
                    "user": {"login": user},
                    "state": state,
                    "commit_id": pull.head_sha,
                }
            )

    def check_run(
        self, repo: str, sha: str, *, name: str, status: str, conclusion: str | None = None
    ) -> None:
        """A check run on `sha` (replacing one of the same name): queued, in_progress or completed."""
        with self._lock:
            runs = [r for r in self._check_runs.get((repo, sha), []) if r["name"] != name]
            runs.append(
                {
                    "id": len(runs) + 1,
                    "name": name,
                    "head_sha": sha,
                    "status": status,
                    "conclusion": conclusion,
                }
            )
            self._check_runs[(repo, sha)] = runs

    def status(self, repo: str, sha: str, *, context: str, state: str) -> None:
        """A commit status on `sha`: pending, success, failure or error."""
        with self._lock:
            statuses = [s for s in self._statuses.get((repo, sha), []) if s["context"] != context]
            statuses.append({"id": len(statuses) + 1, "context": context, "state": state})
            self._statuses[(repo, sha)] = statuses

    # -- answering ---------------------------------------------------------------------------------

    def _pull_json(self, pull: _Pull) -> dict[str, Any]:
        owner = pull.repo.split("/")[0]
        return {
            "url": f"https://api.github.com/repos/{pull.repo}/pulls/{pull.number}",
            "html_url": f"{HTML}/{pull.repo}/pull/{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "title": pull.title,
            "merged": pull.merged,
            "merged_at": pull.merged_at,
            "merge_commit_sha": pull.merge_commit_sha or None,
            "head": {"ref": pull.branch, "sha": pull.head_sha, "label": f"{owner}:{pull.branch}"},
            "base": {"ref": "main", "label": f"{owner}:main"},
        }

    def answer(self, method: str, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if method != "GET":
            return 404, {"message": "Not Found"}
        parts = [urllib.parse.unquote(p) for p in path[len(PREFIX) :].strip("/").split("/")]
        if len(parts) < 4 or parts[0] != "repos":
            return 404, {"message": "Not Found"}
        repo = f"{parts[1]}/{parts[2]}"
        rest = parts[3:]
        with self._lock:
            if rest == ["pulls"]:
                pulls = [p for p in self._pulls.values() if p.repo == repo]
                state = query.get("state", "open")
                if state != "all":
                    pulls = [p for p in pulls if p.state == state]
                head = query.get("head", "")
                if head:
                    pulls = [p for p in pulls if f"{repo.split('/')[0]}:{p.branch}" == head]
                pulls.sort(key=lambda p: p.number, reverse=query.get("direction", "desc") == "desc")
                return 200, [self._pull_json(p) for p in pulls[: int(query.get("per_page", "30"))]]
            if rest[0] == "pulls" and len(rest) >= 2 and rest[1].isdigit():
                pull = self._pulls.get((repo, int(rest[1])))
                if pull is None:
                    return 404, {"message": "Not Found"}
                if len(rest) == 2:
                    return 200, self._pull_json(pull)
                if rest[2:] == ["reviews"]:
                    return 200, list(pull.reviews)
            if rest[0] == "commits" and len(rest) == 3:
                sha = rest[1]
                if rest[2] == "check-runs":
                    runs = list(self._check_runs.get((repo, sha), []))
                    return 200, {"total_count": len(runs), "check_runs": runs}
                if rest[2] == "status":
                    statuses = list(self._statuses.get((repo, sha), []))
                    states = {s["state"] for s in statuses}
                    combined = (
                        "failure"
                        if states & {"failure", "error"}
                        else "pending"
                        if "pending" in states or not statuses
                        else "success"
                    )
                    return 200, {
                        "state": combined,
                        "sha": sha,
                        "total_count": len(statuses),
                        "statuses": statuses,
                    }
        return 404, {"message": "Not Found"}


def register(server: Any, github: GitHub) -> None:
    server.add_route(PREFIX, lambda method, path, query, body: github.answer(method, path, query))
