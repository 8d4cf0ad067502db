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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from bot.core.people import CHANNEL_ID, GROUP_ID, USER_ID
from bot.errors import TemplateError


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


# Only well-formed IDs become mentions: anything else (a terminal user, a typo, text that tries to
# smuggle `<!channel>` in) is shown as escaped text, so it can never ping anyone.


def mention(entry: str) -> Markup:
    """`U…`/`W…` → a user mention, `S…` → a user-group mention; anything else → escaped text."""
    entry = str(entry)
    if GROUP_ID.match(entry):
        return Markup(f"<!subteam^{entry}>")
    if USER_ID.match(entry):
        return Markup(f"<@{entry}>")
    return Markup(slack_escape(entry))


def subteam(group_id: str) -> Markup:
    """A user-group mention `<!subteam^S…>` (escaped text if it is not a group ID)."""
    group_id = str(group_id)
    return Markup(f"<!subteam^{group_id}>") if GROUP_ID.match(group_id) else Markup(slack_escape(group_id))


def mentions(entries: Iterable[str] | None, empty: str = "nobody") -> Markup:
    """A roster role's people and groups as mentions, comma-separated (`empty` when none)."""
    items = [mention(e) for e in entries or ()]
    return Markup(", ".join(items)) if items else Markup(slack_escape(empty))


def channel(channel_id: str) -> Markup:
    channel_id = str(channel_id)
    return Markup(f"<#{channel_id}>") if CHANNEL_ID.match(channel_id) else Markup(slack_escape(channel_id))


def slack_date(moment: datetime, zone: str = "UTC", fmt: str = "{date_short_pretty} {time}") -> Markup:
    """A Slack date token: each reader sees their own zone; the fallback names the plan's zone."""
    fallback = moment.astimezone(ZoneInfo(zone)).strftime(f"%Y-%m-%d %H:%M {zone}")
    return Markup(f"<!date^{int(moment.timestamp())}^{fmt}|{slack_escape(fallback)}>")


def when(moment: datetime, zone: str = "UTC", fmt: str = "{date_short_pretty} {time}") -> Markup:
    """A Slack date token whose text fallback shows the plan's zone and UTC.

    Slack renders the token in each reader's own zone (a Tokyo window read in Berlin shows Berlin
    time); clients that cannot render tokens, notifications and the terminal show the fallback:
    `2026-12-01 14:00 Asia/Tokyo (05:00 UTC)`, with the UTC date too when it differs.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a time shown to readers must be timezone-aware")
    local = moment.astimezone(ZoneInfo(zone))
    utc = moment.astimezone(ZoneInfo("UTC"))
    fallback = f"{local:%Y-%m-%d %H:%M} {zone}"
    if zone != "UTC":
        fallback += f" ({utc:%H:%M} UTC)" if utc.date() == local.date() else f" ({utc:%Y-%m-%d %H:%M} UTC)"
    # The token's `^` and `|` separators never occur in the fallback: it is digits, a zone and UTC.
    return Markup(f"<!date^{int(moment.timestamp())}^{fmt}|{slack_escape(fallback)}>")


_URL = re.compile(r"^https?://[^\s<>|]+$")


def link(item: object, title: str | None = None) -> Markup:
    """`<https://…|title>` for an http(s) URL; anything else is shown as escaped text, not a link.

    `item` is a URL string or an object with `url` and `title` (a plan's links).
    """
    url = str(getattr(item, "url", None) or (item.get("url") if isinstance(item, Mapping) else item))
    if title is None:
        title = getattr(item, "title", None) or (item.get("title") if isinstance(item, Mapping) else None)
    label = slack_escape(str(title or url)).replace("|", "¦")
    if not _URL.match(url):
        return Markup(label if title else slack_escape(url))
    return Markup(f"<{slack_escape(url)}|{label}>")


def clip(value: object, limit: int) -> Markup:
    """Escape `value` for Slack and cut it to `limit` characters, never inside an `&amp;`.

    Block Kit refuses a section over 3,000 characters; text from users (a plan's impact) is clipped
    so a long paragraph cannot make the whole announcement fail.
    """
    text = slack_escape(value)
    if len(text) <= limit:
        return Markup(text)
    cut = text[: max(limit - 1, 0)]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return Markup(cut + "…")


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
        self.env.filters["mentions"] = mentions
        self.env.filters["subteam"] = subteam
        self.env.filters["channel"] = channel
        self.env.filters["slack_date"] = slack_date
        self.env.filters["when"] = when
        self.env.filters["clip"] = clip
        self.env.filters["link"] = link
        self.env.filters["utc"] = utc_text
        # Block Kit templates embed values as JSON strings, escaped for mrkdwn first.
        self.env.filters["slack"] = lambda v: slack_escape(v)
        self.env.globals["mention"] = mention
        self.env.globals["subteam"] = subteam
        self.env.globals["channel"] = channel

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
    """The template line of a runtime error, found in the traceback Jinja rewrites.

    When the error is inside a file the template includes, that file and line are named too.
    """
    tb = exc.__traceback__
    line = None
    innermost: tuple[str, int] | None = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.endswith(name):
            line = tb.tb_lineno
        if filename.endswith(".j2"):
            innermost = (filename, tb.tb_lineno)
        tb = tb.tb_next
    where = f", line {line}" if line else ""
    if innermost is not None and not innermost[0].endswith(name):
        where += f" (in {innermost[0]}, line {innermost[1]})"
    return where
