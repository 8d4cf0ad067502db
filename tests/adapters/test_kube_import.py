"""The kube adapter imports only the parts of the `kubernetes` client it uses, and the package stays
whole for anyone who asks for more (each test in a fresh interpreter: imports are process-wide)."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_adapter_imports_no_api_group_and_no_model_class() -> None:
    out = run(
        "import sys, bot.adapters.kube\n"
        "print(sorted(m for m in sys.modules if m.startswith(('kubernetes.client.api.', "
        "'kubernetes.client.models.', 'kubernetes.dynamic', 'kubernetes_validate'))))"
    )
    assert out == "[]"


def test_the_rest_of_the_package_is_imported_on_first_use() -> None:
    out = run(
        "import bot.adapters.kube\n"
        "from kubernetes import client\n"
        "import kubernetes, kubernetes.watch, kubernetes.client.models as models\n"
        "print(client.CoreV1Api.__name__, models.V1Pod.__name__, kubernetes.__version__ != '', "
        "type(kubernetes).__name__, type(client).__name__)"
    )
    assert out == "CoreV1Api V1Pod True module module"


def test_a_package_imported_whole_first_is_left_as_it_is() -> None:
    out = run(
        "import kubernetes, sys\n"
        "before = dict(sys.modules)\n"
        "import bot.adapters.kube\n"
        "print(all(sys.modules[m] is before[m] for m in before if m.startswith('kubernetes')))"
    )
    assert out == "True"
