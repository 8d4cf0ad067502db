"""deploy/helm/upgrade-bot with the real helm: lint, render both modes and the read-only switch,
the chart-testing values under ci/, validate what it renders against the Kubernetes schemas
(kubernetes-validate, the dev group's), and apply it to the real control plane with a
server-side dry run.

The ServiceMonitor's and PrometheusRule's CRDs are not installed on the testbed, so they are
checked rendered only (the rules' series against the bot's own exposition).
"""

from __future__ import annotations

import json
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot.adapters.store import Store
from bot.core.gauges import read_now
from bot.frontdoor.metrics import Metrics
from bot.settings import load_settings
from tests.support.backends import RBAC
from tests.support.helm import CHART, render, run_helm
from tests.support.testbed import RealCluster

SECRET = "existingSecret=upgrade-bot-slack"
POSTGRES = "config.database_url=postgresql://upgrade-bot@postgres.db.svc/upgrade_bot"
HTTP = ["mode=http", "ingress.enabled=true", "ingress.className=nginx"]
VARIANTS = {
    "socket-sqlite": [SECRET],
    "socket-postgres-monitored": [
        SECRET,
        POSTGRES,
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
    ],
    "http-postgres-ingress": [SECRET, POSTGRES, *HTTP],
    "http-read-only": [SECRET, "mode=http", "readOnly=true"],
}


#: The Prometheus Operator's kinds the chart may render.
CRD_KINDS = frozenset({"ServiceMonitor", "PrometheusRule"})
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
#: The chart's kubeVersion floor and the newest release the schemas know.
KUBE_VERSIONS = ("1.25", kubernetes_validate.utils.latest_version())


def ci(name: str) -> list[str]:
    """`helm` arguments for one ci/ values file."""
    return ["-f", str(CHART / "ci" / name)]


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


def test_chart_testing_finds_values_files_that_lint_and_render() -> None:
    assert [p.name for p in CI_VALUES] == ["ha-values.yaml", "socket-values.yaml"]


@pytest.mark.parametrize("values", [p.name for p in CI_VALUES])
def test_each_ci_values_file_lints_strictly_and_renders_objects_that_validate(
    helm: Path, values: str
) -> None:
    linted = run_helm(helm, "lint", "--strict", str(CHART), *ci(values))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    _, objects = render_args(helm, ci(values))
    assert deployment(objects)
    _validate(objects)


def _validate(objects: list[dict[str, Any]]) -> None:
    """Each object against the schemas of the oldest release the chart supports and the newest,
    strictly (an unknown field is an error): what `kubectl apply` would reject, found offline."""
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue  # a CRD's kind: not in Kubernetes' schemas
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_renders_objects_that_validate(helm: Path, variant: str) -> None:
    _validate(render(helm, VARIANTS[variant])[1])


