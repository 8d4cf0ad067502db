"""Several real `upgrade-bot run --http` replicas on one database (PostgreSQL), for the failover
tests and `benchmarks/bench_failover.py`: who leads (read from the `leadership` row, whose holder
names the process by its pid), and how long it takes another to lead after a signal."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from bot.adapters.store import Store
from bot.records import Lease
from bot.settings import load_settings
from tests.support.bot_process import BotProcess
from tests.support.slack_stub import SlackStub
from tests.support.testbed import wait_until

#: Short enough for tests to watch a lease expire; renewals twice a second.
LEASE_SECONDS, RENEW_SECONDS = 3.0, 0.5


def leader_yaml(lease: float = LEASE_SECONDS, renew: float = RENEW_SECONDS) -> str:
    return f"leader: {{lease_seconds: {lease}, renew_seconds: {renew}}}\n"


@dataclass
class Replicas:
    config: Path
    env: dict[str, str]
    stub: SlackStub
    members: list[BotProcess] = field(default_factory=list)
    _store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open(load_settings(self.config, {}).database_url)
        return self._store

    def start(self, count: int) -> None:
        """Start `count` replicas one after another (the first one started leads)."""
        for _ in range(count):
            member = BotProcess(config=self.config, env=self.env, stub=self.stub)
            member.start()
            self.members.append(member)

    def lease(self) -> Lease:
        return self.store.lease()

    def leader(self) -> BotProcess | None:
        lease = self.lease()
        if not lease.held_by(lease.holder):
            return None
        pid = int(lease.holder.split("-", 1)[0])
        return next((m for m in self.members if m.process is not None and m.process.pid == pid), None)

    def wait_leader(self, timeout: float = 15) -> BotProcess:
        return wait_until(self.leader, timeout=timeout, what="a replica to lead")

    def signal(self, member: BotProcess, signum: int) -> float:
        """Send `signum`; the monotonic time it was sent."""
        assert member.process is not None
        member.process.send_signal(signum)
        return time.monotonic()

    def failover(self, old: BotProcess, sent_at: float, timeout: float = 20) -> tuple[BotProcess, float]:
        """Wait for a replica other than `old` to lead: it, and the seconds since `sent_at`."""

        def other() -> BotProcess | None:
            now = self.leader()
            return now if now is not None and now is not old else None

        try:
            new = wait_until(other, timeout=timeout, what="another replica to lead", interval=0.05)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; the database's sessions: {self.sessions()}") from exc
        return new, time.monotonic() - sent_at

    def sessions(self) -> list[dict[str, object]]:
        """What each session of the database does (PostgreSQL's `pg_stat_activity`): who holds a
        transaction open, and who waits for a lock — what a takeover that does not come waits for."""
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT pid, state, wait_event_type, wait_event, "
                    "now() - xact_start AS in_transaction, left(query, 200) AS query "
                    "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).mappings()
            return [dict(r) for r in rows]

    def stop_all(self, timeout: float = 45) -> None:
        """SIGTERM every replica still running (woken first, if paused) and wait for all of them;
        one that does not exit in `timeout` is killed — after the others were stopped, so no
        replica outlives its test — and reported."""
        hung: list[str] = []
        running = [m for m in self.members if m.process is not None and m.process.poll() is None]
        for member in running:
            assert member.process is not None
            member.process.send_signal(signal.SIGCONT)
            member.process.send_signal(signal.SIGTERM)
        for member in self.members:
            if member.process is None or (member.process.stdout is not None and member.process.stdout.closed):
                continue  # never started, or already waited for (its `stop`)
            try:
                member.logs.append(member.process.communicate(timeout=timeout)[1])
            except subprocess.TimeoutExpired:
                # Its threads' stacks first (the bot's faulthandler on SIGUSR1), to see where it hangs.
                member.process.send_signal(signal.SIGUSR1)
                time.sleep(1)
                member.process.kill()
                err = member.process.communicate(timeout=20)[1]
                member.logs.append(err)
                hung.append(f"pid {member.process.pid} did not exit on SIGTERM:\n{err[-12000:]}")
        if self._store is not None:
            self._store.close()
        assert not hung, "\n".join(hung)
