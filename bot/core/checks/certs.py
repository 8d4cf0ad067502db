"""The expiry (X.509 `notAfter`) of PEM certificates, read with a minimal DER walker.

The checks only need when a certificate stops being valid and whom it names. `cryptography`
would be the usual parser, but nothing the bot installs brings it in (`pip install upgrade-bot`
has no cryptography: benchmarks/bench_install.py lists every distribution), and it would add
about 14 MB (cryptography 50 unpacked, before cffi) to a 106 MB install to read two dates and a name.
So it is read here: a certificate is a DER SEQUENCE
(tbsCertificate, signatureAlgorithm, signature), and tbsCertificate starts with an optional
`[0]` version, the serial number, the signature algorithm, the issuer, the validity
(notBefore, notAfter) and the subject. Nothing else is decoded, nothing is verified: a bundle
that does not parse is reported as unreadable, not trusted (a ValueError says what was wrong).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime

_PEM = re.compile(
    r"-----BEGIN CERTIFICATE-----\s*(.*?)\s*-----END CERTIFICATE-----",
    re.DOTALL,
)
#: OID 2.5.4.3 (commonName), DER-encoded.
_CN = bytes.fromhex("550403")


@dataclass(frozen=True, kw_only=True)
class CertInfo:
    subject: str  # the subject's common name, or "" when it has none
    not_before: datetime
    not_after: datetime


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `at`."""
    if at + 2 > len(data):
        raise ValueError("truncated DER element")
    tag, first = data[at], data[at + 1]
    at += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or at + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    if at + length > len(data):
        raise ValueError("DER element longer than its data")
    return tag, at, at + length


def _time(tag: int, raw: bytes) -> datetime:
    text = raw.decode("ascii", "replace")
    try:
        if tag == 0x17:  # UTCTime YYMMDDHHMMSSZ: 50-99 are 19xx (RFC 5280)
            when = datetime.strptime(text, "%y%m%d%H%M%SZ")
            if when.year >= 2050:
                when = when.replace(year=when.year - 100)
        elif tag == 0x18:  # GeneralizedTime YYYYMMDDHHMMSSZ
            when = datetime.strptime(text, "%Y%m%d%H%M%SZ")
        else:
            raise ValueError(f"validity time has tag {tag:#x}")
    except ValueError as exc:
        raise ValueError(f"bad validity time {text!r}") from exc
    return when.replace(tzinfo=UTC)


def _common_name(data: bytes, start: int, end: int) -> str:
    """The first commonName of a Name (SEQUENCE of SET of SEQUENCE {OID, value})."""
    at = start
    while at < end:
        _, set_start, set_end = _tlv(data, at)
        inner = set_start
        while inner < set_end:
            _, attr_start, attr_end = _tlv(data, inner)
            _, oid_start, oid_end = _tlv(data, attr_start)
            if data[oid_start:oid_end] == _CN:
                _, v_start, v_end = _tlv(data, oid_end)
                return data[v_start:v_end].decode("utf-8", "replace")
            inner = attr_end
        at = set_end
    return ""


def read_der(der: bytes) -> CertInfo:
    """The subject and validity of one DER certificate."""
    tag, start, _ = _tlv(der, 0)
    if tag != 0x30:
        raise ValueError("not a DER SEQUENCE")
    tag, at, tbs_end = _tlv(der, start)  # tbsCertificate
    if tag != 0x30:
        raise ValueError("no tbsCertificate")
    fields: list[tuple[int, int, int]] = []
    while at < tbs_end and len(fields) < 6:
        element = _tlv(der, at)
        fields.append(element)
        at = element[2]
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    if len(fields) < 5:
        raise ValueError("tbsCertificate too short")
    _, v_start, v_end = fields[3]  # serial, signature algorithm, issuer, validity, subject
    t1, s1, e1 = _tlv(der, v_start)
    t2, s2, e2 = _tlv(der, e1)
    if e2 > v_end:
        raise ValueError("bad validity")
    _, subject_start, subject_end = fields[4]
    return CertInfo(
        subject=_common_name(der, subject_start, subject_end),
        not_before=_time(t1, der[s1:e1]),
        not_after=_time(t2, der[s2:e2]),
    )


def read_pem_bundle(text: str) -> list[CertInfo]:
    """Every certificate of a PEM bundle, in order; raises ValueError if one does not parse or
    there is none."""
    blocks = _PEM.findall(text)
    if not blocks:
        raise ValueError("no PEM certificate")
    out = []
    for block in blocks:
        try:
            der = base64.b64decode("".join(block.split()), validate=True)
        except binascii.Error as exc:
            raise ValueError("a PEM block is not base64") from exc
        out.append(read_der(der))
    return out


def read_ca_bundle(value: str) -> list[CertInfo]:
    """A `caBundle` field as the API returns it (base64 of a PEM bundle)."""
    try:
        text = base64.b64decode(value, validate=True).decode("ascii", "replace")
    except binascii.Error as exc:
        raise ValueError("caBundle is not base64") from exc
    return read_pem_bundle(text)
