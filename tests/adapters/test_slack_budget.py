"""The workspace's Slack budget, with the real WebClient against the stub (on a fake clock):
buckets honoured, Retry-After obeyed, the limiter slowed by a 429 and then recovering, 5xx
retried, and nothing waited past its bound."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.slack import SlackGateway, make_web_client
from bot.adapters.slack_budget import BudgetConfig, SlackBudget
from bot.adapters.store import Store
from bot.core.delivery import Deliveries
from bot.core.tenure import Tenure
from bot.errors import LeaseLapsed, SlackOutcomeUnknown, TemporaryError
from tests.support.clock import FakeMonotonic
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


@pytest.fixture
def clock() -> FakeMonotonic:
    return FakeMonotonic()


@pytest.fixture
def stub(clock: FakeMonotonic) -> SlackStub:
    with SlackStub(clock=clock) as s:
        yield s


def gateway(stub: SlackStub, clock: FakeMonotonic, **config: float) -> SlackGateway:
    budget = SlackBudget(BudgetConfig(**config), clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    return SlackGateway(make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False), budget=budget)


def test_updates_share_one_workspace_budget_and_posts_one_per_channel(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    gw = gateway(stub, clock)
    for i in range(120):
        gw.update_message("C0OPS", f"1.{i % 7}", f"card {i}")
    for i in range(30):
        gw.post_message("C0OPS", f"line {i}")
        gw.post_message("C0OTHER", f"line {i}")
    burst = BudgetConfig().burst
    assert stub.most_in_window("chat.update", 60.0) <= 50 + burst
    ops = stub.most_in_window("chat.postMessage", 10.0, where=lambda c: c.params["channel"] == "C0OPS")
    assert ops <= 10 + burst
    # Channels have their own buckets: the second channel did not wait behind the first.
    other = [c.at for c in stub.calls_to("chat.postMessage") if c.params["channel"] == "C0OTHER"]
    assert other[-1] - other[0] <= 30
    assert gw.budget is not None
    assert gw.budget.stats.count("chat.update", "ok") == 120
    assert gw.budget.stats.waited["chat.update"] > 60


def test_a_429_waits_for_retry_after_slows_the_bucket_then_it_recovers(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    gw = gateway(stub, clock)
    assert gw.budget is not None
    nominal = gw.budget.rate("chat.update")
    stub.fail_next("chat.update", status=429, retry_after=7)
    gw.update_message("C0OPS", "1.1", "card")
    first, second = stub.calls_to("chat.update")
    assert second.at - first.at >= 7
    # Halved by the 429, one step back up by the retry that passed.
    assert gw.budget.rate("chat.update") == pytest.approx(nominal * 0.55)
    assert gw.budget.stats.rate_limited == 1
    for i in range(30):
        gw.update_message("C0OPS", "1.1", f"card {i}")
    assert gw.budget.rate("chat.update") == pytest.approx(nominal)
    # Nothing about the 429 was said in Slack.
    assert "chat.postMessage" not in stub.counts()


def test_a_5xx_is_retried_with_backoff_and_persistent_trouble_is_temporary(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    gw = gateway(stub, clock)
    stub.fail_next("chat.postMessage", status=503, times=2)
    gw.post_message("C0OPS", "milestone")
    assert len(stub.calls_to("chat.postMessage")) == 3
    assert [s for s in clock.slept if s >= 0.5][:2] == [0.5, 1.0]
    stub.fail_next("chat.postMessage", status=500, times=10)
    with pytest.raises(TemporaryError):
        gw.post_message("C0OPS", "other")
    assert gw.budget is not None
    assert gw.budget.stats.count("chat.postMessage", "http_500") == 4


def test_no_call_waits_past_its_bound(stub: SlackStub, clock: FakeMonotonic) -> None:
    gw = gateway(stub, clock, updates_per_minute=1, burst=1, max_wait=30)
    gw.update_message("C0OPS", "1.1", "first")
    with pytest.raises(TemporaryError):
        gw.update_message("C0OPS", "1.1", "second")
    assert len(stub.calls_to("chat.update")) == 1
    clock.advance(60)
    gw.update_message("C0OPS", "1.1", "third")
    assert len(stub.calls_to("chat.update")) == 2


def test_one_call_with_all_its_retries_ends_within_max_total(stub: SlackStub, clock: FakeMonotonic) -> None:
    gw = gateway(stub, clock, max_total=60)
    stub.fail_next("chat.postMessage", status=429, retry_after=25, times=5)
    start = clock()
    with pytest.raises(TemporaryError):
        gw.post_message("C0OPS", "milestone")
    assert clock() - start <= 60
    assert len(stub.calls_to("chat.postMessage")) == 3


def test_a_post_waiting_out_a_retry_after_is_not_sent_once_the_lease_ran_out(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    """Issue 38: the lease is checked right before each attempt, after the budget's waits, on this
    replica's own monotonic clock — a post queued inside the lease is not sent past it."""
    tenure = Tenure(monotonic=clock)
    tenure.renewed(started=clock(), finished=clock(), duration=timedelta(seconds=15), leading=True)
    budget = SlackBudget(BudgetConfig(), clock=clock, sleep=clock.sleep)
    client = make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False, timeout=5)
    gw = SlackGateway(client, budget=budget, tenure=tenure)
    assert gw.send_timeout("chat.postMessage") == 5.0
    gw.post_message("C0OPS", "inside the lease")
    stub.fail_next("chat.postMessage", status=429, retry_after=20)
    with pytest.raises(LeaseLapsed):
        gw.post_message("C0OPS", "queued behind a Retry-After")
    # One attempt (answered 429, nothing posted), none after the wait: the lease had run out.
    assert [c.params["text"] for c in stub.calls_to("chat.postMessage")] == [
        "inside the lease",
        "queued behind a Retry-After",
    ]
    assert [m["text"] for m in stub.posted("C0OPS")] == ["inside the lease"]
    # Reads (looking a lost post up) are not side effects: they go on.
    assert gw.find_posted("C0OPS", "k", thread_ts="", oldest=datetime.now(UTC)) is None


