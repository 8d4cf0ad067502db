"""Prometheus metrics: the one module that imports `prometheus_client`, and the `/metrics` route.

`Metrics` implements core's `Telemetry` interface (`bot.core.telemetry`): services and adapters
record through it without knowing Prometheus. Each process has its own `CollectorRegistry` (not
the library's global one), so tests can build several bots in one interpreter.

Served at `/metrics` on the `--http` server (`MetricsRoute` wraps the front door, and also times
`/slack/events` requests: an HTTP request's response *is* Slack's ack), and on the probes' own
port of `--health-port` (`bot.frontdoor.probes`, beside `/healthz` and `/readyz`: `route` fits
its router of GET paths to functions returning (status line, body)); Socket Mode's acks are
timed by its handler (`bot.frontdoor.socket_mode`).

Recorded: commands, HTTP acks, Slack calls and rate limiting, card edits, watch events,
announcements, actions, leadership, dead letters, the workers' queue depth (read at scrape time);
runs started and ended by outcome, steps by outcome, the time people took to pass a gate and the
gates that waited past their escalation, drains' evictions by result and drained nodes, snapshot,
check and diff durations, Kubernetes API requests by verb and result with their latency, and
`upgrade_bot_build_info{version}`. What is happening now (`bind_now`, read from the database at
each scrape, `bot.core.gauges`): runs in progress by state, open gates and the oldest one's wait,
nodes held cordoned, cluster jobs running by kind; with `upgrade_bot_leader`. The per-counter `_created` series are turned off (one more
series per counter that no dashboard reads).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot import __version__
from bot.frontdoor.wsgi import plain

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIEnvironment

    from bot.core.gauges import Now
    from bot.core.telemetry import Telemetry

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
#: Slack's ack budget is 3 s: the buckets are finest where a healthy bot lives, and one past it.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
#: People answer a gate in seconds (a rehearsal) to hours (a window waiting for the shadow).
GATE_WAIT_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)
#: A snapshot, check or diff: a second on a small cluster, minutes at 150,000 pods.
WORK_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: The API server answers in milliseconds; a list of every pod in a large cluster takes seconds.
KUBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# `_created` (the time each labelled counter was first seen) doubles the series of every counter
# and nothing reads it; for every registry of this process.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    """The bot's metrics in one registry; implements `bot.core.telemetry.Telemetry`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._slack_metrics(r)
        self._activity_metrics(r)
        self._leader_metrics(r)
        self._dead_letter_metrics(r)
        self._run_metrics(r)
        self._cluster_metrics(r)
        self._fixed_series(r)
        self._leading = False
        self._lock = threading.Lock()

    def _slack_metrics(self, r: CollectorRegistry) -> None:
        """The front door and Slack: commands, acks, Web API calls, rate limits, card edits."""
        self.commands = Counter(
            "upgrade_bot_commands",
            "/upgrade commands by subcommand and outcome (ok, usage, denied, refused, error)",
            ["subcommand", "outcome"],
            registry=r,
        )
        self.ack_seconds = Histogram(
            "upgrade_bot_ack_seconds",
            "Time from a Slack request's arrival to its acknowledgement",
            buckets=ACK_BUCKETS,
            registry=r,
        )
        self.slack_calls = Counter(
            "upgrade_bot_slack_calls",
            "Slack Web API calls by method and result (ok, Slack's error code, or exception)",
            ["method", "result"],
            registry=r,
        )
        self.slack_rate_limited_total = Counter(
            "upgrade_bot_slack_rate_limited", "Slack answers of 429 (rate limited)", registry=r
        )
        self.slack_rate_limit_wait = Counter(
            "upgrade_bot_slack_rate_limit_wait_seconds",
            "Time spent waiting for Slack's Retry-After",
            registry=r,
        )
        self.card_updates = Counter(
            "upgrade_bot_card_updates",
            "Card edits by outcome: sent, coalesced into a later edit, dropped (must stay 0)",
            ["outcome"],
            registry=r,
        )

    def _activity_metrics(self, r: CollectorRegistry) -> None:
        """Watch events, announcements and plan actions."""
        self.watch_events_total = Counter(
            "upgrade_bot_watch_events", "Watch events folded (rate() gives events per second)", registry=r
        )
        self.watch_lag = Gauge(
            "upgrade_bot_watch_lag_seconds",
            "Age of the newest watch event when it was folded (last seen)",
            registry=r,
        )
        self.announcements = Counter(
            "upgrade_bot_announcements",
            "Announcements by outcome: sent, delayed (sent late), skipped, failed",
            ["outcome"],
            registry=r,
        )
        self.actions = Counter(
            "upgrade_bot_actions", "Plan actions by kind and result", ["kind", "result"], registry=r
        )

    def _leader_metrics(self, r: CollectorRegistry) -> None:
        """The lease: who leads, its epoch, and how often it changed hands."""
        self.leader = Gauge("upgrade_bot_leader", "1 while this replica holds the lease", registry=r)
        self.leader_epoch = Gauge(
            "upgrade_bot_leader_epoch",
            "The lease epoch (fencing token) last seen by this replica",
            registry=r,
        )
        self.leader_changes = Counter(
            "upgrade_bot_leader_changes", "Times this replica became or stopped being the leader", registry=r
        )

    def _dead_letter_metrics(self, r: CollectorRegistry) -> None:
        """What was set aside after failing every attempt, and the workers' queue."""
        self.inbox_dead = Counter(
            "upgrade_bot_inbox_set_aside",
            "Acknowledged requests set aside as dead letters after failing every attempt, by kind",
            ["kind"],
            registry=r,
        )
        self.outbox_dead = Counter(
            "upgrade_bot_outbox_set_aside",
            "Thread posts set aside as dead letters after Slack refused them the same way every attempt",
            registry=r,
        )
        self.jobs_dead = Counter(
            "upgrade_bot_jobs_set_aside",
            "Cluster jobs interrupted after their tick failed the same unexpected way every attempt, by kind",
            ["kind"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "upgrade_bot_worker_queue_depth",
            "Commands and clicks queued or running on the workers",
            registry=r,
        )

    def _run_metrics(self, r: CollectorRegistry) -> None:
        """Runs, steps and gates."""
        self.runs_started = Counter(
            "upgrade_bot_runs_started", "Upgrade runs started (one-step action runs included)", registry=r
        )
        self.runs_ended = Counter(
            "upgrade_bot_runs_ended", "Runs ended, by outcome: completed, aborted", ["outcome"], registry=r
        )
        self.steps = Counter(
            "upgrade_bot_steps",
            "Run steps ended, by outcome: succeeded, failed, skipped, interrupted",
            ["outcome"],
            registry=r,
        )
        self.gate_wait = Histogram(
            "upgrade_bot_gate_wait_seconds",
            "Time from a gate's opening to the approval that passed it (waiting for people)",
            buckets=GATE_WAIT_BUCKETS,
            registry=r,
        )
        self.gate_escalations = Counter(
            "upgrade_bot_gate_escalations",
            "Gates that waited past their escalation (the roster and the coordinator reminded)",
            registry=r,
        )

    def _cluster_metrics(self, r: CollectorRegistry) -> None:
        """Drains, timed work, and the Kubernetes API requests."""
        self.evictions_total = Counter(
            "upgrade_bot_evictions",
            "Drain eviction requests by result: evicted, gone, blocked (a disruption budget), error",
            ["result"],
            registry=r,
        )
        self.nodes_drained_total = Counter(
            "upgrade_bot_nodes_drained",
            "Nodes a drain finished (every pod that had to go is gone)",
            registry=r,
        )
        self.work = Histogram(
            "upgrade_bot_work_duration_seconds",
            "Duration of snapshots, checks and diffs (commands and plan steps), by kind",
            ["kind"],
            buckets=WORK_BUCKETS,
            registry=r,
        )
        self.kube_requests = Counter(
            "upgrade_bot_kube_requests",
            "Kubernetes API requests by verb and result (HTTP status, or unreachable)",
            ["verb", "result"],
            registry=r,
        )
        self.kube_latency = Histogram(
            "upgrade_bot_kube_request_duration_seconds",
            "Time from a Kubernetes API request to its response's headers, by verb",
            ["verb"],
            buckets=KUBE_BUCKETS,
            registry=r,
        )

    def _fixed_series(self, r: CollectorRegistry) -> None:
        """The build info, and the series that must read 0 rather than be absent before the first event."""
        self.build_info = Gauge(
            "upgrade_bot_build_info", "Always 1; the running version as a label", ["version"], registry=r
        )
        self.build_info.labels(version=__version__).set(1)
        for outcome in ("completed", "aborted"):
            self.runs_ended.labels(outcome=outcome)
        for outcome in ("succeeded", "failed", "skipped", "interrupted"):
            self.steps.labels(outcome=outcome)
        for result in ("evicted", "gone", "blocked", "error"):
            self.evictions_total.labels(result=result)
        for outcome in ("sent", "coalesced", "dropped"):
            self.card_updates.labels(outcome=outcome)
        for outcome in ("sent", "delayed", "skipped", "failed"):
            self.announcements.labels(outcome=outcome)
        for kind in ("command", "click", "choice"):
            self.inbox_dead.labels(kind=kind)
        for kind in ("cordon", "uncordon", "drain", "restart", "wait-nodegroup"):
            self.jobs_dead.labels(kind=kind)

    # -- exposition ---------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    def bind_queue_depth(self, read: Callable[[], int]) -> None:
        """Read the workers' depth at each scrape (`WorkerPool.depth`)."""
        self.queue_depth.set_function(lambda: float(read()))

    def bind_now(self, read: Callable[[], Now]) -> None:
        """Export what is happening now (`bot.core.gauges.read_now`), read at each scrape."""
        self.registry.register(_NowCollector(read))

    # -- Telemetry ----------------------------------------------------------------------------

    def command(self, subcommand: str, outcome: str) -> None:
        self.commands.labels(subcommand=subcommand or "help", outcome=outcome).inc()

    def ack(self, seconds: float) -> None:
        self.ack_seconds.observe(seconds)

    def slack_call(self, method: str, result: str) -> None:
        self.slack_calls.labels(method=method, result=result).inc()

    def slack_rate_limited(self, waited_seconds: float) -> None:
        self.slack_rate_limited_total.inc()
        self.slack_rate_limit_wait.inc(max(0.0, waited_seconds))

    def card_update(self, outcome: str) -> None:
        self.card_updates.labels(outcome=outcome).inc()

    def watch_events(self, count: int, lag_seconds: float | None = None) -> None:
        self.watch_events_total.inc(count)
        if lag_seconds is not None:
            self.watch_lag.set(max(0.0, lag_seconds))

    def announcement(self, outcome: str) -> None:
        self.announcements.labels(outcome=outcome).inc()

    def action(self, kind: str, result: str) -> None:
        self.actions.labels(kind=kind, result=result).inc()

    def leadership(self, *, leading: bool, epoch: int) -> None:
        with self._lock:
            if leading != self._leading:
                self.leader_changes.inc()
                self._leading = leading
        self.leader.set(1 if leading else 0)
        self.leader_epoch.set(epoch)

    def inbox_set_aside(self, kind: str) -> None:
        self.inbox_dead.labels(kind=kind).inc()

    def job_set_aside(self, kind: str) -> None:
        self.jobs_dead.labels(kind=kind).inc()

    def outbox_set_aside(self) -> None:
        self.outbox_dead.inc()

    def run_started(self) -> None:
        self.runs_started.inc()

    def run_ended(self, outcome: str) -> None:
        self.runs_ended.labels(outcome=outcome).inc()

    def step_ended(self, outcome: str) -> None:
        self.steps.labels(outcome=outcome).inc()

    def gate_waited(self, seconds: float) -> None:
        self.gate_wait.observe(max(0.0, seconds))

    def gate_escalated(self) -> None:
        self.gate_escalations.inc()

    def evictions(self, result: str, count: int) -> None:
        self.evictions_total.labels(result=result).inc(count)

    def nodes_drained(self, count: int) -> None:
        self.nodes_drained_total.inc(count)

    def work_seconds(self, kind: str, seconds: float) -> None:
        self.work.labels(kind=kind).observe(max(0.0, seconds))

    def kube_request(self, verb: str, result: str, seconds: float) -> None:
        self.kube_requests.labels(verb=verb, result=result).inc()
        self.kube_latency.labels(verb=verb).observe(max(0.0, seconds))


class _NowCollector(Collector):
    """The gauges of `bot.core.gauges`, read at scrape time. A database that cannot be read leaves
    them out of that scrape (logged) rather than failing /metrics: the other series still tell."""

    def __init__(self, read: Callable[[], Now]) -> None:
        self.read = read

    def describe(self) -> Iterable[GaugeMetricFamily]:
        # Without this, registering would call `collect`, and read the database, at once.
        return self._families()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        try:
            now = self.read()
        except Exception:
            log.exception("/metrics: could not read the runs, gates and jobs in progress")
            return []
        return self._families(now)

    @staticmethod
    def _families(now: Now | None = None) -> list[GaugeMetricFamily]:
        runs = GaugeMetricFamily(
            "upgrade_bot_runs_in_progress", "Runs not ended yet, by state: active, paused", labels=["state"]
        )
        gates = GaugeMetricFamily("upgrade_bot_open_gates", "Gates waiting for people in runs in progress")
        oldest = GaugeMetricFamily(
            "upgrade_bot_open_gate_oldest_wait_seconds",
            "How long the oldest open gate has waited for people (0 when none is open)",
        )
        cordoned = GaugeMetricFamily(
            "upgrade_bot_cordoned_nodes", "Nodes the runs in progress cordoned and have not uncordoned"
        )
        jobs = GaugeMetricFamily(
            "upgrade_bot_jobs_running", "Cluster jobs being driven, by kind", labels=["kind"]
        )
        if now is not None:
            for state, count in sorted(now.runs.items()):
                runs.add_metric([state], count)
            gates.add_metric([], now.open_gates)
            oldest.add_metric([], now.oldest_gate_seconds)
            cordoned.add_metric([], now.cordoned_nodes)
            # Every kind present, 0 when idle: a panel shows a line rather than "no data".
            for kind in sorted({"cordon", "uncordon", "drain", "restart", "wait-nodegroup"} | set(now.jobs)):
                jobs.add_metric([kind], now.jobs.get(kind, 0))
        return [runs, gates, oldest, cordoned, jobs]


def _implements_telemetry(metrics: Metrics) -> Telemetry:
    return metrics  # mypy proves here that Metrics implements the Telemetry protocol


class MetricsRoute:
    """WSGI middleware: answers `/metrics`, times `/slack/events`, hands everything else on."""

    def __init__(self, app: Any, metrics: Metrics, *, events_path: str = "/slack/events") -> None:
        self.app = app
        self.metrics = metrics
        self.events_path = events_path

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == METRICS_PATH:
            return serve_metrics(self.metrics, environ, start_response)
        if path != self.events_path:
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        started = time.monotonic()
        # Bolt returns once the listener has acked (the work itself runs on the bot's workers),
        # so the time to the response is the ack latency this process is responsible for.
        body = list(self.app(environ, start_response))
        self.metrics.ack(time.monotonic() - started)
        return body


def serve_metrics(metrics: Metrics, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
    if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
        return plain(start_response, "405 Method Not Allowed", b"only GET\n")
    body = metrics.exposition()
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
    return [body]


def route(metrics: Metrics) -> Callable[[], tuple[str, bytes]]:
    """`/metrics` as a (status line, body) function, for a router of GET paths."""
    return lambda: ("200 OK", metrics.exposition())
