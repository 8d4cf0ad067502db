"""The modal a job's question opens for an answer that needs a reason (an AKS override, a
blue-green rollback…): Slack counts the characters the bot keeps, so no reason is cut unseen."""

from __future__ import annotations

from bot.frontdoor.slack.choices import reason_view
from bot.frontdoor.slack.stepbuttons import REASON_LIMIT, submitted_reason


def test_the_reason_field_stops_where_the_bot_stops_keeping() -> None:
    view = reason_view("choice:run|1|step|override", "Override AKS's API check", {"channel": "C1"})
    (field,) = [b for b in view["blocks"] if b.get("block_id") == "reason"]
    assert field["element"]["max_length"] == REASON_LIMIT
    assert field["element"]["multiline"] is True
    typed = "x" * REASON_LIMIT
    submitted = {
        "state": {"values": {"reason": {"typed": {"type": "plain_text_input", "value": f"  {typed} "}}}}
    }
    assert submitted_reason(submitted) == typed
