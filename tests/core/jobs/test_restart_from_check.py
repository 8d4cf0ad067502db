"""`restart namespaces=from-check:ISTIO001` on the sim's eks-nodegroups scenario (the real kube
client): the job restarts every namespace whose sidecars lag istiod — the ones the pre-flight
check's ISTIO001 flags, not a fixed list — and its dry run names them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks import service as checks
from bot.core.clusters import DEFAULT_NODE_GROUP_LABELS
from bot.core.jobs import preview
from bot.core.jobs.registry import default_jobs, job_kind
from bot.core.jobs.restart import RestartJob, wkey
from bot.errors import UserError
from bot.records import ActionCall, ClusterConfig
from bot.sim import SimCluster

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def test_the_restart_takes_every_namespace_istio001_flags(
    sim_eks: SimCluster, sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    cluster = Cluster.connect(ClusterConfig(name="prod", kubeconfig=sim_kubeconfig(sim_eks)))
    with contextlib.closing(cluster):
        report = checks.run_check(cluster, target="1.25")
        (istio,) = [f for f in report.findings if f.id == "ISTIO001"]
        flagged = sorted({o.split()[1].split("/")[0] for o in istio.objects})
        assert flagged == ["checkout", "payments", "reporting"]  # more than the old plan's `payments`

        progress = RestartJob().plan(cluster, {"namespaces": "from-check:ISTIO001", "timeout": "20m"}, now=T0)
        assert progress["resolved"] == {"from": "ISTIO001", "namespaces": flagged}
        assert {w["namespace"] for w in progress["workloads"]} == set(flagged)
        assert [wkey(w) for w in progress["workloads"]] == [
            "deployment/checkout/checkout",
            "deployment/payments/payments-api",
            "deployment/payments/payments-worker",
            "deployment/reporting/reporting-api",
        ]

        call = ActionCall(name="restart", args={"namespaces": "from-check:ISTIO001", "timeout": "20m"})
        dry = preview.read(cluster, [call], default_jobs(DEFAULT_NODE_GROUP_LABELS), now=T0)
        (action,) = dry["actions"]
        assert action["resolved"] == {"from": "ISTIO001", "namespaces": flagged}
        assert action["workload_count"] == 4
        assert (
            RestartJob().dry_run(cluster, progress)[0]
            == "namespaces from ISTIO001: checkout, payments, reporting"
        )


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({"namespaces": "from-check:API001"}, "come from from-check:ISTIO001"),
        ({"namespaces": "from-check:ISTIO001", "namespace": "payments"}, "either workloads"),
    ],
)
def test_a_restart_from_an_unknown_check_or_with_two_scopes_is_refused(
    args: dict[str, str], reason: str
) -> None:
    restart = job_kind("restart")
    assert restart is not None
    with pytest.raises(UserError, match=reason):
        restart.check(args)
