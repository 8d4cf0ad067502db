"""`upgrade-bot sim fidelity SNAPSHOT [--cluster C] [--to V]`: is the twin of a cluster true to it?

It writes the twin of the stored snapshot (as `sim scenario --from-snapshot` does), serves it on
loopback, snapshots the twin and compares that with the stored snapshot (the semantic diff, which
must find no regression and no change, and every field of every record: `core/snapshots/fidelity`),
then runs the check on the cluster and on the twin and compares their findings (id, severity,
objects). A cluster with a provider has its cloud's side in the snapshot (`provider`): the twin
serves it on its own AWS facade, so the EKS checks' findings (EKS0xx) are compared too. Ids, ages and the random suffixes of pod names may differ; nothing else. It prints the
differences and exits 3 when there is any (0: the twin is true; 1: the cluster could not be read;
2: a usage error)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.core.checks import service as checks
from bot.core.checks.findings import Report
from bot.core.checks.logprobe import log_probe
from bot.core.clusters import group_labels
from bot.core.rules import Rule, load_rules
from bot.core.snapshots.fidelity import measure
from bot.core.snapshots.projection import take_snapshot
from bot.core.snapshots.provider import provider_of
from bot.errors import BotError, UsageError
from bot.frontdoor.cli.config import settings_for
from bot.frontdoor.cli.connect import connect, sim_aws, stored_snapshot
from bot.frontdoor.cli.options import EXIT_FOUND, EXIT_OK, own_options, own_parser, parse_own, refused
from bot.logsetup import configure_logging
from bot.records import ClusterConfig, EksProvider
from bot.sim import SimCluster
from bot.sim.world.scenario import ScenarioError
from bot.sim.world.twin import dump_scenario, scenario_from_snapshot


def parser() -> argparse.ArgumentParser:
    """`sim fidelity`'s arguments (also what the completion script completes)."""
    fidelity = own_parser(
        "upgrade-bot sim fidelity",
        "Serve the twin of a stored snapshot, snapshot and check it, and print how it "
        "differs from the cluster (its snapshot, and the check's findings on it); exit 3 on any "
        "difference.",
    )
    fidelity.add_argument("snapshot", metavar="SNAPSHOT", help="a stored snapshot's id or label")
    fidelity.add_argument("--cluster", help="which cluster (default: the only one)")
    fidelity.add_argument("--to", help="the target version the check looks at (default: one minor above)")
    return own_options(fidelity)


def main(argv: list[str]) -> int:
    """`sim fidelity`'s arguments (after those two words)."""
    args = parse_own(parser(), argv)
    if isinstance(args, int):
        return args
    configure_logging(args.log_level or "WARNING", [])
    try:
        return _fidelity(args)
    except BotError as exc:
        return refused(exc)


def _fidelity(args: argparse.Namespace) -> int:
    target = checks.check_target(args.to)
    settings = settings_for(args, read_only=True)
    cluster, stored = stored_snapshot(settings, args.cluster, args.snapshot)
    rules = load_rules(settings.rules_paths())
    labels = group_labels(settings.node_group_labels)
    timings: list[str] = []

    def timed(what: str, work: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            return work()
        finally:
            timings.append(f"{what} {time.monotonic() - started:.1f}s")

    with tempfile.TemporaryDirectory(prefix="upgrade-bot-fidelity-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        path = workdir / "twin.yaml"
        path.write_text(dump_scenario(scenario_from_snapshot(stored.snap)), encoding="utf-8")
        try:
            # Frozen (speed 0): the twin stays as it was served while it is read twice.
            twin = timed("serve the twin", lambda: SimCluster(path, speed=0.0).start())
        except ScenarioError as exc:
            raise UsageError(
                f"the twin of snapshot {stored.meta.id} is not a scenario the sim takes: {exc}"
            ) from None
        stack.callback(twin.stop)
        twin_cluster = ClusterConfig(
            name=cluster.name,
            kubeconfig=twin.write_kubeconfig(workdir / "kubeconfig", context="sim"),
            context="sim",
            eks=_twin_provider(cluster, twin),
        )
        reader = connect(twin_cluster)
        try:
            with _twin_credentials(twin_cluster, workdir):
                twin_snap = timed(
                    "snapshot the twin",
                    lambda: take_snapshot(
                        reader,
                        label=f"twin of {stored.snap.get('label', '')}",
                        taken_by="fidelity",
                        now=datetime.now(UTC),
                        node_group_labels=labels,
                        logs=log_probe(rules),
                        # The twin's AWS facade, as the cluster's provider was read for its snapshot.
                        provider=provider_of(twin_cluster),
                    ),
                )
                twin_report = timed("check the twin", lambda: _check(reader, twin_cluster, target, rules))
        finally:
            reader.close()
        original = connect(cluster)
        try:
            report = timed("check the cluster", lambda: _check(original, cluster, target, rules))
        finally:
            original.close()
    found = measure(stored.snap, twin_snap, report.findings, twin_report.findings)
    sys.stdout.write(
        f"fidelity of the twin of {cluster.name} snapshot {stored.meta.id} ({stored.snap.get('label', '')}): "
        f"{found.differences} difference{'s' if found.differences != 1 else ''}\n"
    )
    sys.stdout.write(found.to_text())
    # Which checks were compared at all (a cluster whose provider could not be read has no EKS0xx).
    ids = sorted({f.id for f in report.findings})
    sys.stdout.write(f"findings on the cluster: {', '.join(ids) or 'none'}\n")
    sys.stdout.write(f"timings: {', '.join(timings)}\n")
    return EXIT_FOUND if found.differences else EXIT_OK


def _twin_provider(cluster: ClusterConfig, twin: SimCluster) -> EksProvider | None:
    """The twin's AWS APIs in place of the cluster's, when the cluster has a provider and the twin
    a cloud."""
    if cluster.eks is None or twin.aws_url is None or twin.core.aws is None:
        return None
    return replace(cluster.eks, name=twin.core.aws.name, endpoint_url=twin.aws_url)


_AWS_CHAIN = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_EC2_METADATA_DISABLED",
)


@contextmanager
def _twin_credentials(twin: ClusterConfig, workdir: Path) -> Iterator[None]:
    """While the twin's AWS APIs are read: credentials they take (any), so the team's own are
    neither sent to the sim nor needed; the environment is put back after, for the cluster's check."""
    if twin.eks is None:
        yield
        return
    saved = {k: os.environ.get(k) for k in _AWS_CHAIN}
    sim_aws(workdir, "twin")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check(reader: Any, cluster: ClusterConfig, target: str | None, rules: list[Rule]) -> Report:
    """The check as `upgrade-bot check` runs it, without waivers or ignores: both sides the same."""
    now = datetime.now(UTC)
    return checks.check_cluster(
        reader,
        target=target,
        waivers=None,
        now=now,
        rules=rules,
        extras=checks.default_extras(now=now.timestamp(), cluster=cluster),
    )
