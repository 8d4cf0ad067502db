"""Paginated lists: every object exactly once, one consistent version across pages."""

from __future__ import annotations

import contextlib
import json

from kubernetes import client

from bot.core.snapshots.projection import list_total
from tests.contract.workloads import pending_pod
from tests.support.backends import Backend


def test_a_paginated_list_returns_every_object_exactly_once(backend: Backend) -> None:
    core = client.CoreV1Api(backend.api)
    ns = backend.namespace
    names = [f"pod-{i:02d}" for i in range(7)]
    for name in names:
        core.create_namespaced_pod(ns, pending_pod(name))
    path = f"/api/v1/namespaces/{ns}/pods"

    pages = []
    for page in backend.bot().list_pages(path, limit=3):
        pages.append(page)
        if len(pages) == 1:
            # Written after the first page: a consistent list does not show it.
            core.create_namespaced_pod(ns, pending_pod("pod-late"))

    seen = [item["metadata"]["name"] for page in pages for item in page.items]
    assert seen == names  # key order, each once, the late pod absent
    assert [len(p.items) for p in pages] == [3, 3, 1]
    assert [bool(p.continue_token) for p in pages] == [True, True, False]
    assert len({p.resource_version for p in pages}) == 1

    # The official client sees the same pages, and how many items remain after the first.
    first = core.list_namespaced_pod(ns, limit=3)
    assert [p.metadata.name for p in first.items] == names[:3]
    assert first.metadata.remaining_item_count == 5
    rest = core.list_namespaced_pod(ns, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == [*names[3:], "pod-late"]
    assert rest.metadata._continue is None
    assert rest.metadata.remaining_item_count is None

    # With a selector the server cannot count what remains, so it does not say.
    selected = core.list_namespaced_pod(ns, limit=3, label_selector="contract=list")
    assert selected.metadata._continue
    assert selected.metadata.remaining_item_count is None

    # kubectl pages the same way (--chunk-size) and prints every pod once.
    result = backend.kubectl("get", "pods", "-n", ns, "--chunk-size=2", "-o", "name")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [f"pod/{n}" for n in [*names, "pod-late"]]


def test_each_page_says_how_many_items_remain_as_the_server_counts_them(backend: Backend) -> None:
    """`remainingItemCount` reaches the bot's pages, and through its list helper process too: the
    terminal's progress display shows a list's total from it (`list_total`)."""
    core = client.CoreV1Api(backend.api)
    ns = backend.namespace
    for i in range(7):
        core.create_namespaced_pod(ns, pending_pod(f"pod-{i:02d}"))
    path = f"/api/v1/namespaces/{ns}/pods"
    cluster = backend.bot()

    pages = list(cluster.list_pages(path, limit=3))
    assert [(len(p.items), p.remaining) for p in pages] == [(3, 4), (3, 1), (1, None)]
    seen = 0
    totals = []
    for page in pages:
        seen += len(page.items)
        totals.append(list_total(seen, page))
    assert totals == [7, 7, 7]

    with contextlib.closing(
        cluster.map_pages(path, limit=3, item_type=dict, transform=lambda items: json.dumps(items).encode())
    ) as mapped:
        assert [(p.count, p.remaining) for p in mapped] == [(3, 4), (3, 1), (1, None)]

    # A selector the server cannot count past: no total until the last page.
    selected = list(cluster.list_pages(path, {"labelSelector": "contract=list"}, limit=3))
    assert [(len(p.items), p.remaining) for p in selected] == [(3, None), (3, None), (1, None)]
    assert list_total(3, selected[0]) is None
    assert list_total(7, selected[-1]) == 7  # the last page: what was read is all there is
