"""Selector parsing and the three patch flavours follow the API server's rules."""

from __future__ import annotations

import pytest

from bot.sim.apiserver.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from bot.sim.apiserver.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
    selector_to_string,
)


def test_label_selectors_accept_equality_sets_existence_and_negation() -> None:
    sel = parse_label_selector("app=web, tier in (front,edge),!canary,track")
    assert sel.matches({"app": "web", "tier": "edge", "track": "stable"})
    assert not sel.matches({"app": "web", "tier": "edge", "track": "stable", "canary": "1"})
    assert not sel.matches({"app": "web", "tier": "back", "track": "stable"})
    assert parse_label_selector("app!=web").matches({})
    assert parse_label_selector("env notin (prod)").matches({"env": "dev"})
    with pytest.raises(SelectorError, match="unable to parse requirement"):
        parse_label_selector("a in (b")


def test_object_selectors_distinguish_nil_from_empty() -> None:
    assert not selector_from_object(None).matches({"app": "web"})
    assert selector_from_object({}).matches({"app": "web"})
    sel = selector_from_object(
        {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    )
    assert sel.matches({"app": "web", "tier": "x"})
    assert not sel.matches({"app": "web"})
    assert selector_to_string({"matchLabels": {"b": "2", "a": "1"}}) == "a=1,b=2"


def test_field_selectors_support_equality_and_inequality_on_declared_fields_only() -> None:
    allowed = ("metadata.name", "spec.nodeName", "status.phase")
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Succeeded", allowed)
    assert sel.matches({"spec.nodeName": "n1", "status.phase": "Running"})
    assert not sel.matches({"spec.nodeName": "n1", "status.phase": "Succeeded"})
    assert parse_field_selector("metadata.name==a\\,b", allowed).matches({"metadata.name": "a,b"})
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.bogus"):
        parse_field_selector("spec.bogus=1", allowed)


def test_strategic_merge_patch_merges_lists_by_their_keys() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b:1"},
            ],
            "tolerations": [{"key": "t1"}],
        },
        "metadata": {"finalizers": ["f1"], "labels": {"keep": "1", "drop": "1"}},
    }
    patched = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
                    {"name": "b", "$patch": "delete"},
                ],
                "tolerations": [{"key": "t2"}],
            },
            "metadata": {"finalizers": ["f2"], "labels": {"drop": None}},
        },
    )
    assert patched["spec"]["containers"] == [
        {"name": "a", "image": "a:2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
    ]
    assert patched["spec"]["tolerations"] == [{"key": "t2"}], "atomic lists are replaced"
    assert patched["metadata"] == {"finalizers": ["f1", "f2"], "labels": {"keep": "1"}}
    assert pod["spec"]["containers"][0]["image"] == "a:1", "the input is not modified"
    replaced = strategic_merge_patch({"spec": {"a": 1, "b": 2}}, {"spec": {"$patch": "replace", "c": 3}})
    assert replaced == {"spec": {"c": 3}}


def test_merge_patch_and_json_patch_follow_their_rfcs() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None}, "l": [3]}) == {
        "a": {"c": 2},
        "l": [3],
    }
    doc = {"a": [1, 2], "b": {"c~d/e": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "remove", "path": "/b/c~0d~1e"},
            {"op": "copy", "from": "/a/0", "path": "/first"},
        ],
    )
    assert out == {"a": [1, 2, 3], "b": {}, "first": 1}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "replace", "path": "/missing", "value": 1}])
