"""A known issue's Fix… button (`known_issue_fix`): a one-step run of the rule's fix action, gated
as `/upgrade action` is (its approvers, the dry run at the gate), so the fix is audited like the
rest of the upgrade.

The button's value is short — "<watch id>|<the finding's milestone key>" — and the click finds the
rule and the workload again from the stored finding, so nothing in the value is trusted as
arguments. The click is stored in the inbox before the ack (Slack never sends an acknowledged
click again; a retry is the same delivery and is dropped), then decided on a worker:
- only people on the roster may start a fix (anyone else hears why, ephemerally);
- one run per finding: the first click claims the finding in the database (`finding_fixes`), so a
  double click, a second person or a replay after a restart is told which run it is instead of
  starting another;
- the run is started by the router as `/upgrade action KIND ARGS --cluster … --reason …` from the
  clicker, so it is refused, audited and gated exactly as that command is.
The run's number goes into the finding's thread; a refusal comes back ephemeral with a reference id.

The same button sits under a check's summary (`/upgrade check` in Slack) for a pre-flight finding
that names its gated fix (`CHECK_FIXES`: NODE002, uncordon the nodes someone left cordoned). Its
value is `check:REF|FINDING|CLUSTER|ACTION ARGS` (REF: the check's reference): no finding is stored
for a check, so the click accepts from the value only the one action the finding may name, on node
names shaped as node names — no more than the clicker could type as `/upgrade action` — and the
router and the gate check the rest as they would for that command. The claim is per check post
(`check:REF`, the finding's id); the run's number goes into the summary's thread.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.adapters.store import Store
from bot.core.checks.preflight import MAX_UNCORDON
from bot.core.checks.service import CHECK_FIXES
from bot.core.delivery import Deliveries
from bot.core.people import Directory, roles_of
from bot.core.rendering import slack_escape
from bot.core.watches.milestones import FindingFix, finding_fix, parse_finding_key
from bot.core.watches.service import WatchService, subject
from bot.errors import BotError, UserError
from bot.frontdoor.inbox import DONE_BEFORE, REPLAY, Inbox
from bot.frontdoor.slack.clicks import click_fields, take_click
from bot.frontdoor.slack.refusals import refuse_click
from bot.router import CommandRequest, Router

log = logging.getLogger(__name__)

FIX_ACTION = "known_issue_fix"


def _finding(watches: WatchService, value: str) -> tuple[int, str, FindingFix]:
    """The watch, the finding's key and its fix named by a button's value; a UserError says why not."""
    watch_text, _, key = value.partition("|")
    parsed = parse_finding_key(key)
    # ASCII digits only: `str.isdigit` and `int()` read "١" (Arabic-Indic one) as watch 1.
    if not (watch_text.isascii() and watch_text.isdigit() and len(watch_text) <= 18) or parsed is None:
        raise UserError("this button does not name a known issue")
    watch_id = int(watch_text)
    watches.get(watch_id)  # a UserError when there is no such watch
    ref = watches.store.messages(subject(watch_id)).get(key)
    if ref is None or not ref.body:
        raise UserError(f"watch {watch_id} has no such finding")
    rule_id, workload = parsed
    fix = finding_fix(next((r for r in watches.rules if r.id == rule_id), None), workload)
    if fix is None:
        raise UserError(f"known issue {rule_id} no longer names a fix for this workload; see its remediation")
    return watch_id, key, fix


#: A node's name (a DNS subdomain) and a check's reference (`bot.logsetup.new_correlation_id`).
_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_REF = re.compile(r"^[A-Za-z0-9-]{1,40}$")
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


@dataclass(frozen=True, kw_only=True)
class _Target:
    """What a click asks for: where its claim is kept, the fix, and where to say the run's number."""

    subject: str
    key: str
    fix: FindingFix
    cluster: str
    reason: str
    channel: str = ""
    thread_ts: str = ""


def _check_finding(value: str) -> tuple[str, str, str, FindingFix]:
    """The check's reference, the finding, the cluster and the fix of a check's Fix… button."""
    parts = value.split("|")
    if len(parts) != 4:
        raise UserError("this button does not name a check's finding")
    ref, finding, cluster, words = parts[0].removeprefix("check:"), parts[1], parts[2], parts[3].split(" ")
    action = CHECK_FIXES.get(finding)
    if not _REF.match(ref) or not _CLUSTER.match(cluster) or action is None:
        raise UserError("this button does not name a check's finding")
    if len(words) != 2 or words[0] != action or not words[1].startswith("node="):
        raise UserError(f"finding {finding} offers only `{action} node=…`")
    nodes = words[1].removeprefix("node=").split(",")
    if not 0 < len(nodes) <= MAX_UNCORDON or not all(_NODE.match(n) for n in nodes):
        raise UserError(f"this button names no node {action} can take")
    fix = FindingFix(
        rule_id=finding, workload=f"cluster {cluster}", action=action, args={"node": ",".join(nodes)}
    )
    return ref, finding, cluster, fix


