"""The Slack adapter through the real WebClient against the stub: retries and Slack errors."""

from __future__ import annotations

import pytest

from bot.adapters.slack import SlackGateway, make_web_client, respond_via_url
from bot.errors import SlackCallFailed, TemporaryError
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub


def gateway(stub: SlackStub) -> SlackGateway:
    return SlackGateway(make_web_client(BOT_TOKEN, stub.api_url))


@pytest.mark.slow  # slack_sdk sleeps the stub's Retry-After
def test_a_429_is_retried_after_retry_after_and_the_message_arrives(slack_stub: SlackStub) -> None:
    slack_stub.fail_next("chat.postMessage", status=429, retry_after=1)
    posted = gateway(slack_stub).post_message("C0OPS", "upgrade window starts at 14:00")
    first, second = slack_stub.calls_to("chat.postMessage")
    assert second.at - first.at >= 1.0
    assert second.params["text"] == "upgrade window starts at 14:00"
    assert posted.channel == "C0OPS"
    assert posted.ts


def test_a_5xx_is_retried(slack_stub: SlackStub) -> None:
    slack_stub.fail_next("chat.update", status=503)
    gateway(slack_stub).update_message("C0OPS", "1.1", "card")
    assert len(slack_stub.calls_to("chat.update")) == 2


@pytest.mark.slow  # slack_sdk sleeps each Retry-After until its retries run out
def test_persistent_rate_limiting_becomes_a_temporary_error(slack_stub: SlackStub) -> None:
    slack_stub.fail_next("chat.postMessage", status=429, retry_after=0, times=10)
    with pytest.raises(TemporaryError):
        gateway(slack_stub).post_message("C0OPS", "x")


@pytest.mark.parametrize(
    ("code", "phrase"),
    [
        ("channel_not_found", "does not exist"),
        ("not_in_channel", "/invite"),
        # What an installed copy has (it has no repository's manifest file to point at).
        ("missing_scope", "(`upgrade-bot init --slack-manifest` writes it)"),
    ],
)
def test_slack_errors_become_a_short_reason(slack_stub: SlackStub, code: str, phrase: str) -> None:
    slack_stub.fail_next("chat.postMessage", error=code)
    with pytest.raises(SlackCallFailed) as caught:
        gateway(slack_stub).post_message("C0NOPE", "x")
    assert caught.value.code == code
    assert phrase in caught.value.user_message


def test_files_are_uploaded_with_the_v2_flow(slack_stub: SlackStub) -> None:
    gateway(slack_stub).upload_file("C0OPS", "report.md", b"# diff\n", title="Diff", thread_ts="1.1")
    assert slack_stub.uploads
    assert next(iter(slack_stub.uploads.values())) == b"# diff\n"
    (complete,) = slack_stub.calls_to("files.completeUploadExternal")
    assert complete.params["channel_id"] == "C0OPS"


@pytest.mark.slow  # the retry waits the stub's Retry-After
def test_respond_via_url_retries_a_429(slack_stub: SlackStub) -> None:
    slack_stub.fail_next("response_url", status=429, retry_after=1)
    respond_via_url(slack_stub.response_url("x"), "done", ephemeral=True)
    assert slack_stub.responses[0]["text"] == "done"
    assert slack_stub.summary() == ["response_url:429", "response_url"]
