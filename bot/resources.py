"""Where the built-in templates and example plans are (a leaf: imports nothing of the bot)."""

from __future__ import annotations

from pathlib import Path

#: The repository's own templates; a team's `templates_dir` overrides files by name.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
