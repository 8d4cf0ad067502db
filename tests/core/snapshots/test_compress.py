"""A snapshot body is one zlib stream whatever its size, split in two halves deflated at once or not."""

from __future__ import annotations

import random
import zlib

import pytest

from bot.core.snapshots import service


@pytest.mark.parametrize(
    "size", [0, 1, 1000, service.SPLIT_AT - 1, service.SPLIT_AT, 3 * service.SPLIT_AT + 7]
)
def test_a_body_compressed_in_halves_reads_back_with_zlib_as_it_was(size: int) -> None:
    rng = random.Random(size)
    words = [b"pod", b"web-", b'"Running"', b"ads-009", b",", b"[", b"]", b"12", b"ip-10-0-1-2"]
    data = b"".join(rng.choice(words) for _ in range(size // 4 + 1))[:size]
    body = service.compress(data)
    assert zlib.decompress(body) == data
    # Within a few bytes of one stream: the cut costs the back-references across it, no more.
    assert len(body) <= len(zlib.compress(data, service.COMPRESSION)) * 1.01 + 64


def test_a_snapshot_reads_back_the_same_through_encode_and_decode() -> None:
    snap = {"format": 1, "pods": [["ns", f"pod-{i}", i] for i in range(200_000)], "gaps": []}
    assert len(service.to_json(snap)) >= service.SPLIT_AT, "large enough to be split"
    assert service.decode(service.encode(snap)) == snap
