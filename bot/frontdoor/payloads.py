"""Slack's payload shapes, as the bot reads them: one typed decoding before any listener runs.

Both doors call `check(body, kind)` on the dict Bolt is about to dispatch (the HTTP door on the
body Bolt's own `parse_body` makes of the request, the Socket Mode door on the envelope's payload).
A body that does not fit raises `MalformedPayload` with a short reason: the HTTP door answers 400,
the Socket Mode door acks the envelope and drops it. Nothing that Bolt's context builders or our
listeners index (`actions[0]`, `view.type`, `event.channel`, a button's `value`) can then be of the
wrong type or missing — those were 500s with a traceback before.

The shapes are deliberately generic where other features add to them: a view submission is
checked for any `callback_id`, with `state.values` as block id → action id → input state, so a new
modal needs no change here. Unknown extra fields are allowed (Slack adds fields over time); the
types of the fields the bot or Bolt reads are not negotiable. Strings are bounded by Slack's own
limits (a button value is at most 2,000 characters, a plain-text input 3,000).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from bot.decoders import convert

#: What `check` is asked to read: a slash command's form, or a JSON payload (interaction or event).
SLASH_COMMAND, INTERACTIVE, EVENTS = "slash_commands", "interactive", "events_api"

# Slack's documented maxima, with a little room where Slack documents none.
Id = Annotated[str, msgspec.Meta(max_length=255)]
#: Slack's response_url is an https URL (the tests' stub answers on http://127.0.0.1).
Url = Annotated[str, msgspec.Meta(max_length=2_000, pattern=r"^https?://[^\s]+$")]
ButtonValue = Annotated[str, msgspec.Meta(max_length=2_000)]
InputText = Annotated[str, msgspec.Meta(max_length=3_000)]
Metadata = Annotated[str, msgspec.Meta(max_length=3_000)]
CommandText = Annotated[str, msgspec.Meta(max_length=4_000)]


class MalformedPayload(Exception):
    """A body that is not of a shape Slack sends: the reason is short and safe to log."""


class Ref(msgspec.Struct):
    """`{"id": …}`: a user, channel, team or enterprise as interactions carry them."""

    id: Id


class Option(msgspec.Struct):
    value: ButtonValue


class Authorization(msgspec.Struct):
    team_id: Id | None = None
    enterprise_id: Id | None = None
    user_id: Id | None = None
    is_enterprise_install: bool | None = None


class ResponseUrl(msgspec.Struct):
    response_url: Url


class Located(msgspec.Struct, kw_only=True):
    """The fields Bolt's context builders read to find who and where (events, messages, items)."""

    user: Id | Ref | None = None
    user_id: Id | None = None
    channel: Id | Ref | None = None
    channel_id: Id | None = None
    team: Id | Ref | None = None
    user_team: Id | None = None
    enterprise: Id | Ref | None = None
    enterprise_id: Id | None = None
    thread_ts: Id | None = None
    item: Located | None = None
    message: Located | None = None
    previous_message: Located | None = None
    assistant_thread: Located | None = None


class _Payload(msgspec.Struct, kw_only=True, tag_field="type"):
    """What every JSON payload may carry at its top (read by Bolt before any listener)."""

    team: Id | Ref | None = None
    team_id: Id | None = None
    enterprise: Id | Ref | None = None
    enterprise_id: Id | None = None
    is_enterprise_install: bool | str | None = None
    is_ext_shared_channel: bool | None = None
    authorizations: list[Authorization] | None = None
    api_app_id: Id | None = None
    token: Id | None = None
    function_execution_id: Id | None = None
    function_data: dict[str, Any] | None = None
    thread_ts: Id | None = None


class _Interaction(_Payload, kw_only=True):
    user: Ref
    channel: Ref | None = None
    trigger_id: Id | None = None
    response_url: Url | None = None
    response_urls: list[ResponseUrl] | None = None
    message: Located | None = None
    container: dict[str, Any] | None = None


class Action(msgspec.Struct, kw_only=True):
    action_id: Id
    block_id: Id | None = None
    type: Id | None = None
    value: ButtonValue | None = None
    selected_option: Option | None = None
    action_ts: Id | None = None


