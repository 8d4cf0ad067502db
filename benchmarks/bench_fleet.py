"""A fleet of 20 clusters on simulated API servers (`--sims` sim processes, the clusters spread over
them: one sim serves several clusters), in one run. Prints:

  - `check --fleet`: the wall time of the matrix (every cluster checked at once, as
    `/upgrade check --fleet` and `upgrade-bot check --fleet` do) against the sum of the same checks
    run one after another (target ≤ 0.5×); both in this process, through the kube adapter;
  - RSS of a bot (this process, assembled as `upgrade-bot run` assembles it, without Slack) with a
    fleet of 20 clusters whose 20 child runs are all live at once (target ≤ 500 MB in all);
  - 20 signed `/upgrade help` acks sent to the bot's HTTP front door (`upgrade-bot run --http`,
    its own process) while it runs `/upgrade check --fleet` over the 20 clusters (target ≤ 0.1 s).

The `run --http` bot once exited while it answered `/upgrade check --fleet` over 20 clusters: a
SIGSEGV in msgspec, whose type information for a struct is visible to other threads before it is
complete (bot/decoders.py now builds every decoder under one lock; tests/test_decoders.py). If the
bot exits, the ack part says so; `--skip-slack` leaves it out.

  - RSS of the bot with a fleet of 20 children all *watching* their clusters (a live watch each,
    streaming from its sim), after 20 s of watching (target ≤ 500 MB).

  - with `--edit-minutes` (default 2), the same watching fleet with its cards posted to the
    loopback Slack stub (tests/support/slack_stub.py): `chat.update` calls per card per minute,
    the most in any 60 s (Slack's Tier 3: about 50 a minute for the workspace) and how many
    were answered 429.

  - then 20 signed `/upgrade help` acks, one a second, to the bot's HTTP front door (`upgrade-bot
    run --http`, its own process) started on the same store while the 20 children watch: it takes
    over their watches (each watch row names its owner, and the acks wait until every row names
    the new process with a fresh heartbeat), and each sim then replaces its `workers` node group
    (`/sim/nodegroups/workers/replace`), so the watches stream evictions, pods and nodes while the
    acks are sent (target ≤ 0.1 s). A watch of a cluster where nothing changes edits nothing: its
    card is edited when its summary changes, not on a timer.

`--latency` (default 0.03 s) is added by every sim to each Kubernetes request, as a cloud API
server's round trip: on a sim with none, a check is CPU work on both ends (26 requests answered
by Python sims sharing the bot's two cores), so checking clusters at once can at best spread it
over two cores (≈0.5×, less when the machine is shared); on a real cluster a check mostly waits on
its API server, which is what checking at once hides. `--latency 0` measures the sims bare.

Usage: .venv/bin/python benchmarks/bench_fleet.py [--clusters 20] [--sims 4] [--scenario small] [--latency 0.03]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_snapshot import ACKS, ack_during_snapshot, start_sim  # noqa: E402
from bot.adapters.kube import Cluster  # noqa: E402
from bot.adapters.store import Store  # noqa: E402
from bot.core.checks import fleet as fleet_checks  # noqa: E402
from bot.core.checks import service as checks  # noqa: E402
from bot.core.checks.findings import Report  # noqa: E402
from bot.core.fleets import machine as M  # noqa: E402
from bot.core.rules import load_rules  # noqa: E402
from bot.core.runs import machine as R  # noqa: E402
from bot.core.runs.service import Actor  # noqa: E402
from bot.frontdoor.assemble import assemble  # noqa: E402
from bot.settings import Settings, load_settings  # noqa: E402
from tests.support.fleets import TINY_PLAN, complete  # noqa: E402
from tests.support.signing import post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402

TARGET = "1.25"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def set_latency(sim_url: str, seconds: float) -> None:
    """Have the sim answer every Kubernetes request `seconds` late (its transport faults)."""
    req = urllib.request.Request(
        f"{sim_url}/sim/transport",
        data=json.dumps({"latency": seconds}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30):
        pass


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


#: Every child's one step is a watch that does not settle within the measurement (a kubelet
#: version no sim reaches): the children are all watching their clusters at once.
WATCH_PLAN = (
    TINY_PLAN.split("steps:")[0]
    + """steps:
  - id: watch
    title: Watch the cluster settle
    gate: {any_of: [primary]}
    actions:
      - watch: {version: "9.99.0", settle: 5m, timeout: 1h}
