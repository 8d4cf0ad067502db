"""The owner's path (issue 40 item 7): gated actions that change an object the way its GitOps
controller expects, and the owner lines a gate shows before a fix changes an owned object.

- `flux-suspend` / `flux-resume` `object=kustomization/NS/NAME` (or `helmrelease/NS/NAME`): set
  `spec.suspend` true / false, as `flux suspend|resume` do (the runbook's Flux rule: suspend, fix,
  open a PR, resume — never `kubectl edit` behind Flux's back).
- `argocd-pause` / `argocd-resume` `application=NS/NAME`: auto-sync paused by removing
  `spec.syncPolicy.automated` (what Argo CD's UI does when auto-sync is disabled), with the removed
  block recorded in the Application's annotation `upgrade-bot.io/paused-automated`, in the same
  patch, so `argocd-resume` restores exactly what was there — from the object itself, whichever run
  or replica resumes it. Chosen over the `argocd.argoproj.io/skip-reconcile` annotation because
  skipping reconciliation also freezes the Application's health and sync status, which the
  `app-health` evidence reads; with auto-sync off Argo CD still reports the change as OutOfSync.

Each job reads the object at plan time and keeps its manifest (as `kubectl get -o yaml` shows it,
without managedFields) in its progress as a `backup` — stored in the run's database before
anything changes; when the step ends, the job service uploads it into the run's thread with the
step's line (`backup_files`), and the run report keeps the step. The patch is a JSON merge patch (custom resources take no strategic merge patch)
and idempotent; a tick that runs again after a crash reads the object first and only patches when
its effect is absent.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, cast

import yaml

from bot.core.jobs.base import Post, Progress, Tick
from bot.core.jobs.common import JobCluster, iso, kind_namespace_name, namespace_name, object_name
from bot.core.kube.owners import ARGOCD, FLUX_KUSTOMIZATION, Owner, action, find_owner
from bot.errors import ClusterError, UserError, clip
from bot.records import FileAttachment

#: The Application annotation that holds the `automated` block `argocd-pause` removed.
PAUSED = "upgrade-bot.io/paused-automated"
MERGE = "application/merge-patch+json"

FLUX = {
    "kustomization": ("kustomize.toolkit.fluxcd.io/v1", "kustomizations", "Kustomization"),
    "helmrelease": ("helm.toolkit.fluxcd.io/v2", "helmreleases", "HelmRelease"),
}
ARGO = ("argoproj.io/v1alpha1", "applications", "Application")


class PatchCluster(JobCluster, Protocol):
    """The kube adapter's generic write (`bot.adapters.kube.Cluster.send_json`)."""

    def send_json(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        content_type: str = "application/json",
        query: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...


def check_flux(args: Mapping[str, str]) -> tuple[str, str, str]:
    text = str(args.get("object", "")).strip()
    like = "kustomization/NS/NAME or helmrelease/NS/NAME"
    return kind_namespace_name("object", text, FLUX, like, width=80)


def check_argo(args: Mapping[str, str]) -> tuple[str, str]:
    text = str(args.get("application", "")).strip()
    ns, _, name = text.rpartition("/")
    if not ns or not name:
        raise UserError(f"application: {clip(text, 80)!r} is not like NAMESPACE/NAME (e.g. argocd/shop)")
    namespace_name("application", ns)
    object_name("application", name)
    return ns, name


def backup(obj: Mapping[str, Any], *, before: str) -> dict[str, str]:
    """The object as a backup file: what `kubectl get -o yaml` shows, without managedFields."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    kind = str(obj.get("kind", "object")).lower()
    name = f"{kind}-{meta.get('namespace', '')}-{meta.get('name', '')}".strip("-")
    return {
        "filename": f"{name}.before-{before}.yaml",
        "title": f"{obj.get('kind', 'object')} {meta.get('namespace', '')}/{meta.get('name', '')} before {before}",
        "content": yaml.safe_dump({**obj, "metadata": meta}, sort_keys=False),
    }


def backup_files(progress: str) -> tuple[FileAttachment, ...]:
    """The backup a job kept in its progress (JSON), as the file its step's thread line carries."""
    try:
        kept = (json.loads(progress) if progress else {}).get("backup")
    except (ValueError, AttributeError):
        return ()
    if not isinstance(kept, dict) or not kept.get("content"):
        return ()
    return (
        FileAttachment(
            filename=str(kept.get("filename", "manifest.yaml")),
            content=str(kept["content"]).encode(),
            title=str(kept.get("title", "")),
            filetype="yaml",
        ),
    )


def _read(cluster: JobCluster, path: str, what: str) -> dict[str, Any]:
    try:
        return cluster.get_json(path)
    except ClusterError as exc:
        if exc.status == 404:
            raise UserError(f"no such {what}") from None
        raise


class _GitOpsJob(abc.ABC):
    """One spec change on one GitOps object, as the module docstring says."""

    kind = ""

    @abc.abstractmethod
    def _target(self, args: Mapping[str, str]) -> tuple[str, str]:
        """(API path, "Kind NS/NAME")."""

    @abc.abstractmethod
    def _wanted(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object already is as this job leaves it."""

    @abc.abstractmethod
    def _patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON merge patch that leaves the object as wanted."""

    @abc.abstractmethod
    def _says(self) -> str:
        """What the object is once changed ("suspended"), for the thread line."""

    def _noop(self, obj: Mapping[str, Any], what: str) -> str:
        """Why there is nothing to change ("" when there is): the object already is as wanted."""
        return f"{what} is already {self._says()}: nothing to change" if self._wanted(obj) else ""

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        path, what = self._target(args)
        obj = _read(cluster, path, what)
        noop = self._noop(obj, what)
        if noop:
            # The owner already is as the step leaves it: the step succeeds, saying so (it once
            # failed, and paused the run, on an object already suspended).
            return {"started": iso(now), "path": path, "what": what, "noop": noop}
        patch = self._patch(obj)
        return {
            "started": iso(now),
            "path": path,
            "what": what,
            "patch": patch,
            "backup": backup(obj, before=self.kind),
        }

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        if progress.get("noop"):
            return [f"would change nothing: {progress['noop']}"]
        return [
            f"would patch {progress['what']} (JSON merge patch {json.dumps(progress['patch'], sort_keys=True)})"
            f" so it is {self._says()}; its manifest is kept with the run first"
        ]

    def tick(self, cluster: JobCluster, progress: Progress, *, now: datetime, decision: Any = None) -> Tick:
        what = str(progress["what"])
        if progress.get("noop"):
            text = f"{self.kind}: {progress['noop']}"
            posts = (Post(key=f"{self.kind}:{what}:{progress['started']}", text=text),)
            return Tick(progress=progress, posts=posts, done=True, ok=True, detail=text, wait=0.0)
        obj = _read(cluster, str(progress["path"]), what)
        audit: tuple[tuple[str, str], ...] = ()
        if not self._wanted(obj):
            cast(PatchCluster, cluster).send_json(
                "PATCH", str(progress["path"]), progress["patch"], content_type=MERGE
            )
            audit = ((self.kind, f"{what}: {json.dumps(progress['patch'], sort_keys=True)}"),)
        text = f"{self.kind}: {what} is {self._says()}"
        kept = (progress.get("backup") or {}).get("filename", "")
        posts = (
            Post(key=f"{self.kind}:{what}:{progress['started']}",
                 text=text + (f" (its manifest before: {kept}, with the step's line)" if kept else "")),
        )  # fmt: skip
        return Tick(progress=progress, posts=posts, audit=audit, done=True, ok=True, detail=text, wait=0.0)


class FluxSuspendJob(_GitOpsJob):
    kind = "flux-suspend"
    suspend = True

    def _target(self, args: Mapping[str, str]) -> tuple[str, str]:
        kind, ns, name = check_flux(args)
        gv, resource, title = FLUX[kind]
        return f"/apis/{gv}/namespaces/{ns}/{resource}/{name}", f"Flux {title} {ns}/{name}"

    def _wanted(self, obj: Mapping[str, Any]) -> bool:
        return bool((obj.get("spec") or {}).get("suspend")) is self.suspend

    def _patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return {"spec": {"suspend": self.suspend}}

    def _says(self) -> str:
        return "suspended (spec.suspend: true)" if self.suspend else "reconciling (spec.suspend: false)"


class FluxResumeJob(FluxSuspendJob):
    kind = "flux-resume"
    suspend = False


class ArgoPauseJob(_GitOpsJob):
    kind = "argocd-pause"

    def _target(self, args: Mapping[str, str]) -> tuple[str, str]:
        ns, name = check_argo(args)
        gv, resource, title = ARGO
        return f"/apis/{gv}/namespaces/{ns}/{resource}/{name}", f"Argo CD {title} {ns}/{name}"

    def _wanted(self, obj: Mapping[str, Any]) -> bool:
        automated = ((obj.get("spec") or {}).get("syncPolicy") or {}).get("automated")
        return automated is None

    def _noop(self, obj: Mapping[str, Any], what: str) -> str:
        if not self._wanted(obj):
            return ""
        paused = PAUSED in ((obj.get("metadata") or {}).get("annotations") or {})
        return f"{what} has no automated sync" + (
            " (paused by the bot before: argocd-resume restores it)" if paused else ": nothing to pause"
        )

    def _patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        automated = ((obj.get("spec") or {}).get("syncPolicy") or {}).get("automated")
        return {
            "metadata": {"annotations": {PAUSED: json.dumps(automated, sort_keys=True)}},
            "spec": {"syncPolicy": {"automated": None}},
        }

    def _says(self) -> str:
        return f"not auto-syncing (spec.syncPolicy.automated removed, kept in {PAUSED})"


class ArgoResumeJob(ArgoPauseJob):
    kind = "argocd-resume"

    def _wanted(self, obj: Mapping[str, Any]) -> bool:
        return PAUSED not in ((obj.get("metadata") or {}).get("annotations") or {})

    def _noop(self, obj: Mapping[str, Any], what: str) -> str:
        if not self._wanted(obj):
            return ""
        return f"{what} was not paused by the bot (no {PAUSED} annotation): nothing to restore"

    def _patch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        kept = str(((obj.get("metadata") or {}).get("annotations") or {}).get(PAUSED) or "null")
        try:
            automated = json.loads(kept)
        except ValueError:
            raise UserError(
                f"the {PAUSED} annotation is not the JSON the bot wrote: restore it by hand"
            ) from None
        return {"metadata": {"annotations": {PAUSED: None}}, "spec": {"syncPolicy": {"automated": automated}}}

    def _says(self) -> str:
        return "auto-syncing again (spec.syncPolicy.automated restored)"


# ----- who owns what a fix changes (the gate's lines) ----------------------------------------------

#: Kinds an ownerReference names, by their resource (for the getter's path).
_RESOURCES = {
    "ReplicaSet": "replicasets",
    "Deployment": "deployments",
    "DaemonSet": "daemonsets",
    "StatefulSet": "statefulsets",
    "Job": "jobs",
    "CronJob": "cronjobs",
    "Pod": "pods",
}


def owners(cluster: JobCluster, paths: Sequence[str], *, name: str = "") -> list[dict[str, str]]:
    """The owners of the objects at `paths` (workloads a fix will change), one entry per owner
    found, for the gate (`Owner.as_dict`); an object that cannot be read has no entry. `name`:
    the cluster's, which the owner's way's commands name (`--cluster`)."""

    def get(api_version: str, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        resource = _RESOURCES.get(kind)
        if resource is None:
            return None
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            found = cluster.get_json(f"{base}/namespaces/{namespace}/{resource}/{name}")
        except ClusterError:
            return None
        return {"kind": kind, **found}

    found: list[dict[str, str]] = []
    for path in paths:
        try:
            obj = cluster.get_json(path)
        except ClusterError:
            continue
        owner: Owner | None = find_owner(obj, get)
        if owner is not None:
            found.append(_as_it_stands(cluster, owner, name))
    return found


def _as_it_stands(cluster: JobCluster, owner: Owner, name: str = "") -> dict[str, str]:
    """The owner's gate lines, from the owner object as it is now, not from the workload's marks
    alone (they once said "will revert this change" of a Kustomization suspended, or gone): a GitOps
    owner suspended, without automated sync, or not there is said so; one that cannot be read keeps
    what its marks say, with why it could not be read."""
    shown = owner.as_dict(name)
    if not owner.gitops or (owner.kind != ARGOCD and not owner.namespace):
        return shown
    if owner.kind == ARGOCD:
        gv, resource, _ = ARGO
        namespace = owner.namespace or "argocd"  # an instance label's Application: Argo CD's own
    else:
        gv, resource, _ = FLUX["kustomization" if owner.kind == FLUX_KUSTOMIZATION else "helmrelease"]
        namespace = owner.namespace
    try:
        obj = cluster.get_json(f"/apis/{gv}/namespaces/{namespace}/{resource}/{owner.name}")
    except ClusterError as exc:
        if exc.status == 404 and not owner.namespace:
            return shown  # an instance label's Application, looked for where it usually lives only
        if exc.status == 404:
            shown["consequence"] = (
                f"{owner.title}, which the object's marks name, does not exist: it will not revert this "
                "change (the marks may be stale: find who applies the object)"
            )
        else:
            shown["consequence"] += f" (it could not be read to say more: {clip(exc.user_message, 120)})"
        return shown
    spec = obj.get("spec") or {}
    if owner.kind != ARGOCD and spec.get("suspend"):
        kind = "kustomization" if owner.kind == FLUX_KUSTOMIZATION else "helmrelease"
        shown["consequence"] = (
            f"{owner.title} is suspended: it will not revert this change until it is resumed, and will "
            "then unless the fix is in Git"
        )
        shown["path"] = (
            f"put the fix in Git, then {action(f'flux-resume object={kind}/{owner.ref}', cluster=name)}"
        )
    elif owner.kind == ARGOCD and not (spec.get("syncPolicy") or {}).get("automated"):
        paused = PAUSED in ((obj.get("metadata") or {}).get("annotations") or {})
        shown["consequence"] = (
            f"{owner.title} does not sync automatically"
            + (" (the bot paused it)" if paused else "")
            + ": it will not revert this change, but its next sync will overwrite it"
        )
        shown["path"] = "put the fix in Git before its next sync" + (
            f", then {action(f'argocd-resume application={namespace}/{owner.name}')}" if paused else ""
        )
    return shown
