"""The removed-API classification over manifest files: every removal since 1.16, several targets,
deprecated-but-served objects, multi-document files, `List` kinds, and the file and line of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.checks import apidata
from bot.core.checks.apis import API_DEPRECATED, API_REMOVED, API_UNREADABLE, manifest_findings
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding
from bot.errors import UserError

DATA = apidata.schema_data()
REMOVALS = apidata.removals_known()
TARGETS = ["1.16", "1.21", "1.22", "1.24", "1.25", "1.26", "1.27", "1.29", "1.32", f"1.{DATA.last}"]


def _manifest(kind: str, api_version: str, name: str) -> str:
    return f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n"


@pytest.fixture(scope="module")
def every_removal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """One multi-document file with an object on every removed group-version-kind; name → line."""
    docs, lines, line = [], {}, 1
    for i, status in enumerate(REMOVALS):
        name = f"obj-{i}"
        docs.append(_manifest(status.kind, status.group_version, name))
        lines[name] = line
        line += 5  # four lines of object and one `---`
    path = tmp_path_factory.mktemp("manifests") / "all.yaml"
    path.write_text("---\n".join(docs))
    return path, lines


def _where(findings: list[Finding]) -> dict[str, Finding]:
    return {obj: f for f in findings for obj in f.objects}


def test_the_data_covers_1_25_to_the_newest_release_and_names_its_version() -> None:
    assert DATA.first == 25
    assert DATA.last is not None
    assert DATA.last >= 37
    assert DATA.package_version
    assert (
        f"kubernetes-validate {DATA.package_version} (schemas 1.25–1.{DATA.last})" in apidata.describe_data()
    )


def test_every_removal_in_the_kubernetes_facts_is_known() -> None:
    known = {(s.group_version, s.kind): s.removed_in for s in REMOVALS}
    expected = {
        ("extensions/v1beta1", "Deployment"): 16,
        ("apps/v1beta1", "Deployment"): 16,
        ("apps/v1beta2", "DaemonSet"): 16,
        ("extensions/v1beta1", "NetworkPolicy"): 16,
        ("extensions/v1beta1", "Ingress"): 22,
        ("networking.k8s.io/v1beta1", "Ingress"): 22,
        ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"): 22,
        ("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration"): 22,
        ("rbac.authorization.k8s.io/v1beta1", "ClusterRole"): 22,
        ("batch/v1beta1", "CronJob"): 25,
        ("policy/v1beta1", "PodDisruptionBudget"): 25,
        ("policy/v1beta1", "PodSecurityPolicy"): 25,
        ("discovery.k8s.io/v1beta1", "EndpointSlice"): 25,
        ("events.k8s.io/v1beta1", "Event"): 25,
        ("autoscaling/v2beta1", "HorizontalPodAutoscaler"): 25,
        ("autoscaling/v2beta2", "HorizontalPodAutoscaler"): 26,
        ("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema"): 26,
        ("storage.k8s.io/v1beta1", "CSIStorageCapacity"): 27,
        ("flowcontrol.apiserver.k8s.io/v1beta2", "PriorityLevelConfiguration"): 29,
        ("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema"): 32,
        # alpha group-versions gone before the data starts (1.25)
        ("auditregistration.k8s.io/v1alpha1", "AuditSink"): 19,
        ("settings.k8s.io/v1alpha1", "PodPreset"): 20,
        ("batch/v2alpha1", "CronJob"): 21,
        ("discovery.k8s.io/v1alpha1", "EndpointSlice"): 21,
        ("flowcontrol.apiserver.k8s.io/v1alpha1", "FlowSchema"): 21,
        ("rbac.authorization.k8s.io/v1alpha1", "ClusterRole"): 22,
        ("rbac.authorization.k8s.io/v1alpha1", "RoleBinding"): 22,
        ("scheduling.k8s.io/v1alpha1", "PriorityClass"): 22,
        ("node.k8s.io/v1alpha1", "RuntimeClass"): 22,
        ("storage.k8s.io/v1alpha1", "CSIStorageCapacity"): 24,
    }
    assert {k: known.get(k) for k in expected} == expected
    # Every release from 1.16 to the newest the data covers is walked; these removed something.
    assert {16, 22, 25, 26, 27, 29, 32} <= {s.removed_in for s in REMOVALS}


@pytest.mark.parametrize("target", TARGETS)
def test_every_object_on_a_removed_api_is_named_with_its_release_and_replacement(
    every_removal: tuple[Path, dict[str, int]], target: str
) -> None:
    path, lines = every_removal
    minor = int(target.split(".")[1])
    where = _where(manifest_findings([path], target))
    for i, status in enumerate(REMOVALS):
        name = f"obj-{i}"
        obj = f"{path}:{lines[name]} {status.kind} {name}"
        assert status.removed_in is not None
        if minor >= status.removed_in:
            finding = where[obj]
            assert finding.id == API_REMOVED
            assert finding.severity == REQUIRED
            assert f"{status.group_version} {status.kind}: removed in 1.{status.removed_in}" in finding.title
            # The replacement named is one the target serves.
            now = apidata.served(status.group_version, status.kind, minor)
            if now.replacement:
                assert f"use {now.replacement}" in finding.title
            if now.replacement and not now.replacement.startswith("nothing"):
                gv, kind = now.replacement.split(" ")
                replacement = apidata.served(gv, kind, minor).state
                if minor >= 25:
                    assert replacement in (apidata.SERVED, apidata.DEPRECATED)
                else:  # before the data starts only the table answers, and it lists removals
                    assert replacement != apidata.REMOVED
        elif obj in where:
            # Still served at the target: at most a recommendation, never "removed".
            finding = where[obj]
            assert finding.id == API_DEPRECATED
            assert finding.severity == RECOMMENDED
            assert "removed" not in finding.title
            assert f"unavailable from 1.{status.removed_in}" in finding.title


@pytest.mark.parametrize("target", ["1.22", "1.24", "1.25", "1.30", f"1.{DATA.last}"])
def test_an_rbac_v1alpha1_cluster_role_is_removed_from_1_22_on(tmp_path: Path, target: str) -> None:
    (tmp_path / "rbac.yaml").write_text(
        _manifest("ClusterRole", "rbac.authorization.k8s.io/v1alpha1", "reader")
    )
    [finding] = manifest_findings([tmp_path], target)
    assert finding.id == API_REMOVED
    assert finding.severity == REQUIRED
    assert "rbac.authorization.k8s.io/v1alpha1 ClusterRole: removed in 1.22" in finding.title
    assert "use rbac.authorization.k8s.io/v1 ClusterRole" in finding.title


def test_an_rbac_v1alpha1_cluster_role_is_deprecated_before_1_22(tmp_path: Path) -> None:
    (tmp_path / "rbac.yaml").write_text(
        _manifest("ClusterRole", "rbac.authorization.k8s.io/v1alpha1", "reader")
    )
    [finding] = manifest_findings([tmp_path], "1.21")
    assert finding.id == API_DEPRECATED
    assert "unavailable from 1.22" in finding.title


def test_a_removal_has_a_replacement_unless_it_had_none() -> None:
    missing = [(s.group_version, s.kind) for s in REMOVALS if not s.replacement]
    # Only alpha APIs may go without a successor in the data.
    assert all("alpha" in gv for gv, _ in missing), missing
    psp = apidata.served("policy/v1beta1", "PodSecurityPolicy", 25)
    assert "Pod Security Admission" in psp.replacement


@pytest.mark.parametrize(
    ("target", "api_version", "kind", "until"),
    [
        ("1.24", "policy/v1beta1", "PodDisruptionBudget", 25),
        ("1.21", "batch/v1beta1", "CronJob", 25),
        ("1.19", "networking.k8s.io/v1beta1", "Ingress", 22),
        ("1.25", "autoscaling/v2beta2", "HorizontalPodAutoscaler", 26),
        ("1.29", "flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", 32),
        ("1.36", "storage.k8s.io/v1beta1", "VolumeAttributesClass", 37),
    ],
)
def test_deprecated_but_served_says_so_without_removed(
    tmp_path: Path, target: str, api_version: str, kind: str, until: int
) -> None:
    (tmp_path / "app.yaml").write_text(_manifest(kind, api_version, "x"))
    [finding] = manifest_findings([tmp_path], target)
    assert finding.id == API_DEPRECATED
    assert finding.severity == RECOMMENDED
    assert "removed" not in finding.title.lower()
    assert "deprecated" in finding.title
    assert f"still served in {target}" in finding.title
    assert f"unavailable from 1.{until}" in finding.title


def test_served_and_custom_kinds_are_not_findings(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(
        _manifest("Deployment", "apps/v1", "web")
        + "---\n"
        + _manifest("Certificate", "cert-manager.io/v1", "tls")
        + "---\n"
        + _manifest("FlowSchema", "flowcontrol.apiserver.k8s.io/v1beta3", "fs")
    )
    # flowcontrol v1beta3 is served in 1.26 and its replacement (v1) is not yet: not deprecated.
    assert manifest_findings([tmp_path / "ok.yaml"], "1.26") == []


def test_multi_document_files_list_kinds_and_directories_give_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "nested" / ".git").mkdir(parents=True)
    (tmp_path / "nested" / ".git" / "old.yaml").write_text(
        _manifest("Ingress", "extensions/v1beta1", "hidden")
    )
    (tmp_path / "nested" / "notes.txt").write_text(
        _manifest("Ingress", "extensions/v1beta1", "not-yaml-file")
    )
    (tmp_path / "nested" / "app.yml").write_text(
        "# a comment first\n"
        "---\n"
        "apiVersion: v1\n"
        "kind: List\n"
        "items:\n"
        "  - apiVersion: networking.k8s.io/v1beta1\n"  # line 6
        "    kind: Ingress\n"
        "    metadata: {name: web, namespace: shop}\n"
        "  - kind: CronJob\n"  # line 9: keys in any order
        "    metadata: {name: nightly}\n"
        "    apiVersion: batch/v1beta1\n"
        "---\n"
        "---\n"
        "apiVersion: policy/v1beta1\n"  # line 14
        "kind: PodDisruptionBudget\n"
        "metadata:\n"
        "  name: api\n"
        "  namespace: shop\n"
    )
    (tmp_path / "b.json").write_text(
        '{"apiVersion": "v1", "kind": "PodList", "items": [\n'
        '  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},\n'
        '  {"apiVersion": "apps/v1beta2", "kind": "Deployment", "metadata": {"name": "d"}}]}\n'
    )
    where = _where(manifest_findings([tmp_path], "1.25"))
    app, b = tmp_path / "nested" / "app.yml", tmp_path / "b.json"
    assert sorted(where) == sorted(
        [
            f"{app}:6 Ingress shop/web",
            f"{app}:9 CronJob nightly",
            f"{app}:14 PodDisruptionBudget shop/api",
            f"{b}:3 Deployment d",
        ]
    )
    assert "removed in 1.22" in where[f"{app}:6 Ingress shop/web"].title
    assert "removed in 1.16" in where[f"{b}:3 Deployment d"].title
    # A file named explicitly is read whatever its name.
    named = _where(manifest_findings([tmp_path / "nested" / "notes.txt"], "1.25"))
    assert list(named) == [f"{tmp_path / 'nested' / 'notes.txt'}:1 Ingress not-yaml-file"]


def test_a_file_that_is_not_yaml_is_named_and_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "chart.yaml").write_text("apiVersion: v2\nname: {{ .Values.name }\n")
    (tmp_path / "old.yaml").write_text(_manifest("PodSecurityPolicy", "policy/v1beta1", "psp"))
    findings = manifest_findings([tmp_path], "1.25")
    assert [f.id for f in findings] == [API_REMOVED, API_UNREADABLE]
    # Said where the Helm template's `{{` opened, in plain words, not where the parser gave up.
    assert (
        findings[1]
        .objects[0]
        .startswith(f"{tmp_path / 'chart.yaml'}:2:7: not YAML: this `{{` is never closed")
    )
    with pytest.raises(UserError, match="no such file"):
        manifest_findings([tmp_path / "missing.yaml"], "1.25")
    with pytest.raises(UserError, match="not a Kubernetes version"):
        manifest_findings([tmp_path], "latest")
