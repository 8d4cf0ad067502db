"""One Slack budget for the whole workspace: waits for room, obeys 429s, retries 5xx, counts.

Slack limits each Web API method per workspace (Tier 3, `chat.update`, is about 50 a minute and
shared by every card the bot edits) and `chat.postMessage` to about one message a second per
channel. `SlackBudget` is the one place that decides when a call of the bot's own gateway is
made and whether it is tried again:

- each call first takes room in its bucket (`chat.update` workspace-wide, posts per channel, other
  methods by their tier), waiting when there is none (bounded by `max_wait`; a call is never
  dropped: past the bound it fails as temporary, and the caller keeps what it owes);
- a 429 blocks its bucket for `Retry-After` and halves the bucket's rate, which recovers step by
  step with each call that passes (additive increase); it is retried, never reported into Slack;
- a 5xx or a dropped connection is retried with exponential backoff — except a call that must
  not be made twice (a post) that was sent and got no answer (`UNKNOWN`): it is returned, and the
  caller looks for the post by its key before it posts again;
- `SlackStats` counts calls by method and result, 429s, retries and the time waited, for the
  metrics exporter to read.

It knows nothing of `slack_sdk` (whose home is `bot.adapters.slack`): the gateway hands it an
attempt that reports an `Outcome`, and the gateway's client has no retry handlers of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: Calls a minute per tier (Slack's documented figures).
TIER_PER_MINUTE = {1: 1.0, 2: 20.0, 3: 50.0, 4: 100.0}
#: The tier of each method the bot calls; unknown methods are treated as Tier 3.
METHOD_TIERS = {
    "chat.update": 3,
    "conversations.history": 3,
    "conversations.replies": 3,
    "conversations.open": 3,
    "usergroups.users.list": 2,
    "users.info": 4,
    "views.open": 4,
    "chat.postEphemeral": 4,
    "chat.getPermalink": 4,
    "auth.test": 4,
    "files.getUploadURLExternal": 4,
    "files.completeUploadExternal": 4,
}
#: How an attempt ended: answered (ok or a Slack error code), rate-limited, or Slack unavailable.
OK, REFUSED, RATE_LIMITED, UNAVAILABLE, NO_BUDGET = "ok", "refused", "429", "unavailable", "no_budget"
#: Sent, but no answer came (a timeout, a dropped connection): never retried here, since Slack may
#: have made the call — a second post would be a second message.
UNKNOWN = "unknown"


@dataclass
class Outcome:
    """What one attempt of a call came to; `label` is the result counted in the stats."""

    kind: str
    value: Any = None
    error: BaseException | None = None
    retry_after: float = 0.0
    label: str = ""


class SlackStats:
    """In-process figures about the bot's Slack calls (thread-safe; read with `snapshot`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.rate_limited = 0
        self.retries = 0
        self.waited: dict[str, float] = {}

    def record(self, method: str, result: str) -> None:
        with self._lock:
            self.calls[(method, result)] += 1
            if result == RATE_LIMITED:
                self.rate_limited += 1

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def wait(self, method: str, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self.waited[method] = self.waited.get(method, 0.0) + seconds

    def count(self, method: str, result: str | None = None) -> int:
        with self._lock:
            return sum(n for (m, r), n in self.calls.items() if m == method and result in (None, r))

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": {f"{m} {r}": n for (m, r), n in sorted(self.calls.items())},
                "rate_limited": self.rate_limited,
                "retries": self.retries,
                "waited_seconds": dict(sorted(self.waited.items())),
            }


@dataclass
class _Bucket:
    """GCRA with reservations: `tat` is when the bucket is next empty; `blocked_until` a 429's end."""

    nominal: float  # calls a second
    burst: int
    rate: float = 0.0
    tat: float = 0.0
    blocked_until: float = 0.0

    def __post_init__(self) -> None:
        self.rate = self.nominal


