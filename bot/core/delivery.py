"""Posting to Slack exactly once, across crashes: claim, post with a dedup key, record the ts.

Every message the bot posts on its own — a run's card, its gate messages and thread lines, an
announcement — goes through `Deliveries.post_once`:

1. the key is claimed in the database (`run_messages`, by subject and key) with the claiming
   process as its owner, so a retry, a restart or a second worker never posts it again;
2. the message is posted carrying Slack message `metadata` whose payload names the key;
3. Slack's ts is recorded.

A process can die between 1 and 3. Such a claim has no ts and an owner that is gone: it is a
*tombstone*, and left alone it would keep the message from ever being posted. `resolve` settles
each one: it looks for the key in the channel's recent messages (or the thread's replies) —
a handful of calls, since every claim knows its channel, thread and time — and records the ts
when Slack has the message, or gives the claim back so the next attempt posts it. So a message
is never lost and never doubled. Claims of live owners are left alone (their post is in flight);
a claim older than `STALE_AFTER` is settled whoever owns it.

With several replicas the database never sees the Slack call, so the claim and the post happen in
one term of this replica's lease (`bot.core.tenure`): the post is sent only while the lease, on
this replica's own monotonic clock, outlasts the Slack client's timeout, and never after a pause
that let the lease run out — by then another replica may have settled the claim (`live_owners`
counts an owner as gone only after its lease plus a margin) and posted the message itself.

Thread posts come from an outbox, in order; one that keeps failing is set aside as a dead letter
(`post_outbox`) so it never blocks the run's later lines, and the run's card says so
(`undelivered_line`). docs/delivery.md has the operator's side.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from bot.adapters.store import Store
from bot.core.telemetry import NO_TELEMETRY, Telemetry
from bot.core.tenure import Tenure
from bot.errors import (
    POISON_ATTEMPTS,
    BotError,
    Fenced,
    SlackCallFailed,
    SlackOutcomeUnknown,
    TemporaryError,
    describe,
    described,
)
from bot.records import MessageRef

log = logging.getLogger(__name__)

#: Longer than any post with its retries (Retry-After included) takes: such a claim is a tombstone.
STALE_AFTER = timedelta(minutes=5)
#: How far before the claim the channel's history is searched (clocks of Slack and the bot differ).
CLOCK_SLACK = timedelta(minutes=2)
#: The defaults of the settings `outbox.dead_after_failures` and `outbox.dead_after`.
DEAD_AFTER_FAILURES = 10
DEAD_AFTER = timedelta(minutes=5)


def undelivered_line(dead: Sequence[MessageRef]) -> dict[str, Any] | None:
    """What a run's card says of its thread posts set aside: how many, the first one's failure in
    a word or two ("Slack 500"), and since when; None when there are none."""
    if not dead:
        return None
    first = dead[0]
    return {
        "count": len(dead),
        "reason": failure_label(first.failure),
        "since": first.failing_since or first.dead_at,
    }


def failure_label(failure: str) -> str:
    """A failure as `describe` wrote it, in a word or two for a card line."""
    status = re.search(r"\(HTTP (\d{3})\)", failure)
    if status:
        return f"Slack {status.group(1)}"
    code = re.search(r"Slack refused [\w.]+: ([a-z_]+)", failure)
    if code:
        return f"Slack: {code.group(1)}"
    if failure.startswith("SlackCallFailed"):
        return "Slack refused it"
    if failure.startswith("TemporaryError"):
        return "Slack not answering"
    return "an error"


#: Slack's refusals of a post itself (its length, its blocks): retried as it is, it is refused again.
_THE_POST = ("msg_too_long", "invalid_blocks", "invalid_blocks_format", "no_text", "too_many_attachments")


def failure_reason(failure: str) -> str:
    """A dead letter's failure as `describe` wrote it, for the operator (`outbox list`, the log
    line that sets it aside): what Slack said, in words, and what to do; the exception's class
    and where it was raised stay in the log."""
    kind, words = described(failure)
    if kind == "SlackCallFailed":
        if any(re.search(rf"\b{code}\b", words) for code in _THE_POST):
            return f"{words}: Slack refuses this post as it is, so a retry fails again; drop it"
        return f"{words}: Slack refuses it the same way each time; retry it once that is mended, or drop it"
    if kind == "SlackOutcomeUnknown":
        return f"{words}: it may be in the thread already; look there before you retry it (else drop it)"
    if kind == "TemporaryError":
        return f"{words}: retry it once Slack answers again"
    return f"{words}: retry it, or drop it"


def new_owner() -> str:
    """This process's name on its claims: unique per start, readable in the database."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


