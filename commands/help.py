"""`/upgrade help`: the subcommand list, generated from the subcommands' docstrings."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.errors import UsageError, clip


def run(ctx: CommandContext, args: Args) -> Reply:
    """List the subcommands, or show one (or one of its verbs: `help schedule move`) in full."""
    if args.subcommand:
        sub = ctx.registry.get(args.subcommand.lower())
        if sub is None:
            hints = ctx.registry.suggest(args.subcommand.lower())
            hint = f" — did you mean {' or '.join(f'`{h}`' for h in hints)}?" if hints else ""
            raise UsageError(f"no subcommand `{clip(args.subcommand)}`{hint}")
        if args.verb:
            verb = sub.verbs.get(args.verb.lower())
            if verb is None:
                known = ", ".join(f"`{v}`" for v in sorted(sub.verbs)) or "none"
                raise UsageError(f"`{sub.name}` has no verb `{clip(args.verb)}` (its verbs: {known})")
            sub = verb
        verbs = [
            {"name": v.name, "usage": v.usage, "summary": v.summary} for _, v in sorted(sub.verbs.items())
        ]
        return Reply(
            template="help_one",
            context={
                "name": sub.name,
                "usage": sub.usage,
                "doc": sub.doc,
                "roles": sorted(sub.roles),
                "verbs": verbs,
            },
        )
    return Reply(
        template="help",
        context={
            "commands": [{"name": s.name, "summary": s.summary, "usage": s.usage} for s in ctx.registry]
        },
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("subcommand", nargs="?", help="a subcommand to show in full")
    parser.add_argument("verb", nargs="?", help="one of its verbs (`help schedule move`)")


def register(registry: Registry) -> None:
    registry.add("help", run, arguments=_arguments)
