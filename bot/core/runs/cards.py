"""A run's face in Slack: the card (edited in place), its thread, and the gate messages.

Called by the run service after every commit, with the committed run and the events of that
commit. Slack posts are made idempotent by claiming a key in the store before posting (`card`,
`gate:STEP:EPOCH`, `event:VERSION:N`): after a restart the same keys are found claimed, so nothing
is posted twice. The card is edited in place after every commit, so it always shows the truth.
A Slack failure never undoes a commit: the card catches up on the next change or at restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from bot.adapters.store import Store
from bot.core.rendering import Renderer
from bot.core.runs import machine as R
from bot.errors import BotError

log = logging.getLogger(__name__)


class Posted(Protocol):
    @property
    def channel(self) -> str: ...

    @property
    def ts(self) -> str: ...


class Poster(Protocol):
    """The Slack calls a run needs; `bot.adapters.slack.SlackGateway` is one."""

    def post_message(
        self,
        channel: str,
        text: str,
        *,
        blocks: Sequence[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
    ) -> Posted: ...

    def update_message(
        self, channel: str, ts: str, text: str, *, blocks: Sequence[dict[str, Any]] | None = None
    ) -> None: ...


def card_context(run: R.Run, now: datetime) -> dict[str, Any]:
    """What the card template shows of a run at `now`."""
    cur = run.current
    gate: dict[str, Any] | None = None
    if cur is not None and run.state is R.RunState.ACTIVE and run.phase(cur) is not None:
        # The card carries the open gate's buttons too (same value as in the thread).
        gate = {
            "step": cur.step_id,
            "phase": run.phase(cur),
            "value": R.ButtonRef(run_id=run.id, step_id=cur.step_id, epoch=cur.epoch).encode(),
        }
    return {
        "run": run,
        "plan": run.plan,
        "rows": R.summary_rows(run, now),
        "current": cur.step_id if cur else "",
        "gate": gate,
        "zone": run.plan.window.timezone,
        "roster": run.roster,
    }


class RunCards:
    """Publishes committed runs to Slack: one card per run, a thread of events, gate messages."""

    def __init__(
        self,
        *,
        store: Store,
        renderer: Renderer,
        poster: Poster,
        clock: Callable[[], datetime],
        operations_channel: str | None = None,
    ) -> None:
        self.store = store
        self.renderer = renderer
        self.poster = poster
        self.clock = clock
        self.operations_channel = operations_channel

    def channel_for(self, run: R.Run) -> str | None:
        return run.plan.operations_channel or self.operations_channel

    def publish(self, run: R.Run, events: Sequence[R.Event]) -> None:
        """Bring Slack up to date with a committed run: card, gate messages, thread lines."""
        channel = self.channel_for(run)
        if not channel:
            return
        try:
            self._publish(run, events, channel)
        except BotError as exc:
            # The run is committed; Slack catches up on the next change or at restart.
            log.warning("could not update Slack for run %s: %s", run.id, exc.user_message)

    def _post_once(
        self,
        run: R.Run,
        key: str,
        channel: str,
        template: str,
        context: Mapping[str, Any],
        *,
        thread_ts: str = "",
        broadcast: bool = False,
    ) -> str | None:
        if not self.store.claim_message(
            run_id=run.id, key=key, channel=channel, thread_ts=thread_ts, at=self.clock()
        ):
            return None
        rendered = self.renderer.render(template, context)
        try:
            posted = self.poster.post_message(
                channel,
                rendered.text,
                blocks=rendered.blocks,
                thread_ts=thread_ts or None,
                reply_broadcast=broadcast,
            )
        except BotError:
            self.store.release_message(run_id=run.id, key=key)
            raise
        self.store.record_message(run_id=run.id, key=key, channel=posted.channel, ts=posted.ts)
        return posted.ts

    def _publish(self, run: R.Run, events: Sequence[R.Event], channel: str) -> None:
        refs = self.store.messages(run.id)
        context = card_context(run, self.clock())
        card = refs.get("card")
        if card is None or not card.ts:
            ts = self._post_once(run, "card", channel, "runs/card", context)
            if ts is None:
                return  # another worker holds the claim and will post it
            refs = self.store.messages(run.id)
            card = refs["card"]
        else:
            rendered = self.renderer.render("runs/card", context)
            self.poster.update_message(card.channel, card.ts, rendered.text, blocks=rendered.blocks)
        thread = card.ts
        # Thread lines for what just happened (keys from the committed version: never twice).
        for i, event in enumerate(events):
            if event.kind in ("refused", "gate_opened"):
                continue
            broadcast = event.kind in ("step_failed", "run_aborted", "step_interrupted")
            self._post_once(
                run,
                f"event:{run.version}:{i}",
                card.channel,
                "runs/event",
                {"event": event, "run": run, "zone": run.plan.window.timezone},
                thread_ts=thread,
                broadcast=broadcast,
            )
        # Gate messages: retire the buttons of gates that closed, post the open one.
        for sr in run.steps:
            for key, ref in refs.items():
                closed = key.startswith(f"gate:{sr.step_id}:") and key != self._gate_key(run, sr)
                if closed and ref.ts and not key.endswith(":retired"):
                    self._retire(run, sr, ref.channel, ref.ts, key)
        cur = run.current
        if run.state is R.RunState.ACTIVE and cur is not None and run.phase(cur) is not None:
            self._post_once(
                run,
                self._gate_key(run, cur),
                card.channel,
                "runs/gate",
                self._gate_context(run, cur),
                thread_ts=thread,
            )

    @staticmethod
    def _gate_key(run: R.Run, sr: R.StepRun) -> str:
        return f"gate:{sr.step_id}:{sr.epoch}"

    def _gate_context(self, run: R.Run, sr: R.StepRun) -> dict[str, Any]:
        step = run.plan.step(sr.step_id)
        gate = run.gate_for(sr)
        phase = run.phase(sr) or ""
        return {
            "run": run,
            "step": step,
            "phase": phase,
            "gate": gate.describe() if gate else "",
            "people": sorted({p for role in (gate.roles if gate else ()) for p in run.roster.get(role, ())}),
            "value": R.ButtonRef(run_id=run.id, step_id=sr.step_id, epoch=sr.epoch).encode(),
            "waiting_on": R.waiting_on(run, sr, self.clock()),
            "state": str(sr.state),
            "open": True,
        }

    def _retire(self, run: R.Run, sr: R.StepRun, channel: str, ts: str, key: str) -> None:
        """Edit a closed gate's message: no buttons, and what became of the step."""
        if not self.store.claim_message(
            run_id=run.id, key=f"{key}:retired", channel=channel, thread_ts="", at=self.clock()
        ):
            return
        context = {**self._gate_context(run, sr), "open": False}
        rendered = self.renderer.render("runs/gate", context)
        self.poster.update_message(channel, ts, rendered.text, blocks=rendered.blocks)
