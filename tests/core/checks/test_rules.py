"""Known-issue rules as data: the file is validated with file and line, the shipped rules are
complete, and the engine reports one finding per (rule, workload, episode), never keyed on text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.core.actions import default_registry
from bot.core.checks.rulehits import rule_finding
from bot.core.rules import (
    FIX_ACTIONS,
    ContainerView,
    Episodes,
    EventRecord,
    PodState,
    RuleHit,
    fill_remediation,
    load_rules,
    match_rules,
    parse_rules,
    read_rules,
    rules_problems,
)
from bot.core.rules.known import known_issue_text
from bot.errors import ConfigError
from bot.resources import BUILTIN_RULES

NOW = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
SHIPPED = read_rules(BUILTIN_RULES)
BY_ID = {r.id: r for r in SHIPPED}


def pod(name: str, workload: str = "Deployment shop/api", ns: str = "shop", **kw: object) -> PodState:
    return PodState(namespace=ns, name=name, workload=workload, **kw)  # type: ignore[arg-type]


def test_the_shipped_rules_have_ids_titles_remediation_and_public_evidence() -> None:
    assert [r.id for r in SHIPPED] == [*(f"KI{n:03d}" for n in range(1, 13)), "CNI002"]
    for rule in SHIPPED:
        assert rule.title
        assert rule.explanation
        assert rule.remediation
        assert rule.links, rule.id
        assert all(link.startswith("https://github.com/") for link in rule.links), rule.id
        assert rule.source.startswith(str(BUILTIN_RULES) + ":")


def test_every_problem_of_a_rules_file_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        """rules:
  - id: KI001
    title: ok
    match: {containers: [a], log: {regex: "(unclosed"}}
    explanation: x
    remediation: y
    links: [http://insecure.example.com]
  - id: lowercase
    title: t
    severity: urgent
    match: {contaners: [a]}
    explanation: x
    remediation: y
    links: [https://example.com]
  - id: KI001
    title: dup
    match: {waiting_reasons: []}
    explanation: x
    remediation: y
"""
    )
    with pytest.raises(ConfigError) as err:
        read_rules(path)
    v = err.value.user_message
    assert v.startswith(f"{path}:4: rules[0].match.log.regex: '(unclosed' is not a regular expression")
    assert v.endswith("(and 8 more problem(s))")
    # `rules check` lists them all, each with its line.
    rules, problems = rules_problems(path)
    assert rules == []
    assert len(problems) == 9
    assert problems[0] == v.removesuffix(" (and 8 more problem(s))")
    assert all(re.match(rf"{re.escape(str(path))}:\d+: rules\[\d\]", p) for p in problems), problems
    assert any(p.startswith(f"{path}:10: rules[1].severity: expected") for p in problems), problems
    assert rules_problems(tmp_path / "nope.yaml") == ([], [f"{tmp_path / 'nope.yaml'}: no such file"])


GOOD = """  - id: KI100
    title: t
    match: {containers: [a]}
    explanation: x
    remediation: y
    links: [https://example.com/evidence]
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("id: KI100", "id: lowercase"), "r.yaml:2: rules[0].id: 'lowercase' is not an id like ISTIO001"),
        (("title: t", "title: t\n    severity: urgent"), "r.yaml:4: rules[0].severity: expected required or"),
        (
            ("{containers: [a]}", "{contaners: [a]}"),
            "r.yaml:4: rules[0].match.contaners: unknown key (did you mean",
        ),
        (
            ("{containers: [a]}", "{waiting_reasons: []}"),
            "r.yaml:4: rules[0].match.waiting_reasons: an empty list",
        ),
        (
            ("{containers: [a]}", "{events: {}}"),
            "r.yaml:4: rules[0].match.events: give `reasons`, `message` or both",
        ),
        (("{containers: [a]}", "{log: {lines: 10}}"), "r.yaml:4: rules[0].match.log.regex: required"),
        (
            ("{containers: [a]}", "{log: {regex: x, lines: 5000}}"),
            "r.yaml:4: rules[0].match.log.lines: expected",
        ),
        (
            ("[https://example.com/evidence]", "[]"),
            "r.yaml:7: rules[0].links: a rule needs at least one link",
        ),
        (("    remediation: y\n", ""), "r.yaml:2: rules[0].remediation: required"),
        (
            ("remediation: y", "remediation: kubectl -n {namespace} patch pdb {pdb}"),
            "r.yaml:6: rules[0].remediation: unknown placeholder {pdb}; a remediation may use {namespace}",
        ),
    ],
)
def test_each_problem_is_named_with_its_line_and_key(change: tuple[str, str], message: str) -> None:
    text = "rules:\n" + GOOD.replace(*change)
    with pytest.raises(ConfigError) as err:
        parse_rules(text, source="r.yaml")
    assert err.value.user_message.startswith(message), err.value.user_message


