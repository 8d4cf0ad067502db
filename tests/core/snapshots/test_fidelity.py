"""How a twin's snapshot and findings are compared with its cluster's (`core/snapshots/fidelity`):
ids, ages and the suffixes controllers give pod names may differ, nothing else."""

from __future__ import annotations

from typing import Any

from bot.core.checks.findings import Finding
from bot.core.snapshots.fidelity import compare_findings, compare_snapshots, pod_names
from bot.core.snapshots.projection import POD_FIELDS


def _pod(**values: Any) -> list[Any]:
    row = dict.fromkeys(POD_FIELDS, "")
    row.update({"ready": 1, "total": 1, "restarts": 0, **values})
    return [row[f] for f in POD_FIELDS]


def _snap(*pods: list[Any], boot: str = "b1") -> dict[str, Any]:
    return {
        "version": {"major": "1", "minor": "29", "gitVersion": "v1.29.4"},
        "nodes": [{"name": "n1", "group": "a", "boot_id": boot, "created": boot, "kubelet": "v1.29.4"}],
        "workloads": [],
        "pdbs": [],
        "pod_fields": list(POD_FIELDS),
        "pods": list(pods),
    }


def _finding(fid: str, *objects: str) -> Finding:
    return Finding(id=fid, severity="recommended", title="t", objects=objects, why="", fix="")


def test_ids_ages_and_pod_name_suffixes_are_not_differences() -> None:
    cluster = _snap(
        _pod(namespace="shop", name="web-5d8f7c9b6d-x2x9q", uid="u1", workload_kind="Deployment", workload="web",
             node="n1", phase="Running", status="Running", created="2026-01-01T00:00:00Z"),
        _pod(namespace="shop", name="db-0", uid="u2", workload_kind="StatefulSet", workload="db", node="n1"),
    )  # fmt: skip
    twin = _snap(
        _pod(namespace="shop", name="web-7f9c5b8d4-abcde", uid="u9", workload_kind="Deployment", workload="web",
             node="n1", phase="Running", status="Running", created="2026-11-29T08:00:00Z"),
        _pod(namespace="shop", name="db-0", uid="u8", workload_kind="StatefulSet", workload="db", node="n1"),
        boot="b2",
    )  # fmt: skip
    assert compare_snapshots(cluster, twin) == []
    names = pod_names(cluster) | pod_names(twin)
    assert names == {"web-5d8f7c9b6d-x2x9q": "web-*", "web-7f9c5b8d4-abcde": "web-*"}
    assert (
        compare_findings(
            [_finding("KI004", "Deployment shop/web", "Pod shop/web-5d8f7c9b6d-x2x9q")],
            [_finding("KI004", "Deployment shop/web", "Pod shop/web-7f9c5b8d4-abcde")],
            names,
        )
        == []
    )


def test_a_pod_on_another_node_or_in_another_state_and_a_finding_of_one_side_are_differences() -> None:
    cluster = _snap(
        _pod(namespace="shop", name="web-1-a", workload_kind="Deployment", workload="web", node="n1")
    )
    twin = _snap(
        _pod(namespace="shop", name="web-2-b", workload_kind="Deployment", workload="web", node="n1", ready=0)
    )
    assert compare_snapshots(cluster, twin) == [
        "pod shop/web-* on n1 (ready=1, restarts=0, total=1, workload=web, workload_kind=Deployment): "
        "1 more in the cluster",
        "pod shop/web-* on n1 (ready=0, restarts=0, total=1, workload=web, workload_kind=Deployment): "
        "1 more in the twin",
    ]
    assert compare_findings([_finding("DRAIN001", "Deployment shop/web (1 pod)")], [], {}) == [
        "DRAIN001 (recommended) only on the cluster: Deployment shop/web (1 pod)"
    ]
    # A StatefulSet's pods keep their names: db-0 is not db-1.
    assert (
        pod_names(_snap(_pod(namespace="s", name="db-1", workload_kind="StatefulSet", workload="db"))) == {}
    )
