"""deploy/rbac.yaml on the real control plane: the bot's ServiceAccount may do exactly what its
features need, and a call outside the roles is refused by the API (403) and reported clearly.

Two roles: `upgrade-bot-read` (snapshot, diff, watches) and `upgrade-bot-act` (the actions). Every
verb is checked with a read-only token (a ServiceAccount bound to the read role alone, as a team
running the bot read-only has it) and with the bot's own token (both roles), and each refusal too.
The contract suite (tests/contract) runs every operation on the real backend with both roles.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from bot.adapters.kube import Cluster
from bot.core.checks import service as checks
from bot.errors import ClusterForbidden
from bot.records import ClusterConfig
from tests.support.backends import RBAC, bot_role_kubeconfig, token_kubeconfig
from tests.support.bot_process import bot_command
from tests.support.testbed import RealCluster, fake_node

pytestmark = pytest.mark.testbed

USER = "system:serviceaccount:upgrade-bot:upgrade-bot"
READ_ONLY_ACCOUNT = "upgrade-bot-readonly"

#: The GitOps objects (issue 39 item 1, issue 40 item 7): Argo CD Applications, Flux Kustomizations
#: and HelmReleases.
GITOPS = (
    ("argoproj.io", "applications"),
    ("kustomize.toolkit.fluxcd.io", "kustomizations"),
    ("helm.toolkit.fluxcd.io", "helmreleases"),
)

#: (verb, API group, resource) — everything the read role grants, and why.
READ = {
    # snapshot
    *((verb, "", res) for verb in ("get", "list") for res in ("nodes", "pods")),
    ("list", "", "namespaces"),
    ("list", "", "events"),
    *(
        (verb, "apps", res)
        for verb in ("get", "list")
        for res in ("deployments", "daemonsets", "statefulsets", "replicasets")
    ),
    ("list", "policy", "poddisruptionbudgets"),
    # watches: rollout streaming, node upgrades
    ("watch", "", "nodes"),
    ("watch", "", "pods"),
    ("watch", "", "events"),
    ("watch", "apps", "deployments"),
    ("watch", "apps", "daemonsets"),
    ("watch", "apps", "statefulsets"),
    # check: Services, a webhook's Endpoints, webhook configurations
    ("list", "", "services"),
    ("get", "", "endpoints"),
    # check (CERT001): the Istio root certificate's ConfigMap, by that name only ("resource#name")
    ("get", "", "configmaps#istio-ca-root-cert"),
    # check (CERT004): cert-manager Certificates a webhook's inject-ca-from names (status only)
    ("get", "cert-manager.io", "certificates"),
    ("list", "cert-manager.io", "certificates"),
    # app-health and the owners at a gate: Argo CD and Flux objects, read only
    *((verb, group, res) for verb in ("get", "list") for group, res in GITOPS),
    # check: removed APIs in last-applied/managedFields (bot/core/checks/apis.py APPLIED_KINDS)
    *(
        ("list", group, res)
        for group, names in (
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations mutatingwebhookconfigurations "
                "validatingadmissionpolicies validatingadmissionpolicybindings",
            ),
            ("batch", "cronjobs"),
            ("autoscaling", "horizontalpodautoscalers"),
            ("networking.k8s.io", "ingresses ingressclasses networkpolicies servicecidrs"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("apiregistration.k8s.io", "apiservices"),
            ("rbac.authorization.k8s.io", "clusterroles clusterrolebindings roles rolebindings"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("storage.k8s.io", "storageclasses csidrivers volumeattributesclasses"),
            ("node.k8s.io", "runtimeclasses"),
            ("flowcontrol.apiserver.k8s.io", "flowschemas prioritylevelconfigurations"),
            ("resource.k8s.io", "deviceclasses resourceclaimtemplates"),
        )
        for res in names.split()
    ),
}

#: Everything the act role grants: the actions, nothing else.
ACT = {
    ("patch", "", "nodes"),  # cordon, uncordon
    ("create", "", "pods/eviction"),  # drain
    ("patch", "apps", "deployments"),  # rollout restart
    ("patch", "apps", "daemonsets"),
    ("patch", "apps", "statefulsets"),
    # flux-suspend/resume, argocd-pause/resume: a merge patch of the object, nothing else
    *(("patch", group, res) for group, res in GITOPS),
}

#: Defined but bound by nobody: a team opts in (deploy/rbac.yaml says how and why).
OPTIONAL = {
    "upgrade-bot-pod-logs": {("get", "", "pods/log")},  # log-based rules
    "upgrade-bot-pod-delete": {("delete", "", "pods")},  # a drain's gated delete choice
    "upgrade-bot-helm-releases": {("list", "", "secrets")},  # removed APIs in Helm releases
}
#: The Role (namespace default) for the Event a cordon or drain records on the node.
NODE_EVENTS = {("create", "", "events")}

#: A sample of what the bot must never do; each is a single API call away from the granted ones.
REFUSED = [
    ("create", "", "pods", ""),
    ("create", "", "pods", "exec"),
    ("patch", "", "pods", ""),
    ("update", "", "pods", ""),
    ("deletecollection", "", "pods", ""),
    ("delete", "", "nodes", ""),
    ("update", "", "nodes", ""),
    ("patch", "", "nodes", "status"),
    ("list", "", "secrets", ""),
    ("get", "", "configmaps", ""),
    ("update", "apps", "deployments", ""),
    ("delete", "apps", "deployments", ""),
    ("patch", "apps", "deployments", "scale"),
    ("create", "apps", "daemonsets", ""),
    ("patch", "apps", "replicasets", ""),
    ("delete", "apps", "statefulsets", ""),
    ("watch", "apps", "replicasets", ""),
    ("delete", "policy", "poddisruptionbudgets", ""),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", ""),
    ("impersonate", "", "serviceaccounts", ""),
    ("update", "argoproj.io", "applications", ""),
    ("delete", "argoproj.io", "applications", ""),
    ("create", "kustomize.toolkit.fluxcd.io", "kustomizations", ""),
    ("delete", "helm.toolkit.fluxcd.io", "helmreleases", ""),
    ("list", "source.toolkit.fluxcd.io", "gitrepositories", ""),
    ("list", "argoproj.io", "appprojects", ""),
    # Least privilege: what no feature uses is not granted (a single budget, namespace or event is
    # never read by name; the GitOps objects are listed and read, never watched).
    ("get", "policy", "poddisruptionbudgets", ""),
    ("get", "", "namespaces", ""),
    ("get", "", "events", ""),
    ("watch", "argoproj.io", "applications", ""),
    ("watch", "kustomize.toolkit.fluxcd.io", "kustomizations", ""),
    ("watch", "helm.toolkit.fluxcd.io", "helmreleases", ""),
]


def _documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


def _grants(role_name: str) -> set[tuple[str, str, str]]:
    (role,) = [d for d in _documents() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role_name]
    assert not any(
        "*" in rule.get(key, []) for rule in role["rules"] for key in ("verbs", "resources", "apiGroups")
    )
    return {
        (verb, group, f"{resource}#{name}" if name else resource)
        for rule in role["rules"]
        if "resources" in rule
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for name in rule.get("resourceNames") or [""]
    }


@pytest.fixture(scope="module")
def bot_kubeconfig(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bot_role_kubeconfig(real_cluster, tmp_path_factory.mktemp("role") / "kubeconfig")


@pytest.fixture(scope="module")
def read_only_kubeconfig(
    real_cluster: RealCluster, bot_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A ServiceAccount bound to the read role only (bot_kubeconfig applied deploy/rbac.yaml)."""
    real_cluster.kubectl("create", "serviceaccount", READ_ONLY_ACCOUNT, "-n", "upgrade-bot", check=False)
    real_cluster.kubectl(
        "create",
        "clusterrolebinding",
        READ_ONLY_ACCOUNT,
        "--clusterrole=upgrade-bot-read",
        f"--serviceaccount=upgrade-bot:{READ_ONLY_ACCOUNT}",
        check=False,
    )
    token = real_cluster.kubectl("create", "token", READ_ONLY_ACCOUNT, "-n", "upgrade-bot").stdout.strip()
    return token_kubeconfig(real_cluster, token, tmp_path_factory.mktemp("read-only") / "kubeconfig")


