"""`plan draft`'s reading of a snapshot: node groups and their order, lagging sidecars, Fargate."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.announcements.overrides import window_refusal
from bot.core.runs.draft import (
    DraftInputs,
    ProviderFacts,
    discover_groups,
    draft_inputs,
    draft_plan,
    fargate_restarts,
    group_step_keys,
    lagging_sidecars,
)
from bot.core.runs.plans import parse_plan
from bot.core.snapshots.projection import POD_FIELDS
from bot.errors import UserError
from bot.settings import Settings, parse_settings


def _node(name: str, group: str, kubelet: str = "v1.28.9") -> dict[str, Any]:
    return {"name": name, "group": group, "kubelet": kubelet}


def _pod(
    ns: str, name: str, node: str, kind: str = "Deployment", workload: str = "", images: str = ""
) -> list[Any]:
    row = dict.fromkeys(POD_FIELDS, "")
    row.update(
        namespace=ns, name=name, node=node, workload_kind=kind, workload=workload or name, images=images
    )
    return [row[f] for f in POD_FIELDS]


def _snap(
    nodes: list[dict[str, Any]], pods: list[list[Any]], workloads: list[dict[str, Any]] = ()
) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "cluster": "prod",
        "taken_at": "2026-11-26T10:00:00+00:00",
        "version": {"gitVersion": "v1.28.9-eks-1"},
        "nodes": nodes,
        "pods": pods,
        "pod_fields": list(POD_FIELDS),
        "workloads": list(workloads),
    }


def _shop() -> dict[str, Any]:
    nodes = [
        _node("a1", "apps"),
        _node("a2", "apps"),
        _node("b1", "batch"),
        _node("g1", "gateways"),
        _node("l1", "obs"),
        _node("s1", "sys"),
        _node("f1", "fargate"),
        _node("n1", "(none)"),
    ]
    pods = [
        _pod("kube-system", "karpenter", "s1"),
        _pod("kube-system", "metrics-server", "s1"),
        _pod("cert-manager", "cert-manager", "s1"),
        _pod("kube-system", "kube-proxy-1", "a1", kind="DaemonSet", workload="kube-proxy"),
        _pod("kube-system", "kube-proxy-2", "a2", kind="DaemonSet", workload="kube-proxy"),
        _pod("kube-system", "kube-proxy-3", "l1", kind="DaemonSet", workload="kube-proxy"),
        _pod("istio-system", "istio-ingressgateway-x", "g1", workload="istio-ingressgateway"),
        _pod("shop", "web-1", "a1"),
        _pod("jobs", "worker-1", "b1"),
        _pod("monitoring", "prometheus-0", "l1", kind="StatefulSet", workload="prometheus"),
        _pod("logging", "loki-0", "l1", kind="StatefulSet", workload="loki"),
        _pod("shop", "web-2", "l1"),
        _pod("kube-system", "coredns-1", "f1", workload="coredns"),
    ]
    return _snap(nodes, pods)


def test_groups_in_the_runbook_order_control_mesh_rest_by_size_observability_last() -> None:
    groups = discover_groups(_shop())
    assert [g.name for g in groups] == ["sys", "gateways", "apps", "batch", "obs"]
    assert [g.kind for g in groups] == ["control", "mesh", "other", "other", "observability"]
    # DaemonSet pods say nothing of a group's purpose; Fargate and unlabelled nodes are no group.
    assert groups[2].namespaces == {"shop": 1}
    assert groups[1].gateways == ["istio-ingressgateway"]


def test_a_configured_order_comes_first_and_the_heuristic_orders_the_rest() -> None:
    groups = discover_groups(_shop(), order=["batch", "obs", "nosuch"])
    assert [g.name for g in groups] == ["batch", "obs", "sys", "gateways", "apps"]


def test_a_group_with_a_minority_of_control_pods_is_not_the_control_group() -> None:
    snap = _shop()
    snap["pods"] += [_pod("shop", f"web-x{i}", "s1") for i in range(3)]
    assert discover_groups(snap)[0].name == "gateways"


def test_sidecars_behind_istiod_and_what_runs_on_fargate() -> None:
    snap = _shop()
    snap["workloads"] = [
        {
            "kind": "Deployment",
            "namespace": "istio-system",
            "name": "istiod",
            "images": ["docker.io/istio/pilot:1.20.3"],
        }
    ]
    snap["pods"] += [
        _pod("shop", "web-3", "a2", workload="web", images="shop/web:2,docker.io/istio/proxyv2:1.19.5"),
        _pod("pay", "api-1", "a2", workload="api", images="pay/api:1,docker.io/istio/proxyv2:1.20.3"),
        _pod(
            "istio-system",
            "gw-1",
            "g1",
            workload="istio-ingressgateway",
            images="docker.io/istio/proxyv2:1.19.5",
        ),
    ]
    istiod, lagging, workloads = lagging_sidecars(snap)
    assert istiod == "1.20.3"
    assert lagging == {"shop": "1.19.5"}
    assert workloads == ["deployment/shop/web"]
    assert fargate_restarts(snap) == ["deployment/kube-system/coredns"]
    snap["workloads"] = []
    assert lagging_sidecars(snap) == (None, {}, [])


def _inputs(style: str = "pipeline") -> DraftInputs:
    return DraftInputs(
        cluster="prod",
        target="1.29",
        style=style,
        roster={"primary": ["U0PRIMARY"], "shadow": ["U0SHADOW"]},
        channels={},
        window=("2026-12-01T22:00", "2026-12-02T03:00", "UTC"),
        window_note="test window",
        group_labels=["karpenter.sh/nodepool"],
    )


@pytest.mark.parametrize("style", ["pipeline", "eks-managed", "generic"])
def test_every_style_drafts_a_valid_plan_with_a_reason_above_each_step(style: str) -> None:
    text = draft_plan(_shop(), _inputs(style))
    plan = parse_plan(text, source="draft.yaml", now=datetime(2026, 11, 26, tzinfo=UTC))
    ids = [s.id for s in plan.steps]
    assert ids[0] == "snapshot-pre"
    assert "restart-coredns" in ids
    waits = [i.removeprefix("wait-") for i in ids if i.startswith("wait-")]
    assert waits == ["sys", "gateways", "apps", "batch", "obs"]
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("  - id: "):
            assert lines[n - 1].startswith("  # "), line
    # Without an announcer role the lead announces, and another person confirms it done.
    announce = yaml.safe_load(text)["steps"][2]
    assert announce["gate"] == {"any_of": ["primary"]}
    assert announce["done"] == {"any_of": ["primary", "shadow"]}


def _from(settings: Settings, now: datetime) -> DraftInputs:
    return draft_inputs(
        cluster="prod",
        target="1.29",
        style="pipeline",
        now=now,
        roster=settings.roster,
        channels={"operations": settings.channels.operations},
        windows=settings.windows,
        timezone=settings.timezone,
        group_labels=settings.node_group_labels,
        order=settings.node_group_order,
    )


def test_inputs_from_the_configuration_window_and_roster(tmp_path: Any) -> None:
    settings = parse_settings(
        f"data_dir: {tmp_path}\ntimezone: Asia/Tokyo\n"
        "roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\n"
        "windows: [{days: sat, start: '21:00', end: '04:00'}]\n"
        "snapshot: {node_group_order: [sys]}\n",
        source=tmp_path / "c.yaml",
        env={},
    )
    now = datetime(2026, 11, 26, 1, 0, tzinfo=UTC)  # a Thursday
    inputs = _from(settings, now)
    assert inputs.window == ("2026-11-28T21:00", "2026-11-29T02:00", "Asia/Tokyo")
    assert inputs.order == ("sys",)
    assert "configured windows" in inputs.window_note
    empty = parse_settings(f"data_dir: {tmp_path}\n", source=tmp_path / "c.yaml", env={})
    with pytest.raises(UserError, match="no roster"):
        _from(empty, now)


def _comment_above(lines: list[str], n: int) -> str:
    """The comment block right above line `n` (a step's `- id:` line)."""
    block: list[str] = []
    while n > 0 and lines[n - 1].startswith("  # "):
        n -= 1
        block.insert(0, lines[n].removeprefix("  # "))
    return " ".join(block)


@pytest.mark.parametrize("style", ["pipeline", "eks-managed", "generic"])
def test_each_node_group_steps_comment_names_the_exact_label_it_groups_by(style: str) -> None:
    snap = _shop()
    keys = {"sys": "eks.amazonaws.com/nodegroup", "obs": "alpha.eksctl.io/nodegroup-name"}
    for node in snap["nodes"]:
        node["group_label"] = keys.get(node["group"], "karpenter.sh/nodepool")
    text = draft_plan(snap, _inputs(style))
    lines = text.splitlines()
    by_step = {
        line.removeprefix("  - id: "): _comment_above(lines, n)
        for n, line in enumerate(lines)
        if line.startswith("  - id: ")
    }
    grouped = [s for s in by_step if s.split("-", 1)[0] in ("launch", "drain", "wait", "update")]
    assert len(grouped) == (10 if style == "eks-managed" else 15)
    for step in grouped:
        group = step.split("-", 1)[1]
        assert f"labelled {keys.get(group, 'karpenter.sh/nodepool')}={group}" in by_step[step], (
            step,
            by_step[step],
        )
    settle = by_step["watch-settle"]
    for group in ("sys", "gateways", "apps", "batch", "obs"):
        assert f"{keys.get(group, 'karpenter.sh/nodepool')}={group}" in settle
    assert "eks.amazonaws.com/compute-type=fargate" in by_step["restart-coredns"]
    # A snapshot from before the key was recorded: the draft does not guess one.
    old = draft_plan(_shop(), _inputs(style))
    assert "labelled <one of the node group labels above>=apps" in old
    assert "karpenter.sh/nodepool=apps" not in old


# ---------------------------------------------------------------------------------------------
# Node groups named by any label value still draft a plan that validates (issue 38, item 5)

#: A label value, as the API server accepts one: what names a node group.
LABEL_VALUE = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?", fullmatch=True).filter(
    lambda name: name not in ("fargate",)
)
HOSTILE_GROUPS = [
    "NG_Shared.v2",
    "System",
    "a" * 63,
    "a" * 62 + "b",  # differs from the one above only past the room an id has for it
    "ng-1",
    "NG_1",
    "ng.1",
    "ng-1-2",  # what `ng-1`'s second taker becomes
    "x_.-Y",
    "9",
]


