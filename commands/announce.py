"""`/upgrade announce`: preview an announcement template, or post one now.

Until plans are wired in, both render against the sample context (`templates check` uses the
same one): `announce preview TEMPLATE` shows it to you alone, and posting needs `--sample` so a
sample can only ever reach a channel on purpose (a test channel, to see a team's override live).
Rendering fails whole, with a short error to the person who asked, never as a half-rendered post.
"""

from __future__ import annotations

import re

from markupsafe import Markup

from bot.core import announcements
from bot.core.announcement_templates import AnnouncementRenderer, sample_context
from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.core.people import ANY_ROLE, require_any_role
from bot.core.rendering import Rendered, TemplateError
from bot.errors import PermanentError, UsageError

#: Who may post an announcement to a channel (previews are open to the whole roster).
POSTERS = frozenset({"coordinator", "primary"})
_CHANNEL = re.compile(r"^<#([CG][A-Z0-9]+)(?:\|[^>]*)?>$|^([CG][A-Z0-9]{2,})$")


def run(ctx: CommandContext, args: Args) -> Reply:
    """Preview an announcement template, or post one now.

    `/upgrade announce preview TEMPLATE` shows the announcement to you alone.
    `/upgrade announce TEMPLATE --sample [--channel #c]` posts it now (coordinator or primary),
    in the announcement channel unless `--channel` names another.
    Templates: scheduled, reminder, starting, step-complete, completed, aborted, delayed.
    Until plans are wired in, both use a sample plan; PLAN arguments come with plans.
    """
    words = list(args.words)
    preview = words[:1] == ["preview"]
    if preview:
        words = words[1:]
    if len(words) != 1:
        raise UsageError(
            "name one template: " + ", ".join(announcements.TEMPLATES),
            usage="usage: /upgrade announce [preview] TEMPLATE [--sample] [--channel #c]",
        )
    template = words[0].lower()
    if template not in announcements.TEMPLATES:
        raise UsageError(f"unknown announcement `{template}` (one of {', '.join(announcements.TEMPLATES)})")
    renderer = AnnouncementRenderer(ctx.settings.templates_dir)
    rendered = _render(renderer, template)
    builtin = not renderer.overridden(f"{template}.txt.j2")
    if preview:
        if args.channel:
            raise UsageError("a preview is shown only to you; `--channel` is for posting")
        return Reply(
            template="announce/preview",
            context={
                "template": template,
                "builtin": builtin,
                "text": Markup(rendered.text),
                "blocks": rendered.blocks,
            },
        )
    require_any_role(
        ctx.user_id, POSTERS, ctx.settings.roster, ctx.directory, action="posting an announcement"
    )
    if not args.sample:
        raise UsageError(
            "announcements for a plan come with plans; to post the sample announcement "
            "(e.g. to try a template in a test channel) add `--sample`"
        )
    channel = _channel(args.channel) if args.channel else ctx.settings.channels.announcements
    if not channel:
        raise UsageError(
            "no announcement channel is configured (channels.announcements); pass `--channel #c`"
        )
    return Reply(
        template="announce/post" if rendered.blocks is not None else "announce/post_text",
        context={"text": Markup(rendered.text), "blocks": rendered.blocks},
        ephemeral=False,
        channel=channel,
    )


def _render(renderer: AnnouncementRenderer, template: str) -> Rendered:
    try:
        return renderer.render(template, sample_context())
    except TemplateError as exc:
        # The person who asked sees which file and line broke; nothing is posted.
        raise PermanentError(f"announcement `{template}` could not be rendered: {exc.user_message}") from None


def _channel(word: str) -> str:
    match = _CHANNEL.match(word.strip())
    if not match:
        raise UsageError(f"{word!r} is not a channel: pick it with # so Slack links it, or give its ID (C…)")
    return match.group(1) or match.group(2)


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("words", nargs="+", metavar="[preview] TEMPLATE")
    parser.add_argument("--channel", help="post here instead of the announcement channel")
    parser.add_argument("--sample", action="store_true", help="post the sample announcement (no plan yet)")


def register(registry: Registry) -> None:
    registry.add("announce", run, arguments=_arguments, roles={ANY_ROLE})
