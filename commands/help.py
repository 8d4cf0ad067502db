"""`/upgrade help`: the subcommand list, generated from the subcommands' docstrings."""

from __future__ import annotations

from bot.core.command import Args, CommandContext, CommandParser, Registry, Reply
from bot.errors import UsageError, clip


def run(ctx: CommandContext, args: Args) -> Reply:
    """List the subcommands, or show one (or one of its verbs) in full: its arguments and an example.

    Everything here comes from the subcommands themselves: the first sentence of each one's
    docstring, its arguments as its parser declares them, and its docstring's examples.

    Example: `/upgrade help schedule move`
    """
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
        verbs = [{"usage": v.short_usage, "summary": v.summary} for _, v in sorted(sub.verbs.items())]
        return Reply(
            template="help_one",
            context={
                "name": sub.name,
                "usage": sub.usage,
                "paragraphs": sub.paragraphs,
                "arguments": [{"name": n, "meaning": m} for n, m in sub.arguments],
                "examples": sub.examples,
                "roles": sorted(sub.roles),
                "who": sub.who,
                "verbs": verbs,
            },
        )
    return Reply(
        template="help",
        context={"commands": [{"usage": s.short_usage, "summary": s.summary} for s in ctx.registry]},
    )


def _arguments(parser: CommandParser) -> None:
    parser.add_argument("subcommand", nargs="?", metavar="COMMAND", help="a subcommand to show in full")
    parser.add_argument("verb", nargs="?", metavar="VERB", help="one of its verbs (`schedule move`)")


def register(registry: Registry) -> None:
    registry.add("help", run, arguments=_arguments)
