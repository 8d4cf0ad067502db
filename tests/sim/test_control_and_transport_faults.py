"""The control endpoint plays the outside world, and the transport misbehaves on request."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from bot.sim import SimCluster

Api = Callable[[SimCluster], Any]


def _call(sim: SimCluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        sim.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def test_the_http_control_endpoint_replaces_a_node_group_the_way_the_pipeline_does(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0)
    old = set(sim.control.status()["nodeGroups"]["workers"]["nodes"])
    status, op = _call(sim, "POST", "/sim/nodegroups/workers/replace", {"version": "1.30.2"})
    assert status == 202
    assert op["state"] == "InProgress"
    _call(sim, "POST", "/sim/advance", {"seconds": 600})
    status, done = _call(sim, "GET", f"/sim/operations/{op['id']}")
    assert done["state"] == "Successful", done
    groups = _call(sim, "GET", "/sim/status")[1]["nodeGroups"]
    new = set(groups["workers"]["nodes"])
    assert groups["workers"]["version"] == "1.30.2"
    assert len(new) == 3
    assert not (new & old)
    kubelets = {sim.core.store.get("nodes", "", n)["status"]["nodeInfo"]["kubeletVersion"][:7] for n in new}  # type: ignore[index]
    assert kubelets == {"v1.30.2"}
    web = [e for e in sim.core.store.entries("pods", "default") if e.labels.get("app") == "web"]
    assert len(web) == 3
    assert all(e.fields["spec.nodeName"] in new for e in web)
    assert any("draining" in step for step in done["steps"])


def test_a_control_plane_upgrade_changes_version_after_its_duration(
    sim_factory: Callable[..., SimCluster],
) -> None:
    sim = sim_factory("small", speed=0)
    op = sim.control.upgrade_control_plane("1.30.2", duration="10m")
    with urllib.request.urlopen(sim.url + "/version", timeout=10) as response:
        assert json.loads(response.read())["gitVersion"].startswith("v1.29.4")
    sim.control.advance("10m")
    with urllib.request.urlopen(sim.url + "/version", timeout=10) as response:
        version = json.loads(response.read())
    assert version["gitVersion"].startswith("v1.30.2-eks-")
    assert version["minor"] == "30+"
    assert sim.control.operation(op["id"])["state"] == "Successful"


def test_injected_faults_are_listed_and_cleared(sim_factory: Callable[..., SimCluster]) -> None:
    sim = sim_factory("small", speed=0)
    status, created = _call(
        sim,
        "POST",
        "/sim/faults",
        {"type": "not_ready", "match": {"namespace": "shop", "labels": {"app": "api"}}},
    )
    assert status == 201
    sim.control.advance(5)
    pods = [e.obj() for e in sim.core.store.entries("pods", "shop") if e.labels.get("app") == "api"]
    assert all(not c["ready"] for p in pods for c in p["status"]["containerStatuses"])
    assert [f["id"] for f in _call(sim, "GET", "/sim/faults")[1]] == [created["id"]]
    assert _call(sim, "DELETE", f"/sim/faults/{created['id']}")[0] == 200
    sim.control.advance(5)
    pods = [e.obj() for e in sim.core.store.entries("pods", "shop") if e.labels.get("app") == "api"]
    assert all(c["ready"] for p in pods for c in p["status"]["containerStatuses"])
    assert _call(sim, "POST", "/sim/faults", {"type": "bogus"})[0] == 400


def test_a_fraction_of_requests_fail_with_500_or_429_when_asked(
    sim_small: SimCluster, sim_kubeconfig: Callable[[SimCluster], Any]
) -> None:
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(
        config_file=str(sim_kubeconfig(sim_small)), client_configuration=configuration
    )
    # No client-side retries: urllib3 would otherwise honour Retry-After and hide the 429.
    configuration.retries = urllib3.Retry(total=0)
    with k8s_client.ApiClient(configuration) as api:
        _throttled_then_flaky(sim_small, k8s_client.CoreV1Api(api))


def _throttled_then_flaky(sim_small: SimCluster, v1: Any) -> None:
    sim_small.control.set_transport(error_rate=1.0, error_status=429, retry_after=3)
    with pytest.raises(ApiException) as throttled:
        v1.list_namespace()
    assert throttled.value.status == 429
    assert throttled.value.headers["Retry-After"] == "3"
    sim_small.control.set_transport(error_rate=0.5, error_status=500)
    outcomes = []
    for _ in range(40):
        try:
            v1.list_namespace()
            outcomes.append(200)
        except ApiException as exc:
            outcomes.append(exc.status)
    assert set(outcomes) == {200, 500}
    sim_small.control.set_transport()
    assert v1.list_namespace().items


def test_slow_responses_are_slow(sim_small: SimCluster) -> None:
    sim_small.control.set_transport(latency=0.3)
    started = time.monotonic()
    with urllib.request.urlopen(sim_small.url + "/api/v1/namespaces", timeout=10) as response:
        response.read()
    assert time.monotonic() - started >= 0.3
    with urllib.request.urlopen(sim_small.url + "/sim/status", timeout=10) as response:
        assert json.loads(response.read())["scenario"] == "small"


def test_dropping_watches_ends_open_streams_cleanly(sim_small: SimCluster) -> None:
    done = threading.Event()
    lines: list[bytes] = []

    def watch() -> None:
        with urllib.request.urlopen(
            sim_small.url + "/api/v1/pods?watch=true&timeoutSeconds=60", timeout=30
        ) as response:
            lines.extend(response.readlines())
        done.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    sim_small.wait_for(lambda: any(b.watchers for b in sim_small.core.store.buckets.values()), timeout=10)
    assert sim_small.control.drop_watches() == 1
    assert done.wait(10)
    thread.join(timeout=5)
    assert lines
    assert all(json.loads(line)["type"] == "ADDED" for line in lines)
