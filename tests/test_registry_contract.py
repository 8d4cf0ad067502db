"""The simulator's OCI registry facade (`bot/sim/world/registry.py`, on `/v2`) answers the calls
IMG001 makes as the real registry does (distribution v3, built by scripts/registry/build): the
same requests, raw and through the bot's client, against both, with statuses, headers and error
bodies compared. The same image (repository and tag) is pushed to the real one and published on
the facade; digests differ (the manifests do), their shape does not."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from bot.adapters.registry import MANIFEST_ACCEPT, RegistryClient
from bot.sim import SimCluster
from tests.support.registry import Registry

ECR = "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _call(base: str, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(base + path, method=method, headers={"Accept": MANIFEST_ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def _shape(status: int, headers: dict[str, str], body: bytes, method: str) -> dict[str, object]:
    """What the client (and a person) relies on, without what differs by nature (dates, digests)."""
    shape: dict[str, object] = {
        "status": status,
        "content-type": headers.get("content-type"),
        "api-version": headers.get("docker-distribution-api-version"),
        "digest": bool(DIGEST.match(headers.get("docker-content-digest", ""))),
        "etag-is-digest": headers.get("etag") == f'"{headers.get("docker-content-digest")}"'
        if "docker-content-digest" in headers
        else None,
        "length": headers.get("content-length") is not None,
    }
    if method == "GET" and status >= 400:
        (error,) = json.loads(body)["errors"]
        detail = re.sub(r"sha256:[0-9a-f]{64}", "sha256:…", str(error["detail"]))
        shape["error"] = (error["code"], error["message"], detail)
    return shape


@pytest.fixture
def both(
    oci_registry: Callable[..., Registry], sim_small: SimCluster
) -> tuple[Registry, SimCluster, dict[str, str]]:
    real = oci_registry()
    real.push("eks/kube-proxy", "v1.30.14-minimal-eksbuild.8")
    assert sim_small.sim is not None
    sim_small.sim.registry.publish(f"{ECR}/eks/kube-proxy:v1.30.14-minimal-eksbuild.8")
    digests = {
        "real": _call(real.url, "HEAD", "/v2/eks/kube-proxy/manifests/v1.30.14-minimal-eksbuild.8")[1][
            "docker-content-digest"
        ],
        "sim": _call(sim_small.url, "HEAD", "/v2/eks/kube-proxy/manifests/v1.30.14-minimal-eksbuild.8")[1][
            "docker-content-digest"
        ],
    }
    return real, sim_small, digests


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(
    "path",
    [
        "/v2/",
        "/v2/eks/kube-proxy/manifests/v1.30.14-minimal-eksbuild.8",
        "/v2/eks/kube-proxy/manifests/{digest}",
        "/v2/eks/kube-proxy/manifests/v1.30.14-minimal-eksbuild.9",
        "/v2/eks/never-pushed/manifests/v1",
        "/v2/eks/kube-proxy/manifests/sha256:" + "0" * 64,
    ],
)
def test_the_facade_answers_the_manifest_calls_as_the_real_registry(
    both: tuple[Registry, SimCluster, dict[str, str]], method: str, path: str
) -> None:
    real, sim, digests = both
    real_answer = _call(real.url, method, path.format(digest=digests["real"]))
    sim_answer = _call(sim.url, method, path.format(digest=digests["sim"]))
    assert _shape(*sim_answer, method) == _shape(*real_answer, method)
    if method == "GET" and real_answer[0] == 200 and path != "/v2/":
        # The body is a manifest of the media type the header says, whose digest is the header's.
        for _, headers, body in (real_answer, sim_answer):
            assert json.loads(body)["mediaType"] == headers["content-type"]


def test_the_bots_client_gets_the_same_answers_from_both(
    both: tuple[Registry, SimCluster, dict[str, str]],
) -> None:
    real, sim, _ = both
    via_real = RegistryClient(endpoints={ECR: real.url})
    via_sim = RegistryClient(endpoints={ECR: sim.url})
    for image in (
        f"{ECR}/eks/kube-proxy:v1.30.14-minimal-eksbuild.8",
        f"{ECR}/eks/kube-proxy:v1.30.14-minimal-eksbuild.9",
        f"{ECR}/eks/never-pushed:v1",
    ):
        assert via_sim.ask(image).status == via_real.ask(image).status, image


def test_the_facade_has_the_images_the_scenario_runs(sim_small: SimCluster) -> None:
    # The cluster pulled its kube-proxy from somewhere: the running tag is there, the next is not.
    status, _, _ = _call(sim_small.url, "HEAD", "/v2/eks/kube-proxy/manifests/v1.29.0-minimal-eksbuild.1")
    assert status == 200
    status, _, _ = _call(sim_small.url, "HEAD", "/v2/eks/kube-proxy/manifests/v1.30.14-minimal-eksbuild.8")
    assert status == 404
