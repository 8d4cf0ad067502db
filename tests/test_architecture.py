"""The layers stay visible: imports point down only, and each library has one home."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sources

ROOT = Path(__file__).resolve().parent.parent
pytestmark = sources.WHOLE_TREE


def _tree(path: Path) -> ast.Module:
    """The parsed module, once per session: the tests below walk the same files many times."""
    return sources.tree(path)


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
    # The store's migrations (bot/adapters/store/migrate.py and its migrations/ directory).
    "alembic": ("bot.adapters.store",),
    "apscheduler": ("bot.frontdoor.triggers",),
    "slack_sdk": ("bot.adapters.slack", "bot.frontdoor"),
    "slack_bolt": ("bot.frontdoor",),
    # A dev dependency only: scripts/gen_apidata.py turns its schemas into the shipped
    # bot/core/checks/served_kinds.json, so no module of the bot imports it.
    "kubernetes_validate": (),
    "prometheus_client": ("bot.frontdoor.metrics",),
    # The terminal's progress display.
    "tqdm": ("bot.frontdoor.cli",),
    # The run report's pictures (issue 31), imported inside its functions (see the test below).
    "matplotlib": ("bot.adapters.charts",),
    # The optional `aws` extra (issue 29), imported inside `connect` (see the test below).
    "boto3": ("bot.adapters.providers.eks",),
    "botocore": ("bot.adapters.providers.eks",),
    # The optional `aks` extra (issue 46), imported inside `connect` (see the test below).
    "azure": ("bot.adapters.providers.aks",),
    # The optional `gke` extra (issue 46), imported inside `connect` (see the test below).
    "google": ("bot.adapters.providers.gke",),
}


def test_boto3_is_imported_only_when_an_eks_provider_is_used() -> None:
    """Without the `aws` extra the bot loads as before: loading it, every subcommand, the checks
    and the AWS adapter itself leaves boto3 and botocore out of `sys.modules`."""
    code = (
        "import sys, bot.frontdoor.cli, bot.frontdoor.assemble, commands, bot.core.checks.service,"
        " bot.core.providers, bot.adapters.providers.eks\n"
        "commands.build_registry()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_azure_sdk_is_imported_only_when_an_aks_provider_is_used() -> None:
    """Without an AKS cluster the bot loads as before: loading it, every subcommand, the jobs and
    the AKS adapter itself leaves azure-* out of `sys.modules`."""
    code = (
        "import sys, bot.frontdoor.cli, bot.frontdoor.assemble, commands, bot.core.jobs.registry,"
        " bot.core.providers, bot.adapters.providers.aks\n"
        "commands.build_registry()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'azure'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_google_sdk_is_imported_only_when_a_gke_provider_is_used() -> None:
    """Without a GKE cluster the bot loads as before: loading it, every subcommand, the jobs and
    the GKE adapter itself leaves google-* (the SDK, google-auth, protobuf's `google`) out of
    `sys.modules`."""
    code = (
        "import sys, bot.frontdoor.cli, bot.frontdoor.assemble, commands, bot.core.jobs.registry,"
        " bot.core.providers, bot.adapters.providers.gke\n"
        "commands.build_registry()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'google'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_matplotlib_is_imported_only_when_a_picture_is_drawn() -> None:
    """Ordinary commands do not pay matplotlib's import time: loading the bot, every subcommand,
    the report and the charts module itself leaves it out of `sys.modules`."""
    code = (
        "import sys, bot.frontdoor.cli, bot.frontdoor.assemble, commands, bot.core.runs.report, bot.adapters.charts\n"
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
        "bot.configsections",
        "bot.errors",
    ),
    "bot.adapters": (
        "bot.core",
        "bot.router",
        "commands",
        "bot.frontdoor",
        "bot.sim",
        "bot.settings",
        "bot.configsections",
    ),
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
        if not _in(module, "bot.sim") and not _in(module, "bot.frontdoor.cli")
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
    assert _cycles(_graph()) == []


#: Core's modules that speak to a cloud (issue 45): the EKS checks and jobs, and the control-plane
#: wait that any provider's upgrade ends with.
PROVIDER_CLIENTS = ("bot.core.checks.eks", "bot.core.jobs.eks", "bot.core.jobs.controlplane")


def test_core_reaches_a_cloud_through_the_provider_port_only() -> None:
    """The EKS checks and jobs import the port (`bot.core.providers`), never an adapter; and the
    port is the only module of core that reaches a provider adapter (it connects the one a
    cluster's configuration names)."""
    graph = _graph()
    reaching = {
        module: sorted(i for i in graph[module] if _in(i, "bot.adapters")) for module in PROVIDER_CLIENTS
    }
    assert reaching == {module: [] for module in PROVIDER_CLIENTS}
    assert "bot.core.providers" in graph["bot.core.checks.eks"]
    assert "bot.core.providers" in graph["bot.core.jobs.eks"]
    to_adapters = sorted(
        module
        for module, imports in graph.items()
        if _in(module, "bot.core") and any(_in(i, "bot.adapters.providers") for i in imports)
    )
    assert to_adapters == ["bot.core.providers"]


def test_the_records_leaf_imports_nothing_of_the_bot() -> None:
    assert _graph()["bot.records"] == set()


#: Core's features, each a package; the modules named here are its services (they persist and
#: talk to Slack through injected adapters). Everything else in core is a model: plain data and
#: pure functions, which never reach up into a service.
CORE_SERVICES = (
    "bot.core.runs.service",
    "bot.core.runs.cards",
    # What a run's actions can do, and the ports to its long actions: binds services together.
    "bot.core.runs.capabilities",
    "bot.core.snapshots.service",
    "bot.core.announcements.service",
    "bot.core.jobs.service",
    "bot.core.watches.service",
    "bot.core.fleets.service",
    # (`bot.core.checks.service` is a model despite its name: it reads through the reader it is
    # given and persists nothing, so the `check` action may import it.)
    # The engine of long duties (jobs and watches are its two kinds).
    "bot.core.duties",
)
#: Core's features, top to bottom: each may import those below it, never one above it.
CORE_FEATURES = (
    # Fleet runs are parents of runs (issue 41): above every feature a run uses.
    "bot.core.fleets",
    "bot.core.announcements",
    "bot.core.runs",
    "bot.core.actions",
    "bot.core.jobs",
    "bot.core.watches",
    "bot.core.checks",
    # Known-issue rules (issue 45): the checks, the jobs and the watches share them.
    "bot.core.rules",
    "bot.core.snapshots",
    "bot.core.kube",
)


def test_core_features_import_only_the_features_below_them() -> None:
    graph = _core_package_graph()
    upward = sorted(
        (feature, higher)
        for rank, feature in enumerate(CORE_FEATURES)
        for higher in CORE_FEATURES[:rank]
        if higher in graph.get(feature, set())
    )
    assert upward == []
    # Every package of core is a feature or a shared module below them all (no second tower).
    features = set(CORE_FEATURES)
    for package, imports in graph.items():
        if package not in features and package != "bot.core.command":
            assert not imports & features, f"{package} imports the features {sorted(imports & features)}"


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


def _core_package(module: str) -> str | None:
    """The package of core a module belongs to (`bot.core.jobs.drain` → `bot.core.jobs`); a flat
    module of core is its own; None outside core."""
    if not _in(module, "bot.core") or module == "bot.core":
        return None
    return ".".join(module.split(".")[:3])


def _core_package_graph() -> dict[str, set[str]]:
    """Package of core → the other packages of core its modules import (typing-only and
    function-level imports included)."""
    graph: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        package = _core_package(module)
        if package is None:
            continue
        edges = graph.setdefault(package, set())
        edges.update(t for t in map(_core_package, targets) if t is not None and t != package)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_package_level_import_cycle_in_core() -> None:
    """Features import each other one way: `core.actions` and `core.jobs` no longer import each
    other (an action request is a record), nor do any two other packages of core."""
    assert _cycles(_core_package_graph()) == []


#: The known-issue rules: their model, file, patterns and engine (issue 45).
CORE_RULES = "bot.core.rules"


def test_the_rules_sit_below_the_checks_the_jobs_and_the_watches() -> None:
    """The rules import nothing of the features that share them (by module, typing-only and
    function-level imports included), and the checks and the watches take them from here."""
    offenders = sorted(
        (module, target)
        for module, targets in _graph().items()
        if _in(module, CORE_RULES)
        for target in targets
        if any(_in(target, f) for f in ("bot.core.checks", "bot.core.jobs", "bot.core.watches"))
    )
    assert offenders == []
    graph = _core_package_graph()
    for feature in ("bot.core.checks", "bot.core.watches"):
        assert CORE_RULES in graph[feature], f"{feature} does not build on bot.core.rules"


#: Kubernetes knowledge shared by the features (objects, versions, the wire leaves).
CORE_KUBE = "bot.core.kube"


def test_core_kube_sits_below_the_features_that_read_the_cluster() -> None:
    graph = _core_package_graph()
    assert CORE_KUBE in graph, "bot.core.kube is missing"
    # It imports no other package of core: only records, errors and libraries.
    assert graph[CORE_KUBE] == set()
    for feature in ("bot.core.jobs", "bot.core.watches", "bot.core.checks", "bot.core.snapshots"):
        assert CORE_KUBE in graph[feature], f"{feature} does not build on bot.core.kube"
    # The jobs take Kubernetes knowledge from core.kube, not from another feature's model.
    offenders = sorted(
        (module, target)
        for module, targets in _graph().items()
        if _in(module, "bot.core.jobs")
        for target in targets
        if _in(target, "bot.core.watches")
    )
    assert offenders == []


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
        if target in ("bot.settings", "bot.configsections")
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
    assert _cycles(_sim_import_graph()) == []


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


# -- assembled once, joined by declared ports ------------------------------------------------------

#: Attribute names that are callback slots wherever they appear (`x.on_change = …`), and the
#: callbacks `bot.frontdoor.assemble` once assigned on its services before issue 24 made them
#: constructor arguments.
HOOK_PREFIX = "on_"
HOOK_NAMES = frozenset({"publish_run", "start_job"})
#: Methods that tie a built part to another (the duty engine's `lead_with`, gone in issue 45).
LATE_TIES = frozenset({"lead_with"})
#: Lists of listeners: appended to only by their owner (`self.listeners.append(…)`).
LISTENER_LISTS = frozenset({"listeners"})
#: The simulated API server's store keeps its watchers as the real API server does: the sim's
#: controller engine registers itself on the store it is given (a watch, not the bot's wiring).
LISTENERS_ALLOWED = ("bot/sim/",)


def _own(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _hook(name: str) -> bool:
    return name.startswith(HOOK_PREFIX) or name in HOOK_NAMES


def _parts_built(scope: ast.AST) -> set[str]:
    """The names a scope binds to an object it builds (`runs = RunService(…)`): its parts."""
    built: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if callee[:1].isupper():
                built.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return built


def _ties_late(call: ast.Call, *, listeners: bool) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in LATE_TIES:
        return True
    return (
        listeners
        and func.attr in ("append", "extend", "insert")
        and isinstance(func.value, ast.Attribute)
        and (func.value.attr in LISTENER_LISTS or _hook(func.value.attr))
        and not _own(func.value.value)
    )


def hooks_set_after_construction(source: str, *, listeners: bool = True) -> list[str]:
    """Where `source` ties a part to another after the other was built, as `line: target`:

    - an attribute of another object (not `self`/`cls`) assigned a callback slot (`x.on_y = …`,
      `x.publish_run = …`), a lambda, or a part the same scope built (`steps.runs = runs`);
    - a call that ties a part to another after the fact (`duties.lead_with(…)`);
    - with `listeners`, a listener appended to another object's list of them
      (`self.service.listeners.append(…)`, `x.on_fenced.append(…)`).

    Data is left alone: a record's fields set by the code that owns it (`state.pods = pods`).
    """
    found: set[str] = set()
    tree = sources.parsed(source)
    for scope in [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
    ]:
        parts = _parts_built(scope)
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for item in target.elts if isinstance(target, ast.Tuple | ast.List) else [target]:
                        if not isinstance(item, ast.Attribute) or _own(item.value):
                            continue
                        part = isinstance(value, ast.Name) and value.id in parts
                        if _hook(item.attr) or isinstance(value, ast.Lambda) or part:
                            found.add(f"{node.lineno}: {ast.unparse(item)}")
            elif isinstance(node, ast.Call) and _ties_late(node, listeners=listeners):
                found.add(f"{node.lineno}: {ast.unparse(node.func)}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_no_part_of_the_bot_is_tied_to_another_after_it_was_built() -> None:
    # Issue 45: the standing (`bot.core.leadership.Leadership`) is built first and handed to the
    # duty engine, the triggers and the elector; nothing is wired after construction.
    offenders = [
        f"{path.relative_to(ROOT)}:{found}"
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for found in hooks_set_after_construction(
            path.read_text(encoding="utf-8"),
            listeners=not str(path.relative_to(ROOT)).startswith(LISTENERS_ALLOWED),
        )
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("planted", "found"),
    [
        ("x.on_y = handler", "x.on_y"),
        ("services.jobs.on_change = runner.wake", "services.jobs.on_change"),
        ("jobs.publish_run = lambda run_id: None", "jobs.publish_run"),
        ("duties.leading = lambda: True", "duties.leading"),
        ("triggers.on_fenced.append(elector.fenced)", "triggers.on_fenced.append"),
        ("self.announcements.listeners.append(self.sync)", "self.announcements.listeners.append"),
        ("steps = StepsOfRuns()\nruns = RunService()\nsteps.runs = runs", "steps.runs"),
        ("bot.duties.lead_with(leading=lambda: True, duty=nullcontext)", "bot.duties.lead_with"),
    ],
)
def test_the_hook_check_finds_a_planted_assignment(planted: str, found: str) -> None:
    # Planted in a copy of a real module: the check reads the module as it stands and the plant.
    source = (ROOT / "bot" / "frontdoor" / "assemble.py").read_text(encoding="utf-8")
    assert hooks_set_after_construction(source) == []
    body = "\n".join(f"    {line}" for line in planted.splitlines())
    hits = hooks_set_after_construction(f"{source}\n\ndef planted() -> None:\n{body}\n")
    assert [h.split(": ", 1)[1] for h in hits] == [found]


def test_the_hook_check_leaves_data_and_own_state_alone() -> None:
    source = """
class Part:
    def __init__(self, on_change):
        self.on_change = on_change
        self.listeners = []
        self.listeners.append(on_change)

def record(state, pods):
    state.pods = pods
    state.ended = None
    run = PodRun()
    run.host_ip = "10.0.0.1"
    jobs = JobService(on_change=wake)
"""
    assert hooks_set_after_construction(source) == []


def _calls(path: Path, function: str) -> set[str]:
    """The names `function` (a top-level def of the file at `path`) calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (body,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    return {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(body)
        if isinstance(node, ast.Call)
    }


#: Who builds the bot: every front door and the test harness, by the one `assemble`.
ASSEMBLERS = (
    ("bot/frontdoor/serve.py", "serve"),
    ("bot/frontdoor/cli/exec.py", "answered"),
    ("bot/frontdoor/rehearse.py", "rehearsal_bot"),
    ("tests/support/front.py", "start_front"),
)
#: The parts `assemble` builds and ties; nothing else in bot/ or commands/ constructs them.
ASSEMBLED = (
    "RunService",
    "JobService",
    "WatchService",
    "AnnouncementService",
    "RunCards",
    "Triggers",
    "Duties",
    "Elector",
    "Router",
)


@pytest.mark.parametrize(("file", "function"), ASSEMBLERS)
def test_every_front_door_and_the_harness_call_the_one_assemble(file: str, function: str) -> None:
    path = ROOT / file
    assert "assemble" in _calls(path, function)
    assert "bot.frontdoor.assemble" in _test_imports(path)


def test_only_the_assembly_builds_the_services_the_triggers_the_engine_and_the_elector() -> None:
    builders = {
        f"{path.relative_to(ROOT)} builds {name}"
        for package in ("bot", "commands")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "bot" / "frontdoor" / "assemble.py"
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and (name := getattr(node.func, "id", getattr(node.func, "attr", ""))) in ASSEMBLED
    }
    assert sorted(builders) == []
    defined = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef) and node.name == "assemble"
    ]
    assert defined == ["bot/frontdoor/assemble.py"]


def test_the_package_cycle_finder_finds_a_typing_only_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
