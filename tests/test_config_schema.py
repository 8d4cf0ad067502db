"""The published JSON Schema of `upgrade-bot.yaml` agrees with the bot's own validator.

Both come from one table (`bot/configschema.py`): the schema accepts every configuration the
repository ships or runs (the example, the demo's, the chart's), and a key the validator does not
know — at any level of the file — is refused by both, each naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bot import configschema
from bot.core import actions
from bot.core.fleets import schema as fleetschema
from bot.core.runs import planschema
from bot.errors import ConfigError
from bot.settings import parse_settings
from tests.support.config_schema import REPO, load, schema_errors

EXAMPLE = REPO / "upgrade-bot.example.yaml"
CHART = REPO / "deploy" / "helm" / "upgrade-bot"


def _accepted_by_the_bot(text: str, tmp_path: Path) -> None:
    parse_settings(text, source=tmp_path / "upgrade-bot.yaml", env={})


def test_the_example_names_the_schema_for_editors_and_passes_it(tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=schemas/upgrade-bot.schema.json"
    assert schema_errors(load(text)) == []
    # With its commented-out parts switched on too: the EKS provider, PostgreSQL, the ignore list.
    uncommented = re.sub(
        r"^(\s*)# (provider:|  eks:|database_url:|checks:|  ignore:|    - finding|      objects|      reason)",
        r"\1\2",
        text,
        flags=re.M,
    )
    assert "provider" in load(uncommented)["clusters"]["prod"]
    assert "checks" in load(uncommented)
    assert schema_errors(load(uncommented)) == []


def test_the_demo_configuration_passes_the_schema(tmp_path: Path) -> None:
    demo = (REPO / "scripts" / "demo").read_text(encoding="utf-8")
    match = re.search(r'cat >"\$work/upgrade-bot.yaml" <<YAML\n(.*?)\nYAML\n', demo, re.S)
    assert match, "scripts/demo no longer writes its configuration with a here-document"
    text = match.group(1).replace("$work", str(tmp_path))
    (tmp_path / "sim.kubeconfig").write_text("", encoding="utf-8")
    _accepted_by_the_bot(text, tmp_path)
    assert schema_errors(load(text)) == []


def test_the_example_fleets_configuration_passes_the_schema_with_its_labels(tmp_path: Path) -> None:
    text = (REPO / "templates" / "fleets" / "example.config.yaml").read_text(encoding="utf-8")
    assert schema_errors(load(text)) == []
    settings = parse_settings(text, source=tmp_path / "upgrade-bot.yaml", env={})
    assert settings.clusters["cityos-dev-east"].labels == {"env": "dev", "region": "east"}
    # Its rehearsal's sims: each cluster's `scenario`; a scenario file is relative to the configuration.
    assert settings.clusters["agora-ci"].scenario == "eks-nodegroups"
    twin = parse_settings(
        "clusters: {x: {in_cluster: true, scenario: twins/x.yaml}, y: {in_cluster: true}}\n",
        source=tmp_path / "upgrade-bot.yaml",
        env={},
    )
    assert twin.clusters["x"].scenario == str(tmp_path / "twins" / "x.yaml")
    assert twin.clusters["y"].scenario == ""
    with pytest.raises(ConfigError, match=r"clusters\.x\.scenarios: unknown key"):
        parse_settings("clusters: {x: {in_cluster: true, scenarios: small}}\n", source=None, env={})
    # `tier: 1` and `canary: true` are label text, as Kubernetes labels are.
    odd = parse_settings(
        "clusters: {x: {in_cluster: true, labels: {tier: 1, canary: true}}}\n", source=None, env={}
    )
    assert odd.clusters["x"].labels == {"tier": "1", "canary": "true"}


@pytest.mark.parametrize("values", ["values.yaml", "ci/ha-values.yaml", "ci/socket-values.yaml"])
def test_the_charts_configurations_pass_the_schema(values: str) -> None:
    config = load((CHART / values).read_text(encoding="utf-8"))["config"]
    assert config, f"{values} has no config"
    assert schema_errors(config) == []


#: A valid configuration with a typo at each level of the file; the test below checks that every
#: mapping of the table with fixed keys has one, so a new section gets its typo case.
TYPOS: dict[str, str] = {
    "": "timezon: UTC\n",
    "clusters.*": "clusters:\n  prod: {kubeconfig: kc, contxt: prod}\n",
    "clusters.*.provider": "clusters:\n  prod: {kubeconfig: kc, provider: {ekss: {name: p, region: eu-west-1}}}\n",
    "clusters.*.provider.eks": "clusters:\n  prod: {kubeconfig: kc, provider: {eks: {name: p, regoin: eu-west-1}}}\n",
    "clusters.*.provider.aks": "clusters:\n  prod: {kubeconfig: kc, provider: {aks: {subscription_id: "
    "3f2b6c1e-8d4a-4e7b-9c2d-1a5e6f7b8c9d, resource_grp: rg, name: shop}}}\n",
    "clusters.*.provider.gke": "clusters:\n  prod: {kubeconfig: kc, provider: {gke: {project: shop-project, "
    "locaton: europe-west1, name: shop}}}\n",
    "channels": "channels: {operation: C0OPS}\n",
    "snapshot": "snapshot: {restart_treshold: 5}\n",
    "windows[]": 'windows: [{days: mon-fri, start: "14:00", end: "17:00", zones: UTC}]\n',
    "freezes[]": "freezes: [{from: 2026-12-25, to: 2027-01-04, reasons: freeze}]\n",
    "announcements": "announcements: {offset: [-1h]}\n",
    "slack": "slack: {edit_intervall: 2s}\n",
    "leader": "leader: {lease_second: 15}\n",
    "actions": "actions: {approver: [primary, shadow]}\n",
    "checks": "checks: {ignores: []}\n",
    "checks.ignore[]": "checks: {ignore: [{finding: API001, reason: reviewed, object: [a/b]}]}\n",
    "checks.images": "checks: {images: {verfy: true, insecure: [registry.local:5000]}}\n",
    "clusters.*.alertmanager": "clusters:\n  prod: {kubeconfig: kc, alertmanager: {urll: 'http://am:9093'}}\n",
    "clusters.*.prometheus": "clusters:\n  prod: {kubeconfig: kc, prometheus: {uri: 'http://prom:9090'}}\n",
    "outbox": "outbox: {dead_after_failure: 10}\n",
    "duties": "duties: {stale_after_second: 6}\n",
    "grafana": "grafana: {url: 'http://grafana:3000', tag: [team-infra]}\n",
    "pipeline_hooks.*": "pipeline_hooks:\n  concourse: {secret_fil: hook.secret}\n",
    "github": "github: {api_ur: 'https://ghe.example/api/v3', token_file: hook.secret}\n",
}


def _fixed_key_paths() -> set[str]:
    paths: set[str] = set()

    def walk(path: str, key: configschema.Key) -> None:
        if key.keys is not None:
            paths.add(path)
            for name, child in key.keys.items():
                walk(f"{path}.{name}" if path else name, child)
        elif key.names is not None:
            walk(f"{path}.*", key.names)
        elif key.items is not None:
            walk(f"{path}[]", key.items)

    walk("", configschema.Key(doc="", keys=configschema.KEYS))
    return paths


def test_every_mapping_of_the_table_has_a_typo_case() -> None:
    assert set(TYPOS) == _fixed_key_paths()


@pytest.mark.parametrize("path", sorted(TYPOS))
def test_a_typo_fails_the_schema_and_the_bot_naming_the_key(path: str, tmp_path: Path) -> None:
    text = TYPOS[path]
    (tmp_path / "kc").write_text("", encoding="utf-8")
    (tmp_path / "hook.secret").write_text("s" * 32, encoding="utf-8")
    typo = re.findall(
        r"\b(timezon|contxt|ekss|regoin|operation|restart_treshold|zones|reasons|offset|edit_intervall|lease_second|approver|ignores|object|urll|uri|verfy|dead_after_failure|tag|resource_grp|locaton|secret_fil|api_ur|stale_after_second)\b",
        text,
    )
    assert len(typo) == 1
    errors = schema_errors(load(text))
    assert any(f"'{typo[0]}' was unexpected" in e for e in errors), errors
    with pytest.raises(ConfigError, match=rf"{re.escape(typo[0])}: unknown key"):
        _accepted_by_the_bot(text, tmp_path)
    # Without the typo, both accept it: the case fails for the typo alone.
    fixed = text.replace(typo[0], configschema_key_for(typo[0]))
    assert schema_errors(load(fixed)) == [], fixed
    _accepted_by_the_bot(fixed, tmp_path)


_FIXES = {
    "timezon": "timezone",
    "contxt": "context",
    "ekss": "eks",
    "regoin": "region",
    "locaton": "location",
    "operation": "operations",
    "restart_treshold": "restart_threshold",
    "zones": "zone",
    "reasons": "reason",
    "offset": "offsets",
    "edit_intervall": "edit_interval",
    "lease_second": "lease_seconds",
    "approver": "approvers",
    "ignores": "ignore",
    "object": "objects",
    "urll": "url",
    "uri": "url",
    "verfy": "verify",
    "dead_after_failure": "dead_after_failures",
    "tag": "tags",
    "resource_grp": "resource_group",
    "secret_fil": "secret_file",
    "api_ur": "api_url",
    "stale_after_second": "stale_after_seconds",
}


def configschema_key_for(typo: str) -> str:
    return _FIXES[typo]


def test_the_schema_refuses_shapes_the_bot_refuses(tmp_path: Path) -> None:
    """Types, limits and patterns come from the same table as the validator's."""
    for text in (
        "workers: 65\n",
        "workers: 0\n",
        "channels: {operations: '#upgrades'}\n",
        "roster: {primary: [alice]}\n",
        "clusters: {prod: {in_cluster: true, kubeconfig: kc}}\n",
        "clusters: {prod: {context: prod}}\n",
        "slack: {posts_per_second: 21}\n",
        "leader: {lease_seconds: 0}\n",
        "announcements: {grace: soon}\n",
        "actions: {approvers: [primary]}\n",
        'windows: [{days: mon, start: "25:00", end: "17:00"}]\n',
        "database_url: mysql://db/upgrade\n",
        "clusters: {prod: {kubeconfig: kc, labels: {'bad key!': lab}}}\n",
        "clusters: {prod: {kubeconfig: kc, labels: {env: 'not a value'}}}\n",
    ):
        (tmp_path / "kc").write_text("", encoding="utf-8")
        assert schema_errors(load(text)), f"the schema accepts {text!r}"
        with pytest.raises(ConfigError):
            _accepted_by_the_bot(text, tmp_path)


