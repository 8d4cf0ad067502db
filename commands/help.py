"""`/upgrade help`: the subcommand list, generated from the subcommands' docstrings."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.errors import UsageError


def run(ctx: CommandContext, args: Args) -> Reply:
    """List the subcommands, or show one in full."""
    if args.subcommand:
        sub = ctx.registry.get(args.subcommand.lower())
        if sub is None:
            hints = ctx.registry.suggest(args.subcommand.lower())
            hint = f" — did you mean {' or '.join(f'`{h}`' for h in hints)}?" if hints else ""
            raise UsageError(f"no subcommand `{args.subcommand}`{hint}")
        return Reply(
            template="help_one",
            context={"name": sub.name, "usage": sub.usage, "doc": sub.doc, "roles": sorted(sub.roles)},
        )
    return Reply(
        template="help",
        context={
            "commands": [{"name": s.name, "summary": s.summary, "usage": s.usage} for s in ctx.registry]
        },
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("subcommand", nargs="?", help="a subcommand to show in full")


def register(registry: Registry) -> None:
    registry.add("help", run, arguments=_arguments)
