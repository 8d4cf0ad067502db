"""`plan draft` for a cluster whose provider is AKS or GKE: by default (`--style aks-managed`,
`gke-managed`) the control plane and each pool through the cloud's own actions, at versions the
cloud offers (the sim's ARM and GKE surfaces answer); `--style eks-managed` is refused before the
cluster is read, in Slack as at the terminal: it drafted "Start the EKS control-plane update" and
"EKS replaces a managed group's nodes" for an AKS cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.core.runs.plans import parse_plan
from bot.errors import PlanInvalid
from bot.frontdoor.assemble import Services, assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from bot.sim import SimCluster
from tests.support.azure import aks_provider
from tests.support.gcp import gke_provider
from tests.support.kubeconfigs import closed_port, refusing_kubeconfig

PROVIDERS = {
    "aks": "aks: {subscription_id: 3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d, resource_group: rg, name: shop}",
    "gke": "gke: {project: shop-project, location: europe-west1, name: shop}",
}


@pytest.fixture(params=sorted(PROVIDERS))
def cloud(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def services(write_config: Callable[..., Path], tmp_path: Path, cloud: str) -> Iterator[Services]:
    kubeconfig = refusing_kubeconfig(tmp_path / "kubeconfig", context="dead-ctx")
    config = write_config(
        f"clusters:\n  prod:\n    kubeconfig: {kubeconfig}\n    request_timeout: 2\n"
        f"    provider:\n      {PROVIDERS[cloud]}\n"
    )
    built = assemble(load_settings(config, {}), with_slack=False)
    yield built
    built.close()


def test_eks_managed_is_refused_for_an_aks_or_gke_cluster_before_it_is_read(
    services: Services, cloud: str
) -> None:
    out = services.router.handle(
        CommandRequest(
            text="plan draft --to 1.26 --style eks-managed", user_id="U0PRIMARY", source="terminal"
        )
    )
    assert not out.ok
    assert f"prod's provider is {cloud.upper()}" in out.rendered.text
    assert "--style pipeline or generic" in out.rendered.text
    assert "refused the connection" not in out.rendered.text
    # Another style goes on to read the cluster (here: refused, as it is down).
    other = services.router.handle(
        CommandRequest(text="plan draft --to 1.26 --style generic", user_id="U0PRIMARY", source="terminal")
    )
    assert "refused the connection" in other.rendered.text


# ---- the drafts of an AKS and a GKE cluster, from the sim's ARM and GKE surfaces ---------------------


def _drafted(
    write_config: Callable[..., Path], kubeconfig: Path, provider: str, text: str
) -> tuple[str, str]:
    """`text` (a `plan draft`) run by a bot whose cluster `prod` is the sim with `provider`: the
    reply's text and the attached plan."""
    config = write_config(
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim, provider: {provider}}}\n"
    )
    services = assemble(load_settings(config, {}), with_slack=False)
    try:
        return _draft(services, text)
    finally:
        services.close()


def _aks_yaml(sim: SimCluster, endpoint: str = "") -> str:
    p = aks_provider(sim)
    return (
        f"{{aks: {{subscription_id: {p.subscription_id}, resource_group: {p.resource_group}, name: {p.name}, "
        f"endpoint_url: '{endpoint or p.endpoint_url}'}}}}"
    )


def _gke_yaml(sim: SimCluster) -> str:
    p = gke_provider(sim)
    return f"{{gke: {{project: {p.project}, location: {p.location}, name: {p.name}, endpoint_url: '{p.endpoint_url}'}}}}"


def _draft(services: Services, text: str) -> tuple[str, str]:
    """The reply's text and the attached plan."""
    out = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", source="terminal"))
    assert out.ok, out.rendered.text
    (attached,) = out.reply.files
    return out.rendered.text, attached.content.decode()


def _actions(plan: str) -> dict[str, list[dict[str, Any]]]:
    """Step id → its actions, of the steps that have some."""
    return {str(s["id"]): s["actions"] for s in yaml.safe_load(plan)["steps"] if s.get("actions")}


def _header(plan: str) -> str:
    return " ".join(line.removeprefix("# ") for line in plan.split("\nname:", 1)[0].splitlines())


def _comments(plan: str) -> str:
    """The plan's comments as one line (they wrap anywhere)."""
    return " ".join(
        line.strip().removeprefix("# ") for line in plan.splitlines() if line.strip().startswith("#")
    )


def _validate(plan: str) -> None:
    parse_plan(plan, source="draft.yaml", now=datetime.now(UTC))


