"""A paused run says what to do (issue 40): why it paused, who may resume, skip or waive, and the
buttons for it — each decided by the stopped step's roles and four eyes. Through the real Slack
door: signed clicks and modal submissions, the real slack_sdk client against the stub, the EKS
runbook on the simulated cluster.

Three kinds of pause are tested here: a step that failed (a failure reported on its done gate), a
Required finding (the `checks` step's check action), and an evidence gate's Inconclusive (the
`alerts` job against the sim's Alertmanager facade refusing the bot's credentials): Wait, Waive…
(two people, with reasons, audited) and Abort."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from bot.core.runs.report import build_report, to_html, to_json
from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import CARD, start_front
from tests.support.plans import EKS
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub, block_kit_problems

PRIMARY, SHADOW, COORD, STRANGER = "U0PRIMARY", "U0SHADOW", "U0COORD", "U0STRANGER"


@pytest.fixture
def bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_eks: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Bot]:
    kubeconfig = sim_kubeconfig(sim_eks)
    team = kubeconfig.parent / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "eks-nodegroups.yaml").write_text(EKS)
    config = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


EVIDENCE_PLAN = """\
name: evidence-settle
cluster: prod
current_version: "1.29"
target_version: "1.30"
window: {start: "2026-11-29T00:00", end: "2026-12-10T00:00", timezone: UTC}
channels: {operations: C0OPS}
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [U0COORD]
steps:
  - id: settle
    title: No new alerts
    gate: {any_of: [primary]}
    actions: [{alerts: {settle: 10m, timeout: 30m}}]
  - id: next-group
    title: Next node group
    gate: {approve: [primary, shadow]}