def test_a_refused_event_message_is_one_problem_not_two(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("rules:\n" + GOOD.replace("{containers: [a]}", '{events: {message: "foo(["}}'))
    _, problems = rules_problems(path)
    assert len(problems) == 1, problems
    assert "rules[0].match.events.message: 'foo([' is not a regular expression RE2 accepts" in problems[0]


FIX = '    fix: {action: restart, args: {workloads: "{kind}/{namespace}/{name}"}}\n'


@pytest.mark.parametrize(
    ("fix", "message"),
    [
        (
            '    fix: {action: delete, args: {pod: "{pod}"}}\n',
            "r.yaml:8: rules[0].fix.action: 'delete' is not an action a fix may run; one of: delete-pod, restart, set-image",
        ),
        ("    fix: {action: restart}\n", "r.yaml:8: rules[0].fix.args: required"),
        ("    fix: {args: {workloads: x}}\n", "r.yaml:8: rules[0].fix.action: required"),
        (
            "    fix: {action: restart, args: {namespace: x}}\n",
            "r.yaml:8: rules[0].fix.args.namespace: `restart` takes crashloop_after, imagepull_after, timeout,"
            " workloads; not namespace",
        ),
        (
            '    fix: {action: restart, args: {workloads: "deployment/{namespace}/{pod}"}}\n',
            "r.yaml:8: rules[0].fix.args.workloads: unknown placeholder {pod}; a fix may use {namespace}",
        ),
        (
            "    fix: {action: restart, args: {timeout: 5m}}\n",
            'r.yaml:8: rules[0].fix.args.workloads: required: the workload, "{kind}/{namespace}/{name}"',
        ),
        (
            "    fix: {action: restart, args: {workloads: x}, how: now}\n",
            "r.yaml:8: rules[0].fix.how: unknown key",
        ),
    ],
)
def test_a_fix_is_validated_at_load_with_its_line(fix: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rules("rules:\n" + GOOD + fix, source="r.yaml")
    assert err.value.user_message.startswith(message), err.value.user_message


def test_a_fix_is_filled_from_the_finding_and_only_offered_for_kinds_its_action_takes() -> None:
    (rule,) = parse_rules("rules:\n" + GOOD + FIX, source="r.yaml")
    assert rule.fix is not None
    assert rule.fix.args_for(kind="Deployment", namespace="shop", name="api") == {
        "workloads": "deployment/shop/api"
    }
    assert rule.fix.args_for(kind="StatefulSet", namespace="db", name="pg") == {
        "workloads": "statefulset/db/pg"
    }
    # A bare pod or a node cannot be rolled out; a finding without a namespace fills nothing.
    assert rule.fix.args_for(kind="Pod", namespace="shop", name="api-1") is None
    assert rule.fix.args_for(kind="Deployment", namespace="", name="api") is None


def test_every_fix_action_is_an_action_the_bot_has_and_takes_those_arguments() -> None:
    registry = default_registry()
    for action, (args, _kinds) in FIX_ACTIONS.items():
        spec = registry.get(action)
        assert spec is not None, action
        assert spec.mutating
        assert args <= spec.arguments, action


def test_the_shipped_fixes_do_what_the_remediation_tells_a_person_to_do() -> None:
    fixes = {r.id: r.fix for r in SHIPPED if r.fix is not None}
    assert sorted(fixes) == ["KI002", "KI004", "KI005", "KI007", "KI008"]
    for rule_id in ("KI002", "KI004"):
        assert fixes[rule_id].action == "restart"
        assert fixes[rule_id].args == {"workloads": "{kind}/{namespace}/{name}"}
        # The button does only what the remediation tells a person to do.
        assert "rollout restart {kind} {name}" in BY_ID[rule_id].remediation
    # kube-proxy's documented image, on its DaemonSet only (a Deployment finding offers nothing).
    kube_proxy = fixes["KI005"]
    assert kube_proxy.action == "set-image"
    assert kube_proxy.args_for(kind="DaemonSet", namespace="kube-system", name="kube-proxy") == {
        "workload": "daemonset/kube-system/kube-proxy",
        "container": "kube-proxy",
    }
    assert kube_proxy.args_for(kind="Deployment", namespace="kube-system", name="kube-proxy") is None
    assert "set image {kind}/{name}" in BY_ID["KI005"].remediation
    # Stuck pods: only the workload's Terminating ones, forced, as the remediations say.
    for rule_id in ("KI007", "KI008"):
        assert fixes[rule_id].action == "delete-pod"
        assert fixes[rule_id].args_for(kind="StatefulSet", namespace="db", name="pg") == {
            "workload": "statefulset/db/pg",
            "only": "terminating",
            "force": "true",
        }
        assert "--grace-period=0 --force" in BY_ID[rule_id].remediation


def test_a_delete_pod_fix_must_say_which_pods_and_may_not_allow_unmanaged_ones() -> None:
    with pytest.raises(ConfigError) as err:
        parse_rules(
            "rules:\n"
            + GOOD
            + '    fix: {action: delete-pod, args: {workload: "{kind}/{namespace}/{name}"}}\n',
            source="r.yaml",
        )
    assert "rules[0].fix.args.only: required: which of its pods: terminating or not-ready" in (
        err.value.user_message
    )
    with pytest.raises(ConfigError) as err:
        parse_rules(
            "rules:\n"
            + GOOD
            + '    fix: {action: delete-pod, args: {workload: "{kind}/{namespace}/{name}", only: terminating,'
            + ' allow_unmanaged: "true"}}\n',
            source="r.yaml",
        )
    assert "rules[0].fix.args.allow_unmanaged: `delete-pod` takes force, only, timeout, workload" in (
        err.value.user_message
    )


def test_a_duplicate_id_names_the_first_rule() -> None:
    with pytest.raises(ConfigError, match=r"r.yaml:8: rules\[1\].id: KI100 is also the id of rules\[0\]"):
        parse_rules("rules:\n" + GOOD + GOOD, source="r.yaml")


def test_a_file_read_again_is_not_parsed_again_and_a_changed_or_broken_one_is(tmp_path: Path) -> None:
    # Every assembly loads the rules: the same text gives the same (frozen) rules without another
    # parse; an edit is read as edited, and a broken file is refused every time it is read.
    team = tmp_path / "team.yaml"
    team.write_text("rules:\n" + GOOD, encoding="utf-8")
    first = load_rules([BUILTIN_RULES, team])
    again = load_rules([BUILTIN_RULES, team])
    assert again == first
    assert all(a is b for a, b in zip(again, first, strict=True))
    team.write_text("rules:\n" + GOOD.replace("KI100", "KI101"), encoding="utf-8")
    assert "KI101" in {r.id for r in load_rules([BUILTIN_RULES, team])}
    team.write_text("rules:\n" + GOOD + GOOD, encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ConfigError, match="KI100 is also the id"):
            load_rules([BUILTIN_RULES, team])


def test_a_teams_file_adds_rules_and_replaces_shipped_ones_by_id(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        """rules:
  - id: KI004
    title: Our Vault agents are slow, not broken
    match: {containers: [vault-agent], not_ready: true}
    explanation: They take two minutes to authenticate here.
    remediation: Wait; page #vault after 10 minutes.
    links: [https://wiki.example.com/vault]
  - id: TEAM001
    title: Legacy batch pods
    match: {labels: {team: legacy}}
    explanation: x
    remediation: y
    links: [https://wiki.example.com/legacy]
"""
    )
    rules = load_rules([BUILTIN_RULES, team])
    by_id = {r.id: r for r in rules}
    assert len(rules) == len(SHIPPED) + 1
    assert by_id["KI004"].title == "Our Vault agents are slow, not broken"
    assert by_id["KI004"].source == f"{team}:2"
    with pytest.raises(ConfigError, match="rules file not found"):
        load_rules([tmp_path / "missing.yaml"])


def test_pods_of_one_workload_with_the_same_problem_are_one_finding() -> None:
    states = [
        pod(
            f"worker-{i}",
            "Deployment payments/worker",
            "payments",
            annotations={"vault.hashicorp.com/agent-inject": "true"},
            containers=(ContainerView(name="worker"), ContainerView(name="vault-agent", ready=False)),
        )
        for i in range(3)
    ]
    (hit,) = match_rules(SHIPPED, states, [], NOW)
    assert hit.rule.id == "KI004"
    assert hit.workload == "Deployment payments/worker"
    assert hit.pods == ("worker-0", "worker-1", "worker-2")
    finding = rule_finding(hit)
    assert finding.objects[0] == "Deployment payments/worker"
    assert "vault read auth/kubernetes/role" in finding.fix
    assert "hashicorp/vault-helm" in finding.fix
    assert "1/2 containers ready (vault-agent is not)" in finding.why


def test_log_rules_read_only_a_bounded_tail_and_never_key_on_the_text() -> None:
    def proxy(name: str, line: str, noise: int = 0) -> PodState:
        tail = "\n".join([line, *["info ok"] * noise])
        return pod(name, containers=(ContainerView(name="istio-proxy", log_tail=tail),))

    line = "warning envoy main listener accept failure: Too many open files thread={}"
    hits = match_rules([BY_ID["KI012"]], [proxy("api-1", line.format(21)), proxy("api-2", line.format(7))])
    assert [(h.rule.id, h.workload, h.pods) for h in hits] == [
        ("KI012", "Deployment shop/api", ("api-1", "api-2"))
    ]
    # Beyond the rule's 200 lines, the line is out of the tail it reads.
    assert match_rules([BY_ID["KI012"]], [proxy("api-1", line.format(1), noise=200)]) == []


def test_event_rules_match_events_about_the_pod_or_alone_about_any_object() -> None:
    es = pod("es-1", "StatefulSet logging/es", "logging")
    multi = EventRecord(
        namespace="logging",
        kind="Pod",
        name="es-1",
        reason="FailedAttachVolume",
        message='Multi-Attach error for volume "pvc-1" Volume is already exclusively attached to one node',
    )
    other = EventRecord(namespace="logging", kind="Pod", name="es-1", reason="FailedMount", message="timeout")
    (hit,) = match_rules([BY_ID["KI007"]], [es], [multi, other])
    assert hit.workload == "StatefulSet logging/es"
    assert hit.evidence.startswith("event FailedAttachVolume: Multi-Attach")
    gone = EventRecord(
        namespace="shop",
        kind="Pod",
        name="api-9",
        reason="EvictionBlocked",
        message="Cannot evict pod as it would violate the pod's disruption budget.",
    )
    (hit,) = match_rules([BY_ID["KI006"]], [], [gone])
    assert hit.workload == "Pod shop/api-9"
    assert hit.pods == ()


def test_evidence_the_cluster_wrote_is_one_line_with_no_escapes_whatever_it_holds() -> None:
    """An event's message with newlines once opened lines of its own in the bot's posts (a fake
    "*What to do*" with a command, above the real one); with terminal escapes, it cleared the screen
    of whoever ran `upgrade-bot check`."""
    forged = EventRecord(
        namespace="default",
        kind="Pod",
        name="web-1",
        reason="EvictionBlocked",
        message="Cannot evict pod as it would violate the pod's disruption budget.\n:white_check_mark: safe"
        "\n*What to do*\n```kubectl delete namespace shop``` \x1b[2J\x1b]0;pwned\x07\u202eexe.txt",
    )
    (hit,) = match_rules([BY_ID["KI006"]], [], [forged])
    assert hit.evidence == (
        "event EvictionBlocked: Cannot evict pod as it would violate the pod's disruption budget. "
        ":white_check_mark: safe *What to do* ```kubectl delete namespace shop``` [2J]0;pwnedexe.txt"
    )
    known = known_issue_text(
        hit.rule.id, hit.rule, f"{hit.namespace}/Pod/web-1", pods=1, evidence=hit.evidence
    )
    assert "\n*What to do*\n```kubectl delete" not in known
    assert known.count("\n*What to do*") == 1  # the rule's own heading, on its own line


def test_terminating_pods_on_a_dead_node_and_controllers_tolerating_everything() -> None:
    stuck = pod("es-0", "StatefulSet logging/es", "logging", deleting=True, node_ready=False)
    fine = pod("es-1", "StatefulSet logging/es", "logging", deleting=True, node_ready=True)
    daemon = pod("fluent-bit-x", "DaemonSet logging/fluent-bit", "logging", tolerates_all=True)
    greedy = pod("typha-1", "Deployment calico-system/typha", "calico-system", tolerates_all=True)
    hits = match_rules([BY_ID["KI008"], BY_ID["KI009"]], [stuck, fine, daemon, greedy])
    assert [(h.rule.id, h.workload, h.pods) for h in hits] == [
        ("KI008", "StatefulSet logging/es", ("es-0",)),
        ("KI009", "Deployment calico-system/typha", ("typha-1",)),
    ]


def test_an_episode_is_reported_once_until_it_has_been_quiet() -> None:
    worker = pod(
        "w-1",
        "Deployment payments/worker",
        containers=(ContainerView(name="vault-agent", ready=False),),
        annotations={"vault.hashicorp.com/agent-inject": "true"},
    )
    episodes = Episodes(quiet=timedelta(minutes=10))
    first = episodes.new(match_rules(SHIPPED, [worker]), NOW)
    assert [(h.rule.id, start) for h, start in first] == [("KI004", NOW)]
    # The pod is replaced (another name) while the problem goes on: same episode, nothing new.
    again = replace_name(worker, "w-2")
    assert episodes.new(match_rules(SHIPPED, [again]), NOW + timedelta(minutes=5)) == []
    assert episodes.new(match_rules(SHIPPED, [again]), NOW + timedelta(minutes=14)) == []
    # Quiet for longer than 10 minutes, then back: a new episode.
    later = NOW + timedelta(minutes=30)
    assert [(h.rule.id, s) for h, s in episodes.new(match_rules(SHIPPED, [again]), later)] == [
        ("KI004", later)
    ]


def replace_name(state: PodState, name: str) -> PodState:
    from dataclasses import replace

    return replace(state, name=name)


def test_the_rules_over_many_pods_stay_linear() -> None:
    states = [
        pod(
            f"p-{i}",
            f"Deployment ns{i % 300}/app{i % 3500}",
            f"ns{i % 300}",
            containers=(ContainerView(name="app"),),
        )
        for i in range(20_000)
    ]
    assert match_rules(SHIPPED, states) == []


# ----- remediations filled from the finding ---------------------------------------------------------

PLACEHOLDER_LEFT = ("NAMESPACE", "NAME ", " NAME", " POD", "POD ")


def test_every_shipped_remedy_names_what_the_finding_knows() -> None:
    """No NAMESPACE/NAME/POD placeholder, nor an unfilled `{…}`, remains when the finding knows it."""
    for rule in SHIPPED:
        container = min(rule.match.containers) if rule.match.containers else ""
        hit = RuleHit(
            rule=rule,
            workload="Deployment checkout/checkout",
            namespace="checkout",
            pods=("checkout-7d9-abcde",),
            evidence="",
            container=container,
            nodes=(("checkout-7d9-abcde", "ip-10-0-1-7.ec2.internal"),),
        )
        text = hit.remedy(version="1.25")
        assert not any(p in text for p in PLACEHOLDER_LEFT), (rule.id, text)
        assert not re.search(r"\{[a-z_]+\}", text), (rule.id, text)
        assert "<" not in text, (rule.id, text)
        if "{namespace}" in rule.remediation:
            assert "-n checkout" in text, rule.id


def test_a_restart_names_the_workload_and_a_pod_line_repeats_per_pod_up_to_five() -> None:
    ki008 = BY_ID["KI008"]
    pods = tuple(f"es-{i}" for i in range(7))
    hit = RuleHit(
        rule=ki008,
        workload="StatefulSet logging/es",
        namespace="logging",
        pods=pods,
        evidence="",
        nodes=tuple((p, "ip-10-0-9-9" if p < "es-4" else "ip-10-0-9-8") for p in pods),
    )
    text = hit.remedy()
    assert text.count("kubectl -n logging delete pod es-") == 5
    assert "  # … and 2 more pods" in text
    assert "kubectl -n logging delete pod es-0 --grace-period=0 --force" in text
    # One line per node the pods were on, not per pod.
    assert text.count("kubectl describe node ") == 2
    assert "kubectl delete node ip-10-0-9-8" in text
    restart = RuleHit(rule=BY_ID["KI002"], workload="Deployment checkout/checkout", namespace="checkout",
                      pods=("a", "b"), evidence="")  # fmt: skip
    assert "kubectl -n checkout rollout restart deployment checkout" in restart.remedy()
    assert rule_finding(restart).fix.startswith(
        "Re-inject with the current template: kubectl -n checkout rollout restart deployment checkout"
    )


def test_what_a_finding_does_not_know_stays_a_visible_slot() -> None:
    text = fill_remediation(
        "kubectl -n {namespace} delete pod {pod}\naws eks describe-addon-versions --kubernetes-version {version}",
        kind="Deployment",
        namespace="shop",
        name="api",
    )
    assert (
        text
        == "kubectl -n shop delete pod <pod>\naws eks describe-addon-versions --kubernetes-version <version>"
    )
    # A node finding (an event about a node) fills {node} with its name.
    assert (
        fill_remediation("kubectl describe node {node}", kind="Node", name="ip-1")
        == "kubectl describe node ip-1"
    )
    # JSON in a remedy is left alone.
    patch = 'kubectl -n {namespace} patch pdb PDB -p \'{"spec":{"maxUnavailable":1}}\''
    assert (
        fill_remediation(patch, namespace="shop")
        == 'kubectl -n shop patch pdb PDB -p \'{"spec":{"maxUnavailable":1}}\''
    )


def test_a_findings_source_names_the_rules_file_not_the_bot_hosts_path(tmp_path: Path) -> None:
    state = pod(
        "worker-0",
        "Deployment payments/worker",
        "payments",
        annotations={"vault.hashicorp.com/agent-inject": "true"},
        containers=(ContainerView(name="worker"), ContainerView(name="vault-agent", ready=False)),
    )
    (hit,) = match_rules(SHIPPED, [state], [], NOW)
    line = hit.rule.source.rsplit(":", 1)[1]
    assert rule_finding(hit).source == f"known-issue rule KI004 (templates/rules/known-issues.yaml:{line})"
    team = tmp_path / "team-rules.yaml"
    team.write_text(BUILTIN_RULES.read_text())
    (hit,) = match_rules(read_rules(team), [state], [], NOW)
    assert rule_finding(hit).source == f"known-issue rule KI004 (team-rules.yaml:{line})"
    assert str(tmp_path) not in rule_finding(hit).source
