"""The kube-proxy image EKS documents for each Kubernetes minor version (the `set-image` fix of
known issue KI005: kube-proxy in ImagePullBackOff after a computed tag that was never published).

A small shipped table, not a guess: the tag is the one the EKS user guide lists, never one built
from the cluster's patch version (which is how the bad tags of eksctl#5972/#6027 came about). The
registry and region are the cluster's own, taken from the image the DaemonSet runs now
(`602401143452.dkr.ecr.ap-northeast-1.amazonaws.com/eks/kube-proxy:…`), so only the tag changes.

Sources (kept with the table; update both together):
- 1.28–1.34: "Manage kube-proxy in Amazon EKS clusters", the table of the latest self-managed
  kube-proxy container image per cluster version (the `-minimal-` images; 1.34 ships only the
  default image), https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html as of
  November 2025.
- 1.23–1.27: the same page's 2024 revision, which listed one version per cluster version for both
  the add-on and the self-managed image ("default" and, with `-minimal` before `-eksbuild`, the
  "minimal" image).
A cluster version outside the table has no documented tag: the fix refuses, naming the table.
"""

from __future__ import annotations

import re

from bot.core.kube.versions import minor

#: The page the table comes from (shown at the gate with the new image).
SOURCE = "https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html"

#: minor version → (default image tag, minimal image tag or "" when none is published)
EKS_KUBE_PROXY: dict[str, tuple[str, str]] = {
    "1.23": ("v1.23.17-eksbuild.9", "v1.23.17-minimal-eksbuild.9"),
    "1.24": ("v1.24.17-eksbuild.8", "v1.24.17-minimal-eksbuild.8"),
    "1.25": ("v1.25.16-eksbuild.8", "v1.25.16-minimal-eksbuild.8"),
    "1.26": ("v1.26.15-eksbuild.5", "v1.26.15-minimal-eksbuild.5"),
    "1.27": ("v1.27.12-eksbuild.5", "v1.27.12-minimal-eksbuild.5"),
    "1.28": ("v1.28.15-eksbuild.31", "v1.28.15-minimal-eksbuild.31"),
    "1.29": ("v1.29.15-eksbuild.16", "v1.29.15-minimal-eksbuild.16"),
    "1.30": ("v1.30.14-eksbuild.8", "v1.30.14-minimal-eksbuild.8"),
    "1.31": ("v1.31.13-eksbuild.2", "v1.31.13-minimal-eksbuild.2"),
    "1.32": ("v1.32.9-eksbuild.2", "v1.32.9-minimal-eksbuild.2"),
    "1.33": ("v1.33.5-eksbuild.2", "v1.33.5-minimal-eksbuild.2"),
    "1.34": ("v1.34.1-eksbuild.2", ""),
}

#: An EKS kube-proxy image: `<account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]/eks/kube-proxy:<tag>`.
_EKS_IMAGE = re.compile(
    r"^(?P<repo>[0-9]{12}\.dkr\.ecr(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/eks/kube-proxy)(?::(?P<tag>[^@]+))?(?:@.*)?$"
)


def documented_image(current: str, cluster_version: str) -> str:
    """The image EKS documents for `cluster_version`, in the registry of `current` and of its
    variant (minimal or default); a ValueError says why there is none."""
    m = _EKS_IMAGE.match(current.strip())
    if m is None:
        raise ValueError(
            f"the current image {current[:120]!r} is not an EKS kube-proxy image "
            "(<account>.dkr.ecr.<region>.amazonaws.com/eks/kube-proxy): the registry to use is unknown"
        )
    wanted = minor(cluster_version)
    if wanted not in EKS_KUBE_PROXY:
        raise ValueError(
            f"the table of EKS kube-proxy images has no entry for Kubernetes {wanted or cluster_version!r} "
            f"(it covers {min(EKS_KUBE_PROXY)}–{max(EKS_KUBE_PROXY)}; see {SOURCE})"
        )
    default, minimal = EKS_KUBE_PROXY[wanted]
    tag = minimal if "-minimal-" in (m.group("tag") or "") and minimal else default
    return f"{m.group('repo')}:{tag}"
