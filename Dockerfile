# upgrade-bot: a small image that runs `upgrade-bot run` as a non-root user.
# Configuration is mounted at /config/upgrade-bot.yaml; SQLite state lives in the /data volume
# (set data_dir: /data in the config, or database_url for PostgreSQL). Secrets come from the
# environment: SLACK_BOT_TOKEN plus SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UPGRADE_BOT_CONFIG=/config/upgrade-bot.yaml

RUN useradd --system --create-home --uid 10001 upgradebot \
    && mkdir -p /data /config \
    && chown upgradebot /data

WORKDIR /app
COPY pyproject.toml README.md upgrade-bot.example.yaml ./
COPY bot ./bot
COPY commands ./commands
COPY templates ./templates
# Installed in place so the built-in templates/ stay beside the code that looks for them.
RUN pip install -e ".[postgres]"

USER 10001
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["upgrade-bot", "run"]
# Socket Mode by default; for the Events API over HTTP:
#   docker run … upgrade-bot --http --port 3000
