"""Where the test suite's CPU goes: `scripts/test` run with every Python process accounted for.

The suite is CPU-bound on 2 cores (its wall time is about its CPU over 1.8-1.9 cores), so what
makes it slower or faster is which processes spend that CPU. This runs `scripts/test` (extra
arguments go to it: `--fast`, a test path, `-k …`) with a `sitecustomize` on PYTHONPATH that has
each Python process of the venv write its own CPU time (`getrusage`) as it exits, then prints:
  - pytest's summary line and the run's wall time;
  - the CPU of every process the run started and waited for (user + sys), and how many cores
    that kept busy;
  - the Python processes' CPU by kind: the pytest workers (the tests themselves, with the sims,
    the Slack stub and the servers they run in-process), each `upgrade-bot <verb>` the tests
    start, and other Python programs; count, total and per process;
  - the rest: the Go servers (the control plane, Prometheus, Alertmanager, the registry, helm),
    kubectl, PostgreSQL, Chromium, and the processes killed before they could write (`kill -9`);
  - the host's pace, before and after the run: the CPU a fixed loop of Python takes. The same
    suite has taken half as much CPU again on the same machine an hour apart (a shared host's
    cores are not always as fast), so compare runs whose pace is alike.

Nothing of the checkout or its virtualenv is changed: the accounting lives in a temporary folder.
A test that builds its children's environment from scratch (the wheel's fresh virtualenv) is in
the rest.

Usage: .venv/bin/python benchmarks/bench_suite.py [scripts/test arguments …]
"""

from __future__ import annotations

import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Written into the temporary folder on PYTHONPATH. It runs in every Python process started with
#: that environment, before the program: it records the process's CPU at exit, then hands over to
#: any `sitecustomize` it shadows (a distribution's Python may ship one).
SITECUSTOMIZE = """\
import atexit, json, os, resource, sys, time

_LOG = os.environ.get("BENCH_SUITE_CPU_LOG", "")
_START = time.monotonic()


def _write():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {"argv": sys.argv[:4], "user": usage.ru_utime, "sys": usage.ru_stime,
              "wall": time.monotonic() - _START}
    try:
        with open(os.path.join(_LOG, "%d.json" % os.getpid()), "w") as out:
            json.dump(record, out)
    except OSError:
        pass


if _LOG and os.path.isdir(_LOG):
    atexit.register(_write)

import importlib.machinery as _machinery
_here = os.path.dirname(os.path.abspath(__file__))
_spec = _machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(sys.modules[__name__])
"""


def kind(argv: list[str]) -> str:
    """What a Python process was, from its argv: a pytest worker, `upgrade-bot <verb>`, or the
    program's name."""
    if not argv:
        return "python (no argv)"
    program = argv[0]
    if program == "-c":
        # pytest-xdist's workers are execnet gateways: `python -c "import sys;exec(eval(…))"`.
        return "python -c (pytest-xdist workers, other one-liners)"
    name = Path(program).name
    if name == "upgrade-bot" or (name == "__main__.py" and Path(program).parent.name == "bot"):
        verb = next((a for a in argv[1:] if not a.startswith("-")), "")
        return f"upgrade-bot {verb}".rstrip()
    if name == "__main__.py":
        return f"python -m {Path(program).parent.name}"
    return name


def aggregate(records: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(kind, processes, CPU seconds), the most CPU first."""
    count: collections.Counter[str] = collections.Counter()
    cpu: dict[str, float] = collections.defaultdict(float)
    for record in records:
        k = kind([str(a) for a in record["argv"]])
        count[k] += 1
        cpu[k] += float(record["user"]) + float(record["sys"])
    return sorted(((k, count[k], cpu[k]) for k in count), key=lambda row: -row[2])


def pace() -> float:
    """CPU seconds of a fixed loop of pure Python (about half a second on the 2-core machine):
    the best of three, so a moment of contention does not count."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        total = 0
        for i in range(10_000_000):
            total += i * i
        best = min(best, time.process_time() - start)
    return best


def main(args: list[str]) -> int:
    pace_before = pace()
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        hook, log = Path(tmp) / "hook", Path(tmp) / "cpu"
        hook.mkdir()
        log.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(hook), *filter(None, [env.get("PYTHONPATH")])])
        env["BENCH_SUITE_CPU_LOG"] = str(log)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(ROOT / "scripts" / "test"), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        summary = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            if re.match(r"^=+ .*\b(passed|failed|error)", line):
                summary = line.strip("= \n")
        code = proc.wait()
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        records: list[dict[str, Any]] = []
        for path in log.glob("*.json"):
            try:
                records.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # a process that was stopped while writing
    pace_after = pace()
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    total = user + system
    rows = aggregate(records)
    python = sum(cpu for _, _, cpu in rows)
    print()
    print(f"scripts/test {' '.join(args)}".rstrip() + f": exit {code}; {summary or 'no pytest summary'}")
    print(
        f"wall {wall:,.0f} s (set-up included); CPU of every process it started {total:,.0f} s "
        f"({user:,.0f} user + {system:,.0f} sys): {total / wall:.2f} cores busy"
    )
    print(
        f"the host's pace (a fixed loop of Python): {pace_before:.3f} s of CPU before, {pace_after:.3f} s after"
    )
    print(f"Python processes that wrote their CPU at exit: {sum(n for _, n, _ in rows):,}, {python:,.0f} s")
    print(f"  {'CPU s':>8} {'share':>6} {'procs':>6} {'s each':>7}  kind")
    for name, n, cpu in rows[:30]:
        print(f"  {cpu:8,.1f} {cpu / total:6.1%} {n:6,} {cpu / n:7.2f}  {name}")
    if len(rows) > 30:
        rest = sum(cpu for _, _, cpu in rows[30:])
        print(f"  {rest:8,.1f} {rest / total:6.1%} {'':>6} {'':>7}  ({len(rows) - 30} other kinds)")
    other = total - python
    print(
        f"  {other:8,.1f} {other / total:6.1%} {'':>6} {'':>7}  the rest: Go servers, kubectl, "
        "PostgreSQL, Chromium, processes killed before exit, Python outside this environment"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
