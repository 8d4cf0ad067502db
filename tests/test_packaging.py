"""What ships: the wheel (with the built-in templates and plans), the image, the Slack manifest.

No Docker engine is at hand, so the Dockerfile is checked as text; the slow test builds the wheel
from exactly what the Dockerfile's build stage copies, installs it into a fresh virtualenv and runs
the bot from a directory that is not the checkout, as a new user would after `pip install .`.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bot.core.checks import apidata
from bot.resources import BUILTIN_PLANS, BUILTIN_TEMPLATES
from tests.support import sources

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped), per stage."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text(encoding="utf-8"))
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def copied(stage: list[str]) -> list[str]:
    """Sources of the stage's COPY instructions from the build context (not from another stage)."""
    return [
        s for line in stage if line.startswith("COPY ") and "--from" not in line for s in line.split()[1:-1]
    ]


def test_every_file_the_dockerfile_copies_exists() -> None:
    sources = [s for stage in dockerfile_stages() for s in copied(stage)]
    for source in sources:
        assert (ROOT / source).exists(), source


def test_the_image_builds_a_wheel_and_installs_it_not_the_source() -> None:
    build, runtime, slim, full = dockerfile_stages()
    assert build[0].endswith(" AS build")
    assert (runtime[0].split()[-1], slim[0], full[0]) == (
        "runtime",
        "FROM runtime AS slim",
        "FROM runtime AS full",
    )
    assert {"pyproject.toml", "README.md", "bot", "commands", "templates"} <= set(copied(build))
    assert any(line.startswith("RUN pip wheel ") for line in build)
    # The final stages hold no source: only the wheels the build stage made, installed offline.
    for stage, extras in ((slim, "postgres,aws"), (full, "postgres,aws,charts")):
        assert not {"bot", "commands", "templates", "pyproject.toml"} & set(copied(runtime) + copied(stage))
        (install,) = [line for line in stage if "pip install" in line]
        assert "from=build" in install
        assert "--no-index" in install
        assert not re.search(r"\s(-e|--editable)\s", install)
        # Pinned (hadolint's DL3013) to the version this checkout builds; slim without `charts`.
        assert f'"upgrade-bot[{extras}]==${{VERSION}}"' in install
        assert "ARG VERSION" in stage
        assert stage[-3:] == ['VOLUME ["/data"]', "EXPOSE 3000", 'ENTRYPOINT ["upgrade-bot", "run"]']
        assert "USER 10001" in stage
    # Declared before the first FROM (its default), and again in the stages that use it.
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    (default,) = [line for line in lines if line.startswith("ARG VERSION=")]
    assert default == f"ARG VERSION={PYPROJECT['project']['version']}"
    assert "ARG VERSION" in runtime


def _lock() -> dict[str, tuple[str, list[str], str]]:
    """requirements.lock as name → (pinned version, hashes, what needs it)."""
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    pins: dict[str, tuple[str, list[str], str]] = {}
    for block in re.split(r"\n(?=\S)", text):
        m = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", block)
        if m is None:
            continue
        via = re.search(r"# via (.*)", block)
        pins[canonicalize_name(m.group(1))] = (
            m.group(2),
            re.findall(r"--hash=sha256:([0-9a-f]{64})", block),
            via.group(1) if via else "",
        )
    return pins


def test_the_lock_pins_exactly_the_declared_dependencies_with_hashes() -> None:
    # Offline: the lock is re-resolved by scripts/lock (uv) when pyproject.toml's dependencies
    # change; this says when that was forgotten.
    project = PYPROJECT["project"]
    declared = [
        Requirement(r)
        for r in project["dependencies"]
        + project["optional-dependencies"]["postgres"]
        + project["optional-dependencies"]["aws"]
        + project["optional-dependencies"]["aks"]
        + project["optional-dependencies"]["gke"]
        + project["optional-dependencies"]["charts"]
    ]
    pins = _lock()
    stale = [
        f"{r.name}: {pins[canonicalize_name(r.name)][0] if canonicalize_name(r.name) in pins else 'missing'}"
        f" vs {r.specifier}"
        for r in declared
        if canonicalize_name(r.name) not in pins
        or not r.specifier.contains(pins[canonicalize_name(r.name)][0], prereleases=True)
    ]
    assert stale == []
    # What the lock says the project itself asked for is what pyproject.toml declares, no more.
    top = {name for name, (_, _, via) in pins.items() if "upgrade-bot (pyproject.toml)" in via}
    assert top == {canonicalize_name(r.name) for r in declared}
    assert [name for name, (_, hashes, _) in pins.items() if not hashes] == []
    # The development tools stay out of what ships.
    assert not {"pytest", "ruff", "mypy", "kubernetes-validate", "uv"} & set(pins)