"""


@dataclass
class _Named:
    """The kube adapter's one attribute the alerts job reads: the cluster's configured name."""

    name: str


@pytest.fixture
def evidence_bot(
    write_config: Callable[..., Path],
    slack_stub: SlackStub,
    sim_small: Any,
    sim_kubeconfig: Callable[[Any], Path],
) -> Iterator[Bot]:
    kubeconfig = sim_kubeconfig(sim_small)
    team = kubeconfig.parent / "team"
    (team / "plans").mkdir(parents=True)
    (team / "plans" / "evidence-settle.yaml").write_text(EVIDENCE_PLAN)
    config = write_config(
        f"channels: {{operations: C0OPS}}\ntemplates_dir: {team}\n"
        f"clusters:\n  prod: {{kubeconfig: {kubeconfig}, context: sim, "
        f"alertmanager: {{url: '{sim_small.url}/alertmanager'}}, alert_matchers: ['cluster=\"prod\"']}}\n"
    )
    for user in (PRIMARY, SHADOW, COORD):
        slack_stub.users[user] = {"id": user}
    pool = TrackedPool(4)
    with start_front(
        load_settings(config, slack_env(slack_stub.api_url)), slack_stub, workers=pool, threads=8
    ) as front:
        yield Bot(front=front, pool=pool)


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def card_when(bot: Bot, needle: str) -> tuple[str, list[dict[str, Any]]]:
    """The card as Slack shows it once its text holds `needle` (edits follow the click's answer): text, blocks."""
    card_ts = bot.cards()[0]["ts"]

    def latest() -> tuple[str, list[dict[str, Any]]] | None:
        edits = [c.params for c in bot.stub.calls_to("chat.update") if c.params["ts"] == card_ts]
        if edits and needle in edits[-1]["text"]:
            return str(edits[-1]["text"]), _blocks(edits[-1])
        return None

    found: tuple[str, list[dict[str, Any]]] = bot.stub.wait_for(latest, timeout=30)
    return found


def buttons(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The paused card's buttons by action id."""
    (row,) = [b for b in blocks if b.get("block_id") == "card_paused"]
    return {el["action_id"]: el for el in row["elements"]}


def opened_view(bot: Bot, before: int) -> dict[str, Any]:
    """The one modal opened since `before` views.open calls."""
    calls = bot.stub.calls_to("views.open")
    assert len(calls) == before + 1, [c.params for c in calls]
    view = calls[-1].params["view"]
    return json.loads(view) if isinstance(view, str) else dict(view)


def submit(bot: Bot, user: str, view: dict[str, Any], values: dict[str, Any]) -> str:
    """Submit a modal as `user` and wait for the work it queued; the HTTP answer's body."""
    jobs = bot.pool.count()
    answer = bot.front.submit_view(
        user, callback_id=view["callback_id"], private_metadata=view["private_metadata"], values=values
    )
    assert answer.status == 200
    if not answer.body:
        bot.pool.wait_idle(jobs)
    return answer.body


def typed(text: str) -> dict[str, Any]:
    return {"typed": {"type": "plain_text_input", "value": text}}


def test_a_required_finding_pauses_the_run_with_resume_skip_and_waive_for_the_right_people(bot: Bot) -> None:
    assert "loaded" in bot.command("plan load eks-nodegroups")
    assert "started" in bot.command("start eks-nodegroups")
    assert bot.click(PRIMARY, bot.gate("snapshot-pre")) is None
    assert bot.click(PRIMARY, bot.gate("checks")) is None

    text, blocks = card_when(bot, "Run *paused*")
    # Why it paused, in the card's own words, with the findings that caused it.
    assert ":double_vertical_bar: *Now: `checks` is stopped* — Required findings failed it: `API001`" in text
    assert "`PDB001`" in text
    # Who may resume, skip or waive: the roles, with their people as mentions.
    assert (
        f"• *Resume* — its gate opens again; nothing re-runs until it is approved. Who: the primary <@{PRIMARY}>"
        in text
    )
    assert (
        f"• *Skip…* — the run goes on without it; asks why (thread and audit log). Who: the primary <@{PRIMARY}>"
        in text
    )
    assert (
        f"• *Waive…* — accept one of these findings for a while (asks how long and why), then Resume to run "
        f"the check again; a Required finding's waiver is asked by one of the primary <@{PRIMARY}> or the "
        f"shadow <@{SHADOW}> and confirmed by another role (`/upgrade waive confirm ID`)"
    ) in text
    found = buttons(blocks)
    assert list(found) == ["paused_resume", "paused_skip", "paused_waive"]
    assert [b["text"]["text"] for b in found.values()] == ["Resume", "Skip…", "Waive…"]
    value = found["paused_resume"]["value"]
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []

    # The wrong people: each button says why, ephemeral, and nothing changes.
    resume = bot.click(SHADOW, value, "paused_resume")
    assert resume is not None
    assert "resuming `checks` is for the primary, who holds its gate; you are the shadow" in resume
    skip = bot.click(STRANGER, value, "paused_skip")
    assert skip is not None
    assert "skipping `checks` needs the primary, as its gate does; you are not in this run's roster" in skip
    views = len(bot.stub.calls_to("views.open"))
    waive = bot.click(COORD, value, "paused_waive")
    assert waive is not None
    assert "a Required finding's waiver is asked by the primary or the shadow" in waive
    assert len(bot.stub.calls_to("views.open")) == views  # no modal for the wrong people
    assert "Run *paused*" in bot.card()

    # Waive… as the shadow: a modal with the findings that paused the run, a duration and a reason.
    assert bot.click(SHADOW, value, "paused_waive") is None
    view = opened_view(bot, views)
    options = [o["value"] for o in view["blocks"][1]["element"]["options"]]
    assert options[0] == "API001"
    assert "PDB001" in options
    bad = submit(
        bot,
        SHADOW,
        view,
        {
            "finding": {"picked": {"type": "static_select", "selected_option": {"value": "PDB001"}}},
            "duration": typed("forever"),
            "reason": typed(" "),
        },
    )
    errors = json.loads(bad)["errors"]
    assert set(errors) == {"duration", "reason"}
    assert (
        submit(
            bot,
            SHADOW,
            view,
            {
                "finding": {"picked": {"type": "static_select", "selected_option": {"value": "PDB001"}}},
                "duration": typed("14d"),
                "reason": typed("billing's budget is fixed in CHG-7"),
            },
        )
        == ""
    )
    # `/upgrade waive`'s rules: a Required finding's waiver is pending until a second role confirms.
    (waiver,) = bot.services.store.waivers()
    assert (waiver.finding, waiver.state, waiver.requested_by, waiver.cluster) == (
        "PDB001",
        "pending",
        SHADOW,
        "prod",
    )
    assert waiver.reason == "billing's budget is fixed in CHG-7"
    asked = [p for p in bot.posts() if p.get("channel") == "C0OPS" and "Waiver *1* of `PDB001`" in p["text"]]
    assert len(asked) == 1
    assert f"asked by <@{SHADOW}>" in asked[0]["text"]

    # Resume as the primary: the gate of `checks` opens again; the card's old buttons are stale.
    assert bot.click(PRIMARY, value, "paused_resume") is None
    active, _ = card_when(bot, "Run *active*")
    assert ":hourglass_flowing_sand: Now: `checks` — waiting for the primary" in active
    assert "failed before: pre-flight check for 1.25 FAILED" in active
    stale = bot.click(PRIMARY, value, "paused_skip")
    assert stale is not None
    assert "is active; Skip… is for a paused run" in stale

    # The check runs again, fails again (the waiver is not confirmed): Skip… as the primary.
    assert bot.click(PRIMARY, bot.gate("checks")) is None
    _, blocks = card_when(bot, "Run *paused*")
    again = buttons(blocks)["paused_skip"]["value"]
    assert again != value
    views = len(bot.stub.calls_to("views.open"))
    assert bot.click(PRIMARY, again, "paused_skip") is None
    view = opened_view(bot, views)
    assert view["callback_id"] == "paused_skip_reason"
    blank = submit(bot, PRIMARY, view, {"reason": typed("  ")})
    assert json.loads(blank)["errors"] == {"reason": "Say why: it goes into the thread and the audit log."}
    assert submit(bot, PRIMARY, view, {"reason": typed("reviewed with the payments team, CHG-1125")}) == ""
    text, blocks = card_when(bot, ":fast_forward: `checks`")
    assert "Run *active*" in text
    assert "card_paused" not in json.dumps(blocks)
    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    assert (
        f":fast_forward: <@{PRIMARY}> skipped `checks`: reviewed with the payments team, CHG-1125" in thread
    )
    refused = [e for e in bot.services.store.audit_entries() if e.kind == "run" and e.outcome == "refused"]
    # The shadow's and a stranger's clicks, the primary's stale one, then the blank reason the
    # modal refused (audited as every click is).
    assert [e.user_id for e in refused] == [SHADOW, STRANGER, SHADOW, PRIMARY, PRIMARY], [
        (e.user_id, e.subcommand, e.detail) for e in refused
    ]
    assert refused[2].detail.startswith("duration: ")  # the waiver's modal: "forever", no reason
    assert refused[-1].detail == "reason: Say why: it goes into the thread and the audit log."


def test_the_cards_waiver_covers_the_objects_the_check_found_and_a_new_one_still_fails(
    bot: Bot, sim_eks: Any, sim_kubeconfig: Callable[[Any], Path]
) -> None:
    # The Waive… modal once waived the whole finding: a PodDisruptionBudget at 0 that appeared
    # after people waived billing's then passed the next check under their waiver, unseen.
    assert "loaded" in bot.command("plan load eks-nodegroups")
    assert "started" in bot.command("start eks-nodegroups")
    assert bot.click(PRIMARY, bot.gate("snapshot-pre")) is None
    assert bot.click(PRIMARY, bot.gate("checks")) is None
    _, blocks = card_when(bot, "Run *paused*")
    value = buttons(blocks)["paused_waive"]["value"]
    views = len(bot.stub.calls_to("views.open"))
    assert bot.click(SHADOW, value, "paused_waive") is None
    view = opened_view(bot, views)
    assert (
        "on the objects this check found it on (the same finding on another object still fails)"
        in (view["blocks"][0]["text"]["text"])
    )
    picked = {"picked": {"type": "static_select", "selected_option": {"value": "PDB001"}}}
    reason = typed("billing's budget is fixed in CHG-7")
    assert submit(bot, SHADOW, view, {"finding": picked, "duration": typed("14d"), "reason": reason}) == ""
    (waiver,) = bot.services.store.waivers()
    assert waiver.objects == ("PodDisruptionBudget billing/ledger", "Deployment billing/ledger")
    (asked,) = [p["text"] for p in bot.posts() if "Waiver *1* of `PDB001`" in p["text"]]
    assert "`PDB001` for PodDisruptionBudget billing/ledger, Deployment billing/ledger on *prod*" in asked
    assert "confirmed by" in bot.command(f"waive confirm {waiver.id}", user=PRIMARY)

    # Another team's budget at 0 appears before the check runs again: it is not what was waived.
    api = client.PolicyV1Api(
        config.new_client_from_config(config_file=str(sim_kubeconfig(sim_eks)), persist_config=False)
    )
    api.create_namespaced_pod_disruption_budget(
        "payments",
        {
            "metadata": {"name": "payments-api-strict"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "payments-api"}}},
        },
    )
    assert bot.click(PRIMARY, value, "paused_resume") is None
    card_when(bot, "Run *active*")
    assert bot.click(PRIMARY, bot.gate("checks")) is None
    text, _ = card_when(bot, "Run *paused*")
    assert "`PDB001`" in text.split("Required findings failed it:", 1)[1].split("\n", 1)[0]
    assert "PDB001 (PodDisruptionBudget payments/payments-api-strict" in text
    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    assert any("relied on waiver 1 (PDB001" in t for t in thread)  # billing's is still accepted


