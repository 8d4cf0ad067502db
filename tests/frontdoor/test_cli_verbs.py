"""The terminal as a package of verbs (issue 45 item 2): one module per verb under
`bot/frontdoor/cli/`, each `register(subparsers) -> handler`; the verb's module imported only when
it runs; the store, the clusters and Slack reached through `cli/connect.py` alone; no module over
300 lines."""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from bot.frontdoor.cli import OWN_PARSERS, VERBS, full_parser, main, parser_for

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bot" / "frontdoor" / "cli"
#: The modules that import inside a function, each for its reason (their docstrings say it): the
#: table that imports a verb's module when it runs, the adapters opened on demand, and `tqdm` at
#: the first page a progress display shows.
LAZY = {"__init__.py", "connect.py", "progress.py"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.glob("*.py"))


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_each_verb_is_a_module_named_after_it_that_registers_the_line_help_shows(verb: str) -> None:
    # The top-level help is drawn from the table when the verb does not run, and from the verb's
    # own parser when it does: the two must read the same, or `--help` would change with argv.
    with_verb, handler = parser_for(verb)
    without, none = parser_for(None)
    assert handler is not None
    assert none is None
    assert with_verb.format_help() == without.format_help()


@pytest.mark.parametrize("module", sorted(set(OWN_PARSERS.values())))
def test_each_command_with_its_own_parser_has_a_main(module: str) -> None:
    own = importlib.import_module(f"bot.frontdoor.cli.{module}")
    assert callable(own.main)
    # What the completion script completes after its words.
    assert isinstance(own.parser(), argparse.ArgumentParser)


def _imported_after(*argv: str) -> set[str]:
    """The modules of the bot (and sqlalchemy, kubernetes) a fresh `upgrade-bot ARGV` imported."""
    code = (
        "import sys\n"
        "from bot.frontdoor.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return {m for m in done.stderr.splitlines() if m.split(".")[0] in ("bot", "sqlalchemy", "kubernetes")}


def test_help_imports_no_verb_and_neither_the_settings_the_store_nor_the_cluster_client() -> None:
    imported = _imported_after("--help")
    assert sorted(m for m in imported if m.startswith("bot.frontdoor.cli.")) == ["bot.frontdoor.cli.options"]
    assert not {"bot.settings", "bot.adapters.store", "bot.adapters.kube", "sqlalchemy", "kubernetes"} & (
        imported
    )


def test_one_verb_imports_its_own_module_and_no_other_verb() -> None:
    rules = ROOT / "templates" / "rules" / "known-issues.yaml"
    imported = _imported_after("rules", "check", str(rules))
    verbs = {m.rsplit(".", 1)[1] for m in imported if m.startswith("bot.frontdoor.cli.")}
    assert verbs & (set(VERBS) | set(OWN_PARSERS.values())) == {"rules"}
    assert not {"bot.adapters.store", "bot.adapters.kube", "sqlalchemy", "kubernetes"} & imported


def _function_imports(tree: ast.Module) -> list[int]:
    """The lines of imports inside a function (an `if TYPE_CHECKING:` block at the top is fine)."""
    return [
        inner.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Import | ast.ImportFrom)
    ]


def test_imports_are_lazy_in_the_verb_table_and_the_connect_helper_only() -> None:
    offenders = {
        path.name: lines
        for path in _modules()
        if path.name not in LAZY
        if (lines := _function_imports(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offenders == {}


def test_only_the_connect_helper_opens_the_store_or_connects_a_cluster() -> None:
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in _modules()
        if path.name != "connect.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in {("Store", "open"), ("Cluster", "connect")}
    ]
    assert offenders == []


def test_no_module_of_the_terminal_is_over_300_lines() -> None:
    lines = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in _modules()}
    assert {name: n for name, n in lines.items() if n > 300} == {}
    assert len(lines) > len(VERBS)  # the package, not a module left behind beside it
    assert not (PACKAGE.parent / "cli.py").exists()


@pytest.mark.parametrize(
    ("argv", "collecting"),
    [
        (["snapshot", "pre", "--config", "missing.yaml"], False),
        (["snapshot", "export", "1", "--config", "missing.yaml"], False),
        (["diff", "pre", "post", "--config", "missing.yaml"], False),
        (["check", "--config", "missing.yaml"], False),
        (["rules", "check", "missing.yaml"], True),
        (["plan", "validate", "missing.yaml"], True),
    ],
)
def test_the_verbs_that_read_a_cluster_once_run_without_the_cyclic_collector_and_give_it_back(
    argv: list[str], collecting: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A snapshot's, a diff's or a check's full collections walked the libraries' modules and the
    # lists again and again (0.3-0.4 s of a 150,000-pod snapshot); the served bot keeps collecting.
    cli = importlib.import_module("bot.frontdoor.cli")
    seen: list[bool] = []
    dispatch = cli._dispatch

    def watched(words: list[str]) -> int:
        seen.append(gc.isenabled())
        return dispatch(words)

    monkeypatch.setattr(cli, "_dispatch", watched)
    assert gc.isenabled()
    assert main(argv) == 2  # the configuration (or the file) is missing: a usage error
    assert seen == [collecting]
    assert gc.isenabled()  # a process that goes on after `main` (this one) collects again


def test_a_brief_verb_refused_by_its_parser_gives_the_collector_back_too() -> None:
    with pytest.raises(SystemExit):
        main(["check", "--bogus"])
    assert gc.isenabled()


@pytest.mark.parametrize("argv", [["--version"], ["rules", "check", "templates/rules/known-issues.yaml"]])
def test_the_terminal_freezes_its_heap_as_it_exits_so_the_last_collections_skip_it(argv: list[str]) -> None:
    # An `atexit` function registered before `main` runs after the terminal's own (last in, first
    # out): it sees the heap as the interpreter's final collections will.
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, flush=True))\n"
        "from bot.frontdoor.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "frozen True"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next((dict(a.choices) for a in actions), {})


def _innermost(verb: str) -> tuple[list[str], list[str]]:
    """The words of `verb`'s first subcommand all the way down, and a value for each of its
    positional arguments (its first choice, if it has choices)."""
    words, parser = [verb], _subcommands(full_parser())[verb]
    while subcommands := _subcommands(parser):
        name, parser = next(iter(subcommands.items()))
        words.append(name)
    values = [str(a.choices[0]) if a.choices else "x" for a in parser._actions if not a.option_strings]
    return words, values


#: The subcommands that parse their own arguments (`OWN_PARSERS`), with what they require.
OWN = [(["sim", "serve"], []), (["sim", "scenario"], ["--builtin", "small"]), (["snapshot", "export"], ["1"])]


@pytest.mark.parametrize(
    ("words", "values"),
    [pytest.param(*case, id=" ".join(case[0])) for case in [*map(_innermost, VERBS), *OWN]],
)
def test_an_unknown_flag_is_refused_with_the_usage_of_the_subcommand_it_was_given_to(
    words: list[str], values: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse hands a subcommand's unknown arguments up to the top-level parser: the usage was
    # `upgrade-bot [-h] [--version] COMMAND ...`, whatever the command.
    try:
        status = main([*words, *values, "--bogus"])
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    command = " ".join(["upgrade-bot", *words])
    assert status == 2, err
    assert err.startswith(f"usage: {command} ["), err
    assert err.splitlines()[-1] == f"{command}: error: unrecognized arguments: --bogus"
