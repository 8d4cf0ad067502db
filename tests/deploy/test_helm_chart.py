"""deploy/helm/upgrade-bot with the real helm: lint, render both modes and the read-only switch,
and apply what it renders to the real control plane with a server-side dry run.

The ServiceMonitor's CRD is not installed on the testbed, so it is checked rendered only.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.settings import load_settings
from tests.support.backends import RBAC
from tests.support.helm import CHART, render, run_helm
from tests.support.testbed import RealCluster

SECRET = "existingSecret=upgrade-bot-slack"
POSTGRES = "config.database_url=postgresql://upgrade-bot@postgres.db.svc/upgrade_bot"
HTTP = ["mode=http", "ingress.enabled=true", "ingress.className=nginx"]
VARIANTS = {
    "socket-sqlite": [SECRET],
    "socket-postgres-monitored": [SECRET, POSTGRES, "serviceMonitor.enabled=true"],
    "http-postgres-ingress": [SECRET, POSTGRES, *HTTP],
    "http-read-only": [SECRET, "mode=http", "readOnly=true"],
}


def by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds


def deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = by_kind(objects)["Deployment"]
    return found


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = deployment(objects)["spec"]["template"]["spec"]["containers"]
    return found


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_helm_lint_passes_strictly(helm: Path, variant: str) -> None:
    sets = [arg for value in VARIANTS[variant] for arg in ("--set", value)]
    result = run_helm(helm, "lint", "--strict", str(CHART), *sets)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_socket_mode_with_sqlite_runs_one_replica_on_a_volume_with_no_service(helm: Path) -> None:
    _, objects = render(helm, VARIANTS["socket-sqlite"])
    kinds = by_kind(objects)
    assert "Service" not in kinds
    assert "Ingress" not in kinds
    assert "ServiceMonitor" not in kinds
    spec = deployment(objects)["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    (claim,) = kinds["PersistentVolumeClaim"]
    volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    c = container(objects)
    assert "--http" not in c["args"]
    assert c["args"][:2] == ["--health-port", "9090"]
    assert c["envFrom"] == [{"secretRef": {"name": "upgrade-bot-slack"}}]
    # Socket Mode's only HTTP port carries the probes.
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert [p["name"] for p in c["ports"]] == ["health"]
    (config_map,) = kinds["ConfigMap"]
    assert yaml.safe_load(config_map["data"]["upgrade-bot.yaml"])["data_dir"] == "/data"


def test_postgresql_defaults_to_two_replicas_without_a_volume(helm: Path) -> None:
    _, objects = render(helm, [SECRET, POSTGRES])
    assert deployment(objects)["spec"]["replicas"] == 2
    assert "strategy" not in deployment(objects)["spec"]
    assert "PersistentVolumeClaim" not in by_kind(objects)
    assert [m["mountPath"] for m in container(objects)["volumeMounts"]] == ["/config", "/tmp"]


def test_more_than_one_replica_on_sqlite_is_refused_by_name(helm: Path) -> None:
    sets = ["--set", SECRET, "--set", "replicas=2"]
    result = run_helm(helm, "template", "ub", str(CHART), *sets)
    assert result.returncode != 0
    assert "replicas > 1 needs config.database_url: postgresql://" in result.stderr


def test_a_missing_secret_is_refused_by_name(helm: Path) -> None:
    result = run_helm(helm, "template", "ub", str(CHART))
    assert result.returncode != 0
    assert "existingSecret: the Secret holding SLACK_BOT_TOKEN" in result.stderr


def test_http_mode_has_a_service_and_an_ingress_for_slacks_endpoint_only(helm: Path) -> None:
    _, objects = render(helm, VARIANTS["http-postgres-ingress"])
    kinds = by_kind(objects)
    (service,) = kinds["Service"]
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {"http": "http"}
    (ingress,) = kinds["Ingress"]
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/slack/events", "Exact")
    assert path["backend"]["service"]["port"] == {"name": "http"}
    c = container(objects)
    assert c["args"][:3] == ["--http", "--port", "3000"]
    assert "--health-port" not in c["args"]  # probes and /metrics are on the HTTP port
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_the_pod_is_restricted_and_never_blocks_a_drain(helm: Path) -> None:
    _, objects = render(helm, VARIANTS["socket-sqlite"])
    pod = deployment(objects)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's user
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objects)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container(objects)["resources"]["limits"]["memory"]
    (pdb,) = by_kind(objects)["PodDisruptionBudget"]
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "selector": deployment(objects)["spec"]["selector"],
    }


def _rules(objects: list[dict[str, Any]], suffix: str) -> list[dict[str, Any]]:
    (role,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith(suffix)]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_the_roles_are_deploy_rbac_yaml_and_read_only_binds_the_read_role_alone(helm: Path) -> None:
    documents = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    _, full = render(helm, [SECRET])
    for suffix in ("-read", "-act"):
        (expected,) = [
            d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(suffix)
        ]
        assert _rules(full, suffix) == expected["rules"]
    bindings = {b["roleRef"]["name"]: b for b in by_kind(full)["ClusterRoleBinding"]}
    assert set(bindings) == {"ub-upgrade-bot-read", "ub-upgrade-bot-act"}
    for binding in bindings.values():
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "ub-upgrade-bot", "namespace": "upgrade-bot"}
        ]

    _, read_only = render(helm, VARIANTS["http-read-only"])
    assert [r["metadata"]["name"] for r in by_kind(read_only)["ClusterRole"]] == ["ub-upgrade-bot-read"]
    assert [b["roleRef"]["name"] for b in by_kind(read_only)["ClusterRoleBinding"]] == ["ub-upgrade-bot-read"]


def test_the_service_monitor_scrapes_the_health_port_in_socket_mode(helm: Path) -> None:
    _, objects = render(helm, VARIANTS["socket-postgres-monitored"])
    kinds = by_kind(objects)
    (monitor,) = kinds["ServiceMonitor"]
    (service,) = kinds["Service"]  # Socket Mode: a Service for the scrape only
    assert [p["name"] for p in service["spec"]["ports"]] == ["health"]
    assert monitor["spec"]["endpoints"] == [{"port": "health", "path": "/metrics", "interval": "30s"}]
    labels = service["metadata"]["labels"]
    assert all(labels[k] == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())


def test_the_rendered_configuration_is_one_the_bot_accepts(helm: Path, tmp_path: Path) -> None:
    _, objects = render(
        helm,
        [SECRET, "config.channels.operations=C0UPGRADES", "config.roster.primary[0]=U0PRIMARY"],
    )
    (config_map,) = by_kind(objects)["ConfigMap"]
    path = tmp_path / "upgrade-bot.yaml"
    path.write_text(config_map["data"]["upgrade-bot.yaml"], encoding="utf-8")
    settings = load_settings(path, {})
    assert settings.database_url == "sqlite:////data/upgrade-bot.db"
    assert list(settings.clusters) == ["this-cluster"]
    assert settings.clusters["this-cluster"].in_cluster is True
    assert settings.channels.operations == "C0UPGRADES"


@pytest.mark.testbed
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_rendered_objects_pass_a_server_side_dry_run(
    helm: Path, real_cluster: RealCluster, tmp_path: Path, variant: str
) -> None:
    namespace = "upgrade-bot-chart"
    real_cluster.kubectl("create", "namespace", namespace, check=False)
    _, objects = render(helm, VARIANTS[variant], namespace=namespace)
    applied = [o for o in objects if o["kind"] != "ServiceMonitor"]  # no CRD on the testbed
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(applied), encoding="utf-8")
    result = real_cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(manifest), check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(applied)
    assert all(line.endswith("(server dry run)") for line in lines), result.stdout


def test_in_http_mode_the_service_monitor_scrapes_the_http_port(helm: Path) -> None:
    _, objects = render(helm, [SECRET, "mode=http", "serviceMonitor.enabled=true"])
    (monitor,) = by_kind(objects)["ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["port"] == "http"


def test_the_chart_runs_the_version_this_checkout_builds() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((CHART.parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == project["version"]  # the image tag defaults to it
