"""`check` and `diagnose` as the front doors use them: read, run every check and rule, report.

`check_cluster` is what `/upgrade check`, `upgrade-bot check` and the `check` plan action share:
every check and rule (`run_check`), then the waivers and ignore list the door read, so that Slack,
the terminal and a run give one verdict on one store. The rendering (`render_text`, `render_markdown`, `render_json`) lists Required findings first, then
Recommended, each with its id, the objects concerned, why and what to do.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import cast

from bot.core.checks.findings import REQUIRED, Cover, Finding, Report, blind_spots, summary_lines
from bot.core.checks.gather import CheckReader, read_facts
from bot.core.checks.images import ImageAnswer
from bot.core.checks.preflight import minor_of, run_checks
from bot.core.checks.rulehits import rule_finding
from bot.core.checks.waivers import apply_covers, stray_objects, waiver_covers
from bot.core.kube.applied import APPLIED_KINDS
from bot.core.kube.versions import minor, older_minor, target_version_problem
from bot.core.rules import Rule, RuleHit
from bot.core.safetext import printable
from bot.core.snapshots.projection import Progress
from bot.errors import UsageError, UserError, clip
from bot.records import ClusterConfig, EksProvider, FileAttachment, ImageChecks, WaiverRow

#: Extra finding sources (removed APIs…): (reader, target, notes to add to) → findings.
Extra = Callable[[CheckReader, str, list[str]], Sequence[Finding]]
#: IMG001's extra, which also runs without a cluster (`check --manifests` alone).
ImageExtra = Callable[[CheckReader | None, str, list[str]], Sequence[Finding]]


def default_extras(
    now: float | None = None,
    cluster: ClusterConfig | None = None,
    *,
    images: ImageChecks | None = None,
    manifests: Sequence[Path] = (),
    stdin: str | None = None,
) -> tuple[Extra, ...]:
    """The finding sources beyond this package's checks that every front door runs: removed and
    deprecated APIs (`apis.py`: the apiserver metric, last-applied and managedFields, Helm
    releases), and for a configured `cluster` the AKS checks of an AKS provider (`aks.py`), the GKE
    checks of a GKE provider (`gke.py`), else the
    EKS checks of its provider (`eks.py`: skipped,
    with a note saying why, without a provider or without the `aws` extra). `now` (Unix seconds)
    dates the metric's counting window. With `images` whose `verify` is on, IMG001 too (the
    cluster's target images and those of `manifests`)."""

    # The extras' modules (the API data, the EKS checks) are imported when they run: while the
    # pods' helper works (`read_facts`' `meanwhile`), not before it starts.
    def removed_apis(reader: CheckReader, target: str, notes: list[str]) -> Sequence[Finding]:
        from bot.core.checks import apis

        if getattr(reader, "get_raw", None) is None:
            notes.append("removed APIs not checked: this reader cannot read /metrics")
            return []
        return apis.cluster_api_findings(cast(apis.ApiReader, reader), target, now=now, notes=notes)

    verify: tuple[Extra, ...] = ()
    if images is not None and images.verify:
        verify = (image_extra(images, cluster=cluster, manifests=manifests, stdin=stdin),)
    if cluster is None:
        return (removed_apis, *verify)
    if cluster.aks is not None:
        aks_provider = cluster.aks

        def aks_checks(reader: CheckReader, target: str, notes: list[str]) -> Sequence[Finding]:
            from bot.core.checks import aks

            return aks.aks_extra(aks_provider)(reader, target, notes)

        return (removed_apis, aks_checks, *verify)
    if cluster.gke is not None:
        gke_provider = cluster.gke

        def gke_checks(reader: CheckReader, target: str, notes: list[str]) -> Sequence[Finding]:
            from bot.core.checks import gke

            return gke.gke_extra(gke_provider, now=now)(reader, target, notes)

        return (removed_apis, gke_checks, *verify)
    provider = cluster.eks

    def eks_checks(reader: CheckReader, target: str, notes: list[str]) -> Sequence[Finding]:
        from bot.core.checks import eks

        return eks.eks_extra(provider)(reader, target, notes)

    return (removed_apis, eks_checks, *verify)


