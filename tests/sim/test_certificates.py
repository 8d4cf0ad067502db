"""Certificates: the check's DER reader (bot/core/checks/certs.py) reads what openssl writes, and
openssl reads the scenario certificates the sim makes (bot/sim/world/certs.py) with the expiry asked."""

from __future__ import annotations

import base64
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.checks.certs import read_ca_bundle, read_pem_bundle
from bot.sim.world.certs import certificate_pem


def _enddate(path: Path) -> datetime:
    end = subprocess.run(
        ["openssl", "x509", "-in", str(path), "-noout", "-enddate"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return datetime.strptime(end, "notAfter=%b %d %H:%M:%S %Y GMT").replace(tzinfo=UTC)


def test_the_der_walker_reads_what_openssl_writes(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "3", "-subj", "/O=example/CN=webhook-ca"],
        check=True, capture_output=True,
    )  # fmt: skip
    (info,) = read_pem_bundle(cert.read_text())
    assert info.subject == "webhook-ca"
    assert info.not_after == _enddate(cert)
    # As a caBundle: base64 of the PEM, several certificates in order.
    bundle = base64.b64encode((cert.read_text() + cert.read_text()).encode()).decode()
    assert [i.subject for i in read_ca_bundle(bundle)] == ["webhook-ca", "webhook-ca"]


def test_openssl_reads_the_sims_certificates_with_the_expiry_asked(tmp_path: Path) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(days=5)
    path = tmp_path / "sim.pem"
    path.write_text(certificate_pem(common_name="Root CA", not_after=when, organization="cluster.local"))
    assert _enddate(path) == when
    subject = subprocess.run(
        ["openssl", "x509", "-in", str(path), "-noout", "-subject"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "CN = Root CA" in subject
    assert "O = cluster.local" in subject
