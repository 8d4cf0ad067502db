"""The pre-flight checks on data: skew now and after the step, nodes, pods, every PDB selector
shape, drain blockers, resilience, Istio sidecars and webhooks; ids and severities are stable."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding
from bot.core.checks.preflight import (
    MAX_UNCORDON,
    Facts,
    NodeFacts,
    PdbFacts,
    PodSummary,
    Selector,
    WebhookFacts,
    WorkloadFacts,
    check_drain,
    check_istio,
    check_nodes,
    check_pods,
    check_resilience,
    check_skew,
    check_webhooks,
    minor_of,
    run_checks,
)
from bot.core.kube.owners import owner_of


def node(name: str, kubelet: str = "v1.24.17", *, ready: bool = True, cordoned: bool = False) -> NodeFacts:
    return NodeFacts(name=name, ready=ready, unschedulable=cordoned, kubelet=kubelet, group="ng")


def deployment(
    name: str, replicas: int = 2, labels: dict[str, str] | None = None, **kw: object
) -> WorkloadFacts:
    base = WorkloadFacts(
        kind="Deployment",
        namespace="shop",
        name=name,
        replicas=replicas,
        template_labels=labels or {"app": name},
        readiness_probe=True,
        grace_seconds=None,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def pdb(
    name: str, selector: Selector, *, allowed: int | None = 1, min_available: int | str | None = 1
) -> PdbFacts:
    return PdbFacts(
        namespace="shop",
        name=name,
        selector=selector,
        min_available=min_available,
        max_unavailable=None,
        disruptions_allowed=allowed,
        expected_pods=1,
    )


def facts(**kw: object) -> Facts:
    return replace(Facts(cluster="prod", version="v1.24.17-eks-1"), **kw)  # type: ignore[arg-type]


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_versions_are_read_from_every_spelling() -> None:
    assert minor_of("v1.25.16-eks-abc") == (1, 25)
    assert minor_of("1.25") == (1, 25)
    assert minor_of("v1.24.17-minimal-eksbuild.4") == (1, 24)
    assert minor_of("latest") is None


def test_a_target_two_minors_ahead_is_refused_and_one_ahead_is_fine() -> None:
    assert ids(check_skew(facts(), "1.26")) == ["SKEW001"]
    assert check_skew(facts(), "1.25.16") == []
    assert check_skew(facts(), "1.24")[0].id == "SKEW001"


def test_kubelets_in_skew_now_but_not_after_the_control_plane_step_are_required() -> None:
    f = facts(nodes=[node("a"), node("old-1", "v1.22.17"), node("old-2", "v1.22.17")])
    (finding,) = check_skew(f, "1.25")
    assert finding.id == "SKEW004"
    assert finding.severity == REQUIRED
    assert finding.objects == (
        "Node old-1 (kubelet v1.22.17, group ng)",
        "Node old-2 (kubelet v1.22.17, group ng)",
    )
    assert "3 behind" in finding.why
    assert "at least 1.23" in finding.fix


def test_kubelets_already_out_of_skew_and_newer_than_the_control_plane_are_named_apart() -> None:
    f = facts(nodes=[node("ancient", "v1.21.14"), node("future", "v1.25.1")])
    assert sorted(ids(check_skew(f, "1.25"))) == ["SKEW002", "SKEW003"]


def test_from_1_28_kubelets_may_trail_by_three_minors() -> None:
    f = facts(version="v1.28.5", nodes=[node("n", "v1.26.3")])
    assert check_skew(f, "1.29") == []
    f = facts(version="v1.27.5", nodes=[node("n", "v1.25.3")])
    assert check_skew(f, "1.28") == []  # 1.28 allows three
    f = facts(version="v1.26.5", nodes=[node("n", "v1.24.3")])
    assert ids(check_skew(f, "1.27")) == ["SKEW004"]  # 1.27 still two


def test_kube_proxy_follows_the_kubelet_rules() -> None:
    assert check_skew(facts(kube_proxy="v1.24.17-minimal-eksbuild.4"), "1.25") == []
    (finding,) = check_skew(facts(kube_proxy="v1.22.6-eksbuild.1"), "1.25")
    assert finding.id == "SKEW005"
    assert "1.25" in finding.why


def test_not_ready_nodes_are_required_and_cordoned_ones_recommended() -> None:
    f = facts(nodes=[node("a", ready=False), node("b", cordoned=True), node("c")])
    by_id = {x.id: x for x in check_nodes(f)}
    assert by_id["NODE001"].severity == REQUIRED
    assert by_id["NODE001"].objects == ("Node a",)
    assert by_id["NODE002"].severity == RECOMMENDED
    assert by_id["NODE002"].objects == ("Node b",)
    # The remedy is the gated action with the node's name and the cluster's, ready to paste: with
    # several clusters configured, one without `--cluster` only asks which.
    assert (
        '`/upgrade action uncordon node=b --cluster prod --reason "left cordoned before the upgrade"`'
        in by_id["NODE002"].fix
    )
    assert by_id["NODE002"].action == "uncordon node=b"  # what its Fix… button starts


def test_a_cluster_with_no_nodes_fails_rather_than_passing_over_nothing() -> None:
    # Read and empty: most often the wrong context. Every other check saw an empty list.
    (finding,) = check_nodes(facts(nodes=[]))
    assert (finding.id, finding.severity) == ("NODE003", REQUIRED)
    assert "wrong kubeconfig or context" in finding.why
    assert "waive NODE003" in finding.fix
    # Not read at all is the verdict's INCOMPLETE (its gap says so), not a finding of no nodes.
    assert check_nodes(facts(nodes=[], gaps=["nodes: forbidden"])) == []


def test_nodes_the_bot_s_run_cordoned_are_named_but_not_offered_to_uncordon() -> None:
    ours = replace(node("d", cordoned=True), cordoned_by="run=R7 step=drain-old job=3 approved-by=U1,U2")
    (finding,) = check_nodes(facts(nodes=[node("b", cordoned=True), ours, node("c")]))
    assert finding.objects == ("Node b", "Node d (the bot's run R7)")
    assert finding.action == "uncordon node=b"
    assert "`/upgrade action uncordon node=b --cluster prod --reason" in finding.fix
    assert "belong to run R7" in finding.fix
    assert "They are left out of the command above and of the Fix… button." in finding.fix

    # Only the bot's: named, no command and no action (its run's drain or abort uncordons them).
    (only_ours,) = check_nodes(facts(nodes=[ours, node("c")]))
    assert only_ours.objects == ("Node d (the bot's run R7)",)
    assert only_ours.action == ""
    assert "/upgrade action uncordon node=b" not in only_ours.fix
    assert "(`/upgrade status R7`). Only if that run is over:" in only_ours.fix
    assert (
        '`/upgrade action uncordon node=d --cluster prod --reason "left cordoned by a run that is over"`'
        in only_ours.fix
    )


def test_a_node_whose_annotation_names_no_run_is_not_the_bot_s_and_is_offered_to_uncordon() -> None:
    """Someone's own note under the bot's key ("bad disk, do not touch <!channel>") was read as a run
    of the bot's: the node left out of the Fix… button, the note printed as the run's id."""
    noted = replace(
        node("e", cordoned=True), cordoned_by="bad disk, do not touch <!channel>\n:white_check_mark: safe"
    )
    ours = replace(node("d", cordoned=True), cordoned_by="run=R7 step=drain-old job=3")
    (finding,) = check_nodes(facts(nodes=[noted, ours]))
    assert finding.objects == ("Node e", "Node d (the bot's run R7)")
    assert finding.action == "uncordon node=e"
    assert "bad disk" not in finding.fix


def test_an_uncordon_action_names_at_most_max_uncordon_nodes() -> None:
    nodes = [node(f"n{i:02}", cordoned=True) for i in range(MAX_UNCORDON + 3)]
    (finding,) = check_nodes(facts(nodes=nodes))
    assert finding.action == "uncordon node=" + ",".join(f"n{i:02}" for i in range(MAX_UNCORDON))
    assert f"the first {MAX_UNCORDON} of {MAX_UNCORDON + 3}" in finding.fix


def test_unhealthy_pods_are_listed_under_their_workload() -> None:
    f = facts(pods=PodSummary(unhealthy={"Deployment shop/api": [("api-1", "Running", "1/2 ready")]}))
    (finding,) = check_pods(f)
    assert finding.objects == ("Deployment shop/api: Pod api-1 Running 1/2 ready",)


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        (Selector(match_labels={"app": "api"}), True),
        (Selector(), True),  # `selector: {}` selects every pod of the namespace
        (Selector(match_expressions=(("app", "In", ("api", "canary")),)), True),
        (Selector(match_expressions=(("app", "NotIn", ("web",)),)), True),
        (Selector(match_expressions=(("tier", "Exists", ()),)), True),
        (Selector(match_expressions=(("tier", "DoesNotExist", ()),)), False),
        (Selector(match_labels={"app": "api"}, match_expressions=(("app", "In", ("web",)),)), False),
        (Selector(present=False), False),  # no selector: selects nothing in policy/v1
    ],
)
def test_a_blocking_budget_is_found_for_every_selector_shape(selector: Selector, selected: bool) -> None:
    f = facts(
        workloads=[deployment("api", 1, {"app": "api", "tier": "backend"})],
        # The disruption controller counts the pods it selects; none when the selector misses.
        pdbs=[replace(pdb("api", selector, allowed=0), expected_pods=1 if selected else 0)],
    )
    findings = check_drain(f)
    if selected:
        (finding,) = findings
        assert finding.id == "PDB001"
        assert finding.severity == REQUIRED
        assert finding.objects == ("PodDisruptionBudget shop/api", "Deployment shop/api")
        assert "1 replica" in finding.why
        # One replica under minAvailable 1: no scaling of the pods' health helps, and the fix says so.
        assert finding.fix == (
            "Run more replicas than minAvailable, or use maxUnavailable: 1 (kubectl -n shop edit pdb api)."
        )
    else:
        assert findings == []


def test_a_budget_that_git_owns_is_relaxed_the_owners_way_and_max_unavailable_zero_is_not_scaled() -> None:
    """`kubectl edit` on a budget Flux applies is reverted at the next reconcile: the fix names the
    owner and its path instead. With maxUnavailable 0 no number of replicas helps: the fix says so."""
    owned = owner_of(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": "podinfo",
                "namespace": "apps",
                "labels": {
                    "kustomize.toolkit.fluxcd.io/name": "apps",
                    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
                },
            },
        }
    )
    budget = replace(
        pdb("api", Selector(match_labels={"app": "api"}), allowed=0, min_available=None),
        max_unavailable=0,
        owner=owned,
    )
    (finding,) = check_drain(facts(workloads=[deployment("api", 2)], pdbs=[budget]))
    assert finding.id == "PDB001"
    assert finding.fix == (
        "Set maxUnavailable: 1 for the upgrade: 0 refuses every eviction, however many replicas run (Flux "
        "Kustomization flux-system/apps will revert this change at its next reconcile if edited: `/upgrade action "
        'flux-suspend object=kustomization/flux-system/apps --cluster prod --reason "…"` first, then `/upgrade '
        'action flux-resume object=kustomization/flux-system/apps --cluster prod --reason "…"` once the fix is in '
        "Git)."
    )


def test_a_single_replica_under_min_available_one_is_named_even_before_the_status_is_computed() -> None:
    f = facts(
        workloads=[deployment("api", 1)],
        pdbs=[pdb("api", Selector(match_labels={"app": "api"}), allowed=None)],
    )
    (finding,) = check_drain(f)
    assert finding.id == "PDB002"
    f = facts(
        workloads=[deployment("api", 3)],
        pdbs=[pdb("api", Selector(match_labels={"app": "api"}), allowed=None)],
    )
    assert check_drain(f) == []


def test_drain_blockers_are_grouped_by_workload() -> None:
    f = facts(
        pods=PodSummary(
            not_evictable={"Deployment knative-serving/activator": ["a-1", "a-2"]},
            empty_dir={"Deployment shop/api": ["api-1"]},
            host_path={"StatefulSet db/pg": ["pg-0"]},
            bare=["default/debug"],
        )
    )
    by_id = {x.id: x for x in check_drain(f)}
    assert by_id["DRAIN001"].objects == ("Deployment knative-serving/activator (2 pods)",)
    assert by_id["DRAIN002"].objects == ("Deployment shop/api (1 pod)",)
    assert by_id["DRAIN003"].objects == ("StatefulSet db/pg (1 pod)",)
    assert by_id["DRAIN004"].objects == ("Pod default/debug",)
    assert by_id["DRAIN004"].severity == REQUIRED


def test_resilience_findings_are_recommended_and_name_each_workload_once() -> None:
    f = facts(
        workloads=[
            deployment("single", 1),
            deployment("unguarded", 3),
            deployment("guarded", 3),
            deployment("probeless", 2, readiness_probe=False, serves=True),
            deployment("probeless-worker", 2, readiness_probe=False),
            deployment("abrupt", 2, grace_seconds=0),
        ],
        pdbs=[
            pdb(n, Selector(match_labels={"app": n}))
            for n in ("guarded", "probeless", "probeless-worker", "abrupt")
        ],
    )
    by_id = {x.id: x for x in check_resilience(f)}
    assert {x.severity for x in by_id.values()} == {RECOMMENDED}
    assert by_id["RES001"].objects == ("Deployment shop/single",)
    assert by_id["RES002"].objects == ("Deployment shop/unguarded",)
    assert by_id["RES003"].objects == ("Deployment shop/probeless",)  # a worker nobody calls is fine
    assert by_id["RES004"].objects == ("Deployment shop/abrupt",)


def test_sidecars_older_than_istiod_are_named_with_their_version() -> None:
    f = facts(
        istiod="1.17.2",
        pods=PodSummary(
            proxy_versions={
                "Deployment shop/api": frozenset({"1.16.1", "1.17.2"}),
                "Deployment shop/web": frozenset({"1.17.2"}),
            }
        ),
    )
    (finding,) = check_istio(f)
    assert finding.id == "ISTIO001"
    assert finding.objects == ("Deployment shop/api (istio-proxy 1.16.1)",)
    assert finding.fix == (
        "Restart them after the control-plane step:\n  kubectl -n shop rollout restart deployment api"
    )
    assert check_istio(replace(f, istiod="")) == []


def test_the_istio_restart_is_one_command_per_workload_then_one_per_namespace() -> None:
    old = frozenset({"1.16.1"})
    versions = {f"Deployment ns-{i % 2}/app-{i}": old for i in range(8)}
    versions["StatefulSet data/db"] = old
    (finding,) = check_istio(facts(istiod="1.17.2", pods=PodSummary(proxy_versions=versions)))
    lines = finding.fix.splitlines()[1:]
    assert lines[:5] == [
        "  kubectl -n ns-0 rollout restart deployment app-0",
        "  kubectl -n ns-0 rollout restart deployment app-2",
        "  kubectl -n ns-0 rollout restart deployment app-4",
        "  kubectl -n ns-0 rollout restart deployment app-6",
        "  kubectl -n ns-1 rollout restart deployment app-1",
    ]
    assert lines[5:] == [
        "  kubectl -n data rollout restart statefulset   (every StatefulSet there: 1 more flagged)",
        "  kubectl -n ns-1 rollout restart deployment   (every Deployment there: 3 more flagged)",
    ]
    assert "NAMESPACE" not in finding.fix


def test_a_fail_closed_webhook_without_endpoints_is_required_and_a_fail_open_one_recommended() -> None:
    def hook(name: str, fail_closed: bool, ready: int, exists: bool = True) -> WebhookFacts:
        return WebhookFacts(
            configuration=f"ValidatingWebhookConfiguration {name}",
            webhook=f"{name}.example.com",
            fail_closed=fail_closed,
            service=f"sys/{name}",
            service_exists=exists,
            ready_endpoints=ready,
        )

    f = facts(webhooks=[hook("gk", True, 0), hook("vault", False, 0, exists=False), hook("ok", True, 2)])
    by_id = {x.id: x for x in check_webhooks(f)}
    assert by_id["HOOK001"].severity == REQUIRED
    assert "no ready endpoints" in by_id["HOOK001"].title
    assert by_id["HOOK002"].severity == RECOMMENDED
    assert "does not exist" in by_id["HOOK002"].title
    assert len(by_id) == 2


def test_a_healthy_cluster_passes() -> None:
    f = facts(
        nodes=[node("a"), node("b")],
        workloads=[deployment("api", 2, serves=True)],
        pdbs=[pdb("api", Selector(match_labels={"app": "api"}))],
        kube_proxy="v1.24.17",
    )
    assert run_checks(f, "1.25") == []


def test_a_target_at_or_below_the_control_plane_is_no_upgrade_and_its_fix_says_what_to_check() -> None:
    """`check --to 1.24` on a 1.24 cluster used to say "Upgrade to 1.25 first"."""
    for target in ("1.24", "1.23"):
        [skew] = [f for f in check_skew(facts(), target) if f.id == "SKEW001"]
        assert skew.why.startswith("The control plane is already on the target or past it")
        assert (
            skew.fix
            == "Check for the next minor, 1.25 (`--to 1.25`), or the cluster you meant (`--cluster`)."
        )
    [ahead] = [f for f in check_skew(facts(), "1.26") if f.id == "SKEW001"]
    assert ahead.fix == "Upgrade to 1.25 first, then run the check again for the next step."
