"""`upgrade-bot sim fidelity` on the sim's `large` scenario (5,000 nodes, 150,000 pods): CI's own
step, after the suite (issue 42 asks for it on `eks-nodegroups`, `known-issues-2` and `large`;
the first two are in tests/frontdoor/test_sim_fidelity.py).

It does not fit the suite: serving `large` (its settled build of 150,000 pods), snapshotting it,
serving its twin (the same build again), snapshotting the twin and checking both take minutes of
CPU, more than the suite's budget for one test; benchmarks/RESULTS.md has the figures.

Serves `large` frozen (speed 0, seed 1) in this process, takes `upgrade-bot snapshot pre` of it,
runs `upgrade-bot sim fidelity pre`, and prints the fidelity report, then each step's wall and CPU
seconds. Exits 0 when the twin is true (0 differences), 1 otherwise: a difference, a step that
failed or did not end within its time. Nothing is skipped: under `CI=true` as anywhere.

Usage: .venv/bin/python scripts/fidelity_large.py [--scenario large] [--timeout 3600]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.sim import SimCluster  # noqa: E402


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run(
    cmd: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> tuple[float, float, int, str, str]:
    """Wall seconds, CPU seconds (user + system, with the helper processes it reaped), exit status,
    standard output and error of the bot's command."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                print(f"{' '.join(cmd[2:5])} did not end within {timeout:.0f} s", file=sys.stderr)
                break
            time.sleep(0.5)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (
            time.monotonic() - started,
            usage.ru_utime + usage.ru_stime,
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds each step may take")
    args = parser.parse_args()
    figures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fidelity-large-") as tmp:
        work = Path(tmp)
        cpu, started = _cpu_self(), time.monotonic()
        sim = SimCluster(args.scenario, speed=0.0, seed=1).start()
        figures.append(
            f"serve {args.scenario}: {time.monotonic() - started:.0f} s, CPU {_cpu_self() - cpu:.0f} s"
        )
        try:
            kubeconfig = sim.write_kubeconfig(work / "kubeconfig")
            config = work / "upgrade-bot.yaml"
            config.write_text(
                f"data_dir: {work / 'data'}\nclusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n",
                encoding="utf-8",
            )
            (work / "home").mkdir()
            # The bot's terminal with no Slack, AWS or kube settings of the environment it runs in.
            env = {
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("SLACK_", "UPGRADE_BOT_", "AWS_"))
                and k not in ("KUBECONFIG", "XDG_STATE_HOME")
            }
            env.update(HOME=str(work / "home"), XDG_STATE_HOME=str(work / "state"), PYTHONPATH=str(ROOT))
            bot = [sys.executable, "-m", "bot"]
            wall, cpu_s, code, _, err = _run(
                [*bot, "snapshot", "pre", "--config", str(config)], env, work, args.timeout
            )
            figures.append(f"snapshot pre: {wall:.0f} s, CPU {cpu_s:.0f} s")
            if code != 0:
                print(f"snapshot failed ({code}): {err[-3000:]}", file=sys.stderr)
                return 1
            wall, cpu_s, code, out, err = _run(
                [*bot, "sim", "fidelity", "pre", "--config", str(config)], env, work, args.timeout
            )
            figures.append(f"sim fidelity pre: {wall:.0f} s, CPU {cpu_s:.0f} s")
            sys.stdout.write(out)
            if code not in (0, 3):
                print(f"sim fidelity failed ({code}): {err[-3000:]}", file=sys.stderr)
                return 1
        finally:
            sim.stop()
            figures.append(f"this process (serving {args.scenario} throughout): CPU {_cpu_self():.0f} s")
            print(f"figures: {'; '.join(figures)}")
    if code != 0 or ": 0 differences\n" not in out:
        print(f"the twin of {args.scenario} differs from it (sim fidelity exited {code})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