def test_the_image_and_the_setup_install_from_the_lock() -> None:
    build, final, *_ = dockerfile_stages()  # `final`: what both images share
    assert "requirements.lock" in copied(build)
    assert any("--require-hashes -r requirements.lock" in line for line in build if line.startswith("RUN "))
    labels = " ".join(line for line in final if line.startswith("LABEL "))
    for key in ("title", "description", "version", "licenses", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels
    setup = (ROOT / "scripts" / "setup").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements.lock" in setup
    assert "--group dev" in setup
    # The idempotence stamp covers the lock too: a changed lock re-installs.
    (stamp,) = [line for line in setup.splitlines() if line.startswith("stamp=")]
    assert "requirements.lock" in stamp
    assert "pyproject.toml" in stamp


def test_the_project_metadata_names_its_licence_and_keeps_tools_out_of_the_extras() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence
    assert "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    assert project["keywords"]
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"])
    assert set(project["optional-dependencies"]) == {"postgres", "aws", "aks", "gke", "charts", "github"}
    dev = {Requirement(r).name for r in PYPROJECT["dependency-groups"]["dev"]}
    assert {"pytest", "ruff", "mypy", "kubernetes-validate"} <= dev


def _top_level_imports() -> set[str]:
    found: set[str] = set()
    for path in [*(ROOT / "bot").rglob("*.py"), *(ROOT / "commands").rglob("*.py")]:
        for node in ast.walk(sources.tree(path)):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"bot", "commands"}


@sources.WHOLE_TREE
def test_every_library_the_bot_imports_is_a_declared_dependency() -> None:
    # An import that works only because another dependency happens to pull the library in breaks
    # the day that dependency stops doing so.
    # where the import name is not the distribution's (`azure` is a namespace: azure-core is always in it;
    # `google` likewise: google-cloud-container's extra brings google-auth and google-api-core)
    import_names = {
        "yaml": "pyyaml",
        "re2": "google-re2",
        "azure": "azure-core",
        "google": "google-cloud-container",
        "jwt": "pyjwt",
    }
    # boto3 and botocore come with the `aws` extra (bot/adapters/providers/eks.py imports them only when used),
    # azure-* with the `aks` extra (bot/adapters/providers/aks.py, likewise), google-* with the `gke`
    # extra (bot/adapters/providers/gke.py, likewise),
    # matplotlib with the `charts` extra (bot/adapters/charts.py, likewise).
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared = {
        canonicalize_name(Requirement(r).name)
        for r in PYPROJECT["project"]["dependencies"]
        + extras["aws"]
        + extras["aks"]
        + extras["gke"]
        + extras["charts"]
        + extras["github"]
    }
    undeclared = sorted(
        m for m in _top_level_imports() if canonicalize_name(import_names.get(m, m)) not in declared
    )
    assert undeclared == []


def test_the_image_runs_as_a_non_root_user_with_the_bot_as_entrypoint() -> None:
    final = dockerfile_stages()[-1]
    (user,) = [line for line in final if line.startswith("USER ")]
    assert re.fullmatch(r"USER (?!root\b|0\b)\S+", user)
    assert final[-1] == 'ENTRYPOINT ["upgrade-bot", "run"]'


def test_regenerating_the_served_kinds_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "served_kinds.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_apidata.py"), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Byte for byte: after upgrading kubernetes-validate, run scripts/gen_apidata.py and commit.
    assert out.read_text(encoding="utf-8") == apidata.DATA_FILE.read_text(encoding="utf-8")


