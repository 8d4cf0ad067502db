"""Rule patterns on RE2: what a catastrophic pattern costs, and that acks do not wait for it.

Prints:
  - Python's `re` on `(a+)+$` against n a's and a "!" (doubling with each a; extrapolated to the
    issue's 34), against RE2 on the same text and on the 64 KiB bound;
  - the slowest single RE2 search at the bound (`MAX_TEXT_CHARS`) over a set of adversarial
    patterns × texts (the bound on one search, hence on how far a run can overshoot its budget);
  - the interpreter lock: the largest gap of a 1 ms ticker thread while RE2 matches 8 MB in
    another (RE2 releases the GIL while it matches; the gap is the UTF-8 encoding around it);
  - the budget: `match_rules` over 2,000 events of 64 KiB with heavy patterns and a 1 s budget —
    the wall time and the note the run reports;
  - acks in a real `upgrade-bot run --http` on the eks-nodegroups sim: `/upgrade diagnose payments`
    with a rules file of heavy patterns and 300 Warning events of 64 KiB about payments pods, and
    20 signed `/upgrade help` sent while it runs (target: each ≤ 0.1 s).

Usage: .venv/bin/python benchmarks/bench_rules.py [--skip-slack]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import re2  # noqa: E402

from bot.core.rules import EventRecord, match_rules, parse_rules  # noqa: E402
from bot.core.rules.patterns import MAX_TEXT_CHARS, MatchBudget, compile_pattern  # noqa: E402
from bot.sim import SimCluster  # noqa: E402
from tests.support.secrets import BOT_TOKEN, ROSTER_YAML, SIGNING_SECRET  # noqa: E402
from tests.support.signing import post, signed_headers, slash_command_body  # noqa: E402
from tests.support.slack_stub import SlackStub  # noqa: E402

BOT = [sys.executable, "-m", "bot", "run", "--http", "--host", "127.0.0.1", "--port", "0"]
HEAVY = [
    r"(a+)+$",
    r"(a|aa|aaa)*b",
    r"(?:.{0,100}x){3}",
    r"(?s).{400}z",
    r"(\w+\s?)*\d{3}q",
    r"a{1000}",
    r"(?:a{0,100}){10}b",
    r"(?:[a-z]{1,9}\d?){1,60}!",
]
TEXTS = {
    "a's": "a" * MAX_TEXT_CHARS,
    "words": ("abc def 123 " * 6000)[:MAX_TEXT_CHARS],
    "lines": (("a" * 99 + "\n") * 700)[:MAX_TEXT_CHARS],
    "non-ASCII": "é" * MAX_TEXT_CHARS,
}


def python_re() -> None:
    pattern = re.compile(r"(a+)+$")
    last = 0.0
    n = 0
    for n in (16, 18, 20, 22):
        started = time.perf_counter()
        pattern.search("a" * n + "!")
        last = time.perf_counter() - started
        print(f"  re   (a+)+$ on {n} a's + '!': {last * 1000:9.1f} ms")
    print(f"  re   extrapolated to 34 a's (x2 per a): {last * 2 ** (34 - n) / 60:.0f} min, holding the GIL")
    safe = compile_pattern(r"(a+)+$")
    for text, label in (("a" * 34 + "!", "34 a's + '!'"), ("a" * 200_000 + "!", "64 KiB bound")):
        started = time.perf_counter()
        safe.search(text)
        print(f"  RE2  (a+)+$ on {label}: {(time.perf_counter() - started) * 1000:.3f} ms")


def worst_search() -> None:
    worst, which = 0.0, ""
    for p in HEAVY:
        # Fresh each time, then searched again and again: RE2 builds its DFA as it goes, and one
        # that outgrows its memory falls back to the (slower) NFA after a few searches.
        re2.purge()
        compiled = compile_pattern(p)
        for name, text in TEXTS.items():
            for keep_end in (False, True, False, True):
                started = time.perf_counter()
                compiled.search(text, keep_end=keep_end)
                took = time.perf_counter() - started
                if took > worst:
                    worst, which = took, f"{p} on {name}"
    print(
        f"  slowest single search at the {MAX_TEXT_CHARS // 1024} KiB bound: {worst * 1000:.1f} ms ({which})"
    )


def gil() -> None:
    compiled = compile_pattern(r"^(a|b|ab|ba)*(c|d){3,20}[a-z]{1,40}(q+|r+)$")
    text = ("ab" * 500 + "\n") * 8000
    ticks: list[float] = []
    stop = threading.Event()

    def ticker() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.05)
    started = time.perf_counter()
    # Straight to the engine (no bound), so one call is long enough to see.
    compiled._compiled.search(text)
    took = time.perf_counter() - started
    stop.set()
    thread.join()
    during = [t for t in ticks if started <= t <= started + took]
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    print(
        f"  RE2 on 8 MB took {took * 1000:.0f} ms; a 1 ms ticker thread ticked {len(during)} times meanwhile, "
        f"largest gap {max(gaps) * 1000:.1f} ms"
    )


def budget() -> None:
    text = "a" * (MAX_TEXT_CHARS - 1) + "!"
    body = "rules:\n" + "".join(
        f"  - id: HEAVY{i:03d}\n    title: t\n    match: {{events: {{message: '{p.replace(chr(39), chr(39) * 2)}'}}}}\n"
        "    explanation: e\n    remediation: r\n    links: [https://example.com/x]\n"
        for i, p in enumerate(HEAVY)
    )
    rules = parse_rules(body, source="heavy.yaml")
    events = [
        EventRecord(namespace="ns", kind="Node", name=f"n{i}", reason="R", message=text) for i in range(2000)
    ]
    spent = MatchBudget(seconds=1.0)
    started = time.perf_counter()
    match_rules(rules, [], events, budget=spent)
    print(
        f"  {len(rules)} heavy rules × 2,000 events of 64 KiB, budget 1 s: {time.perf_counter() - started:.2f} s"
    )
    print(f"  the run says: {spent.describe()}")


def acks() -> None:
    with tempfile.TemporaryDirectory() as tmp, SlackStub() as stub:
        work = Path(tmp)
        sim = SimCluster("eks-nodegroups", speed=0.0, seed=1).start()
        try:
            out = subprocess.run(
                [
                    str(Path(sys.executable).parent / "kubectl"),
                    "--kubeconfig",
                    str(sim.write_kubeconfig(work / "sim.kubeconfig")),
                    "-n",
                    "payments",
                    "get",
                    "pods",
                    "-o",
                    "jsonpath={.items[*].metadata.name}",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            pods = out.stdout.split()
            evil = "a" * (MAX_TEXT_CHARS - 1) + "!"
            for i in range(300):
                sim.control.inject_fault(
                    {
                        "type": "event",
                        "object": {"kind": "Pod", "namespace": "payments", "name": pods[i % len(pods)]},
                        "event_type": "Warning",
                        "reason": f"Spelling{i}",
                        "component": "workload",
                        "message": evil,
                    }
                )
            rules = work / "heavy.yaml"
            rules.write_text(
                "rules:\n"
                + "".join(
                    f"  - id: HEAVY{i:03d}\n    title: t\n    match: {{events: {{message: '{p}'}}}}\n"
                    "    explanation: e\n    remediation: r\n    links: [https://example.com/x]\n"
                    for i, p in enumerate(HEAVY)
                    if "'" not in p
                )
            )
            config = work / "upgrade-bot.yaml"
            config.write_text(
                f"data_dir: {work / 'data'}\n{ROSTER_YAML}channels: {{operations: C0OPS}}\n"
                f"rules_files: [{rules}]\n"
                f"clusters:\n  prod: {{kubeconfig: {sim.write_kubeconfig(work / 'sim.kubeconfig')}, context: sim}}\n"
            )
            stub.users["U0PRIMARY"] = {"id": "U0PRIMARY"}
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("SLACK_")},
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": stub.api_url,
                "PYTHONUNBUFFERED": "1",
            }
            proc = subprocess.Popen(
                [*BOT, "--config", str(config), "--log-level", "WARNING"],
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

                def send(text: str, n: int) -> float:
                    body = slash_command_body(
                        text, response_url=stub.response_url(f"r{n}"), trigger_id=f"t{n}"
                    )
                    return post(url, body, signed_headers(body, SIGNING_SECRET)).seconds

                def done() -> bool:
                    return any(
                        "HEAVY" in str(c.params.get("text", ""))
                        or "No known issue" in str(c.params.get("text", ""))
                        for c in stub.calls_to("chat.postMessage")
                    ) or any("known issue" in str(r.get("text", "")) for r in stub.responses)

                started = time.monotonic()
                first = send("diagnose payments", 0)
                during: list[float] = []
                for i in range(1, 21):
                    took = send("help", i)
                    if not done():
                        during.append(took)
                    time.sleep(0.02)
                stub.wait_for(done, timeout=300)
                total = time.monotonic() - started
                print(
                    f"  diagnose ack {first:.3f} s, answered after {total:.2f} s; {len(during)} of 20 `help` acks "
                    f"while it ran: median {statistics.median(during or [0]):.3f} s, slowest "
                    f"{max(during or [0]):.3f} s (target ≤ 0.1 s)"
                )
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
        finally:
            sim.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-slack", action="store_true", help="skip the acks in a real bot process")
    args = parser.parse_args()
    print("catastrophic backtracking:")
    python_re()
    print("one search:")
    worst_search()
    print("the interpreter lock:")
    gil()
    print("the budget:")
    budget()
    if not args.skip_slack:
        print("acks in a real bot while diagnose matches heavy rules:")
        acks()


if __name__ == "__main__":
    main()
