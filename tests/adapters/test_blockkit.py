"""Fitting to Slack's limits: whole lines dropped and counted, never a cut inside a token."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.adapters import blockkit as B
from bot.adapters.slack import SlackGateway
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import INVALID_PAYLOADS, SlackStub, block_kit_problems

# Pieces a card is made of: tokens a cut must never split, and plain words.
TOKENS = [
    ":white_check_mark:",
    ":large_yellow_circle:",
    "<@U0PRIMARY>",
    "<!subteam^S0SRE>",
    "<!date^1700000000^{date_short_pretty} {time}|2023-11-14 22:13 UTC>",
    "`drain-control-plane`",
    "`a step id with spaces`",
    "&amp;",
    "&lt;",
]
WORDS = ["drained", "2", "node(s)", "—", "·", "Wait", "until", "istio", "is", "Ready", "x" * 40]


@st.composite
def lines_with_tokens(draw: st.DrawFn) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """Lines of tokens and words, with where each token sits in its line."""
    lines, spans = [], []
    for _ in range(draw(st.integers(1, 12))):
        pieces = draw(st.lists(st.sampled_from(TOKENS + WORDS), min_size=0, max_size=14))
        line, where = "", []
        for piece in pieces:
            if line:
                line += " "
            if piece in TOKENS:
                where.append((len(line), len(line) + len(piece)))
            line += piece
        lines.append(line)
        spans.append(where)
    return lines, spans


@settings(max_examples=300, deadline=None)
@given(lines_with_tokens(), st.integers(min_value=B.VIEW_TITLE, max_value=400))
def test_fit_text_keeps_whole_lines_counts_the_rest_and_never_cuts_inside_a_token(
    drawn: tuple[list[str], list[list[tuple[int, int]]]], limit: int
) -> None:
    lines, spans = drawn
    text = "\n".join(lines)
    fitted = B.fit_text(text, limit)
    assert len(fitted) <= limit
    if len(text) <= limit:
        assert fitted == text
        return
    out = fitted.split("\n")
    more = 0
    if out and out[-1].startswith("…and ") and out[-1].endswith(" more"):
        more = int(out.pop()[len("…and ") : -len(" more")])
    # Every line shown is the original line, or (only the first, when nothing else fits) a cut
    # of it that ends with "…" at a point outside every token.
    for i, shown in enumerate(out):
        if shown == lines[i]:
            continue
        assert i == 0, (shown, lines[i])
        assert shown.endswith("…"), shown
        head = shown[: -len("…")]
        assert lines[0].startswith(head)
        cut = len(head)
        assert not any(start < cut < end for start, end in spans[0]), (lines[0], head)
    # "…and N more" counts exactly the non-blank lines not shown (in full or cut).
    assert more == sum(1 for line in lines[len(out) :] if line.strip())


def test_fit_text_drops_whole_lines_and_says_how_many() -> None:
    text = "\n".join(f":white_check_mark: `step-{i}` done by <@U{i}>" for i in range(30))
    fitted = B.fit_text(text, 200)
    kept = fitted.split("\n")
    assert kept[-1] == f"…and {30 - (len(kept) - 1)} more"
    assert kept[:-1] == text.split("\n")[: len(kept) - 1]
    assert len(fitted) <= 200


def test_fit_text_can_keep_the_latest_lines_and_count_the_earlier_ones() -> None:
    text = "\n".join(f":fast_forward: `step-{i}` skipped" for i in range(30))
    fitted = B.fit_text(text, 200, keep="end")
    kept = fitted.split("\n")
    assert kept[0] == f"…and {30 - (len(kept) - 1)} more"
    assert kept[1:] == text.split("\n")[-(len(kept) - 1) :]
    assert len(fitted) <= 200


def test_one_long_line_is_cut_before_an_emoji_code_not_inside_it() -> None:
    line = "_drain job 2: drained 2 node(s)_ :white_check_mark: `wait-control-plane` done"
    cut = B.safe_cut(line, 40)
    assert cut == "_drain job 2: drained 2 node(s)_…"
    assert ":white_" not in cut


def test_a_code_block_cut_by_lines_is_closed() -> None:
    text = "Report:\n```\n" + "\n".join(f"line {i}" for i in range(100)) + "\n```\nend"
    fitted = B.fit_text(text, 120)
    assert fitted.count("```") == 2
    assert len(fitted) <= 120


def _button(text: str) -> dict[str, object]:
    return {
        "type": "button",
        "action_id": "gate_reject",
        "style": "danger",
        "text": {"type": "plain_text", "text": text},
        "value": "R1|" + "s" * 63 + "|1",
        "confirm": {
            "title": {"type": "plain_text", "text": "Reject " + "s" * 120},
            "text": {"type": "mrkdwn", "text": "Really? " + "<@U1> " * 80},
            "confirm": {"type": "plain_text", "text": "Reject the start of the step " + "s" * 63},
            "deny": {"type": "plain_text", "text": "Keep it"},
        },
    }


def test_fit_blocks_brings_every_block_and_element_within_slacks_limits() -> None:
    step = "s" * 63
    blocks: list[dict[str, object]] = [
        {"type": "header", "text": {"type": "plain_text", "text": ":clipboard: " + "h" * 200}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "\n".join(f"`{step}` line {i}" for i in range(90))},
        },
        {"type": "actions", "block_id": "b" * 300, "elements": [_button(f"Approve start of {step}")]},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<@U{i}>"} for i in range(14)]},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "f"} for _ in range(12)]},
    ] + [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"extra {i}"}} for i in range(60)
    ]  # 65 blocks: 47 + a note + the last 2
    assert block_kit_problems("chat.postMessage", {"blocks": blocks})  # the test can fail
    fitted = B.fit_blocks(blocks)
    assert block_kit_problems("chat.postMessage", {"blocks": fitted}) == []
    assert len(fitted) == 50
    # The last blocks (buttons, roster line) are kept; the note says how many were left out.
    assert fitted[-1] == blocks[-1]
    assert fitted[-3] == {"type": "context", "elements": [{"type": "mrkdwn", "text": "…and 16 more"}]}
    assert fitted[1]["text"]["text"].endswith(" more")


def test_fit_view_brings_a_modal_within_slacks_limits() -> None:
    view = {
        "type": "modal",
        "callback_id": "c",
        "title": {"type": "plain_text", "text": "Confirm a destructive step, typed"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x " * 2000}}],
    }
    assert block_kit_problems("views.open", {"view": view})
    assert block_kit_problems("views.open", {"view": B.fit_view(view)}) == []


def test_the_stub_refuses_what_slack_would_and_the_gateway_sends_it_fitted(slack_stub: SlackStub) -> None:
    too_long = [{"type": "actions", "elements": [_button("Approve start of " + "s" * 63)]}]
    client = WebClient(token=BOT_TOKEN, base_url=slack_stub.api_url)
    with pytest.raises(SlackApiError) as refused:
        client.chat_postMessage(channel="C0OPS", text="card", blocks=too_long)
    assert refused.value.response["error"] == "invalid_blocks"
    assert slack_stub.posted() == []  # nothing shown, as in Slack
    with pytest.raises(SlackApiError):
        client.views_open(
            trigger_id="t",
            view={
                "type": "modal",
                "title": {"type": "plain_text", "text": "x" * 30},
                "blocks": [{"type": "divider"}],
            },
        )
    assert {p.split(":")[0] for p in slack_stub.invalid} == {"chat.postMessage", "views.open"}
    assert any("title must be between 1 and 24" in p for p in slack_stub.invalid)
    # The autouse check would fail this test on them: they were meant, so they are taken off.
    assert slack_stub.invalid == INVALID_PAYLOADS
    INVALID_PAYLOADS.clear()

    SlackGateway(client).post_message("C0OPS", "card", blocks=too_long)
    assert [m["text"] for m in slack_stub.posted()] == ["card"]
    assert INVALID_PAYLOADS == []
