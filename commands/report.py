"""`/upgrade report RUN`: the run's timeline picture, with the HTML and Markdown report attached."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, FileAttachment, Registry, Reply
from bot.core.runs import report as rp
from commands import _runs


def run(ctx: CommandContext, args: Args) -> Reply:
    """The report of a run, from what the bot stored: a timeline picture (the steps, waiting for
    people vs working, approvals marked; one lane per node group, each node cordoned → drained),
    and the full report as HTML (one file, opens offline, prints) and Markdown (a Mermaid gantt).
    People are named by their Slack display names. Only people in the roster, or in the run's
    roster (with its handoffs), may read it.

    Example: `/upgrade report R1E04FA`
    """
    _runs.require_reader(ctx, args.run, action="`/upgrade report`")
    report = rp.build_report(ctx.store, args.run, now=ctx.clock(), directory=ctx.directory)
    return Reply(
        template="report",
        context=rp.reply_context(report),
        files=tuple(
            FileAttachment(filename=name, content=body, title=title, filetype=filetype)
            for name, body, title, filetype in rp.attachments(report)
        ),
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("run", metavar="RUN", help="a run id (see /upgrade status)")


def register(registry: Registry) -> None:
    registry.add("report", run, arguments=_arguments, who=_runs.RUN_READERS)