@pytest.fixture
def bot_api(bot_kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(bot_kubeconfig), persist_config=False)
    with api:
        yield api


@pytest.fixture
def read_only_api(read_only_kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(read_only_kubeconfig), persist_config=False)
    with api:
        yield api


def _allowed(
    api: client.ApiClient,
    verb: str,
    group: str,
    resource: str,
    sub: str = "",
    *,
    namespace: str = "default",
    name: str = "",
) -> bool:
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
                    "namespace": namespace,
                    **({"name": name} if name else {}),
                }
            },
        }
    )
    return bool(review.status.allowed)


def _check(api: client.ApiClient, grants: set[tuple[str, str, str]]) -> dict[str, list[tuple[str, ...]]]:
    """What the API server answers differently from `grants` (allowed vs. refused), per direction."""
    wrong: dict[str, list[tuple[str, ...]]] = {"refused but granted": [], "allowed but not granted": []}
    for verb, group, resource in sorted(READ | ACT):
        named, _, only = resource.partition("#")
        kind, _, sub = named.partition("/")
        if _allowed(api, verb, group, kind, sub, name=only) != ((verb, group, resource) in grants):
            key = "refused but granted" if (verb, group, resource) in grants else "allowed but not granted"
            wrong[key].append((verb, group, resource))
    for verb, group, resource, sub in REFUSED:
        if _allowed(api, verb, group, resource, sub):
            wrong["allowed but not granted"].append((verb, group, resource, sub))
    return wrong


