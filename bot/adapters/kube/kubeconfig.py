"""Kubeconfig files read before the client sees them: refused when the client would hang or fail
on them with a traceback, and their current context named for messages."""

from __future__ import annotations

import os

import yaml

from bot.adapters.kube.lean import _kubernetes
from bot.errors import ConfigError
from bot.files import TooLarge, Unreadable, read_bounded
from bot.logsetup import mask_tokens
from bot.yamlsyntax import read_slip

#: A kubeconfig is a few kilobytes per cluster (its certificates inline); one of hundreds of
#: clusters stays under a megabyte. A bigger file is the wrong file, and YAML-parsing it would
#: hold a worker for a minute.
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024


def check_kubeconfig(kubeconfig: str, *, cluster: str = "") -> None:
    """Refuse, with what is wrong, a kubeconfig the client would hang on or fail on with a
    traceback: each file of the (colon-separated, as in $KUBECONFIG) list must be a regular file
    (a FIFO would block the open, /dev/zero never ends), at most MAX_KUBECONFIG_BYTES, UTF-8 YAML
    whose top level is a mapping. Files of a list that do not exist are skipped, as kubectl skips
    them; a list of none that exists is refused. The client reads the files again afterwards: a
    kubeconfig is small, and its loader resolves certificate paths relative to each file."""
    paths = [p for p in kubeconfig.split(os.pathsep) if p]
    where = f"cluster {cluster}: " if cluster else ""
    found = False
    for path in paths:
        label = f"{where}kubeconfig {path}"
        try:
            data = read_bounded(path, MAX_KUBECONFIG_BYTES)
        except FileNotFoundError:
            continue
        except TooLarge as exc:
            raise ConfigError(f"{label}: {exc.reason}; is this the right file?") from None
        except Unreadable as exc:
            raise ConfigError(f"{label}: {exc.reason}") from None
        found = True
        _check_kubeconfig_text(label, data)
    if not found:
        shown = paths[0] if len(paths) == 1 else os.pathsep.join(paths)
        raise ConfigError(f"{where}kubeconfig {shown or '(empty path)'}: no such file")


def _check_kubeconfig_text(label: str, data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{label}: not UTF-8 text at line {line} (byte {exc.start})") from None
    try:
        loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        slip = read_slip(exc, text, label)
        if slip is not None:
            raise ConfigError(
                f"{label}: not valid YAML at line {slip.line}, column {slip.column}: {slip.reading}"
            ) from None
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{label}: not valid YAML ({first[:120]})") from None
    except RecursionError:
        raise ConfigError(f"{label}: not valid YAML (nested too deeply to read)") from None
    # An empty file is what kubectl treats as no configuration; the client says so itself.
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(
            f"{label}: not a kubeconfig (its top level is a {_yaml_kind(loaded)}, not a mapping)"
        )


def _yaml_kind(value: object) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def kubeconfig_context(kubeconfig: str, context: str | None = None, *, cluster: str = "") -> str:
    """The context a kubeconfig (or a colon-separated list of them, as in $KUBECONFIG, merged as
    kubectl merges them) selects: `context` if it has one by that name, else its current context.
    A list with no readable file, a context it lacks or none current is a ConfigError; for the
    configuration's `cluster`, one that names its entry (`clusters.NAME.context`), not `--context`."""
    check_kubeconfig(kubeconfig, cluster=cluster)
    kube = _kubernetes()
    try:
        contexts, active = kube.config.list_kube_config_contexts(config_file=kubeconfig)
    except (kube.ConfigException, OSError, TypeError, ValueError) as exc:
        where = f"cluster {cluster}: " if cluster else ""
        raise ConfigError(f"{where}kubeconfig {kubeconfig}: {exc}") from None
    names = [str(c.get("name", "")) for c in contexts or () if isinstance(c, dict)]
    if context:
        if context not in names:
            has = f"(it has: {', '.join(names) or 'none'})"
            # Said in Slack too (`/upgrade check`): a token pasted as the name is masked.
            raise ConfigError(
                mask_tokens(
                    f"clusters.{cluster}.context: no context named {context!r} in kubeconfig {kubeconfig} {has}"
                    if cluster
                    else f"kubeconfig {kubeconfig}: no context named {context!r} {has}"
                )
            )
        return context
    current = str(active.get("name", "")) if isinstance(active, dict) else ""
    if not current:
        if cluster:
            raise ConfigError(
                f"clusters.{cluster}: kubeconfig {kubeconfig} has no current context (name one as `context:`)"
            )
        raise ConfigError(f"kubeconfig {kubeconfig}: no current context (pass --context NAME)")
    return current
