"""The EKS runbook end to end through the HTTP front door: signed commands and clicks, the Slack
stub, the simulated cluster. Every gate needs the right people; strangers, self-approvals, double
clicks and stale buttons are refused (ephemeral) and audited; the card always shows the truth."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kube import Cluster
from bot.core.jobs.base import Choice
from bot.core.jobs.drain import SKIP, WAIT
from bot.core.jobs.service import choice_json
from bot.records import JobRow
from bot.settings import load_settings
from tests.support.awaited import Bot, TrackedPool
from tests.support.front import start_front
from tests.support.plans import EKS
from tests.support.secrets import slack_env
from tests.support.slack_stub import SlackStub

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
    # The runbook of human node-group steps, by the shipped plan's name (a team file wins).
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


def audited(bot: Bot, outcome: str) -> list[tuple[str, str, str]]:
    return [
        (e.user_id, e.subcommand, e.detail)
        for e in bot.services.store.audit_entries()
        if e.kind == "run" and e.outcome == outcome
    ]


@pytest.mark.slow
def test_the_eks_runbook_runs_end_to_end_with_the_right_people(bot: Bot) -> None:
    loaded = bot.command("plan load eks-nodegroups")
    assert "Plan `eks-nodegroups` loaded" in loaded, loaded
    assert "started" in bot.command("start eks-nodegroups")
    cards = bot.cards()
    assert len(cards) == 1
    assert cards[0]["channel"] == "C0OPS"

    # A stranger's click is refused and audited.
    first = bot.gate("snapshot-pre")
    refusal = bot.click(STRANGER, first)
    assert refusal is not None
    assert "this step needs the primary or the shadow; you are not in this run" in refusal
    assert audited(bot, "refused")[-1][:2] == (STRANGER, "refused")

    # The snapshot runs on the simulated cluster once the primary approves.
    assert bot.click(PRIMARY, first) is None
    assert ":white_check_mark: `snapshot-pre`" in bot.card()
    # The same button again is from an earlier state of the step.
    stale = bot.click(SHADOW, first)
    assert stale is not None
    assert "earlier state of step `snapshot-pre`" in stale

    # checks: the pre-flight check action finds the scenario's planted blockers and fails the step;
    # the run pauses until someone resumes it (a fresh gate, nothing re-run) and skips the step
    # with the reason on record.
    assert bot.click(PRIMARY, bot.gate("checks")) is None

    # The card's edits are made by the bot's duties, after the click's answer: wait for the failure.
    def failed_card() -> str | None:
        text = bot.card()
        return text if ":x: `checks` Pre-flight checks — failed" in text else None

    card = bot.stub.wait_for(failed_card)
    assert "pre-flight check for 1.25 FAILED: 6 Required — API001 (" in card
    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    (failed,) = [t for t in thread if "*`checks` failed*" in t]
    assert "PDB001 (PodDisruptionBudget billing/ledger …and 1 more)" in failed, failed
    reason, who = failed.split("\n")
    assert reason.endswith("17 Recommended — the full report is attached")
    # The run paused on it: the people who decide are mentioned in the post (a card's edit pings nobody).
    assert who == "Who decides (resume, skip with a reason or abort, on the card): the primary <@U0PRIMARY>"
    # The full report is uploaded into the run's thread, once, right after the step's failure line.
    (upload,) = bot.stub.calls_to("files.completeUploadExternal")
    assert upload.params["thread_ts"] == cards[0]["ts"]
    assert upload.params["channel_id"] == "C0OPS"
    (report,) = bot.stub.uploads.values()
    assert b"HOOK001" in report
    assert b"**Fix:**" in report
    failed_line = next(
        i for i, c in enumerate(bot.stub.calls) if "*`checks` failed*" in str(c.params.get("text", ""))
    )
    assert bot.stub.calls.index(upload) > failed_line
    assert "Run *paused*" in card
    assert "active" in bot.command("resume --reason the findings are reviewed")
    skipped = bot.command("skip checks --reason known: tracked in CHG-1125")
    assert "Step `checks`" in skipped, skipped
    assert ":fast_forward: `checks`" in bot.card()

    # announce-start: the coordinator starts it, and cannot confirm it done alone (four eyes).
    assert bot.click(COORD, bot.gate("announce-start")) is None
    self_approval = bot.click(COORD, bot.gate("announce-start"))
    assert self_approval is not None
    assert "four eyes" in self_approval
    assert bot.click(PRIMARY, bot.gate("announce-start")) is None

    # control-plane needs the primary and the shadow: a double click counts once.
    assert bot.click(SHADOW, bot.gate("control-plane")) is None
    double = bot.click(SHADOW, bot.gate("control-plane"))
    assert double is not None
    assert "already approved this step; it still needs the primary" in double
    assert "waiting for the primary" in bot.card()
    assert bot.click(PRIMARY, bot.gate("control-plane")) is None
    assert bot.click(SHADOW, bot.gate("control-plane")) is None  # done (the primary started it)

    for group in ("ng-control-plane", "ng-istio", "ng-shared", "ng-others", "ng-logging"):
        assert bot.click(PRIMARY, bot.gate(group)) is None
        assert bot.click(SHADOW, bot.gate(group)) is None
        # Finished steps collapse into one line per run of them ("3 done: `a`, … `c`").
        assert re.search(rf":white_check_mark: (\d+ done: [^\n]*)?`{group}`", bot.card()), bot.card()

    assert bot.click(SHADOW, bot.gate("snapshot-post")) is None
    assert bot.click(PRIMARY, bot.gate("diff")) is None
    assert re.search(r":white_check_mark: (\d+ done: [^\n]*)?`diff`", bot.card()), bot.card()
    assert bot.click(COORD, bot.gate("announce-done")) is None
    assert bot.click(PRIMARY, bot.gate("announce-done")) is None

    card = bot.card()
    assert "Run *completed" in card
    # The card at a glance: the progress line, the one skipped step in full, the last step; who
    # approved what is in the thread, not on the card.
    # `checks` failed before it was skipped: the ending says so rather than "12 done" (issue 40).
    assert "Run *completed with 1 failed step skipped* · 11 done · 1 failed and skipped" in card
    assert "• `checks` failed: pre-flight check for 1.25 FAILED: 6 Required — API001 (" in card
    assert f"skipped by <@{PRIMARY}>: _known: tracked in CHG-1125_" in card
    assert card.count(":fast_forward:") == 1
    assert "`announce-done`" in card
    assert f"started: <@{PRIMARY}>" not in card
    assert any(f"<@{SHADOW}> (shadow) confirmed done" in p["text"] for p in bot.posts()), bot.posts()
    # One card, edited in place; every thread post distinct.
    posts = bot.posts()
    assert len(bot.cards()) == 1
    # Every thread post distinct, but for the gate of `checks` opened afresh when the run resumed.
    seen: dict[tuple[Any, str], int] = {}
    for p in posts:
        seen[(p.get("thread_ts"), p["text"])] = seen.get((p.get("thread_ts"), p["text"]), 0) + 1
    repeated = [text for (_, text), n in seen.items() if n > 1]
    assert len(repeated) == 1
    assert seen[next(k for k in seen if k[1] == repeated[0])] == 2
    assert "*Pre-flight checks* (`checks`) — ready to start" in repeated[0]
    refused = [(user, detail) for user, _, detail in audited(bot, "refused")]
    assert len(refused) == 4
    assert [u for u, _ in refused] == [STRANGER, SHADOW, COORD, SHADOW]
    status = bot.command("status")
    assert "Run *completed" in status or "No run is active" in status


DRILL = f"""\
name: drill
cluster: prod
current_version: "1.24"
target_version: "1.25"
window: {{start: "2026-11-28T22:00", end: "2026-11-29T03:00", timezone: Europe/Berlin}}
roster:
  primary: [{PRIMARY}]
  shadow: [{SHADOW}]
  coordinator: [{COORD}]