def _groups_snap(names: list[str]) -> dict[str, Any]:
    return _snap([_node(f"n{i}", name) for i, name in enumerate(names)], [])


def _assert_drafts_validate(names: list[str], style: str) -> None:
    text = draft_plan(_groups_snap(names), _inputs(style))
    plan = parse_plan(text, source="draft.yaml", now=datetime(2026, 11, 26, tzinfo=UTC))
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    assert len([i for i in ids if i.startswith("wait-")]) == len(set(names))
    # The real names stay where people read them and where the actions look for them.
    waits = [s for s in yaml.safe_load(text)["steps"] if s["id"].startswith("wait-")]
    assert sorted(s["actions"][0]["wait-nodegroup"]["nodegroup"] for s in waits) == sorted(set(names))


@pytest.mark.parametrize("style", ["pipeline", "eks-managed", "generic"])
def test_node_groups_with_capitals_underscores_dots_and_63_characters_draft_valid_unique_ids(
    style: str,
) -> None:
    _assert_drafts_validate(HOSTILE_GROUPS, style)
    keys = group_step_keys(HOSTILE_GROUPS)
    assert keys["NG_Shared.v2"] == "ng-shared-v2"
    assert (keys["ng-1"], keys["NG_1"], keys["ng.1"], keys["ng-1-2"]) == (
        "ng-1",
        "ng-1-2",
        "ng-1-3",
        "ng-1-2-2",
    )
    assert len(f"update-{keys['a' * 63]}") == 63
    assert keys["a" * 62 + "b"] == "a" * 54 + "-2"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(LABEL_VALUE, min_size=1, max_size=6), style=st.sampled_from(["pipeline", "eks-managed"])
)
def test_any_label_values_as_node_group_names_draft_a_plan_that_validates(
    names: list[str], style: str
) -> None:
    _assert_drafts_validate(names, style)


