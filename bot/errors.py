"""The bot's error tree: what went wrong decides what the user sees and whether we retry.

    BotError                      base; never shown raw in chat
    ├── UserError                 the user can fix it: shown as a short, specific reason (ephemeral)
    │   ├── UsageError            bad arguments or unknown subcommand; carries usage text
    │   └── PermissionDenied      the user lacks the role the action needs
    ├── ConfigError               the configuration file or environment is wrong (exit status 2)
    ├── TemporaryError            worth retrying later (rate limits, timeouts, connection resets)
    ├── PermanentError            stop and report (a bug, a refused write, corrupted state)
    └── ClusterError              a Kubernetes API call failed; wraps the client's exception
        └── ClusterUnreachable    the API server could not be reached within the timeout

Chat shows only `user_message` and a correlation id; the log has the detail under the same id.
"""

from __future__ import annotations


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


class ConfigError(BotError):
    """The configuration file or the environment is invalid; startup stops with status 2."""


class TemporaryError(BotError):
    """A failure that may pass (rate limit, timeout); callers retry with back-off."""

    user_message = "a temporary failure; please try again in a minute"


class PermanentError(BotError):
    """A failure that will not pass by retrying; the operation stops and is reported."""


class ClusterError(BotError):
    """A Kubernetes API call failed. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, cluster: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.cluster = cluster
        self.status = status


class ClusterUnreachable(ClusterError):
    """The API server did not answer (DNS, refused connection, timeout)."""
