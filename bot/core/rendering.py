"""Rendering replies from template files: one sandboxed Jinja2 environment for the whole bot.

Slack's mrkdwn needs only `&`, `<` and `>` escaped, so HTML autoescaping is off (it would show
`&#39;` to readers) and a `finalize` hook escapes every value a template prints instead, unless the
value is already Slack markup (`Markup`, as the mention and date helpers return). A template that
names a variable its context lacks fails loudly (StrictUndefined) with the file and line, never a
half-rendered post.

A reply named `NAME` renders `NAME.txt.j2` (mrkdwn text, also what the terminal prints) and, when
present, `NAME.blocks.json.j2` (Block Kit JSON). Files in the team's templates directory override
built-ins of the same name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from bot.errors import PermanentError


class TemplateError(PermanentError):
    """A template failed to load or render; the message names the template, line and cause."""


@dataclass(frozen=True, kw_only=True)
class Rendered:
    text: str
    blocks: list[dict[str, Any]] | None = None


def slack_escape(value: object) -> str:
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _finalize(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, bool | int | float):
        return value
    return slack_escape(value)


def mention(entry: str) -> Markup:
    """`U…`/`W…` → a user mention, `S…` → a user-group mention."""
    entry = str(entry)
    if entry.startswith("S"):
        return Markup(f"<!subteam^{slack_escape(entry)}>")
    return Markup(f"<@{slack_escape(entry)}>")


def channel(channel_id: str) -> Markup:
    return Markup(f"<#{slack_escape(channel_id)}>")


def slack_date(moment: datetime, zone: str = "UTC", fmt: str = "{date_short_pretty} {time}") -> Markup:
    """A Slack date token: each reader sees their own zone; the fallback names the plan's zone."""
    fallback = moment.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M {zone}")
    return Markup(f"<!date^{int(moment.timestamp())}^{fmt}|{slack_escape(fallback)}>")


def utc_text(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S UTC")


class Renderer:
    """Renders reply templates from a search path (team overrides first)."""

    def __init__(self, template_dirs: Sequence[Path]) -> None:
        self.env = SandboxedEnvironment(
            loader=jinja2.FileSystemLoader([str(d) for d in template_dirs]),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            finalize=_finalize,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        self.env.filters["mention"] = mention
        self.env.filters["channel"] = channel
        self.env.filters["slack_date"] = slack_date
        self.env.filters["utc"] = utc_text
        # Block Kit templates embed values as JSON strings, escaped for mrkdwn first.
        self.env.filters["slack"] = lambda v: slack_escape(v)
        self.env.globals["mention"] = mention

    def exists(self, name: str) -> bool:
        try:
            self.env.get_template(name)
        except jinja2.TemplateNotFound:
            return False
        except jinja2.TemplateError:
            return True
        return True

    def render_file(self, name: str, context: Mapping[str, Any]) -> str:
        try:
            return self.env.get_template(name).render(**context)
        except jinja2.TemplateNotFound:
            raise TemplateError(f"template {name} not found") from None
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(
                f"template {exc.filename or name}, line {exc.lineno}: {exc.message}"
            ) from None
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {name}{_line_of(exc, name)}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {name}{_line_of(exc, name)}: {exc}") from None

    def render(self, template: str, context: Mapping[str, Any]) -> Rendered:
        text = self.render_file(f"{template}.txt.j2", context).strip()
        blocks = None
        blocks_name = f"{template}.blocks.json.j2"
        if self.exists(blocks_name):
            raw = self.render_file(blocks_name, context)
            try:
                loaded = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise TemplateError(f"template {blocks_name}, line {exc.lineno}: not valid JSON") from None
            blocks = loaded["blocks"] if isinstance(loaded, dict) else loaded
        return Rendered(text=text, blocks=blocks)


def _line_of(exc: BaseException, name: str) -> str:
    """The template line of a runtime error, found in the traceback Jinja rewrites."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(name):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f", line {line}" if line else ""
