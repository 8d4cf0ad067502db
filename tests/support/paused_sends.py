"""A replica paused (SIGSTOP) past its lease at each point of a send, on PostgreSQL (issue 38).

Two real `upgrade-bot run --http` replicas share one database and the Slack stub. The first one
leads and starts a run; the line `:rocket: Run started …` of the run's thread is the message under
watch. The replica is stopped at one point of sending it, for longer than its lease:

- `before-reservation`: while the card's post is in flight (the stub holds its answer), so the
  line is not claimed yet;
- `between-reservation-and-call`: after the line was claimed and a first attempt was answered 429
  (nothing posted), while the Slack budget waits for Retry-After before it sends again;
- `during-call`: while the line's own post is in flight (the stub posted it and holds the answer).

The other replica takes over, settles what the paused one left and posts what is owed. Only once
it has recorded the line is the paused replica woken; then it is watched for a while. Every keyed
message (the key in the post's metadata) must be in Slack once. Used by
tests/frontdoor/test_replicas_paused_sends.py (each point once) and
benchmarks/soak_replica_sends.py (each point ten times).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.bot_process import BotProcess
from tests.support.replicas import LEASE_SECONDS, RENEW_SECONDS, Replicas, leader_yaml
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

POINTS = ("before-reservation", "between-reservation-and-call", "during-call")
PLAN = (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")
PEOPLE = ("U0PRIMARY", "U0SHADOW", "U0COORD")
#: How long the stub holds an answer: past the moment the paused replica is woken.
HOLD_SECONDS = 30.0
#: After the wake-up, how long the woken replica is watched for a late copy: its lease round, a
#: Retry-After, and its Slack timeout, twice over.
WATCH_SECONDS = 2 * (RENEW_SECONDS + 2.0 + LEASE_SECONDS)


@dataclass(frozen=True)
class Outcome:
    point: str
    #: Keyed messages posted more than once: key → copies.
    duplicates: dict[str, int]
    #: Copies of the line under watch in Slack (1 when it went right).
    watched: int
    #: Seconds the replica was stopped.
    paused: float


def write_files(config: Path, work: Path, database_url: str) -> Path:
    """The team's templates (the plan `paused`) and the replicas' configuration file."""
    plans = work / "team" / "plans"
    plans.mkdir(parents=True, exist_ok=True)
    (plans / "paused.yaml").write_text(PLAN.replace("name: eks-nodegroups", "name: paused"), encoding="utf-8")
    config.write_text(
        f"data_dir: {work / 'data'}\n"
        f"roster: {{primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}}\n"
        f"database_url: {database_url}\n"
        "channels: {announcements: C0ANNOUNCE, operations: C0OPS}\n"
        f"templates_dir: {work / 'team'}\n" + leader_yaml(),
        encoding="utf-8",
    )
    return config


def _is_card(params: dict[str, Any]) -> bool:
    return not params.get("thread_ts") and str(params.get("text", "")).startswith(":clipboard: *Upgrade run")


def _is_watched(params: dict[str, Any]) -> bool:
    return bool(params.get("thread_ts")) and str(params.get("text", "")).startswith(":rocket: Run started")


def _arm(stub: SlackStub, point: str) -> Any:
    """Set the stub's fault for `point`; the predicate of the call at which to stop the replica."""
    if point == "before-reservation":
        stub.fail_next("chat.postMessage", delay=HOLD_SECONDS, when=_is_card)
        return _is_card
    if point == "between-reservation-and-call":
        stub.fail_next("chat.postMessage", status=429, retry_after=2, when=_is_watched)
        return _is_watched
    if point == "during-call":
        stub.fail_next("chat.postMessage", delay=HOLD_SECONDS, when=_is_watched)
        return _is_watched
    raise ValueError(point)


def keyed_copies(stub: SlackStub) -> Counter[str]:
    """How many times each keyed message is in Slack."""
    keys: Counter[str] = Counter()
    for message in stub.posted():
        meta = message.get("metadata") or {}
        key = (meta.get("event_payload") or {}).get("key")
        if key:
            keys[str(key)] += 1
    return keys


def _command(member: BotProcess, stub: SlackStub, text: str) -> str:
    """Run a slash command on `member`; its reply (ephemeral, or posted in C0OPS)."""
    before = len(stub.responses)
    in_ops = len([c for c in stub.calls_to("chat.postMessage") if c.params["channel"] == "C0OPS"])
    member.send_command(text, "U0PRIMARY")

    def reply() -> str | None:
        if len(stub.responses) > before:
            return str(stub.responses[before]["text"])
        posted = [c for c in stub.calls_to("chat.postMessage") if c.params["channel"] == "C0OPS"][in_ops:]
        return str(posted[0].params["text"]) if posted else None

    return str(stub.wait_for(reply, timeout=30))


def paused_send(group: Replicas, point: str) -> Outcome:
    """One round on a fresh database: start two replicas, pause the leader at `point`, wake it
    after the other replica posted what was owed, and count the copies."""
    stub = group.stub
    for user in PEOPLE:
        stub.users[user] = {"id": user}
    group.start(2)
    paused = group.wait_leader()
    assert "loaded" in _command(paused, stub, "plan load paused")
    stop_at = _arm(stub, point)
    seen = len(stub.calls)
    paused.send_command("start paused", "U0PRIMARY")
    stub.wait_for(
        lambda: any(stop_at(c.params) for c in stub.calls[seen:] if c.method == "chat.postMessage"), 30
    )
    stopped = group.signal(paused, signal.SIGSTOP)
    try:
        group.failover(paused, stopped, timeout=30)

        def watched_recorded() -> bool:
            (run,) = group.store.runs()
            refs = group.store.messages(run.id)
            return any(ref.ts and _is_watched_text(ref.body) for ref in refs.values())

        wait_until(watched_recorded, timeout=40, what="the other replica to post or record the line")
    finally:
        woke = group.signal(paused, signal.SIGCONT)
    # An observation window, not a wait for something to happen: a late copy from the woken
    # replica would come within its next lease round plus one Slack call.
    time.sleep(WATCH_SECONDS)
    copies = keyed_copies(stub)
    watched = sum(1 for m in stub.posted() if str(m.get("text", "")).startswith(":rocket: Run started"))
    return Outcome(
        point=point,
        duplicates={k: n for k, n in copies.items() if n > 1},
        watched=watched,
        paused=woke - stopped,
    )


def _is_watched_text(body: str) -> bool:
    return ":rocket: Run started" in body
