"""`upgrade-bot rehearse`: a whole plan on the simulated cluster from a terminal."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from kubernetes import client, config, watch
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from bot.adapters.kube import Cluster as KubeCluster
from bot.adapters.store import Store
from bot.core.jobs.trail import CORDONED_BY
from bot.core.runs import machine as R
from bot.core.runs.cards import gate_key
from bot.core.runs.plans import parse_plan
from bot.core.runs.service import RunService
from bot.frontdoor.rehearse import _await_gate_post, load_plan_file, window_opening_now
from bot.frontdoor.rehearse import rehearse as rehearse_plan
from bot.resources import BUILTIN_PLANS
from bot.sim import SimCluster
from tests.support.bot_process import bot_command
from tests.support.plans import PLANS
from tests.support.rehearsing import gate_text, rehearse


@pytest.mark.slow
def test_the_eks_managed_plan_upgrades_everything_through_the_eks_api_in_order() -> None:
    result = rehearse("eks-managed", "--auto-approve", timeout=600)
    # 3: completed, with failed steps (the planted faults) reviewed and skipped.
    assert result.returncode == 3, result.stderr[-3000:]
    out = result.stdout
    # The rehearsal points the cluster's provider at the sim's AWS APIs.
    assert re.search(r"^aws: http://127\.0\.0\.1:\d+/aws \(EKS cluster runbook-prod\)$", out, re.MULTILINE)
    # Every update through the API, each once, in the runbook's order.
    accepted = re.findall(r"↳ (node group \S+|control plane|add-on \S+) \S+ → \S+: EKS accepted (\w+)", out)
    assert accepted == [
        (
            "node group others",
            "UpdateNodegroupVersion",
        ),  # 1.22 → 1.24 first: EKS refuses the control plane else
        ("control plane", "UpdateClusterVersion"),
        ("add-on vpc-cni", "UpdateAddon"),
        ("add-on coredns", "UpdateAddon"),
        ("add-on kube-proxy", "UpdateAddon"),
        ("add-on aws-ebs-csi-driver", "UpdateAddon"),
        ("node group control-plane", "UpdateNodegroupVersion"),
        ("node group istio", "UpdateNodegroupVersion"),
        ("node group ng-shared", "UpdateNodegroupVersion"),
        ("node group others", "UpdateNodegroupVersion"),
        ("node group logging", "UpdateNodegroupVersion"),
    ]
    # Each behind its gate: two people approved it, after a dry run that says what will be called.
    for step in ("control-plane", "addon-coredns", "nodegroup-logging"):
        assert f"@U0PRIMARY (primary) approved the start of `{step}`" in out
        assert f"@U0SHADOW (shadow) approved the start of `{step}`" in out
    gate = gate_text(out, "control-plane")
    assert "• would call eks:UpdateClusterVersion name=runbook-prod version=1.25 clientRequestToken=" in gate
    assert "• DescribeCluster now: version 1.24, platform eks.12, status ACTIVE" in gate
    assert re.search(r"• API server /version now: v1\.24\.17-eks-\w+", gate)
    ebs = gate_text(out, "addon-ebs-csi")
    assert "resolveConflicts=NONE" in ebs
    assert "• conflict policy NONE: EKS changes nothing you changed on the add-on's objects" in ebs
    assert "• DescribeAddon now: v1.19.0-eksbuild.2, status ACTIVE" in ebs
    # The control plane: done when EKS says Successful AND the API server reports it; then three
    # answers in a row from /version.
    assert re.search(
        r"`control-plane` succeeded: eks-update-cluster job \d+: control plane 1\.24 → 1\.25: EKS update \S+ "
        r"Successful and the API server reports v1\.25\.16-eks-\w+",
        out,
    )
    assert "`confirm-control-plane` succeeded: wait-controlplane job" in out
    for addon in ("vpc-cni", "coredns", "kube-proxy"):
        assert re.search(rf"`addon-{addon}` succeeded: eks-update-addon job \d+: add-on {addon} ", out)
    for group in ("control-plane", "istio", "ng-shared", "others", "logging"):
        assert re.search(
            rf"`nodegroup-{group}` succeeded: eks-update-nodegroup job \d+: node group {group} 1\.24 → 1\.25: "
            r"EKS update \S+ Successful — (\d+)/\1 node\(s\) Ready on 1\.25",
            out,
        )
    # The planted failed update stops the run where a real one would: the step fails with AWS's
    # reason, the run pauses; the roster reviews it and skips the step, on record.
    assert re.search(
        r"❌ \*`addon-ebs-csi` failed\* in run \w+: eks-update-addon job \d+: add-on aws-ebs-csi-driver "
        r"v1\.19\.0-eksbuild\.2 → v1\.25\.0-eksbuild\.1: EKS update \S+ Failed — ConfigurationConflict: "
        r"Conflicts found when trying to apply",
        out,
    )
    assert "Run paused: step addon-ebs-csi failed" in out
    assert "↳ rehearsal: @U0PRIMARY reviewed why `addon-ebs-csi` failed and skips it" in out
    assert "`restart-coredns` succeeded: restart job" in out
    assert re.search(r"✅ `check-leftovers` succeeded: check of EKS009, EKS006 for 1\.25 passed: ", out)
    # The settle phase's evidence, measured through the sim's facades.
    assert re.search(r"`settle-alerts` succeeded: alerts job \d+: alerts: no new alert for 10m", out)
    assert re.search(r"`settle-apiserver-4xx` succeeded: analysis job \d+: analysis: Successful", out)
    final_card = out.rsplit("Upgrade run", 1)[1]
    # Not a clean success: besides the planted add-on conflict, the scenario's planted blockers fail
    # the check, KI004 the istio restart, the settle watch and the diff; the roster skipped each.
    assert "Run *completed with 5 failed steps skipped*" in final_card
    assert final_card.count("⏩ `addon-ebs-csi`") == 1
    assert "🎉" not in final_card
    assert out.rstrip().endswith("completed with 5 failed steps skipped")
    (skipped,) = [line for line in out.splitlines() if line.startswith("failed and skipped: ")]
    for step in ("checks", "addon-ebs-csi", "restart-istio-data-plane", "watch-settle", "diff"):
        assert f"{step} (" in skipped, skipped
    assert result.returncode == 3, result.stderr[-3000:]


@dataclass(frozen=True)
class Rehearsed:
    result: subprocess.CompletedProcess[str]
    report: Path


@pytest.fixture(scope="module")
def eks_auto_approved(tmp_path_factory: pytest.TempPathFactory) -> Rehearsed:
    """The EKS runbook rehearsed once with the roster answering, its report written: the tests that
    only read its output share the one run (about a minute of the suite's time each)."""
    report = tmp_path_factory.mktemp("rehearsal") / "report"
    return Rehearsed(rehearse("eks-nodegroups", "--auto-approve", "--report", str(report)), report)


#: The tests of `eks_auto_approved` run on one worker under `--dist loadgroup`: a module-scoped
#: fixture is made once per worker, and two workers rehearsed the runbook twice.
SHARES_THE_REHEARSAL = pytest.mark.xdist_group("eks-auto-approved")


@pytest.mark.slow
@SHARES_THE_REHEARSAL
def test_the_roster_answers_each_gate_after_its_message_is_in_the_thread(
    eks_auto_approved: Rehearsed,
) -> None:
    # A long action's driver opens the next gate and posts it on its own thread (its dry run read
    # first): the transcript read "approved the start of `watch-settle`" above its "ready to start".
    out = eks_auto_approved.result.stdout
    opened: set[str] = set()
    answered = 0
    for line in out.splitlines():
        if match := re.search(r"\(`([\w-]+)`\) — ready to start", line):
            opened.add(match[1])
        if match := re.search(r"approved the start of `([\w-]+)`", line):
            assert match[1] in opened, f"answered before its gate was posted: {line}"
            answered += 1
    assert answered > 20


@pytest.mark.slow
@SHARES_THE_REHEARSAL
def test_the_eks_runbook_rehearses_to_completion_with_the_roster_answering(
    eks_auto_approved: Rehearsed,
) -> None:
    result = eks_auto_approved.result
    # 3: the run completed, but with failed steps (the planted faults) reviewed and skipped.
    assert result.returncode == 3, result.stderr[-3000:]
    # What `--report` adds is only its lines before the verdict (test_the_rehearsal_writes_the_runs_report).
    out, _, report = result.stdout.partition("\nreport: ")
    assert len(report.splitlines()) == 5  # its picture, HTML and Markdown; the failed steps; the verdict
    assert "sim: upgrade_control_plane version=1.25.16 → Successful" in out
    assert "`restart-coredns` succeeded: restart job" in out
    assert 'deployment/kube-system/coredns: deployment "coredns" successfully rolled out' in out
    assert 'deployment/kube-system/dns-autoscaler: deployment "dns-autoscaler" successfully rolled out' in out
    for group in ("control-plane", "istio", "ng-shared", "others", "logging"):
        # The sim plays the pipeline (new nodes join); the bot cordons and drains the old ones
        # through the eviction API, and the sim terminates each drained node.
        assert (
            f"sim: replace_node_group name={group}, version=1.25.16, drain=external → new nodes Ready; "
            "waiting for the old nodes to be drained" in out
        )
        assert f"`drain-{group}` succeeded: drain job" in out
        # Its gate showed the dry run read when it opened: the nodes, the pods each one loses.
        gate = out.split(f"(`drain-{group}`) — ready to start", 1)[1].split("approved the start of", 1)[0]
        assert re.search(
            # The terminal shows Slack's date markup in its own zone (issue 40 item 10).
            r"🔍 \*Dry run at \d{4}-\d\d-\d\d \d\d:\d\d \S+\* — what approving this step will touch",
            gate,
        )
        assert re.search(
            rf"\*drain\* `nodegroup={group} [^`]*`: cordon (\d+) of \1 node\(s\), evict \d+ pod\(s\)", gate
        )
        assert re.search(r"• `ip-[^`]+` — cordon, evict \d+ pod\(s\): \S+/\S+", gate), gate
        # ... and what the disruption budgets say now (none is at 0 when these gates open).
        assert "· no disruption budget at 0 now" in gate, gate
        assert f"`wait-{group}` succeeded: wait-nodegroup job" in out
        assert f"node group {group}: all" in out
    assert out.count(" cordoned\n") == out.count(" drained: ")  # every old node: cordoned, drained
    assert out.count(" drained: ") == 11
    # The Istio data plane restart takes the namespaces ISTIO001 flags, not a fixed list: its gate's
    # dry run names them, and every flagged workload is restarted.
    istio_gate = out.split("(`restart-istio-data-plane`) — ready to start", 1)[1].split(
        "approved the start of", 1
    )[0]
    assert (
        "*restart* `namespaces=from-check:ISTIO001 timeout=20m`: the namespaces ISTIO001 flags now — "
        "`checkout`, `payments`, `reporting` — restart 4 workload(s)" in istio_gate
    )
    for workload in (
        "checkout/checkout",
        "payments/payments-api",
        "payments/payments-worker",
        "reporting/reporting-api",
    ):
        assert f"↳ deployment/{workload} restarted (restartedAt " in out
    # The scenario's planted fault stops the run where a real one would: the Istio restart brings
    # out payments-worker's vault agent that never gets ready; the roster reviews it and skips.
    assert "`restart-istio-data-plane` failed* in run" in out
    assert "deployment/payments/payments-worker" in out
    assert "↳ rehearsal: @U0PRIMARY reviewed why `restart-istio-data-plane` failed and skips it" in out
    # The failure says why, in the known-issue rule's words, with its remedy.
    # ... filled with the real names (the namespace, the failing pods, the container).
    assert re.search(
        r'deployment/payments/payments-worker: rollout failed: deployment "payments-worker" exceeded its '
        r"progress deadline — KI004 Vault-injected pod with the vault-agent sidecar not ready: "
        r'Look for "error authenticating" in the agent\'s log: '
        r"kubectl -n payments logs payments-worker-[a-z0-9]+-[a-z0-9]+ -c vault-agent --tail=50",
        out,
    )
    assert "1 workload(s) failed: deployment/payments/payments-worker (deployment \"payments-worker\" " \
        "exceeded its progress deadline — KI004 Vault-injected pod" in out  # fmt: skip
    # The watch streams into the run's thread and ends with a verdict — not "all clear" while the
    # vault finding it posted is open: the settle step fails (its default), the roster reviews it.
    assert "*Watch on prod*" in out
    assert "• *Not ready*: 2 pods — payments/payments-worker ×2" in out
    assert "🔍 Known issue *KI004*" in out
    assert "🎉 Target reached" not in out
    assert "⚠️ Target reached with open findings — 1 open finding: KI004 payments/payments-worker" in out
    assert "🏁 Watch ended — target reached with open findings: 1 open finding" in out
    assert "target_reached_with_open_findings" not in out  # the state in words, everywhere
    assert "↳ rehearsal: @U0PRIMARY reviewed why `watch-settle` failed and skips it" in out
    # The roster reviews a failure once the thread has said it: its failure and pause come first
    # (a step failed on its driver's thread is posted right after the commit the rehearsal reads).
    for step in ("checks", "restart-istio-data-plane", "watch-settle", "diff"):
        failed = out.index(f"❌ *`{step}` failed* in run")
        assert failed < out.index(f"⏸️ Run paused: step {step} failed", failed)
        assert out.index(f"⏸️ Run paused: step {step} failed") < out.index(f"reviewed why `{step}` failed")
    assert "`snapshot-post` succeeded: snapshot #2 `post`" in out
    # The evidence steps measure through the sim's Alertmanager and Prometheus facades (no
    # binaries): the baseline with the pre snapshot, the settle checks, each drain's background.
    assert (
        'sim: the Prometheus facade answers sum(rate(apiserver_request_total{code=~"4.."}[5m])) with 0' in out
    )
    assert "baseline: 0 firing alert(s), 1 of 1 analysis value(s)" in out
    assert re.search(
        r"`settle-alerts` succeeded: alerts job \d+: alerts: no new alert for 10m \(Alerts: 0 new", out
    )
    assert re.search(
        r"`settle-apiserver-4xx` succeeded: analysis job \d+: analysis: Successful after 5 ", out
    )
    assert "background=alerts,analysis" in gate_text(out, "drain-istio")
    # Every evidence step measured (the plan's own descriptions mention the no-source case).
    assert "nothing measured" not in out
    assert "not measured: no source" not in out
    assert "not measured (no source) —" not in out
    final_card = out.rsplit("Upgrade run", 1)[1]
    assert "Run *completed with 4 failed steps skipped*" in final_card
    # The pre-flight check fails on the scenario's planted blockers; the roster skips it, on record.
    assert "↳ rehearsal: @U0PRIMARY reviewed why `checks` failed and skips it" in out
    assert final_card.count("⏩ `checks`") == 1
    # The final card at a glance: the progress line and the run's last step (it used to be cut
    # off after 11 of the then 25 steps, inside an emoji code). An honest ending (issue 40): the planted
    # faults failed four steps that the roster skipped; the card, the thread and the last line say
    # so, name each with its failure and who skipped it, and list the findings left open.
    assert "Run *completed with 4 failed steps skipped* · 24 done · 4 failed and skipped" in final_card
    # After the roll-out, EKS009 and EKS006 again: the scenario's leftover Auto Scaling group is named.
    assert re.search(
        r"✅ `check-leftovers` succeeded: check of EKS009, EKS006 for 1\.25 passed: no Required findings, "
        r"\d+ Recommended: .*EKS009 \(Auto Scaling group eksctl-runbook-prod-nodegroup-others-old-NodeGroup-1U7KZ3QX0AB2F\)",
        out,
    )
    # Each node group's wait showed its CloudFormation stack (none failed here: no thread line).
    assert "its CloudFormation stack" not in out
    ending = final_card.split("⚠️ *Completed with 4 failed steps skipped*", 1)[1].split("\n\n", 1)[0]
    for step in ("checks", "watch-settle", "diff"):
        assert f"• `{step}` failed: " in ending
        assert (
            f"skipped by @U0PRIMARY: _rehearsal: @U0PRIMARY reviewed why `{step}` failed and skips it_"
            in ending
        )
    # Its gate is four eyes (`approve: [primary, shadow]`): skipping it takes both, as in Slack.
    assert "• `restart-istio-data-plane` failed: " in ending
    assert (
        "skipped by @U0PRIMARY, @U0SHADOW: _rehearsal: @U0PRIMARY reviewed why `restart-istio-data-plane` failed "
        "and skips it; rehearsal: @U0SHADOW reviewed" in ending
    )
    assert (
        "  ↳ rehearsal: @U0SHADOW reviewed why `restart-istio-data-plane` failed and skips it (a second vote: "
        "the step's gate needs it, as in Slack)" in out
    )
    assert "Open findings (as the failed steps found them): `API001` (checks)" in ending
    assert "`KI004` (" in ending
    assert "  ↳ ⚠️ *Completed with 4 failed steps skipped*" in out  # the thread's last line
    assert "🎉" not in final_card
    assert "🎉 Run completed" not in out
    assert "✅ `announce-done` Announce completion" in final_card
    # Every card printed while the run was under way shows the step now.
    for card in out.split("Upgrade run")[1:-1]:
        now = re.search(r"▶ `([a-z0-9-]+)`", card)
        assert now is not None, card[:300]
        assert f"⏳ Now: `{now.group(1)}`" in card or "Run *paused*" in card, card
    # The roster answered as people would: the starter of a step never confirmed it alone.
    assert "four eyes" not in out
    assert result.stdout.rstrip().endswith("completed with 4 failed steps skipped")


@SHARES_THE_REHEARSAL
def test_the_rehearsal_writes_the_runs_report(eks_auto_approved: Rehearsed) -> None:
    """`--report DIR` (issue 31): the picture, the HTML and the Markdown of the rehearsed run."""
    result = eks_auto_approved.result
    assert result.returncode == 3, result.stderr[-3000:]
    out = result.stdout
    last = out.rstrip().splitlines()[-1]
    run_id = re.fullmatch(
        r"rehearsal of eks-nodegroups: run (\S+) completed with 4 failed steps skipped", last
    )
    assert run_id, out[-500:]
    paths = [eks_auto_approved.report / f"run-{run_id.group(1)}.{ext}" for ext in ("png", "html", "md")]
    # The report's paths, then the failed steps and the verdict: a pipeline's log ends with why.
    assert "\n".join(f"report: {p}" for p in paths) + "\nfailed and skipped: checks (" in out
    assert paths[0].read_bytes().startswith(b"\x89PNG")
    md = paths[2].read_text()
    # Read later beside real runs' reports, it says what it was.
    assert "prod (a rehearsal on the simulated cluster; times are the sim's clock)" in md
    # The step Gantt: every step of the runbook, and the failed and skipped ones as such.
    gantt = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert gantt.count("    section ") == 28
    assert "| restart-istio-data-plane | skipped |" in md
    # The node timeline: five node groups, every drained node with its times from the drain job.
    for group, count in (("control-plane", 2), ("istio", 2), ("ng-shared", 3), ("others", 2), ("logging", 2)):
        assert f"### {group} ({count} nodes)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ip-")]
    assert len(rows) == 11
    # Cordoned, drain began and ended for every node; "blocked" holds a time where a budget refused
    # an eviction for a while (the `others` nodes, whose pods the Istio restart left mid-rollout).
    assert all(line.count(" UTC |") in (3, 4) and line.endswith(" UTC |") for line in rows), rows
    assert "Approved**: U0COORD: " in md