@pytest.mark.parametrize(("alerts", "metrics"), [(True, True), (True, False), (False, True), (False, False)])
def test_a_cluster_naming_alertmanager_or_prometheus_drafts_the_evidence_steps_and_background(
    alerts: bool, metrics: bool
) -> None:
    inputs = dataclasses.replace(_inputs("pipeline"), alerts=alerts, metrics=metrics)
    text = draft_plan(_shop(), inputs)
    plan = parse_plan(text, source="draft.yaml", now=datetime(2026, 11, 26, tzinfo=UTC))
    ids = [s.id for s in plan.steps]
    assert ("settle-alerts" in ids) is alerts
    assert ("settle-apiserver-4xx" in ids) is metrics
    expected = [k for k, on in (("alerts", alerts), ("analysis", metrics)) if on]
    drains = [s for s in plan.steps if s.id.startswith("drain-")]
    assert drains
    for step in drains:
        assert [c.name for c in step.background] == expected
    if metrics:
        [analysis] = plan.step("settle-apiserver-4xx").actions
        assert analysis.args["query"] == 'sum(rate(apiserver_request_total{code=~"4.."}[5m]))'
        assert analysis.args["success"] == "result < 1.2 * baseline + 5"
        # After the settle watch, in the settle of the roll-out.
        assert ids.index("settle-apiserver-4xx") > ids.index("watch-settle")


