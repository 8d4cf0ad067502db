"""Moved to `bot.core.rules.patterns` (issue 45): rule patterns sit with the rules, below the checks.

Kept only for the modules other work owns at this step (`bot.core.runs.plans`); once it imports
`bot.core.rules.patterns`, this module goes.
"""

from __future__ import annotations

from bot.core.rules.patterns import PatternError as PatternError
from bot.core.rules.patterns import compile_pattern as compile_pattern
