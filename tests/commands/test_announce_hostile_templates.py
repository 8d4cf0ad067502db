"""`/upgrade announce preview` on a hostile team override: a specific reason, quickly, to the asker."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.frontdoor.assemble import assemble
from bot.router import CommandRequest
from bot.settings import load_settings
from tests.support.hostile_templates import CASES, Hostile


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_preview_of_a_hostile_override_answers_with_the_file_line_and_reason(
    tmp_path: Path, write_config: Callable[..., Path], case: Hostile
) -> None:
    team = tmp_path / "team"
    blamed = case.write(team)
    services = assemble(load_settings(write_config(f"templates_dir: {team}\n"), {}), with_slack=False)
    try:
        started = time.monotonic()
        outcome = services.router.handle(
            CommandRequest(text=f"announce preview {case.template}", user_id="U0SHADOW", channel_id="C0OPS")
        )
        # The call returning is the worker being handed back; it must not take long either.
        assert time.monotonic() - started < 10
        assert not outcome.ok
        assert outcome.reply.ephemeral
        assert outcome.audit_outcome == "error"
        text = outcome.rendered.text
        assert "an internal error occurred" not in text
        assert "Traceback" not in text
        assert f"announcement `{case.template}` could not be rendered: {blamed}:{case.line}: " in text
        assert case.reason in text
        # The next request is served as usual: nothing was left holding the renderer.
        assert services.router.handle(CommandRequest(text="whoami", user_id="U0SHADOW")).ok
    finally:
        services.close()