def test_a_failed_step_pauses_the_run_and_its_skip_needs_the_gates_two_people(bot: Bot) -> None:
    assert "loaded" in bot.command("plan load eks-nodegroups")
    assert "started" in bot.command("start eks-nodegroups")
    assert bot.click(PRIMARY, bot.gate("snapshot-pre")) is None
    assert bot.click(PRIMARY, bot.gate("checks")) is None
    card_when(bot, "Run *paused*")
    assert "active" in bot.command("resume --reason reviewed")
    assert "skipped" in bot.command("skip checks --reason reviewed in CHG-1125")
    assert bot.click(COORD, bot.gate("announce-start")) is None
    assert bot.click(PRIMARY, bot.gate("announce-start")) is None

    def fail_control_plane() -> str:
        """Start control-plane (the primary and the shadow), then the shadow reports it failed."""
        assert bot.click(PRIMARY, bot.gate("control-plane")) is None
        assert bot.click(SHADOW, bot.gate("control-plane")) is None
        views = len(bot.stub.calls_to("views.open"))
        assert bot.click(SHADOW, bot.gate("control-plane"), "gate_reject") is None
        view = opened_view(bot, views)
        assert submit(bot, SHADOW, view, {"reason": typed("the apply timed out on the node IAM role")}) == ""
        text, blocks = card_when(bot, "Run *paused*")
        assert ":double_vertical_bar: *Now: `control-plane` is stopped* — it failed." in text
        assert (
            "Run *paused* — step control-plane failed: reported failed by <@U0SHADOW>: the apply timed out"
            in text
        )
        # The skip needs both people, as the step's gate does (four eyes).
        assert (
            "• *Skip…* — the run goes on without it; asks why (thread and audit log); needs the primary and "
            f"the shadow to agree, as its gate does. Who: the primary <@{PRIMARY}> or the shadow <@{SHADOW}>"
        ) in text
        assert "Waive…" not in text
        # `checks` failed and was skipped earlier: the progress says so, but no "completed" yet.
        assert "· 1 failed and skipped ·" in text
        assert "Completed with" not in text
        found = buttons(blocks)
        assert list(found) == ["paused_resume", "paused_skip"]  # no finding: no Waive…
        assert block_kit_problems("chat.update", {"blocks": blocks}) == []
        return str(found["paused_resume"]["value"])

    value = fail_control_plane()
    # Resume: the coordinator does not hold the step's gate; a stranger is not in the run.
    wrong = bot.click(COORD, value, "paused_resume")
    assert wrong is not None
    assert (
        "resuming `control-plane` is for the primary or the shadow, who hold its gate; you are the coordinator"
        in wrong
    )
    assert bot.click(STRANGER, value, "paused_resume") is not None
    assert bot.click(SHADOW, value, "paused_resume") is None
    card_when(bot, "Run *active*")
    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    assert any(t.startswith(f":arrow_forward: Run resumed by <@{SHADOW}>") for t in thread), thread

    value = fail_control_plane()
    # Skip…: the coordinator is refused before any modal; then one vote each from two people.
    views = len(bot.stub.calls_to("views.open"))
    wrong = bot.click(COORD, value, "paused_skip")
    assert wrong is not None
    assert (
        "skipping `control-plane` needs the primary and the shadow, as its gate does; you are the coordinator"
        in wrong
    )
    assert len(bot.stub.calls_to("views.open")) == views

    def vote(user: str, reason: str) -> None:
        before = len(bot.stub.calls_to("views.open"))
        assert bot.click(user, value, "paused_skip") is None
        assert submit(bot, user, opened_view(bot, before), {"reason": typed(reason)}) == ""

    vote(PRIMARY, "the control plane was upgraded by hand, CHG-1130")
    text, _ = card_when(bot, f"voted so far: <@{PRIMARY}>")
    assert "Run *paused*" in text
    # A second vote from the same person counts once: refused before the modal.
    twice = bot.click(PRIMARY, value, "paused_skip")
    assert twice is not None
    assert "you have already voted to skip `control-plane`; it still needs the shadow" in twice
    vote(SHADOW, "confirmed: the API server reports 1.25")
    text, _ = card_when(bot, ":fast_forward: `control-plane`")
    assert "Run *active*" in text
    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    assert f":ballot_box_with_check: <@{PRIMARY}> (primary) voted to skip `control-plane`" in "\n".join(
        thread
    )
    assert any(
        t.startswith(
            # Both voters, not only the second (whose click made the skip count).
            f":fast_forward: `control-plane` skipped by <@{PRIMARY}> and <@{SHADOW}>: the control plane was "
            "upgraded by hand"
        )
        for t in thread
    ), thread
    run = bot.services.runs.resolve(None)
    note = run.step_run("control-plane").note
    assert note.startswith(
        f"skipped by {PRIMARY}+{SHADOW}: the control plane was upgraded by hand, CHG-1130; "
    )
    assert note.endswith(
        " · it had failed: reported failed by U0SHADOW: the apply timed out on the node IAM role"
    )
    # Every card (and every post) the stub received was valid Block Kit.
    assert bot.stub.invalid == []
    assert all(
        CARD not in str(p["text"]) or not block_kit_problems("chat.postMessage", p) for p in bot.posts()
    )