def render_args(helm: Path, args: list[str]) -> tuple[str, list[dict[str, Any]]]:
    result = run_helm(helm, "template", "ub", str(CHART), "--namespace", "upgrade-bot", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout, [d for d in yaml.safe_load_all(result.stdout) if d]


def test_the_ha_values_spread_replicas_and_wire_every_extra(helm: Path) -> None:
    _, objects = render_args(helm, ci("ha-values.yaml"))
    kinds = by_kind(objects)
    spec = deployment(objects)["spec"]
    assert spec["replicas"] == 3
    pod = spec["template"]["spec"]
    selector = spec["selector"]["matchLabels"]
    # Soft: never two on the node the bot may be draining, nor all in one zone, when it can.
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"] == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert spec["template"]["metadata"]["labels"]["team"] == "platform"
    assert spec["template"]["metadata"]["annotations"]["example.com/owner"] == "platform"
    c = container(objects)
    assert c["image"] == (
        "registry.example.com/mirror/upgrade-bot@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    )
    assert {"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"} in c["env"]
    assert c["envFrom"][1] == {"configMapRef": {"name": "upgrade-bot-proxy"}}
    assert {"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": True} in c["volumeMounts"]
    assert {"name": "ca", "configMap": {"name": "corporate-ca"}} in pod["volumes"]
    # extraObjects are rendered as templates.
    proxy = [o for o in kinds["ConfigMap"] if o["metadata"]["name"] == "upgrade-bot-proxy"]
    assert proxy[0]["metadata"]["labels"] == {"app.kubernetes.io/instance": "ub"}
    # The opt-in roles are bound when asked for.
    bound = {b["roleRef"]["name"] for b in kinds["ClusterRoleBinding"]}
    assert {"ub-upgrade-bot-pod-logs", "ub-upgrade-bot-pod-delete"} <= bound
    (policy,) = kinds["NetworkPolicy"]
    assert policy["spec"]["policyTypes"] == ["Egress"]
    ports = [sorted(p["port"] for p in rule["ports"]) for rule in policy["spec"]["egress"]]
    assert ports == [[53, 53], [443], [443, 6443], [5432]]
    assert policy["spec"]["egress"][2]["to"] == [{"ipBlock": {"cidr": "10.0.0.0/16"}}]


def test_one_replica_gets_no_spread_rule_and_a_given_affinity_wins(helm: Path) -> None:
    pod = deployment(render(helm, [SECRET])[1])["spec"]["template"]["spec"]
    assert "affinity" not in pod
    assert "topologySpreadConstraints" not in pod
    given = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
    _, objects = render(
        helm,
        [SECRET, POSTGRES, f"{given}.key=pool", f"{given}.operator=In", f"{given}.values[0]=system"],
    )
    pod = deployment(objects)["spec"]["template"]["spec"]
    assert set(pod["affinity"]) == {"nodeAffinity"}
    assert pod["topologySpreadConstraints"]  # still spread over zones


def test_an_openshift_style_empty_pod_security_context_renders_none(helm: Path) -> None:
    result = run_helm(
        helm, "template", "ub", str(CHART), "--set", SECRET, "--set-json", "podSecurityContext={}"
    )
    assert result.returncode == 0, result.stderr
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    pod = deployment(objects)["spec"]["template"]["spec"]
    assert "securityContext" not in pod  # the SCC assigns the UID and fsGroup
    # The container's stays restricted (OpenShift's restricted-v2 accepts it).
    assert container(objects)["securityContext"]["allowPrivilegeEscalation"] is False
    assert "runAsUser" not in container(objects)["securityContext"]
    _validate(objects)
    # A replacement map is used whole, not merged with the default.
    result = run_helm(
        helm, "template", "ub", str(CHART), "--set", SECRET,
        "--set-json", 'podSecurityContext={"runAsNonRoot":true}',
    )  # fmt: skip
    pod = deployment([d for d in yaml.safe_load_all(result.stdout) if d])["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True}


def test_names_image_and_probe_timings_come_from_values(helm: Path) -> None:
    _, objects = render(
        helm,
        [
            SECRET,
            "nameOverride=chatops",
            "image.registry=registry.example.com/",
            "image.tag=1.2.3",
            "probes.liveness.periodSeconds=30",
            "probes.startup.failureThreshold=60",
        ],
    )
    d = deployment(objects)
    assert d["metadata"]["name"] == "ub-chatops"
    assert d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "chatops"
    c = container(objects)
    assert c["image"] == "registry.example.com/upgrade-bot:1.2.3"
    assert c["livenessProbe"]["periodSeconds"] == 30
    assert c["startupProbe"]["failureThreshold"] == 60
    _, objects = render(helm, [SECRET, "fullnameOverride=bot"])
    assert deployment(objects)["metadata"]["name"] == "bot"
    assert {o["metadata"]["name"] for o in by_kind(objects)["ClusterRole"]} == {"bot-read", "bot-act"}


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("replica=2", "additional properties 'replica' not allowed"),
        ("mode=websocket", "/mode"),
        ("image.digest=latest", "/image/digest"),
        ("logLevel=LOUD", "/logLevel"),
        ("prometheusRule.escalationWindow=soon", "/prometheusRule/escalationWindow"),
    ],
)
def test_the_values_schema_refuses_a_typo_by_name(helm: Path, value: str, complaint: str) -> None:
    result = run_helm(helm, "template", "ub", str(CHART), "--set", SECRET, "--set", value)
    assert result.returncode != 0
    assert complaint in result.stderr


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
    assert c["args"][:5] == ["--http", "--port", "3000", "--health-port", "9090"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 3000, "health": 9090}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_probes_use_the_health_port_in_either_mode_so_slacks_port_cannot_fail_them(
    helm: Path, variant: str
) -> None:
    # Idle sockets or large bodies on Slack's port (issue 38) never reach the probes' own port.
    c = container(render(helm, VARIANTS[variant])[1])
    port = c["args"][c["args"].index("--health-port") + 1]
    assert {p["name"]: str(p["containerPort"]) for p in c["ports"]}["health"] == port
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert c[probe]["httpGet"] == {"path": path, "port": "health"}


def test_a_load_balancer_service_in_http_mode_never_publishes_the_health_port(helm: Path) -> None:
    _, objects = render(
        helm,
        [SECRET, "mode=http", "service.type=LoadBalancer", "serviceMonitor.enabled=true", "healthPort=8081"],
    )
    services = {s["metadata"]["name"]: s["spec"] for s in by_kind(objects)["Service"]}
    assert {name: (spec["type"], [p["name"] for p in spec["ports"]]) for name, spec in services.items()} == {
        "ub-upgrade-bot": ("LoadBalancer", ["http"]),
        "ub-upgrade-bot-health": ("ClusterIP", ["health"]),
    }
    assert services["ub-upgrade-bot-health"]["ports"][0]["port"] == 8081
    assert "--health-port" in container(objects)["args"]


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
    # The opt-in roles are neither defined nor bound by default.
    assert set(bindings) == {"ub-upgrade-bot-read", "ub-upgrade-bot-act"}
    (events,) = by_kind(full)["Role"]
    (expected_events,) = [d for d in documents if d["kind"] == "Role"]
    assert events["metadata"]["namespace"] == expected_events["metadata"]["namespace"] == "default"
    assert events["rules"] == expected_events["rules"]
    (events_binding,) = by_kind(full)["RoleBinding"]
    assert events_binding["roleRef"]["name"] == events["metadata"]["name"]
    _, opted = render(helm, [SECRET, "podLogs=true", "podDelete=true", "helmReleases=true"])
    for suffix in ("-pod-logs", "-pod-delete", "-helm-releases"):
        (expected,) = [
            d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(suffix)
        ]
        assert _rules(opted, suffix) == expected["rules"]
    assert len(by_kind(opted)["ClusterRoleBinding"]) == 5
    for binding in bindings.values():
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "ub-upgrade-bot", "namespace": "upgrade-bot"}
        ]

    _, read_only = render(helm, [*VARIANTS["http-read-only"], "podDelete=true"])
    assert [r["metadata"]["name"] for r in by_kind(read_only)["ClusterRole"]] == ["ub-upgrade-bot-read"]
    assert [b["roleRef"]["name"] for b in by_kind(read_only)["ClusterRoleBinding"]] == ["ub-upgrade-bot-read"]
    assert "Role" not in by_kind(read_only)  # nor the Events on nodes: a read-only bot cordons nothing


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
@pytest.mark.parametrize("variant", sorted(VARIANTS) + [p.name for p in CI_VALUES])
def test_the_rendered_objects_pass_a_server_side_dry_run(
    helm: Path, real_cluster: RealCluster, tmp_path: Path, variant: str
) -> None:
    namespace = "upgrade-bot-chart"
    real_cluster.kubectl("create", "namespace", namespace, check=False)
    if variant in VARIANTS:
        _, objects = render(helm, VARIANTS[variant], namespace=namespace)
    else:
        result = run_helm(helm, "template", "ub", str(CHART), "--namespace", namespace, *ci(variant))
        assert result.returncode == 0, result.stderr
        objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    applied = [o for o in objects if o["kind"] not in CRD_KINDS]  # no CRD on the testbed
    # The Role for Events on nodes names its namespace (`default`); the rest go to the release's.
    placed = [o for o in applied if o["metadata"].get("namespace")]
    lines: list[str] = []
    for group, args in (([o for o in applied if o not in placed], ["-n", namespace]), (placed, [])):
        if not group:
            continue
        manifest = tmp_path / f"rendered{len(args)}.yaml"
        manifest.write_text(yaml.safe_dump_all(group), encoding="utf-8")
        result = real_cluster.kubectl("apply", "--dry-run=server", *args, "-f", str(manifest), check=False)
        assert result.returncode == 0, result.stderr
        lines += result.stdout.splitlines()
    assert len(lines) == len(applied)
    assert all(line.endswith("(server dry run)") for line in lines), "\n".join(lines)


