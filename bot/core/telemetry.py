"""What the bot records about itself, as a small interface: services record, a front door exports.

Core never imports a metrics library. A service holds a `Telemetry` (the no-op `NO_TELEMETRY`
unless the assembly gives it another) and calls one method per thing that happened; the Prometheus
exporter in `bot.frontdoor.metrics` implements this interface. Labels are small closed sets
(a subcommand the registry knows, an action's name, an outcome word), never user text.
"""

from __future__ import annotations

from typing import Protocol

#: The actions and subcommands whose duration is `Telemetry.work_seconds`.
TIMED_WORK = frozenset({"snapshot", "check", "diff"})


class Telemetry(Protocol):
    # -- commands, acks and Slack -----------------------------------------------------------
    def command(self, subcommand: str, outcome: str) -> None:
        """One `/upgrade` command ended: outcome ok | usage | denied | refused | error."""

    def ack(self, seconds: float) -> None:
        """One Slack request was acknowledged this long after it arrived."""

    def slack_call(self, method: str, result: str) -> None:
        """One Slack Web API call ended: result `ok`, Slack's error code, or `exception`."""

    def slack_rate_limited(self, waited_seconds: float) -> None:
        """Slack answered 429 and the bot waited this long before trying again."""

    def card_update(self, outcome: str) -> None:
        """A card edit was sent, `coalesced` into a later one, or `dropped` (must stay 0)."""

    # -- watches ------------------------------------------------------------------------------
    def watch_events(self, count: int, lag_seconds: float | None = None) -> None:
        """A watch folded `count` events; `lag_seconds` is how old the newest one was."""

    # -- announcements, actions, leadership ---------------------------------------------------
    def announcement(self, outcome: str) -> None:
        """An announcement was sent, sent late (`delayed`), `skipped`, or `failed` to post."""

    def action(self, kind: str, result: str) -> None:
        """A plan's action (cordon, drain, snapshot, …) ended: ok | failed | error | unavailable."""

    def leadership(self, *, leading: bool, epoch: int) -> None:
        """This replica became (or stopped being) the leader, at this lease epoch."""

    def inbox_set_aside(self, kind: str) -> None:
        """An acknowledged request (`command`, `click`, `choice`) failed too often: a dead letter."""

    def outbox_set_aside(self) -> None:
        """A thread post (an outbox row) Slack refused the same way `POISON_ATTEMPTS` times in a
        row was set aside: a dead letter (`upgrade-bot outbox list`)."""

    def job_set_aside(self, kind: str) -> None:
        """A cluster job (`drain`, `cordon`, …) whose tick failed the same unexpected way
        `POISON_ATTEMPTS` times in a row was interrupted: people decide."""

    # -- runs, gates, jobs ---------------------------------------------------------------------
    def run_started(self) -> None:
        """An upgrade run (or a one-step `/upgrade action` run) was started."""

    def run_ended(self, outcome: str) -> None:
        """A run ended: `completed` or `aborted`."""

    def step_ended(self, outcome: str) -> None:
        """A run's step reached `succeeded`, `failed`, `skipped` or `interrupted`."""

    def gate_waited(self, seconds: float) -> None:
        """A step's gate was passed this long after it opened (time waiting for people)."""

    def gate_escalated(self) -> None:
        """A gate waited past its escalation: the bot reminded the roster (and the coordinator)."""

    def evictions(self, result: str, count: int) -> None:
        """A drain's eviction requests: `evicted`, `gone` (the pod was already gone), `blocked`
        (a disruption budget refused, 429) or `error` (another refusal)."""

    def nodes_drained(self, count: int) -> None:
        """A drain finished this many nodes (every pod that had to go is gone)."""

    def work_seconds(self, kind: str, seconds: float) -> None:
        """A `snapshot`, `check` or `diff` (a command's or a plan step's) took this long."""

    def kube_request(self, verb: str, result: str, seconds: float) -> None:
        """One Kubernetes API request: verb (get, list, watch, create, patch, delete, …), result
        (the HTTP status, or `unreachable`), seconds to the response's headers."""


class NoTelemetry:
    """Records nothing: the default where no exporter is wired (terminal, tests)."""

    def command(self, subcommand: str, outcome: str) -> None:
        pass

    def ack(self, seconds: float) -> None:
        pass

    def slack_call(self, method: str, result: str) -> None:
        pass

    def slack_rate_limited(self, waited_seconds: float) -> None:
        pass

    def card_update(self, outcome: str) -> None:
        pass

    def watch_events(self, count: int, lag_seconds: float | None = None) -> None:
        pass

    def announcement(self, outcome: str) -> None:
        pass

    def action(self, kind: str, result: str) -> None:
        pass

    def leadership(self, *, leading: bool, epoch: int) -> None:
        pass

    def inbox_set_aside(self, kind: str) -> None:
        pass

    def job_set_aside(self, kind: str) -> None:
        pass

    def outbox_set_aside(self) -> None:
        pass

    def run_started(self) -> None:
        pass

    def run_ended(self, outcome: str) -> None:
        pass

    def step_ended(self, outcome: str) -> None:
        pass

    def gate_waited(self, seconds: float) -> None:
        pass

    def gate_escalated(self) -> None:
        pass

    def evictions(self, result: str, count: int) -> None:
        pass

    def nodes_drained(self, count: int) -> None:
        pass

    def work_seconds(self, kind: str, seconds: float) -> None:
        pass

    def kube_request(self, verb: str, result: str, seconds: float) -> None:
        pass


NO_TELEMETRY: Telemetry = NoTelemetry()