steps:
  - id: wipe
    title: Delete the old node group
    gate: {{any_of: [primary]}}
    done: {{any_of: [shadow]}}
    destructive: true
  - id: after
    title: Check the dashboards
    gate: {{any_of: [shadow]}}
    done: {{any_of: [primary]}}
"""


def test_destructive_steps_commands_and_handoff(bot: Bot) -> None:
    team = Path(str(bot.services.settings.templates_dir))
    (team / "plans" / "drill.yaml").write_text(DRILL)
    assert "loaded" in bot.command("plan load drill")
    bot.command("start drill")
    run_id = bot.services.store.runs()[0].id

    # A destructive step's approval opens a modal asking for the step id, typed.
    assert bot.click(PRIMARY, bot.gate("wipe")) is None
    (opened,) = bot.stub.calls_to("views.open")
    view = opened.params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert "Type `wipe`" in json.dumps(view)
    wrong = bot.submit_confirmation(PRIMARY, view["private_metadata"], "yes")
    assert json.loads(wrong) == {
        "response_action": "errors",
        "errors": {"confirm": "Type wipe exactly to approve."},
    }
    assert bot.services.runs.load(run_id).step_run("wipe").state == "awaiting_approval"
    # Refused in the modal, and audited as every click is.
    assert (PRIMARY, "approve", "confirm: Type wipe exactly to approve.") in audited(bot, "refused")
    jobs = bot.pool.count()
    assert bot.submit_confirmation(PRIMARY, view["private_metadata"], "wipe") == ""
    bot.pool.wait_idle(jobs)
    assert bot.services.runs.load(run_id).step_run("wipe").state == "running"
    # `status` (not the card, which stays short) lists each approval, whose and when.
    status = bot.command("status", user=COORD)
    assert "*Approvals*\n• `wipe` start: <@U0PRIMARY> (primary) at <!date^" in status, status
    assert "*Approvals*" not in bot.card()

    # Someone else's role is not theirs to hand over: the holder's or the coordinator's word.
    taken = bot.command(f"handoff shadow <@{PRIMARY}> --run {run_id}", user=PRIMARY)
    assert "only the shadow or the coordinator may hand the shadow over" in taken
    # A mention Slack does not know (a typo) would give the role to nobody: refused.
    typo = bot.command(f"handoff shadow <@U0NEWSHADOW> --run {run_id}", user=COORD)
    assert "Slack has no active user U0NEWSHADOW" in typo
    # The shadow goes off shift: the coordinator hands the role over, for this run only.
    bot.stub.users["U0NEWSHADOW"] = {"id": "U0NEWSHADOW"}
    assert "is now" in bot.command(f"handoff shadow <@U0NEWSHADOW> --run {run_id}", user=COORD)
    # `whoami` says where a run's own roster differs from the configured one.
    assert f"In run `{run_id}` (drill): shadow" in bot.command("whoami", user="U0NEWSHADOW")
    assert f"In run `{run_id}` (drill): no role" in bot.command("whoami", user=SHADOW)
    refused = bot.click(SHADOW, bot.gate("wipe"))
    assert refused is not None
    assert "you are not in this run's roster" in refused
    assert bot.click("U0NEWSHADOW", bot.gate("wipe")) is None

    # Paused: nothing can be approved, and the card says why.
    assert "paused" in bot.command(f"pause {run_id} --reason lunch break", user=COORD)
    assert "Run *paused* — lunch break" in bot.card()
    refused = bot.click("U0NEWSHADOW", bot.gate("after"))
    assert refused is not None
    assert "paused" in refused
    assert "say why" in bot.command(f"abort {run_id}", user=COORD)
    assert "active" in bot.command(f"resume {run_id}", user=PRIMARY)
    # Skipping is voted as the step's gate is approved: the shadow's step, not the primary's.
    assert "skipping `after` needs the shadow, as its gate does; you are the primary" in bot.command(
        "skip after --reason checked by hand", user=PRIMARY
    )
    assert "skipped" in bot.command("skip after --reason checked by hand", user="U0NEWSHADOW")
    assert "Run *completed*" in bot.card()
    assert ":fast_forward: `after`" in bot.card()
    stranger = bot.command(f"pause {run_id} --reason x", user=STRANGER)
    assert "not in it" in stranger
    kinds = [e.subcommand for e in bot.services.store.audit_entries(run_id=run_id)]
    assert {"handoff", "run_paused", "run_resumed", "step_skipped", "run_completed"} <= set(kinds)
    # The run ended: its report went into its thread (issue 31) — the timeline picture with a
    # summary, the HTML and the Markdown — once, however often the run is published again.
    card = bot.services.store.messages(run_id)["card"]
    reported = bot.stub.wait_for(lambda: len(bot.stub.calls_to("files.completeUploadExternal")) >= 3 or None)
    assert reported
    uploaded = bot.stub.calls_to("files.completeUploadExternal")
    assert [c.params.get("thread_ts") for c in uploaded] == [card.ts] * 3
    titles = [json.loads(c.params["files"])[0]["title"] for c in uploaded]
    assert titles == [f"Run {run_id}: timeline", f"Run {run_id}: report", f"Run {run_id}: report (Markdown)"]
    assert f"*Report of run `{run_id}`* (drill on prod, 1.24 → 1.25): completed: 1 of 2 steps" in str(
        uploaded[0].params.get("initial_comment")
    )
    pictures = [body for body in bot.stub.uploads.values() if body.startswith(b"\x89PNG")]
    assert len(pictures) == 1
    assert bot.services.runs.cards is not None
    bot.services.runs.cards.publish(bot.services.runs.load(run_id))
    assert len(bot.stub.calls_to("files.completeUploadExternal")) == 3
    # The run's whole trail, as files.
    uploads = len(bot.stub.uploads)
    bot.command(f"audit {run_id}", user=PRIMARY)
    files = list(bot.stub.uploads.values())[uploads:]
    assert len(files) == 2
    csv_text = next(f for f in files if f.startswith(b"at_utc")).decode()
    assert "handoff" in csv_text
    assert "lunch break" in csv_text
    assert "Europe/Berlin" in csv_text


def test_a_plan_uploaded_to_slack_is_loaded_by_its_link_and_a_bad_one_lists_its_problems(bot: Bot) -> None:
    bot.stub.files["F0DRILL"] = DRILL
    loaded = bot.command(f"plan load <{bot.stub.file_url('F0DRILL')}>")
    assert "Plan `drill` loaded" in loaded
    (download,) = bot.stub.calls_to("files-pri")
    assert download.headers["authorization"].startswith("Bearer ")
    # The roster was checked against Slack: each user once.
    assert sorted(c.params["user"] for c in bot.stub.calls_to("users.info")) == [COORD, PRIMARY, SHADOW]
    bot.stub.files["F0BAD"] = DRILL.replace("any_of: [shadow]", "any_of: [sre]").replace("1.25", "1.2x")
    refused = bot.command(f"plan load {bot.stub.file_url('F0BAD')}")
    assert "the plan has 3 problem(s)" in refused
    assert "plan.yaml:4: target_version: '1.2x' is not a version" in refused
    assert "plan.yaml:14: steps[0](wipe).done.any_of: unknown role 'sre'" in refused
    assert "plan.yaml:18: steps[1](after).gate.any_of: unknown role 'sre'" in refused
    assert "ref " in refused  # a correlation id, never a traceback
    # A YAML slip is said to its sender alone, in plain words, at its line and column.
    bot.stub.files["F0SLIP"] = DRILL.replace(
        "    title: Check the dashboards", "     title: Check the dashboards"
    )
    slipped = bot.command(f"plan load {bot.stub.file_url('F0SLIP')}")
    assert bot.stub.responses[-1]["response_type"] == "ephemeral"
    assert (
        "plan.yaml:17:6: invalid YAML: `title:` is indented deeper than `id:` above it (line 16), whose value "
        "is already on that line: a key indented 1 space too far?"
    ) in slipped
    assert "mapping values" not in slipped
    shown = bot.command("plan show drill")
    assert "`wipe` Delete the old node group" in shown
    assert "destructive" in shown


def test_a_link_to_anywhere_but_slack_never_receives_the_bot_token(bot: Bot) -> None:
    import http.server

    seen: list[dict[str, str]] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"name: stolen\n")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        foreign = f"http://127.0.0.1:{server.server_port}/files-pri/T0TEAM-F0X/plan.yaml"
        refused = bot.command(f"plan load <{foreign}>")
        assert "that is not a link to a file shared in Slack" in refused
        assert seen == []
        assert bot.stub.calls_to("files-pri") == []
    finally:
        server.shutdown()
        server.server_close()
    # A missing file at Slack's own origin is a clear refusal, not a traceback.
    missing = bot.command(f"plan load {bot.stub.file_url('F0NOPE')}")
    assert "Slack did not hand over that file" in missing
    assert "Traceback" not in missing


def test_an_action_naming_what_is_not_there_is_refused_before_anyone_is_asked(bot: Bot) -> None:
    nosuch = bot.command('action cordon node=nosuch --reason "bad disk"')
    assert "no such node: nosuch" in nosuch, nosuch
    empty = bot.command('action drain nodegroup=ng-nobody --reason "retire it"')
    assert "node group 'ng-nobody' has no nodes" in empty, empty
    arabic = bot.command('action cordon nodegroup=ng-shared version=١.٢٥ --reason "old ones"')
    assert "is not a version like 1.30" in arabic, arabic
    long_name = bot.command(f'action cordon node={"a" * 254} --reason "typo"')
    assert "at most 253 characters" in long_name, long_name
    gone = bot.command('action restart workloads=deployment/default/nosuch --reason "stuck"')
    assert "no such workload: deployment/default/nosuch" in gone, gone
    for reply in (nosuch, empty, arabic, long_name, gone):
        assert "internal error" not in reply
    assert bot.services.store.runs() == []
    assert [p for p in bot.front.posts() if p["text"].startswith(":clipboard: *Upgrade run")] == []


def test_a_plan_whose_actions_name_what_is_not_there_loads_with_warnings(bot: Bot) -> None:
    team = Path(str(bot.services.settings.templates_dir))
    steps = """
  - id: cordon-gone
    title: Cordon a node that is not there
    gate: {approve: [primary, shadow]}
    actions: [{cordon: {node: nosuch}}]
  - id: drain-shared
    title: Drain the shared group
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-shared}}]
  - id: drain-empty
    title: Drain a group with no nodes
    gate: {approve: [primary, shadow]}
    actions: [{drain: {nodegroup: ng-nobody}}]
