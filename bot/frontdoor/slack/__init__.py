"""The Slack front door: a Bolt `App` whose listeners ack at once and hand work to the worker pool.

Both transports (HTTP and Socket Mode) share one App, built by `app.build_app`. The order inside a
request is fixed by Slack's 3-second ack budget: verify (Bolt's middleware, HTTP only) →
de-duplicate (one indexed insert, a middleware in `app`) → ack → enqueue. Everything slow — the
command itself, rendering, posting — happens on the bot's own workers, and its reply goes back
through `response_url` or the Web API.

One module per feature, each with `register(app, …)` taking what it needs: `commands` (the
`/upgrade` slash command), `gates` (gate buttons and the destructive step's confirmation modal),
`fallback` (any other button, and errors in listeners).
"""

from bot.frontdoor.slack.app import build_app

__all__ = ["build_app"]
