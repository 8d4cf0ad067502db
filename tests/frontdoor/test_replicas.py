"""Three real `upgrade-bot run --http` replicas on one real PostgreSQL server and the Slack stub.

The leader is killed (-9) as an announcement falls due, paused (SIGSTOP) past its lease, and
stopped (SIGTERM): another replica leads within the lease time, every announcement is posted
once, and a paused leader that wakes up writes nothing (its epoch is fenced) and steps down.
The lease is 3 s, renewed every 0.5 s (`tests.support.replicas`); commands go to a follower, since
every replica serves them. (Mid-watch and mid-drain variants come with watches and long actions.)
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.records import AuditEntry
from tests.support.bot_process import BotProcess
from tests.support.postgres import drop_every_table
from tests.support.replicas import LEASE_SECONDS, RENEW_SECONDS, Replicas, leader_yaml
from tests.support.signing import get
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

PLAN = (Path(__file__).parents[2] / "templates" / "plans" / "eks-nodegroups.yaml").read_text(encoding="utf-8")
#: A takeover after a kill: the lease runs out, then the next round of a follower (plus a margin
#: for two shared cores).
TAKEOVER_BOUND = LEASE_SECONDS + RENEW_SECONDS + 2.0


@pytest.fixture
def replicas(
    postgres_url: str,
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    bot_env: dict[str, str],
    tmp_path: Path,
) -> Iterator[Replicas]:
    drop_every_table(postgres_url)
    plans = tmp_path / "team" / "plans"
    plans.mkdir(parents=True)
    (plans / "failover.yaml").write_text(
        PLAN.replace("name: eks-nodegroups", "name: failover"), encoding="utf-8"
    )
    config = write_config(
        f"database_url: {postgres_url}\n"
        "channels: {announcements: C0ANNOUNCE, operations: C0OPS}\n"
        f"templates_dir: {tmp_path / 'team'}\n"
        "announcements: {offsets: ['0'], grace: 30m}\n" + leader_yaml()
    )
    for user in ("U0PRIMARY", "U0SHADOW", "U0COORD"):
        slack_stub.users[user] = {"id": user}
    group = Replicas(config=config, env=bot_env, stub=slack_stub)
    try:
        group.start(3)
        yield group
    finally:
        group.stop_all()
        drop_every_table(postgres_url)


def command(member: BotProcess, stub: SlackStub, text: str) -> str:
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


def announcements(stub: SlackStub) -> Counter[str]:
    return Counter(
        str(c.params["text"])
        for c in stub.calls_to("chat.postMessage")
        if c.params["channel"] == "C0ANNOUNCE" and "Plan `failover`" in str(c.params["text"])
    )


def schedule(group: Replicas, via: BotProcess, seconds: float) -> datetime:
    """Schedule `failover` to open `seconds` from now, through `via`; wait for `scheduled`."""
    assert "loaded" in command(via, group.stub, "plan load failover")
    due = (datetime.now(UTC) + timedelta(seconds=seconds)).replace(microsecond=0)
    reply = command(via, group.stub, f'schedule failover --at "{due:%Y-%m-%d %H:%M:%S}" --tz UTC')
    assert reply.startswith(":calendar: Scheduled"), reply
    group.stub.wait_for(lambda: sum(announcements(group.stub).values()) == 1, timeout=10)
    return due


def figure(line: str) -> None:
    """A measured figure, on the terminal with `pytest -s` (the benchmark gives medians)."""
    sys.stdout.write(line + "\n")


def readyz(member: BotProcess) -> str:
    return get(f"{member.url}/readyz").body


def audit_rows(group: Replicas) -> list[AuditEntry]:
    return group.store.audit_entries()


def test_kill_9_of_the_leader_as_an_announcement_falls_due_another_posts_it_once(replicas: Replicas) -> None:
    first, follower = replicas.members[0], replicas.members[1]
    assert replicas.wait_leader() is first
    assert "leader no epoch 0" in readyz(follower).splitlines()
    due = schedule(replicas, follower, 5)
    wait_until(lambda: datetime.now(UTC) >= due - timedelta(seconds=0.3), timeout=10, what="almost due")
    sent = replicas.signal(first, signal.SIGKILL)
    new, took = replicas.failover(first, sent)
    figure(f"failover after kill -9: {took:.2f}s (lease {LEASE_SECONDS}s)")
    assert took <= TAKEOVER_BOUND
    assert replicas.lease().epoch == 2
    replicas.stub.wait_for(lambda: sum(announcements(replicas.stub).values()) == 2, timeout=15)
    wait_until(lambda: "leader yes epoch 2" in readyz(new).splitlines(), timeout=10, what="readiness")
    time.sleep(2 * RENEW_SECONDS)  # a double post would come from the next sync or tick
    texts = announcements(replicas.stub)
    assert sum(texts.values()) == 2, texts
    assert set(texts.values()) == {1}, texts
    assert [r.state for r in replicas.store.scheduled_announcements()] == ["sent", "sent"]


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_wakes_and_steps_down(
    replicas: Replicas,
) -> None:
    first, follower = replicas.members[0], replicas.members[1]
    assert replicas.wait_leader() is first
    schedule(replicas, follower, LEASE_SECONDS + 4)
    time.sleep(2 * RENEW_SECONDS)  # the leader's sync has its announcement job
    sent = replicas.signal(first, signal.SIGSTOP)
    new, took = replicas.failover(first, sent)
    figure(f"failover after SIGSTOP: {took:.2f}s (lease {LEASE_SECONDS}s)")
    assert took <= TAKEOVER_BOUND
    replicas.stub.wait_for(lambda: sum(announcements(replicas.stub).values()) == 2, timeout=20)
    wait_until(
        lambda: [r.state for r in replicas.store.scheduled_announcements()] == ["sent", "sent"],
        timeout=10,
        what="the new leader to record its post",
    )
    before = (audit_rows(replicas), replicas.store.scheduled_announcements(), replicas.lease().epoch)

    # Woken past the due time: its timers fire at once, and its lease thread renews.
    replicas.signal(first, signal.SIGCONT)
    wait_until(lambda: "leader no epoch 1" in readyz(first).splitlines(), timeout=10, what="a step down")
    time.sleep(2 * RENEW_SECONDS)
    after = (audit_rows(replicas), replicas.store.scheduled_announcements(), replicas.lease().epoch)
    assert after[0] == before[0], "the old leader wrote no audit row"
    assert after[1:] == before[1:], "nor changed an announcement or the lease"
    assert sum(announcements(replicas.stub).values()) == 2
    assert replicas.leader() is new
    log = first.stop()
    assert "no longer leads" in log


def test_sigterm_of_the_leader_hands_over_within_seconds_with_no_error_in_slack(replicas: Replicas) -> None:
    first = replicas.members[0]
    assert replicas.wait_leader() is first
    sent = replicas.signal(first, signal.SIGTERM)
    new, took = replicas.failover(first, sent)
    figure(f"failover after SIGTERM: {took:.2f}s (lease {LEASE_SECONDS}s)")
    # Released, not expired: within a follower's renew round (and its recovery), well inside a lease.
    assert took < LEASE_SECONDS
    # It exits on that one SIGTERM: `stop()` would send another, which can land in the
    # interpreter's finalization, after the handler is gone, and kill it with -15.
    assert first.process is not None
    log = first.process.communicate(timeout=20)[1]
    first.logs.append(log)
    assert first.process.returncode == 0
    assert "released the lease (epoch 1)" in log
    assert "Traceback" not in log
    assert replicas.lease().epoch == 2
    errors = [c for c in replicas.stub.calls_to("chat.postMessage") if "error" in str(c.params).lower()]
    assert errors == []
    assert new in replicas.members[1:]
