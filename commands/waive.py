"""`/upgrade waive FINDING [OBJECT…] --for DURATION --reason "…"`: accept a finding for a while.

A waived finding (or the waived objects of it) is shown by `/upgrade check` in its own section,
with who accepted it, why and until when, and no longer fails a plan's `check` step. Without
objects the waiver covers the whole finding; with objects (`namespace/name`, as the findings list
them) only those, and the finding still fails for the others. A waiver that matches no finding of
the cluster's last check (a typo of an object: "shop/paymnets") is still recorded — a waiver may
come before its finding — and the reply says so, with the near names the check found.

Two people for a Required finding: the waiver is stored *pending* and covers nothing until a second
person confirms it with `/upgrade waive confirm ID`; together the two must hold two of the roles
that approve a cluster action (`actions.approvers`: the primary and the shadow by default), as a
mutating gate's four eyes. A Recommended finding's waiver is one person's. `/upgrade waive revoke
ID` ends a waiver at once (one person: it only makes the checks stricter). Waivers end at their
`--for`; a permanent, reviewed exception belongs in the configuration's `checks.ignore` list.

Why a row and not a one-step gated run (as `/upgrade action` opens): a waiver changes no cluster,
so it needs no card, thread, dry run or job — only two recorded names, which one compare-and-set on
the waiver's state makes durable and race-free (two confirmations at once: one wins).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import timedelta

from bot.core.audit import audit_entry
from bot.core.checks.findings import REQUIRED, valid_id
from bot.core.checks.ids import FindingIds, finding_ids
from bot.core.checks.waivers import unmatched
from bot.core.clusters import pick_cluster
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.durations import format_duration, parse_duration
from bot.core.people import ANY_ROLE, roles_of
from bot.core.rules import load_rules
from bot.errors import PermissionDenied, UserError, clip
from bot.records import WaiverRow
from commands import _runs

log = logging.getLogger(__name__)

#: The longest waiver: past it, the exception is permanent and belongs in `checks.ignore`, reviewed.
LONGEST = timedelta(days=90)
#: Objects one waiver may name; more is a finding to fix (or to waive wholly), not a list to keep.
MAX_OBJECTS = 50
VERBS = ("confirm", "revoke")


def run(ctx: CommandContext, args: Args) -> Reply:
    """Accept a finding (or some of its objects) for a while, with a reason on record.

    Without objects the whole finding is waived. A Required finding's waiver waits for a second
    person (the primary and the shadow together): `/upgrade waive confirm ID`.
    `/upgrade waive revoke ID` ends one. `/upgrade waivers` lists them.

    Example: `/upgrade waive API001 kube-system/pod-identity-webhook --for 14d --reason "vendor fix in CHG-7"`
    """
    verb = args.finding.lower()
    if verb in VERBS:
        if len(args.objects) != 1 or not re.fullmatch(r"[0-9]{1,9}", args.objects[0]):
            raise UserError(f"`/upgrade waive {verb} ID`: name one waiver by its number (`/upgrade waivers`)")
        waiver = _existing(ctx, int(args.objects[0]))
        return _confirm(ctx, waiver) if verb == "confirm" else _revoke(ctx, waiver)
    return _waive(ctx, args)


def _waive(ctx: CommandContext, args: Args) -> Reply:
    settings = ctx.settings
    finding = args.finding.strip()
    # The one list of what can be reported: every check's declared ids and the rules' (ids.py).
    known = finding_ids(load_rules(settings.rules_paths()))
    if not valid_id(finding):
        raise UserError(
            f"`{clip(finding, 30)}` is not a finding id{_near(finding, known)} "
            "(like API001 or ISTIO001; `/upgrade check` lists them)"
        )
    severity = known.severity(finding)
    if severity is None:
        raise UserError(
            f"no check or rule reports `{finding}`{_near(finding, known)}; "
            "`/upgrade check` lists the findings by id"
        )
    objects = tuple(dict.fromkeys(o.strip() for o in args.objects if o.strip()))
    if len(objects) > MAX_OBJECTS:
        raise UserError(
            f"{len(objects)} objects: a waiver names at most {MAX_OBJECTS} (or none: the whole finding)"
        )
    for o in objects:
        if len(o) > 300:
            raise UserError(f"`{clip(o, 60)}…` is longer than any object a finding names (namespace/name)")
    if not args.duration:
        raise UserError("say for how long with `--for` (like 14d); a waiver always ends")
    try:
        span = parse_duration(args.duration, longest=LONGEST)
    except ValueError as exc:
        raise UserError(
            f"--for {clip(args.duration, 20)}: {exc} (a permanent exception goes in `checks.ignore`)"
        ) from None
    if span <= timedelta(0):
        raise UserError("--for must be longer than 0")
    why = _runs.reason(args.reason, required=True)
    cluster = pick_cluster(settings.clusters, args.cluster)
    required = severity == REQUIRED
    held = roles_of(ctx.user_id, settings.roster, ctx.directory)
    if required and not held & set(settings.action_approvers):
        raise PermissionDenied(
            f"`{finding}` is Required: its waiver is asked by one of {_roles(settings.action_approvers)}"
        )
    now = ctx.clock()
    row = ctx.store.add_waiver(
        cluster=cluster.name,
        finding=finding,
        objects=objects,
        reason=why,
        required=required,
        state="pending" if required else "active",
        requested_by=ctx.user_id,
        requested_at=now,
        expires_at=now + span,
    )
    _audit(ctx, "waive", row, "asked; waits for a second person" if required else "active")
    # A typo ("shop/paymnets") would cover nothing, silently: compared with the cluster's last
    # check, if one is kept. Waivers may come before their findings, so it is said, not refused.
    seen = ctx.store.check_seen(cluster.name)
    missed = unmatched(seen, finding, objects) if seen is not None else ""
    return Reply(
        template="waivers/changed",
        ephemeral=False,
        context={"waiver": row, "event": "pending" if required else "active", "span": format_duration(span),
                 "second": _roles(settings.action_approvers), "missed": missed,
                 "checked_at": seen.checked_at if seen is not None else None},
    )  # fmt: skip


def _confirm(ctx: CommandContext, waiver: WaiverRow) -> Reply:
    settings = ctx.settings
    now = ctx.clock()
    if waiver.state != "pending":
        raise UserError(f"waiver {waiver.id} is {waiver.state}: only a pending waiver is confirmed")
    if now >= waiver.expires_at:
        raise UserError(f"waiver {waiver.id} expired before it was confirmed; ask again")
    if ctx.user_id == waiver.requested_by:
        raise PermissionDenied(
            f"you asked for waiver {waiver.id}: a Required finding's waiver needs a second person to confirm it"
        )
    approvers = set(settings.action_approvers)
    asker = roles_of(waiver.requested_by, settings.roster, ctx.directory) & approvers
    mine = roles_of(ctx.user_id, settings.roster, ctx.directory) & approvers
    # Four eyes across two roles: some role of the asker and a different one of the confirmer.
    if not any(a != b for a in asker for b in mine) and not (len(approvers) == 1 and mine):
        raise PermissionDenied(
            f"waiver {waiver.id} needs {_roles(settings.action_approvers)} together; "
            f"you hold {_roles(sorted(mine)) if mine else 'none of these roles'}"
        )
    if not ctx.store.set_waiver_state(waiver.id, expected="pending", state="active", by=ctx.user_id, at=now):
        raise UserError(f"waiver {waiver.id} changed meanwhile; `/upgrade waivers` shows it now")
    row = ctx.store.waiver(waiver.id)
    assert row is not None
    _audit(ctx, "waive confirm", row, "confirmed; active")
    return Reply(template="waivers/changed", ephemeral=False, context={"waiver": row, "event": "confirmed"})


def _revoke(ctx: CommandContext, waiver: WaiverRow) -> Reply:
    if waiver.state == "revoked":
        raise UserError(f"waiver {waiver.id} was revoked already")
    now = ctx.clock()
    if not ctx.store.set_waiver_state(
        waiver.id, expected=waiver.state, state="revoked", by=ctx.user_id, at=now
    ):
        raise UserError(f"waiver {waiver.id} changed meanwhile; `/upgrade waivers` shows it now")
    row = ctx.store.waiver(waiver.id)
    assert row is not None
    _audit(ctx, "waive revoke", row, "revoked")
    return Reply(template="waivers/changed", ephemeral=False, context={"waiver": row, "event": "revoked"})


def _near(finding: str, known: FindingIds) -> str:
    """` (did you mean `API001`?)` for a typo of a known id; "" when nothing is close."""
    near = known.near(finding) if len(finding) <= 40 else []
    return f" (did you mean {' or '.join(f'`{n}`' for n in near)}?)" if near else ""


def _existing(ctx: CommandContext, waiver_id: int) -> WaiverRow:
    row = ctx.store.waiver(waiver_id)
    if row is None:
        raise UserError(f"no waiver {waiver_id}; `/upgrade waivers` lists them")
    return row


def _roles(roles: Iterable[str]) -> str:
    return " and ".join(f"the {r}" for r in roles)


def _audit(ctx: CommandContext, subcommand: str, row: WaiverRow, what: str) -> None:
    objects = ", ".join(row.objects) or "the whole finding"
    ctx.store.record_audit(
        audit_entry(
            ctx,
            at=ctx.clock(),
            kind="waiver",
            subcommand=subcommand,
            arguments=f"{row.finding} {' '.join(row.objects)}".strip(),
            detail=(
                f"waiver {row.id} on {row.cluster}: {row.finding} ({objects}) {what}; until "
                f"{row.expires_at.isoformat()}; reason: {row.reason}"
            ),
        )
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("finding", help="the finding's id (API001…), or confirm ID / revoke ID")
    parser.add_argument(
        "objects", nargs="*", help="namespace/name: only these objects (default: the whole finding)"
    )
    parser.add_argument("--for", dest="duration", help="how long (14d, 1w): the waiver ends then")
    parser.add_argument(
        "--reason", nargs="+", help="why it is accepted (required; shown by check and the step)"
    )
    parser.add_argument("--cluster", help="a configured cluster (default: the only one)")


def register(registry: Registry) -> None:
    registry.add("waive", run, arguments=_arguments, roles={ANY_ROLE})
