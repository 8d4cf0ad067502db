"""A plan's optional `impact` and `links`: what announcements show, validated with their lines."""

from __future__ import annotations

import json

import pytest

from bot.core.runs.plans import PlanLink, parse_plan
from bot.errors import PlanInvalid
from tests.support.plans import GOOD, PLANS


def test_impact_and_links_parse_and_are_optional() -> None:
    assert parse_plan(GOOD).impact == ""
    assert parse_plan(GOOD).links == ()
    plan = parse_plan(
        GOOD
        + "impact: API restarts twice & pods move\n"
        + "links:\n  - {title: Runbook, url: 'https://wiki.example.com/rb?a=1&b=2'}\n"
    )
    assert plan.impact == "API restarts twice & pods move"
    assert plan.links == (PlanLink(title="Runbook", url="https://wiki.example.com/rb?a=1&b=2"),)


def test_bad_links_and_a_long_impact_are_listed_with_their_lines() -> None:
    text = (
        GOOD
        + f"impact: {'x' * 1600}\n"
        + "links:\n"
        + "  - {title: Runbook, url: 'javascript:alert(1)'}\n"
        + "  - {url: 'https://example.com'}\n"
        + "  - {title: Ticket, url: 'https://t.example.com', kind: jira}\n"
    )
    with pytest.raises(PlanInvalid) as caught:
        parse_plan(text, source="p.yaml")
    errors = caught.value.errors
    assert any(e.startswith("p.yaml:19: impact: at most 1500 characters") for e in errors)
    assert any(e.startswith("p.yaml:21: links[0].url:") and "not an http(s) URL" in e for e in errors)
    assert any(e.startswith("p.yaml:22: links[1].title: missing key") for e in errors)
    assert any(e.startswith("p.yaml:23: links[2].kind: unknown key") for e in errors)


def test_the_schema_describes_links_like_the_validator() -> None:
    schema = json.loads((PLANS / "plan.schema.json").read_text())
    links = schema["properties"]["links"]
    assert links["maxItems"] == 10
    assert links["items"]["required"] == ["title", "url"]
    assert schema["properties"]["impact"]["maxLength"] == 1500
