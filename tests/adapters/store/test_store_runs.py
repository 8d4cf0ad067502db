"""Runs in the store: transitions commit with optimistic concurrency, on SQLite and PostgreSQL.

Two workers (two `Store`s on one database, as two replicas would have) read the same version of a
run and both try to advance it: exactly one commit wins, the other is recomputed on the fresh state
and refused, so a step is never advanced twice and an approval never counted twice.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from bot.adapters.store import Store
from bot.core.people import StaticDirectory
from bot.core.runs import machine as R
from bot.core.runs.service import Actor, RunService
from bot.errors import ConcurrentUpdate
from tests.support.plans import eks_with_human_checks

NOW = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLAN = eks_with_human_checks()
TABLES = (
    "audit_log",
    "deliveries",
    "snapshots",
    "plans",
    "runs",
    "run_steps",
    "approvals",
    "run_messages",
    "schedules",
    "scheduled_announcements",
)


def service(store: Store) -> RunService:
    return RunService(store=store, directory=StaticDirectory(), clock=lambda: NOW)


def started(url: str) -> tuple[Store, str]:
    store = Store.open(url)
    store.save_plan(name="eks-nodegroups", text=PLAN, loaded_by="U0COORD", loaded_at=NOW)
    out = service(store).start("eks-nodegroups", Actor(user_id="U0PRIMARY"))
    return store, out.run.id


def test_a_run_round_trips_through_the_store(url: str) -> None:
    store, run_id = started(url)
    svc = service(store)
    run = svc.load(run_id)
    assert run.state is R.RunState.ACTIVE
    assert run.version == 0
    assert run.step_run("snapshot-pre").state is R.StepState.AWAITING_APPROVAL
    assert run.roster["primary"] == ("U0PRIMARY",)
    ref = R.ButtonRef(run_id=run_id, step_id="checks", epoch=0)
    svc.apply(
        run_id,
        lambda r: R.skip(r, step_id="snapshot-pre", by="U0PRIMARY", reason="x", now=NOW),
        Actor(user_id="U0PRIMARY"),
    )
    out = svc.click(R.ButtonRef(run_id=run_id, step_id="checks", epoch=1), Actor(user_id="U0PRIMARY"))
    assert out.accepted
    assert not svc.click(ref, Actor(user_id="U0SHADOW")).accepted
    again = svc.load(run_id)
    assert again.version == 2
    assert [(a.user_id, a.roles) for a in again.approvals] == [("U0PRIMARY", ("primary",))]
    assert again.step_run("checks").state is R.StepState.RUNNING  # the work started; "done" is next
    assert again.step_run("snapshot-pre").state is R.StepState.SKIPPED
    kinds = [e.subcommand for e in store.audit_entries(run_id=run_id)]
    assert kinds == [
        "run_started",
        "gate_opened",
        "step_skipped",
        "gate_opened",
        "approved",
        "step_running",
        "gate_opened",
        "refused",
    ]
    store.close()


def test_a_commit_from_a_stale_version_is_refused_and_writes_nothing(url: str) -> None:
    store, run_id = started(url)
    kwargs = {"run_id": run_id, "state": "paused", "roster": {}, "reason": "x", "updated_at": NOW}
    assert store.commit_run(expected_version=0, **kwargs) == 1  # type: ignore[arg-type]
    with pytest.raises(ConcurrentUpdate):
        store.commit_run(expected_version=0, **{**kwargs, "state": "aborted"})  # type: ignore[arg-type]
    rows = store.run_rows(run_id)
    assert rows is not None
    assert rows[0].state == "paused"
    assert rows[0].version == 1
    store.close()


def race(url: str, run_id: str, clicks: list[tuple[str, R.ButtonRef]]) -> list[R.Outcome]:
    """Each click on its own worker and Store; all read the same version before any commits."""
    barrier = threading.Barrier(len(clicks), timeout=20)
    results: list[R.Outcome | BaseException] = [RuntimeError("not run")] * len(clicks)

    def worker(i: int, user: str, ref: R.ButtonRef) -> None:
        store = Store.open(url, migrate=False)
        svc = service(store)
        first = [True]

        def change(run: R.Run) -> R.Outcome:
            if first[0]:
                first[0] = False
                barrier.wait()  # everyone has read the same version now
            return R.click(
                run,
                step_id=ref.step_id,
                epoch=ref.epoch,
                user_id=user,
                decision="approve",
                directory=svc.directory,
                now=NOW,
            )

        try:
            results[i] = svc.apply(run_id, change, Actor(user_id=user))
        except BaseException as exc:
            results[i] = exc
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(i, u, r)) for i, (u, r) in enumerate(clicks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(isinstance(r, R.Outcome) for r in results), results
    return [r for r in results if isinstance(r, R.Outcome)]


def test_two_workers_never_advance_a_step_twice(url: str) -> None:
    store, run_id = started(url)
    ref = R.ButtonRef(run_id=run_id, step_id="snapshot-pre", epoch=1)
    outcomes = race(url, run_id, [("U0PRIMARY", ref), ("U0SHADOW", ref)])
    accepted = [o for o in outcomes if o.accepted]
    refused = [o for o in outcomes if not o.accepted]
    assert len(accepted) == 1
    assert len(refused) == 1
    assert "earlier state of step `snapshot-pre`" in refused[0].message
    run = service(store).load(run_id)
    assert run.version == 1
    assert len(run.approvals) == 1
    assert run.step_run("snapshot-pre").state is R.StepState.RUNNING
    store.close()


def test_a_double_click_on_two_workers_counts_once(url: str) -> None:
    store, run_id = started(url)
    svc = service(store)
    for step in ("snapshot-pre", "checks", "announce-start"):
        svc.apply(
            run_id,
            lambda r, s=step: R.skip(r, step_id=s, by="U0PRIMARY", reason="x", now=NOW),
            Actor(user_id="U0PRIMARY"),
        )
    ref = R.ButtonRef(run_id=run_id, step_id="control-plane", epoch=1)  # approve: [primary, shadow]
    outcomes = race(url, run_id, [("U0PRIMARY", ref), ("U0PRIMARY", ref)])
    assert sorted(o.accepted for o in outcomes) == [False, True]
    assert any("already approved" in o.message for o in outcomes)
    run = svc.load(run_id)
    assert [a.user_id for a in run.approvals] == ["U0PRIMARY"]
    assert run.step_run("control-plane").state is R.StepState.AWAITING_APPROVAL
    store.close()


def test_migration_3_adds_the_run_tables(url: str) -> None:
    store = Store.open(url)
    names = set(sa.inspect(store.engine).get_table_names())
    assert {"plans", "runs", "run_steps", "approvals", "run_messages"} <= names
    assert (store.schema_version() or "") >= "0003"
    store.close()


def test_a_run_read_while_transitions_commit_is_always_one_version_of_it(url: str) -> None:
    """A writer flips a run between two states, its state and its first step's changed together in
    each commit (paused with the step failed; active with its gate open), as fast as it can; a
    reader on another Store loads the run meanwhile. Every read is one version: never a failed
    step in an active run. (Read as three SELECTs in one `engine.begin()`, SQLite paired the run's
    old state with its steps' new one in about one read in 30, and PostgreSQL now and then: the
    rehearsal then found a failed step with no gate and stopped.)"""
    store, run_id = started(url)
    run = service(store).load(run_id)
    failed = dataclasses.replace(run.steps[0], state=R.StepState.FAILED)
    waiting = dataclasses.replace(run.steps[0], state=R.StepState.AWAITING_APPROVAL)
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        w = Store.open(url)
        try:
            version = run.version
            for i in range(1500):
                paused = i % 2 == 0
                version = w.commit_run(
                    run_id=run_id,
                    expected_version=version,
                    state="paused" if paused else "active",
                    roster=run.roster,
                    reason="",
                    updated_at=NOW,
                    steps=[(0, failed if paused else waiting)],
                )
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            done.set()
            w.close()

    thread = threading.Thread(target=writer)
    reader = Store.open(url)
    reads: list[tuple[str, R.StepState, int]] = []
    thread.start()
    while not done.is_set():
        rows = reader.run_rows(run_id)
        assert rows is not None
        reads.append((rows[0].state, rows[1][0].state, rows[0].version))
    thread.join()
    reader.close()
    store.close()
    assert not errors
    assert len({version for _, _, version in reads}) > 10, "the reads overlapped the commits"
    torn = [r for r in reads if (r[0] == "paused") != (r[1] is R.StepState.FAILED)]
    assert torn == [], f"{len(torn)} of {len(reads)} reads mixed two versions, e.g. {torn[:3]}"


def test_a_runs_references_can_be_read_without_its_thread_lines_already_posted(url: str) -> None:
    # What a publish reads on every card edit: the card, its gates, the lines still owed — not
    # the thread's posted lines, which grow with it.
    store, run_id = started(url)
    run = service(store).load(run_id)
    line = '{"text": "a line", "blocks": null, "broadcast": false}'
    store.commit_run(
        run_id=run_id,
        expected_version=run.version,
        state="active",
        roster=run.roster,
        reason="",
        updated_at=NOW,
        outbox=[("event:1:0", line), ("event:1:1", line), ("event:1:2", line)],
    )
    for key, ts in (("card", "1.0"), ("gate:checks:1", "")):
        assert store.claim_message(run_id=run_id, key=key, channel="C0OPS", thread_ts="", at=NOW, owner="me")
        if ts:
            store.record_message(run_id=run_id, key=key, channel="C0OPS", ts=ts)
    assert store.claim_outbox(
        run_id=run_id, key="event:1:0", channel="C0OPS", thread_ts="1.0", owner="me", at=NOW
    )
    store.record_message(run_id=run_id, key="event:1:0", channel="C0OPS", ts="2.0")
    assert store.claim_outbox(
        run_id=run_id, key="event:1:1", channel="C0OPS", thread_ts="1.0", owner="me", at=NOW
    )
    assert set(store.messages(run_id)) == {"card", "gate:checks:1", "event:1:0", "event:1:1", "event:1:2"}
    # The line in flight (claimed, no ts) and the one owed stay: settling and posting need them.
    assert set(store.messages(run_id, posted_lines=False)) == {
        "card",
        "gate:checks:1",
        "event:1:1",
        "event:1:2",
    }
    # A job's tick reads where the run's thread is: its card, and the card's posts again only.
    assert store.claim_message(run_id=run_id, key="card:repost:1.0", channel="C0OPS", thread_ts="", at=NOW)
    assert set(store.messages(run_id, prefix="card")) == {"card", "card:repost:1.0"}
    store.close()


def test_a_run_loaded_again_at_the_same_version_reads_its_one_row_and_a_commit_anywhere_is_seen(
    url: str,
) -> None:
    # Every tick, click and card edit loads the run: its steps and approvals change only with its
    # version, so they are read once a version, and a commit by another store (a replica) is seen.
    store, run_id = started(url)
    other = Store.open(url, migrate=False)
    selects: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", count)
    try:
        first = service(store).load(run_id)
        selects.clear()
        assert service(store).load(run_id) == first
        assert len(selects) == 2  # the run's row, and its plan's (parsed once, cached apart)
        service(other).apply(
            run_id,
            lambda r: R.skip(r, step_id="snapshot-pre", by="U0PRIMARY", reason="x", now=NOW),
            Actor(user_id="U0PRIMARY"),
        )
        assert service(store).load(run_id).step_run("snapshot-pre").state is R.StepState.SKIPPED
        ref = R.ButtonRef(run_id=run_id, step_id="checks", epoch=1)
        assert service(other).click(ref, Actor(user_id="U0PRIMARY")).accepted
        again = service(store).load(run_id)
        assert again.version == first.version + 2
        assert again.step_run("checks") == service(other).load(run_id).step_run("checks")
        assert again.step_run("checks").state is R.StepState.RUNNING
        assert [a.user_id for a in again.approvals] == ["U0PRIMARY"]
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", count)
        other.close()
        store.close()
