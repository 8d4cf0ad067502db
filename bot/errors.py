"""The bot's whole error tree, in one place: what went wrong decides what the user sees and
whether anything is retried.

    BotError                        base; never shown raw in chat
    ├── UserError                   the user's mistake: shown as a short, specific reason (ephemeral)
    │   ├── UsageError              bad arguments or an unknown subcommand; carries usage text
    │   ├── PermissionDenied        the user lacks the role the action needs
    │   ├── PlanInvalid             a plan that does not validate; every problem, one line each
    │   ├── TransitionRefused       a step or run change the state machine does not allow now
    │   ├── RunNotFound             no such run, or no single live run to act on
    │   └── NoSource                the cluster names no Alertmanager/Prometheus (bot.core.jobs.nosource):
    │                               an evidence step asks people to confirm by eye instead
    ├── ConfigError                 the configuration file or environment is wrong (exit status 2)
    │   ├── StoreUnreachable        the database did not accept a connection (exit status 1)
    │   └── PatternError            a rule pattern RE2 refuses (bot.core.rules.patterns; the rules
    │                               loader adds the file, line and key)
    ├── TemporaryError              worth retrying later (rate limits, timeouts, lost races)
    │   ├── ConcurrentUpdate        another writer committed the run first; re-read and decide again
    │   ├── SlackOutcomeUnknown     a post sent without an answer: look for it before posting again
    │   └── DatabaseUnwritable      the database answers but cannot write (disk full, read-only,
    │                               I/O error): retried, but only an operator mends it
    ├── PermanentError              stop and report (a bug, a refused write, corrupted state)
    │   └── TemplateError           a template failed to load or render (names template and line)
    ├── Fenced                      this replica's lease epoch is stale: a duty's write refused, it stops
    │   └── LeaseLapsed             its lease has too little time left for a call outside (Slack, Kubernetes, AWS)
    ├── SlackCallFailed             a Slack Web API call answered `ok: false` (Slack's error code)
    ├── EvidenceUnavailable         Alertmanager or Prometheus gave no trustworthy answer: the
    │                               evidence gate's Inconclusive, never a pass
    └── ClusterError                a Kubernetes API call failed; wraps the client's exception
        ├── ClusterUnreachable      the API server did not answer within the timeout
        ├── ClusterForbidden        403: RBAC does not allow it (by design or a missing rule)
        ├── RolloutRefused          a rollout restart kubectl would refuse too (paused Deployment)
        └── (also TemporaryError: retry, or list again, later)
            ├── ContinueExpired     410 on a continue token: restart the list
            ├── WatchExpired        410 in a watch: list again, then watch from the new version
            └── EvictionBlocked     429: a PodDisruptionBudget allows no disruption now

Chat shows only `user_message` and a correlation id; the log has the detail under the same id.
The simulator (`bot.sim`) is a separate subsystem with its own small tree in `bot.sim`.
The front doors' own refusals never reach a command: `Refused` (the HTTP guard's 4xx), `SslCheck`
(Slack's certificate check, answered 200 by the guard) and `MalformedPayload` (`bot.frontdoor.payloads`: a body not of a shape Slack sends — a 400, or a
Socket Mode envelope acked and dropped).
The safe file reader's own (`bot.files`, a leaf): `Unreadable` and its `NotRegular` (a FIFO, a
device, a directory) and `TooLarge`; each caller turns it into a ConfigError naming the file.
The OCI registry client's own (`bot.adapters.registry`): `RegistryUnreachable` (a registry or its
token service that could not be asked), never raised past the client: it answers "unreachable",
which IMG001 reports as "could not verify".
The evidence gate's condition language (`bot.core.evidence.conditions`, a leaf): `ConditionError`
(a condition that does not parse, uses what conditions do not have, or cannot be decided); an
analysis counts it as an Error measurement, never a pass.
The provider port's (`bot.core.providers`; each cloud's adapter under `bot.adapters.providers`):
`ProviderUnavailable` (the cloud's SDK extra is not installed) and `ProviderError` (a cloud call
failed: refused, unreachable, no credentials; with the cloud's error code and HTTP status when it
answered). EKS's are `AwsUnavailable` and `AwsError`; AKS's `AzureUnavailable` and `AzureError`
(ARM's subcode as its code when it gives one); GKE's `GcpUnavailable` and `GcpError` (Google's
status name, `FAILED_PRECONDITION`, as its code). The checks turn either into a note of the
check's report, never into a failed command; the jobs into a short reason or a retry. The cloud
jobs' `ReadinessBlock` (`bot.core.jobs.cloud`: EKS's UpdateClusterVersion refused over upgrade
insights, AKS's upgrade refused over deprecated-API usage) never leaves the job that raised it: it
becomes a question for people.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

#: How much of a user's own word an error message repeats back (a 100 KB "subcommand" is not).
SHOWN = 60


def valid_text(text: str) -> str:
    """`text` with lone surrogates replaced: a forged payload or a terminal's invalid UTF-8 carries
    them, and no log handler, database or Slack call accepts them."""
    return text.encode("utf-8", "replace").decode("utf-8")


def clip(text: str, limit: int = SHOWN) -> str:
    """What a message may repeat of the user's input: at most `limit` characters, valid UTF-8."""
    text = valid_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Poison work: a piece of work (an inbox item, a job's tick) that failed this many times, not
#: temporarily, is set aside (a dead letter, an interrupted job) instead of being tried again.
POISON_ATTEMPTS = 3


def describe(exc: BaseException) -> str:
    """One line: the exception, its message (clipped) and where it was raised (file:line)."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        where = f" at {Path(last.filename).name}:{last.lineno} in {last.name}"
    message = exc.user_message if isinstance(exc, BotError) else str(exc)
    return f"{type(exc).__name__}: {clip(message, 200)}{where}"


#: Where `describe` says an exception was raised (" at slack.py:190 in _call"): the log's.
_RAISED_AT = re.compile(r" at [\w.-]+\.py:\d+ in [\w<>.]+$")


def described(failure: str) -> tuple[str, str]:
    """A failure `describe` wrote, as people may read it: (the error's kind, its words). The
    words are a bot error's own message, without where it was raised; any other exception is a
    bug, whose text is Python's ("'NoneType' object has no attribute …"), so its words are
    "an unexpected error" and the log keeps the rest. Text `describe` did not write (a reason of
    the bot's own, "the bot stopped") is its own words, of no kind."""
    kind, sep, message = failure.partition(": ")
    if not (sep and kind.isidentifier()):
        return "", failure
    known = globals().get(kind)
    if not (isinstance(known, type) and issubclass(known, BotError)):
        return kind, "an unexpected error (a bug: the log has its detail)"
    return kind, _RAISED_AT.sub("", message)


class BotError(Exception):
    """Base of every error the bot raises on purpose."""

    #: What a person may read in chat. Subclasses override it with something specific.
    user_message: str = "something went wrong"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.user_message)
        if message is not None:
            self.user_message = message


class UserError(BotError):
    """The request cannot be done as asked; the message tells the user why."""


class UsageError(UserError):
    """Arguments that do not parse, or a subcommand that does not exist."""

    def __init__(self, message: str, *, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class PermissionDenied(UserError):
    """The user holds none of the roles the action requires."""


class PlanInvalid(UserError):
    """A plan that does not validate; `errors` lists every problem, one line each."""

    def __init__(self, errors: list[str]) -> None:
        head = f"the plan has {len(errors)} problem(s):"
        super().__init__("\n".join([head, *(f"• {e}" for e in errors)]))
        self.errors = errors


class TransitionRefused(UserError):
    """A transition the state machine does not allow; the message says why, for chat."""


class RunNotFound(UserError):
    """No run by that id, or no single active run when none was named."""


class ConfigError(BotError):
    """The configuration file or the environment is invalid; startup stops with status 2.

    `problems` holds every problem a validator found, each naming its file, line and key (the
    message shows the first and how many more); a checker such as `rules check` lists them all.
    """

    def __init__(self, message: str | None = None, *, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = problems or (self.user_message,)


class StoreUnreachable(ConfigError):
    """The database named by `database_url` did not accept a connection. Said like a configuration
    problem (it names the key), but the terminal's status is 1, could not do it: a server that is
    down is not a usage error, and the same command may work once it is back."""


class TemporaryError(BotError):
    """A failure that may pass (rate limit, timeout); callers retry with back-off."""

    user_message = "a temporary failure; please try again in a minute"


class SlackOutcomeUnknown(TemporaryError):
    """A post got no answer after it was sent (a timeout, a dropped connection): Slack may have
    made it. It is never sent again blindly — the caller looks for it by its key first."""

    user_message = "Slack did not answer a post in time"


class DatabaseUnwritable(TemporaryError):
    """The database answers but cannot write: its disk is full, its file or folder is read-only,
    its disk failed. Work is retried as for any temporary failure, but waiting alone does not mend
    it: people are told to call whoever runs the bot, not to try again in a minute."""

    user_message = "the database cannot write"


class PermanentError(BotError):
    """A failure that will not pass by retrying; the operation stops and is reported."""


class TemplateError(PermanentError):
    """A template failed to load or render; the message names the template, line and cause."""


class ConcurrentUpdate(TemporaryError):
    """Someone else changed the run between our read and our write; re-read and decide again."""

    user_message = "someone else changed this run at the same moment; look at the card and try again"


class Fenced(BotError):
    """A leader-only duty tried to write with an epoch that is no longer the lease's: another
    replica leads now (this one was paused, partitioned or shut down). Nothing was written; the
    duty stops and this replica steps down. Never retried here."""

    user_message = "this replica no longer leads; another one carries on"


class LeaseLapsed(Fenced):
    """This replica's lease (measured on its own monotonic clock since its last renewal) has too
    little time left for the call about to be made, or ran out since the work was reserved: another
    replica may have taken the work over, so nothing is sent (`bot.core.tenure`)."""

    user_message = "this replica's lease ran out; another replica carries on"


class SlackCallFailed(BotError):
    """A Web API call answered `ok: false`; `code` is Slack's error string."""

    def __init__(self, method: str, code: str, message: str | None = None) -> None:
        super().__init__(message or f"Slack refused {method}: {code}")
        self.method = method
        self.code = code


class EvidenceUnavailable(BotError):
    """No trustworthy answer from Alertmanager or Prometheus (unreachable, 401/403, malformed, an
    empty result, a refused query); `reason` is short and for people (the gate's Inconclusive)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProviderUnavailable(Exception):
    """A cloud provider's API cannot be read at all (its SDK extra is missing); the reason is for people."""


class ProviderError(Exception):
    """A cloud provider's call failed (refused, unreachable, no credentials); the message is the SDK's.

    `code` is the cloud's error code (`InvalidParameterException`, `FAILED_PRECONDITION` …) and
    `status` its HTTP status when the cloud answered; both empty/0 when it did not (a connection
    error, no credentials), which is worth trying again."""

    def __init__(self, message: str, *, code: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class ClusterError(BotError):
    """A Kubernetes API call failed. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, cluster: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.cluster = cluster
        self.status = status


class ClusterUnreachable(ClusterError):
    """The API server did not answer (DNS, refused connection, timeout)."""


class ClusterForbidden(ClusterError):
    """403: the bot's ServiceAccount may not do this (by design, or RBAC is missing a rule)."""


class RolloutRefused(ClusterError):
    """A rollout restart kubectl would also refuse (a paused Deployment)."""


class ContinueExpired(ClusterError, TemporaryError):
    """410 Expired on a continue token: the list took longer than the server keeps its snapshot."""


class WatchExpired(ClusterError, TemporaryError):
    """410 in a watch's ERROR event: the resourceVersion is older than the server's history."""


class EvictionBlocked(ClusterError, TemporaryError):
    """429 on an eviction: a PodDisruptionBudget allows no disruption now. Retry later, as kubectl
    does every 5 s; `retry_after` is the server's hint in seconds when it gave one."""

    def __init__(self, message: str, *, cluster: str = "", retry_after: float | None = None) -> None:
        super().__init__(message, cluster=cluster, status=429)
        self.retry_after = retry_after
