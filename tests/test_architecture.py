"""The layers stay visible: imports point down only, and each library has one home."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed module, once per session: the tests below walk the same files many times."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache  # read only by the tests: built once per session
def modules() -> dict[str, list[str]]:
    """Module name → every module it imports (absolute names), for bot/ and commands/."""
    found: dict[str, list[str]] = {}
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            imports: list[str] = []
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.Import):
                    imports.extend(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imports.append(node.module)
            found[name] = imports
    return found


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


LIBRARY_HOMES = {
    "kubernetes": ("bot.adapters.kube",),
    "sqlalchemy": ("bot.adapters.store",),
    "apscheduler": ("bot.frontdoor.triggers",),
    "slack_sdk": ("bot.adapters.slack", "bot.frontdoor"),
    "slack_bolt": ("bot.frontdoor",),
    # A dev dependency only: scripts/gen_apidata.py turns its schemas into the shipped
    # bot/core/checks/served_kinds.json, so no module of the bot imports it.
    "kubernetes_validate": (),
    "prometheus_client": ("bot.frontdoor.metrics",),
    # The terminal's progress display.
    "rich": ("bot.frontdoor.cli",),
    # The run report's pictures (issue 31), imported inside its functions (see the test below).
    "matplotlib": ("bot.adapters.charts",),
}


def test_matplotlib_is_imported_only_when_a_picture_is_drawn() -> None:
    """Ordinary commands do not pay matplotlib's import time: loading the bot, every subcommand,
    the report and the charts module itself leaves it out of `sys.modules`."""
    code = (
        "import sys, bot.frontdoor.cli, bot.frontdoor.wiring, commands, bot.core.report, bot.adapters.charts\n"
        "commands.build_registry()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("library", sorted(LIBRARY_HOMES))
def test_each_library_is_imported_only_by_its_adapter(library: str) -> None:
    homes = LIBRARY_HOMES[library]
    offenders = [
        module
        for module, imports in modules().items()
        if any(_in(i, library) for i in imports) and not any(_in(module, h) for h in homes)
    ]
    assert offenders == []


# A module in the left layer may not import anything in the right-hand layers (which sit above it).
FORBIDDEN = {
    "bot.records": (
        "bot.core",
        "bot.adapters",
        "bot.router",
        "commands",
        "bot.frontdoor",
        "bot.sim",
        "bot.settings",
        "bot.errors",
    ),
    "bot.adapters": ("bot.core", "bot.router", "commands", "bot.frontdoor", "bot.sim", "bot.settings"),
    "bot.core": ("bot.router", "commands", "bot.frontdoor", "bot.sim"),
    "commands": ("bot.router", "bot.frontdoor", "bot.sim"),
    "bot.router": ("bot.frontdoor", "bot.sim"),
}


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_imports_point_down_only(layer: str) -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if _in(module, layer)
        for i in imports
        if any(_in(i, above) for above in FORBIDDEN[layer])
    ]
    assert offenders == []


def test_only_the_terminal_front_door_reaches_the_simulator() -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if not _in(module, "bot.sim") and module != "bot.frontdoor.cli"
        for i in imports
        if _in(i, "bot.sim")
    ]
    assert offenders == []


def test_the_simulator_imports_nothing_of_the_bot() -> None:
    offenders = [
        (module, i)
        for module, imports in modules().items()
        if _in(module, "bot.sim")
        for i in imports
        if (_in(i, "bot") and not _in(i, "bot.sim")) or _in(i, "commands")
    ]
    assert offenders == []


def test_every_module_opens_with_a_docstring() -> None:
    missing = []
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = _tree(path)
            if ast.get_docstring(tree) is None and path.stat().st_size > 0:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


# ---------------------------------------------------------------------------------------------
# The shape after the structural turn (issue 10): a records leaf, core by feature, no cycles.


def _module_names() -> set[str]:
    return set(modules())


@functools.cache  # read only by the tests: built once per session
def _graph(*, typing_only: bool = True) -> dict[str, set[str]]:
    """Module → the modules of bot/ and commands/ it imports, relative and typing-only imports
    included; `from pkg import sub` counts as importing the submodule, not the package."""
    known = _module_names()
    graph: dict[str, set[str]] = {}
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            is_package = rel.name == "__init__"
            name = ".".join(rel.parts).removesuffix(".__init__")
            here = name if is_package else name.rpartition(".")[0]
            edges: set[str] = set()
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parts = here.split(".")
                        parent = ".".join(parts[: len(parts) - (node.level - 1)])
                        base = f"{parent}.{base}" if base else parent
                    subs = [f"{base}.{alias.name}" for alias in node.names]
                    targets = [s for s in subs if s in known] or [base]
                    if len(targets) < len(subs):
                        targets.append(base)
                else:
                    continue
                edges.update(t for t in targets if t in known and t != name)
            graph[name] = edges
    return graph


def test_no_import_cycle_anywhere() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_records_leaf_imports_nothing_of_the_bot() -> None:
    assert _graph()["bot.records"] == set()


#: Core's features, each a package; the modules named here are its services (they persist and
#: talk to Slack through injected adapters). Everything else in core is a model: plain data and
#: pure functions, which never reach up into a service.
CORE_SERVICES = (
    "bot.core.runs.service",
    "bot.core.runs.cards",
    "bot.core.snapshots.service",
    "bot.core.announcements.service",
)
CORE_FEATURES = ("bot.core.runs", "bot.core.snapshots", "bot.core.announcements", "bot.core.actions")


def test_core_is_split_by_feature() -> None:
    names = _module_names()
    for feature in CORE_FEATURES:
        assert feature in names, f"{feature} is missing"
    for service in CORE_SERVICES:
        assert service in names, f"{service} is missing"
    # The old by-suffix modules are gone.
    for old in (
        "bot.core.run_service",
        "bot.core.run_actions",
        "bot.core.announcement_service",
        "bot.core.announcement_templates",
        "bot.core.snapshot",
        "bot.core.plans",
    ):
        assert old not in names


#: The commands' API (context, reply, registry) hands services to commands: it sits on top of core.
CORE_TOP = ("bot.core.command",)


def _core_rank(module: str) -> int | None:
    if module == "bot.records":
        return 0
    if module in CORE_TOP:
        return 3
    if module in CORE_SERVICES:
        return 2
    if _in(module, "bot.core"):
        return 1
    return None


def test_inside_core_records_sit_below_models_below_services() -> None:
    offenders = []
    for module, targets in _graph().items():
        rank = _core_rank(module)
        if rank is None:
            continue
        for target in targets:
            target_rank = _core_rank(target)
            if target_rank is not None and target_rank > rank:
                offenders.append((module, target))
    assert offenders == []


def test_core_and_adapters_do_not_read_the_settings_module() -> None:
    # Settings sits above core: it is loaded by a front door and passed down as plain records.
    # Only the commands' API at the top of core carries the settings object on to the commands.
    offenders = [
        (module, target)
        for module, targets in _graph().items()
        if (_in(module, "bot.core") and module not in CORE_TOP)
        or _in(module, "bot.adapters")
        or module == "bot.records"
        for target in targets
        if target == "bot.settings"
    ]
    assert offenders == []


def test_commands_never_import_adapters() -> None:
    offenders = [
        (module, target)
        for module, targets in _graph().items()
        if _in(module, "commands")
        for target in targets
        if _in(target, "bot.adapters")
    ]
    assert offenders == []


def test_every_exception_class_is_drawn_in_the_error_tree() -> None:
    # Every exception the bot raises on purpose is reachable from bot/errors.py's docstring.
    tree_text = ast.get_docstring(ast.parse((ROOT / "bot" / "errors.py").read_text())) or ""
    missing = []
    for package in ("bot", "commands"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "sim" in path.relative_to(ROOT).parts:
                continue  # the simulator is a separate subsystem with its own small tree
            for node in ast.walk(_tree(path)):
                if (
                    isinstance(node, ast.ClassDef)
                    and any(
                        isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id in _ERRORS)
                        for b in node.bases
                    )
                    and node.name not in tree_text
                ):
                    missing.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert missing == []


_ERRORS = {"PermissionDenied", "ClusterUnreachable", "ConcurrentUpdate", "TransitionRefused"}


# The simulator's own layers, bottom to top. The assembly (`Sim`, `SimCluster`), its command line and
# the package's front (`bot.sim` itself) sit above all three and are the only modules left flat.
SIM_LAYERS = ("bot.sim.apiserver", "bot.sim.controllers", "bot.sim.world")
SIM_TOP = ("bot.sim", "bot.sim.cli", "bot.sim.cluster")


@functools.cache  # read only by the tests: built once per session
def _sim_import_graph() -> dict[str, set[str]]:
    """bot.sim module → the bot.sim modules it imports, counting imports under `if TYPE_CHECKING:`
    and inside functions (ast.walk sees them all) and resolving relative imports, because a
    typing-only import is still a dependency a reader has to follow."""
    paths: dict[str, Path] = {}
    for path in sorted((ROOT / "bot" / "sim").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        paths[".".join(rel.parts).removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                # `from bot.sim.apiserver import store` imports the module bot.sim.apiserver.store.
                targets = [
                    f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in paths else origin
                    for alias in node.names
                ]
            else:
                continue
            edges.update(t for t in targets if t in paths and t != name)
        graph[name] = edges
    return graph


def _sim_rank(module: str) -> int:
    for rank, layer in enumerate(SIM_LAYERS):
        if _in(module, layer):
            return rank
    return len(SIM_LAYERS)


def test_the_sim_subpackages_import_downwards_only() -> None:
    graph = _sim_import_graph()
    assert all(layer in graph for layer in SIM_LAYERS), "each sim layer is a subpackage"
    flat = [m for m in graph if _sim_rank(m) == len(SIM_LAYERS) and m not in SIM_TOP]
    assert flat == [], "a bot.sim module outside the layers must belong to one"
    upward = [
        (module, target)
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if _sim_rank(target) > _sim_rank(module)
    ]
    assert upward == []


def test_no_import_cycle_in_the_sim() -> None:
    graph = _sim_import_graph()
    # Tarjan's strongly connected components: any component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert cycles == []


# -- the test harness -------------------------------------------------------------------------------

TESTS = ROOT / "tests"


def _test_imports(path: Path) -> set[str]:
    """Every module a test file imports, absolute, wherever in the file the import sits."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _is_test_or_conftest(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "tests" and any(p == "conftest" or p.startswith("test_") for p in parts[1:])


def test_tests_share_code_through_support_only_never_a_test_module_or_a_conftest() -> None:
    # What tests share lives in tests/support/; a test module or conftest imported elsewhere runs its
    # fixtures and tests twice and ties unrelated tests together. Support code imports neither.
    offenders = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in _test_imports(path)
        if _is_test_or_conftest(module)
    }
    assert sorted(offenders) == []
    support = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((TESTS / "support").rglob("*.py"))
        for module in _test_imports(path)
        if module.startswith("tests.") and not _in(module, "tests.support")
    }
    assert sorted(support) == []


def test_core_tests_start_no_processes() -> None:
    starters = [
        str(path.relative_to(ROOT))
        for path in sorted((TESTS / "core").rglob("*.py"))
        if any(_in(module, "subprocess") for module in _test_imports(path))
    ]
    assert starters == []
