"""`Cluster.remembering`: inside the block a list is read from the cluster once, and a second
`list_pages` of it (another shape: the checks' and the removed-API signals') decodes the kept pages;
on the sim, counted by its apiserver metric."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from bot.adapters.kube import Cluster
from bot.records import ClusterConfig
from bot.sim import SimCluster


class Named(msgspec.Struct):
    metadata: dict[str, object]


class Kind(msgspec.Struct):
    kind: str = ""


def _names(cluster: Cluster, path: str, **options: object) -> list[str]:
    return [
        str(item.metadata["name"])
        for page in cluster.list_pages(path, item_type=Named, **options)  # type: ignore[arg-type]
        for item in page.items
    ]


def test_a_list_is_read_once_inside_the_block_and_again_outside(sim_eks: SimCluster, tmp_path: Path) -> None:
    kubeconfig = sim_eks.write_kubeconfig(tmp_path / "kubeconfig")
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=kubeconfig, context="sim"))

    def count() -> int:
        # The sim counts a request once it has answered it: wait until the count stops moving.
        deadline, last = time.monotonic() + 5, -1
        while True:
            now = sim_eks.control.request_count("apps", "v1", "deployments")
            if now == last or time.monotonic() > deadline:
                return now
            last = now
            time.sleep(0.05)

    try:
        before = count()
        with cluster.remembering():
            # Pages of 2: the whole list, every page, is kept and given back in order.
            first = _names(cluster, "/apis/apps/v1/deployments", limit=2)
            read = count() - before
            assert read == (len(first) + 1) // 2
            again = _names(cluster, "/apis/apps/v1/deployments", limit=2)
            assert again == first
            # Decoded into another shape from the same pages.
            kinds = [i for p in cluster.list_pages("/apis/apps/v1/deployments", limit=2) for i in p.items]
            assert len(kinds) == len(first)
            assert count() - before == read
            # Another query is another list.
            _names(cluster, "/apis/apps/v1/deployments", limit=500)
            assert count() - before == read + 1
            # A list left half-read is not kept.
            pages = cluster.list_pages("/apis/apps/v1/namespaces/payments/deployments", limit=1)
            next(pages)
            pages.close()
            _names(cluster, "/apis/apps/v1/namespaces/payments/deployments", limit=1)
            assert count() - before > read + 1 + 1
        # Outside the block nothing is kept.
        after = count()
        _names(cluster, "/apis/apps/v1/deployments", limit=2)
        assert count() - after == read
        with cluster.remembering(max_bytes=10):
            _names(cluster, "/apis/apps/v1/deployments", limit=500)
            _names(cluster, "/apis/apps/v1/deployments", limit=500)
        assert count() - after == read + 2  # too large to keep: read twice
        with cluster.remembering(["/apis/apps/v1/statefulsets"]):
            _names(cluster, "/apis/apps/v1/deployments", limit=500)
            _names(cluster, "/apis/apps/v1/deployments", limit=500)
        assert count() - after == read + 4  # not a path asked for: not kept
    finally:
        cluster.close()
