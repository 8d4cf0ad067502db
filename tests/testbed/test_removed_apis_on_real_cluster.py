"""The removed-API signals on the real control plane (Kubernetes 1.36, which the testbed runs with
storage.k8s.io/v1beta1 switched on: VolumeAttributesClass v1beta1 is "deprecated in v1.34+,
unavailable in v1.37+").

- the metric: the apiserver counts a request to the deprecated version in
  `apiserver_requested_deprecated_apis`, dated by its `process_start_time_seconds`;
- managedFields: a server-side apply through v1beta1 is recorded with that apiVersion, although
  the object reads the same through storage.k8s.io/v1;
- Helm: a release Secret made the way Helm 3 makes it.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import uuid
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks.apis import API_DEPRECATED, API_REMOVED, cluster_api_findings
from bot.records import ClusterConfig
from tests.support.testbed import RealCluster

pytestmark = pytest.mark.testbed

VAC_GONE = "storage.k8s.io/v1beta1 VolumeAttributesClass: removed in 1.37; use storage.k8s.io/v1 VolumeAttributesClass"


def _helm_secret(release: str, namespace: str, manifest: str) -> dict[str, object]:
    body = json.dumps({"name": release, "namespace": namespace, "version": 1, "manifest": manifest})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {
            "name": f"sh.helm.release.v1.{release}.v1",
            "namespace": namespace,
            "labels": {"name": release, "owner": "helm", "status": "deployed", "version": "1"},
        },
        "data": {"release": base64.b64encode(base64.b64encode(gzip.compress(body.encode()))).decode()},
    }


def test_metric_managed_fields_and_helm_release_on_the_real_apiserver(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    vac, namespace, release = f"gold-{suffix}", f"apis-{suffix}", f"storage-{suffix}"
    applied = tmp_path / "vac.yaml"
    applied.write_text(
        f"apiVersion: storage.k8s.io/v1beta1\nkind: VolumeAttributesClass\nmetadata:\n  name: {vac}\n"
        "driverName: ebs.csi.aws.com\nparameters:\n  iops: '3000'\n"
    )
    manifest = (
        f"---\n# Source: storage/templates/vac.yaml\napiVersion: storage.k8s.io/v1beta1\n"
        f"kind: VolumeAttributesClass\nmetadata:\n  name: {vac}-helm\ndriverName: ebs.csi.aws.com\n"
    )
    secret = tmp_path / "release.json"
    secret.write_text(json.dumps(_helm_secret(release, namespace, manifest)))
    real_cluster.kubectl("create", "namespace", namespace)
    try:
        # Server-side apply through the old version, as Argo CD would: no last-applied annotation.
        done = real_cluster.kubectl(
            "apply", "--server-side", "--field-manager=argocd-controller", "-f", str(applied)
        )
        assert "deprecated in v1.34+, unavailable in v1.37+" in done.stderr
        real_cluster.kubectl("create", "-f", str(secret))
        stored = json.loads(
            real_cluster.kubectl("get", "volumeattributesclasses.v1.storage.k8s.io", vac, "-o", "json").stdout
        )
        assert stored["apiVersion"] == "storage.k8s.io/v1"
        assert "annotations" not in stored["metadata"]
        real_cluster.kubectl("get", "--raw", "/api/v1/componentstatuses")

        cluster = Cluster.connect(ClusterConfig(name="testbed", kubeconfig=real_cluster.kubeconfig))
        try:
            notes: list[str] = []
            at_37 = cluster_api_findings(cluster, "1.37", now=time.time(), notes=notes)
            at_36 = cluster_api_findings(cluster, "1.36.4")
        finally:
            cluster.close()

        gone = next(f for f in at_37 if f.title == VAC_GONE)
        assert gone.id == API_REMOVED
        assert "requests to volumeattributesclasses.v1beta1.storage.k8s.io (apiserver metric)" in gone.objects
        assert f"VolumeAttributesClass {vac} (managedFields: argocd-controller Apply)" in gone.objects
        assert (
            f"Helm release {namespace}/{release} revision 1: VolumeAttributesClass {vac}-helm, "
            "storage/templates/vac.yaml"
        ) in gone.objects
        # The real apiserver says when it started: the report says how long it has been counting.
        assert "counted since the apiserver started " in gone.source
        assert "reset when it restarts" in gone.source
        assert notes[0].startswith("API data: kubernetes-validate ")

        # One release earlier the same objects are deprecated, still served, and never "removed".
        still = next(f for f in at_36 if f.title.startswith("storage.k8s.io/v1beta1 VolumeAttributesClass"))
        assert still.id == API_DEPRECATED
        assert "unavailable from 1.37" in still.title
        assert "removed" not in still.title
        assert f"VolumeAttributesClass {vac} (managedFields: argocd-controller Apply)" in still.objects
        # A deprecation with no removal planned: the metric's empty removed_release.
        components = next(f for f in at_36 if f.title.startswith("v1 ComponentStatus"))
        assert components.id == API_DEPRECATED
        assert "no release announced" in components.title
    finally:
        real_cluster.kubectl(
            "delete", "volumeattributesclasses.v1.storage.k8s.io", vac, "--wait=false", check=False
        )
        real_cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
