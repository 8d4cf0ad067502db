"""Slack's payload shapes (`bot.frontdoor.payloads`) and the button value decoders: what Slack
sends passes, what it does not is refused with a reason naming the field."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from bot.core.jobs.service import choice_value, parse_choice_value
from bot.core.runs.machine import ButtonRef
from bot.frontdoor.payloads import INTERACTIVE, MalformedPayload, check
from tests.support.signing import block_actions_body, view_submission_body


def _payload(body: bytes) -> dict[str, object]:
    document: dict[str, object] = json.loads(urllib.parse.parse_qs(body.decode())["payload"][0])
    return document


def test_what_slack_sends_fits_for_any_callback_id() -> None:
    check(
        _payload(block_actions_body(user="U1", value="r|s|1", response_url="http://x", trigger_id="t")),
        INTERACTIVE,
    )
    for callback_id in ("job_choice_reason", "gate_confirm", "gate_reject_reason", "a-new-modal"):
        values = {"why": {"typed": {"type": "plain_text_input", "value": None}}}
        check(
            _payload(
                view_submission_body(
                    user="U1", callback_id=callback_id, private_metadata="{}", values=values, trigger_id="t"
                )
            ),
            INTERACTIVE,
        )


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"callback_id": 5}, "$.view.callback_id"),
        (
            {"state": {"values": {"why": {"typed": {"type": "plain_text_input", "value": "x" * 3001}}}}},
            "value",
        ),
        (
            {"state": {"values": {"why": {"typed": {"type": "static_select", "selected_option": {}}}}}},
            "value",
        ),
        ({"private_metadata": ["x"]}, "$.view.private_metadata"),
    ],
)
def test_a_view_out_of_shape_is_refused_naming_the_field(change: dict[str, object], where: str) -> None:
    payload = _payload(
        view_submission_body(user="U1", callback_id="c", private_metadata="", values={}, trigger_id="t")
    )
    view = payload["view"]
    assert isinstance(view, dict)
    view.update(change)
    with pytest.raises(MalformedPayload, match=where.replace("$", r"\$").replace("[", r"\[")):
        check(payload, INTERACTIVE)


def test_an_unknown_interaction_type_or_a_user_as_a_string_is_refused() -> None:
    with pytest.raises(MalformedPayload):
        check({"type": "block_suggestion", "user": {"id": "U1"}}, INTERACTIVE)
    with pytest.raises(MalformedPayload, match=r"\$.user"):
        check({"type": "shortcut", "user": "U1", "callback_id": "c"}, INTERACTIVE)


@pytest.mark.parametrize(
    "value", ["x|y|" + "9" * 5000, "r|s|²", "r|s|١", "r|s|-1", "r|s| 1", "r|s|1|x", "r|s|"]
)
def test_a_gate_button_value_not_made_by_encode_decodes_to_none(value: str) -> None:
    assert ButtonRef.decode(value, "approve") is None


def test_a_gate_button_value_round_trips() -> None:
    ref = ButtonRef(run_id="r-1", step_id="drain-pool", epoch=12, decision="reject")
    assert ButtonRef.decode(ref.encode(), "reject") == ref


@pytest.mark.parametrize("value", ["²|k|wait", "١|k|wait", "9" * 5000 + "|k|wait", "1|k", "1|k|wait|x"])
def test_a_choice_value_not_made_by_choice_value_parses_to_none(value: str) -> None:
    assert parse_choice_value(value) is None


def test_a_choice_value_round_trips() -> None:
    assert parse_choice_value(choice_value(7, "drain-timeout:node-1:2", "wait")) == (
        7,
        "drain-timeout:node-1:2",
        "wait",
    )


def test_a_lone_surrogate_anywhere_is_refused() -> None:
    click = _payload(block_actions_body(user="U1", value="r|s|1", response_url="http://x", trigger_id="t"))
    click["trigger_id"] = "\ud800"
    with pytest.raises(MalformedPayload, match="lone surrogate"):
        check(click, INTERACTIVE)