@pytest.mark.slow  # two posts wait out the client's 1 s timeout
def test_a_post_sent_without_an_answer_is_looked_for_by_its_key_never_sent_again(
    stub: SlackStub, clock: FakeMonotonic, tmp_path: Path
) -> None:
    """A post whose answer does not come within the client's timeout may be in Slack already: the
    budget does not retry it, and the deliveries find it by its key and record it (one message)."""
    budget = SlackBudget(BudgetConfig(), clock=clock, sleep=clock.sleep)
    gw = SlackGateway(make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False, timeout=1), budget=budget)
    stub.fail_next("chat.postMessage", delay=3)  # posted at once, answered after the timeout
    with pytest.raises(SlackOutcomeUnknown):
        gw.post_message("C0OPS", "slow", dedup_key="R1/line")
    assert len(stub.calls_to("chat.postMessage")) == 1

    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        deliveries = Deliveries(store=store, poster=gw, clock=lambda: datetime.now(UTC), owner="me")
        stub.fail_next("chat.postMessage", delay=3)
        posted = deliveries.post_once("R2", "line", "C0OPS", "slow again", thread_ts="")
        assert posted is not None
        assert [m["text"] for m in stub.posted("C0OPS")] == ["slow", "slow again"]
        assert store.messages("R2")["line"].ts == posted.ts
    finally:
        store.close()


def test_a_file_upload_fits_a_lease_shorter_than_its_three_requests_timeouts(
    stub: SlackStub, clock: FakeMonotonic
) -> None:
    """A run's report is uploaded in three requests. Asking the lease for three timeouts at once
    (18 s of a 15 s lease) waited for ever, so a report was claimed and never uploaded: each request
    is checked for one timeout, the one that shows the file right before it is sent."""
    tenure = Tenure(monotonic=clock)
    tenure.renewed(started=clock(), finished=clock(), duration=timedelta(seconds=15), leading=True)
    budget = SlackBudget(BudgetConfig(), clock=clock, sleep=clock.sleep)
    client = make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False, timeout=6, tenure=tenure)
    gw = SlackGateway(client, budget=budget, tenure=tenure)
    uploaded: list[str] = []
    worker = threading.Thread(
        target=lambda: uploaded.append(gw.upload_file("C0OPS", "report.md", b"# report", thread_ts="1.1")),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "the upload waited for a lease room it can never have"
    (file_id,) = uploaded
    assert file_id
    assert len(stub.calls_to("files.completeUploadExternal")) == 1


class LapsingLease:
    """A lease that runs out after `checks` checks (a replica paused inside an upload)."""

    def __init__(self, checks: int) -> None:
        self.left = checks
        self.asked: list[float] = []

    def may_act(self, timeout: float) -> None:
        self.asked.append(timeout)
        self.left -= 1
        if self.left < 0:
            raise LeaseLapsed("this replica's lease ran out")


def test_a_file_is_not_shown_when_the_lease_ran_out_between_the_uploads_requests(stub: SlackStub) -> None:
    lease = LapsingLease(checks=1)
    client = make_web_client(BOT_TOKEN, stub.api_url, sdk_retries=False, timeout=6, tenure=lease)
    gw = SlackGateway(client, tenure=lease)
    with pytest.raises(LeaseLapsed):
        gw.upload_file("C0OPS", "report.md", b"# report", thread_ts="1.1")
    # Checked before the upload began and again before the request that shares the file.
    assert lease.asked == [6.0, 6.0]
    assert stub.calls_to("files.getUploadURLExternal")
    assert stub.calls_to("files.completeUploadExternal") == []
