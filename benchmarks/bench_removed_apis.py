"""The removed-API check against `upgrade-bot snapshot` on the same simulated server, in one run.

Serves the sim's `large` scenario (5,000 nodes, 150,000 pods) and prints:
  - `upgrade-bot snapshot pre` wall time and peak RSS (the reference);
  - the removed-API part of `check` (`cluster_api_findings`: the metric, the applied kinds'
    last-applied and managedFields, the Helm release Secrets) in a fresh interpreter, wall time,
    its ratio to the snapshot (target ≤ 1) and peak RSS (target ≤ 500 MB), with the objects it read;
  - `manifest_findings` over a generated tree of manifests (files, objects, seconds).

Usage: .venv/bin/python benchmarks/bench_removed_apis.py [--scenario large]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_snapshot import start_sim, timed_rss  # noqa: E402


def run_check(kubeconfig: str) -> None:
    """The child: one cluster_api_findings over the sim, its counts on stdout."""
    from bot.adapters.kube import Cluster
    from bot.core.checks import apis
    from bot.records import ClusterConfig

    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=Path(kubeconfig), request_timeout=60))
    read = {"objects": 0}

    class Counting:
        """The adapter, counting the items of each list page the check reads."""

        def get_raw(self, path: str, query: Any = None) -> bytes:
            return cluster.get_raw(path, query)

        def get_json(self, path: str, query: Any = None) -> dict[str, Any]:
            return cluster.get_json(path, query)

        def list_pages(
            self, path: str, query: Any = None, *, limit: int = 500, item_type: Any
        ) -> Iterator[Any]:
            for page in cluster.list_pages(path, query, limit=limit, item_type=item_type):
                read["objects"] += len(page.items)
                yield page

    notes: list[str] = []
    started = time.monotonic()
    findings = apis.cluster_api_findings(Counting(), "1.25", now=time.time(), notes=notes)
    print(
        f"check: {time.monotonic() - started:.2f}s in-process, {read['objects']} objects read (applied kinds and Helm Secrets), "
        f"{len(findings)} findings; notes: {notes}",
        flush=True,
    )


def manifests(work: Path, files: int = 2000, per_file: int = 10) -> tuple[int, int, float]:
    from bot.core.checks.apis import manifest_findings

    root = work / "manifests"
    for i in range(files):
        folder = root / f"team-{i % 50}"
        folder.mkdir(parents=True, exist_ok=True)
        docs = [
            f"apiVersion: {'policy/v1beta1' if (i + j) % 97 == 0 else 'apps/v1'}\n"
            f"kind: {'PodDisruptionBudget' if (i + j) % 97 == 0 else 'Deployment'}\n"
            f"metadata:\n  name: app-{i}-{j}\n  namespace: ns-{i % 50}\n"
            "spec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n        - name: app\n"
            "          image: registry.example.com/app:1.0\n"
            for j in range(per_file)
        ]
        (folder / f"app-{i}.yaml").write_text("---\n".join(docs))
    started = time.monotonic()
    found = manifest_findings([root], "1.25")
    return files, files * per_file, time.monotonic() - started if found else -1.0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--run-check", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_check:
        run_check(args.run_check)
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-apis-"))
    print(f"serving the sim's `{args.scenario}` scenario …", flush=True)
    started = time.monotonic()
    sim, url, kubeconfig = start_sim(args.scenario, work)
    print(f"  sim ready at {url} in {time.monotonic() - started:.1f}s", flush=True)
    config = work / "upgrade-bot.yaml"
    config.write_text(
        f"data_dir: {work / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
        f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
    )
    try:
        t_snap, rss_snap, _ = timed_rss(
            [sys.executable, "-m", "bot", "snapshot", "pre", "--config", str(config)]
        )
        print(f"upgrade-bot snapshot pre: {t_snap:.1f}s, peak RSS {rss_snap:.0f} MB", flush=True)
        out = work / "check.out"
        t_check, rss_check, _ = timed_rss([sys.executable, __file__, "--run-check", str(kubeconfig)], out)
        print(out.read_text().strip())
        print(
            f"removed-API check (fresh interpreter): {t_check:.1f}s, peak RSS {rss_check:.0f} MB", flush=True
        )
        files, objects, seconds = manifests(work)
        print(f"manifest_findings: {files} files, {objects} objects in {seconds:.2f}s", flush=True)
        print("\nsummary")
        print(f"  check / snapshot   = {t_check / t_snap:.3f}   ({t_check:.1f}s / {t_snap:.1f}s; target ≤ 1)")
        print(f"  check peak RSS     = {rss_check:.0f} MB   (target ≤ 500 MB)")
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sim.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
