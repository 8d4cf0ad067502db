"""The kube adapter imports the `kubernetes` client on first use, only the parts of it that it uses,
and the package stays whole for anyone who asks for more (each test in a fresh interpreter: imports
are process-wide)."""

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


def test_reading_a_kubeconfig_imports_no_api_group_no_model_and_no_dynamic_client(tmp_path: Path) -> None:
    # The whole package costs 0.8 s of CPU (every API group, 800 models, kubernetes_validate's
    # schemas through the dynamic client) that a snapshot paid for a transport using none of them.
    out = run(
        "import sys, bot.adapters.kube as kube\n"
        f"print(kube.kubeconfig_context({str(_kubeconfig(tmp_path))!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes.client.api.', "
        "'kubernetes.client.models.', 'kubernetes.dynamic', 'kubernetes_validate'))))"
    )
    assert out.splitlines() == ["ctx", "[]"]


def test_a_package_imported_whole_first_is_left_as_it_is(tmp_path: Path) -> None:
    out = run(
        "import kubernetes, sys\n"
        "before = dict(sys.modules)\n"
        "import bot.adapters.kube as kube\n"
        f"kube.kubeconfig_context({str(_kubeconfig(tmp_path))!r})\n"
        "print(all(sys.modules[m] is before[m] for m in before if m.startswith('kubernetes')))"
    )
    assert out == "True"


def _kubeconfig(tmp_path: Path) -> Path:
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
    return kubeconfig


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
        "import kubernetes, kubernetes.watch\n"
        "from kubernetes import client\n"
        "import kubernetes.client.models as models\n"
        "print(client.CoreV1Api.__name__, models.V1Pod.__name__, kubernetes.__version__.split('.')[0], "
        "kubernetes.watch.Watch.__name__, all(isinstance(sys.modules[m], types.ModuleType) "
        "for m in sys.modules if m.startswith('kubernetes')))"
    )
    assert out.splitlines() == ["ctx", "CoreV1Api V1Pod 35 Watch True"]
