"""The bot's snapshot and diff on the real control plane, across a kwok node-group replacement.

A helper plays the cloud pipeline: new nodes of the group join, the old ones are cordoned, their
pods evicted through the eviction API (the real API enforces the PDB) and the nodes deleted; the
real scheduler and controllers reschedule the pods. The bot, running with the least-privilege role
in deploy/rbac.yaml, must see the replacement as expected and a node left cordoned as a regression.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from bot.settings import load_settings
from tests.support.backends import GROUP_LABEL, RBAC, bot_role_kubeconfig, node_is_ready
from tests.support.bot_process import bot_command
from tests.support.front import start_front
from tests.support.node_groups import replace_node_group
from tests.support.secrets import BOT_TOKEN
from tests.support.slack_stub import SlackStub
from tests.support.testbed import RealCluster, delete_namespace_now, fake_node, wait_until

pytestmark = pytest.mark.testbed

TIMEOUT = 90.0


@pytest.fixture(scope="module")
def api(real_cluster: RealCluster) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(real_cluster.kubeconfig), persist_config=False)
    with api_client:
        yield api_client


@pytest.fixture(scope="module")
def bot_kubeconfig(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig for the bot's ServiceAccount, bound to exactly deploy/rbac.yaml's role."""
    return bot_role_kubeconfig(real_cluster, tmp_path_factory.mktemp("bot") / "kubeconfig")


def write_config(tmp_path: Path, kubeconfig: Path) -> Path:
    path = tmp_path / "upgrade-bot.yaml"
    path.write_text(
        f"data_dir: {tmp_path / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
        f"clusters:\n  testbed:\n    kubeconfig: {kubeconfig}\n    context: bot\n"
    )
    return path


def bot(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*bot_command(), *args, "--config", str(config_path)], capture_output=True, text=True, timeout=120
    )


