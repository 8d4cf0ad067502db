"""The suite's two tiers, decided by what a test uses, so that no test needs marking by hand.

At collection every test is marked by what it (or any fixture it uses) starts:

- `process`: a subprocess (the bot as `python -m bot`, kubectl, helm, Chromium, uv, ...);
- `sim`: a simulated cluster's HTTP server (`bot.sim.SimCluster`);
- `postgres`: the session's PostgreSQL server;
- `testbed`: the real control plane (etcd, kube-apiserver, ...).

A test counts as starting one when its source, or the source of a fixture in its closure, names
what starts it (`SIMULATED`, `PROCESSES`, ...) or when it uses a fixture that does (`FIXTURES`).
`--fast` (`scripts/test --fast`) deselects every marked test and `slow` ones: the edit-test loop.

The guard: under `--fast` an audit hook (`sys.addaudithook`, Python's own event hooks) fails any
test that starts a process or binds a socket from `bot/sim` anyway, naming what it started, so a new
slow test cannot slip into the fast tier unnoticed: it fails there until a fixture or a name below
classifies it.
"""

from __future__ import annotations

import inspect
import linecache
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

from tests.support.testbed import GROUPED, TESTBED_GROUP

# Fixtures that start something, by marker (a test using one, directly or through other fixtures).
FIXTURES: dict[str, str] = {
    "real_cluster": "testbed",
    "bot_role": "testbed",
    "postgres_url": "postgres",
    "sim_factory": "sim",
    "sim_small": "sim",
    "sim_eks": "sim",
    "kubectl": "process",
    "helm": "process",
    "chromium": "process",
    "observability": "process",
    "oci_registry": "process",
}
# Names in a test's or a fixture's source that start something.
NAMES: dict[str, tuple[str, ...]] = {
    "process": (
        "subprocess",
        "Popen",
        "BotProcess",
        "RunBot",
        "sys.executable",
        "bot_command",
        "run_helm",
        "KUBECTL",
    ),
    "sim": ("SimCluster", "sim_factory"),
    "postgres": ("postgres_url", "running_postgres"),
    "testbed": ("real_cluster", "RealCluster"),
}
HEAVY = ("process", "sim", "postgres", "testbed", "slow")
DESCRIPTIONS = {
    "process": "starts a subprocess (the bot, kubectl, helm, a browser, ...); not in --fast",
    "sim": "starts a simulated cluster's server (bot.sim.SimCluster); not in --fast",
}
_PATTERNS = {
    marker: re.compile(r"\b(?:" + "|".join(re.escape(n) for n in names) + r")\b")
    for marker, names in NAMES.items()
}
SIM_DIR = str(Path(__file__).resolve().parents[2] / "bot" / "sim") + "/"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        default=False,
        help="the fast tier: leave out every test that starts a process, a sim server, PostgreSQL or "
        "the control plane (marked at collection by tests/support/tiers.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for marker, text in DESCRIPTIONS.items():
        config.addinivalue_line("markers", f"{marker}: {text}")
    if config.getoption("--fast"):
        sys.addaudithook(_audit)