SEED_WINDOWS = (
    "timezone: Asia/Tokyo\n"
    "windows: [{days: mon-fri, start: '14:00', end: '17:00'}]\n"
    "freezes: [{from: 2026-11-30, to: 2026-12-01, reason: release week}]\n"
)


def test_the_drafted_window_is_one_schedule_accepts_inside_short_windows_and_outside_freezes(
    tmp_path: Any,
) -> None:
    # B11: a 3-hour window (the seed team's) never held the draft's 5 hours: the draft said "No
    # windows in the configuration" and `schedule` refused its window ("No allowed slot").
    settings = parse_settings(
        f"data_dir: {tmp_path}\nroster: {{primary: [U0PRIMARY], shadow: [U0SHADOW]}}\n" + SEED_WINDOWS,
        source=tmp_path / "c.yaml",
        env={},
    )
    now = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)  # Friday 10:00 in Tokyo
    inputs = _from(settings, now)
    # Tomorrow is Saturday; Monday and Tuesday are frozen: Wednesday 14:00–17:00, as `schedule` checks it.
    assert inputs.window == ("2026-12-02T14:00", "2026-12-02T17:00", "Asia/Tokyo")
    zone = ZoneInfo("Asia/Tokyo")
    start, end = (datetime.fromisoformat(t).replace(tzinfo=zone) for t in inputs.window[:2])
    assert window_refusal(settings.windows, start, end, "Asia/Tokyo") is None
    assert "No windows in the configuration" not in inputs.window_note
    assert (
        "The first slot of 3h from tomorrow in the configured windows (Mon–Fri 14:00–17:00"
        in inputs.window_note
    )
    assert "release week" in inputs.window_note


def test_without_windows_the_draft_takes_tomorrow_night_clear_of_the_freezes(tmp_path: Any) -> None:
    settings = parse_settings(
        f"data_dir: {tmp_path}\nroster: {{primary: [U0PRIMARY]}}\ntimezone: Asia/Tokyo\n"
        "freezes: [{from: 2026-11-28, to: 2026-11-29, reason: year-end}]\n",
        source=tmp_path / "c.yaml",
        env={},
    )
    inputs = _from(settings, datetime(2026, 11, 27, 1, 0, tzinfo=UTC))
    assert inputs.window == ("2026-11-30T00:00", "2026-11-30T05:00", "Asia/Tokyo")
    assert inputs.window_note.startswith("No windows in the configuration (any time is allowed)")