def image_extra(
    config: ImageChecks,
    *,
    cluster: ClusterConfig | None = None,
    manifests: Sequence[Path] = (),
    stdin: str | None = None,
    lookup: Callable[[str], ImageAnswer] | None = None,
) -> ImageExtra:
    """IMG001 as a `check` extra: the target kube-proxy (and, on EKS, add-on) images of the
    cluster and the images of `manifests`, each asked of its registry (`checks.images`, or
    `lookup` in its place)."""

    def extra(reader: CheckReader | None, target: str, notes: list[str]) -> Sequence[Finding]:
        from bot.core.checks import images

        ask = lookup or registry_lookup(config)
        wanted: list[images.Wanted] = []
        if reader is not None:
            addon_default = None
            if cluster is not None and cluster.eks is not None:
                addon_default = _eks_addon_default(cluster.eks, notes)
            wanted += images.cluster_images(reader, target, notes, addon_default=addon_default)
        if manifests:
            wanted += images.manifest_images(manifests, stdin=stdin)
        return images.image_findings(wanted, ask, notes)

    return extra


def registry_lookup(config: ImageChecks) -> Callable[[str], ImageAnswer]:
    """Asks the image's registry with the OCI distribution API (`bot.adapters.registry`)."""
    from bot.adapters import registry

    credentials: dict[str, tuple[str, str]] = {}
    if config.docker_config is not None:
        try:
            credentials = registry.load_docker_config(config.docker_config)
        except ValueError as exc:
            raise UserError(f"checks.images.docker_config: {exc}") from None
    client = registry.RegistryClient(
        credentials=credentials, insecure=config.insecure, endpoints=dict(config.endpoints)
    )
    return client.ask


def _eks_addon_default(provider: EksProvider, notes: list[str]) -> Callable[[str, str], str | None] | None:
    from bot.core import providers
    from bot.core.checks import images

    try:
        ask = images.addon_default_from(providers.reading(provider))
    except providers.ProviderUnavailable as exc:
        notes.append(f"images: the EKS add-ons' target images not asked: {exc}")
        return None

    def default(addon: str, target: str) -> str | None:
        try:
            return ask(addon, target)
        except providers.ProviderError as exc:
            notes.append(f"images: the {addon} add-on's versions for {target} not read: {exc}")
            return None

    return default


def default_manifest_check(stdin: str | None = None) -> Callable[[Sequence[Path], str], Sequence[Finding]]:
    """The removed-API check over manifests; `stdin` is the text a `-` path stands for."""

    def check(paths: Sequence[Path], target: str) -> Sequence[Finding]:
        from bot.core.checks import apis

        return apis.manifest_findings(paths, target, stdin=stdin)

    return check


def check_manifests(
    paths: Sequence[Path],
    *,
    target: str,
    stdin: str | None = None,
    images: ImageChecks | None = None,
    lookup: Callable[[str], ImageAnswer] | None = None,
) -> Report:
    """The removed-API check over manifest files alone (CI), without a cluster; a `-` path is the
    text `stdin`. With `images`, IMG001 over the manifests' images too."""
    from bot.core.checks import apidata, apis

    check_target(target)
    shown_paths = ", ".join("stdin" if p == apis.STDIN else str(p) for p in paths)
    notes = [apidata.describe_data(), f"manifests: {shown_paths}"]
    findings = list(apis.manifest_findings(paths, target, stdin=stdin))
    if images is not None:
        findings += image_extra(images, manifests=paths, stdin=stdin, lookup=lookup)(None, target, notes)
    return Report(cluster="manifests", target=target, findings=ordered(findings), notes=tuple(notes))


