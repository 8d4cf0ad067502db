"""The fake Slack secrets, roster and Slack budget every test shares.

The secrets are recognisable on purpose: the session-wide no-token-in-logs guard (in
`tests/conftest.py`) searches every log line for them.
"""

from __future__ import annotations

BOT_TOKEN = "xoxb-1111-2222-testBotTokenValue"
APP_TOKEN = "xapp-1-A0STUB-3333-testAppTokenValue"
SIGNING_SECRET = "test-signing-secret-0123456789abcdef"
SECRETS = (BOT_TOKEN, APP_TOKEN, SIGNING_SECRET)

ROSTER_YAML = """\
roster:
  primary: [U0PRIMARY]
  shadow: [U0SHADOW]
  coordinator: [S0LEADS]
"""


#: The `slack:` budget of a test's bot (`write_config` adds it unless the test writes its own):
#: each card edited as soon as it changes and posts not held to one a second. The stub answers at
#: once, so with the defaults (one edit of a card per 2 s, 50 edits a minute, one post a second per
#: channel) a test waiting for a card or a thread line spends its time asleep. The defaults are
#: what the pacing tests check (with a budget or a `slack:` of their own).
QUICK_SLACK = "slack: {edit_interval: 0s, updates_per_minute: 1000, posts_per_second: 20}\n"


def slack_env(api_url: str, *, app_token: bool = True) -> dict[str, str]:
    """The Slack part of a bot's environment, pointing its Web API client at `api_url` (the stub)."""
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": api_url}
    if app_token:
        env["SLACK_APP_TOKEN"] = APP_TOKEN
    return env
