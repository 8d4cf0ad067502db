"""Certificates for scenarios: the shape of a self-signed X.509 certificate with a chosen expiry.

A scenario writes `{test_certificate: {common_name: istio-root, expires_in: 3d, encoding: pem}}`
where a manifest holds a certificate (a webhook's `caBundle`, a ConfigMap's `root-cert.pem`); the
loader puts a certificate there whose `notAfter` is that long after the present. The key is random
bytes and the signature is not one: what reads these only looks at names and dates (nothing in the
sim verifies a TLS handshake). `openssl x509 -noout -enddate` reads them.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta

#: OIDs, DER-encoded: Ed25519 (1.3.101.112), commonName (2.5.4.3), organizationName (2.5.4.10).
_ED25519 = bytes.fromhex("2b6570")
_CN = bytes.fromhex("550403")
_O = bytes.fromhex("55040a")


def _der(tag: int, value: bytes) -> bytes:
    n = len(value)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + value


def _seq(*parts: bytes) -> bytes:
    return _der(0x30, b"".join(parts))


def _name(common_name: str, organization: str) -> bytes:
    def attr(oid: bytes, value: str) -> bytes:
        return _der(0x31, _seq(_der(0x06, oid), _der(0x0C, value.encode())))

    return _seq(attr(_O, organization), attr(_CN, common_name))


def _time(when: datetime) -> bytes:
    if 1950 <= when.year < 2050:
        return _der(0x17, when.strftime("%y%m%d%H%M%SZ").encode())
    return _der(0x18, when.strftime("%Y%m%d%H%M%SZ").encode())


def certificate_der(
    *, common_name: str, not_after: datetime, not_before: datetime | None = None, organization: str = "sim"
) -> bytes:
    start = not_before if not_before is not None else not_after - timedelta(days=365)
    algorithm = _seq(_der(0x06, _ED25519))
    name = _name(common_name, organization)
    tbs = _seq(
        _der(0xA0, _der(0x02, b"\x02")),  # v3
        _der(0x02, b"\x01" + os.urandom(8)),
        algorithm,
        name,
        _seq(_time(start.astimezone(UTC)), _time(not_after.astimezone(UTC))),
        name,
        _seq(algorithm, _der(0x03, b"\x00" + os.urandom(32))),
    )
    return _seq(tbs, algorithm, _der(0x03, b"\x00" + os.urandom(64)))


def certificate_pem(*, common_name: str, not_after: datetime, organization: str = "sim") -> str:
    der = certificate_der(common_name=common_name, not_after=not_after, organization=organization)
    body = base64.b64encode(der).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"