def _descriptions(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [str(node["description"])] if isinstance(node.get("description"), str) else []
        return own + [d for value in node.values() for d in _descriptions(value)]
    if isinstance(node, list):
        return [d for value in node for d in _descriptions(value)]
    return []


@pytest.mark.parametrize(
    "schema",
    [configschema.settings_schema, planschema.plan_schema, fleetschema.fleet_schema],
    ids=["configuration", "plan", "fleet"],
)
def test_no_key_description_sends_an_installed_copy_to_a_docs_file(schema: Callable[[], object]) -> None:
    # `upgrade-bot init` writes the configuration's schema beside it and editors show these
    # descriptions; a copy installed from the wheel has no docs/ folder to open.
    descriptions = _descriptions(schema())
    assert len(descriptions) > 10
    assert [d for d in descriptions if re.search(r"docs/[\w/.-]*\.md", d)] == []


def test_no_action_summary_sends_an_installed_copy_to_a_docs_file() -> None:
    # An action's one-line summary describes it wherever the registry is listed; like the schemas'
    # descriptions, it names no file that only the repository has.
    summaries = [spec.summary for spec in actions.BUILTIN]
    assert len(summaries) > 10
    assert [s for s in summaries if re.search(r"docs/[\w/.-]*\.md", s)] == []
