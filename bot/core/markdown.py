"""Text from users and clusters made inert in the Markdown the bot writes (the run report, the
snapshot diff), as the HTML report makes it inert in HTML.

A cluster's names reach these files: a node, a workload, a label, an event's message. A Markdown
file is pasted into wikis, tickets and Slack, and Markdown passes HTML through, so `<script>` or
`<img onerror=…>` would run in a viewer, `<!channel>` would ping a channel once pasted into Slack,
`[x](javascript:…)` would be a link and U+202E would show `gnp.exe` as `exe.png`. Each value goes
through `md_text`: the same `inert` the HTML report's values go through (`&`, `<`, `>` as
entities, control characters and bidirectional marks removed, one line), then a backslash before
each character Markdown would read as markup in a line or a table cell.
"""

from __future__ import annotations

import re

from bot.core.safetext import inert

# Emphasis, code spans, links and images, table cells, and the backslash itself.
_MARKUP = re.compile(r"([\\`*_\[\]|])")


def md_text(value: object) -> str:
    """`value` as literal text on one Markdown line (a list item, a heading or a table cell)."""
    return _MARKUP.sub(r"\\\1", inert(value, multiline=False))
