"""The kube adapter imports the `kubernetes` client on first use, whole, as a plain import does
(each test in a fresh interpreter: imports are process-wide)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_adapter_imports_no_part_of_the_client() -> None:
    out = run(
        "import sys, bot.adapters.kube\nprint(sorted(m for m in sys.modules if m.startswith('kubernetes')))"
    )
    assert out == "[]"


def test_reading_a_kubeconfig_imports_the_client_as_a_plain_import_makes_it(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        ),
        encoding="utf-8",
    )
    out = run(
        "import sys, types, bot.adapters.kube as kube\n"
        f"print(kube.kubeconfig_context({str(kubeconfig)!r}))\n"
        "import kubernetes\n"
        "from kubernetes import client\n"
        "print(client.CoreV1Api.__name__, kubernetes.__version__.split('.')[0], "
        "all(type(sys.modules[m]) is types.ModuleType for m in sys.modules if m.startswith('kubernetes')))"
    )
    assert out.splitlines() == ["ctx", "CoreV1Api 35 True"]