def ordered(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """Required first; within a severity, by id then objects: the same cluster, the same report."""
    return tuple(sorted(findings, key=lambda f: (f.severity != REQUIRED, f.id, f.objects)))


def default_target(version: str) -> str:
    m = minor_of(version)
    if m is None:
        raise UserError(f"cannot tell the control plane's minor version from {version!r}; pass --to 1.N")
    return f"{m[0]}.{m[1] + 1}"


def check_target(target: str | None) -> str | None:
    """`target` if it names a Kubernetes version that exists (`target_version_problem`); a usage
    error saying why not otherwise, before anything reads the cluster."""
    if target is None:
        return None
    problem = target_version_problem(target)
    if problem is not None:
        raise UsageError(f"--to {clip(target, 30)!r} {problem}")
    return target.strip()


def run_check(
    reader: CheckReader,
    *,
    target: str | None,
    rules: Sequence[Rule] = (),
    extras: Sequence[Extra] = (),
    manifests: Sequence[Path] = (),
    manifest_check: Callable[[Sequence[Path], str], Sequence[Finding]] | None = None,
    progress: Progress | None = None,
    covers: Sequence[Cover] = (),
    asked: bool = False,
) -> Report:
    """Every check and rule over the cluster; what `covers` accept (waivers, the ignore list) is
    moved to the report's `covered` and does not fail it. `asked`: a person typed the `target`
    (`--to`), which `against_the_cluster` holds to the cluster's version."""
    check_target(target)
    first_notes = against_the_cluster(reader, target) if asked and target else []
    extra_findings: list[Finding] = []
    extra_notes: list[str] = []

    def run_extras(version: str) -> None:
        # While the pods' helper works: these reads are the bot's process's, which would wait.
        to = target or default_target(version)
        for extra in extras:
            extra_findings.extend(extra(reader, to, extra_notes))

    # The checks and the removed-API signals list some of the same objects (Deployments,
    # StatefulSets, budgets, webhooks, CRDs), each decoding its own fields: the cluster is read once.
    # Only those (the nodes, read once, are not kept).
    remembering: Callable[[Collection[str]], AbstractContextManager[None]] | None = getattr(
        reader, "remembering", None
    )
    shared = {kind.path for kind in APPLIED_KINDS} if extras else set()
    with remembering(shared) if remembering is not None and shared else contextlib.nullcontext():
        gathered = read_facts(
            reader, rules=rules, progress=progress, meanwhile=run_extras if extras else None
        )
    facts = gathered.facts
    to = target or default_target(facts.version)
    findings: list[Finding] = [
        *run_checks(facts, to),
        *(rule_finding(h, version=to) for h in gathered.hits),
        *extra_findings,
    ]
    notes = [
        *first_notes,
        f"control plane {facts.version}, target {to}, {len(facts.nodes)} nodes, {len(facts.workloads)} workloads",
        *gathered.notes,
        *(f"not read: {gap}" for gap in facts.gaps),
        *extra_notes,
    ]
    if manifests and manifest_check is not None:
        findings.extend(manifest_check(manifests, to))
    if rules:
        notes.append(f"{len(rules)} known-issue rules")
    report = Report(cluster=reader.name, target=to, findings=ordered(findings), notes=tuple(notes))
    return apply_covers(report, covers)


#: The note of a check of the minor the cluster is on, which the chat's summary shows too.
_ALREADY = re.compile(r"the cluster is on [0-9.]+ already: ")


def against_the_cluster(reader: CheckReader, target: str) -> list[str]:
    """A `--to` older than the cluster's minor is refused, before the cluster is read: there is no
    upgrade to it (plan draft refuses it too). The minor it is on is checked, for what is left
    after its upgrade; the report's first note says so. A plan's check step is not held to this:
    its leftover check runs after the control plane reached the target."""
    version = str(reader.get_json("/version").get("gitVersion", ""))
    if older_minor(version, target):
        raise UsageError(
            f"the cluster is on {version} already: --to {target} is an older minor "
            f"(check {minor(version)}, the minor it is on, or a newer one)"
        )
    if older_minor(version, target, or_same=True):
        return [
            f"the cluster is on {minor(version)} already: this checks what is left on it, "
            f"not a next upgrade (--to {default_target(version)} checks that)"
        ]
    return []


#: What a check that read no waivers says (the terminal without a configuration file: no store).
NO_WAIVERS = (
    "no waivers read: no configuration, so no store; a finding waived with `/upgrade waive` "
    "counts here, and `/upgrade check` may pass where this fails"
)


def check_cluster(
    reader: CheckReader,
    *,
    target: str | None,
    waivers: Sequence[WaiverRow] | None,
    now: datetime,
    ignores: Sequence[Cover] = (),
    rules: Sequence[Rule] = (),
    extras: Sequence[Extra] = (),
    manifests: Sequence[Path] = (),
    manifest_check: Callable[[Sequence[Path], str], Sequence[Finding]] | None = None,
    progress: Progress | None = None,
    asked: bool = False,
) -> Report:
    """The check and its verdict, as every front door gives it: `run_check`, with what the
    configuration's `ignores` and the cluster's stored `waivers` (those active at `now`) accept
    moved to `covered`. `waivers` None: none could be read (no store), which the report says.
    `asked`: the target is a person's `--to` (`against_the_cluster`)."""
    covers = [*ignores, *waiver_covers(waivers or (), now)]
    report = run_check(
        reader,
        target=target,
        rules=rules,
        extras=extras,
        manifests=manifests,
        manifest_check=manifest_check,
        progress=progress,
        covers=covers,
        asked=asked,
    )
    if waivers is None:
        return replace(report, notes=(*report.notes, NO_WAIVERS), waivers=None)
    active = [w for w in waivers if w.active_at(now)]
    # A waiver's objects are called stray only when the check read every list: with one not read,
    # a finding it names may be missing for that reason alone.
    blind = any(n.startswith("not read:") for n in report.notes)
    stray = [] if blind else _naming_nothing(report, active, ignores)
    notes = (*report.notes, *stray, *_one_person(report, active), *_not_covering(report, waivers, now))
    return replace(report, notes=notes, waivers=len(active))


def _not_covering(report: Report, waivers: Sequence[WaiverRow], now: datetime) -> list[str]:
    """A note for each waiver that covers nothing now although a finding of its id is open: one
    waiting for its second person, one that ended (people who remember it think it still holds)."""
    open_ids = {f.id for f in report.findings}
    notes = []
    for w in waivers:
        if w.finding not in open_ids:
            continue
        if w.state == "pending" and now < w.expires_at:
            notes.append(
                f"waiver {w.id} ({w.finding}) waits for a second person: it covers nothing until "
                f"`/upgrade waive confirm {w.id}`"
            )
        elif w.state == "active" and now >= w.expires_at:
            notes.append(
                f"waiver {w.id} ({w.finding}) ended {w.expires_at.strftime('%Y-%m-%d %H:%M UTC')}: the finding "
                f"counts again (`/upgrade waive {w.finding} …` for more time)"
            )
    return notes


def _one_person(report: Report, waivers: Sequence[WaiverRow]) -> list[str]:
    """A note for each one-person waiver (made while its finding was Recommended) of a finding
    that is Required now: it covers nothing, and whoever made it believes it does."""
    required = {f.id for f in report.findings if f.severity == REQUIRED}
    return [
        f"waiver {w.id} ({w.finding}) is one person's, made while {w.finding} was Recommended: it covers "
        f"nothing now that {w.finding} is Required (`/upgrade waive {w.finding} …` again, and a second "
        "person confirms)"
        for w in waivers
        if not w.required and w.finding in required
    ]


#: The note `_naming_nothing` writes.
_STRAY = re.compile(
    r"^(?:waiver \d+|checks\.ignore\[\d+\]) \(\w+\) (?:names .*, which no \w+ finding of this check names|is one person's, made while|"
    r"waits for a second person|ended )"
)


def _naming_nothing(report: Report, waivers: Sequence[WaiverRow], ignores: Sequence[Cover] = ()) -> list[str]:
    """A note for each active waiver (and `checks.ignore` entry) naming objects that no finding of
    its id names in `report` (a typo when it was asked, or an object gone since): it covers nothing
    there, and people who believe the finding accepted should know."""
    asked = [(f"waiver {w.id}", w.finding, w.objects, f"`/upgrade waive revoke {w.id}`") for w in waivers]
    asked += [(i.label, i.finding, i.objects, "the configuration's entry") for i in ignores]
    notes = []
    for label, finding, objects, ends in asked:
        if not objects:
            continue
        named = [o for f in report.findings if f.id == finding for o in f.objects]
        named += [o for c in report.covered if c.finding.id == finding for o in c.finding.objects]
        stray = stray_objects(finding, objects, named)
        if stray:
            notes.append(
                f"{label} ({finding}) names {clip(', '.join(stray), 160)}, which no {finding} finding "
                f"of this check names: a typo, or no longer found ({ends})"
            )
    return notes


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What `diagnose` found: the rules' hits over `pods` pods; `unread`, the lists it could not
    read (the pods, the events the event rules match), in which case no hit is no all-clear."""

    hits: list[RuleHit]
    pods: int
    unread: list[str]
    notes: list[str]


def diagnose(reader: CheckReader, *, rules: Sequence[Rule], namespace: str = "", pod: str = "") -> Diagnosis:
    """The known-issue rules over the pods of a namespace (or one pod, or the whole cluster);
    what the reader could not do, or a matching budget that ran out, is in its notes."""
    gathered = read_facts(reader, rules=rules, namespace=namespace, pod_name=pod)
    gaps = gathered.facts.gaps
    # The pods and their events are what the rules match; the containers' logs (an opt-in role)
    # only the log rules read, so that gap is a note beside the answer.
    unread = [f"not read: {gap}" for gap in gaps if gap.startswith(("pods:", "events:"))]
    logs = [f"not read: {gap}" for gap in gaps if gap.startswith("container logs:")]
    return Diagnosis(hits=gathered.hits, pods=gathered.pods, unread=unread, notes=[*gathered.notes, *logs])


# ----- rendering -------------------------------------------------------------------------------------

_LABEL = {REQUIRED: "Required", "recommended": "Recommended"}


def counts(report: Report) -> tuple[int, int]:
    required = sum(1 for f in report.findings if f.severity == REQUIRED)
    return required, len(report.findings) - required


def headline(report: Report) -> str:
    required, recommended = counts(report)
    accepted = f", {len(report.covered)} waived or ignored" if report.covered else ""
    unread = " (no waivers read)" if NO_WAIVERS in report.notes else ""
    blind = (
        f"; not read: {', '.join(report.unread)}, so the checks on them did not run" if report.unread else ""
    )
    return (
        f"Pre-flight check of {report.cluster} for {report.target}: {report.verdict} — "
        f"{required} required, {recommended} recommended{accepted}{unread}{blind}"
    )


#: Findings whose `action` a Fix… button under the check's summary may start, and the one action
#: each may name (the click refuses any other: `bot.frontdoor.slack.fixes`).
CHECK_FIXES = {"NODE002": "uncordon"}


def check_fixes(report: Report, *, ref: str) -> list[dict[str, object]]:
    """The Fix… buttons of a check's summary (`check.blocks.json.j2`): one per finding that names
    its action. The value is the Fix… button's (`bot.frontdoor.slack.fixes`):
    `check:REF|FINDING|CLUSTER|ACTION ARGS`, REF being the check's reference (one claim per post)."""
    out: list[dict[str, object]] = []
    for f in report.findings:
        if f.action and CHECK_FIXES.get(f.id) == f.action.split(" ", 1)[0]:
            out.append(
                {
                    "id": f.id,
                    "command": f"{f.action} --cluster {report.cluster}",
                    "value": f"check:{ref}|{f.id}|{report.cluster}|{f.action}",
                    # The objects the action leaves out, as the finding names them (NODE002: the
                    # nodes the bot's own run cordoned, which that run uncordons).
                    "left_out": [o for o in f.objects if o.endswith(")") and "(the bot's run " in o],
                }
            )
    return out


def summary_context(report: Report, *, shown_recommended: int, ref: str = "") -> dict[str, object]:
    """What `check.txt.j2` shows: the verdict and one line per finding id, Required first; with
    `ref` (the check's reference, in Slack), the Fix… buttons of `check.blocks.json.j2`."""
    required = summary_lines(f for f in report.findings if f.severity == REQUIRED)
    recommended = summary_lines(f for f in report.findings if f.severity != REQUIRED)
    n_required, n_recommended = counts(report)
    return {
        "cluster": report.cluster,
        "target": report.target,
        "failed": report.failed,
        "incomplete": report.incomplete,
        "unread": report.unread,
        "required": required,
        "required_count": n_required,
        "recommended": recommended[:shown_recommended],
        "recommended_lines": len(recommended),
        "recommended_count": n_recommended,
        # What the checks did not see: lists not read, a cloud's checks skipped or not completed;
        # and the waivers that name objects no finding names (they cover nothing).
        "notes": [
            *(n for n in report.notes if _ALREADY.match(n)),
            *blind_spots(report.notes),
            *(n for n in report.notes if _STRAY.match(n)),
        ],
        "fixes": check_fixes(report, ref=ref) if ref else [],
        # Findings a waiver or the configuration's ignore list accepted: who, why and until when.
        "covered": [
            {
                "id": c.finding.id,
                "severity": "Required" if c.finding.severity == REQUIRED else "Recommended",
                "title": c.finding.title,
                "objects": list(c.finding.objects),
                "covers": [
                    {
                        "label": v.label,
                        "by": list(v.by),
                        "until": v.until.strftime("%Y-%m-%d %H:%M UTC") if v.until else "",
                        "reason": v.reason,
                    }
                    for v in c.covers
                ],
            }
            for c in report.covered
        ],
    }


def report_attachment(report: Report) -> FileAttachment:
    """The full report (why and how to fix each finding) as a Markdown file for the chat."""
    return FileAttachment(
        filename=f"check-{report.cluster}-{report.target}.md",
        content=render_markdown(report).encode(),
        title=f"Pre-flight check of {report.cluster} for {report.target}",
        filetype="markdown",
    )


def cover_lines(cover: Cover) -> str:
    """Who accepted it, why and until when: "waiver 3 by U1 and U2 until 2026-12-01 10:00 UTC: why"."""
    who = f" by {' and '.join(cover.by)}" if cover.by else ""
    until = f" until {cover.until.strftime('%Y-%m-%d %H:%M UTC')}" if cover.until else " (permanent)"
    return f"{cover.label}{who}{until}: {cover.reason}"


def render_text(report: Report) -> str:
    lines = [headline(report), ""]
    for f in report.findings:
        lines.append(f"[{_LABEL.get(f.severity, f.severity)}] {f.id} {f.title}")
        lines.extend(f"    {o}" for o in f.objects)
        # A known issue's why and fix run over lines (Seen:, the remedy's commands, Evidence:):
        # each line under its label, not at the margin among the findings.
        lines.append("  why: " + f.why.replace("\n", "\n       "))
        lines.append("  fix: " + f.fix.replace("\n", "\n       "))
        if f.source:
            lines.append(f"  source: {f.source}")
        lines.append("")
    if report.covered:
        lines.append("Waived or ignored (accepted; not counted):")
        for c in report.covered:
            lines.append(
                f"[{_LABEL.get(c.finding.severity, c.finding.severity)}] {c.finding.id} {c.finding.title}"
            )
            lines.extend(f"    {o}" for o in c.finding.objects)
            lines.extend(f"  accepted: {cover_lines(cover)}" for cover in c.covers)
        lines.append("")
    lines.extend(f"note: {n}" for n in report.notes)
    # What the cluster wrote (an event's message, an annotation) reaches a terminal: no escapes.
    return printable("\n".join(lines).rstrip() + "\n")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: Report) -> str:
    lines = [f"# {headline(report)}", ""]
    for f in report.findings:
        lines.append(f"## {_LABEL.get(f.severity, f.severity)} · {f.id} · {f.title}")
        lines.append("")
        lines.extend(f"- `{o}`" for o in f.objects)
        lines.append("")
        lines.append(f"**Why:** {f.why}")
        lines.append("")
        lines.append(f"**Fix:** {f.fix}")
        if f.source:
            lines.append("")
            lines.append(f"*Source: {f.source}*")
        lines.append("")
    if report.covered:
        lines.append("## Waived or ignored (accepted; not counted)")
        lines.append("")
        for c in report.covered:
            f = c.finding
            lines.append(f"- {_LABEL.get(f.severity, f.severity)} · **{f.id}** · {_md(f.title)}")
            lines.extend(f"  - `{o}`" for o in f.objects)
            lines.extend(f"  - accepted: {_md(cover_lines(cover))}" for cover in c.covers)
        lines.append("")
    if report.notes:
        lines.append("## Notes")
        lines.extend(f"- {n}" for n in report.notes)
    return printable("\n".join(lines).rstrip() + "\n")