"""
    (team / "plans" / "names.yaml").write_text(DRILL.replace("name: drill", "name: names") + steps)
    loaded = bot.command("plan load names")
    assert "Plan `names` loaded" in loaded, loaded
    assert "may change before the window" in loaded
    assert "step `cordon-gone` (cordon): no such node: nosuch" in loaded
    assert "step `drain-empty` (drain): node group 'ng-nobody' has no nodes" in loaded
    assert "drain-shared` (drain)" not in loaded
    # The plan is stored all the same: the cluster may change before the window.
    assert bot.services.store.plan("names") is not None


def test_an_action_outside_a_plan_is_a_run_that_waits_for_the_primary_and_the_shadow(bot: Bot) -> None:
    assert "not an action" in bot.command("action reboot node=x --reason why")
    assert "--reason" in bot.command("action cordon node=x")
    assert "ARG=VALUE" in bot.command("action cordon nodex --reason r")
    assert "not nodes" in bot.command("action cordon nodes=x --reason r")
    assert "roster" in bot.command("action cordon node=x --reason r", user=STRANGER)
    assert bot.services.store.runs() == []

    reply = bot.command(
        'action drain nodegroup=ng-shared allow_local_storage=true --dry-run --reason "practice"'
    )
    assert "waits for the primary and the shadow" in reply, reply
    assert "dry run: nothing will change" in reply
    (row,) = bot.services.store.runs()
    (card,) = [p["text"] for p in bot.front.posts() if p["text"].startswith(":clipboard: *Upgrade run")]
    assert "Dry run: drain nodegroup=ng-shared allow_local_storage=true dry_run=true" in card
    gate = bot.gate("drain")
    assert bot.click(PRIMARY, gate) is None
    assert bot.services.store.jobs(states=("live", "interrupted", "done")) == []  # one is not enough
    assert bot.click(SHADOW, gate) is None
    (job,) = bot.services.store.jobs(states=("live", "interrupted", "done"))
    assert (job.kind, job.run_id, job.dry_run) == ("drain", row.id, True)
    assert json.loads(job.args) == {"nodegroup": "ng-shared", "allow_local_storage": "true"}
    audit = [e for e in bot.services.store.audit_entries() if e.subcommand == "drain"]
    assert any("started: drain" in e.detail and "(dry run)" in e.detail for e in audit)


def test_a_users_argument_is_inert_in_every_line_of_the_job_it_starts(bot: Bot) -> None:
    # A node name that would ping the channel, with a right-to-left override after it: refused
    # before anyone is asked (not a Kubernetes name), and the refusal shows it as inert text.
    refused = bot.command("action cordon node=<!channel>\u202e --reason x")
    assert "is not a Kubernetes name" in refused, refused
    assert "&lt;!channel&gt;" in refused
    assert "<!channel>" not in refused
    assert "\u202e" not in refused
    # The same text as the reason of a real cordon reaches the run's card, its gate and the job's
    # thread lines: inert in every one of them.
    cluster = Cluster.connect(bot.services.settings.clusters["prod"])
    node = cluster.get_json("/api/v1/nodes", {"limit": 1})["items"][0]["metadata"]["name"]
    reply = bot.command(f"action cordon node={node} --reason <!channel>\u202e disk is failing")
    assert "waits for the primary and the shadow" in reply, reply
    gate = bot.gate("cordon")
    assert bot.click(PRIMARY, gate) is None
    assert bot.click(SHADOW, gate) is None
    (job,) = bot.services.store.jobs(states=("live",))
    assert job.kind == "cordon"
    # The triggers door's driver, in this thread: claim the job and tick it until it ends.
    jobs = bot.services.jobs
    assert jobs.claim(job)
    assert any(jobs.advance(job.id, cluster).done for _ in range(20))

    thread = [str(p["text"]) for p in bot.posts() if p.get("thread_ts")]
    assert any("cordoned" in t for t in thread), thread
    payloads = [json.dumps(c.params, ensure_ascii=False) for c in bot.stub.calls]
    payloads += [json.dumps(r, ensure_ascii=False) for r in bot.stub.responses]
    assert any("&lt;!channel&gt;" in p for p in payloads)
    for payload in payloads:
        assert "<!channel>" not in payload, payload
        assert "\u202e" not in payload, payload


def test_an_aborted_runs_open_gate_loses_its_buttons_and_says_the_run_ended(bot: Bot) -> None:
    """The gate open when a run was aborted kept Approve and Reject (whose clicks were refused)."""
    team = Path(str(bot.services.settings.templates_dir))
    (team / "plans" / "drill.yaml").write_text(DRILL)
    assert "loaded" in bot.command("plan load drill")
    bot.command("start drill")
    run_id = bot.services.store.runs()[0].id
    gate = bot.gate("wipe")
    jobs = bot.pool.count()
    assert "aborted" in bot.command(f"abort {run_id} --reason vendor outage", user=COORD)
    bot.pool.wait_idle(jobs)
    edits = [
        c.params
        for c in bot.stub.calls_to("chat.update")
        if "this start is closed; the run was aborted before the step ran" in str(c.params.get("text", ""))
    ]
    assert edits, [c.params.get("text") for c in bot.stub.calls_to("chat.update")]
    assert "gate_approve" not in json.dumps(edits[-1].get("blocks") or [])
    assert gate.startswith(run_id)
    # The card says where it stopped, not "▶ wipe · 1 to go".
    card = bot.card()
    assert "Run *aborted* — vendor outage · 0 done · stopped at `wipe` · 1 not run" in card
    # Its steps say they never ran, not "awaiting approval" and "next".
    assert ":heavy_minus_sign: `wipe`" in card
    assert card.count("— not run") == 2
    assert "awaiting approval" not in card
    assert "— next" not in card


# The first day's usual mistake: the bot never invited to the operations channel. A command that
# did its work (a plan stored, a run started) says so, with the reply it could not post, instead of
# only the failure (which sent people to do it again); `start` names where its card is not.
def test_work_done_in_a_channel_the_bot_is_not_in_is_said_done_with_its_reply(bot: Bot) -> None:
    bot.stub.fail_next(
        "chat.postMessage", error="not_in_channel", times=1000, when=lambda p: p.get("channel") == "C0OPS"
    )
    loaded = bot.command("plan load eks-nodegroups")
    assert loaded.startswith(
        ":warning: `/upgrade plan load eks-nodegroups` was done, but its reply could not be posted in <#C0OPS>: "
        "the bot is not in that channel"
    ), loaded
    assert "It said:" in loaded
    assert "loaded" in loaded.split("It said:")[1]
    assert bot.services.store.plan("eks-nodegroups") is not None  # stored: no need to load it again

    # The answer to `start` is the person's own: it says the run started, and where its card is not.
    started = bot.command("start eks-nodegroups")
    assert f"Run `{bot.services.store.runs()[0].id}` of `eks-nodegroups` started." in started
    assert ":warning: Its card could not be posted in <#C0OPS>: the bot is not in that channel" in started
    (run,) = bot.services.store.runs()
    assert run.state == "active"


def test_a_member_of_the_group_holding_a_role_hands_it_on_beside_the_group(bot: Bot) -> None:
    """The shadow is the on-call group: Alice, one of its members going off shift, hands the
    shadow to Dana (not in the group) — once refused as "only the shadow or the coordinator"."""
    team = Path(str(bot.services.settings.templates_dir))
    (team / "plans" / "drill.yaml").write_text(DRILL.replace(f"shadow: [{SHADOW}]", "shadow: [S0ONCALL]"))
    bot.stub.usergroups["S0ONCALL"] = ["U0ALICE", SHADOW]
    for user in ("U0ALICE", "U0DANA"):
        bot.stub.users[user] = {"id": user}
    assert "loaded" in bot.command("plan load drill")
    bot.command("start drill")
    run_id = bot.services.store.runs()[0].id
    # Someone outside the group still may not.
    bot.stub.users[STRANGER] = {"id": STRANGER}
    assert "you are not in it" in bot.command(f"handoff shadow <@{STRANGER}> --run {run_id}", user=STRANGER)
    # Nor a holder of another role: the shadow is the group's, or the coordinator's to give.
    assert "only the shadow or the coordinator may hand the shadow over" in bot.command(
        f"handoff shadow <@U0DANA> --run {run_id}", user=PRIMARY
    )
    assert "is now" in bot.command(f"handoff shadow <@U0DANA> --run {run_id}", user="U0ALICE")
    assert bot.services.runs.load(run_id).roster["shadow"] == ("S0ONCALL", "U0DANA")
    said = [
        c.params["text"] for c in bot.stub.calls_to("chat.postMessage") if ":handshake:" in c.params["text"]
    ]
    assert said == [
        ":handshake: <@U0ALICE> handed the shadow role to <@U0DANA> for this run, beside "
        "<!subteam^S0ONCALL> (a member of it; the group keeps the role)"
    ]
    assert f"In run `{run_id}` (drill): shadow" in bot.command("whoami", user="U0DANA")


def _asked(bot: Bot, run_id: str, key: str) -> int:
    """A drain's question about a node past its timeout, open in the run (as the drain asks it)."""
    choice = Choice(key=key, question="node n2 is not drained", options=(WAIT, SKIP))
    row = JobRow(
        id=0, run_id=run_id, step_id="after", kind="drain", cluster="prod", args="{}",
        choice=choice_json(choice), started_by=f"run:{run_id}", started_at=datetime.now(UTC),
    )  # fmt: skip
    return bot.services.store.create_job(row)