def test_windows_too_short_for_an_hour_say_so_and_schedule_refuses_the_placeholder(tmp_path: Any) -> None:
    settings = parse_settings(
        f"data_dir: {tmp_path}\nroster: {{primary: [U0PRIMARY]}}\n"
        "windows: [{days: mon-fri, start: '14:00', end: '14:30'}]\n",
        source=tmp_path / "c.yaml",
        env={},
    )
    inputs = _from(settings, datetime(2026, 11, 27, 1, 0, tzinfo=UTC))
    assert inputs.window_note.startswith(
        "No slot of 1h or more in the configured windows (Mon–Fri 14:00–14:30 UTC)"
    )
    assert "placeholder that `schedule` refuses" in inputs.window_note


@pytest.mark.parametrize(
    ("cloud", "actions"),
    [
        ("aks", "aks-upgrade-control-plane, aks-upgrade-nodepool"),
        ("gke", "gke-update-master, gke-update-nodepool"),
    ],
)
def test_a_pipeline_draft_for_an_aks_or_gke_cluster_says_its_steps_are_peoples_and_which_style_drafts_the_clouds(
    cloud: str, actions: str
) -> None:
    text = draft_plan(_shop(), dataclasses.replace(_inputs(), cloud=cloud))
    header = " ".join(line.removeprefix("# ") for line in text.splitlines() if line.startswith("# "))
    assert (
        f"prod's provider is {cloud.upper()}: --style pipeline keeps the control plane and the "
        f"{'agent' if cloud == 'aks' else 'node'} pools people's steps below; --style {cloud}-managed (the "
        f"default for it) drafts {cloud.upper()}'s own actions ({actions})" in header
    )
    # The control plane's step does not claim that no action could upgrade it: the cloud's can.
    assert "the plan language has no control-plane action" not in text
    parse_plan(text, source="draft.yaml", now=datetime(2026, 11, 26, tzinfo=UTC))
    assert "provider is" not in draft_plan(_shop(), _inputs())


@pytest.mark.parametrize("cloud", ["aks", "gke"])
def test_eks_managed_is_refused_for_a_cluster_whose_provider_is_aks_or_gke(cloud: str, tmp_path: Any) -> None:
    settings = parse_settings(
        f"data_dir: {tmp_path}\nroster: {{primary: [U0PRIMARY], shadow: [U0SHADOW]}}\n",
        source=tmp_path / "c.yaml",
        env={},
    )
    now = datetime(2026, 11, 26, 1, 0, tzinfo=UTC)
    assert _from(settings, now).cloud == ""

    def inputs(style: str, on: str) -> DraftInputs:
        return draft_inputs(
            cluster="prod",
            target="1.29",
            style=style,
            now=now,
            roster=settings.roster,
            channels={},
            windows=settings.windows,
            timezone=settings.timezone,
            group_labels=None,
            cloud=on,
        )

    with pytest.raises(
        UserError, match=f"--style eks-managed drafts EKS's steps, and prod's provider is {cloud.upper()}"
    ):
        inputs("eks-managed", cloud)
    assert inputs("pipeline", cloud).cloud == cloud
    assert inputs("eks-managed", "eks").style == "eks-managed"
    # Without --style: the cloud's own actions for an AKS or GKE cluster, people's steps otherwise.
    assert inputs("", cloud).style == f"{cloud}-managed"
    assert (inputs("", "eks").style, inputs("", "").style) == ("pipeline", "pipeline")


def test_a_hop_takes_the_clouds_own_pick_of_its_minor_else_the_newest_it_offers_of_it() -> None:
    gke = ProviderFacts(
        kind="gke",
        name="shop",
        version="1.29.8-gke.1031000",
        offered_versions=(
            "1.31.1-gke.1146000",
            "1.30.5-gke.1014001",
            "1.30.10-gke.1000",
            "1.29.9-gke.1177000",
        ),
        default_version="1.30.5-gke.1014001",
    )
    assert gke.hop_version("1.30") == "1.30.5-gke.1014001"  # GKE's default, not the newest 1.30
    assert gke.hop_version("1.31") == "1.31.1-gke.1146000"
    assert gke.hop_version("1.32") == ""  # none offered: the draft leaves a placeholder