def test_an_interactive_rehearsal_asks_and_can_stop() -> None:
    result = rehearse("eks-nodegroups", stdin="U0SHADOW\nabort\n")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "snapshot-pre (start): approve as [U0PRIMARY/U0SHADOW]" in result.stdout
    assert "@U0SHADOW (shadow) approved the start of `snapshot-pre`" in result.stdout
    assert "Run *aborted* — rehearsal stopped" in result.stdout


CHECKS_START = (
    "checks (start): approve as [U0PRIMARY], 'reject REASON', 'skip REASON' (people did it by hand, or it "
    "does not apply), or 'abort': "
)


def test_a_refused_or_unknown_answer_says_why_and_asks_again_until_abort() -> None:
    result = rehearse("eks-nodegroups", stdin="U0SHADOW\nU0SHADOW\nU0NOBODY\nU0PRIMARY\nabort\n")
    out = result.stdout
    # The shadow approves snapshot-pre; at checks the shadow and a typo are refused with the
    # gate's reason and the same question comes back; the primary is then counted.
    assert out.count(CHECKS_START) == 3
    # Whoever answered is named as the bot's lines name people, with their role: never a bare id.
    assert CHECKS_START + "  · @U0SHADOW (shadow): this step needs the primary; you are the shadow\n" in out
    assert (
        CHECKS_START + "  · @U0NOBODY: this step needs the primary; you are not in this run's roster\n" in out
    )
    assert CHECKS_START + "  ↳ ✔️ @U0PRIMARY (primary) approved the start of `checks`" in out
    # The check action then fails on the scenario's planted blockers and the run pauses: at a
    # prompt nobody skips it for you, so the rehearsal stops there (exit status 3: paused).
    assert "❌ *`checks` failed* in run" in out
    assert "Run *paused* — step checks failed: pre-flight check for 1.25 FAILED" in out
    assert "nobody in the roster" not in out + result.stderr
    assert result.returncode == 3, result.stderr[-3000:]
    assert out.rstrip().endswith(" paused at checks")
    assert "\nwhy: step checks failed: pre-flight check for 1.25 FAILED" in out