class Posted(Protocol):
    @property
    def channel(self) -> str: ...

    @property
    def ts(self) -> str: ...


class FileUploader(Protocol):
    """Uploads a file into a channel or a thread (bot.adapters.slack.SlackGateway.upload_file)."""

    def upload_file(
        self,
        channel: str,
        filename: str,
        content: bytes,
        *,
        title: str = "",
        thread_ts: str | None = None,
        comment: str | None = None,
    ) -> str:
        """Upload a file into the channel (or thread); its file id."""
        ...


class Poster(FileUploader, Protocol):
    """The Slack calls posting needs (and `upload_file`); `bot.adapters.slack.SlackGateway` is one."""

    def post_message(
        self,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
        dedup_key: str | None = None,
    ) -> Posted: ...

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None: ...

    def find_posted(self, channel: str, dedup_key: str, *, thread_ts: str, oldest: datetime) -> Posted | None:
        """The message posted with `dedup_key` in the channel (or thread) since `oldest`, if any."""
        ...


#: A message's body rendered when it is needed, not when it is handed over: (text, blocks).
Body = Callable[[], tuple[str, Sequence[dict[str, Any]] | None]]


def dedup_key(subject: str, key: str) -> str:
    return f"{subject}/{key}"


class Deliveries:
    """Claim → post with a dedup key → record, and the settling of claims left without a ts."""

    def __init__(
        self,
        *,
        store: Store,
        poster: Poster,
        clock: Callable[[], datetime],
        owner: str,
        live_owners: Callable[[], Collection[str]] | None = None,
        immediate: Poster | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        tenure: Tenure | None = None,
        send_timeout: float = 0.0,
        dead_after_failures: int = DEAD_AFTER_FAILURES,
        dead_after: timedelta = DEAD_AFTER,
    ) -> None:
        self.store = store
        #: This replica's lease: a key is claimed and posted in one term of it (`bot.core.tenure`).
        self.tenure = tenure or Tenure()
        #: The Slack client's timeout: a claim is taken only when a post that long fits the lease.
        self.send_timeout = send_timeout
        #: A thread post failing in any other way than a refusal is set aside after this many
        #: failures in a row, or once they have lasted this long (settings `outbox.*`).
        self.dead_after_failures = dead_after_failures
        self.dead_after = dead_after
        #: Where a thread post set aside as a dead letter is counted.
        self.telemetry = telemetry
        self.poster = poster
        #: The poster without coalescing, for an edit that must be made before it is recorded.
        self.immediate = immediate or poster
        #: Messages posted again after a deletion: (channel, old ts) → new ts, for stale callers.
        self._moved: dict[tuple[str, str], str] = {}
        self.clock = clock
        self.owner = owner
        # One process by default; with several replicas `serve` passes the ones alive by the
        # lease table's heartbeats (`Store.live_replicas`).
        self.live_owners = live_owners or (lambda: {owner})

    def post_once(
        self,
        subject: str,
        key: str,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str = "",
        broadcast: bool = False,
    ) -> Posted | None:
        """Post unless `key` was claimed before; None when it was (posted, or in flight elsewhere).

        The claim and the post happen in one term of this replica's lease: a replica paused
        between them sends nothing after it wakes, since its claim may have been taken over."""
        with self.tenure.reserve(self.send_timeout):
            if not self.store.claim_message(
                run_id=subject,
                key=key,
                channel=channel,
                thread_ts=thread_ts,
                at=self.clock(),
                owner=self.owner,
            ):
                return None
            return self._post(subject, key, channel, text, blocks, thread_ts, broadcast)

    def _post(
        self,
        subject: str,
        key: str,
        channel: str,
        text: str,
        blocks: Sequence[dict[str, Any]] | None,
        thread_ts: str,
        broadcast: bool,
    ) -> Posted:
        """Post a claimed key with the key in its metadata, and record the ts."""
        try:
            posted = self.poster.post_message(
                channel,
                text,
                blocks=blocks,
                thread_ts=thread_ts or None,
                reply_broadcast=broadcast,
                dedup_key=dedup_key(subject, key),
            )
        except SlackOutcomeUnknown:
            # Sent, but no answer: Slack may have posted it. Look for it before giving it back.
            found = self._look_for(subject, key, channel, thread_ts)
            if found is not None:
                return found
            raise
        except BotError:
            # Slack refused or never answered, or the lease ran out first: the claim goes back
            # (if it is still this process's), so a later attempt posts it. (A post Slack made but
            # whose answer was lost is found by `resolve` instead.)
            self.store.release_message(run_id=subject, key=key, owner=self.owner)
            raise
        self.store.record_message(run_id=subject, key=key, channel=posted.channel, ts=posted.ts)
        return posted

    def _look_for(self, subject: str, key: str, channel: str, thread_ts: str) -> Posted | None:
        """After a post that got no answer: the post, recorded, when Slack has it; else the claim
        is given back (None). When Slack cannot be searched the claim is kept — a live owner's
        claim is settled after `STALE_AFTER`: late beats twice."""
        try:
            found = self.poster.find_posted(
                channel, dedup_key(subject, key), thread_ts=thread_ts, oldest=self.clock() - CLOCK_SLACK
            )
        except BotError as exc:
            log.warning(
                "could not look for %s/%s after a post without an answer: %s", subject, key, exc.user_message
            )
            return None
        if found is None:
            self.store.release_message(run_id=subject, key=key, owner=self.owner)
            return None
        log.info("post %s/%s had no answer but is in Slack (ts %s); recorded", subject, key, found.ts)
        self.store.record_message(run_id=subject, key=key, channel=found.channel, ts=found.ts)
        return found

    def unsettled(self, refs: Mapping[str, MessageRef]) -> list[MessageRef]:
        """The claims among `refs` that have no ts and whose post can no longer be in flight."""
        live = set(self.live_owners())
        cutoff = self.clock() - STALE_AFTER
        return [
            ref
            for ref in refs.values()
            if not ref.ts
            # An unowned outbox row is simply waiting to be posted; it is not a lost claim.
            and not (ref.body and not ref.owner)
            and (ref.owner not in live or (ref.claimed_at is not None and ref.claimed_at < cutoff))
        ]

    def resolve(self, ref: MessageRef) -> str:
        """Settle one tombstone: the ts when Slack has the message (recorded), else "" (released)."""
        since = (ref.claimed_at or self.clock()) - CLOCK_SLACK
        try:
            found = self.poster.find_posted(
                ref.channel, dedup_key(ref.run_id, ref.key), thread_ts=ref.thread_ts, oldest=since
            )
        except BotError as exc:
            # Cannot tell; leave the claim for the next sweep rather than risk a double post.
            log.warning("could not look for %s/%s in Slack: %s", ref.run_id, ref.key, exc.user_message)
            return ""
        if found is not None:
            log.info(
                "claim %s/%s was posted before the crash (ts %s); recorded", ref.run_id, ref.key, found.ts
            )
            self.store.record_message(run_id=ref.run_id, key=ref.key, channel=found.channel, ts=found.ts)
            return found.ts
        log.info("claim %s/%s was never posted; released for a new post", ref.run_id, ref.key)
        # Only if its owner still holds it: another settler may have released and re-posted it.
        self.store.release_message(run_id=ref.run_id, key=ref.key, owner=ref.owner)
        return ""

    def post_outbox(self, ref: MessageRef, channel: str, *, thread_ts: str) -> Posted | None:
        """Post one outbox row (written with the commit that owes it) into `thread_ts`, once.

        None when it is not ours to post: taken by another process, or a dead letter. A row is
        set aside (one log line, a metric, a line on its run's card) and never posted again until
        an operator retries it, so it never blocks the rows after it nor is tried at every start:
        - when Slack refused it the same way `POISON_ATTEMPTS` times in a row (it will not change);
        - when it failed otherwise (5xx, no answer) `dead_after_failures` times in a row, or at a
          failure `dead_after` or more after its failures began (issue 38: a post Slack answered
          500 for ever held up every later post of its run)."""
        try:
            return self._post_outbox(ref, channel, thread_ts=thread_ts)
        except Fenced:
            raise  # this replica was deposed, or its lease ran out: another one posts it
        except BotError as exc:
            if self._outbox_failed(ref, exc):
                return None
            raise

    def _outbox_failed(self, ref: MessageRef, exc: BotError) -> bool:
        """Count a failed outbox row's failure; True when that set it aside."""
        failure = describe(exc)
        if isinstance(exc, TemporaryError):
            # Slack unavailable, in whatever words: one run of failures, limited by count and time.
            limits: dict[str, Any] = {
                "dead_after": self.dead_after_failures,
                "way": f"{type(exc).__name__}:",
                "dead_after_time": self.dead_after,
            }
        else:
            limits = {"dead_after": POISON_ATTEMPTS}
        row = self.store.outbox_failed(
            run_id=ref.run_id,
            key=ref.key,
            failure=failure,
            at=self.clock(),
            # Sent without an answer, and Slack could not be searched: the claim `_look_for` kept
            # stays (settled once stale, late beats twice); released, the next pass posted it again.
            release=not isinstance(exc, SlackOutcomeUnknown),
            **limits,
        )
        if row is None or row.dead_at is None:
            return False
        since = f" since {row.failing_since:%H:%M:%S}Z" if row.failing_since else ""
        # The reason in words for the operator, then the detail (the error and where it was raised).
        log.error(
            "thread post %s/%s set aside as a dead letter after %s failure(s) in a row%s: %s "
            "(`upgrade-bot outbox list|retry|drop`); detail: %s",
            ref.run_id,
            ref.key,
            row.attempts,
            since,
            failure_reason(failure),
            failure,
        )
        self.telemetry.outbox_set_aside()
        return True

    def _post_outbox(self, ref: MessageRef, channel: str, *, thread_ts: str) -> Posted | None:
        with self.tenure.reserve(self.send_timeout):
            return self._claim_and_post_outbox(ref, channel, thread_ts=thread_ts)

    def _claim_and_post_outbox(self, ref: MessageRef, channel: str, *, thread_ts: str) -> Posted | None:
        if not self.store.claim_outbox(
            run_id=ref.run_id,
            key=ref.key,
            channel=channel,
            thread_ts=thread_ts,
            owner=self.owner,
            at=self.clock(),
        ):
            return None
        body = json.loads(ref.body)
        if "file" in body:
            return self._upload(ref, channel, thread_ts, body["file"])
        return self._post(
            ref.run_id,
            ref.key,
            channel,
            str(body.get("text", "")),
            body.get("blocks"),
            thread_ts,
            bool(body.get("broadcast", False)),
        )

    def _upload(self, ref: MessageRef, channel: str, thread_ts: str, file: Mapping[str, str]) -> Posted:
        """Upload a claimed file row into the thread and record its file id as the row's ts.

        A file carries no metadata, so a crash between the upload and the record cannot be told
        from an upload that never happened: that claim is released and the file uploaded again
        (a possible repeat beats a report that is never attached)."""
        try:
            file_id = self.poster.upload_file(
                channel,
                str(file["filename"]),
                base64.b64decode(file["content"]),
                title=str(file.get("title", "")),
                thread_ts=thread_ts or None,
            )
        except BotError:
            self.store.release_message(run_id=ref.run_id, key=ref.key, owner=self.owner)
            raise
        self.store.record_message(run_id=ref.run_id, key=ref.key, channel=channel, ts=file_id)
        return _Uploaded(channel=channel, ts=file_id)

    def settle(self, subject: str, *, posted_lines: bool = True) -> dict[str, MessageRef]:
        """The subject's message references after settling its tombstones (without
        `posted_lines`, less the thread lines already posted: `Store.messages`)."""
        refs = self.store.messages(subject, posted_lines=posted_lines)
        stale = self.unsettled(refs)
        for ref in stale:
            self.resolve(ref)
        return self.store.messages(subject, posted_lines=posted_lines) if stale else refs

    def settle_all(self, unposted: Sequence[MessageRef] | None = None) -> list[MessageRef]:
        """Every tombstone in the database (or among `unposted`, already read), settled."""
        refs = self.store.unposted_messages() if unposted is None else unposted
        stale = self.unsettled({f"{r.run_id}/{r.key}": r for r in refs})
        for ref in stale:
            self.resolve(ref)
        return stale

    def edit(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None:
        """Edit a posted message (coalesced when the poster is); a deleted one is posted again."""
        try:
            self.poster.update_message(channel, ts, text, blocks=blocks)
        except SlackCallFailed as exc:
            if exc.code != "message_not_found":
                raise
            self.repost_gone(channel, ts, text, blocks)

    def edit_later(self, channel: str, ts: str, body: Body) -> None:
        """Edit a posted message to `body`: rendered now and edited as `edit` does, unless the
        poster takes edits unrendered (`update_message_later`) and renders only the ones it
        shows — the rehearsal's text poster shows the card at the end only, so every edit
        rendered before the last one was thrown away."""
        later = getattr(self.poster, "update_message_later", None)
        if callable(later):
            later(channel, ts, body)
            return
        text, blocks = body()
        self.edit(channel, ts, text, blocks=blocks)

    def edit_slot(self, channel: str, ts: str) -> float | None:
        """Seconds until the message's next edit may be sent (≤ 0: now), when edits are coalesced
        (`CoalescingPoster.slot_in`); None when the poster sends each edit at once."""
        slot_in = getattr(self.poster, "slot_in", None)
        if not callable(slot_in):
            return None
        return float(slot_in(channel, self._moved.get((channel, ts), ts)))

    # -- messages someone deleted --------------------------------------------------------------

    def repost_gone(
        self, channel: str, ts: str, text: str, blocks: Sequence[dict[str, Any]] | None
    ) -> str | None:
        """A message the bot edits was deleted: post it again once, re-point its reference, link it.

        The new post is claimed under `KEY:repost:OLD_TS` (so it happens once, across crashes),
        its ts replaces the reference's, and the message's thread gets one line linking to it.
        The new ts, or None when the message is not one the bot recorded.
        """
        moved = self._moved.get((channel, ts))
        if moved:
            # A caller still held the old reference: the edit goes to the message posted again.
            try:
                self.immediate.update_message(channel, moved, text, blocks=blocks)
            except SlackCallFailed as exc:
                if exc.code != "message_not_found":
                    raise
                return self.repost_gone(channel, moved, text, blocks)  # deleted again
            return moved
        ref = self.store.message_at(channel=channel, ts=ts)
        if ref is None:
            log.warning("message %s/%s was deleted and is not one the bot recorded", channel, ts)
            return None
        repost_key = f"{ref.key}:repost:{ts}"
        posted = self.post_once(ref.run_id, repost_key, channel, text, blocks=blocks, thread_ts=ref.thread_ts)
        if posted is not None:
            new_ts = posted.ts
        else:
            # Posted before a crash (or by another process a moment ago): settle it, take its ts.
            again = self.settle(ref.run_id).get(repost_key)
            if again is None or not again.ts:
                return None
            new_ts = again.ts
            self.immediate.update_message(channel, new_ts, text, blocks=blocks)
        self.store.record_message(run_id=ref.run_id, key=ref.key, channel=channel, ts=new_ts)
        self._moved[(channel, ts)] = new_ts
        log.info("message %s of %s was deleted; posted again as %s", ref.key, ref.run_id, new_ts)
        if not ref.thread_ts:
            root = thread_root(self.store.messages(ref.run_id), ref.key)
            self.post_once(
                ref.run_id,
                f"{ref.key}:moved:{ts}",
                channel,
                f"This card was deleted, so it is posted again: {message_link(channel, new_ts)}",
                thread_ts=root,
            )
        return new_ts


@dataclass(frozen=True)
class _Uploaded:
    channel: str
    ts: str


def thread_root(refs: Mapping[str, MessageRef], key: str) -> str:
    """The thread of top-level message `key`: its first ts, kept when it was posted again."""
    ref = refs.get(key)
    first = ref.ts if ref else ""
    prefix = f"{key}:repost:"
    for other in refs:
        if other.startswith(prefix):
            old = other[len(prefix) :]
            if not first or float(old) < float(first):
                first = old
    return first


def message_link(channel: str, ts: str) -> str:
    """A Slack link to a message by channel and ts (no API call: `chat.getPermalink` costs budget)."""
    return f"<https://slack.com/archives/{channel}/p{ts.replace('.', '')}|the card>"
