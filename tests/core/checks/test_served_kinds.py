"""The shipped table of served kinds (bot/core/checks/served_kinds.json), as apidata reads it.
tests/test_packaging.py checks that regenerating it changes nothing."""

from __future__ import annotations

import json
from importlib.metadata import version

from bot.core.checks import apidata


def test_the_file_names_its_source_and_the_version_it_was_made_from() -> None:
    doc = json.loads(apidata.DATA_FILE.read_text(encoding="utf-8"))
    assert doc["source"] == "kubernetes-validate"
    assert doc["version"] == version("kubernetes-validate")
    assert doc["generated_by"] == "scripts/gen_apidata.py"
    data = apidata.schema_data()
    assert data.package_version == doc["version"]
    assert ("apps", "v1", "Deployment") in data.served[25]
    assert ("policy", "v1beta1", "PodDisruptionBudget") not in data.served[25]
    assert ("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema") in data.served[31]
    assert ("flowcontrol.apiserver.k8s.io", "v1beta3", "FlowSchema") not in data.served[32]
