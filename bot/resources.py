"""Where the built-in templates and example plans are, in a checkout and in an installed copy.

`templates/` lives at the top of the repository, where a team reads it and copies files from it
to override them. The wheel ships the same folder inside the package as `bot/templates`
(pyproject.toml maps the package `bot.templates` onto `templates/`). So the folder is found:

- beside this module, `bot/templates/`, in a plain `pip install .` or an installed wheel;
- one level up, `templates/`, in a source checkout or an editable install (`pip install -e .`),
  where the package is the repository's own `bot/` folder.

Paths, not `importlib.resources` traversables: Jinja2's FileSystemLoader, `templates check` and
error messages need real directories, and pip always installs a wheel unpacked. This module is a
leaf (it imports nothing of the bot) so settings, the core and the front doors can all use it
without an import cycle.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _builtin_templates() -> Path:
    for candidate in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        if candidate.is_dir():
            return candidate
    # Neither: a broken install. Name the installed location, so the error a user sees points
    # where the files should have been.
    return _PACKAGE / "templates"


#: The shipped templates; a team's `templates_dir` overrides files by name.
BUILTIN_TEMPLATES = _builtin_templates()
#: The example plans (`upgrade-bot rehearse NAME` finds `NAME.yaml` here).
BUILTIN_PLANS = BUILTIN_TEMPLATES / "plans"
#: The example fleet plans (`upgrade-bot fleet start NAME` and `rehearse-fleet NAME` find `NAME.yaml` here).
BUILTIN_FLEETS = BUILTIN_TEMPLATES / "fleets"
#: The shipped known-issue rules (`rules_files` in the configuration adds or overrides rules by id).
BUILTIN_RULES = BUILTIN_TEMPLATES / "rules" / "known-issues.yaml"
#: The annotated example configuration (`upgrade-bot init` writes it): a copy of the repository's
#: `upgrade-bot.example.yaml` that scripts/gen_docs.py keeps identical, so the wheel ships it.
EXAMPLE_CONFIG = BUILTIN_TEMPLATES / "config" / "upgrade-bot.example.yaml"
#: The Slack app's manifest (`upgrade-bot init --slack-manifest` writes it): a copy of the
#: repository's `slack-app-manifest.yaml` that scripts/gen_docs.py keeps identical, so the wheel ships it.
SLACK_MANIFEST = BUILTIN_TEMPLATES / "config" / "slack-app-manifest.yaml"