def test_an_aks_cluster_is_drafted_through_arm_at_the_version_aks_offers_pool_by_pool(
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    # No --style: the default for an AKS cluster is AKS's own actions.
    reply, plan = _drafted(write_config, sim_kubeconfig(sim), _aks_yaml(sim), "plan draft --to 1.26")
    assert "(aks-managed style)" in reply
    assert "agent pools in this order: system, apps, batch" in reply
    ids = [str(s["id"]) for s in yaml.safe_load(plan)["steps"]]
    assert ids[:3] == ["snapshot-pre", "checks", "announce-start"]
    assert ids[-4:] == ["watch-settle", "snapshot-post", "diff", "announce-done"]
    actions = _actions(plan)
    # The upgrade profile offers 1.25.15, 1.26.6, 1.26.10: its newest 1.26 patch, AKS's own pick.
    assert actions["control-plane"] == [
        {"aks-upgrade-control-plane": {"version": "1.26.10", "override_for": "1h", "timeout": "1h"}}
    ]
    assert actions["wait-controlplane"] == [{"wait-controlplane": {"version": "1.26", "timeout": "30m"}}]
    # Each agent pool in the cluster's order, with its own max surge (the action leaves it to the pool).
    pools = [i for i in ids if i.startswith(("update-", "wait-")) and i != "wait-controlplane"]
    assert pools == ["update-system", "wait-system", "update-apps", "wait-apps", "update-batch", "wait-batch"]
    assert ids.index("wait-controlplane") < ids.index("update-system")
    for pool in ("system", "apps", "batch"):
        assert actions[f"update-{pool}"] == [
            {"aks-upgrade-nodepool": {"nodepool": pool, "version": "1.26.10"}}
        ]
        assert actions[f"wait-{pool}"] == [
            {"wait-nodegroup": {"nodegroup": pool, "version": "1.26", "timeout": "30m"}}
        ]
    titles = {str(s["id"]): s["title"] for s in yaml.safe_load(plan)["steps"]}
    assert titles["update-apps"] == "Upgrade agent pool apps to 1.26.10 (max surge 33%)"
    assert titles["update-batch"] == "Upgrade agent pool batch to 1.26.10 (max surge 50%)"
    # The HPA dashboard's autoscaling/v2beta2 calls: a person's migration before the control plane.
    assert ids.index("migrate-apis") < ids.index("control-plane")
    header = _header(plan)
    assert (
        "agent pools apps (max surge 33%), batch (max surge 50%), system (max surge 1); the control plane is "
        "on 1.25.11, and AKS offers 1.25.15, 1.26.6, 1.26.10" in header
    )
    assert "node group" not in plan.replace("node group labels", "")
    # Its pools' nodes by the label AKS writes on them, as the sim's AKS nodes carry it.
    said = _comments(plan)
    assert "Agent pool apps (nodes labelled kubernetes.azure.com/agentpool=apps;" in said
    assert "labelled eks.amazonaws.com" not in said
    assert not [a for steps in actions.values() for a in steps if "drain" in a or "eks-update-nodegroup" in a]
    _validate(plan)


def test_a_gke_cluster_is_drafted_through_gkes_api_at_a_valid_master_version_pool_by_pool(
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    sim = sim_factory("gke-nodepools", speed=0.0, seed=1)
    reply, plan = _drafted(write_config, sim_kubeconfig(sim), _gke_yaml(sim), "plan draft --to 1.30")
    assert "(gke-managed style)" in reply
    assert "node pools in this order: system, apps, batch" in reply
    actions = _actions(plan)
    # get_server_config's default, of 1.30 (1.30.5-gke.1014001 is newer, but not GKE's pick).
    assert actions["control-plane"] == [
        {"gke-update-master": {"version": "1.30.4-gke.1348000", "timeout": "1h"}}
    ]
    steps = {str(s["id"]): s for s in yaml.safe_load(plan)["steps"]}
    ids = list(steps)
    assert ids.index("control-plane") < ids.index("wait-controlplane") < ids.index("update-system")
    assert [i for i in ids if i.startswith("update-")] == ["update-system", "update-apps", "update-batch"]
    for pool in ("system", "apps", "batch"):
        assert actions[f"update-{pool}"] == [
            {"gke-update-nodepool": {"nodepool": pool, "version": "1.30.4-gke.1348000"}}
        ]
        assert ids.index(f"update-{pool}") + 1 == ids.index(f"wait-{pool}")
    # Each pool's own upgrade settings, as GKE keeps them: surge, or blue-green with its soak.
    assert steps["update-system"]["title"] == (
        "Upgrade node pool system to 1.30.4-gke.1348000 (surge, max_surge 1, max_unavailable 0)"
    )
    assert (
        steps["update-apps"]["title"] == "Upgrade node pool apps to 1.30.4-gke.1348000 (blue-green, soak 1h)"
    )
    comment = plan.split("  - id: update-apps", 1)[0].rsplit("  - id: ", 1)[1]
    assert "roll back (rollback_node_pool_upgrade)" in " ".join(comment.split())
    assert (
        "GKE offers 1.30.5-gke.1014001, 1.30.4-gke.1348000, 1.29.9-gke.1177000 (its own pick: 1.30.4-gke.1348000)"
        in _header(plan)
    )
    # Its pools' nodes by the label GKE writes on them, as the sim's GKE nodes carry it.
    said = _comments(plan)
    assert "Node pool apps (nodes labelled cloud.google.com/gke-nodepool=apps;" in said
    assert "labelled eks.amazonaws.com" not in said
    _validate(plan)


def test_a_hop_the_cloud_offers_no_version_of_yet_is_a_placeholder_that_validate_refuses(
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    _, plan = _drafted(write_config, sim_kubeconfig(sim), _aks_yaml(sim), "plan draft --to 1.27")
    actions = _actions(plan)
    # 1.26 is offered; 1.27 is not yet (AKS's upgrade profile lists the next minor's patches only).
    assert actions["control-plane-1-26"][0]["aks-upgrade-control-plane"]["version"] == "1.26.10"
    hole = "<1.27.x: set a version AKS offers (az aks get-upgrades)>"
    assert actions["control-plane-1-27"][0]["aks-upgrade-control-plane"]["version"] == hole
    assert actions["update-apps"][0]["aks-upgrade-nodepool"]["version"] == hole
    assert "AKS offers this cluster no version of 1.27 yet" in _header(plan)
    with pytest.raises(
        PlanInvalid, match=r"version: '<1\.27\.x: set a version AKS of…' is not a version AKS takes"
    ):
        _validate(plan)


def test_an_aks_provider_that_cannot_be_asked_leaves_placeholders_and_the_snapshots_pools(
    sim_factory: Callable[..., SimCluster],
    sim_kubeconfig: Callable[[SimCluster], Path],
    write_config: Callable[..., Path],
) -> None:
    sim = sim_factory("aks-nodepools", speed=0.0, seed=1)
    dead = f"http://127.0.0.1:{closed_port()}/azure"
    _, plan = _drafted(
        write_config, sim_kubeconfig(sim), _aks_yaml(sim, dead), "plan draft --to 1.26 --style aks-managed"
    )
    header = _header(plan)
    assert "Not read: the AKS provider's agent pools and the versions it offers (" in header
    assert "the agent pools are the snapshot's node groups (system, apps, batch)" in header
    assert "AKS could not be asked which versions of 1.26 it offers" in header
    actions = _actions(plan)
    hole = "<1.26.x: set a version AKS offers (az aks get-upgrades)>"
    assert actions["control-plane"][0]["aks-upgrade-control-plane"]["version"] == hole
    assert [
        a[0]["aks-upgrade-nodepool"]["nodepool"] for i, a in actions.items() if i.startswith("update-")
    ] == [
        "system",
        "apps",
        "batch",
    ]
    with pytest.raises(PlanInvalid, match=r"is not a version AKS takes: major\.minor\.patch, like 1\.26\.6"):
        _validate(plan)


def test_a_clouds_style_is_refused_for_a_cluster_of_another_cloud_or_without_its_provider(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    config = write_config(
        f"clusters:\n  plain: {{kubeconfig: {kubeconfig}}}\n"
        f"  shop: {{kubeconfig: {kubeconfig}, provider: {{{PROVIDERS['gke']}}}}}\n"
    )
    services = assemble(load_settings(config, {}), with_slack=False)
    try:

        def refusal(text: str) -> str:
            out = services.router.handle(CommandRequest(text=text, user_id="U0PRIMARY", source="terminal"))
            assert not out.ok
            return " ".join(out.rendered.text.split())

        assert (
            "--style aks-managed drafts AKS's steps, and shop's provider is GKE: draft with --style pipeline or "
            "generic, or --style gke-managed for GKE's own"
            in refusal("plan draft --to 1.30 --cluster shop --style aks-managed")
        )
        assert (
            "--style gke-managed drafts GKE's actions, which need the cluster's provider: add `provider: {gke: "
            "{project, location, name}}` to plain"
            in refusal("plan draft --to 1.30 --cluster plain --style gke-managed")
        )
    finally:
        services.close()
