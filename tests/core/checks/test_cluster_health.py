"""The runbooks' uncovered known issues (issue 25, item 6): VPC CNI out of IPs and its warm pool,
CRD stored versions no longer served or marked deprecated, the in-cluster Istio operator,
certificates expiring (webhook and CRD-conversion caBundles, the Istio root, webhook serving
certificates issued by cert-manager), and the room to drain a node group.

Each fires on the sim's `known-issues-2` scenario read through the kube adapter (the real
kubernetes client's configuration, over HTTP) and is silent on the clean `small`; the edges are
tested on data."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.kube import Cluster
from bot.core.checks.certs import read_ca_bundle, read_der, read_pem_bundle
from bot.core.checks.cluster_health import (
    CertFacts,
    CniFacts,
    CrdFacts,
    HealthFacts,
    NodeRoom,
    ServingCert,
    check_capacity,
    check_certs,
    check_cni,
    check_crds,
    check_istio_operator,
    check_serving_certs,
    quantity,
)
from bot.core.checks.findings import RECOMMENDED, REQUIRED, Finding, Report
from bot.core.checks.service import render_markdown, run_check
from bot.core.rules import read_rules
from bot.records import ClusterConfig
from bot.resources import BUILTIN_RULES
from bot.sim import SimCluster
from bot.sim.world.certs import certificate_der, certificate_pem

RULES = read_rules(BUILTIN_RULES)
NEW_IDS = {
    "CNI001",
    "CNI002",
    "CRD001",
    "CRD002",
    "ISTIO002",
    "CERT001",
    "CERT002",
    "CERT003",
    "CERT004",
    "CAP001",
    "CAP002",
}
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def check(sim: SimCluster, kubeconfig: Path) -> Report:
    cluster = Cluster.connect(ClusterConfig(name="sim", kubeconfig=kubeconfig, context="sim"))
    try:
        return run_check(cluster, target=None, rules=RULES)
    finally:
        cluster.close()


def by_id(report: Report) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in report.findings:
        out.setdefault(f.id, []).append(f)
    return out


# ----- on the sim ----------------------------------------------------------------------------------


def test_each_new_check_fires_on_known_issues_2_with_its_evidence_and_none_on_small(
    sim_factory: Callable[..., SimCluster], sim_kubeconfig: Callable[[SimCluster], Path]
) -> None:
    sim = sim_factory("known-issues-2", speed=0.0, seed=1)
    report = check(sim, sim_kubeconfig(sim))
    found = by_id(report)
    assert report.failed
    assert NEW_IDS & set(found) == {
        "CNI001",
        "CNI002",
        "CRD001",
        "CRD002",
        "ISTIO002",
        "CERT001",
        "CERT004",
        "CAP001",
    }
    for code in NEW_IDS & set(found):
        for finding in found[code]:
            assert finding.source.startswith(("https://", "known-issue rule")), finding
            assert finding.why
            assert finding.fix

    # Pods without an IP: the rule over the kubelet's FailedCreatePodSandBox events, Required.
    (cni2,) = found["CNI002"]
    assert cni2.severity == REQUIRED
    assert cni2.objects[0] == "Deployment reports/reports-api"
    assert len([o for o in cni2.objects if o.startswith("Pod reports/reports-api-")]) == 2
    assert "failed to assign an IP address" in cni2.why
    # …and the warm pool that lets it happen on a drain.
    (cni1,) = found["CNI001"]
    assert (cni1.severity, cni1.objects) == (
        RECOMMENDED,
        ("DaemonSet kube-system/aws-node (WARM_IP_TARGET=2, WARM_ENI_TARGET=1)",),
    )
    assert "MINIMUM_IP_TARGET=" in cni1.fix

    (crd,) = found["CRD001"]
    assert crd.objects == (
        "CustomResourceDefinition ledgerpolicies.ledger.example.com"
        " (storedVersions v1alpha1, v1; served v1; storage v1)",
    )
    assert "kubectl patch crd ledgerpolicies.ledger.example.com --subresource=status" in crd.fix
    assert '"storedVersions":["v1"]' in crd.fix
    # A stored version the CRD marks deprecated and no longer serves: its operator drops it next.
    (dropped,) = found["CRD002"]
    assert dropped.severity == REQUIRED
    assert dropped.title == (
        "CustomResourceDefinition ledgerschedules.ledger.example.com still stores version v1beta1,"
        " which its operator marks deprecated and no longer serves"
    )
    assert "removed in ledger-operator 3.0" in dropped.why
    assert "kubectl patch crd ledgerschedules.ledger.example.com --subresource=status" in dropped.fix

    (operator,) = found["ISTIO002"]
    assert operator.objects == (
        "Deployment istio-operator/istio-operator (operator 1.20.3)",
        "CustomResourceDefinition istiooperators.install.istio.io",
    )

    # The webhook's CA (3 days) and the Istio root (5 days) expire inside the window; the
    # cert-manager conversion webhook's (a year) is fine.
    certs = sorted(found["CERT001"], key=lambda f: f.objects)
    assert [f.severity for f in certs] == [REQUIRED, REQUIRED]
    assert (
        certs[0]
        .objects[0]
        .startswith("ConfigMap istio-system/istio-ca-root-cert: data.root-cert.pem expires in 5 days (")
    )
    assert (
        certs[1]
        .objects[0]
        .startswith(
            "ValidatingWebhookConfiguration ledger-policy: webhook policy.ledger.example.com caBundle"
            " (CN ledger-policy-ca) expires in 3 days ("
        )
    )
    assert "kubectl get validatingwebhookconfiguration ledger-policy" in certs[1].fix
    # The ledger-defaults webhook's serving certificate, issued by cert-manager, expires in 4 days
    # and its renewal is overdue (the issuer fails): Required. cert-manager's own, renewed on time,
    # is not a finding.
    (serving,) = found["CERT004"]
    assert serving.severity == REQUIRED
    assert serving.title.startswith(
        "The serving certificate of MutatingWebhookConfiguration ledger-defaults"
        " (cert-manager Certificate ledger/ledger-webhook-serving) expires in 4 days ("
    )
    assert serving.title.endswith("; its renewal is overdue")
    assert 'Ready False: Issuer "ledger-ca" is not ready' in serving.objects[0]
    assert "cmctl renew -n ledger ledger-webhook-serving" in serving.fix
    assert not any("cert-manager" in o for f in report.findings for o in f.objects)

    # Each worker node holds a 1.2-CPU ledger replica that no other node has room for.
    (cap,) = found["CAP001"]
    assert cap.severity == REQUIRED
    assert cap.title == "No room to drain a node of node group workers"
    assert "1.3 CPU requested, 1.15 CPU free" in cap.why

    text = render_markdown(report)
    assert "## Required · CNI002 · Pods cannot get an IP address" in text

    clean = sim_factory("small", speed=0.0, seed=1)
    quiet = check(clean, sim_kubeconfig(clean))
    assert not NEW_IDS & {f.id for f in quiet.findings}
    assert not quiet.failed


# ----- certificates ----------------------------------------------------------------------------------


def test_generalized_time_past_2049_and_bad_bundles_are_told_apart() -> None:
    late = datetime(2061, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert read_der(certificate_der(common_name="x", not_after=late)).not_after == late
    early = datetime(2049, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert read_der(certificate_der(common_name="x", not_after=early)).not_after == early
    for bad, why in (
        ("not base64!", "caBundle is not base64"),
        (base64.b64encode(b"hello").decode(), "no PEM certificate"),
        (
            base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode(),
            "bad DER length",
        ),
    ):
        with pytest.raises(ValueError, match=why):
            read_ca_bundle(bad)


def cert(days: float, kind: str = "webhook") -> CertFacts:
    owner = (
        "ConfigMap istio-system/istio-ca-root-cert"
        if kind == "istio-root"
        else "MutatingWebhookConfiguration m"
    )
    return CertFacts(kind=kind, owner=owner, where="w", subject="ca", not_after=NOW + timedelta(days=days))


def test_a_certificate_is_required_inside_the_window_recommended_within_30_days_else_silent() -> None:
    health = HealthFacts(
        certs=[
            cert(-1),
            cert(13.4),
            cert(14.1),
            cert(29),
            cert(31),
            cert(3, "istio-root"),
            CertFacts(
                kind="webhook",
                owner="MutatingWebhookConfiguration bad",
                where="w",
                error="no PEM certificate",
            ),
        ]
    )
    found = [(f.id, f.severity, f.objects[0]) for f in check_certs(health, now=NOW)]
    assert [f[:2] for f in found] == [
        ("CERT001", REQUIRED),
        ("CERT001", REQUIRED),
        ("CERT002", RECOMMENDED),
        ("CERT002", RECOMMENDED),
        ("CERT001", REQUIRED),
        ("CERT003", RECOMMENDED),
    ]
    assert found[0][2] == "MutatingWebhookConfiguration m: w (CN ca) expired 2026-11-25 12:00 UTC"
    assert found[1][2].endswith("expires in 13 days (2026-12-09 UTC)")
    assert found[4][2].startswith("ConfigMap istio-system/istio-ca-root-cert")
    assert found[5][2] == "MutatingWebhookConfiguration bad: w (no PEM certificate)"


def test_the_sims_certificates_expire_when_the_scenario_says() -> None:
    pem = certificate_pem(common_name="Root CA", not_after=NOW + timedelta(days=5))
    (info,) = read_pem_bundle(pem)
    assert (info.subject, info.not_after) == ("Root CA", NOW + timedelta(days=5))


# ----- the other checks on data -------------------------------------------------------------------


def test_a_cert_manager_serving_certificate_is_required_only_when_its_renewal_will_not_come() -> None:
    def serving(days: float, renewal_days: float | None, ready: str = "True") -> list[str]:
        cert = ServingCert(
            ref="shop/hook-tls",
            users=("ValidatingWebhookConfiguration shop-hook",),
            not_after=NOW + timedelta(days=days),
            renewal=NOW + timedelta(days=renewal_days) if renewal_days is not None else None,
            ready=ready,
        )
        return [f"{f.id} {f.severity}" for f in check_serving_certs(HealthFacts(serving=[cert]), now=NOW)]

    assert serving(10, 2) == [f"CERT004 {RECOMMENDED}"]  # renewed inside the window: cert-manager must run
    assert serving(10, -1) == [f"CERT004 {REQUIRED}"]  # its renewal time passed without one
    assert serving(10, 2, ready="False") == [f"CERT004 {REQUIRED}"]
    assert serving(10, None) == [f"CERT004 {REQUIRED}"]
    assert serving(20, -1) == [f"CERT004 {RECOMMENDED}"]  # within 30 days, renewal overdue
    assert serving(20, 5) == []  # renewed before it matters
    assert serving(90, -1) == []
    missing = ServingCert(
        ref="shop/gone", users=("CustomResourceDefinition a.example.com",), error="no such Certificate"
    )
    (finding,) = check_serving_certs(HealthFacts(serving=[missing]), now=NOW)
    assert (finding.id, finding.severity) == ("CERT004", RECOMMENDED)
    assert finding.objects == (
        "Certificate shop/gone (no such Certificate), named by CustomResourceDefinition a.example.com",
    )


def test_cni_warm_targets() -> None:
    def found(**env: str) -> list[str]:
        return [f.id for f in check_cni(HealthFacts(cni=CniFacts(env=env)))]

    assert found(WARM_IP_TARGET="2") == ["CNI001"]
    assert found(WARM_IP_TARGET="2", MINIMUM_IP_TARGET="20") == []
    assert found(WARM_IP_TARGET="2", ENABLE_PREFIX_DELEGATION="true") == []
    assert found(WARM_ENI_TARGET="1") == []  # the default: a whole spare ENI
    assert check_cni(HealthFacts(cni=None)) == []  # not the VPC CNI


def test_crd_stored_versions() -> None:
    fine = CrdFacts(name="a.example.com", versions=("v1",), served=("v1",), storage="v1", stored=("v1",))
    gone = CrdFacts(
        name="b.example.com", versions=("v1",), served=("v1",), storage="v1", stored=("v1beta1", "v1")
    )
    (finding,) = check_crds(HealthFacts(crds=[fine, gone]))
    assert finding.title.endswith("still records stored version v1beta1, no longer served")
    assert "v1beta1 is already gone from spec.versions" in finding.why
    assert "kubectl get b -A -o json | kubectl replace -f -" in finding.fix


def test_a_stored_version_marked_deprecated_is_recommended_and_required_once_not_served() -> None:
    def crd(served: tuple[str, ...]) -> CrdFacts:
        return CrdFacts(
            name="widgets.example.com",
            versions=("v1beta1", "v1"),
            served=served,
            storage="v1",
            stored=("v1beta1", "v1"),
            deprecated=("v1beta1",),
            warnings=(("v1beta1", "use v1"),),
        )

    (still_served,) = check_crds(HealthFacts(crds=[crd(("v1beta1", "v1"))]))
    assert (still_served.id, still_served.severity) == ("CRD002", RECOMMENDED)
    assert "The CRD says: v1beta1: “use v1”." in still_served.why
    # Not served any more: Required, and CRD001 does not report the same version again.
    (gone,) = check_crds(HealthFacts(crds=[crd(("v1",))]))
    assert (gone.id, gone.severity) == ("CRD002", REQUIRED)
    assert "v1beta1 is no longer served" in gone.why
    # Deprecated but nothing stored in it: nothing to migrate.
    clean = CrdFacts(
        name="w.example.com", versions=("v1beta1", "v1"), served=("v1beta1", "v1"), storage="v1",
        stored=("v1",), deprecated=("v1beta1",),
    )  # fmt: skip
    assert check_crds(HealthFacts(crds=[clean])) == []


def test_the_istio_operator_needs_its_controller_not_just_the_crd() -> None:
    assert check_istio_operator(HealthFacts(istio_operator_crd=True)) == []
    (finding,) = check_istio_operator(
        HealthFacts(istio_operators=["Deployment istio-operator/istio-operator (operator 1.18.2)"])
    )
    assert finding.id == "ISTIO002"


GI = 2**30


def room(
    name: str, group: str, alloc: int, used: int, evict: int, *, ok: bool = True, big: int = 0
) -> NodeRoom:
    """CPU in millicores; memory and pods kept out of the way."""
    return NodeRoom(
        name=name,
        group=group,
        schedulable=ok,
        allocatable=(alloc, 64 * GI, 110),
        used=(used, GI, 5),
        evict=(evict, GI // 2, 3),
        biggest=(big or evict, GI // 4),
    )


def test_capacity_one_node_then_the_whole_group() -> None:
    # Fits: a node of a (500 m) into b's 1,500 m free; the whole of a (1,000 m) as well.
    fits = [room("a1", "a", 2000, 600, 500), room("a2", "a", 2000, 600, 500), room("b1", "b", 2000, 500, 400)]
    assert check_capacity(HealthFacts(rooms=fits)) == []
    # One node of a fits elsewhere, the whole group does not (b1 has only 700 m free): CAP002.
    tight = [
        room("a1", "a", 2000, 1000, 900),
        room("a2", "a", 2000, 1000, 900),
        room("b1", "b", 2000, 1300, 300),
    ]
    assert [(f.id, f.severity) for f in check_capacity(HealthFacts(rooms=tight))] == [("CAP002", RECOMMENDED)]
    # The fullest node of a cannot go anywhere (cordoned nodes do not count): CAP001.
    full = [
        room("a1", "a", 2000, 1800, 1700),
        room("a2", "a", 2000, 1000, 900),
        room("b1", "b", 4000, 0, 0, ok=False),
    ]
    (finding,) = check_capacity(HealthFacts(rooms=full))
    assert (finding.id, finding.severity) == ("CAP001", REQUIRED)
    assert finding.objects[0].startswith("Node a1 (3 pods to evict: 1.7 CPU")
    # Enough in total, but its largest pod fits on no single node.
    split = [
        room("a1", "a", 2000, 1500, 1400, big=1200),
        room("b1", "b", 2000, 1300, 0),
        room("c1", "c", 2000, 1300, 0),
    ]
    (finding,) = check_capacity(HealthFacts(rooms=split))
    assert finding.id == "CAP001"
    assert "its largest pod asks 1.2 CPU" in finding.why


def test_quantities() -> None:
    assert [quantity(q, milli=True) for q in ("100m", "2", "0.5", "1e3m", "", "junk")] == [
        100,
        2000,
        500,
        1000,
        0,
        0,
    ]
    assert [quantity(q) for q in ("64Mi", "8Gi", "1G", "1000", "3.5Ki")] == [
        64 * 2**20,
        8 * GI,
        10**9,
        1000,
        3584,
    ]
