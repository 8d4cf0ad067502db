"""`/upgrade announce`: preview an announcement template, or post one now, for a plan or a sample.

`announce preview TEMPLATE [PLAN]` shows it to you alone; `announce TEMPLATE PLAN` posts it in the
plan's announcement channel (or `--channel`). The context comes from the stored plan: its window
(the scheduled one when the plan is scheduled), impact, links and roster, and its latest run
(`completed`, `aborted` and `step-complete` need one). `--sample` renders the sample context that
`templates check` uses, so a team can try an override in a test channel; a sample can only reach
a channel on purpose. Rendering fails whole, with a short error naming the file and line to the
person who asked, never as a half-rendered post.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from bot.core.announcements import timing as announcements
from bot.core.announcements.runinfo import plan_context
from bot.core.announcements.templates import AnnouncementRenderer, sample_context
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE, require_any_role
from bot.core.rendering import Rendered
from bot.core.runs.library import assemble_run, find_plan
from bot.core.runs.plans import Plan
from bot.errors import PermanentError, TemplateError, UsageError

#: Who may post an announcement to a channel (previews are open to the whole roster).
POSTERS = frozenset({"coordinator", "primary"})
_CHANNEL = re.compile(r"^<#([CG][A-Z0-9]+)(?:\|[^>]*)?>$|^([CG][A-Z0-9]{2,})$")
_USAGE = "usage: /upgrade announce [preview] TEMPLATE [PLAN | --sample] [--channel #c]"


def run(ctx: CommandContext, args: Args) -> Reply:
    """Preview an announcement template, or post one now.

    `/upgrade announce preview TEMPLATE [PLAN]` shows the announcement to you alone.
    `/upgrade announce TEMPLATE PLAN [--channel #c]` posts it now for a loaded plan (the plan's
    coordinator or primary), in the announcement channel unless `--channel` names another.
    `--sample` instead of PLAN uses the sample plan (to try a template in a test channel).
    Templates: scheduled, reminder, starting, step-complete, completed, aborted, delayed, missed.

    Example: `/upgrade announce preview scheduled eks-nodegroups`
    """
    words = list(args.words)
    preview = words[:1] == ["preview"]
    if preview:
        words = words[1:]
    if not 1 <= len(words) <= 2:
        raise UsageError("name one template: " + ", ".join(announcements.TEMPLATES), usage=_USAGE)
    template = words[0].lower()
    if template not in announcements.TEMPLATES:
        raise UsageError(f"unknown announcement `{template}` (one of {', '.join(announcements.TEMPLATES)})")
    plan_name = words[1] if len(words) == 2 else None
    if plan_name and args.sample:
        raise UsageError("name a plan or `--sample`, not both", usage=_USAGE)
    plan = _plan(ctx, plan_name) if plan_name else None
    renderer = AnnouncementRenderer(ctx.settings.templates_dir)
    # No Verified button: a preview or a post made here is no announcement the store knows.
    context = _context(ctx, plan) if plan is not None else sample_context(announcement=None)
    builtin = not renderer.overridden(f"{template}.txt.j2")
    if preview:
        if args.channel:
            raise UsageError("a preview is shown only to you; `--channel` is for posting")
        rendered = _render(renderer, template, context)
        return Reply(
            template="announce/preview",
            context={
                "template": template,
                "builtin": builtin,
                "plan": plan.name if plan else "",
                "text": Markup(rendered.text),
                "blocks": rendered.blocks,
            },
        )
    roster: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in ctx.settings.roster.items()}
    if plan is not None:
        for role, people in plan.roster.items():
            roster[role] = tuple(dict.fromkeys([*roster.get(role, ()), *people]))
    require_any_role(ctx.user_id, POSTERS, roster, ctx.directory, action="posting an announcement")
    if plan is None and not args.sample:
        raise UsageError(
            "name the plan to announce (`/upgrade announce scheduled PLAN`), or add `--sample` to "
            "post the sample announcement (e.g. to try a template in a test channel)",
            usage=_USAGE,
        )
    default = (plan.announcements_channel if plan else None) or ctx.settings.channels.announcements
    channel = _channel(args.channel) if args.channel else default
    if not channel:
        raise UsageError(
            "no announcement channel is configured (channels.announcements); pass `--channel #c`"
        )
    rendered = _render(renderer, template, context)
    return Reply(
        template="announce/post" if rendered.blocks is not None else "announce/post_text",
        context={"text": Markup(rendered.text), "blocks": rendered.blocks},
        ephemeral=False,
        channel=channel,
    )


def _plan(ctx: CommandContext, name: str) -> Plan:
    return find_plan(ctx.store, name)[1]


def _context(ctx: CommandContext, plan: Plan) -> dict[str, Any]:
    """The plan with its scheduled window (if scheduled) and its latest run (if any)."""
    schedule = next(iter(ctx.store.schedules(states=["scheduled", "started"], plan_name=plan.name)), None)
    latest = next((r for r in ctx.store.runs(limit=200) if r.plan_name == plan.name), None)
    run = None
    if latest is not None:
        run = assemble_run(ctx.store, latest.id)
    if schedule is None:
        return plan_context(plan, run=run)
    return plan_context(plan, start=schedule.window_start, end=schedule.window_end, tz=schedule.tz, run=run)


def _render(renderer: AnnouncementRenderer, template: str, context: Mapping[str, Any]) -> Rendered:
    try:
        return renderer.render(template, context)
    except TemplateError as exc:
        # The person who asked sees which file and line broke; nothing is posted.
        raise PermanentError(f"announcement `{template}` could not be rendered: {exc.user_message}") from None


def _channel(word: str) -> str:
    match = _CHANNEL.match(word.strip())
    if not match:
        raise UsageError(f"{word!r} is not a channel: pick it with # so Slack links it, or give its ID (C…)")
    return match.group(1) or match.group(2)


def _arguments(parser: CommandParser) -> None:
    parser.usage = "%(prog)s [preview] TEMPLATE [PLAN] [--channel #c] [--sample]"
    parser.add_argument(
        "words",
        nargs="+",
        metavar="[preview] TEMPLATE [PLAN]",
        help="`preview` to see it only yourself; an announcement template; a loaded plan's name",
    )
    parser.add_argument("--channel", metavar="#c", help="post here instead of the announcement channel")
    parser.add_argument("--sample", action="store_true", help="use the sample plan instead of a loaded one")


def register(registry: Registry) -> None:
    registry.add("announce", run, arguments=_arguments, roles={ANY_ROLE})
