"""The router: `/upgrade <subcommand> args` text in, a rendered reply out.

Every front door (Slack over HTTP or Socket Mode, the terminal) goes through `Router.handle`, so a
command behaves the same wherever it was typed. The router parses chat-safe text, finds the
subcommand, checks the roles it needs, runs it, renders its reply, and writes one audit row per
command. Errors become a short, specific message with a correlation id; the detail (with the
traceback) goes to the log under the same id, never to chat.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.adapters.store import Store
from bot.core.announcements.service import AnnouncementService
from bot.core.audit import audit_entry
from bot.core.command import CommandContext, Registry, Reply, split_words
from bot.core.fleets.service import FleetService
from bot.core.jobs.service import JobService
from bot.core.people import Directory, require_any_role
from bot.core.rendering import Rendered, Renderer
from bot.core.runs.service import RunService
from bot.core.snapshots.projection import ClusterReader
from bot.core.telemetry import NO_TELEMETRY, TIMED_WORK, Telemetry
from bot.core.watches.service import WatchService
from bot.errors import (
    BotError,
    ConfigError,
    PermissionDenied,
    PlanInvalid,
    TemporaryError,
    UsageError,
    UserError,
    clip,
    valid_text,
)
from bot.logsetup import correlation, redact_tokens
from bot.records import ClusterConfig
from bot.settings import Settings

log = logging.getLogger(__name__)

#: The longest command text read. Slack's own messages are far shorter; a longer one is refused
#: before it is parsed, so it cannot hold a worker (argument parsing is not linear in the text).
MAX_COMMAND_TEXT = 8000
#: The longest message a reply repeats (argparse quotes every unrecognized argument).
MAX_MESSAGE = 1000


@dataclass(frozen=True, kw_only=True)
class CommandRequest:
    text: str
    user_id: str
    channel_id: str = ""
    source: str = "slack"
    correlation_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    reply: Reply
    rendered: Rendered
    ok: bool
    correlation_id: str
    subcommand: str = ""
    audit_outcome: str = "ok"


class Router:
    def __init__(
        self,
        *,
        registry: Registry,
        settings: Settings,
        store: Store,
        directory: Directory,
        renderer: Renderer | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        connect_cluster: Callable[[ClusterConfig], ClusterReader] | None = None,
        runs: RunService | None = None,
        fetch_file: Callable[[str], bytes] | None = None,
        announcements: AnnouncementService | None = None,
        watches: WatchService | None = None,
        jobs: JobService | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        fleets: FleetService | None = None,
    ) -> None:
        self.registry = registry
        self.fleets = fleets
        self.watches = watches
        self.jobs = jobs
        self.telemetry = telemetry
        self.announcements = announcements
        self.runs = runs
        self.fetch_file = fetch_file
        self.connect_cluster = connect_cluster or _no_clusters
        self.settings = settings
        self.store = store
        self.directory = directory
        self.renderer = renderer or Renderer(settings.template_dirs())
        self.clock = clock

    def handle(self, request: CommandRequest) -> Outcome:
        # Lone surrogates are replaced once, here, before anything logs or stores the request.
        request = dataclasses.replace(
            request,
            text=valid_text(request.text),
            user_id=valid_text(request.user_id)[:64],
            channel_id=valid_text(request.channel_id)[:64],
        )
        with correlation(request.correlation_id) as cid:
            began = time.monotonic()
            name, reply, audit_outcome, detail = self._run(request, cid)
            if name in TIMED_WORK and audit_outcome == "ok":
                self.telemetry.work_seconds(name, time.monotonic() - began)
            try:
                rendered = self.renderer.render(reply.template, reply.context)
            except BotError as exc:
                log.exception("rendering %s failed", reply.template)
                audit_outcome, detail = "error", exc.user_message
                reply = _error_reply("the reply could not be rendered", cid)
                rendered = self.renderer.render(reply.template, reply.context)
            self._audit(request, name, audit_outcome, detail, cid)
            # A metric label: only the names the registry knows, never what someone typed.
            known = name and self.registry.resolve(name, []) is not None
            self.telemetry.command(name if known else "unknown", audit_outcome)
            return Outcome(
                reply=reply,
                rendered=rendered,
                ok=audit_outcome == "ok",
                correlation_id=cid,
                subcommand=name,
                audit_outcome=audit_outcome,
            )

    def _run(self, request: CommandRequest, cid: str) -> tuple[str, Reply, str, str]:
        name = ""
        try:
            if len(request.text) > MAX_COMMAND_TEXT:
                raise UsageError(
                    f"that command is {len(request.text):,} characters long; "
                    f"/upgrade reads at most {MAX_COMMAND_TEXT:,}"
                )
            words = split_words(request.text)
            name = words[0].lower() if words else "help"
            found = self.registry.resolve(name, words[1:])
            if found is None:
                hints = self.registry.suggest(name)
                name = clip(name, 64)
                hint = f" — did you mean {' or '.join(f'`{h}`' for h in hints)}?" if hints else ""
                raise UsageError(f"unknown subcommand `{clip(name)}`{hint} (`/upgrade help` lists them all)")
            sub, args_words = found
            args = sub.parser.parse_args(args_words)
            if sub.roles:
                require_any_role(
                    request.user_id,
                    sub.roles,
                    self.settings.roster,
                    self.directory,
                    action=f"`/upgrade {name}`",
                )
            ctx = CommandContext(
                user_id=request.user_id,
                channel_id=request.channel_id,
                source=request.source,
                correlation_id=cid,
                settings=self.settings,
                store=self.store,
                registry=self.registry,
                directory=self.directory,
                clock=self.clock,
                connect_cluster=self.connect_cluster,
                runs=self.runs,
                fetch_file=self.fetch_file,
                announcements=self.announcements,
                watches=self.watches,
                jobs=self.jobs,
                fleets=self.fleets,
            )
            log.info("running /upgrade %s for %s", name, request.user_id)
            reply = sub.handler(ctx, args)
            return name, reply, "ok", ""
        except UsageError as exc:
            log.info("usage error in /upgrade %s: %s", name, exc.user_message)
            return name, _error_reply(exc.user_message, cid, usage=exc.usage), "usage", exc.user_message
        except PlanInvalid as exc:
            # An invalid plan is the input's fault, as a bad argument is (the terminal exits 2).
            log.info("/upgrade %s: invalid plan: %s", name, exc.user_message)
            return name, _error_reply(exc.user_message, cid), "usage", exc.user_message
        except PermissionDenied as exc:
            log.info("permission denied for %s on /upgrade %s: %s", request.user_id, name, exc.user_message)
            return name, _error_reply(exc.user_message, cid), "denied", exc.user_message
        except UserError as exc:
            log.info("/upgrade %s refused: %s", name, exc.user_message)
            return name, _error_reply(exc.user_message, cid), "refused", exc.user_message
        except (TemporaryError, ConfigError, BotError) as exc:
            # Expected failures (a cluster down, Slack refusing, a bad config): one line with the
            # cause chain, no traceback; the traceback is for bugs only.
            log.warning("/upgrade %s failed: %s%s", name, exc.user_message, _causes(exc))
            return name, _error_reply(exc.user_message, cid), "error", exc.user_message
        except Exception:
            # A bug: the user gets the correlation id, the log gets the traceback.
            log.exception("/upgrade %s failed unexpectedly", name)
            return name, _error_reply("an internal error occurred", cid), "error", "internal error"

    def _audit(self, request: CommandRequest, name: str, outcome: str, detail: str, cid: str) -> None:
        entry = audit_entry(
            at=self.clock(),
            user_id=request.user_id,
            channel_id=request.channel_id,
            source=request.source,
            kind="command",
            subcommand=name,
            arguments=redact_tokens(request.text),
            outcome=outcome,
            detail=detail,
            correlation_id=cid,
        )
        try:
            self.store.record_audit(entry)
        except BotError:
            # The command already ran; losing its audit row is logged loudly, not hidden.
            log.exception("could not write the audit row for /upgrade %s", name)


def _no_clusters(config: ClusterConfig) -> ClusterReader:
    raise UserError(f"cluster {config.name}: this front door has no Kubernetes access")


def _error_reply(message: str, cid: str, *, usage: str = "") -> Reply:
    return Reply(
        template="error",
        context={
            "message": clip(message, MAX_MESSAGE),
            "usage": clip(usage, MAX_MESSAGE),
            "correlation_id": cid,
        },
    )


def _causes(exc: BaseException) -> str:
    """` ← cause ← its cause`: the detail behind an expected error, for the log line."""
    parts: list[str] = []
    seen = exc.__cause__ or exc.__context__
    while seen is not None and len(parts) < 4:
        parts.append(f"{type(seen).__name__}: {clip(str(seen), 300)}")
        seen = seen.__cause__ or seen.__context__
    return "".join(f" ← {p}" for p in parts)
