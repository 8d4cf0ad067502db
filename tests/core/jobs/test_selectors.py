"""Label selectors as PodDisruptionBudgets and workloads write them: every shape, no network."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.jobs.common import selector_matches, selector_query
from bot.core.jobs.drain import blocking_pdbs

LABELS = {"app": "web", "tier": "front", "canary": ""}


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ({}, True),  # an empty selector selects every pod of the namespace
        (None, False),  # no selector selects nothing
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchLabels": {"other": "x"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "mid"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "canary", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, False),
        (  # matchLabels AND matchExpressions: both must hold
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}],
            },
            False,
        ),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}],
            },
            True,
        ),
    ],
)
def test_a_selector_selects_exactly_the_pods_kubernetes_would(
    selector: dict[str, Any] | None, selected: bool
) -> None:
    assert selector_matches(selector, LABELS) is selected


def test_a_pod_without_labels_is_selected_only_by_the_empty_selector() -> None:
    assert selector_matches({}, None) is True
    assert selector_matches({"matchLabels": {"app": "web"}}, None) is False
    assert selector_matches({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {}) is True


def test_the_budgets_blocking_a_pod_are_those_whose_selector_matches_its_labels() -> None:
    pdbs = [
        {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}},
        {"metadata": {"name": "all"}, "spec": {"selector": {}}},
        {"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": {"app": "db"}}}},
        {"metadata": {"name": "none"}, "spec": {}},
    ]
    assert [p["metadata"]["name"] for p in blocking_pdbs(pdbs, LABELS)] == ["web", "all"]


def test_a_selector_becomes_the_label_selector_query_kubectl_would_send() -> None:
    selector = {
        "matchLabels": {"tier": "front", "app": "web"},
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["b", "a"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "managed", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    assert selector_query(selector) == "app=web,tier=front,zone in (a,b),track notin (canary),managed,!legacy"
