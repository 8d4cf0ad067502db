"""Moved to `bot.core.rules.known` (issue 45): the drain and the watch share it, below the checks.

Kept only for the modules other work owns at this step (`bot.core.jobs`); once they import
`bot.core.rules.known`, this module goes.
"""

from __future__ import annotations

from bot.core.rules.known import RuleNeeds as RuleNeeds
from bot.core.rules.known import known_issue_text as known_issue_text
from bot.core.rules.known import pod_view as pod_view
from bot.core.rules.known import watch_key as watch_key
