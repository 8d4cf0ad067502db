"""The configuration a verb runs with, and the one place its errors become exit statuses.

Configuration problems exit with status 2 and one line that names the key or line; no traceback
is printed for an error the user can fix. Without a configuration file the read-only commands
(snapshot, diff, check, and `exec` of snapshot, snapshots, diff, check or diagnose) use the current
kube context as kubectl does (`--kubeconfig`, `--context`, $KUBECONFIG).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bot.errors import BotError, ConfigError, UsageError
from bot.frontdoor.cli.connect import kubeconfig_context
from bot.frontdoor.cli.options import EXIT_FAILED, EXIT_USAGE, Handler, refused, stdout_reader_gone
from bot.logsetup import configure_logging
from bot.settings import (
    CONFIG_ENV,
    DEFAULT_CONFIG_NAME,
    Settings,
    kube_context_settings,
    load_settings,
    resolve_config_path,
)

# The terminal's logger by the name its lines have carried since it was one module.
log = logging.getLogger("bot.frontdoor.cli")

#: A verb's work once its settings are loaded: the command's exit status.
Run = Callable[[Settings, argparse.Namespace], int]


def configured(
    run: Run, *, read_only: bool | Callable[[argparse.Namespace], bool] = False, log_level: str = "WARNING"
) -> Handler:
    """The handler of a verb that reads the configuration: load it (`settings_for`), configure the
    log (`log_level` unless `--log-level`), run, and turn an error into one line and its status."""

    def handle(args: argparse.Namespace) -> int:
        reads_only = read_only(args) if callable(read_only) else read_only
        try:
            settings = settings_for(args, read_only=reads_only)
            configure_logging(
                args.log_level or log_level, settings.secrets.values(), log_format=args.log_format
            )
            return run(settings, args)
        except BotError as exc:
            if not isinstance(exc, (ConfigError, UsageError)):
                log.debug("failed", exc_info=True)
            return refused(exc)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
                raise  # not a connection: `main` ends the command quietly
            if exc.filename is None:
                # A connection (Slack's Socket Mode, a URL), not a file: "could not do it", with why.
                log.debug("failed", exc_info=True)
                why = getattr(exc, "reason", None) or exc.strerror or exc
                print(f"upgrade-bot: could not connect: {why}", file=sys.stderr)
                return EXIT_FAILED
            # A file the user named (--out, --output) that cannot be written: their mistake, one line.
            print(f"upgrade-bot: cannot write {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        except Exception:
            # A bug: the detail goes to the log (stderr), behind one line a person can quote.
            log.exception("upgrade-bot %s failed unexpectedly", args.command)
            print("upgrade-bot: internal error (the log above has the detail)", file=sys.stderr)
            return EXIT_FAILED

    return handle


def settings_for(args: argparse.Namespace, *, read_only: bool = False) -> Settings:
    """The configuration file's settings; for a read-only command without one (no --config, no
    $UPGRADE_BOT_CONFIG, no ./upgrade-bot.yaml), the current kube context's (`kube_settings`).
    `--kubeconfig`/`--context` with a configuration file apply to its clusters."""
    path = resolve_config_path(args.config, os.environ, Path.cwd())
    kubeconfig, context = getattr(args, "kubeconfig", None), getattr(args, "context", None)
    if read_only and not args.config and not os.environ.get(CONFIG_ENV) and not path.exists():
        return kube_settings(kubeconfig, context)
    settings = load_settings(path, os.environ)
    if kubeconfig or context:
        settings = replace(
            settings,
            clusters={
                name: replace(
                    c,
                    kubeconfig=Path(kubeconfig).expanduser() if kubeconfig else c.kubeconfig,
                    context=context or (None if kubeconfig else c.context),
                    in_cluster=False if kubeconfig else c.in_cluster,
                )
                for name, c in settings.clusters.items()
            },
        )
    if context:
        # Named as the flag, before a cluster's connection would name it as the file's `context:`.
        for cluster in settings.clusters.values():
            if cluster.kubeconfig is not None and not cluster.in_cluster:
                kubeconfig_context(str(cluster.kubeconfig), context)
    return settings


def kube_settings(kubeconfig: str | None, context: str | None) -> Settings:
    """kubectl's rules: `--kubeconfig`, else $KUBECONFIG (a colon-separated list, merged), else
    ~/.kube/config; `--context`, else the current context."""
    source = kubeconfig or os.environ.get("KUBECONFIG", "").strip() or str(Path("~/.kube/config"))
    paths = [Path(p).expanduser() for p in source.split(os.pathsep) if p]
    # exists(), not is_file(): a FIFO or a device is named for what it is by kubeconfig_context
    # (bot.adapters.kube.check_kubeconfig) rather than reported missing; exists() opens nothing.
    if not any(p.exists() for p in paths):
        where = f"--config PATH or set {CONFIG_ENV}; `upgrade-bot init` writes an example"
        raise ConfigError(
            f"no configuration file ({DEFAULT_CONFIG_NAME}) and no kubeconfig at {source} "
            f"(pass --kubeconfig PATH, set KUBECONFIG, or pass {where})"
        )
    chosen = kubeconfig_context(os.pathsep.join(str(p) for p in paths), context)
    return kube_context_settings(
        kubeconfig=os.pathsep.join(str(p) for p in paths), context=chosen, env=os.environ
    )