def _drive_alerts(bot: Bot) -> None:
    """Play the job driver's part: tick the step's alerts job until it ends or asks people."""
    jobs = bot.services.jobs
    (row,) = [r for r in bot.services.store.jobs() if r.kind == "alerts"]
    if not row.owner:
        assert jobs.claim(row)
    for _ in range(5):
        step = jobs.advance(row.id, cluster=_Named("prod"))
        if step.done or step.waiting_for_people or step.lost:
            return
    raise AssertionError("the alerts job never stopped")


def test_inconclusive_evidence_pauses_the_run_with_wait_waive_and_abort_for_the_right_people(
    evidence_bot: Bot, sim_small: Any
) -> None:
    bot = evidence_bot
    sim_small.sim.evidence.alertmanager_mode = "401"
    assert "loaded" in bot.command("plan load evidence-settle")
    assert "started" in bot.command("start evidence-settle")
    assert bot.click(PRIMARY, bot.gate("settle")) is None
    _drive_alerts(bot)

    text, blocks = card_when(bot, "Run *paused*")
    assert (
        ":double_vertical_bar: *Now: `settle` is stopped* — its evidence is Inconclusive: Alertmanager "
        "refused the bot's credentials (HTTP 401). No data never passes."
    ) in text
    assert (
        f"• *Wait* — check the evidence again (the run goes on; it pauses again while there is no answer). Who: the primary <@{PRIMARY}>"
        in text
    )
    assert (
        "• *Waive…* — the step passes on people's word, without evidence; asks why (thread and audit log); "
        f"needs two people: the primary <@{PRIMARY}> and the shadow <@{SHADOW}>"
    ) in text
    assert (
        f"• *Abort* — the step fails (the run stays paused on the failure). Who: the primary <@{PRIMARY}>"
        in text
    )
    assert "*Resume*" not in text
    assert "*Skip…*" not in text
    found = buttons(blocks)
    assert list(found) == ["paused_wait", "paused_evidence_waive", "paused_abort"]
    assert [b["text"]["text"] for b in found.values()] == ["Wait", "Waive…", "Abort"]
    assert found["paused_abort"]["confirm"]["title"]["text"] == "Fail this step?"
    assert block_kit_problems("chat.update", {"blocks": blocks}) == []
    value = found["paused_wait"]["value"]

    # The wrong people: each button says why, ephemeral, and nothing changes.
    wait = bot.click(SHADOW, value, "paused_wait")
    assert wait is not None
    # Each refusal names what the person tried (not "resuming", which no button here does) and who may.
    assert (
        "waiting for fresh evidence on `settle` is for the primary, who holds its gate; you are the shadow"
        in wait
    )
    views = len(bot.stub.calls_to("views.open"))
    waive = bot.click(COORD, value, "paused_evidence_waive")
    assert waive is not None
    assert "waiving Inconclusive evidence needs the primary and the shadow; you are the coordinator" in waive
    assert len(bot.stub.calls_to("views.open")) == views
    abort = bot.click(STRANGER, value, "paused_abort")
    assert abort is not None
    assert (
        "aborting `settle` is for the primary, who holds its gate; you are not in this run's roster" in abort
    )
    assert "Run *paused*" in bot.card()

    # Wait as the primary: the run goes on, the job checks again, still no data: paused again.
    assert bot.click(PRIMARY, value, "paused_wait") is None
    card_when(bot, "Run *active*")
    _drive_alerts(bot)
    text, blocks = card_when(bot, "Run *paused*")
    assert "its evidence is Inconclusive" in text
    again = buttons(blocks)["paused_abort"]["value"]

    # Abort as the primary: the step fails; the run stays paused on the failure (Resume / Skip…).
    assert bot.click(PRIMARY, again, "paused_abort") is None
    _drive_alerts(bot)
    text, blocks = card_when(bot, "it failed")
    assert "alerts: aborted with no trustworthy answer from Alertmanager" in text
    assert list(buttons(blocks)) == ["paused_resume", "paused_skip"]
    assert bot.click(PRIMARY, buttons(blocks)["paused_resume"]["value"], "paused_resume") is None
    card_when(bot, "Run *active*")
    assert bot.click(PRIMARY, bot.gate("settle")) is None
    _drive_alerts(bot)
    _, blocks = card_when(bot, "its evidence is Inconclusive")
    third = buttons(blocks)["paused_evidence_waive"]["value"]

    # Waive…: the primary's vote (modal, reason), then the shadow's makes it count.
    assert bot.click(PRIMARY, third, "paused_evidence_waive") is None
    view = opened_view(bot, views)
    assert view["callback_id"] == "paused_evidence_waive_reason"
    assert submit(bot, PRIMARY, view, {"reason": typed(" ")}) != ""  # a blank reason is refused
    assert (
        submit(bot, PRIMARY, view, {"reason": typed("Alertmanager token rotates at 15:00; Grafana is green")})
        == ""
    )
    assert "Run *paused*" in bot.card()
    twice = bot.click(PRIMARY, third, "paused_evidence_waive")
    assert twice is not None
    assert "you have already voted to waive the evidence of `settle`" in twice
    assert bot.click(SHADOW, third, "paused_evidence_waive") is None
    view = opened_view(bot, views + 1)
    assert submit(bot, SHADOW, view, {"reason": typed("checked the dashboards too")}) == ""
    card_when(bot, "Run *active*")
    _drive_alerts(bot)
    card_when(bot, "`settle` No new alerts")
    run = bot.services.runs.load(bot.services.store.runs()[0].id)
    assert run.step_run("settle").state.value == "succeeded"
    audit = [e.detail for e in bot.services.store.audit_entries(limit=200)]
    waived = [d for d in audit if "waived by" in d]
    assert waived
    assert f"<@{PRIMARY}> (Alertmanager token rotates at 15:00; Grafana is green)" in waived[0]
    assert f"<@{SHADOW}> (checked the dashboards too)" in waived[0]
    # Each vote from the modal, and the answer it gave the step's job, is audited with the
    # channel and the correlation id of its click, as every button's row is.
    from_modal = [
        e
        for e in bot.services.store.audit_entries(limit=200)
        if e.subcommand == "evidence_waive_voted" or e.detail.startswith("decided:")
    ]
    assert [e.subcommand for e in from_modal].count("evidence_waive_voted") == 2
    assert len(from_modal) == 5  # and the Wait and the Abort the job was given
    assert {(e.channel_id, bool(e.correlation_id), e.source) for e in from_modal} == {
        ("C0OPS", True, "slack")
    }
    # The card says the step passed on people's word, not measured: past a safeguard, by whom, why.
    text, _ = card_when(bot, "`settle` No new alerts — succeeded")
    assert (
        ":warning: `settle` No new alerts — succeeded *past a safeguard by people's choice:* evidence waived by "
        f"<@{PRIMARY}> (Alertmanager token rotates at 15:00; Grafana is green) and <@{SHADOW}> (checked the dashboards too)"
    ) in text
    assert ":white_check_mark: `settle`" not in text
    # The thread's line of the waiver names both voters as mentions (it showed `&lt;@…&gt;`).
    posts = [c.params["text"] for c in bot.stub.calls_to("chat.postMessage") if c.params.get("thread_ts")]
    (said,) = [t for t in posts if t.startswith("alerts: waived by")]
    # In the card's words: each person with their reason (it read "waived by <@S>: <@P>: …; <@S>: …").
    assert said == (
        f"alerts: waived by <@{PRIMARY}> (Alertmanager token rotates at 15:00; Grafana is green) and <@{SHADOW}> "
        "(checked the dashboards too)"
    )
    assert "&lt;@" not in said
    # The step's line says who waived it once: the job's words (its note) are not repeated beside it.
    assert "alerts job 2: alerts: waived by" not in text
    assert text.count("Alertmanager token rotates at 15:00") == 1
    assert "&lt;@" not in text
    # The report: Waived everywhere (the alert timeline, the JSON), with why nothing was measured.
    report = build_report(bot.services.store, run.id)
    (lane,) = report.alert_lanes
    assert (lane.view.outcome, lane.view.unavailable) == (
        "Waived",
        "Alertmanager refused the bot's credentials (HTTP 401)",
    )
    data = json.loads(to_json(report))
    assert data["alert_lanes"][0]["view"]["outcome"] == "Waived"
    (entry,) = data["evidence"]
    assert entry["outcome"] == "Waived"
    assert (
        entry["summary"]
        == "Alerts: could not be read (Alertmanager refused the bot's credentials (HTTP 401))"
    )
    assert entry["alerts"]["unavailable"] == "Alertmanager refused the bot's credentials (HTTP 401)"
    # Read outside Slack: the people named, never a `<@U…>` mention or its escape.
    assert report.findings[-1] == (
        f"job 2: evidence:waived: alerts: waived by {PRIMARY} (Alertmanager token rotates at 15:00; "
        f"Grafana is green) and {SHADOW} (checked the dashboards too)"
    )
    assert "<@" not in entry["detail"]
    assert "&lt;@" not in entry["detail"]
    html = to_html(report, charts=None)
    assert "Successful" not in html
    assert "0 new since" not in html