def test_in_http_mode_the_service_monitor_scrapes_the_health_port_on_a_cluster_ip_service(helm: Path) -> None:
    _, objects = render(helm, [SECRET, "mode=http", "serviceMonitor.enabled=true"])
    (monitor,) = by_kind(objects)["ServiceMonitor"]
    assert monitor["spec"]["endpoints"] == [{"port": "health", "path": "/metrics", "interval": "30s"}]
    # The one Service with a port of that name: one target per pod, not one per Service.
    with_health = [
        s for s in by_kind(objects)["Service"] if "health" in [p["name"] for p in s["spec"]["ports"]]
    ]
    assert [(s["metadata"]["name"], s["spec"]["type"]) for s in with_health] == [
        ("ub-upgrade-bot-health", "ClusterIP")
    ]


def test_the_chart_runs_the_version_this_checkout_builds() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((CHART.parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == project["version"]  # the image tag defaults to it


def test_the_chart_icon_is_the_charts_own_svg_inline() -> None:
    # No public host for an icon exists (nor a repository for `home`/`sources`, see Chart.yaml):
    # the icon is a data URL of icon.svg, so chart UIs show it without fetching anything.
    import base64
    import xml.etree.ElementTree as ET

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    prefix = "data:image/svg+xml;base64,"
    assert chart["icon"].startswith(prefix)
    svg = (CHART / "icon.svg").read_bytes()
    assert base64.b64decode(chart["icon"].removeprefix(prefix), validate=True) == svg
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("viewBox") == "0 0 64 64"


def test_the_prometheus_rule_alerts_on_the_series_the_bot_exports(helm: Path) -> None:
    assert "PrometheusRule" not in by_kind(render(helm, [SECRET])[1])  # opt-in
    _, objects = render(helm, VARIANTS["socket-postgres-monitored"] + ["prometheusRule.labels.release=kps"])
    kinds = by_kind(objects)
    (rule,) = kinds["PrometheusRule"]
    (service,) = kinds["Service"]
    assert rule["metadata"]["labels"]["release"] == "kps"
    (group,) = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert sorted(alerts) == [
        "UpgradeBotGateWaitingPastEscalation",
        "UpgradeBotLeaseLostRepeatedly",
        "UpgradeBotNoReadyReplica",
        "UpgradeBotSlackRateLimited",
    ]
    # Every series of the bot a rule reads is one the bot exports (a renamed metric fails here),
    # selected by the scrape's job (the Service's name) and the release's namespace.
    families = list(text_string_to_metric_families(Metrics().exposition().decode()))
    exported = {sample.name for family in families for sample in family.samples}
    for name, alert in alerts.items():
        expr = alert["expr"]
        for series in re.findall(r"\b(upgrade_bot_\w+)\{([^}]*)\}", expr):
            assert series[0] in exported, (name, series[0])
            assert series[1] == f'namespace="upgrade-bot", job="{service["metadata"]["name"]}"', name
        assert alert["labels"]["severity"] in ("critical", "warning")
        assert "{{" not in alert["annotations"]["description"]  # Helm rendered it; no Go template left
    no_replica = alerts["UpgradeBotNoReadyReplica"]["expr"]
    assert f'deployment="{deployment(objects)["metadata"]["name"]}"' in no_replica
    assert alerts["UpgradeBotNoReadyReplica"]["for"] == "5m"
    assert alerts["UpgradeBotSlackRateLimited"]["for"] == "10m"
    assert "[1h]" in alerts["UpgradeBotGateWaitingPastEscalation"]["expr"]


def _values_file(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "my-values.yaml"
    path.write_text(
        yaml.safe_dump({"existingSecret": "upgrade-bot-slack", "config": config}), encoding="utf-8"
    )
    return path


def test_a_typo_in_config_fails_helm_lint_and_install_with_the_schemas_message(
    helm: Path, tmp_path: Path
) -> None:
    """`config:` is validated against schemas/upgrade-bot.schema.json: a typo stops `helm lint`
    and `helm install`, naming the key, instead of installing a pod that crash-loops."""
    values = _values_file(
        tmp_path,
        {
            "clusters": {"prod": {"kubeconfig": "/etc/kube/config", "contxt": "prod"}},
            "channels": {"operations": "C0UPGRADES"},
        },
    )
    linted = run_helm(helm, "lint", str(CHART), "-f", str(values))
    assert linted.returncode != 0
    assert "/config/clusters/prod" in linted.stdout + linted.stderr
    assert "additional properties 'contxt' not allowed" in linted.stdout + linted.stderr
    installed = run_helm(helm, "install", "ub", str(CHART), "--dry-run=client", "-f", str(values))
    assert installed.returncode != 0
    assert "additional properties 'contxt' not allowed" in installed.stderr
    top = run_helm(helm, "template", "ub", str(CHART), "--set", SECRET, "--set", "config.timezon=UTC")
    assert top.returncode != 0
    assert "additional properties 'timezon' not allowed" in top.stderr


def test_the_example_configuration_as_config_passes_helm_lint(helm: Path, tmp_path: Path) -> None:
    example = yaml.safe_load((CHART.parents[2] / "upgrade-bot.example.yaml").read_text(encoding="utf-8"))
    values = _values_file(tmp_path, example)
    linted = run_helm(helm, "lint", "--strict", str(CHART), "-f", str(values))
    assert linted.returncode == 0, linted.stdout + linted.stderr


#: Every series name a dashboard query or variable reads.
SERIES = re.compile(r"\bupgrade_bot_\w+")


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["definition"])
    return queries


def exported_series(exposition: str) -> set[str]:
    families = list(text_string_to_metric_families(exposition))
    return {sample.name for family in families for sample in family.samples}


def test_the_grafana_dashboard_is_a_labelled_config_map_whose_queries_read_series_the_bot_exports(
    helm: Path, tmp_path: Path
) -> None:
    assert [o for o in render(helm, [SECRET])[1] if o["metadata"]["name"].endswith("-dashboard")] == []
    _, objects = render(
        helm,
        [SECRET, "grafanaDashboard.enabled=true", "grafanaDashboard.annotations.grafana_folder=Upgrades"],
    )
    (config_map,) = [
        o for o in by_kind(objects)["ConfigMap"] if o["metadata"]["name"] == "ub-upgrade-bot-dashboard"
    ]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Upgrades"}
    dashboard = json.loads(config_map["data"]["upgrade-bot.json"])
    assert dashboard == json.loads((CHART / "dashboards" / "upgrade-bot.json").read_text(encoding="utf-8"))
    assert dashboard["uid"] == "upgrade-bot"
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert len(set(titles)) == len(titles)
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(titles)
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])

    # The bot's own exposition, with what a run records through the Telemetry interface and the
    # gauges read from a real store: every series a query names is there (a renamed metric fails).
    metrics = Metrics()
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    try:
        metrics.bind_now(lambda: read_now(store, datetime.now(UTC)))
        metrics.kube_request("get", "200", 0.01)
        exported = exported_series(metrics.exposition().decode())
    finally:
        store.close()
    queries = dashboard_queries(dashboard)
    named = {name for query in queries for name in SERIES.findall(query)}
    # The gauges of now are all on it.
    assert {
        "upgrade_bot_runs_in_progress",
        "upgrade_bot_open_gates",
        "upgrade_bot_open_gate_oldest_wait_seconds",
        "upgrade_bot_cordoned_nodes",
        "upgrade_bot_jobs_running",
        "upgrade_bot_leader",
    } <= named
    assert sorted(named - exported) == []
    # Each query reads the namespaces the variable selects.
    assert all('namespace=~"$namespace"' in query for query in queries if "label_values" not in query)