def test_the_bot_reads_the_data_without_importing_kubernetes_validate() -> None:
    code = (
        "import sys\n"
        "from bot.core.checks import apidata\n"
        "print(apidata.served('flowcontrol.apiserver.k8s.io/v1beta2', 'FlowSchema', 29).state,"
        " any(m.startswith('kubernetes_validate') for m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["removed", "False"]


def _package_dirs() -> dict[str, Path]:
    """Every folder the wheel must hold as a package: bot/ and commands/ (code and data folders)
    and templates/, which ships as `bot.templates`."""
    found: dict[str, Path] = {}
    for top, name in (("bot", "bot"), ("commands", "commands"), ("templates", "bot.templates")):
        for folder in [ROOT / top, *sorted(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if folder.name == "__pycache__" or not any(f.is_file() for f in folder.iterdir()):
                continue
            found[".".join([name, *folder.relative_to(ROOT / top).parts])] = folder
    return found


def test_pyproject_lists_every_package_and_maps_templates_into_the_wheel() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    # Listed by hand (see pyproject.toml): a new folder under bot/ must be added there too, or the
    # installed bot would lack it while every test run from the checkout still passes.
    assert sorted(setuptools["packages"]) == sorted(_package_dirs())
    assert setuptools["package-dir"] == {"bot.templates": "templates"}


def test_package_data_takes_every_template_plan_and_scenario_file() -> None:
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]
    # Data folders (no __init__.py) ship whole; code packages ship their modules only.
    data = {p: f for p, f in _package_dirs().items() if not (f / "__init__.py").exists()}
    assert {"bot.templates", "bot.templates.plans", "bot.sim.world.scenarios"} <= set(data)
    missed = [
        str(path.relative_to(ROOT))
        for package, folder in data.items()
        for path in folder.iterdir()
        if path.is_file() and not any(fnmatch.fnmatch(path.name, g) for g in globs.get(package, []))
    ]
    assert missed == []


def test_the_typed_classifier_comes_with_the_pep_561_marker_in_each_package() -> None:
    # Without `py.typed` a type checker ignores the installed bot's annotations, whatever the
    # classifier says.
    assert "Typing :: Typed" in PYPROJECT["project"]["classifiers"]
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package in ("bot", "commands"):
        assert (ROOT / package / "py.typed").is_file(), package
        assert "py.typed" in globs.get(package, []), package


def test_the_resource_locator_is_a_leaf_that_finds_the_checkouts_templates() -> None:
    tree = ast.parse((ROOT / "bot" / "resources.py").read_text(encoding="utf-8"))
    imported = [
        *(a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names),
        *(n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)),
    ]
    assert not [m for m in imported if m.split(".")[0] in ("bot", "commands")]
    assert ast.get_docstring(tree)
    assert BUILTIN_TEMPLATES == ROOT / "templates"
    assert (BUILTIN_PLANS / "eks-nodegroups.yaml").is_file()


def test_the_manifest_declares_the_command_interactivity_and_least_scopes() -> None:
    manifest = yaml.safe_load((ROOT / "slack-app-manifest.yaml").read_text())
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == "/upgrade"
    assert command["url"].endswith("/slack/events")
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    assert manifest["settings"]["socket_mode_enabled"] is True
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert scopes == {
        "commands",
        "chat:write",
        "files:read",
        "files:write",
        "im:write",
        "usergroups:read",
        "users:read",
        # Only to find a post a crash cut off (bot.core.delivery): the bot's own channels.
        "channels:history",
        "groups:history",
    }
    assert not any(s.startswith(("admin", "im:history", "mpim:history")) for s in scopes)


#: Issue 44: what `pip install` of the wheel may put in a fresh virtualenv's site-packages, the
#: virtualenv's own pip and setuptools left out.
INSTALL_LIMIT_MB = 120
#: What `python -m venv` puts in site-packages by itself (Python 3.11: pip and setuptools).
VENV_OWN = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "distutils-precedence.pth")


