"""How fast the simulated cluster serves a list at Kubernetes' scale envelope, and what it costs.

Starts `upgrade-bot sim serve --scenario large` (5,000 nodes, 150,000 pods of ~5 KB) in its own
process and prints:
  - the sim's start-up time;
  - listing every pod in pages of 500 with the official Python client, raw (`_preload_content=False`,
    one `json.loads` per page, no model objects) — the path the bot's snapshot takes;
  - the same list with the transport only (pages read, not parsed): what the sim itself costs;
  - `kubectl get pods -A -o json` (kubectl also pages by 500), output to /dev/null;
  - the sim's peak RSS (VmHWM), which must stay under 2 GB.

Usage: .venv/bin/python benchmarks/bench_sim_list.py [--scenario large] [--skip-kubectl]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

ROOT = Path(__file__).resolve().parent.parent
KUBECTL = Path(sys.executable).parent / "kubectl"
PAGE = 500
RSS_LIMIT_MB = 2048


def start_sim(scenario: str, workdir: Path) -> tuple[subprocess.Popen[str], str, Path]:
    kubeconfig = workdir / "sim.kubeconfig"
    cmd = [sys.executable, "-m", "bot.sim.cli", "serve", "--scenario", scenario, "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--kubeconfig", str(kubeconfig)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    url = ""
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sim exited with status {proc.wait()} before it was ready")
        key, _, value = line.partition(":")
        if key == "url":
            url = value.strip()
        elif key == "kubeconfig":
            return proc, url, Path(value.strip())


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def list_pods(kubeconfig: Path, *, parse: bool) -> tuple[float, int, int]:
    """Seconds, pods and pages for a full paged list of pods through the official client."""
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    with k8s_client.ApiClient(configuration) as api:
        v1 = k8s_client.CoreV1Api(api)
        token, pods, pages = "", 0, 0
        started = time.monotonic()
        while True:
            kwargs = {"_continue": token} if token else {}
            resp = v1.list_pod_for_all_namespaces(
                limit=PAGE, _preload_content=False, _request_timeout=(10, 120), **kwargs
            )
            data = resp.data
            resp.release_conn()
            pages += 1
            if parse:
                body = json.loads(data)
                pods += len(body["items"])
                token = body["metadata"].get("continue", "")
            else:
                # The continue token sits in the list's metadata, ahead of the items.
                head = json.loads(data[: data.index(b',"items":[')] + b"}")
                pods += data.count(b'{"metadata":{"name":')
                token = head["metadata"].get("continue", "")
            del data
            if not token:
                return time.monotonic() - started, pods, pages


def kubectl_list(kubeconfig: Path) -> float:
    started = time.monotonic()
    with open(os.devnull, "wb") as sink:
        subprocess.run(
            [
                str(KUBECTL),
                "--kubeconfig",
                str(kubeconfig),
                "--request-timeout=0",
                "get",
                "pods",
                "-A",
                "-o",
                "json",
            ],
            stdout=sink,
            check=True,
        )
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--skip-kubectl", action="store_true", help="skip the kubectl measurement")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sim-"))
    print(f"serving the sim's `{args.scenario}` scenario …", flush=True)
    started = time.monotonic()
    sim, url, kubeconfig = start_sim(args.scenario, work)
    results: dict[str, float] = {"startup_s": time.monotonic() - started}
    print(
        f"  ready at {url} in {results['startup_s']:.1f}s, peak RSS so far {peak_rss_mb(sim.pid):.0f} MB",
        flush=True,
    )
    try:
        seconds, pods, pages = list_pods(kubeconfig, parse=True)
        results["python_raw_s"] = seconds
        print(
            f"python client, raw pages of {PAGE} + json.loads: {seconds:.1f}s for {pods} pods in {pages} pages",
            flush=True,
        )
        seconds, pods, pages = list_pods(kubeconfig, parse=False)
        results["transport_only_s"] = seconds
        print(f"python client, raw pages of {PAGE}, not parsed:  {seconds:.1f}s for {pods} pods", flush=True)
        if not args.skip_kubectl:
            results["kubectl_s"] = kubectl_list(kubeconfig)
            print(f"kubectl get pods -A -o json:                  {results['kubectl_s']:.1f}s", flush=True)
        results["sim_peak_rss_mb"] = peak_rss_mb(sim.pid)
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=60)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait()
    print()
    print("RESULTS")
    for key, value in results.items():
        print(f"  {key:<20} {value:10.1f}")
    ok = results["sim_peak_rss_mb"] <= RSS_LIMIT_MB
    print(f"  sim peak RSS {'within' if ok else 'OVER'} the {RSS_LIMIT_MB} MB budget")
    (work / "results.json").write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
