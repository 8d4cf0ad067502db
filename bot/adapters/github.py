"""GitHub behind the `PullRequests` port (issue 43), through `githubkit` (the `github` extra).

githubkit is imported when the adapter is built, which only happens when `github:` is configured:
a bot without it never loads githubkit or its schema models (`python -X importtime` shows it).
The answers are read as GitHub's JSON (`Response.json()`), the fields the port needs and no more,
rather than through githubkit's full models: a PR's model validates dozens of fields the bot
never shows.

Four documented calls make a PR's view: `GET /repos/{owner}/{repo}/pulls/{number}` (or the list,
for a branch or a title pattern), its reviews, the check runs and the combined commit status of
its head. The card's view is kept for `CACHE_SECONDS`; a gate and a done click read afresh.

Auth: a token, or a GitHub App through githubkit's own `AppInstallationAuthStrategy` (app id,
installation id, private key): githubkit signs a JWT with the key, trades it at
`POST /app/installations/{id}/access_tokens` for an installation token, and renews it before it
expires. A refused trade (a wrong key, app or installation) is one short reason that names the App
and the installation — never the key, the JWT or a traceback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import re2

from bot.errors import TemporaryError
from bot.records import Check, GitHubAccess, PrRef, PullRequest

log = logging.getLogger(__name__)

#: How long a PR's view is reused for the card (drawn after every change of a run, a few times in
#: a second when builds come in) before GitHub is asked again; a gate and a done click read afresh.
CACHE_SECONDS = 5.0
#: How many PRs a branch or a title pattern is looked for among (newest first).
LIST_LIMIT = 100
DEFAULT_API_URL = "https://api.github.com"


class GitHubPullRequests:
    """Reads PRs from GitHub's REST API (or GitHub Enterprise's, or the sim's facade, by `api_url`)."""

    def __init__(
        self,
        access: GitHubAccess | None = None,
        *,
        token: str = "",
        api_url: str = DEFAULT_API_URL,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        access = access or GitHubAccess(api_url=api_url, token=token)
        try:
            from githubkit import AppInstallationAuthStrategy, GitHub
            from githubkit.cache import MemCacheStrategy
        except ImportError as exc:  # the extra is not installed
            raise TemporaryError(
                "GitHub access needs the `github` extra (pip install 'upgrade-bot[github]')"
            ) from exc
        auth: Any = access.token
        #: Who the bot is at GitHub, for the reasons it gives (an App's ids, never a secret).
        self.who = "the token"
        if access.app:
            auth = AppInstallationAuthStrategy(
                app_id=access.app_id, private_key=access.private_key, installation_id=access.installation_id
            )
            self.who = f"GitHub App {access.app_id} (installation {access.installation_id})"
        self._github: Any = GitHub(
            auth,
            base_url=access.api_url.rstrip("/") + "/",
            timeout=timeout,
            http_cache=False,
            auto_retry=False,
            user_agent="upgrade-bot",
            # Its own cache of the App's JWT and installation token: githubkit's default is one
            # per process, keyed by the App's id alone, so a second client with another key
            # would be handed the first one's token.
            cache_strategy=MemCacheStrategy(),
        )
        self.clock = clock
        self._cache: dict[PrRef, tuple[float, PullRequest | None]] = {}
        self._lock = threading.Lock()

    def find(self, ref: PrRef, *, fresh: bool = False) -> PullRequest | None:
        now = self.clock()
        with self._lock:
            kept = self._cache.get(ref)
        if kept is not None and not fresh and now - kept[0] < CACHE_SECONDS:
            return kept[1]
        pr = self._read(ref)
        with self._lock:
            self._cache[ref] = (now, pr)
        return pr

    def _read(self, ref: PrRef) -> PullRequest | None:
        owner, repo = ref.repo.split("/", 1)
        rest = self._github.rest
        number = ref.number
        if number is None:
            number = self._number(owner, repo, ref)
            if number is None:
                return None
        pull = self._call(f"{ref.repo}#{number}", lambda: rest.pulls.get(owner, repo, number))
        if pull is None:
            return None
        head = str((pull.get("head") or {}).get("sha") or "")
        reviews = (
            self._call("its reviews", lambda: rest.pulls.list_reviews(owner, repo, number, per_page=100))
            or []
        )
        runs = (
            self._call("its check runs", lambda: rest.checks.list_for_ref(owner, repo, head, per_page=100))
            or {}
        )
        status = (
            self._call(
                "its commit status",
                lambda: rest.repos.get_combined_status_for_ref(owner, repo, head, per_page=100),
            )
            or {}
        )
        checks = [
            Check(
                name=str(r.get("name", "")),
                status=str(r.get("status", "")),
                conclusion=str(r.get("conclusion") or ""),
            )
            for r in runs.get("check_runs", [])
        ]
        for s in status.get("statuses", []):
            state = str(s.get("state", ""))
            # A commit status is pending, or ended as success, failure or error.
            checks.append(
                Check(
                    name=str(s.get("context", "")),
                    status="in_progress" if state == "pending" else "completed",
                    conclusion="" if state == "pending" else ("success" if state == "success" else "failure"),
                )
            )
        latest: dict[str, str] = {}
        for review in reviews:
            # Each person's latest review that decides something (a comment does not).
            state = str(review.get("state", ""))
            if state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
                latest[str((review.get("user") or {}).get("login", ""))] = state
        merged = bool(pull.get("merged")) or bool(pull.get("merged_at"))
        return PullRequest(
            repo=ref.repo,
            number=int(pull.get("number") or number),
            title=str(pull.get("title", "")),
            url=str(pull.get("html_url", "")),
            state="merged" if merged else str(pull.get("state", "open")),
            head_sha=head,
            merge_commit=str(pull.get("merge_commit_sha") or "") if merged else "",
            checks=tuple(checks),
            approvals=tuple(sorted(u for u, s in latest.items() if s == "APPROVED")),
            changes_requested=tuple(sorted(u for u, s in latest.items() if s == "CHANGES_REQUESTED")),
        )

    def _number(self, owner: str, repo: str, ref: PrRef) -> int | None:
        """The newest PR of `ref`'s branch, or whose title matches its pattern."""
        rest = self._github.rest
        if ref.branch:
            pulls = self._call(
                f"{ref.repo}'s PRs",
                lambda: rest.pulls.list(
                    owner, repo, state="all", head=f"{owner}:{ref.branch}", per_page=LIST_LIMIT
                ),
            )
            found = [p for p in pulls or [] if (p.get("head") or {}).get("ref") == ref.branch]
        else:
            # Checked by RE2 when the plan was loaded (`bot.core.runs.plans`); titles are short.
            pattern = re2.compile(ref.match)
            pulls = self._call(
                f"{ref.repo}'s PRs",
                lambda: rest.pulls.list(
                    owner, repo, state="all", sort="created", direction="desc", per_page=LIST_LIMIT
                ),
            )
            found = [p for p in pulls or [] if pattern.search(str(p.get("title", ""))[:1000])]
        if not found:
            return None
        return int(max(found, key=lambda p: int(p.get("number", 0))).get("number", 0)) or None

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        """GitHub's JSON for one call; None for a 404; TemporaryError, with a short reason, otherwise."""
        from githubkit.exception import GitHubException, RequestError, RequestFailed

        try:
            return call().json()
        except RequestFailed as exc:
            return self._failed(what, exc)
        except GitHubException as exc:
            # The App's token trade happens inside githubkit's auth flow, whose errors come
            # wrapped: a refused trade, or a key the JWT could not be signed with.
            inner = exc.exc if isinstance(exc, RequestError) else None
            if isinstance(inner, RequestFailed):
                return self._failed(what, inner)
            if self.who != "the token" and _unsignable(inner):
                log.warning("%s: no JWT could be signed with its key (%s)", self.who, type(inner).__name__)
                raise TemporaryError(
                    f"{self.who}: its private key cannot sign a JWT (check github.private_key_file)"
                ) from None
            log.warning("GitHub could not be asked for %s: %s", what, exc)
            raise TemporaryError(f"GitHub could not be asked for {what}") from exc

    def _failed(self, what: str, exc: Any) -> None:
        """A GitHub error answer: None for a 404, else TemporaryError with a short reason."""
        code = exc.response.status_code
        if str(exc.request.url.path).endswith("/access_tokens"):
            # The App's JWT was refused: GitHub's message says why (never the JWT itself).
            message = _message(exc.response)
            log.warning("GitHub refused %s an installation token: %s %s", self.who, code, message)
            raise TemporaryError(
                f"GitHub refused {self.who} an installation token ({code}: {message}): check "
                "github.app_id, installation_id and private_key_file"
            ) from None
        if code == 404:
            return None
        log.warning("GitHub answered %s for %s", code, what)
        if code == 401:
            raise TemporaryError(f"GitHub did not accept {self.who} (401) for {what}") from None
        raise TemporaryError(f"GitHub answered {code} for {what}") from exc


def _message(response: Any) -> str:
    """GitHub's error message, short (its JSON's `message`)."""
    try:
        body = response.json()
    except ValueError:
        return "no message"
    return str(body.get("message", "no message"))[:200] if isinstance(body, dict) else "no message"


def _unsignable(exc: BaseException | None) -> bool:
    """PyJWT's (or cryptography's, through it) refusal of the App's private key."""
    import jwt  # PyJWT[crypto]: the `github` extra, as githubkit's App auth needs it

    return isinstance(exc, jwt.PyJWTError | ValueError)
