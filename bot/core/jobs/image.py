"""The `set-image` job: set kube-proxy's image to the one the provider documents for the cluster's
version (known issue KI005: kube-proxy in ImagePullBackOff after an upgrade set a tag that was
never published), then follow the DaemonSet's rollout as `restart` does.

Arguments: `workload` (`daemonset/NAMESPACE/NAME`, e.g. daemonset/kube-system/kube-proxy) and
optional `container` (default: the container named like the workload, else its only one),
`timeout`, `crashloop_after`, `imagepull_after` (as `restart`). The new image is not an argument:
it is the tag EKS documents for the control plane's minor version (`bot.core.kube.kubeproxy`,
a shipped table with its sources), in the registry and region of the image the DaemonSet runs now
— so a click can only move kube-proxy to the documented image, never to a typed one.

Progress: `restart`'s, each workload with `container`, `old` and `new` images, and `image`:
{"version": "1.25", "source": URL}.

An EKS managed add-on (kube-proxy applied by EKS: `bot.core.kube.owners`) is refused with the
owner's path, `eks-update-addon`; a workload a GitOps controller or Helm owns is named at the gate
with what will happen to the change (`bot.core.jobs.preview`).

Never twice: a pending workload whose container already runs `new` was patched (by a tick that
crashed before storing) and is not patched again; the patch itself is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.core.jobs.base import Post, Progress
from bot.core.jobs.common import JobCluster, duration_arg, iso, kind_namespace_name, object_name
from bot.core.jobs.restart import DEFAULT_TIMEOUT, RestartJob, live_workload, wkey, workload_path
from bot.core.kube.kubeproxy import SOURCE, documented_image
from bot.core.kube.objects import CRASHLOOP_FAILS_AFTER, IMAGEPULL_FAILS_AFTER
from bot.core.kube.owners import EKS_ADDON, owner_of
from bot.core.kube.versions import minor
from bot.errors import ClusterError, UserError

#: The workloads whose image this job may set: kube-proxy's DaemonSet is the one the provider
#: documents an image for.
KINDS = ("daemonset",)


def check_args(args: Mapping[str, str]) -> None:
    text = str(args.get("workload", "")).strip()
    kind_namespace_name("workload", text, KINDS, "daemonset/kube-system/kube-proxy")
    container = str(args.get("container", "")).strip()
    if container:
        object_name("container", container)


def _containers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    found: list[dict[str, Any]] = spec.get("containers") or []
    return found


def _image(obj: Mapping[str, Any], container: str) -> str:
    return next((str(c.get("image", "")) for c in _containers(obj) if c.get("name") == container), "")


class SetImageJob(RestartJob):
    """`set-image`: see the module docstring."""

    kind = "set-image"
    done_word = "updated"

    def plan(self, cluster: JobCluster, args: Mapping[str, str], *, now: datetime) -> Progress:
        check_args(args)
        kind, namespace, name = str(args["workload"]).strip().split("/")
        kind = kind.lower()
        try:
            obj = cluster.get_json(workload_path(kind, namespace, name))
        except ClusterError as exc:
            if exc.status == 404:
                raise UserError(f"no such workload: {kind}/{namespace}/{name}") from None
            raise
        owner = owner_of(obj)
        if owner is not None and owner.kind == EKS_ADDON:
            # Setting the image behind EKS's back lasts until the next add-on update (or EKS's
            # own reconcile) and leaves the add-on's version saying something else: the owner's
            # path is UpdateAddon (issue 40 item 7), on this cluster: the adapter's name is the
            # configured one, without which the pasted command only asks "which cluster?".
            raise UserError(
                f"{kind}/{namespace}/{name} is the {owner.title}: {owner.consequence}. "
                f"Use {owner.path_on(str(getattr(cluster, 'name', '')))}"
            )
        containers = _containers(obj)
        container = str(args.get("container", "")).strip()
        if not container:
            names = [str(c.get("name", "")) for c in containers]
            container = name if name in names else (names[0] if len(names) == 1 else "")
            if not container:
                raise UserError(f"{kind}/{namespace}/{name} has several containers: name one with container=")
        old = _image(obj, container)
        if not old:
            raise UserError(f"{kind}/{namespace}/{name} has no container {container}")
        version = str(cluster.get_json("/version").get("gitVersion", ""))
        try:
            new = documented_image(old, version)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        if new == old:
            raise UserError(
                f"{kind}/{namespace}/{name} already runs {new}, the image EKS documents for "
                f"{minor(version)}: nothing to change"
            )
        stamp = iso(now)
        return {
            "image": {"version": minor(version), "source": SOURCE},
            "started": stamp,
            "timeout": duration_arg(args, "timeout", DEFAULT_TIMEOUT).total_seconds(),
            "crashloop_after": duration_arg(args, "crashloop_after", CRASHLOOP_FAILS_AFTER).total_seconds(),
            "imagepull_after": duration_arg(args, "imagepull_after", IMAGEPULL_FAILS_AFTER).total_seconds(),
            "workloads": [
                {"kind": kind, "namespace": namespace, "name": name, "stamp": stamp, "state": "pending",
                 "generation": 0, "verdict": "", "bad": {}, "container": container, "old": old, "new": new}
            ],
        }  # fmt: skip

    def dry_run(self, cluster: JobCluster, progress: Progress) -> list[str]:
        lines = []
        documented = progress.get("image") or {}
        for entry in progress["workloads"]:
            cluster.set_image(
                entry["kind"],
                entry["namespace"],
                entry["name"],
                container=entry["container"],
                image=entry["new"],
                dry_run=True,
            )
            lines.append(
                f"would set {wkey(entry)} container {entry['container']}: {entry['old']} → {entry['new']}"
                f" (the image EKS documents for {documented.get('version', '?')}: {documented.get('source', SOURCE)})"
            )
        return lines

    def _stamp(
        self, cluster: JobCluster, entry: dict[str, Any], posts: list[Post], audit: list[tuple[str, str]]
    ) -> None:
        key = wkey(entry)
        current = live_workload(cluster, entry, posts, during="before its image was set")
        if current is None:
            return
        if _image(current, entry["container"]) == entry["new"]:
            # Set by an earlier run of this tick that crashed before its progress was stored.
            entry["generation"] = int((current.get("metadata") or {}).get("generation") or 0)
        else:
            patched = cluster.set_image(
                entry["kind"],
                entry["namespace"],
                entry["name"],
                container=entry["container"],
                image=entry["new"],
            )
            entry["generation"] = int((patched.get("metadata") or {}).get("generation") or 0)
            audit.append(
                ("set-image", f"{key} container {entry['container']}: {entry['old']} → {entry['new']}")
            )
        entry["state"] = "rolling"
        posts.append(
            Post(key=f"set-image:{key}", text=f"{key}: container {entry['container']} set to {entry['new']}")
        )
