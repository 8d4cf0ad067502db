"""What the bot offers to copy is a command `/upgrade action` takes whole: the "Still held by this
run" line of a run that suspended Flux, pasted back through the HTTP front door (the real slack_sdk
client, the Slack stub) where two clusters are configured, names its cluster, is refused only for
its reason's placeholder, asking for the reason, and with a reason in its place starts the run.
So do the check report's commands (a Flux-owned budget's owner's way, a cordoned node's uncordon)
and the `set-image` refusal's add-on update on EKS's kube-proxy.
The copied commands once lacked `--reason` and `--cluster`, and `/upgrade action` refused them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from bot.sim import SimCluster
from tests.support.awaited import Bot
from tests.support.fix_buttons import approve_and_complete, fix_bot, scanned_by_hand, wait_for
from tests.support.slack_stub import SlackStub

#: A command the bot offers, in its own code span on the card and in the thread.
_HELD = re.compile(r"Still held by this run\* — [^`]*`(/upgrade action [^`]+)`")


@pytest.fixture
def sim(sim_factory: Callable[..., SimCluster]) -> SimCluster:
    return sim_factory("gitops", speed=0.0, seed=1)


@pytest.fixture
def bot(
    write_config: Callable[..., Path], slack_stub: SlackStub, sim: SimCluster, tmp_path: Path
) -> Iterator[tuple[Bot, Path]]:
    with fix_bot(write_config, slack_stub, sim, tmp_path, more_clusters=("staging",)) as started:
        yield started


def _uploaded(front: Bot, prefix: str) -> str:
    """The last file uploaded whose title starts with `prefix`, as Slack received it."""
    done = [
        f for c in front.stub.calls_to("files.completeUploadExternal") for f in json.loads(c.params["files"])
    ]
    file_id = next(f["id"] for f in reversed(done) if str(f.get("title", "")).startswith(prefix))
    return front.stub.uploads[file_id].decode()


def _offered(front: Bot) -> str:
    """The resuming command the run's end offers (the thread's line, as Slack has it)."""
    found = (_HELD.search(str(p.get("text", ""))) for p in front.posts())
    return next((m[1] for m in found if m), "")


def test_the_held_owners_command_pasted_back_asks_for_its_reason_then_runs(
    bot: tuple[Bot, Path], sim: SimCluster
) -> None:
    front, _ = bot
    duties, _, runner = scanned_by_hand(front)
    try:
        said = front.command(
            "action flux-suspend object=kustomization/flux-system/apps --cluster prod --reason fix aws-node by hand"
        )
        assert "is run `R" in said, said
        run_id = str(front.services.store.runs()[0].id)
        approve_and_complete(
            front, front.gate("flux-suspend"), "flux-suspend", run_id=run_id, runner=runner, sim=sim
        )
        offered = wait_for(lambda: _offered(front), what="the run's end offering to resume Flux")
    finally:
        duties.stop_all()
    assert offered == (
        '/upgrade action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"'
    )
    pasted = offered.removeprefix("/upgrade ")
    # Pasted as it is: the placeholder is refused, and the refusal asks for the reason itself.
    refused = front.command(pasted)
    assert "replace the `…` after `--reason` with why" in refused, refused
    assert "Traceback" not in refused
    # Without the cluster it names, two configured clusters would leave the command asking which.
    assert "which cluster? use --cluster with one of: prod, staging" in front.command(
        pasted.replace(" --cluster prod", "").replace("…", "the fix is merged")
    )
    # With a reason in its place, the command is taken: a one-step run on prod, behind its gate.
    said = front.command(pasted.replace("…", "the fix is merged"))
    assert re.fullmatch(
        r"`flux-resume` on prod is run `R\w+`; it waits for the primary and the shadow to approve it in its thread\.",
        said,
    ), said


def test_the_check_report_s_commands_name_the_cluster_it_read(bot: tuple[Bot, Path]) -> None:
    """PDB001's owner's way and NODE002's uncordon once lacked `--cluster`: pasted where two
    clusters are configured, they only asked which."""
    front, kubeconfig = bot
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    node = sorted(n.metadata.name for n in core.list_node().items)[0]
    core.patch_node(node, {"spec": {"unschedulable": True}})  # someone's `kubectl cordon`
    # A budget Flux applies, which podinfo's two replicas hold at zero disruptions.
    client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(
        "apps",
        {
            "metadata": {
                "name": "podinfo",
                "labels": {
                    "kustomize.toolkit.fluxcd.io/name": "apps",
                    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
                },
            },
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "podinfo"}}},
        },
    )
    front.command("check --cluster prod")
    report = _uploaded(front, "Pre-flight check of prod")
    assert (
        '`/upgrade action flux-suspend object=kustomization/flux-system/apps --cluster prod --reason "…"` first'
        in report
    ), report
    uncordon = (
        f'/upgrade action uncordon node={node} --cluster prod --reason "left cordoned before the upgrade"'
    )
    assert f"`{uncordon}`" in report, report
    # Pasted as it is, it is taken: a one-step run on prod, behind its gate.
    said = front.command(uncordon.removeprefix("/upgrade "))
    assert re.fullmatch(
        r"`uncordon` on prod is run `R\w+`; it waits for the primary and the shadow to approve it in its thread\.",
        said,
    ), said


def test_set_image_on_eks_s_kube_proxy_is_refused_with_the_add_on_update_on_its_cluster(
    bot: tuple[Bot, Path],
) -> None:
    """The refusal's `eks-update-addon` once lacked `--cluster`: pasted, it only asked which."""
    front, _ = bot
    said = front.command(
        "action set-image workload=daemonset/kube-system/kube-proxy --cluster prod --reason the image EKS documents"
    )
    assert (
        "daemonset/kube-system/kube-proxy is the EKS managed add-on kube-proxy: the next update of the EKS managed "
        "add-on kube-proxy will overwrite this change. Use `/upgrade action eks-update-addon addon=kube-proxy "
        'version=… --cluster prod --reason "…"` instead of `set-image`'
    ) in said, said