"""
)


def card_edits(stub: SlackStub, seconds: float) -> None:
    """The cards' `chat.update`s the stub received over `seconds` of watching, against Slack's
    budget: Tier 3, about 50 a minute for the whole workspace, every card's edits included
    (/work/shared/docs/SLACK_FACTS.md); the bot paces each card (CoalescingPoster) and shares one
    budget across them."""
    updates = stub.calls_to("chat.update")
    by_card: dict[tuple[str, str], int] = {}
    for c in updates:
        key = (str(c.params.get("channel")), str(c.params.get("ts")))
        by_card[key] = by_card.get(key, 0) + 1
    minutes = seconds / 60
    per_card = sorted(n / minutes for n in by_card.values())
    refused = [c for c in updates if c.response.get("error") == "ratelimited"]
    spread = f"median {per_card[len(per_card) // 2]:.1f}, most {per_card[-1]:.1f}" if per_card else "none"
    print(
        f"card edits with the Slack stub over {seconds:.0f}s of watching: {len(updates)} chat.update "
        f"to {len(by_card)} card(s); per card per minute: {spread}; most in any 60 s: "
        f"{stub.most_in_window('chat.update', 60.0)} (Tier 3: about 50/min for the workspace); "
        f"answered 429: {len(refused)}; chat.postMessage: {len(stub.calls_to('chat.postMessage'))}",
        flush=True,
    )


def watching_rss(
    settings: Settings, work: Path, clusters: int, *, hold: float = 20.0, stub: SlackStub | None = None
) -> None:
    """RSS of the bot with every child of a one-stage fleet watching its cluster (a live watch per
    child, streaming from its sim), measured after `hold` seconds of watching. With `stub`, the
    bot posts its cards and edits to the loopback Slack stub, and `card_edits` says how often."""
    (work / "templates" / "plans" / "watching.yaml").write_text(WATCH_PLAN)
    (work / "templates" / "fleets" / "watching.yaml").write_text(
        "name: watching\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: watching\nstages:\n"
        "  - {name: all, clusters: ["
        + ", ".join(f"c{i:02d}" for i in range(clusters))
        + "], max_concurrency: 100%}\n"
    )
    bot = assemble(settings, with_slack=stub is not None)
    bot.leadership.go_solo()
    bot.duties.start()
    try:
        fleet = bot.fleets.start("watching", Actor(user_id="U0PRIMARY", source="terminal"))
        for m in bot.fleets.load(fleet.id).members:
            run = bot.runs.load(m.run_id)
            sr = run.step_run("watch")
            bot.runs.click(
                R.ButtonRef(run_id=run.id, step_id="watch", epoch=sr.epoch), Actor(user_id="U0PRIMARY")
            )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(bot.watches.live()) < clusters:
            time.sleep(0.5)
        live = len(bot.watches.live())
        watched = time.monotonic()
        time.sleep(hold)  # the watches stream meanwhile: what they hold is in the figure
        print(
            f"bot RSS with {live} of {clusters} children watching at once (after {hold:.0f}s of "
            f"watching{', cards in the Slack stub' if stub else ''}): {rss_mb():.0f} MB "
            "(this process; target ≤ 500 MB)",
            flush=True,
        )
        if stub is not None:
            card_edits(stub, time.monotonic() - watched)
    finally:
        bot.duties.shutdown()
        bot.close()


def sim_post(sim_url: str, path: str, body: dict[str, object]) -> None:
    req = urllib.request.Request(
        f"{sim_url}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30):
        pass


def acks_while_watching(
    settings: Settings, config: Path, stub: SlackStub, sim_urls: list[str], clusters: int
) -> None:
    """Start `upgrade-bot run --http` on the store where `clusters` children are watching; once it
    drives every watch, have each sim replace a node group and time 20 `help` acks a second apart."""
    store = Store.open(settings.database_url)
    try:
        before = {w.id: w.owner for w in store.watches(limit=1000)}
        assert len(before) == clusters, f"{len(before)} live watches, not {clusters}"
        secret = "bench-signing-secret-0123456789"
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench-token",
            "SLACK_SIGNING_SECRET": secret,
            "SLACK_API_URL": stub.api_url,
        }
        cmd = [sys.executable, "-m", "bot", "run", "--http", "--host", "127.0.0.1", "--port", "0"]
        cmd += ["--config", str(config), "--log-level", "WARNING"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            match = re.search(r"listening on (\S+)", proc.stdout.readline())
            assert match, "the bot did not start"
            url = f"{match.group(1)}/slack/events"
            started = time.monotonic()

            def taken() -> int:
                # The store keeps UTC; whether it hands it back naive or aware, compare it naive.
                fresh = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=10)
                return sum(
                    1
                    for w in store.watches(limit=1000)
                    if w.owner
                    and w.owner != before.get(w.id)
                    and w.heartbeat_at is not None
                    and w.heartbeat_at.replace(tzinfo=None) > fresh
                )

            deadline = started + 120
            while taken() < clusters:
                if proc.poll() is not None:
                    raise SystemExit(f"the bot exited ({proc.returncode}) before it took the watches")
                if time.monotonic() > deadline:
                    raise SystemExit(f"the bot drove {taken()} of {clusters} watches after 120 s")
                time.sleep(0.5)
            took = time.monotonic() - started
            edits_before = len(stub.calls_to("chat.update"))
            for sim_url in sim_urls:
                sim_post(sim_url, "/sim/nodegroups/workers/replace", {"version": "1.29.5", "drain": "cloud"})
            # The replacements' first evictions reach the cards before the acks start.
            stub.wait_for(lambda: len(stub.calls_to("chat.update")) > edits_before, timeout=120)
            acks = []
            offsets = []
            churn = time.monotonic()
            for i in range(ACKS):
                due = time.monotonic() + 1.0
                offsets.append(time.monotonic() - churn)
                body = slash_command_body(
                    "help", response_url=stub.response_url(f"w-{i}"), trigger_id=f"w{i}"
                )
                acks.append(post(url, body, signed_headers(body, secret)).seconds)
                time.sleep(max(0.0, due - time.monotonic()))
            if proc.poll() is not None:
                raise SystemExit(f"the bot exited ({proc.returncode}) while its children watched")
            edits = stub.calls_to("chat.update")[edits_before:]
            print(
                f"slash command acks while {clusters} children watch (`run --http` drove all {clusters} "
                f"watches {took:.1f}s after its start; each sim replacing its workers node group): "
                f"{len(acks)} `help` acks a second apart, median {statistics.median(acks):.3f}s, slowest "
                f"{max(acks):.3f}s (target ≤ 0.1 s); {len(edits)} card edits to "
                f"{len({str(c.params.get('ts')) for c in edits})} card(s) meanwhile; live watches it drives "
                f"at the end: {taken()}",
                flush=True,
            )
            print(
                "  each ack (sent at s after the replacements began: seconds): "
                + ", ".join(f"{at:.1f}: {ack:.3f}" for at, ack in zip(offsets, acks, strict=True)),
                flush=True,
            )
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--sims", type=int, default=4, help="sim processes the clusters are spread over")
    parser.add_argument("--scenario", default="small")
    parser.add_argument("--skip-slack", action="store_true")
    parser.add_argument(
        "--edit-minutes",
        type=float,
        default=2.0,
        help="minutes the watching fleet posts to the Slack stub (card edits per minute); 0: no Slack",
    )
    parser.add_argument(
        "--latency", type=float, default=0.03, help="seconds each sim adds to every Kubernetes request"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    procs = []
    try:
        kubeconfigs = []
        sim_urls = []
        for i in range(args.sims):
            (work / f"s{i}").mkdir()
            proc, url, kc = start_sim(args.scenario, work / f"s{i}")
            procs.append(proc)
            set_latency(url, args.latency)
            sim_urls.append(url)
            kubeconfigs.append(kc)
        names = [f"c{i:02d}" for i in range(args.clusters)]
        (work / "templates" / "plans").mkdir(parents=True)
        (work / "templates" / "fleets").mkdir(parents=True)
        (work / "templates" / "plans" / "tiny.yaml").write_text(TINY_PLAN)
        (work / "templates" / "fleets" / "all.yaml").write_text(
            "name: all\nroster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}\nplan: tiny\nstages:\n"
            "  - {name: canary, clusters: [c00]}\n"
            "  - {name: rest, selector: {env: rest}, max_concurrency: 100%}\n"
        )
        config = work / "upgrade-bot.yaml"
        lines = [
            f"data_dir: {work / 'data'}",
            f"templates_dir: {work / 'templates'}",
            "channels: {operations: C0OPS}",
            "roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}",
            "clusters:",
        ]
        lines += [
            f"  {n}: {{kubeconfig: {kubeconfigs[i % args.sims]}, request_timeout: 60, "
            f"labels: {{env: {'canary' if i == 0 else 'rest'}}}}}"
            for i, n in enumerate(names)
        ]
        config.write_text("\n".join(lines) + "\n")
        settings = load_settings(config, env={})
        rules = load_rules(settings.rules_paths())

        def one(name: str) -> Report:
            cluster = settings.clusters[name]
            now = datetime.now(UTC)
            with closing(Cluster.connect(cluster)) as reader:
                return checks.check_cluster(
                    reader,
                    target=TARGET,
                    waivers=[],
                    now=now,
                    ignores=settings.check_ignores,
                    rules=rules,
                    extras=checks.default_extras(
                        now=now.timestamp(), cluster=cluster, images=settings.image_checks
                    ),
                )

        print(f"load average at the start: {load_average()} (2 cores)", flush=True)
        one(names[0])  # warm: the first request for each kind costs a fresh sim more than the next
        started = time.monotonic()
        singles = []
        for n in names:
            t = time.monotonic()
            one(n)
            singles.append(time.monotonic() - t)
        serial = time.monotonic() - started
        matrix = fleet_checks.check_fleet(names, one, target=TARGET)
        print(
            f"check --fleet over {len(names)} clusters on {args.sims} sim(s) ({args.scenario}, "
            f"{args.latency * 1000:.0f} ms per request): "
            f"{matrix.seconds:.2f}s at once vs {serial:.2f}s one after another (sum of single checks; "
            f"each {min(singles):.2f}–{max(singles):.2f}s): {matrix.seconds / serial:.2f}× (target ≤ 0.5×)",
            flush=True,
        )

        # Before the fleet below: its child runs, in the same store, would post their cards at the
        # HTTP bot's start, and the first post ends the measurement.
        if not args.skip_slack:
            acks = ack_during_snapshot(
                config,
                work,
                matrix.seconds + 1.0,
                command=f"check --fleet --to {TARGET}",
                what="check --fleet",
            )
            print(f"  slowest ack {max(acks):.3f}s (target ≤ 0.1 s)", flush=True)

        base = rss_mb()
        bot = assemble(settings, with_slack=False)
        try:
            fleet = bot.fleets.start("all", Actor(user_id="U0PRIMARY", source="terminal"))
            canary = bot.fleets.load(fleet.id).members[0].run_id
            # The canary completes as its roster would; then the 19 others start at once.
            complete(bot.runs, canary)
            bot.fleets.tick()
            live = [m for m in bot.fleets.load(fleet.id).members if m.state == M.STARTED]
            active = [r for r in bot.store.runs() if r.state == "active"]
            print(
                f"bot RSS with a fleet of {len(names)} clusters, {len(active)} child runs live at once "
                f"({len(live)} members running): {rss_mb():.0f} MB (this process; {base:.0f} MB before the "
                "bot was assembled; target ≤ 500 MB)",
                flush=True,
            )
        finally:
            bot.close()

        if args.edit_minutes > 0:
            # The same watching fleet with its cards in Slack (the stub): what its edits cost.
            with SlackStub() as stub:
                slack = load_settings(
                    config, env={"SLACK_BOT_TOKEN": "xoxb-bench-token", "SLACK_API_URL": stub.api_url}
                )
                watching_rss(slack, work, len(names), hold=args.edit_minutes * 60, stub=stub)
                if not args.skip_slack:
                    acks_while_watching(slack, config, stub, sim_urls, len(names))
        else:
            watching_rss(settings, work, len(names))
        print(f"load average at the end: {load_average()}", flush=True)
        return 0
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