def register(app: App, door: FixDoor) -> None:
    """Wire the Fix… button into `app`, and the inbox's fix work to `door`."""
    door.inbox.handle(FIX_ACTION, door.work)
    app.action(FIX_ACTION)(door.on_fix)


@dataclass(frozen=True, kw_only=True)
class FixDoor:
    """The Fix… button's handler (Bolt passes `ack`, `body`, `action` by name), and the work the
    inbox runs on a worker: the fix's run started through the router, once per finding."""

    watches: WatchService
    router: Router
    roster: Callable[[], Mapping[str, Sequence[str]]]
    directory: Directory
    gateway: SlackGateway
    deliveries: Deliveries | None
    inbox: Inbox
    store: Store
    clock: Callable[[], datetime]

    def refuse(self, cid: str, payload: Mapping[str, Any], message: str) -> None:
        refuse_click(self.gateway, cid, payload, message, what="fix")

    def work(self, payload: dict[str, Any], cid: str, how: str) -> None:
        if how == DONE_BEFORE:
            return  # the run was started before the restart: its card and the thread say so
        user = str(payload.get("user", ""))
        value = str(payload.get("value", ""))
        try:
            if not roles_of(user, self.roster(), self.directory):
                raise UserError("only people on the roster can start a fix")
            target = self._target(value, payload)
        except UserError as exc:
            log.info("fix %s by %s refused: %s", value[:80], user, exc.user_message)
            self.refuse(cid, payload, exc.user_message)
            return
        sub, key, fix = target.subject, target.key, target.fix
        if not self.store.claim_fix(subject=sub, key=key, by=user, at=self.clock()):
            by, run_id = self.store.finding_fix(subject=sub, key=key) or ("", "")
            # The same person's click replayed after a restart, before its run was recorded: go on.
            if not (how == REPLAY and by == user and not run_id):
                started = f"run `{run_id}`" if run_id else "a run (starting now)"
                self.refuse(cid, payload, f"a fix for this finding was already asked by <@{by}>: {started}")
                return
        words = [
            "action",
            fix.action,
            *(f"{k}={v}" for k, v in fix.args.items()),
            "--cluster",
            target.cluster,
            "--reason",
            target.reason,
        ]
        outcome = self.router.handle(
            CommandRequest(
                text=shlex.join(words),
                user_id=user,
                channel_id=str(payload.get("channel", "")),
                source="slack",
                correlation_id=cid,
            )
        )
        run_id = str(outcome.reply.context.get("run_id", "")) if outcome.ok else ""
        if not run_id:
            # Refused (the cluster did not answer, nobody to approve…): nothing started, so a
            # later click may try again.
            self.store.release_fix(subject=sub, key=key)
            self.refuse(
                cid, payload, str(outcome.reply.context.get("message") or "the fix's run was not started")
            )
            return
        self.store.record_fix(subject=sub, key=key, run_id=run_id)
        log.info("fix of %s on %s: run %s, asked by %s", fix.rule_id, fix.workload, run_id, user)
        if self.deliveries is not None and target.channel:
            text = (
                f":wrench: <@{user}> asked for the fix of *{slack_escape(fix.rule_id)}*: run `{run_id}` "
                f"(`{slack_escape(fix.command)}`) waits for its approvers in its thread."
            )
            if sub.startswith("check:"):
                text = (
                    f":wrench: <@{user}> asked for the fix of *{slack_escape(fix.rule_id)}* on "
                    f"*{slack_escape(target.cluster)}*: run `{run_id}` (`{slack_escape(fix.command)}`) "
                    "waits for its approvers in its thread."
                )
            try:
                self.deliveries.post_once(sub, f"fix:{key}", target.channel, text, thread_ts=target.thread_ts)
            except BotError as exc:
                log.warning(
                    "could not say in the thread that run %s was started: %s", run_id, exc.user_message
                )

    def _target(self, value: str, payload: Mapping[str, Any]) -> _Target:
        if value.startswith("check:"):
            ref, finding, cluster, fix = _check_finding(value)
            return _Target(
                subject=f"check:{ref}",
                key=finding,
                fix=fix,
                cluster=cluster,
                reason=f"Fix for check finding {finding} on cluster {cluster} (check {ref})",
                channel=str(payload.get("channel", "")),
                thread_ts=str(payload.get("message_ts", "")),
            )
        watch_id, key, fix = _finding(self.watches, value)
        sub = subject(watch_id)
        row = self.watches.get(watch_id)
        post = self.store.messages(sub).get(key)
        return _Target(
            subject=sub,
            key=key,
            fix=fix,
            cluster=row.cluster,
            reason=f"Fix for known issue {fix.rule_id} on {fix.workload} (watch {watch_id})",
            channel=post.channel if post is not None else "",
            thread_ts=post.thread_ts if post is not None else "",
        )

    def on_fix(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {
            **click_fields(body),
            "value": str(action.get("value", ""))[:2000],
            # The message the button is on: a check's summary, whose thread hears the run's number.
            "message_ts": str(
                (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts") or ""
            ),
        }
        take_click(
            self.inbox,
            ack,
            FIX_ACTION,
            body,
            payload,
            log,
            f"fix {payload['value'][:80]} from {payload['user']}",
        )