def test_the_end_of_input_after_a_wrong_answer_stops_the_rehearsal() -> None:
    result = rehearse("eks-nodegroups", stdin="U0SHADOW\nU0NOBODY\n")
    assert (
        CHECKS_START + "  · @U0NOBODY: this step needs the primary; you are not in this run's roster\n"
        in (result.stdout)
    )
    # The question was asked again, and the end of input answered it.
    assert result.stdout.count(CHECKS_START) == 2
    assert result.returncode == 1
    assert result.stderr.strip() == "rehearsal stopped"
    assert "nobody in the roster" not in result.stdout + result.stderr


def test_the_istio_plan_rehearses_with_its_quorum_and_destructive_steps() -> None:
    result = rehearse("istio-revision", "--auto-approve")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    # Two different members of the mesh group make the quorum; destructive steps were confirmed.
    assert "S0MESHTEAM-member-1 (mesh) approved the start of `ns-payments`" in out
    assert "S0MESHTEAM-member-2 (mesh) approved the start of `ns-payments`" in out
    assert "approved the start of `remove-old`" in out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("rehearsal of istio-revision: run R")
    assert last.endswith(" completed")


def test_an_unknown_plan_name_lists_the_built_in_plans(tmp_path: Path) -> None:
    result = subprocess.run(
        [*bot_command(), "rehearse", "eks-nodegroup"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    assert (
        "no plan file 'eks-nodegroup' (a path, or a built-in plan: aks-managed, eks-managed, eks-nodegroups, gke-managed, istio-revision)"
        in result.stderr
    )


@pytest.mark.slow
def test_each_node_a_rehearsed_drain_cordons_names_the_run_step_and_approvers(
    sim_factory: Callable[..., SimCluster], tmp_path: Path
) -> None:
    # In-process, to watch the sim's nodes while the bot drains them (the sim then ends each one).
    speed = 600.0
    sim = sim_factory("eks-nodegroups", speed=speed, seed=1)
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig", context="sim")
    api = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    core = client.CoreV1Api(api)
    trails: dict[str, str] = {}
    said: dict[str, str] = {}
    nodes, events = watch.Watch(), watch.Watch()

    # A stream still open when the sim stops at the test's end is cut there (`Watch.stop` is only
    # seen at the next event): that end is not what the test looks at.
    # A minute without a change (the settle phase's evidence steps) times a stream's read out: it is
    # watched again, from a fresh list, until the rehearsal has ended.
    ended = threading.Event()

    def follow_nodes() -> None:
        while not ended.is_set():
            with contextlib.suppress(ProtocolError, ReadTimeoutError):
                for event in nodes.stream(core.list_node, _request_timeout=(5, 60)):
                    meta = event["object"].metadata
                    if CORDONED_BY in (meta.annotations or {}):
                        trails.setdefault(meta.name, meta.annotations[CORDONED_BY])

    def follow_events() -> None:
        # Watched, not listed at the end: at 600x the Events' one-hour TTL passes in six seconds.
        while not ended.is_set():
            with contextlib.suppress(ProtocolError, ReadTimeoutError):
                for event in events.stream(core.list_namespaced_event, "default", _request_timeout=(5, 60)):
                    ev = event["object"]
                    if ev.reason == "UpgradeBotDrain":
                        said.setdefault(ev.involved_object.name, ev.message)

    for follow in (follow_nodes, follow_events):
        threading.Thread(target=follow, daemon=True).start()
    out = io.StringIO()
    try:
        code = rehearse_plan(
            "eks-nodegroups",
            sim_url=sim.url,
            kubeconfig=kubeconfig,
            workdir=tmp_path,
            auto_approve=True,
            out=out,
            ask=lambda question: "abort",
            connect_cluster=KubeCluster.connect,
            clock=lambda: datetime.fromtimestamp(sim.core.clock.now(), UTC),
            # As `upgrade-bot rehearse` passes its sim's speed: the jobs wait between ticks in the
            # sim's seconds (without it each EKS poll and drain retry waited real seconds).
            speed=speed,
        )
    finally:
        ended.set()
        nodes.stop()
        events.stop()
    assert code == 3, out.getvalue()[-3000:]
    run_id = re.search(r"\*Upgrade run (\S+)\*", out.getvalue())
    assert run_id is not None
    # Every drained node said who cordoned it: the run, its drain step, the job and the approvers.
    drained = re.findall(r"node (\S+) drained: ", out.getvalue())
    assert len(drained) == 11
    assert set(trails) == set(drained)
    for node, trail in trails.items():
        match = re.fullmatch(r"run=(\S+) step=(drain-\S+) job=\d+ approved-by=(\S+)", trail)
        assert match is not None, (node, trail)
        assert match.group(1) == run_id.group(1)
        assert "U0" in match.group(3)
    # ... and so did an Event on each (`kubectl describe node` lists it).
    assert set(said) == set(drained)
    prefix = f"cordoned for a drain by upgrade-bot: run {run_id.group(1)}, step drain-"
    assert all(m.startswith(prefix) for m in said.values()), said
    api.close()


CHECKS_PAUSED = (
    "checks failed and the run is paused: 'skip REASON' (as @U0PRIMARY (primary), and whoever else its gate needs), "
    "'resume' (its gate opens again), "
    "or 'abort': "
)


def test_interactive_offers_skip_resume_abort_at_a_failed_step_with_piped_answers() -> None:
    # stdin is a pipe, not a terminal: `--interactive` asks for what a terminal gets by default.
    answers = "U0SHADOW\nU0PRIMARY\nretry\nskip\nskip reviewed: tracked in CHG-1125\nabort\n"
    result = rehearse("eks-nodegroups", "--interactive", stdin=answers)
    out = result.stdout
    assert "❌ *`checks` failed* in run" in out
    # A word it does not know, and a skip without a reason, are answered and asked again.
    assert out.count(CHECKS_PAUSED) == 3
    assert CHECKS_PAUSED + "  · answer 'skip REASON', 'resume' or 'abort'\n" in out
    assert CHECKS_PAUSED + "  · say why: skip REASON (it goes on the card and into the audit log)\n" in out
    # Skipped as the roster would in Slack: resumed, then the step skipped with the reason on record.
    assert "▶️ Run resumed by @U0PRIMARY: reviewed: tracked in CHG-1125" in out
    assert "⏩ @U0PRIMARY skipped `checks`: reviewed: tracked in CHG-1125" in out
    # The run goes on to the next gate, where the last answer stops it.
    assert "announce-start (start): approve as [" in out
    assert "Run *aborted* — rehearsal stopped" in out
    assert result.returncode == 1, result.stderr[-3000:]
    assert out.rstrip().endswith(" aborted")


BY_HAND_PLAN = """\
name: by-hand
cluster: prod
current_version: "1.29.4"
target_version: "1.30.2"
window: {start: "2026-11-28T22:00", end: "2026-11-29T03:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
steps:
  - id: tell-payments
    title: Tell the payments team
    gate: {any_of: [primary]}
    done: {any_of: [shadow]}
  - id: snapshot-pre
    title: Snapshot before
    gate: {any_of: [primary]}
    actions:
      - snapshot: {label: pre}
"""
BY_HAND_START = (
    "tell-payments (start): approve as [U0PRIMARY], 'reject REASON', 'skip REASON' (people did it by hand, "
    "or it does not apply), or 'abort': "
)


def test_interactive_skips_a_step_people_did_by_hand_at_its_gate_with_the_reason_on_record(
    tmp_path: Path,
) -> None:
    """At a gate the prompt offered approve, reject or abort: a step people did by hand (or that does
    not apply) could not be skipped, as `/upgrade skip STEP --reason …` does in Slack."""
    plan = tmp_path / "by-hand.yaml"
    plan.write_text(BY_HAND_PLAN, encoding="utf-8")
    answers = "skip\nskip told them by phone at 14:00\nabort\n"
    result = rehearse(str(plan), "--scenario", "small", "--interactive", stdin=answers)
    out = result.stdout
    # A skip without a reason is answered and asked again, as the paused prompt does.
    assert out.count(BY_HAND_START) == 2, out[-3000:]
    assert BY_HAND_START + "  · say why: skip REASON (it goes on the card and into the audit log)\n" in out
    # Voted as the gate counts it, the reason on record; the run goes on to the next gate.
    assert BY_HAND_START + "  ↳ @U0PRIMARY (primary) votes to skip tell-payments\n" in out
    assert "⏩ @U0PRIMARY skipped `tell-payments`: told them by phone at 14:00" in out
    assert (
        "⏩ `tell-payments` Tell the payments team — skipped · _skipped by @U0PRIMARY: told them by phone at 14:00_"
        in out
    )
    # Only a step not started yet can be skipped: the next gate offers it too, and abort stops there.
    assert "snapshot-pre (start): approve as [U0PRIMARY], 'reject REASON', 'skip REASON' (" in out
    assert "Run *aborted* — rehearsal stopped · 1 done (1 skipped)" in out
    assert result.returncode == 1, result.stderr[-3000:]


def test_interactive_resume_reopens_the_failed_steps_gate_and_runs_it_again() -> None:
    result = rehearse(
        "eks-nodegroups", "--interactive", stdin="U0SHADOW\nU0PRIMARY\nresume\nU0PRIMARY\nabort\n"
    )
    out = result.stdout
    assert "▶️ Run resumed by @U0PRIMARY: rehearsal: @U0PRIMARY resumes `checks`" in out
    # The check ran twice (approved again after the resume) and failed twice; then aborted.
    assert out.count("❌ *`checks` failed* in run") == 2
    assert out.count(CHECKS_PAUSED) == 2
    assert "Run *aborted* — rehearsal stopped" in out
    assert result.returncode == 1, result.stderr[-3000:]


def test_interactive_and_auto_approve_exclude_each_other() -> None:
    result = rehearse("eks-nodegroups", "--interactive", "--auto-approve")
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr


CHECK_ONLY_PLAN = """\
name: checks-only
cluster: prod
current_version: "1.24.17"
target_version: "1.25.16"
window: {start: "2026-11-28T22:00", end: "2026-11-29T03:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW]}
steps:
  - id: checks
    title: Pre-flight checks
    gate: {any_of: [primary]}
    actions:
      - check: {to: "1.25"}
"""
#: A team that reviewed the gatekeeper webhook and accepts it: the rest of the scenario's Required
#: findings are real problems, so the step still fails on them.
HOOK_ONLY = """\
checks:
  ignore:
    - finding: HOOK001
      objects: [gatekeeper-validating-webhook-configuration, gatekeeper-system/gatekeeper-webhook-service]
      reason: gatekeeper is reinstalled by its own pipeline right after the control plane (CHG-1125)
"""
#: A fixture team that accepted every Required finding the scenario plants: the cluster's, and the
#: EKS checks' (the rehearsal points the cluster's provider at the sim's AWS APIs).
ALL_ACCEPTED = HOOK_ONLY + "".join(
    f"    - {{finding: {f}, reason: accepted in the review of CHG-1125}}\n"
    for f in ("API001", "PDB001", "SKEW004", "EKS001", "EKS005", "EKS008", "EKS010")
)


def test_the_teams_ignore_list_applies_to_a_rehearsed_check_step_and_its_line_names_it(
    tmp_path: Path,
) -> None:
    plan = tmp_path / "checks-only.yaml"
    plan.write_text(CHECK_ONLY_PLAN, encoding="utf-8")
    partial = tmp_path / "partial.yaml"
    partial.write_text(HOOK_ONLY, encoding="utf-8")
    every = tmp_path / "every.yaml"
    every.write_text(ALL_ACCEPTED, encoding="utf-8")

    failed = rehearse(str(plan), "--auto-approve", "--config", str(partial))
    assert "*`checks` failed* in run" in failed.stdout, failed.stdout + failed.stderr
    assert "FAILED: 9 Required — API001 (" in failed.stdout
    assert "EKS001 (Subnet subnet-0c0a10000000000a1)" in failed.stdout  # the EKS checks ran too
    assert "relied on checks.ignore[0] (HOOK001 gatekeeper-validating-webhook-configuration" in failed.stdout
    assert "reviewed why `checks` failed and skips it" in failed.stdout

    passed = rehearse(str(plan), "--auto-approve", "--config", str(every))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    line = next(x for x in passed.stdout.splitlines() if "`checks` succeeded" in x)
    assert "pre-flight check for 1.25 passed: no Required findings left unaccepted" in line
    # Each acceptance it relied on is named by its place in the list (the line is fitted to its
    # length: some are left to the report).
    named = re.findall(r"checks\.ignore\[(\d+)\] \((\w+)", line)
    listed = ("HOOK001", "API001", "PDB001", "SKEW004", "EKS001", "EKS005", "EKS008", "EKS010")
    assert len(named) >= 4
    assert all(listed[int(i)] == finding for i, finding in named)
    assert "accepted in the review of CHG-1125" in line


def test_a_bad_ignore_list_stops_the_rehearsal_naming_its_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("checks:\n  ignore:\n    - {finding: API001}\n", encoding="utf-8")
    done = rehearse("eks-nodegroups", "--config", str(config))
    assert done.returncode == 2
    assert "checks.ignore[0].reason: missing: say why this finding is accepted" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_teams_checks_images_runs_img001_against_the_sims_registry_and_plain_prints_ascii(
    tmp_path: Path,
) -> None:
    config = tmp_path / "team.yaml"
    config.write_text("checks:\n  images:\n    verify: true\n    docker_config: docker.json\n")
    (tmp_path / "docker.json").write_text('{"auths": {}}')
    result = rehearse(
        "eks-nodegroups", "--plain", "--config", str(config), stdin="U0SHADOW\nU0PRIMARY\nabort\n"
    )
    assert result.returncode == 3, result.stderr[-3000:]
    out = result.stdout
    # The target kube-proxy is not in the sim's registry (only the images the scenario runs are):
    # the check step's Required findings name IMG001, as they would on the day.
    paused = next(line for line in out.splitlines() if line.startswith("why: step checks failed"))
    assert "IMG001" in paused
    # --plain: ASCII only, the emoji as words.
    assert out.isascii()
    assert "[x] `checks` failed in run" in out  # Slack's bold dropped too


DRAIN_WORKERS_PLAN = """\
name: drain-workers
cluster: prod
current_version: "1.29.4"
target_version: "1.30.2"
window: {start: "2026-11-28T22:00", end: "2026-11-29T03:00", timezone: Asia/Tokyo}
channels: {operations: C0OPS}
roster: {primary: [U0PRIMARY], shadow: [U0SHADOW], coordinator: [U0COORD]}
steps:
  - id: drain-workers
    title: Drain the workers
    gate: {approve: [primary, shadow]}
    actions:
      - drain: {nodegroup: workers, version: "1.30.2", timeout: 1m}
"""


def test_a_plain_interactive_rehearsal_asks_a_drain_blocked_by_a_budget_in_plain_text(tmp_path: Path) -> None:
    """The drain's question quotes the bot's text (":warning: Deleting them would go past …"): its
    prompt is shown as the transcript is with --plain, not with Slack's markup."""
    plan = tmp_path / "drain-workers.yaml"
    plan.write_text(DRAIN_WORKERS_PLAN, encoding="utf-8")
    # The small scenario's workers hold its web tier, whose budget allows one pod down: draining the
    # whole group at once leaves the next pods nowhere to go, and the budget blocks them.
    # "skip" asks why; an empty reason is refused and the question asked again.
    why = "the web tier's budget is the web team's; they move it after the window"
    answers = f"U0PRIMARY\nU0SHADOW\nskip\n\nskip\n{why}\nskip {why}\nskip {why}\n"
    result = rehearse(str(plan), "--scenario", "small", "--interactive", "--plain", stdin=answers)
    out = result.stdout
    asked = re.search(
        r"^job \d+ asks: Drain of node (\S+): .*?\(then a reason if it needs one\): ", out, re.M | re.S
    )
    assert asked is not None, out[-3000:]
    prompt = asked[0]
    assert (
        "; blocked by default/web. What now?\n[!] Deleting them would go past PodDisruptionBudget default/web"
        in (prompt)
    )
    assert prompt.endswith(" [wait/delete/skip] (then a reason if it needs one): ")
    # Plain text: no emoji codes or emoji, no mentions, no bold, ASCII only.
    assert not re.search(r":[a-z_]+:|<@|<!|\*\w", prompt), prompt
    assert prompt.isascii(), prompt
    # The answer is said in the thread by name, in plain text too.
    assert "  why? (it goes into the thread and the audit log): " in out
    assert '  * "Skip this node" needs a reason: skip REASON' in out
    assert f"-> node {asked[1]}: @U0PRIMARY ({why}) chose to skip it; it stays cordoned" in out
    # A node skipped, still cordoned: the run completed, not all done, and says so (exit 3).
    assert result.returncode == 3, result.stderr[-3000:]
    assert "completed with 1 step not all done" in out


def test_the_rehearsals_reason_on_record_fits_the_question() -> None:
    from bot.core.jobs.eks import INSIGHTS
    from bot.frontdoor.rehearse import rehearsal_why

    # It said "deletes the pods a disruption budget holds" of a force past EKS's insights.
    assert rehearsal_why(f"{INSIGHTS}:1.25") == (
        "forces past EKS's upgrade insights: the callers of the removed APIs move after the window"
    )
    assert rehearsal_why("force:u-1") == "deletes the pods a disruption budget holds, as the pipeline would"
    assert rehearsal_why("api-block:x").startswith("overrides AKS's deprecated-API block")


def test_a_rehearsal_hook_naming_no_such_node_group_says_the_sims_answer_and_the_step(tmp_path: Path) -> None:
    """It ended "did not answer nodegroups/logs/replace: HTTP Error 400: Bad Request", naming no
    step and hiding the sim's own words (which node groups there are)."""
    text = (PLANS / "eks-nodegroups.yaml").read_text()
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        text.replace("replace_node_group: {name: control-plane,", "replace_node_group: {name: logs,", 1)
    )
    done = rehearse(str(typo), "--scenario", "eks-nodegroups", "--auto-approve", timeout=600)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "upgrade-bot: step launch-control-plane: its rehearsal hook replace_node_group: the simulated cluster refused "
        "nodegroups/logs/replace: "
    ), last
    assert "no node group 'logs'; known: " in last