def _code_names(code: CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_names(const)


def _reached(func: Callable[..., Any]) -> list[Callable[..., Any] | type]:
    """`func` and the functions and classes of the tests it calls, at any depth (helpers in the
    test's module or in tests/support that start something count as the test starting it)."""
    seen: dict[int, Callable[..., Any] | type] = {}
    todo: list[Callable[..., Any] | type] = [inspect.unwrap(func)]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        functions = [obj] if inspect.isfunction(obj) else []
        if isinstance(obj, type):
            functions = [f for f in vars(obj).values() if inspect.isfunction(f)]
        for function in functions:
            for name in _code_names(function.__code__):
                found = function.__globals__.get(name)
                # A table of helpers (`RUNNERS[name](...)`) reaches each of them.
                targets = list(found.values()) if isinstance(found, dict) else [found]
                for target in targets:
                    if (inspect.isfunction(target) or isinstance(target, type)) and getattr(
                        target, "__module__", ""
                    ).startswith("tests."):
                        todo.append(target)
    return list(seen.values())


_source_cache: dict[int, str] = {}


def _source(obj: Callable[..., Any] | type) -> str:
    if id(obj) not in _source_cache:
        try:
            _source_cache[id(obj)] = (
                _function_source(obj) if inspect.isfunction(obj) else inspect.getsource(obj)
            )
        except (OSError, TypeError):
            _source_cache[id(obj)] = ""
    return _source_cache[id(obj)]


def _function_source(func: Callable[..., Any]) -> str:
    """A function's lines, decorators included, as `inspect.getsource` gives them, read from the
    line numbers its code carries rather than by tokenizing the file from its first line: at
    collection that is half of the classification's time, paid again by each worker."""
    code = inspect.unwrap(func).__code__  # a decorated helper: its own lines, as getsource reads them
    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise OSError(f"no source for {code.co_filename}")
    return "".join(lines[code.co_firstlineno - 1 : _last_line(code)])


def _last_line(code: CodeType) -> int:
    last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            last = max(last, _last_line(const))
    return last


def classify(item: pytest.Item) -> set[str]:
    """The markers of what `item` starts, from its fixtures and the sources it reaches."""
    found: set[str] = set()
    names = list(getattr(item, "fixturenames", ()))
    found.update(FIXTURES[n] for n in names if n in FIXTURES)
    roots: list[Callable[..., Any]] = [item.function] if isinstance(item, pytest.Function) else []
    info = getattr(item, "_fixtureinfo", None)
    for name in names:
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            # pytest's own fixtures (tmp_path, monkeypatch, ...) start nothing.
            if not fixturedef.func.__module__.startswith("_pytest"):
                roots.append(fixturedef.func)
    for root in roots:
        found.update(_starts(root))
    return found


_starts_cache: dict[int, frozenset[str]] = {}


def _starts(root: Callable[..., Any]) -> frozenset[str]:
    """The markers the sources `root` reaches name: once a test function or fixture, not once
    for each test using it (a fixture of the in-process bot is the root of hundreds)."""
    if id(root) not in _starts_cache:
        sources = [_source(obj) for obj in _reached(root)]
        _starts_cache[id(root)] = frozenset(
            marker for marker, pattern in _PATTERNS.items() if any(pattern.search(text) for text in sources)
        )
    return _starts_cache[id(root)]


def starts_control_plane(item: pytest.Item, explicit: set[str]) -> bool:
    """Does `item` start the session's control plane: it uses `real_cluster` (directly or through
    its fixtures), or it was marked `testbed` by hand (a parameter that asks for the fixture by
    name, as the contract suite's `real` backend does)? A test that only names the testbed in its
    source (the contract suite's `sim` half, through the shared `backend` fixture) does not."""
    return "testbed" in explicit or "real_cluster" in getattr(item, "fixturenames", ())


#: This process's tests marked `xdist_group` by hand (not the testbed's): node id → group. The
#: workers tell the scheduler, as they do the testbed's (see `--dist loadgroup` below).
MARKED: dict[str, str] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist's `--dist loadgroup`, the tests that start the real control plane share
    # one worker, so the session starts one control plane, not one per worker (see below).
    groups = config.pluginmanager.hasplugin("xdist")
    for item in items:
        present = {m.name for m in item.iter_markers()}
        for marker in sorted(classify(item) - present):
            item.add_marker(marker)
        if groups and starts_control_plane(item, present):
            item.add_marker(pytest.mark.xdist_group(TESTBED_GROUP))
            GROUPED.add(item.nodeid)
        elif groups and (mark := item.get_closest_marker("xdist_group")) is not None:
            # A group of its own (tests sharing a module-scoped fixture): one worker runs them.
            MARKED[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    _tell_the_scheduler(config, items)
    if not config.getoption("--fast"):
        return
    keep, drop = [], []
    for item in items:
        (drop if any(item.get_closest_marker(m) for m in HEAVY) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# The guard of the fast tier: what the running test started that its tier should not.
_started: list[str] = []
_guarding = [False]


def _from_sim(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith(SIM_DIR):
            return True
        frame = frame.f_back
    return False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _guarding[0]:
        return
    what = ""
    if event == "subprocess.Popen":
        what = f"a process ({args[0]!r})"
    elif event in ("os.system", "os.posix_spawn", "os.fork"):
        what = f"a process ({event})"
    elif event == "socket.bind" and _from_sim(sys._getframe(1)):
        what = "a simulated cluster's server"
    if what:
        _started.append(what)
        raise RuntimeError(
            f"a test of the fast tier (--fast) started {what}: start it through a fixture or a name "
            "that tests/support/tiers.py knows, so that the test is marked out of the fast tier"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    _started.clear()
    _guarding[0] = item.config.getoption("--fast")
    try:
        return (yield)
    finally:
        _guarding[0] = False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under --fast, a test that started something fails even if it caught the guard's error."""
    report: pytest.TestReport = yield
    if _started and report.passed and report.when == "call":
        report.outcome = "failed"
        report.longrepr = f"the fast tier starts no processes or sim servers; this test started {_started[0]}"
    return report


# ----- pytest-xdist's `--dist loadgroup` -----------------------------------------------------------
# xdist (3.8) groups a test by appending "@group" to its node id in the worker's collection, which
# pytest 9 no longer lets it do (the id is `Node._id` now; the `_nodeid` it sets is not read): every
# test was its own group, and both workers started a control plane. So the controller's scheduler
# is ours, given the group's node ids by the workers: each writes those it collected into a
# directory the controller hands it (`workerinput`), before it reports its collection, and so the
# tests marked `xdist_group` by hand with their group's name; the controller reads them when it
# schedules, after every worker has reported. "@group" ids keep working as in xdist.

_GROUPS_DIR = "upgrade_bot_groups_dir"


# The order the scheduler hands tests out in: the heaviest first, so that the run does not end on
# one worker still in a minute-long test while the other has nothing left (the wall time is the
# busier worker's). A test's rank is the first of these markers it carries; the quick tests, last,
# fill both workers' ends evenly. The control plane's group (one worker, minutes) goes first.
ORDER = ("testbed", "slow", "process", "sim", "postgres")


def rank(item: pytest.Item) -> int:
    """`item`'s place in ORDER (len(ORDER) for a test that starts nothing)."""
    return next((n for n, m in enumerate(ORDER) if item.get_closest_marker(m)), len(ORDER))


def _tell_the_scheduler(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput and workerinput.get(_GROUPS_DIR):
        directory = Path(workerinput[_GROUPS_DIR])
        path = directory / f"{workerinput['workerid']}.txt"
        path.write_text("".join(f"{nodeid}\n" for nodeid in sorted(GROUPED)), encoding="utf-8")
        marked = directory / f"{workerinput['workerid']}.groups"
        marked.write_text("".join(f"{g}\t{n}\n" for n, g in sorted(MARKED.items())), encoding="utf-8")
        ranks = directory / f"{workerinput['workerid']}.ranks"
        ranks.write_text("".join(f"{rank(item)} {item.nodeid}\n" for item in items), encoding="utf-8")


def _groups_dir(config: pytest.Config) -> Path:
    directory: Path | None = getattr(config, "_upgrade_bot_groups_dir", None)
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="upgrade-bot-xdist-groups-"))
        config._upgrade_bot_groups_dir = directory  # type: ignore[attr-defined]
        config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))
    return directory


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: where this worker writes the node ids of its testbed group."""
    node.workerinput[_GROUPS_DIR] = str(_groups_dir(node.config))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Controller: `--dist loadgroup` with the workers' groups, the heaviest tests first (ORDER);
    the rest is xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    directory = _groups_dir(config)

    class WorkerGroups(LoadGroupScheduling):
        grouped: frozenset[str] | None = None
        marked: dict[str, str] | None = None
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            scope: str = super()._split_scope(nodeid)
            if scope != nodeid:
                return scope  # an "@group" id
            if self.grouped is None:  # read once every worker has reported its collection
                self.grouped = frozenset(
                    line for f in directory.glob("*.txt") for line in f.read_text("utf-8").splitlines()
                )
                self.marked = dict(
                    reversed(line.split("\t", 1))  # type: ignore[misc]
                    for f in directory.glob("*.groups")
                    for line in f.read_text("utf-8").splitlines()
                )
            if nodeid in self.grouped:
                return TESTBED_GROUP
            return (self.marked or {}).get(nodeid, nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the first assignment: the queue holds every scope now
                self.ordered = True
                ranks = _read_ranks(directory)
                scopes = sorted(
                    self.workqueue.items(),
                    key=lambda scope: (
                        min((ranks.get(n, len(ORDER)) for n in scope[1]), default=0)
                        if scope[0] != TESTBED_GROUP
                        else -1
                    ),
                )  # stable: in each rank, the order xdist chose (collection order)
                self.workqueue.clear()
                self.workqueue.update(scopes)
            super()._assign_work_unit(node)

    return WorkerGroups(config, log)


def _read_ranks(directory: Path) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for path in directory.glob("*.ranks"):
        for line in path.read_text("utf-8").splitlines():
            value, _, nodeid = line.partition(" ")
            ranks[nodeid] = int(value)
    return ranks
