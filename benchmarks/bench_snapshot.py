"""Snapshot and diff at Kubernetes' scale envelope, against kubectl on the same simulated server.

Serves the sim's `large` scenario (5,000 nodes, 150,000 pods) and prints, in one run:
  - kubectl get nodes -o json + kubectl get pods -A -o json wall time (the reference);
  - `upgrade-bot snapshot` wall time, its ratio to kubectl (target ≤ 0.5) and its peak RSS
    (target ≤ 500 MB);
  - the stored snapshot's size (target ≤ 30 MB);
  - diff of two 150k-pod snapshots, in-process (target ≤ 0.1 × snapshot time), and end to end;
  - the ack time of a signed `/upgrade help` sent while a 150k snapshot runs inside the bot's
    HTTP front door (target < 3 s).

Usage: .venv/bin/python benchmarks/bench_snapshot.py [--scenario large] [--skip-slack] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.store import Store  # noqa: E402
from bot.core.snapshots.diff import diff  # noqa: E402
from bot.core.snapshots.service import resolve  # noqa: E402
from tests.support.signing import post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402

BIN = Path(sys.executable).parent
KUBECTL = BIN / "kubectl"


def start_sim(scenario: str, workdir: Path) -> tuple[subprocess.Popen[str], str, Path]:
    kubeconfig = workdir / "sim.kubeconfig"
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
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = ""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the sim exited with {proc.wait()}")
        if line.startswith("url:"):
            url = line.split(":", 1)[1].strip()
        if line.startswith("kubeconfig:"):
            kubeconfig = Path(line.split(":", 1)[1].strip())
            break
    return proc, url, kubeconfig


def timed_rss(cmd: list[str], sink: Path | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB of the child process, and its exit status."""
    started = time.monotonic()
    with open(sink or os.devnull, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read()
        proc.stderr.close()
    elapsed = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code not in (0, 1):
        raise SystemExit(f"{cmd[:4]} failed ({code}): {err.decode()[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--skip-slack", action="store_true", help="skip the ack-during-snapshot measurement")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (database, results.json)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    print(f"serving the sim's `{args.scenario}` scenario …", flush=True)
    started = time.monotonic()
    sim, url, kubeconfig = start_sim(args.scenario, work)
    print(f"  sim ready at {url} in {time.monotonic() - started:.1f}s", flush=True)
    config = work / "upgrade-bot.yaml"
    config.write_text(
        f"data_dir: {work / 'data'}\nroster:\n  primary: [U0PRIMARY]\n"
        f"clusters:\n  sim:\n    kubeconfig: {kubeconfig}\n    context: sim\n    request_timeout: 60\n"
    )
    bot = [sys.executable, "-m", "bot"]
    results: dict[str, float] = {}
    try:
        kc = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--request-timeout=0"]
        t_nodes, rss_nodes, _ = timed_rss([*kc, "get", "nodes", "-o", "json"])
        t_pods, rss_pods, _ = timed_rss([*kc, "get", "pods", "-A", "-o", "json"])
        results["kubectl_s"] = t_nodes + t_pods
        print(
            f"kubectl get nodes -o json: {t_nodes:.1f}s (peak {rss_nodes:.0f} MB); "
            f"get pods -A -o json: {t_pods:.1f}s (peak {rss_pods:.0f} MB); total {results['kubectl_s']:.1f}s",
            flush=True,
        )

        t_snap, rss_snap, _ = timed_rss([*bot, "snapshot", "pre", "--config", str(config)])
        results["snapshot_s"], results["snapshot_rss_mb"] = t_snap, rss_snap
        print(f"upgrade-bot snapshot pre: {t_snap:.1f}s, peak RSS {rss_snap:.0f} MB", flush=True)
        t_snap2, rss_snap2, _ = timed_rss([*bot, "snapshot", "post", "--config", str(config)])
        print(f"upgrade-bot snapshot post: {t_snap2:.1f}s, peak RSS {rss_snap2:.0f} MB", flush=True)

        store = Store.open(f"sqlite:///{work / 'data' / 'upgrade-bot.db'}")
        sizes = [m.size for m in store.snapshots()]
        results["stored_mb"] = max(sizes) / 1e6
        before = resolve(store, "pre", cluster="sim").snap
        after = resolve(store, "post", cluster="sim").snap
        store.close()
        pods = len(before["pods"])
        t0 = time.monotonic()
        report = diff(before, after)
        results["diff_s"] = time.monotonic() - t0
        t_diff_cli, _, _ = timed_rss(
            [*bot, "diff", "pre", "post", "--format", "json", "--config", str(config)]
        )
        print(f"stored snapshot: {results['stored_mb']:.1f} MB for {pods} pods", flush=True)
        print(
            f"diff (in process): {results['diff_s']:.2f}s, {len(report.regressions)} regressions; "
            f"upgrade-bot diff end to end: {t_diff_cli:.1f}s",
            flush=True,
        )

        if not args.skip_slack:
            results["ack_during_snapshot_s"] = ack_during_snapshot(config, work)

        print()
        print("RESULTS")
        print(
            f"  snapshot / kubectl          = {results['snapshot_s'] / results['kubectl_s']:.2f}   (target ≤ 0.50)"
        )
        print(f"  snapshot peak RSS           = {results['snapshot_rss_mb']:.0f} MB   (target ≤ 500 MB)")
        print(
            f"  diff / snapshot             = {results['diff_s'] / results['snapshot_s']:.3f}   (target ≤ 0.10)"
        )
        print(f"  stored snapshot             = {results['stored_mb']:.1f} MB   (target ≤ 30 MB)")
        if "ack_during_snapshot_s" in results:
            print(
                f"  ack while snapshot runs     = {results['ack_during_snapshot_s']:.2f} s   (target < 3 s)"
            )
        (work / "results.json").write_text(json.dumps(results, indent=2))
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=30)
        except subprocess.TimeoutExpired:
            sim.kill()
        if args.keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def ack_during_snapshot(config: Path, work: Path) -> float:
    """Start the HTTP front door, ask it for a 150k snapshot, and time a second command's ack."""
    secret = "bench-signing-secret-0123456789"
    with SlackStub() as stub:
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench-token",
            "SLACK_SIGNING_SECRET": secret,
            "SLACK_API_URL": stub.api_url,
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot",
                "run",
                "--http",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--config",
                str(config),
                "--log-level",
                "WARNING",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            match = re.search(r"listening on (\S+)", proc.stdout.readline())
            assert match, "the bot did not start"
            url = f"{match.group(1)}/slack/events"
            body = slash_command_body(
                "snapshot during", response_url=stub.response_url("snap"), trigger_id="b-1"
            )
            started = time.monotonic()
            first = post(url, body, signed_headers(body, secret))
            time.sleep(2.0)  # let the snapshot get well under way before the other commands
            # A `/upgrade help` every second while the snapshot runs; only those sent before the
            # snapshot's post arrived count, so a snapshot that finished early proves nothing.
            acks: list[float] = []
            while not stub.calls_to("chat.postMessage") and len(acks) < 20:
                body2 = slash_command_body(
                    "help", response_url=stub.response_url(f"help-{len(acks)}"), trigger_id=f"b-h{len(acks)}"
                )
                second = post(url, body2, signed_headers(body2, secret))
                if not stub.calls_to("chat.postMessage"):
                    acks.append(second.seconds)
                time.sleep(1.0)
            stub.wait_for_calls("chat.postMessage", 1, timeout=600)
            total = time.monotonic() - started
            if not acks:
                raise SystemExit("the snapshot finished before a second command could be sent")
            print(
                f"slash command acks during a snapshot: snapshot ack {first.seconds:.2f}s; "
                f"{len(acks)} `help` acks while it ran, slowest {max(acks):.2f}s, median "
                f"{sorted(acks)[len(acks) // 2]:.2f}s; the snapshot's post arrived after {total:.1f}s",
                flush=True,
            )
            return max(first.seconds, *acks)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    raise SystemExit(main())