def test_a_rehearsals_log_can_be_json_lines_as_the_bots() -> None:
    done = rehearse(
        "istio-revision", "--auto-approve", "--log-level", "INFO", "--log-format", "json", timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines
    records = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message", "correlation_id", "run_id"} <= set(records[0])


def test_a_gate_is_answered_once_its_message_is_posted(tmp_path: Path) -> None:
    # What the roster waits for before answering a gate a job's driver opened: the gate's message,
    # claimed and then recorded with its ts by another thread (as the driver posts it).
    store = Store.open(f"sqlite:///{tmp_path / 'bot.db'}")
    sr = R.StepRun(step_id="watch-settle", state=R.StepState.AWAITING_APPROVAL, epoch=3)
    run = cast(R.Run, SimpleNamespace(id="R1"))
    service = cast(RunService, SimpleNamespace(store=store))
    posted = threading.Event()

    def driver() -> None:
        store.claim_message(
            run_id="R1", key=gate_key(sr), channel="C1", thread_ts="1.0", at=datetime.now(UTC)
        )
        threading.Event().wait(0.3)  # the gate's dry run is read between the claim and the post
        posted.set()
        store.record_message(run_id="R1", key=gate_key(sr), channel="C1", ts="5.0")

    thread = threading.Thread(target=driver)
    thread.start()
    _await_gate_post(service, run, sr)
    assert posted.is_set()
    thread.join()


def test_the_plans_window_opens_as_the_rehearsal_starts_as_long_as_written_in_its_zone() -> None:
    # A plan is rehearsed as it would run in its window, on whatever day: its written dates had
    # passed, and every card said "window ended … 29 days ago".
    plan, text = load_plan_file("eks-nodegroups")
    now = datetime(2027, 3, 10, 23, 47, 31, tzinfo=UTC)
    moved, said = window_opening_now(text, plan, now)
    window = parse_plan(moved).window
    assert window.start == datetime(2027, 3, 10, 23, 47, tzinfo=UTC)
    assert window.timezone == plan.window.timezone == "Asia/Tokyo"
    assert window.length == plan.window.length == timedelta(hours=3)
    assert parse_plan(moved).steps == plan.steps
    assert said == (
        "rehearsal: the plan's window (2026-12-01 14:00 – 17:00 Asia/Tokyo, 3h) opens as the run starts: "
        "2027-03-11 08:47 – 11:47 Asia/Tokyo on the sim's clock"
    )


@pytest.mark.slow
@SHARES_THE_REHEARSAL
def test_the_rehearsed_run_counts_down_to_its_window_from_its_start(eks_auto_approved: Rehearsed) -> None:
    out = eks_auto_approved.result.stdout
    assert (
        "rehearsal: the plan's window (2026-12-01 14:00 – 17:00 Asia/Tokyo, 3h) opens as the run starts: "
        in out
    )
    first_card = out.split("Run *active*", 1)[1].split("\n", 1)[0]
    # From its own start: the sim's clock runs 600 × real time, so a loaded machine's second or
    # two before the first card is 10–20 minutes of it; never "ended", never the written dates.
    assert re.search(r"window ends \S+ \S+ \S+ \(2h[3-5]\dm left\)", first_card), first_card


@pytest.mark.slow
def test_a_plan_that_outlasts_its_window_is_told_so_in_the_rehearsal_once(tmp_path: Path) -> None:
    # The runbook's plan with a one-hour window: its node groups alone take longer on the sim's
    # clock. A bot's run ticker tells the thread; the rehearsal has none, and asks between steps.
    text = (BUILTIN_PLANS / "eks-nodegroups.yaml").read_text(encoding="utf-8")
    plan = tmp_path / "eks-short-window.yaml"
    plan.write_text(text.replace('end: "2026-12-01T17:00"', 'end: "2026-12-01T15:00"', 1), encoding="utf-8")
    result = rehearse(str(plan), "--auto-approve")
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    assert "(2026-12-01 14:00 – 15:00 Asia/Tokyo, 1h) opens as the run starts" in result.stdout
    (told,) = [line for line in result.stdout.splitlines() if "The upgrade window ended" in line]
    assert told.startswith("  ↳ (also in the channel) ⚠️ The upgrade window ended "), told
    assert "more step" in told
