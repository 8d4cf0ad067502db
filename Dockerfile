# syntax=docker/dockerfile:1
# upgrade-bot: a small image that runs `upgrade-bot run` as a non-root user.
# Configuration is mounted at /config/upgrade-bot.yaml; SQLite state lives in the /data volume
# (set data_dir: /data in the config, or database_url for PostgreSQL). Secrets come from the
# environment: SLACK_BOT_TOKEN plus SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET (HTTP).
#
# Two stages: `build` turns the source into wheels (the bot's, with the built-in templates and
# example plans inside it, and every dependency's at the version and hash requirements.lock
# pins); the final image installs those wheels and holds no source checkout, so it runs exactly
# what `pip install upgrade-bot` would with the locked dependencies.
#
# The base image is pinned by the digest of its multi-platform index, so every build starts from
# the same bytes: the official python:3.11-slim-bookworm of 2026-08-25 (Python 3.11.16, Debian 12),
# as docker-library/repo-info records it (repos/python/remote/3.11-slim-bookworm.md). To move to a
# newer build, take the digest `docker buildx imagetools inspect python:3.11-slim-bookworm` prints
# (the index's, not one platform's), or pass it where the image is built:
#   docker build --build-arg PYTHON_DIGEST=sha256:<digest> .
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm
ARG PYTHON_DIGEST=sha256:fe556eaffd0d96abd8685b83bb8a69addd0dc730fa193669a7df0d49ddcfac02
# The bot's own version, as in pyproject.toml (tests/test_packaging.py checks they agree): the
# final stage installs exactly that wheel, never whatever another version on the index might be.
ARG VERSION=0.2.0

FROM ${PYTHON_IMAGE}@${PYTHON_DIGEST} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE requirements.lock ./
# The dependencies first, as locked (every file's hash checked), in a layer of their own.
RUN pip wheel --wheel-dir /wheels --require-hashes -r requirements.lock
COPY bot ./bot
COPY commands ./commands
COPY templates ./templates
# The bot's own wheel; its dependencies are already there.
RUN pip wheel --wheel-dir /wheels --no-deps .

# What both images share: the labels, the environment and the user. The image's extras differ.
FROM ${PYTHON_IMAGE}@${PYTHON_DIGEST} AS runtime
ARG VERSION
ARG PYTHON_IMAGE
ARG PYTHON_DIGEST
LABEL org.opencontainers.image.title="upgrade-bot" \
      org.opencontainers.image.description="A Slack ChatOps bot that runs Kubernetes cluster upgrades with a team" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}" \
      org.opencontainers.image.base.digest="${PYTHON_DIGEST}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UPGRADE_BOT_CONFIG=/config/upgrade-bot.yaml

RUN useradd --system --create-home --uid 10001 upgradebot \
    && mkdir -p /data /config \
    && chown upgradebot /data

WORKDIR /app
COPY upgrade-bot.example.yaml ./

# `docker build --target slim .`: the bot without the charts extra (matplotlib with numpy,
# fonttools and pillow, 170 MB): the run report has no pictures and says so. PostgreSQL and
# boto3 (an EKS provider) stay.
FROM runtime AS slim
ARG VERSION
# The wheels are mounted for this one step rather than copied, so they never become a layer;
# --no-index: only what the build stage made is installed.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "upgrade-bot[postgres,aws]==${VERSION}"
USER 10001
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["upgrade-bot", "run"]

# The default image (the last stage): with the charts extra for the run report's pictures.
FROM runtime AS full
ARG VERSION
# The wheels are mounted for this one step rather than copied, so they never become a layer;
# --no-index: only what the build stage made is installed, which is the lock and the bot (with
# PostgreSQL, boto3 for an EKS provider's checks and matplotlib for the run report's pictures).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "upgrade-bot[postgres,aws,charts]==${VERSION}"

USER 10001
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["upgrade-bot", "run"]
# Socket Mode by default; for the Events API over HTTP:
#   docker run … upgrade-bot --http --port 3000
