"""The real `helm`, built by scripts/helm/build at the version pinned in scripts/helm/pins.env.

`helm_binary` finds it under .cache/helm/<version>/bin; a test that needs it fails under CI
(CI=true) when it is missing, and is skipped elsewhere with the command that builds it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PINS = REPO / "scripts" / "helm" / "pins.env"
CHART = REPO / "deploy" / "helm" / "upgrade-bot"


def helm_version() -> str:
    for line in PINS.read_text(encoding="utf-8").splitlines():
        if line.startswith("HELM_VERSION="):
            return line.partition("=")[2].strip()
    raise AssertionError(f"{PINS} names no HELM_VERSION")


def helm_path() -> Path:
    return REPO / ".cache" / "helm" / helm_version() / "bin" / "helm"


@pytest.fixture(scope="session")
def helm() -> Path:
    path = helm_path()
    if not os.access(path, os.X_OK):
        reason = f"helm {helm_version()} not built at {path.relative_to(REPO)}; run scripts/helm/build"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Helm keeps caches and config under $HOME by default: point them at a throwaway place.
    env = {
        **os.environ,
        "HELM_CACHE_HOME": "/tmp/upgrade-bot-helm/cache",
        "HELM_CONFIG_HOME": "/tmp/upgrade-bot-helm/config",
        "HELM_DATA_HOME": "/tmp/upgrade-bot-helm/data",
    }
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, env=env)


def render(
    helm: Path, values: Sequence[str] = (), *, release: str = "ub", namespace: str = "upgrade-bot"
) -> tuple[str, list[dict[str, Any]]]:
    """`helm template` of the chart with `--set` values: the text and its objects."""
    sets = [arg for value in values for arg in ("--set", value)]
    result = run_helm(helm, "template", release, str(CHART), "--namespace", namespace, *sets)
    assert result.returncode == 0, result.stderr
    return result.stdout, [d for d in yaml.safe_load_all(result.stdout) if d]
