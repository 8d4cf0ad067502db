"""deploy/rbac.yaml on the real control plane: the bot's ServiceAccount may do exactly what its
features need, and a call outside the role is refused by the API (403) and reported clearly.

The contract suite (tests/contract) runs every operation on the real backend with this role's
token; here the role itself is checked, rule by rule, and the refusals are shown.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.errors import ClusterForbidden
from bot.records import ClusterConfig
from tests.support.backends import RBAC, bot_role_kubeconfig, token_kubeconfig
from tests.support.bot_process import bot_command
from tests.support.testbed import RealCluster, fake_node

pytestmark = pytest.mark.testbed

USER = "system:serviceaccount:upgrade-bot:upgrade-bot"

#: (verb, API group, resource) — everything the role grants, and why.
GRANTED = {
    # snapshot
    *((verb, "", res) for verb in ("get", "list") for res in ("nodes", "namespaces", "pods", "events")),
    *(
        (verb, "apps", res)
        for verb in ("get", "list")
        for res in ("deployments", "daemonsets", "statefulsets", "replicasets")
    ),
    ("get", "policy", "poddisruptionbudgets"),
    ("list", "policy", "poddisruptionbudgets"),
    ("patch", "", "nodes"),  # cordon, uncordon
    ("create", "", "pods/eviction"),  # drain
    ("patch", "apps", "deployments"),  # rollout restart
    ("watch", "", "pods"),  # rollout streaming
    ("watch", "", "events"),
    ("watch", "apps", "deployments"),
    ("watch", "", "nodes"),  # watches (issue 13)
    ("watch", "apps", "daemonsets"),
    ("watch", "apps", "statefulsets"),
}

#: A sample of what the bot must never do; each is a single API call away from the granted ones.
REFUSED = [
    ("delete", "", "pods", ""),
    ("create", "", "pods", ""),
    ("create", "", "pods", "exec"),
    ("patch", "", "pods", ""),
    ("delete", "", "nodes", ""),
    ("update", "", "nodes", ""),
    ("patch", "", "nodes", "status"),
    ("list", "", "secrets", ""),
    ("get", "", "configmaps", ""),
    ("update", "apps", "deployments", ""),
    ("delete", "apps", "deployments", ""),
    ("patch", "apps", "deployments", "scale"),
    ("patch", "apps", "daemonsets", ""),
    ("patch", "apps", "statefulsets", ""),
    ("watch", "apps", "replicasets", ""),
    ("watch", "", "namespaces", ""),
    ("delete", "policy", "poddisruptionbudgets", ""),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", ""),
    ("impersonate", "", "serviceaccounts", ""),
]


@pytest.fixture(scope="module")
def bot_kubeconfig(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bot_role_kubeconfig(real_cluster, tmp_path_factory.mktemp("role") / "kubeconfig")


@pytest.fixture
def bot_api(bot_kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(bot_kubeconfig), persist_config=False)
    with api:
        yield api


def _allowed(api: client.ApiClient, verb: str, group: str, resource: str, sub: str = "") -> bool:
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": sub,
                    "namespace": "default",
                }
            },
        }
    )
    return bool(review.status.allowed)


def test_the_role_grants_exactly_what_the_features_need(bot_api: client.ApiClient) -> None:
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    granted = {
        (verb, group, resource)
        for rule in role["rules"]
        if "resources" in rule
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted == GRANTED  # a new verb needs a reason here and in deploy/rbac.yaml
    assert not any(
        "*" in rule.get(key, []) for rule in role["rules"] for key in ("verbs", "resources", "apiGroups")
    )

    # The API server agrees: every grant holds for the ServiceAccount's token ...
    for verb, group, resource in sorted(GRANTED):
        name, _, sub = resource.partition("/")
        assert _allowed(bot_api, verb, group, name, sub), (verb, group, resource)
    # ... and the neighbouring calls are refused.
    for verb, group, resource, sub in REFUSED:
        assert not _allowed(bot_api, verb, group, resource, sub), (verb, group, resource, sub)


def test_a_call_outside_the_role_is_refused_with_a_clear_message(
    real_cluster: RealCluster, bot_kubeconfig: Path
) -> None:
    node = "outside-role-check"
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(real_cluster.kubeconfig)))
    core.create_node(body=fake_node(node))
    bot = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=bot_kubeconfig))
    try:
        with pytest.raises(ClusterForbidden) as read:
            bot.get_json("/api/v1/namespaces/upgrade-bot/secrets")
        assert read.value.status == 403
        assert read.value.user_message == (
            "cluster testbed: the bot is not allowed to GET /api/v1/namespaces/upgrade-bot/secrets "
            f'(secrets is forbidden: User "{USER}" cannot list resource "secrets" in API group "" '
            'in the namespace "upgrade-bot")'
        )
        with pytest.raises(ClusterForbidden) as write:
            bot.send_json("DELETE", f"/api/v1/nodes/{node}", {})
        assert (
            'cannot delete resource "nodes" in API group "" at the cluster scope' in write.value.user_message
        )
        assert core.read_node(node).metadata.name == node  # refused, so still there
    finally:
        bot.close()
        core.delete_node(node)
        core.api_client.close()


def test_the_bot_reports_a_role_that_is_missing_clearly(real_cluster: RealCluster, tmp_path: Path) -> None:
    """A ServiceAccount bound to nothing: every list is refused; the snapshot names each gap."""
    real_cluster.kubectl("create", "namespace", "upgrade-bot", check=False)
    real_cluster.kubectl("create", "serviceaccount", "unbound", "-n", "upgrade-bot", check=False)
    token = real_cluster.kubectl("create", "token", "unbound", "-n", "upgrade-bot").stdout.strip()
    kubeconfig = token_kubeconfig(real_cluster, token, tmp_path / "unbound.kubeconfig")
    cfg = tmp_path / "upgrade-bot.yaml"
    cfg.write_text(
        f"data_dir: {tmp_path / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
        f"clusters:\n  testbed:\n    kubeconfig: {kubeconfig}\n    context: bot\n"
    )
    result = subprocess.run(
        [*bot_command(), "snapshot", "pre", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "Traceback" not in out
    for resource in ("nodes", "pods", "deployments", "events"):
        assert f"gap: {resource}: forbidden by the bot's RBAC role" in result.stdout, result.stdout