class InputState(msgspec.Struct, kw_only=True):
    """One input's state in a submitted view (`state.values[block_id][action_id]`)."""

    type: Id
    value: InputText | None = None
    selected_option: Option | None = None
    selected_options: list[Option] | None = None
    selected_user: Id | None = None
    selected_users: list[Id] | None = None
    selected_channel: Id | None = None
    selected_conversation: Id | None = None
    selected_date: Id | None = None
    selected_time: Id | None = None


class ViewState(msgspec.Struct):
    values: dict[Id, dict[Id, InputState]] = msgspec.field(default_factory=dict)


class View(msgspec.Struct, kw_only=True):
    type: Id
    id: Id | None = None
    callback_id: Id = ""
    private_metadata: Metadata = ""
    state: ViewState = msgspec.field(default_factory=ViewState)
    team_id: Id | None = None
    app_installed_team_id: Id | None = None


class BlockActions(_Interaction, kw_only=True, tag="block_actions"):
    # Bolt dispatches on the first action: an empty list has nothing to dispatch.
    actions: Annotated[list[Action], msgspec.Meta(min_length=1, max_length=25)]
    view: View | None = None


class ViewSubmission(_Interaction, kw_only=True, tag="view_submission"):
    view: View


class ViewClosed(_Interaction, kw_only=True, tag="view_closed"):
    view: View
    is_cleared: bool = False


class Shortcut(_Interaction, kw_only=True, tag="shortcut"):
    callback_id: Id


class MessageAction(_Interaction, kw_only=True, tag="message_action"):
    callback_id: Id


class Event(Located, kw_only=True):
    type: Id
    subtype: Id | None = None
    event_ts: Id | None = None


class EventCallback(_Payload, kw_only=True, tag="event_callback"):
    event: Event
    event_id: Id | None = None
    event_time: int | None = None


class UrlVerification(_Payload, kw_only=True, tag="url_verification"):
    challenge: Id


class AppRateLimited(_Payload, kw_only=True, tag="app_rate_limited"):
    minute_rate_limited: int | None = None


class SlashCommand(msgspec.Struct, kw_only=True):
    """A slash command's form fields (all strings in a form; Socket Mode sends the same fields)."""

    command: Id
    text: CommandText = ""
    user_id: Id
    channel_id: Id = ""
    team_id: Id = ""
    response_url: Url = ""
    trigger_id: Id = ""


Interaction = BlockActions | ViewSubmission | ViewClosed | Shortcut | MessageAction
Callback = EventCallback | UrlVerification | AppRateLimited
Payload = Interaction | Callback


def check(
    body: Mapping[str, Any], kind: Literal["slash_commands", "interactive", "events_api"] | str
) -> None:
    """Raise `MalformedPayload` unless `body` is of a shape Slack sends for `kind` (see the module)."""
    target: Any = {SLASH_COMMAND: SlashCommand, INTERACTIVE: Interaction, EVENTS: Callback}.get(kind)
    if target is None:
        raise MalformedPayload(f"unknown request kind {kind[:40]!r}")
    if not isinstance(body, Mapping):
        raise MalformedPayload("the payload is not an object")
    try:
        # Every string must be UTF-8-encodable: JSON's "\ud800" escape decodes to a lone surrogate,
        # which no database, log handler or Slack call accepts (and `convert` lets some through).
        msgspec.json.encode(body)
        convert(body, target)
    except msgspec.ValidationError as exc:
        # msgspec names the path (`$.view.state.values…`) and the rule, never the value itself.
        raise MalformedPayload(str(exc)[:300]) from None
    except UnicodeEncodeError:
        # JSON's "\ud800" escape decodes to a lone surrogate: no Slack text is like that.
        raise MalformedPayload("a string that is not valid Unicode (a lone surrogate)") from None


def kind_of(body: Mapping[str, Any], *, form: bool) -> str:
    """Which shape a parsed HTTP body must have: a form without `payload` is a slash command."""
    if form:
        return SLASH_COMMAND
    kind = body.get("type")
    return EVENTS if isinstance(kind, str) and kind in _CALLBACK_TYPES else INTERACTIVE


_CALLBACK_TYPES = frozenset({"event_callback", "url_verification", "app_rate_limited"})