@dataclass(kw_only=True)
class BudgetConfig:
    updates_per_minute: float = 50.0
    posts_per_second: float = 1.0
    burst: int = 3
    #: The longest a call waits for room (including a Retry-After) before it fails as temporary.
    max_wait: float = 120.0
    #: The longest one call takes with all its waits and retries: well inside the 5 minutes after
    #: which `bot.core.delivery` settles a claim left without a ts (so no post is still in flight).
    max_total: float = 180.0
    rate_limit_retries: int = 6
    server_retries: int = 3
    backoff: float = 0.5
    #: The slowest a bucket gets after 429s, as a share of its nominal rate.
    floor: float = 0.1
    #: How much of the nominal rate each passing call gives back after a slow-down.
    recover: float = 0.05
    tiers: dict[int, float] = field(default_factory=lambda: dict(TIER_PER_MINUTE))


class SlackBudget:
    def __init__(
        self,
        config: BudgetConfig | None = None,
        *,
        stats: SlackStats | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config or BudgetConfig()
        self.stats = stats or SlackStats()
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def bucket_key(self, method: str, channel: str | None) -> str:
        if method == "chat.postMessage":
            return f"{method} {channel or ''}"
        return method

    def rate(self, method: str, channel: str | None = None) -> float:
        """The bucket's current rate (calls a second): below nominal after a 429, until it recovers."""
        with self._lock:
            return self._bucket(method, channel).rate

    def _bucket(self, method: str, channel: str | None) -> _Bucket:
        key = self.bucket_key(method, channel)
        bucket = self._buckets.get(key)
        if bucket is None:
            cfg = self.config
            if method == "chat.postMessage":
                nominal = cfg.posts_per_second
            elif method == "chat.update":
                nominal = cfg.updates_per_minute / 60.0
            else:
                nominal = cfg.tiers.get(METHOD_TIERS.get(method, 3), cfg.tiers[3]) / 60.0
            bucket = self._buckets[key] = _Bucket(nominal=nominal, burst=cfg.burst)
        return bucket

    def _reserve(self, method: str, channel: str | None, bound: float) -> float | None:
        """Take the next slot of the bucket; the seconds to wait for it, None past the bound."""
        with self._lock:
            b = self._bucket(method, channel)
            now = self.clock()
            start = max(now, b.blocked_until)
            interval = 1.0 / b.rate
            tat = max(b.tat, start)
            at = max(start, tat - (b.burst - 1) * interval)
            wait = at - now
            if wait > min(self.config.max_wait, bound - now):
                return None
            b.tat = tat + interval
            return wait

    def _slow_down(self, method: str, channel: str | None, retry_after: float) -> None:
        with self._lock:
            b = self._bucket(method, channel)
            now = self.clock()
            b.blocked_until = max(b.blocked_until, now + max(retry_after, 0.0))
            b.rate = max(b.nominal * self.config.floor, b.rate / 2)
            # Reservations made at the old pace start again after the block.
            b.tat = b.blocked_until

    def _recover(self, method: str, channel: str | None) -> None:
        with self._lock:
            b = self._bucket(method, channel)
            if b.rate < b.nominal:
                b.rate = min(b.nominal, b.rate + b.nominal * self.config.recover)

    def _wait(self, method: str, seconds: float) -> None:
        if seconds > 0:
            self.stats.wait(method, seconds)
            self.sleep(seconds)

    def call(self, method: str, channel: str | None, attempt: Callable[[], Outcome]) -> Outcome:
        """Make the call within the budget, retrying 429s and unavailability; the last outcome."""
        limited = unavailable = 0
        bound = self.clock() + self.config.max_total
        while True:
            wait = self._reserve(method, channel, bound)
            if wait is None:
                log.warning("no Slack budget for %s within %ss", method, self.config.max_wait)
                self.stats.record(method, NO_BUDGET)
                return Outcome(kind=NO_BUDGET, label=NO_BUDGET)
            self._wait(method, wait)
            outcome = attempt()
            self.stats.record(method, outcome.label or outcome.kind)
            if outcome.kind == RATE_LIMITED:
                limited += 1
                self._slow_down(method, channel, outcome.retry_after)
                if limited > self.config.rate_limit_retries:
                    return outcome
                log.info("Slack rate-limited %s; retrying after %ss", method, outcome.retry_after)
                self.stats.retried()
                continue
            if outcome.kind == UNAVAILABLE:
                unavailable += 1
                if unavailable > self.config.server_retries:
                    return outcome
                self.stats.retried()
                self._wait(method, self.config.backoff * 2 ** (unavailable - 1))
                continue
            self._recover(method, channel)
            return outcome
