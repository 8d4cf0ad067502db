"""The official Python client (kubernetes 36.x) gets real list, watch, patch and error semantics."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from bot.sim import SimCluster

Api = Callable[[SimCluster], Any]


def _raw(response: Any) -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads(response.data)
        return loaded
    finally:
        response.release_conn()


def _status(exc: ApiException) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(exc.body)
    return loaded


def test_a_paginated_list_across_a_token_expiry_is_restarted_and_completes(
    sim_small: SimCluster, kube_api: Api
) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    first = _raw(v1.list_pod_for_all_namespaces(limit=5, _preload_content=False))
    assert len(first["items"]) == 5
    token = first["metadata"]["continue"]
    assert first["metadata"]["remainingItemCount"] == sim_small.core.store.count("pods") - 5
    # The cluster moves on and the history behind the token is compacted away.
    v1.patch_namespaced_config_map("shop-config", "shop", {"data": {"currency": "JPY"}})
    sim_small.control.compact()
    with pytest.raises(ApiException) as expired:
        v1.list_pod_for_all_namespaces(limit=5, _continue=token, _preload_content=False)
    assert expired.value.status == 410
    status = _status(expired.value)
    assert status["reason"] == "Expired"
    assert status["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result."
    )
    # The Status carries a token that continues at the latest version (inconsistent, by choice).
    assert status["metadata"]["continue"]
    names: list[str] = []
    token = ""
    while True:
        page = _raw(v1.list_pod_for_all_namespaces(limit=5, _continue=token or None, _preload_content=False))
        names.extend(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert len(names) == len(set(names)) == sim_small.core.store.count("pods")


def test_pages_of_one_list_share_its_resource_version_and_hide_later_changes(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    first = _raw(v1.list_namespaced_pod("shop", limit=2, _preload_content=False))
    rv = first["metadata"]["resourceVersion"]
    listed = [p["metadata"]["name"] for p in first["items"]]
    # Changes after the first page: a pod goes away, another gets a new label.
    v1.delete_namespaced_pod("db-1", "shop", grace_period_seconds=0)
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"touched": "yes"}}})
    rest = _raw(
        v1.list_namespaced_pod(
            "shop", limit=10, _continue=first["metadata"]["continue"], _preload_content=False
        )
    )
    assert rest["metadata"]["resourceVersion"] == rv
    by_name = {p["metadata"]["name"]: p for p in rest["items"]}
    assert set(listed) | set(by_name) == {p["metadata"]["name"] for p in first["items"]} | set(by_name)
    assert "db-1" in by_name, "a pod deleted after the first page is still in the consistent list"
    assert "touched" not in by_name["db-0"]["metadata"].get("labels", {})
    assert all(int(p["metadata"]["resourceVersion"]) <= int(rv) for p in rest["items"])


def test_a_watch_receives_bookmarks_that_carry_only_a_resource_version(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, bookmark_interval=0.3)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    rv = v1.list_namespaced_pod("default").metadata.resource_version
    # As on kube-apiserver, a bookmark is sent only once the version moved past what the watch has
    # seen: a change elsewhere (not a pod) moves it.
    v1.patch_namespaced_config_map("shop-config", "shop", {"data": {"currency": "JPY"}})
    w = k8s_watch.Watch()
    events = []
    for event in w.stream(
        v1.list_namespaced_pod, "default", resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=10
    ):
        events.append(event)
        if event["type"] == "BOOKMARK":
            w.stop()
    bookmark = events[-1]["raw_object"]
    assert events[-1]["type"] == "BOOKMARK"
    assert bookmark == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": bookmark["metadata"]["resourceVersion"]},
        "spec": {"containers": None},  # the empty Pod struct, serialized as kube-apiserver does
        "status": {},
    }
    assert int(bookmark["metadata"]["resourceVersion"]) > int(rv)
    # The client's Watch keeps a bookmark's version from 36 on; the bot pins 35 (pyproject.toml) and
    # reads the version from the raw object, as above, so nothing here depends on which one runs.


def test_a_watch_from_a_compacted_version_gets_410_and_recovers_by_relisting(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    old_rv = v1.list_namespaced_pod("shop").metadata.resource_version
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"step": "1"}}})
    # Compaction keeps its own revision (as etcd does), so it takes two changes for the first
    # change after old_rv to be gone.
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"step": "1b"}}})
    sim.control.compact()
    with pytest.raises(ApiException) as gone:
        for _ in k8s_watch.Watch().stream(
            v1.list_namespaced_pod, "shop", resource_version=old_rv, timeout_seconds=5
        ):
            pass
    assert gone.value.status == 410
    assert "too old resource version" in str(gone.value.reason)
    # Recovery: list again, watch from the new version, and see the next change.
    fresh = v1.list_namespaced_pod("shop")
    assert fresh.metadata.resource_version != old_rv
    stream = k8s_watch.Watch()
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"step": "2"}}})
    seen = None
    for event in stream.stream(
        v1.list_namespaced_pod, "shop", resource_version=fresh.metadata.resource_version, timeout_seconds=5
    ):
        if event["raw_object"]["metadata"]["name"] == "db-0":
            seen = event
            stream.stop()
    assert seen is not None
    assert seen["type"] == "MODIFIED"
    assert seen["raw_object"]["metadata"]["labels"]["step"] == "2"


def test_a_strategic_merge_patch_cordons_and_uncordons_a_node(sim_small: SimCluster, kube_api: Api) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    node = sorted(sim_small.control.status()["nodeGroups"]["workers"]["nodes"])[0]
    before = v1.read_node(node)
    patched = v1.patch_node(node, {"spec": {"unschedulable": True}})
    assert patched.spec.unschedulable is True
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)
    assert patched.metadata.labels == before.metadata.labels
    assert v1.patch_node(node, {"spec": {"unschedulable": None}}).spec.unschedulable is None


def test_an_update_with_a_stale_resource_version_is_a_409_conflict(
    sim_small: SimCluster, kube_api: Api
) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    cm = v1.read_namespaced_config_map("shop-config", "shop")
    cm.data["currency"] = "JPY"
    v1.replace_namespaced_config_map("shop-config", "shop", cm)
    cm.data["currency"] = "USD"
    with pytest.raises(ApiException) as conflict:
        v1.replace_namespaced_config_map("shop-config", "shop", cm)
    assert conflict.value.status == 409
    status = _status(conflict.value)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "shop-config": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert v1.read_namespaced_config_map("shop-config", "shop").data["currency"] == "JPY"


def test_merge_patch_and_json_patch_change_only_what_they_name(sim_small: SimCluster, kube_api: Api) -> None:
    api = kube_api(sim_small)
    v1 = k8s_client.CoreV1Api(api)
    # A merge patch through a client whose Content-Type says so (the client's default headers go
    # last); a dict body otherwise goes as a strategic merge patch, a list as a JSON patch.
    merging = kube_api(sim_small)
    merging.set_default_header("Content-Type", "application/merge-patch+json")
    k8s_client.CoreV1Api(merging).patch_namespaced_config_map(
        "shop-config", "shop", {"data": {"featureFlags": None, "region": "eu"}}
    )
    assert v1.read_namespaced_config_map("shop-config", "shop").data == {"currency": "EUR", "region": "eu"}
    v1.patch_namespaced_config_map(
        "shop-config",
        "shop",
        [
            {"op": "replace", "path": "/data/region", "value": "us"},
            {"op": "add", "path": "/data/tz", "value": "UTC"},
        ],
    )
    assert v1.read_namespaced_config_map("shop-config", "shop").data == {
        "currency": "EUR",
        "region": "us",
        "tz": "UTC",
    }
    with pytest.raises(ApiException) as bad:
        v1.patch_namespaced_config_map(
            "shop-config", "shop", [{"op": "test", "path": "/data/tz", "value": "CET"}]
        )
    assert bad.value.status == 422


def test_selectors_filter_lists_like_the_api_server(sim_small: SimCluster, kube_api: Api) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    node = sorted(sim_small.control.status()["nodeGroups"]["system"]["nodes"])[0]
    on_node = v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    assert {p.spec.node_name for p in on_node} == {node}
    assert {p.metadata.name.rsplit("-", 2)[0] for p in on_node} >= {"coredns"}
    running_elsewhere = v1.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName!={node},status.phase=Running"
    ).items
    assert running_elsewhere
    assert all(p.spec.node_name != node for p in running_elsewhere)
    web = v1.list_namespaced_pod("default", label_selector="app in (web, nope),!missing").items
    assert len(web) == 3
    assert (
        v1.list_namespaced_pod("shop", field_selector="metadata.name=db-0").items[0].metadata.name == "db-0"
    )
    with pytest.raises(ApiException) as bad:
        v1.list_namespaced_pod("shop", field_selector="spec.bogus=1")
    assert bad.value.status == 400
    assert _status(bad.value)["message"] == "field label not supported: spec.bogus"


def test_a_watch_with_a_selector_sees_an_object_leave_it_as_deleted(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    rv = v1.list_namespaced_pod("shop", label_selector="tier=db").metadata.resource_version
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"tier": "db"}}})
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"tier": "cache"}}})
    seen = []
    w = k8s_watch.Watch()
    for event in w.stream(
        v1.list_namespaced_pod, "shop", label_selector="tier=db", resource_version=rv, timeout_seconds=3
    ):
        seen.append((event["type"], event["raw_object"]["metadata"]["labels"].get("tier")))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "db"), ("DELETED", "db")]


def test_watch_list_sends_initial_events_then_a_bookmark_marking_their_end(
    sim_small: SimCluster, kube_api: Api
) -> None:
    api = kube_api(sim_small)
    response = api.call_api(
        "/apis/apps/v1/namespaces/default/deployments",
        "GET",
        query_params=[
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("fieldSelector", "metadata.name=web"),
            ("timeoutSeconds", "1"),
        ],
        header_params={"Accept": "application/json"},
        _preload_content=False,
        _return_http_data_only=True,
    )
    lines = [json.loads(line) for line in response.data.decode().splitlines() if line]
    response.release_conn()
    assert [e["type"] for e in lines[:2]] == ["ADDED", "BOOKMARK"]
    assert lines[0]["object"]["metadata"]["name"] == "web"
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_errors_come_back_as_status_objects(sim_small: SimCluster, kube_api: Api) -> None:
    v1 = k8s_client.CoreV1Api(kube_api(sim_small))
    with pytest.raises(ApiException) as missing:
        v1.read_namespaced_pod("nope", "default")
    assert _status(missing.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    body = {"metadata": {"name": "x"}, "data": {}}
    with pytest.raises(ApiException) as no_namespace:
        v1.create_namespaced_config_map("does-not-exist", body)
    assert no_namespace.value.status == 404
    assert _status(no_namespace.value)["message"] == 'namespaces "does-not-exist" not found'
    v1.create_namespaced_config_map("default", body)
    with pytest.raises(ApiException) as exists:
        v1.create_namespaced_config_map("default", body)
    assert _status(exists.value)["reason"] == "AlreadyExists"


def test_kubectl_style_table_output_is_served_when_asked_for(sim_small: SimCluster, kube_api: Api) -> None:
    api = kube_api(sim_small)
    response = api.call_api(
        "/api/v1/nodes",
        "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
        _preload_content=False,
        _return_http_data_only=True,
    )
    table = _raw(response)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    assert all(row["object"]["kind"] == "PartialObjectMetadata" for row in table["rows"])
    assert {row["cells"][1] for row in table["rows"]} == {"Ready"}


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        # kubectl 1.30 on: v2 first, v2beta1 next, the plain document last.
        ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
         "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2"),
        # kubectl before 1.30: v2beta1 or the plain document.
        ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json", None),
        ("application/json", None),
    ],
)  # fmt: skip
def test_aggregated_discovery_is_served_in_the_version_the_client_asks_for(
    sim_small: SimCluster, kube_api: Api, accept: str, served: str | None
) -> None:
    api = kube_api(sim_small)
    for path, plain in (("/api", "APIVersions"), ("/apis", "APIGroupList")):
        response = api.call_api(
            path, "GET", header_params={"Accept": accept}, _preload_content=False, _return_http_data_only=True
        )
        content_type = response.headers["Content-Type"]
        document = _raw(response)
        if served is None:
            assert content_type == "application/json"
            assert document["kind"] == plain
            continue
        assert content_type == f"application/json;g=apidiscovery.k8s.io;v={served};as=APIGroupDiscoveryList"
        assert document["apiVersion"] == f"apidiscovery.k8s.io/{served}"
        assert document["kind"] == "APIGroupDiscoveryList"
        groups = {item["metadata"].get("name", ""): item["versions"] for item in document["items"]}
        if path == "/api":
            assert list(groups) == [""]
            assert "nodes" in {r["resource"] for r in groups[""][0]["resources"]}
        else:
            assert {"apps", "policy"} <= set(groups)
            assert "" not in groups


def test_history_older_than_the_compaction_window_answers_410(
    sim_factory: Callable[..., SimCluster], kube_api: Api
) -> None:
    sim = sim_factory("small", speed=0, compaction_window=60)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    old_rv = v1.list_namespaced_pod("shop").metadata.resource_version
    v1.patch_namespaced_pod("db-0", "shop", {"metadata": {"labels": {"step": "1"}}})
    sim.control.advance(30)
    events = list(
        k8s_watch.Watch().stream(v1.list_namespaced_pod, "shop", resource_version=old_rv, timeout_seconds=1)
    )
    assert [e["type"] for e in events] == ["MODIFIED"], "still inside the window"
    sim.control.advance(120)
    with pytest.raises(ApiException) as gone:
        for _ in k8s_watch.Watch().stream(
            v1.list_namespaced_pod, "shop", resource_version=old_rv, timeout_seconds=1
        ):
            pass
    assert gone.value.status == 410


def test_logs_honour_since_seconds(sim_factory: Callable[..., SimCluster], kube_api: Api) -> None:
    sim = sim_factory("small", speed=0)
    v1 = k8s_client.CoreV1Api(kube_api(sim))
    sim.control.advance(120)
    pod = next(e.name for e in sim.core.store.entries("pods", "default") if e.labels.get("app") == "web")

    def read(**options: Any) -> list[str]:
        # The 36.x client turns a text body into the repr of its bytes unless left raw.
        response = v1.read_namespaced_pod_log(pod, "default", _preload_content=False, **options)
        try:
            return str(response.data.decode()).splitlines()
        finally:
            response.release_conn()

    recent = read(container="web", since_seconds=25)
    probes = [line for line in recent if "GET /healthz" in line]
    assert 2 <= len(probes) <= 3, recent
    assert len(read(container="web")) > len(recent)
    assert len(read(tail_lines=1)) == 1