def test_the_roles_grant_exactly_what_the_features_need() -> None:
    # A new verb needs a reason here and in deploy/rbac.yaml.
    assert _grants("upgrade-bot-read") == READ
    assert _grants("upgrade-bot-act") == ACT
    assert not READ & ACT
    assert not {(v, g, r) for v, g, r, sub in REFUSED if not sub} & (READ | ACT)
    for name, grants in OPTIONAL.items():
        assert _grants(name) == grants
    bindings = {
        d["metadata"]["name"]: d for d in _documents() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")
    }
    # The opt-in roles are bound by nobody in this file.
    assert set(bindings) == {"upgrade-bot-read", "upgrade-bot-act", "upgrade-bot-node-events"}
    for name, binding in bindings.items():
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "upgrade-bot", "namespace": "upgrade-bot"}
        ]
    (events,) = [d for d in _documents() if d["kind"] == "Role"]
    assert events["metadata"] == {"name": "upgrade-bot-node-events", "namespace": "default"}
    assert {(v, g, r) for rule in events["rules"] for v in rule["verbs"] for g in rule["apiGroups"]
            for r in rule["resources"]} == NODE_EVENTS  # fmt: skip


def test_a_read_only_token_may_read_and_watch_and_nothing_else(read_only_api: client.ApiClient) -> None:
    assert _check(read_only_api, READ) == {"refused but granted": [], "allowed but not granted": []}
    # Nor anything of the opt-in roles, nor record an Event.
    for verb, group, resource in sorted(set().union(*OPTIONAL.values()) | NODE_EVENTS):
        name, _, sub = resource.partition("/")
        assert not _allowed(read_only_api, verb, group, name, sub), (verb, group, resource)


def test_the_bot_records_events_on_nodes_in_default_and_nowhere_else(bot_api: client.ApiClient) -> None:
    assert _allowed(bot_api, "create", "", "events", namespace="default")
    assert not _allowed(bot_api, "create", "", "events", namespace="kube-system")
    assert not _allowed(bot_api, "delete", "", "events", namespace="default")
    assert not _allowed(bot_api, "update", "", "events", namespace="default")