#: A finding's first object, the thing it is about: `[path:line ]Kind [namespace/]name[ (note)][: …]`.
_SUBJECT = re.compile(r"^(?:\S+:\d+ )?(?P<kind>[A-Z][A-Za-z0-9]*) (?P<ref>[^\s:,()]+)")


def subject(finding: Finding) -> tuple[str | None, str | None, str | None]:
    """The kind, namespace and name of what a finding is about (its first object, as every check
    lists it); None for what is not an object (`requests to cronjobs.v1beta1.batch`), and the
    namespace None for a cluster-scoped object."""
    m = _SUBJECT.match(finding.objects[0]) if finding.objects else None
    if m is None:
        return None, None, None
    namespace, _, name = m["ref"].rpartition("/")
    return m["kind"], namespace or None, name


def _finding_json(f: Finding, covers: Sequence[Cover] = ()) -> dict[str, object]:
    kind, namespace, name = subject(f)
    first = covers[0] if covers else None
    return {
        "id": f.id,
        "severity": _LABEL.get(f.severity, f.severity),
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "message": f.title,
        "remedy": f.fix,
        # The person who asked for the waiver (an ignore entry has none: its label); None: open.
        "waived_by": None if first is None else (first.by[0] if first.by else first.label),
        "waiver_reason": None if first is None else first.reason,
        "waiver_expires": None if first is None or first.until is None else first.until.isoformat(),
        "why": f.why,
        "objects": list(f.objects),
        "source": f.source,
        "action": f.action,
        "covers": [
            {
                "label": v.label,
                "source": v.source,
                "by": list(v.by),
                "reason": v.reason,
                "until": v.until.isoformat() if v.until else None,
                "objects": list(v.objects),
            }
            for v in covers
        ],
    }


def render_json(report: Report) -> str:
    """One object per finding, open ones first then the accepted ones (`waived_by` set), so that
    `jq '.findings[] | select(.severity=="Required" and .waived_by==null)'` lists what blocks."""
    body = {
        "cluster": report.cluster,
        "target": report.target,
        "failed": report.failed,
        "incomplete": report.incomplete,
        "verdict": report.verdict.lower(),
        "not_read": report.unread,
        "waivers_read": report.waivers is not None,
        "findings": [
            *(_finding_json(f) for f in report.findings),
            *(_finding_json(c.finding, c.covers) for c in report.covered),
        ],
        "notes": list(report.notes),
    }
    return json.dumps(body, indent=2) + "\n"


RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": render_text,
    "md": render_markdown,
    "json": render_json,
}
