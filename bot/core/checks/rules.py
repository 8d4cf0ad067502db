"""Moved to `bot.core.rules` (issue 45): the rules sit below the checks, the jobs and the watches.

Kept only for the modules other work owns at this step (`bot.core.jobs`, `bot.core.runs`,
`bot.settings`, `bot.frontdoor.assemble`); once they import `bot.core.rules`, this module goes.
"""

from __future__ import annotations

from bot.core.rules import EventRecord as EventRecord
from bot.core.rules import Rule as Rule
from bot.core.rules import RuleHit as RuleHit
from bot.core.rules import fill_remediation as fill_remediation
from bot.core.rules import load_rules as load_rules
from bot.core.rules import match_rules as match_rules