def add_nodes(core: client.CoreV1Api, group: str, count: int) -> list[str]:
    names = [f"{group}-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    for name in names:
        core.create_node(body=fake_node(name, labels={GROUP_LABEL: group}))
    for name in names:
        wait_until(lambda n=name: node_is_ready(core, n), timeout=TIMEOUT, what=f"node {name} Ready")
    return names


def wait_for_earlier_namespaces_gone(core: client.CoreV1Api) -> None:
    """The session's cluster is shared: namespaces other tests left behind must be gone before a
    snapshot, or their workloads vanishing between two snapshots are (rightly) regressions."""
    wait_until(
        lambda: all(n.status.phase != "Terminating" for n in core.list_namespace().items),
        timeout=TIMEOUT,
        what="namespaces of earlier tests deleted",
    )


def ready_replicas(apps: client.AppsV1Api, namespace: str, name: str) -> int:
    return int(apps.read_namespaced_deployment(name, namespace).status.ready_replicas or 0)


def test_snapshot_and_diff_of_a_node_group_replacement(
    api: client.ApiClient, bot_kubeconfig: Path, tmp_path: Path
) -> None:
    core, apps, policy = client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api)
    group = f"ng-{uuid.uuid4().hex[:4]}"
    namespace = f"shop-{uuid.uuid4().hex[:4]}"
    core.create_namespace(body={"metadata": {"name": namespace}})
    wait_until(
        lambda: core.read_namespaced_service_account("default", namespace),
        timeout=TIMEOUT,
        what="default service account",
    )
    old = add_nodes(core, group, 2)
    apps.create_namespaced_deployment(
        namespace,
        body={
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "nodeSelector": {GROUP_LABEL: group},
                        "tolerations": [
                            {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                        ],
                        "containers": [{"name": "app", "image": "registry.invalid/web:1"}],
                    },
                },
            },
        },
    )
    policy.create_namespaced_pod_disruption_budget(
        namespace,
        body={
            "metadata": {"name": "web"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    wait_until(lambda: ready_replicas(apps, namespace, "web") == 2, timeout=TIMEOUT, what="web ready")

    wait_for_earlier_namespaces_gone(core)
    cfg = write_config(tmp_path, bot_kubeconfig)
    pre = bot(cfg, "snapshot", "pre")
    assert pre.returncode == 0, pre.stderr
    assert "gap:" not in pre.stdout  # the least-privilege role reads everything a snapshot needs

    new = replace_node_group(
        api, old, add_nodes=lambda n: add_nodes(core, group, n), remove_node=lambda n: core.delete_node(n)
    )
    wait_until(lambda: ready_replicas(apps, namespace, "web") == 2, timeout=TIMEOUT, what="web ready again")
    assert bot(cfg, "snapshot", "post").returncode == 0

    clean = bot(cfg, "diff", "pre", "post", "--format", "json")
    assert clean.returncode == 0, clean.stdout
    report = json.loads(clean.stdout)
    mine = [f for f in report["regressions"] if group in f["subject"] or f["namespace"] == namespace]
    assert mine == []
    replaced = [
        f
        for f in report["expected"]
        if f["category"] == "nodes replaced" and f["subject"] == f"node group {group}"
    ]
    assert len(replaced) == 1
    assert "2 old nodes replaced by 2 new" in replaced[0]["detail"]
    moved = [
        f for f in report["expected"] if f["category"] == "pods rescheduled" and f["namespace"] == namespace
    ]
    assert moved
    assert moved[0]["detail"].startswith("2 pods of 1 workload on new nodes")

    # The pipeline "forgets" to uncordon a new node: that is a regression, and the exit status says so.
    core.patch_node(new[0], {"spec": {"unschedulable": True}})
    assert bot(cfg, "snapshot", "post").returncode == 0
    broken = bot(cfg, "diff", "pre", "post", "--format", "json")
    assert broken.returncode == 3
    regressions = [
        (f["category"], f["subject"])
        for f in json.loads(broken.stdout)["regressions"]
        if group in f["detail"] or f["subject"] == f"node {new[0]}"
    ]
    assert regressions == [("node cordoned", f"node {new[0]}")]

    # The namespace goes first, and wholly, before its nodes: a later test's two snapshots must not
    # see its pods lose their nodes in between.
    delete_namespace_now(core, namespace)
    wait_for_earlier_namespaces_gone(core)
    for name in new:
        core.delete_node(name)


def narrow_kubeconfig(
    real_cluster: RealCluster, bot_kubeconfig: Path, tmp_path: Path, *, without: str
) -> Path:
    """A kubeconfig for a ServiceAccount of a narrower role than deploy/rbac.yaml: the same, minus
    `without` (a resource)."""
    role = yaml.safe_load_all(RBAC.read_text())
    cluster_role = next(d for d in role if d["kind"] == "ClusterRole")
    name = f"upgrade-bot-no-{without}"
    cluster_role["metadata"]["name"] = name
    for rule in cluster_role["rules"]:
        rule["resources"] = [r for r in rule.get("resources", []) if r != without]
    cluster_role["rules"] = [r for r in cluster_role["rules"] if r["resources"]]
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(yaml.safe_dump(cluster_role))
    real_cluster.kubectl("apply", "-f", str(manifest))
    account = f"narrow-{without}"
    real_cluster.kubectl("create", "serviceaccount", account, "-n", "upgrade-bot", check=False)
    real_cluster.kubectl(
        "create",
        "clusterrolebinding",
        name,
        f"--clusterrole={name}",
        f"--serviceaccount=upgrade-bot:{account}",
        check=False,
    )
    token = real_cluster.kubectl("create", "token", account, "-n", "upgrade-bot").stdout.strip()
    kubeconfig = yaml.safe_load(bot_kubeconfig.read_text())
    kubeconfig["users"][0]["user"]["token"] = token
    narrow = tmp_path / f"{account}.kubeconfig"
    narrow.write_text(yaml.safe_dump(kubeconfig))
    return narrow


def test_a_call_outside_the_bots_role_is_refused_and_reported_clearly(
    real_cluster: RealCluster, bot_kubeconfig: Path, tmp_path: Path
) -> None:
    # A narrower role than deploy/rbac.yaml: the same, minus events. The snapshot names the gap.
    narrow = narrow_kubeconfig(real_cluster, bot_kubeconfig, tmp_path, without="events")
    result = bot(write_config(tmp_path, narrow), "snapshot", "pre")
    assert result.returncode == 0, result.stderr
    assert "gap: events: forbidden by the bot's RBAC role" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_a_diff_that_could_not_compare_the_pods_is_no_pass_for_a_pipeline(
    real_cluster: RealCluster, bot_kubeconfig: Path, tmp_path: Path, api: client.ApiClient
) -> None:
    # The earlier snapshot with the bot's role, the later one with a role that may not list pods.
    narrow = narrow_kubeconfig(real_cluster, bot_kubeconfig, tmp_path, without="pods")
    (tmp_path / "narrow").mkdir()
    wait_for_earlier_namespaces_gone(client.CoreV1Api(api))
    full_config = write_config(tmp_path, bot_kubeconfig)
    narrow_config = tmp_path / "narrow" / "upgrade-bot.yaml"
    narrow_config.write_text(full_config.read_text().replace(str(bot_kubeconfig), str(narrow)))
    assert bot(full_config, "snapshot", "pre").returncode == 0
    post = bot(narrow_config, "snapshot", "post")
    assert post.returncode == 0, post.stderr
    assert "gap: pods: forbidden by the bot's RBAC role" in post.stdout
    result = bot(full_config, "diff", "pre", "post")
    # The nodes and workloads are the same; the pods could not be compared: exit 1, not 0.
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pods: not readable in one of the snapshots" in result.stdout
    assert (
        "upgrade-bot diff: pods not compared (not readable in one of the snapshots): no regression found is no pass"
        in result.stderr
    )
    assert "Traceback" not in result.stdout + result.stderr


def test_snapshot_and_diff_through_slack(
    api: client.ApiClient, bot_kubeconfig: Path, tmp_path: Path, slack_stub: SlackStub
) -> None:
    """Signed slash commands in, a summary posted in the channel and the full report in its thread."""
    wait_for_earlier_namespaces_gone(client.CoreV1Api(api))
    settings = load_settings(
        write_config(tmp_path, bot_kubeconfig),
        {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_API_URL": slack_stub.api_url},
    )
    with start_front(settings, slack_stub, workers=4, threads=8) as front:
        for i, text in enumerate(["snapshot pre", "snapshot post", "diff pre post"]):
            result = front.command(text, response_url=slack_stub.response_url(str(i)), trigger_id=f"tb-{i}")
            assert result.status == 200
            assert result.seconds < 3
            slack_stub.wait_for_calls("chat.postMessage", i + 1, timeout=60)
        posts = slack_stub.calls_to("chat.postMessage")
        assert posts[0].params["text"].startswith(":camera: Snapshot *#1* `pre` of *testbed*")
        assert posts[0].params["channel"] == "C0OPS"
        assert "*0 regressions*" in posts[2].params["text"]
        (upload,) = slack_stub.wait_for_calls("files.completeUploadExternal")
        assert json.loads(upload.params["files"])[0]["title"] == "Cluster diff"
        assert upload.params["thread_ts"] == posts[2].response["ts"]  # the report sits in the diff's thread
        report = next(iter(slack_stub.uploads.values())).decode()
        assert report.startswith("# Cluster diff: #1 pre → #2 post")