def test_the_bots_token_with_both_roles_may_read_and_act_and_nothing_else(bot_api: client.ApiClient) -> None:
    assert _check(bot_api, READ | ACT) == {"refused but granted": [], "allowed but not granted": []}


def test_read_only_actions_are_refused_clearly_and_reads_still_work(
    real_cluster: RealCluster, read_only_kubeconfig: Path, bot_kubeconfig: Path
) -> None:
    node = "read-only-check"
    admin = config.new_client_from_config(config_file=str(real_cluster.kubeconfig))
    core = client.CoreV1Api(admin)
    apps = client.AppsV1Api(admin)
    core.create_node(body=fake_node(node))
    apps.create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "read-only-check"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "read-only-check"}},
                "template": {
                    "metadata": {"labels": {"app": "read-only-check"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]},
                },
            },
        },
    )
    reader = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=read_only_kubeconfig))
    bot = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=bot_kubeconfig))
    try:
        # Reads work read-only ...
        assert node in [n["metadata"]["name"] for n in reader.get_json("/api/v1/nodes")["items"]]
        # ... and each action is refused by the API with a message naming the call.
        with pytest.raises(ClusterForbidden) as cordon:
            reader.cordon(node)
        assert cordon.value.status == 403
        assert f"the bot is not allowed to PATCH /api/v1/nodes/{node}" in cordon.value.user_message
        assert 'cannot patch resource "nodes"' in cordon.value.user_message
        with pytest.raises(ClusterForbidden) as evict:
            reader.evict("default", "no-such-pod")
        assert 'cannot create resource "pods/eviction"' in evict.value.user_message
        with pytest.raises(ClusterForbidden) as restart:
            reader.rollout_restart("default", "read-only-check", at=datetime.now(UTC))
        assert 'cannot patch resource "deployments"' in restart.value.user_message
        with pytest.raises(ClusterForbidden):
            reader.send_json("DELETE", "/api/v1/namespaces/default/pods/no-such-pod", {})
        assert not core.read_node(node).spec.unschedulable  # refused, so unchanged

        # With both roles the same calls go through.
        assert bot.cordon(node)["spec"]["unschedulable"] is True
        assert bot.evict("default", "no-such-pod") is False  # allowed; the pod is simply not there
        bot.rollout_restart("default", "read-only-check", at=datetime.now(UTC))
        template = apps.read_namespaced_deployment("read-only-check", "default").spec.template
        assert "kubectl.kubernetes.io/restartedAt" in template.metadata.annotations
    finally:
        reader.close()
        bot.close()
        apps.delete_namespaced_deployment("read-only-check", "default")
        core.delete_node(node)
        admin.close()


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


def test_the_check_runs_with_the_read_role_and_only_helm_releases_need_the_optional_role(
    real_cluster: RealCluster, read_only_kubeconfig: Path
) -> None:
    """The pre-flight check through the real kube adapter with the read-only token: no note says
    "forbidden" but the Helm one; with upgrade-bot-helm-releases bound, that one is gone too."""
    version = real_cluster.kubectl("version", "-o", "json").stdout
    minor = int("".join(c for c in yaml.safe_load(version)["serverVersion"]["minor"] if c.isdigit()))
    target = f"1.{minor + 1}"

    def forbidden_notes() -> list[str]:
        reader = Cluster.connect(
            ClusterConfig(name="testbed", kubeconfig=read_only_kubeconfig, context="bot")
        )
        try:
            report = checks.run_check(reader, target=target, extras=checks.default_extras())
        finally:
            reader.close()
        return [n for n in report.notes if "forbidden" in n.lower()]

    notes = forbidden_notes()
    assert len(notes) == 1, notes
    assert notes[0].startswith("Helm releases not read: forbidden"), notes
    binding = "upgrade-bot-helm-releases-test"
    real_cluster.kubectl(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=upgrade-bot-helm-releases",
        f"--serviceaccount=upgrade-bot:{READ_ONLY_ACCOUNT}",
    )
    try:
        assert forbidden_notes() == []
    finally:
        real_cluster.kubectl("delete", "clusterrolebinding", binding)