def _paused_on_evidence(bot: Bot, sim_small: Any) -> int:
    """The evidence plan started, its `settle` step's alerts job paused on a 401: the job's id."""
    sim_small.sim.evidence.alertmanager_mode = "401"
    assert "loaded" in bot.command("plan load evidence-settle")
    assert "started" in bot.command("start evidence-settle")
    assert bot.click(PRIMARY, bot.gate("settle")) is None
    _drive_alerts(bot)
    card_when(bot, "Run *paused*")
    (row,) = [r for r in bot.services.store.jobs() if r.kind == "alerts"]
    return row.id


def test_the_thread_and_choose_answer_inconclusive_evidence_by_the_cards_rules(
    evidence_bot: Bot, sim_small: Any
) -> None:
    # The question in the thread (its buttons, `/upgrade choose`) is another door to the card's
    # Wait / Waive… / Abort: one person's waive there was once a waiver, and the run stayed paused.
    bot = evidence_bot
    job = _paused_on_evidence(bot, sim_small)
    # The job's own section says why too (it once said "settle 10m left · 0 new", as if passing).
    assert (
        "> Waiting on evidence: alerts Inconclusive — Alertmanager refused the bot's credentials (HTTP 401)"
        in bot.card()
    )
    (question,) = [p for p in bot.posts() if f"job_choice:{job}" in json.dumps(p.get("blocks") or [])]
    assert "• *Wait* — a holder of the step's gate" in question["text"]
    assert (
        "• *Waive* — two people, one of them the primary and the other the shadow (with a reason)"
        in (question["text"])
    )

    # The shadow's waive is a vote: the question stays open, the run paused.
    vote = bot.command(f"choose {job} waive --reason the proxy is broken", user=SHADOW)
    assert "“Waive”: your vote is recorded; waiving needs the primary and the shadow" in vote
    row = bot.services.store.job(job)
    assert row is not None
    assert not row.decision
    assert "Run *paused*" in bot.card()
    assert "you have already voted to waive the evidence of `settle`" in (
        bot.command(f"choose {job} waive --reason again", user=SHADOW)
    )

    # The primary's makes it count: the run resumes, and the step passes on both people's word.
    assert "Waive: recorded" in bot.command(f"choose {job} waive --reason Grafana is green", user=PRIMARY)
    card_when(bot, "Run *active*")
    _drive_alerts(bot)
    card_when(bot, "`settle` No new alerts")
    run = bot.services.runs.load(bot.services.store.runs()[0].id)
    assert run.state.value == "active"
    assert run.step_run("settle").state.value == "succeeded"
    assert (
        f"<@{SHADOW}> (the proxy is broken) and <@{PRIMARY}> (Grafana is green)"
        in run.step_run("settle").note
    )