def _disk_usage(root: Path) -> int:
    """Bytes in use under `root` as `du -s` counts them (blocks, each inode once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def _run(
    cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_the_built_wheel_installs_into_a_fresh_virtualenv_and_runs_from_anywhere(tmp_path: Path) -> None:
    # Build from a copy of what the image's build stage copies: a file the Dockerfile forgets
    # fails here, and setuptools' build/ folder never lands in the checkout.
    src = tmp_path / "src"
    for source in copied(dockerfile_stages()[0]):
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, src / source, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / source, src / source)
    # The bot as a user runs it: nothing of this test session's environment points at the checkout.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "UPGRADE_BOT_", "PYTHON", "VIRTUAL_ENV"))
    }
    dist = tmp_path / "dist"
    # No skip anywhere: a wheel that cannot be built or installed (here or in CI) is a failure.
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), str(src)],
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("upgrade_bot-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert "bot/core/checks/served_kinds.json" in shipped
    assert {"bot/py.typed", "commands/py.typed"} <= shipped
    metadata = next(n for n in shipped if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()
    for path in (ROOT / "templates").rglob("*"):
        if path.is_file():
            assert f"bot/templates/{path.relative_to(ROOT / 'templates').as_posix()}" in shipped, path
    # The store migrates with the Alembic revisions it ships (no alembic.ini at run time).
    migrations = ROOT / "bot" / "adapters" / "store" / "migrations"
    for path in migrations.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            assert path.relative_to(ROOT).as_posix() in shipped, path

    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    # Dependencies come from PyPI, or from wheels already on the machine when PIP_FIND_LINKS names them.
    installed = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    # Issue 44: at most 120 MB of site-packages on disk, the bytecode pip compiles counted and the
    # virtualenv's own pip and setuptools not (benchmarks/bench_install.py prints it per distribution).
    (site,) = (venv / "lib").glob("python3*/site-packages")
    own = [p for p in site.iterdir() if p.name in VENV_OWN or p.name.split("-")[0] in VENV_OWN]
    size = _disk_usage(site) - sum(_disk_usage(p) for p in own)
    assert size <= INSTALL_LIMIT_MB * 1024 * 1024, (
        f"{size / 1024 / 1024:.1f} MB: run benchmarks/bench_install.py"
    )
    # Without the `charts` extra, no matplotlib: the report's pictures are optional.
    assert not list((venv / "lib").glob("python3*/site-packages/matplotlib"))

    home = tmp_path / "elsewhere"
    home.mkdir()
    bot = str(venv / "bin" / "upgrade-bot")
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import bot.resources as r; print(r.BUILTIN_TEMPLATES)"],
        cwd=home,
        env=env,
        timeout=60,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr

    check = _run([bot, "templates", "check"], cwd=home, env=env, timeout=120)
    assert check.returncode == 0, check.stderr
    assert "not found" not in check.stderr
    assert "every announcement renders" in check.stdout

    # Without a configuration file `exec` says so in one line; with one (no clusters, no roster)
    # `help` renders from the installed templates.
    unconfigured = _run([bot, "exec", "help"], cwd=home, env=env, timeout=120)
    assert unconfigured.returncode == 2
    assert "configuration file not found" in unconfigured.stderr
    assert "Traceback" not in unconfigured.stderr
    # The example the message points to ships in the wheel: `init` writes it.
    assert "`upgrade-bot init` writes an example" in unconfigured.stderr
    initialised = _run([bot, "init", "--out", "example.yaml"], cwd=home, env=env, timeout=60)
    assert initialised.returncode == 0, initialised.stderr
    # The example, its first line pointing at the schema `init` wrote beside it from the installed
    # bot (the wheel has no `schemas/` folder).
    assert (home / "example.yaml").read_text(encoding="utf-8") == (
        ROOT / "upgrade-bot.example.yaml"
    ).read_text(encoding="utf-8").replace(
        "$schema=schemas/upgrade-bot.schema.json", "$schema=upgrade-bot.schema.json", 1
    )
    assert json.loads((home / "upgrade-bot.schema.json").read_text(encoding="utf-8"))["$schema"]
    (home / "upgrade-bot.yaml").write_text("data_dir: data\n", encoding="utf-8")
    helped = _run([bot, "exec", "help"], cwd=home, env=env, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert "Traceback" not in helped.stderr
    assert "not found" not in helped.stdout + helped.stderr
    assert "/upgrade snapshot" in helped.stdout

    rehearsed = _run(
        [bot, "rehearse", "eks-nodegroups", "--auto-approve", "--report", str(home / "report")],
        cwd=home,
        env=env,
        timeout=300,
    )
    # 3: completed, with the planted faults' failed steps reviewed and skipped.
    assert rehearsed.returncode == 3, rehearsed.stdout[-2000:] + rehearsed.stderr[-3000:]
    # The report's lines, then the failed steps skipped and the verdict, last (issue 40).
    *_, html, md, note, failed, status = rehearsed.stdout.rstrip().splitlines()
    assert re.search(r"completed with \d+ failed steps skipped$", status), status
    assert failed.startswith("failed and skipped: checks (")
    # The report without matplotlib: the HTML (its tables) and the Markdown, and what to install.
    assert [Path(line.removeprefix("report: ")).suffix for line in (html, md)] == [".html", ".md"]
    assert note == (
        "report: no timeline picture, the HTML has no charts (no matplotlib: pip install 'upgrade-bot[charts]')"
    )
    assert sorted(p.suffix for p in (home / "report").iterdir()) == [".html", ".md"]


def test_the_base_image_is_pinned_by_digest_and_labelled() -> None:
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    (image,) = [line.split("=", 1)[1] for line in lines if line.startswith("ARG PYTHON_IMAGE=")]
    (digest,) = [line.split("=", 1)[1] for line in lines if line.startswith("ARG PYTHON_DIGEST=")]
    assert re.fullmatch(r"docker\.io/library/python:3\.11-slim-\w+", image), image
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), digest
    stages = dockerfile_stages()
    # Every stage starts from the same bytes: the tag for people, the digest for the builder (the
    # two images from the stage they share).
    assert [stage[0].split()[1] for stage in stages] == ["${PYTHON_IMAGE}@${PYTHON_DIGEST}"] * 2 + [
        "runtime"
    ] * 2
    (label,) = [line for line in stages[1] if line.startswith("LABEL ")]
    for key in ("title", "description", "version", "licenses", "base.name", "base.digest"):
        assert f"org.opencontainers.image.{key}=" in label, key
    assert 'org.opencontainers.image.base.digest="${PYTHON_DIGEST}"' in label
    assert {"ARG PYTHON_IMAGE", "ARG PYTHON_DIGEST"} <= set(stages[1])
