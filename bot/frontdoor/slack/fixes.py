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
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from slack_bolt import Ack, App

from bot.adapters.slack import SlackGateway
from bot.adapters.store import Store
from bot.core.delivery import Deliveries
from bot.core.people import Directory, roles_of
from bot.core.rendering import slack_escape
from bot.core.watches.milestones import FindingFix, finding_fix, parse_finding_key
from bot.core.watches.service import WatchService, subject
from bot.errors import BotError, UserError
from bot.frontdoor.inbox import DONE_BEFORE, REPLAY, Inbox
from bot.frontdoor.slack.keys import delivery_key
from bot.frontdoor.slack.refusals import refuse_click
from bot.logsetup import correlation
from bot.router import CommandRequest, Router

log = logging.getLogger(__name__)

FIX_ACTION = "known_issue_fix"


def _finding(watches: WatchService, value: str) -> tuple[int, str, FindingFix]:
    """The watch, the finding's key and its fix named by a button's value; a UserError says why not."""
    watch_text, _, key = value.partition("|")
    parsed = parse_finding_key(key)
    if not watch_text.isdigit() or parsed is None:
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


def register(
    app: App,
    *,
    watches: WatchService,
    router: Router,
    roster: Callable[[], Mapping[str, Sequence[str]]],
    directory: Directory,
    gateway: SlackGateway,
    deliveries: Deliveries | None,
    inbox: Inbox,
    store: Store,
    clock: Callable[[], datetime],
) -> None:
    def refuse(cid: str, payload: Mapping[str, Any], message: str) -> None:
        refuse_click(gateway, cid, payload, message, what="fix")

    def work(payload: dict[str, Any], cid: str, how: str) -> None:
        if how == DONE_BEFORE:
            return  # the run was started before the restart: its card and the thread say so
        user = str(payload.get("user", ""))
        value = str(payload.get("value", ""))
        try:
            if not roles_of(user, roster(), directory):
                raise UserError("only people on the roster can start a fix")
            watch_id, key, fix = _finding(watches, value)
        except UserError as exc:
            log.info("fix %s by %s refused: %s", value[:80], user, exc.user_message)
            refuse(cid, payload, exc.user_message)
            return
        sub = subject(watch_id)
        if not store.claim_fix(subject=sub, key=key, by=user, at=clock()):
            by, run_id = store.finding_fix(subject=sub, key=key) or ("", "")
            # The same person's click replayed after a restart, before its run was recorded: go on.
            if not (how == REPLAY and by == user and not run_id):
                started = f"run `{run_id}`" if run_id else "a run (starting now)"
                refuse(cid, payload, f"a fix for this finding was already asked by <@{by}>: {started}")
                return
        row = watches.get(watch_id)
        reason = f"Fix for known issue {fix.rule_id} on {fix.workload} (watch {watch_id})"
        words = [
            "action",
            fix.action,
            *(f"{k}={v}" for k, v in fix.args.items()),
            "--cluster",
            row.cluster,
            "--reason",
            reason,
        ]
        outcome = router.handle(
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
            store.release_fix(subject=sub, key=key)
            refuse(cid, payload, str(outcome.reply.context.get("message") or "the fix's run was not started"))
            return
        store.record_fix(subject=sub, key=key, run_id=run_id)
        log.info("fix of %s on %s: run %s, asked by %s", fix.rule_id, fix.workload, run_id, user)
        ref = store.messages(sub).get(key)
        if deliveries is not None and ref is not None and ref.channel:
            text = (
                f":wrench: <@{user}> asked for the fix of *{slack_escape(fix.rule_id)}*: run `{run_id}` "
                f"(`{slack_escape(fix.command)}`) waits for its approvers in its thread."
            )
            try:
                deliveries.post_once(sub, f"fix:{key}", ref.channel, text, thread_ts=ref.thread_ts)
            except BotError as exc:
                log.warning(
                    "could not say in the thread that run %s was started: %s", run_id, exc.user_message
                )

    inbox.handle(FIX_ACTION, work)

    @app.action(FIX_ACTION)
    def on_fix(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        payload = {
            "user": str(body.get("user", {}).get("id", "")),
            "channel": str(body.get("channel", {}).get("id", "")),
            "response_url": str(body.get("response_url", "")),
            "value": str(action.get("value", ""))[:2000],
        }
        # Stored before the ack: Slack never sends an acknowledged click again.
        accepted = inbox.accept(FIX_ACTION, delivery_key(body), payload)
        ack()
        if accepted is not None:
            with correlation(accepted[1]):
                log.info("fix %s from %s", payload["value"][:80], payload["user"])
                inbox.submit(accepted[0], name=f"fix {payload['value'][:40]}")