def test_an_abort_by_choose_fails_the_step_and_the_run_stays_paused_on_the_failure(
    evidence_bot: Bot, sim_small: Any
) -> None:
    # Before, the run stayed paused on the evidence and the step "running" for good: the job's end
    # could not pause a paused run, and was dropped.
    bot = evidence_bot
    job = _paused_on_evidence(bot, sim_small)
    # The refusal names the abort the shadow tried (it said "resuming `settle`" before).
    assert "aborting `settle` is for the primary, who holds its gate; you are the shadow" in (
        bot.command(f"choose {job} abort", user=SHADOW)
    )
    assert "Abort: recorded" in bot.command(f"choose {job} abort", user=PRIMARY)
    _drive_alerts(bot)
    text, blocks = card_when(bot, "it failed")
    assert "alerts: aborted with no trustworthy answer from Alertmanager" in text
    assert list(buttons(blocks)) == ["paused_resume", "paused_skip"]
    run = bot.services.runs.load(bot.services.store.runs()[0].id)
    assert run.state.value == "paused"
    assert run.step_run("settle").state.value == "failed"


def test_an_answer_to_a_question_on_a_run_paused_by_hand_names_what_was_tried(
    evidence_bot: Bot, sim_small: Any
) -> None:
    # A run paused for another reason over an open question takes Wait and Abort from the step's
    # gate; the shadow's was refused as "answering the evidence of `settle`", not saying what it was.
    bot = evidence_bot
    job = _paused_on_evidence(bot, sim_small)
    run_id = bot.services.store.runs()[0].id
    assert "is active" in bot.command(f"resume {run_id}", user=PRIMARY)
    assert "is paused" in bot.command(f"pause {run_id} --reason payments batch", user=COORD)
    assert (
        "waiting for fresh evidence on `settle` is for the primary, who holds its gate; you are the shadow"
        in (bot.command(f"choose {job} wait", user=SHADOW))
    )
    assert "aborting `settle` is for the primary, who holds its gate; you are the coordinator" in (
        bot.command(f"choose {job} abort", user=COORD)
    )
