"""A GitHub REST facade on the sim's port, under `/github` (issue 43): what the bot's real githubkit
client asks of a pull request, answered in GitHub's shapes from PRs a test or scenario states.

Served (the documented REST calls, fields as GitHub writes them, the ones a client reads):

    GET /github/repos/{owner}/{repo}/pulls?state=&head=&sort=&direction=&per_page=
    GET /github/repos/{owner}/{repo}/pulls/{number}
    GET /github/repos/{owner}/{repo}/pulls/{number}/reviews
    GET /github/repos/{owner}/{repo}/commits/{ref}/check-runs
    GET /github/repos/{owner}/{repo}/commits/{ref}/status

    POST /github/app/installations/{installation_id}/access_tokens

A token is not checked until a test installs a GitHub App (`install_app`: its id, installation id
and public key): from then on the token endpoint wants the App's JWT (RS256, signed with the
private key whose public half was given, `iss` the App's id, not expired), as GitHub does, and
answers a 401 with GitHub's message otherwise; and the reads want `token <installation token>`
the endpoint issued (401 "Bad credentials" otherwise). State is changed through `GitHub`'s methods
(`open_pull`, `merge`, `review`, `check_run`, `status`, `install_app`), thread-safe, from tests
and rehearsals in the same process.
"""

from __future__ import annotations

import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

PREFIX = "/github"
HTML = "https://github.com"
#: How long an installation token lives (GitHub's: one hour).
TOKEN_SECONDS = 3600
DOCS = "https://docs.github.com/rest"


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
        #: Installed Apps: installation id → (App id, its public key, PEM).
        self._apps: dict[int, tuple[str, str]] = {}
        #: Installation tokens issued → when each expires (epoch seconds).
        self._tokens: dict[str, float] = {}
        #: How many installation tokens were issued (a test sees githubkit reuse its token).
        self.tokens_issued = 0

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

    def install_app(self, app_id: str | int, installation_id: int, *, public_key: str) -> None:
        """A GitHub App installed on the repositories: `public_key` (PEM) checks its JWTs."""
        with self._lock:
            self._apps[int(installation_id)] = (str(app_id), public_key)

    # -- answering ---------------------------------------------------------------------------------

    def _access_token(self, installation: int, authorization: str) -> tuple[int, Any]:
        """GitHub's answer to an App asking for an installation token with its JWT."""
        import jwt  # PyJWT[crypto]: the `github` extra, as githubkit's App auth needs it

        app = self._apps.get(installation)
        if app is None:
            return 404, {"message": "Not Found", "documentation_url": DOCS}
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return 401, {"message": "A JSON web token could not be decoded", "documentation_url": DOCS}
        app_id, public_key = app
        try:
            claims = jwt.decode(
                token,
                public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=60,
            )
        except jwt.ExpiredSignatureError:
            return 401, {
                "message": "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
                "documentation_url": DOCS,
            }
        except jwt.PyJWTError:
            return 401, {"message": "A JSON web token could not be decoded", "documentation_url": DOCS}
        if str(claims.get("iss")) != app_id:
            return 401, {"message": "Integration not found", "documentation_url": DOCS}
        issued = f"ghs_{secrets.token_hex(18)}"
        expires = time.time() + TOKEN_SECONDS
        self._tokens[issued] = expires
        self.tokens_issued += 1
        return 201, {
            "token": issued,
            "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            "permissions": {"pull_requests": "read", "checks": "read", "statuses": "read"},
            "repository_selection": "all",
        }

    def _authorized(self, authorization: str) -> bool:
        """Without an installed App, any token (a PAT is not checked); with one, its tokens only."""
        if not self._apps:
            return True
        scheme, _, token = authorization.partition(" ")
        return scheme.lower() == "token" and self._tokens.get(token, 0.0) > time.time()

    def answer_with(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = [urllib.parse.unquote(p) for p in path[len(PREFIX) :].strip("/").split("/")]
        authorization = query.get("?authorization", "")
        if (
            method == "POST"
            and len(parts) == 4
            and parts[:2] == ["app", "installations"]
            and parts[3] == "access_tokens"
            and parts[2].isdigit()
        ):
            with self._lock:
                return self._access_token(int(parts[2]), authorization)
        with self._lock:
            allowed = self._authorized(authorization)
        if not allowed:
            return 401, {"message": "Bad credentials", "documentation_url": DOCS}
        return self.answer(method, path, query)

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
    server.add_route(PREFIX, github.answer_with)