def test_the_primary_a_run_was_handed_answers_its_questions_by_command_and_button_alike(bot: Bot) -> None:
    """`/upgrade choose` asks the run's roster, with its handoffs, as the question's buttons do: the
    new primary (in no configured roster) is answered at both doors, the old one refused at both;
    each answer's audit row carries the channel and the correlation id of its click or command."""
    team = Path(str(bot.services.settings.templates_dir))
    (team / "plans" / "drill.yaml").write_text(DRILL)
    nia = "U0NIA"
    bot.stub.users[nia] = {"id": nia}
    assert "loaded" in bot.command("plan load drill")
    bot.command("start drill")
    run_id = bot.services.store.runs()[0].id
    assert "is now" in bot.command(f"handoff primary <@{nia}> --run {run_id}", user=PRIMARY)

    by_command = _asked(bot, run_id, "drain-timeout:n2:1")
    refused = bot.command(f"choose {by_command} skip --reason stuck", user=PRIMARY)
    assert f"`/upgrade choose` is for the people in run {run_id}'s roster; you are not in it" in refused
    answered = bot.command(f"choose {by_command} skip --reason the node is replaced tonight", user=nia)
    assert "Skip this node: recorded" in answered, answered

    by_button = _asked(bot, run_id, "drain-timeout:n3:1")
    value = f"{by_button}|drain-timeout:n3:1|skip"
    refusal = bot.click(PRIMARY, value, action="job_choice_skip")
    assert refusal is not None
    assert "needs the primary or shadow of this run; you are not in this run's roster" in refusal
    views = len(bot.stub.calls_to("views.open"))
    assert bot.click(nia, value, action="job_choice_skip") is None
    # Skipping a node leaves it cordoned: the button asks why first, in a modal.
    assert not bot.services.store.job(by_button).decision  # type: ignore[union-attr]
    (opened,) = bot.stub.calls_to("views.open")[views:]
    view = opened.params["view"]
    view = json.loads(view) if isinstance(view, str) else dict(view)
    jobs = bot.pool.count()
    answer = bot.front.submit_view(
        nia,
        callback_id=view["callback_id"],
        private_metadata=view["private_metadata"],
        values={"reason": {"typed": {"type": "plain_text_input", "value": "replaced tonight"}}},
    )
    assert (answer.status, answer.body) == (200, "")
    bot.pool.wait_idle(jobs)
    assert "replaced tonight" in bot.services.store.job(by_button).decision  # type: ignore[union-attr]

    decided = {
        e.arguments: e
        for e in bot.services.store.audit_entries(run_id=run_id)
        if e.detail.startswith("decided:")
    }
    assert set(decided) == {f"job {by_command}", f"job {by_button}"}
    for entry in decided.values():
        assert entry.user_id == nia
        assert entry.channel_id == "C0OPS"
        assert entry.correlation_id
    # The command's row and its answer's share the correlation id, as a click's rows do.
    (command,) = [
        e
        for e in bot.services.store.audit_entries()
        if e.kind == "command" and e.arguments.endswith("tonight")
    ]
    assert decided[f"job {by_command}"].correlation_id == command.correlation_id
    # The run's record is hers to read too; not a stranger's, nor the whole log hers.
    assert "*Audit log since " in bot.command(f"audit {run_id}", user=nia)
    assert f"*Report of run `{run_id}`*" in bot.command(f"report {run_id}", user=nia)
    bot.stub.users[STRANGER] = {"id": STRANGER}
    assert "you are not in it" in bot.command(f"report {run_id}", user=STRANGER)
    assert "you are not in it" in bot.command("audit", user=nia)
