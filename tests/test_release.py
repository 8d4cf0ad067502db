"""scripts/release (issue 44 item 5): the wheel, the sdist, the chart package, a CycloneDX SBOM of
requirements.lock and their checksums, built here; the packaged chart installs on the real
control plane (`helm install --dry-run=server`). Nothing is pushed anywhere."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.utils import canonicalize_name

from tests.support.helm import CHART, run_helm
from tests.support.testbed import RealCluster

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
CHART_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))["version"]
ARTIFACTS = [
    f"upgrade_bot-{VERSION}-py3-none-any.whl",
    f"upgrade_bot-{VERSION}.tar.gz",
    f"upgrade-bot-{CHART_VERSION}.tgz",
    f"upgrade-bot-{VERSION}.cdx.json",
]


#: The tests that only read `release` run on one worker under `--dist loadgroup`, one after the
#: other: a module-scoped fixture is made again each time a worker comes back to the module (the
#: release was built four times, 6 s each). The chart's install is the control plane's.
SHARES_THE_RELEASE = pytest.mark.xdist_group("release")


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, helm: Path) -> Path:
    out = tmp_path_factory.mktemp("release")
    done = subprocess.run(
        [str(ROOT / "scripts" / "release"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (ROOT / "build").exists()  # built from a copy: nothing lands in the checkout
    return out


@SHARES_THE_RELEASE
def test_the_release_holds_the_five_artifacts_and_their_checksums_match(release: Path) -> None:
    assert sorted(p.name for p in release.iterdir()) == sorted([*ARTIFACTS, "SHA256SUMS"])
    sums = {}
    for line in (release / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ")
        sums[name] = digest
    assert sorted(sums) == sorted(ARTIFACTS)
    for name, digest in sums.items():
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest, name
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=release, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@SHARES_THE_RELEASE
def test_the_wheel_and_sdist_carry_the_bot_its_templates_and_its_licence(release: Path) -> None:
    wheel = zipfile.ZipFile(release / ARTIFACTS[0]).namelist()
    assert "bot/frontdoor/cli/__init__.py" in wheel
    assert "bot/templates/plans/plan.schema.json" in wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel)
    with tarfile.open(release / ARTIFACTS[1]) as sdist:
        names = sdist.getnames()
    top = f"upgrade_bot-{VERSION}"
    assert {f"{top}/pyproject.toml", f"{top}/LICENSE", f"{top}/templates/plans/plan.schema.json"} <= set(
        names
    )


@SHARES_THE_RELEASE
def test_the_chart_package_is_the_chart_with_its_schema_and_dashboard(release: Path, helm: Path) -> None:
    with tarfile.open(release / ARTIFACTS[2]) as chart:
        names = set(chart.getnames())
        meta = yaml.safe_load(chart.extractfile("upgrade-bot/Chart.yaml").read())  # type: ignore[union-attr]
    assert {
        "upgrade-bot/values.schema.json",
        "upgrade-bot/dashboards/upgrade-bot.json",
        "upgrade-bot/templates/dashboard.yaml",
    } <= names
    assert meta["appVersion"] == VERSION  # the image tag defaults to it
    shown = run_helm(helm, "show", "chart", str(release / ARTIFACTS[2]))
    assert shown.returncode == 0, shown.stderr
    assert f"version: {CHART_VERSION}" in shown.stdout


@SHARES_THE_RELEASE
def test_the_sbom_is_valid_cyclonedx_listing_every_locked_package_with_its_hashes(release: Path) -> None:
    text = (release / ARTIFACTS[3]).read_text(encoding="utf-8")
    # The schema cyclonedx-python-lib ships (strict: no property outside the specification), by the
    # release tools' own Python (scripts/release installs them apart from the dev environment).
    [tools] = (ROOT / ".cache" / "release-tools").glob("cyclonedx-bom-*/bin/python")
    validator = ROOT / "scripts" / "release-validate-sbom"
    checked = subprocess.run(
        [str(tools), str(validator), str(release / ARTIFACTS[3])], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    # ... and the validator refuses what the specification does not allow.
    broken = release.parent / "broken.cdx.json"
    broken.write_text(text.replace('"bomFormat"', '"bomFormatX"', 1), encoding="utf-8")
    refused = subprocess.run(
        [str(tools), str(validator), str(broken)], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert "is not valid CycloneDX 1.6" in refused.stderr
    bom = yaml.safe_load(text)
    assert bom["bomFormat"] == "CycloneDX"
    assert bom["specVersion"] == "1.6"
    root = bom["metadata"]["component"]
    assert (root["name"], root["version"], root["type"]) == ("upgrade-bot", VERSION, "application")
    assert root["licenses"][0]["license"]["id"] == "Apache-2.0"
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    pinned = {
        canonicalize_name(line.split("==")[0]): line.split("==")[1].split()[0]
        for line in lock.splitlines()
        if line and not line[0].isspace() and "==" in line and not line.startswith("#")
    }
    listed = {canonicalize_name(c["name"]): c for c in bom["components"]}
    assert {name: c["version"] for name, c in listed.items()} == pinned
    for name, component in listed.items():
        assert component["purl"] == f"pkg:pypi/{name}@{pinned[name]}", name
        hashes = [h for ref in component["externalReferences"] for h in ref.get("hashes", [])]
        assert hashes, name
        assert all(h["alg"] == "SHA-256" for h in hashes)
    # What ships: the progress bars' tqdm, never rich (issue 44 item 7), nor the dev tools.
    assert "tqdm" in listed
    assert not {"rich", "pygments", "pytest", "uv"} & set(listed)


@pytest.mark.testbed
def test_the_packaged_chart_installs_on_the_real_control_plane(
    release: Path, helm: Path, real_cluster: RealCluster
) -> None:
    namespace = "upgrade-bot-release"
    real_cluster.kubectl("create", "namespace", namespace, check=False)
    env_kubeconfig = ["--kubeconfig", str(real_cluster.kubeconfig)]
    installed = run_helm(
        helm,
        "install",
        "ub",
        str(release / ARTIFACTS[2]),
        "--dry-run=server",
        "--namespace",
        namespace,
        *env_kubeconfig,
        "--set",
        "existingSecret=upgrade-bot-slack",
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "config.channels.operations=C0UPGRADES",
    )
    assert installed.returncode == 0, installed.stderr
    # The server accepted every object (a dry run persists nothing); the image follows appVersion.
    assert "STATUS: pending-install" in installed.stdout
    objects = [
        d for d in yaml.safe_load_all(installed.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]) if d
    ]
    kinds = sorted({o["kind"] for o in objects})
    assert {"ConfigMap", "Deployment", "ServiceAccount", "ClusterRole", "PersistentVolumeClaim"} <= set(kinds)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"upgrade-bot:{VERSION}"
    assert real_cluster.kubectl("get", "deployments", "-n", namespace, "-o", "name").stdout.strip() == ""
