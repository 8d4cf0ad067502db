"""IMG001: the images the upgrade will roll out exist in their registries before anyone waits for
them (the Istio notes' "new images in the artifactory before the upgrade"; known issue KI005, a
kube-proxy tag that was never published, left nodes in ImagePullBackOff mid-upgrade).

The images asked about (`Wanted`):
- the target kube-proxy: the tag `set-image` would set (`bot.core.kube.kubeproxy`, EKS's table),
  in the registry and variant of the image the DaemonSet runs now;
- on EKS, the target versions of the kube-proxy, coredns and vpc-cni add-ons (their default
  version for the target, as DescribeAddonVersions gives it), in the registry of the running
  image — EKS tags these images with the add-on's version;
- every container image of the manifests given with `--manifests`.

Each is asked of its registry with the OCI distribution API (`bot.adapters.registry`). A tag the
registry does not have is a Required IMG001; a registry that cannot be asked (down, unreachable,
refusing the credentials) is a Recommended IMG001 "could not verify": never a pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, FindingKind, declare, listed
from bot.core.snapshots.projection import ClusterReader
from bot.errors import ClusterError

log = logging.getLogger(__name__)

SOURCE = "OCI registries"
MAX_OBJECTS = 20

#: The ids this check reports (see `bot.core.checks.ids`; the module docstring says when).
FINDINGS = declare(
    __name__,
    FindingKind(
        id="IMG001",
        severity=REQUIRED,
        about="an image the upgrade rolls out is not in its registry (or could not be verified)",
        varies=True,
    ),
)

#: The add-ons whose target images EKS tags with the add-on's version: (add-on, workload path,
#: container).
EKS_ADDON_WORKLOADS = (
    ("kube-proxy", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy", "kube-proxy"),
    ("coredns", "/apis/apps/v1/namespaces/kube-system/deployments/coredns", "coredns"),
    ("vpc-cni", "/apis/apps/v1/namespaces/kube-system/daemonsets/aws-node", "aws-node"),
)
KUBE_PROXY = EKS_ADDON_WORKLOADS[0][1]


@dataclass(frozen=True, kw_only=True)
class Wanted:
    """An image the upgrade will pull, and why (shown next to it in the finding)."""

    image: str
    why: str


class ImageAnswer(Protocol):
    @property
    def status(self) -> str: ...  # present | missing | denied | unreachable
    @property
    def detail(self) -> str: ...


#: Asks one image's registry (`bot.adapters.registry.RegistryClient.ask`).
Lookup = Callable[[str], ImageAnswer]
#: The default version of an EKS add-on for a Kubernetes version, None when EKS offers none.
AddonDefault = Callable[[str, str], "str | None"]


def _container_image(obj: dict[str, Any], container: str) -> str:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return next(
        (str(c.get("image", "")) for c in spec.get("containers") or [] if c.get("name") == container), ""
    )


def _read(reader: ClusterReader, path: str, notes: list[str]) -> dict[str, Any] | None:
    try:
        return reader.get_json(path)
    except ClusterError as exc:
        if exc.status != 404:
            notes.append(f"images: {path.rsplit('/', 1)[-1]} not read ({exc.status or 'no answer'})")
        return None


def _retag(image: str, tag: str) -> str:
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return f"{name}:{tag}"


def cluster_images(
    reader: ClusterReader, target: str, notes: list[str], *, addon_default: AddonDefault | None = None
) -> list[Wanted]:
    """The target images of kube-proxy (what `set-image` sets) and, with `addon_default` (EKS),
    of the kube-proxy, coredns and vpc-cni add-ons."""
    from bot.core.kube.kubeproxy import documented_image

    out: list[Wanted] = []
    running: dict[str, str] = {}
    for addon, path, container in EKS_ADDON_WORKLOADS:
        obj = _read(reader, path, notes)
        if obj is not None and (image := _container_image(obj, container)):
            running[addon] = image
    if "kube-proxy" in running:
        try:
            out.append(
                Wanted(
                    image=documented_image(running["kube-proxy"], target),
                    why=f"kube-proxy for {target}, the image `set-image` sets",
                )
            )
        except ValueError as exc:
            notes.append(f"images: no documented kube-proxy image to verify: {exc}")
    if addon_default is not None:
        for addon, image in running.items():
            version = addon_default(addon, target)
            if not version:
                continue
            tag = version
            if addon == "kube-proxy" and "-minimal-" in image and "-minimal-" not in tag:
                # The add-on's minimal variant is tagged vX-minimal-eksbuild.N for version vX-eksbuild.N.
                tag = tag.replace("-eksbuild", "-minimal-eksbuild", 1)
            out.append(Wanted(image=_retag(image, tag), why=f"the {addon} add-on {version} for {target}"))
    return out


#: Keys whose list items are containers (a Pod's spec, a pod template's spec, a CronJob's…).
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _images_in(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _CONTAINER_LISTS and isinstance(value, list):
                for c in value:
                    if isinstance(c, dict) and isinstance(c.get("image"), str) and c["image"].strip():
                        yield c["image"].strip()
            else:
                yield from _images_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images_in(item)


def manifest_images(paths: Sequence[Path], *, stdin: str | None = None) -> list[Wanted]:
    """The container images of the manifests (files, directories, `-` for `stdin`), each once,
    with the first file that names it. Files that are not YAML are left to the removed-API check,
    which names them."""
    from bot.core.checks.apis import STDIN, manifest_files

    seen: dict[str, str] = {}
    for path in manifest_files(paths):
        try:
            text = (stdin or "") if path == STDIN else path.read_text(encoding="utf-8")
            documents = list(yaml.safe_load_all(text))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for image in _images_in(documents):
            seen.setdefault(image, "stdin" if path == STDIN else str(path))
    return [Wanted(image=image, why=f"named in {where}") for image, where in seen.items()]


def _listed(lines: Sequence[str]) -> tuple[str, ...]:
    return listed(lines, MAX_OBJECTS)


def image_findings(wanted: Iterable[Wanted], lookup: Lookup, notes: list[str]) -> list[Finding]:
    """Asks about each image once: a Required IMG001 for those missing, a Recommended one for those
    that could not be verified."""
    missing: list[str] = []
    unverified: list[str] = []
    asked: dict[str, ImageAnswer] = {}
    count = 0
    for w in wanted:
        if w.image in asked:
            continue
        count += 1
        try:
            answer = lookup(w.image)
        except ValueError as exc:
            unverified.append(f"{w.image} ({w.why}): not an image reference: {exc}")
            continue
        asked[w.image] = answer
        if answer.status == "missing":
            missing.append(f"{w.image} ({w.why})")
        elif answer.status != "present":
            unverified.append(f"{w.image} ({w.why}): {answer.detail}")
    notes.append(
        f"images: {count} asked of their registries, {count - len(missing) - len(unverified)} present"
        if count
        else "images: none to verify"
    )
    out: list[Finding] = []
    if missing:
        out.append(
            Finding(
                id="IMG001",
                severity=REQUIRED,
                title="Images the upgrade rolls out are not in their registries",
                objects=_listed(missing),
                why="The registry answered 404 for the tag: a node or pod that pulls it stays in"
                " ImagePullBackOff, mid-upgrade (KI005: a kube-proxy tag that was never published).",
                fix="Push or mirror each image to its registry (the artifactory) before the window, or"
                " correct the tag in the plan or the manifests; then check again.",
                source=SOURCE,
            )
        )
    if unverified:
        out.append(
            Finding(
                id="IMG001",
                severity=RECOMMENDED,
                title="Could not verify that images the upgrade rolls out exist",
                objects=_listed(unverified),
                why="The registry could not be asked, or refused the bot's credentials: the images"
                " may be missing, and nothing here says they are not.",
                fix="Check each by hand (`crane manifest IMAGE` or `docker manifest inspect IMAGE`), or"
                " give the bot access: `checks.images.docker_config` (a docker config.json with the"
                " registry's credentials) and a network path to the registry.",
                source=SOURCE,
            )
        )
    return out


def addon_default_from(eks: Any) -> AddonDefault:
    """The default version EKS offers for an add-on and a Kubernetes version (`EksReads`)."""

    def default(addon: str, target: str) -> str | None:
        for v in eks.addon_versions(addon, target):
            for c in v.get("compatibilities") or []:
                if c.get("clusterVersion") == target and c.get("defaultVersion"):
                    return str(v.get("addonVersion") or "") or None
        return None

    return default
