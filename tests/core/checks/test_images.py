"""IMG001 (`bot.core.checks.images`) end to end: the sim's cluster read over HTTP, its target
kube-proxy image asked of the real registry (distribution v3, `oci_registry`) through the
configuration's `checks.images.endpoints`, and a `--manifests` directory's images asked of a
registry that wants a token and the docker config's credentials."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks import service
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, Report
from bot.core.checks.images import Wanted, image_findings
from bot.core.kube.kubeproxy import documented_image
from bot.records import ClusterConfig, ImageChecks
from bot.sim import SimCluster
from tests.support.registry import PASSWORD, USER, Registry

ECR = "602401143452.dkr.ecr.ap-northeast-1.amazonaws.com"
NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)


@pytest.fixture
def reader(sim_small: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]) -> Iterator[Cluster]:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=sim_kubeconfig(sim_small), context="sim"))
    yield cluster
    cluster.close()


def _check(reader: Cluster, images: ImageChecks) -> Report:
    return service.check_cluster(
        reader, target=None, waivers=[], now=NOW, extras=service.default_extras(images=images)
    )


def _img001(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.id == "IMG001"]


def _target_kube_proxy(reader: Cluster, target: str) -> str:
    ds = reader.get_json("/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy")
    return documented_image(ds["spec"]["template"]["spec"]["containers"][0]["image"], target)


def test_the_target_kube_proxy_missing_from_the_registry_is_required_until_it_is_pushed(
    reader: Cluster, oci_registry: Callable[..., Registry]
) -> None:
    registry = oci_registry()
    images = ImageChecks(verify=True, endpoints={ECR: registry.url})

    report = _check(reader, images)
    wanted = _target_kube_proxy(reader, report.target)
    (missing,) = _img001(report)
    assert (missing.severity, missing.title) == (
        REQUIRED,
        "Images the upgrade rolls out are not in their registries",
    )
    assert missing.objects == (f"{wanted} (kube-proxy for {report.target}, the image `set-image` sets)",)
    assert report.failed

    repository, tag = wanted.removeprefix(f"{ECR}/").split(":")
    registry.push(repository, tag)
    report = _check(reader, images)
    assert _img001(report) == []
    assert "images: 1 asked of their registries, 1 present" in report.notes


def test_an_unreachable_registry_is_a_recommended_could_not_verify_never_a_pass(reader: Cluster) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: refused
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        report = _check(reader, ImageChecks(verify=True, endpoints={ECR: url}))
    (unverified,) = _img001(report)
    assert unverified.severity == RECOMMENDED
    assert unverified.title == "Could not verify that images the upgrade rolls out exist"
    assert "ConnectionRefusedError" in unverified.objects[0]
    assert "images: 1 asked of their registries, 0 present" in report.notes


def test_images_are_not_asked_unless_verify_is_on(reader: Cluster) -> None:
    report = _check(reader, ImageChecks(verify=False, endpoints={ECR: "http://127.0.0.1:9"}))
    assert _img001(report) == []
    assert not any(n.startswith("images:") for n in report.notes)


def test_the_manifests_images_are_asked_of_a_token_registry_with_the_docker_configs_credentials(
    oci_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    registry = oci_registry(token=True)
    registry.push("team/checkout", "4.2.0")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "app.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: checkout, namespace: shop}\n"
        "spec:\n  template:\n    spec:\n"
        f"      initContainers: [{{name: migrate, image: '{registry.host}/team/checkout:4.2.0'}}]\n"
        f"      containers: [{{name: app, image: '{registry.host}/team/checkout:4.3.0'}}]\n"
        "---\napiVersion: batch/v1\nkind: CronJob\nmetadata: {name: report, namespace: shop}\n"
        "spec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n"
        f"          containers: [{{name: r, image: '{registry.host}/team/checkout:4.2.0'}}]\n"
    )
    config = tmp_path / "docker.json"
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    config.write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))

    report = service.check_manifests(
        [tmp_path / "deploy"], target="1.31", images=ImageChecks(verify=True, docker_config=config)
    )

    (missing,) = _img001(report)
    assert missing.severity == REQUIRED
    assert missing.objects == (
        f"{registry.host}/team/checkout:4.3.0 (named in {tmp_path / 'deploy' / 'app.yaml'})",
    )
    assert "images: 2 asked of their registries, 1 present" in report.notes


def test_denied_and_malformed_images_are_could_not_verify() -> None:
    class Denied:
        status = "denied"
        detail = "HTTP 401: r.example wants bearer credentials and the docker config has none"

    def lookup(image: str) -> Denied:
        if image.startswith("BAD"):
            raise ValueError("'BAD' is not a repository name")
        return Denied()

    notes: list[str] = []
    (finding,) = image_findings(
        [Wanted(image="r.example/a:1", why="named in x.yaml"), Wanted(image="BAD", why="named in y.yaml")],
        lookup,
        notes,
    )
    assert finding.severity == RECOMMENDED
    assert finding.objects == (
        "r.example/a:1 (named in x.yaml): HTTP 401: r.example wants bearer credentials and the docker config has none",
        "BAD (named in y.yaml): not an image reference: 'BAD' is not a repository name",
    )


def test_on_the_sim_alone_the_facade_answers_for_the_registry(reader: Cluster, sim_small: SimCluster) -> None:
    # The rehearsal's path: no registry binary, the simulator's /v2 facade in its place.
    images = ImageChecks(verify=True, endpoints={ECR: sim_small.url})
    report = _check(reader, images)
    wanted = _target_kube_proxy(reader, report.target)
    (missing,) = _img001(report)
    assert (missing.severity, missing.objects[0].split(" ")[0]) == (REQUIRED, wanted)

    assert sim_small.sim is not None
    sim_small.sim.registry.publish(wanted)
    assert _img001(_check(reader, images)) == []
