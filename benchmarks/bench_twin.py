"""A twin of a `large`-sized cluster: written from its snapshot in under a minute, and served.

Serves the sim's `large` generated cluster (5,000 nodes, 150,000 pods; `--nodes/--pods` scale it
down, the other generator numbers in proportion), takes `upgrade-bot snapshot pre` of it into a
store, then prints:
  - `upgrade-bot sim scenario --from-snapshot pre --out TWIN`: wall seconds, the file's size and
    the command's peak RSS (target: under 60 s);
  - `upgrade-bot sim serve --scenario TWIN`: seconds until it prints its kubeconfig (settled and
    accepting connections; the twin is written `settled: true`, so its workloads are built Running
    rather than played through the controllers; target: under 180 s);
  - the nodes and pods the twin serves, counted through the official kubernetes client (pages of
    500, as bench_snapshot.py's wire), against the source cluster's;
and PASS or FAIL.

Usage: nice .venv/bin/python benchmarks/bench_twin.py [--nodes 5000] [--pods 150000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_snapshot import PAGE, start_sim, timed_cpu, timed_rss  # noqa: E402

from bot.sim.world.scenario import builtin_dir  # noqa: E402

TARGET_S = 60.0
SERVE_TARGET_S = 180.0
FULL_NODES, FULL_PODS = 5000, 150000


def scaled_large(work: Path, nodes: int, pods: int) -> str:
    """The built-in `large` (its name, to serve it as is), or a copy of it scaled to `nodes`/`pods`."""
    if (nodes, pods) == (FULL_NODES, FULL_PODS):
        return "large"
    data = yaml.safe_load((builtin_dir() / "large.yaml").read_text(encoding="utf-8"))
    gen = data["generate"]
    share = pods / FULL_PODS
    gen["nodes"], gen["pods"] = nodes, pods
    gen["deployments"] = max(1, round(gen["deployments"] * share))
    gen["namespaces"] = max(1, round(gen["namespaces"] * share))
    gen["node_groups"] = max(1, min(gen["node_groups"], nodes))
    path = work / f"large-{nodes}x{pods}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def serve(scenario: str, workdir: Path, timeout: float) -> tuple[subprocess.Popen[str], str, Path]:
    """As bench_snapshot.start_sim, with a deadline of `timeout` seconds of its own (a twin's
    start-up is what is measured here, and a regression should end the run, not hang it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "sim",
            "serve",
            "--scenario",
            scenario,
            "--port",
            "0",
            "--kubeconfig",
            str(workdir / "sim.kubeconfig"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sim serving {scenario} exited with {proc.wait()}")
        if line.startswith("url:"):
            url = line.split(":", 1)[1].strip()
        if line.startswith("kubeconfig:"):
            return proc, url, Path(line.split(":", 1)[1].strip())
    proc.kill()
    raise SystemExit(f"the sim serving {scenario} did not answer within {timeout:.0f}s")


def count(kubeconfig: Path, path: str) -> int:
    """Items of the list at `path`, through the official client in pages of `PAGE`."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    total, token = 0, ""
    with k8s_client.ApiClient(configuration) as api:
        while True:
            query: list[tuple[str, object]] = [("limit", PAGE)] + ([("continue", token)] if token else [])
            resp = api.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(10, 120),
            )
            page = json.loads(resp.data)
            resp.release_conn()
            total += len(page["items"])
            token = page["metadata"].get("continue", "")
            if not token:
                return total


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=FULL_NODES)
    parser.add_argument("--pods", type=int, default=FULL_PODS)
    parser.add_argument(
        "--serve-timeout", type=float, default=900, help="seconds the twin may take to answer (default 900)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work dir (database, twin, results)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-twin-"))
    bot = [sys.executable, "-m", "bot"]
    results: dict[str, float] = {}
    ok = True
    scenario = scaled_large(work, args.nodes, args.pods)
    print(f"serving the sim's `large` cluster ({args.nodes} nodes, {args.pods} pods) …", flush=True)
    started = time.monotonic()
    sim, url, kubeconfig = start_sim(scenario, work)
    twin_sim: subprocess.Popen[str] | None = None
    try:
        print(f"  sim ready at {url} in {time.monotonic() - started:.1f}s", flush=True)
        config = work / "upgrade-bot.yaml"
        config.write_text(
            f"data_dir: {work / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
            f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
        )
        source = {"nodes": count(kubeconfig, "/api/v1/nodes"), "pods": count(kubeconfig, "/api/v1/pods")}
        print(f"  the source serves {source['nodes']} nodes, {source['pods']} pods", flush=True)
        t_snap, rss_snap, _ = timed_rss([*bot, "snapshot", "pre", "--config", str(config)])
        print(f"upgrade-bot snapshot pre: {t_snap:.1f}s, peak RSS {rss_snap:.0f} MB", flush=True)
        stop(sim)

        twin = work / "twin.yaml"
        cmd = [*bot, "sim", "scenario", "--from-snapshot", "pre", "--config", str(config), "--out", str(twin)]
        t_write, cpu_write, rss_write, _ = timed_cpu(cmd)
        results.update(write_s=t_write, write_cpu_s=cpu_write, write_rss_mb=rss_write)
        results["twin_mb"] = twin.stat().st_size / 1e6
        print(
            f"upgrade-bot sim scenario --from-snapshot pre --out twin.yaml: {t_write:.1f}s "
            f"(CPU {cpu_write:.1f}s), {results['twin_mb']:.2f} MB, peak RSS {rss_write:.0f} MB",
            flush=True,
        )

        started = time.monotonic()
        twin_sim, twin_url, twin_kubeconfig = serve(str(twin), work / "twin", args.serve_timeout)
        results["serve_s"] = time.monotonic() - started
        print(
            f"upgrade-bot sim serve --scenario twin.yaml: answering at {twin_url} in {results['serve_s']:.1f}s"
        )
        served = {
            "nodes": count(twin_kubeconfig, "/api/v1/nodes"),
            "pods": count(twin_kubeconfig, "/api/v1/pods"),
        }
        print(f"  the twin serves {served['nodes']} nodes, {served['pods']} pods", flush=True)

        print()
        print("RESULTS")
        write_ok = t_write < TARGET_S
        ok &= write_ok
        print(
            f"  twin written                = {t_write:.1f} s   (target < {TARGET_S:.0f} s)   "
            f"{'PASS' if write_ok else 'FAIL'}"
        )
        print(
            f"  twin file                   = {results['twin_mb']:.2f} MB, writer peak RSS {rss_write:.0f} MB"
        )
        serve_ok = results["serve_s"] < SERVE_TARGET_S
        ok &= serve_ok
        print(
            f"  twin served (settled)       = {results['serve_s']:.1f} s   (target < {SERVE_TARGET_S:.0f} s)   "
            f"{'PASS' if serve_ok else 'FAIL'}"
        )
        for what in ("nodes", "pods"):
            same = served[what] == source[what]
            ok &= same
            print(
                f"  {what:<27} = {served[what]} served, {source[what]} in the source   "
                f"{'PASS' if same else 'FAIL'}"
            )
        print(f"{'PASS' if ok else 'FAIL'}", flush=True)
        (work / "results.json").write_text(
            json.dumps({**results, "source": source, "served": served}, indent=2)
        )
    finally:
        for proc in (sim, twin_sim):
            if proc is not None and proc.poll() is None:
                stop(proc)
        if args.keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
