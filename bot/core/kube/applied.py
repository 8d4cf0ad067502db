"""The kinds whose objects the removed-API signals read for last-applied and managedFields
(`core/checks/apis.py`'s module docstring says why these), apart from the signals themselves:
`run_check` names their lists to the reader before the pods' helper starts, so that the cluster is
read once, and the signals' module (with its API data) is imported after that start, not before
it. Shared here, below the features: a snapshot keeps what these kinds' objects say of old APIs
(`core/snapshots/apiuse.py`), so that a twin of the cluster gives the same findings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppliedKind:
    kind: str
    group_version: str  # the GA version it is listed through
    resource: str

    @property
    def path(self) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        return f"{base}/{self.resource}"


def _kinds(group_version: str, pairs: str) -> list[AppliedKind]:
    return [
        AppliedKind(kind, group_version, resource) for kind, resource in (p.split(":") for p in pairs.split())
    ]


#: The kinds read for last-applied and managedFields (why these: `apis.py`'s module docstring).
APPLIED_KINDS: tuple[AppliedKind, ...] = tuple(
    _kinds("apps/v1", "Deployment:deployments DaemonSet:daemonsets StatefulSet:statefulsets")
    + _kinds("batch/v1", "CronJob:cronjobs")
    + _kinds("autoscaling/v2", "HorizontalPodAutoscaler:horizontalpodautoscalers")
    + _kinds("policy/v1", "PodDisruptionBudget:poddisruptionbudgets")
    + _kinds(
        "networking.k8s.io/v1",
        "Ingress:ingresses IngressClass:ingressclasses NetworkPolicy:networkpolicies ServiceCIDR:servicecidrs",
    )
    + _kinds("apiextensions.k8s.io/v1", "CustomResourceDefinition:customresourcedefinitions")
    + _kinds(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration:mutatingwebhookconfigurations "
        "ValidatingWebhookConfiguration:validatingwebhookconfigurations "
        "ValidatingAdmissionPolicy:validatingadmissionpolicies "
        "ValidatingAdmissionPolicyBinding:validatingadmissionpolicybindings",
    )
    + _kinds("apiregistration.k8s.io/v1", "APIService:apiservices")
    + _kinds(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole:clusterroles ClusterRoleBinding:clusterrolebindings Role:roles RoleBinding:rolebindings",
    )
    + _kinds("scheduling.k8s.io/v1", "PriorityClass:priorityclasses")
    + _kinds(
        "storage.k8s.io/v1",
        "StorageClass:storageclasses CSIDriver:csidrivers VolumeAttributesClass:volumeattributesclasses",
    )
    + _kinds("node.k8s.io/v1", "RuntimeClass:runtimeclasses")
    + _kinds(
        "flowcontrol.apiserver.k8s.io/v1",
        "FlowSchema:flowschemas PriorityLevelConfiguration:prioritylevelconfigurations",
    )
    + _kinds("resource.k8s.io/v1", "DeviceClass:deviceclasses ResourceClaimTemplate:resourceclaimtemplates")
)
