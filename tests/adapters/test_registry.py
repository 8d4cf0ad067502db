"""The OCI distribution client (`bot.adapters.registry`) against the real registry (distribution
v3, built by scripts/registry/build): a present tag, a missing tag, a registry that answers 401
with a Bearer challenge (its token service in tests/support/registry.py), an unreachable one."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.adapters.registry import RegistryClient, load_docker_config, parse_challenge, parse_image
from tests.support.registry import PASSWORD, SERVICE, USER, Registry


def _docker_config(tmp_path: Path, host: str, user: str, password: str) -> Path:
    path = tmp_path / "config.json"
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


def test_a_pushed_tag_is_present_with_its_digest(oci_registry: Callable[..., Registry]) -> None:
    registry = oci_registry()
    digest = registry.push("eks/kube-proxy", "v1.30.14-eksbuild.8")

    answer = RegistryClient().ask(f"{registry.host}/eks/kube-proxy:v1.30.14-eksbuild.8")

    assert answer.status == "present"
    assert answer.digest == digest


def test_a_tag_never_pushed_is_missing(oci_registry: Callable[..., Registry]) -> None:
    registry = oci_registry()
    registry.push("eks/kube-proxy", "v1.30.14-eksbuild.8")

    client = RegistryClient()
    assert client.ask(f"{registry.host}/eks/kube-proxy:v1.30.14-eksbuild.9").status == "missing"
    # A repository the registry has never seen is missing too (NAME_UNKNOWN).
    assert client.ask(f"{registry.host}/eks/coredns:v1.11.4-eksbuild.2").status == "missing"


def test_a_digest_reference_is_asked_as_such(oci_registry: Callable[..., Registry]) -> None:
    registry = oci_registry()
    digest = registry.push("team/app", "1.0")

    client = RegistryClient()
    assert client.ask(f"{registry.host}/team/app@{digest}").status == "present"
    assert client.ask(f"{registry.host}/team/app@sha256:{'0' * 64}").status == "missing"


def test_a_token_registry_is_answered_with_the_docker_configs_credentials(
    oci_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    registry = oci_registry(token=True)
    registry.push("mirror/istio/proxyv2", "1.22.3")
    assert registry.tokens is not None
    credentials = load_docker_config(_docker_config(tmp_path, registry.host, USER, PASSWORD))
    client = RegistryClient(credentials=credentials)

    assert client.ask(f"{registry.host}/mirror/istio/proxyv2:1.22.3").status == "present"
    assert client.ask(f"{registry.host}/mirror/istio/proxyv2:1.23.0").status == "missing"

    # The 401's challenge named the token service, the service and the pull scope, and the client
    # sent the docker config's user to it; the second image reused the repository's token.
    auth, query = registry.tokens.requests[-1]
    assert query == {"service": SERVICE, "scope": "repository:mirror/istio/proxyv2:pull"}
    assert base64.b64decode(auth.removeprefix("Basic ")).decode() == f"{USER}:{PASSWORD}"
    assert len([r for r in registry.tokens.requests if r[1].get("scope", "").endswith(":pull")]) == 1


def test_an_anonymous_token_registry_needs_no_credentials(oci_registry: Callable[..., Registry]) -> None:
    registry = oci_registry(token=True, anonymous=True)
    registry.push("library/busybox", "1.36")
    assert registry.tokens is not None

    assert RegistryClient().ask(f"{registry.host}/library/busybox:1.36").status == "present"
    assert registry.tokens.requests[-1][0] == ""


def test_a_token_registry_without_credentials_is_denied_not_missing(
    oci_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    registry = oci_registry(token=True)
    registry.push("private/app", "2.0")

    answer = RegistryClient().ask(f"{registry.host}/private/app:2.0")
    assert answer.status == "denied"
    assert (
        answer.detail == f"HTTP 401: {registry.host} wants bearer credentials and the docker config has none"
    )

    wrong = load_docker_config(_docker_config(tmp_path, registry.host, USER, "wrong"))
    answer = RegistryClient(credentials=wrong).ask(f"{registry.host}/private/app:2.0")
    assert answer.status == "denied"
    assert "refused" in answer.detail


def test_an_unreachable_registry_is_unreachable_never_missing() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused
        answer = RegistryClient(timeout=2).ask(f"127.0.0.1:{port}/eks/kube-proxy:v1.30.14-eksbuild.8")
    assert answer.status == "unreachable"
    assert f"127.0.0.1:{port}" in answer.detail


@pytest.mark.parametrize(
    ("text", "registry", "repository", "reference"),
    [
        ("nginx", "docker.io", "library/nginx", "latest"),
        ("bitnami/redis:7.2", "docker.io", "bitnami/redis", "7.2"),
        (
            "602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/kube-proxy:v1.29.15-minimal-eksbuild.16",
            "602401143452.dkr.ecr.eu-west-1.amazonaws.com",
            "eks/kube-proxy",
            "v1.29.15-minimal-eksbuild.16",
        ),
        ("localhost:5000/a/b", "localhost:5000", "a/b", "latest"),
        (f"registry.k8s.io/pause@sha256:{'a' * 64}", "registry.k8s.io", "pause", f"sha256:{'a' * 64}"),
    ],
)
def test_image_references_split_as_docker_does(
    text: str, registry: str, repository: str, reference: str
) -> None:
    ref = parse_image(text)
    assert (ref.registry, ref.repository, ref.reference) == (registry, repository, reference)


@pytest.mark.parametrize("text", ["UPPER/case:1", "a/b:bad tag", "a/b@sha256:short", ""])
def test_a_text_that_is_not_an_image_reference_says_why(text: str) -> None:
    with pytest.raises(ValueError, match="not"):
        parse_image(text)


def test_docker_config_reads_auth_and_username_entries(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "auths": {
                    "https://index.docker.io/v1/": {"auth": base64.b64encode(b"hub:pw:with:colons").decode()},
                    "artifactory.example.com": {"username": "u", "password": "p"},
                    "ghcr.io": {},
                },
                "credsStore": "desktop",
            }
        )
    )
    assert load_docker_config(path) == {
        "docker.io": ("hub", "pw:with:colons"),
        "artifactory.example.com": ("u", "p"),
    }


def test_a_broken_docker_config_names_the_entry_not_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"auths": {"r.example": {"auth": "bm90LWEtcGFpcg=="}}}))  # "not-a-pair"
    with pytest.raises(ValueError, match=r"auths\['r.example'\].auth") as info:
        load_docker_config(path)
    assert "not-a-pair" not in str(info.value)


def test_a_bearer_challenge_is_parsed() -> None:
    assert parse_challenge(
        'Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull"'
    ) == (
        "bearer",
        {"realm": "https://auth.example/token", "service": "reg", "scope": "repository:a/b:pull"},
    )


def test_a_registry_found_down_is_not_waited_for_again_for_its_other_images() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        client = RegistryClient(timeout=2)
        first = client.ask(f"127.0.0.1:{port}/a:1")
        s.listen()  # now it would accept: the client does not ask again within this check
        second = client.ask(f"127.0.0.1:{port}/b:2")
    assert first.status == second.status == "unreachable"
    assert second.detail == first.detail
