"""A Prometheus scrape as a scraper reads it: the exposition parsed with Prometheus' own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support.signing import get

#: (name, sorted labels) → value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of `url`'s exposition: (name, sorted labels) → value."""
    answer = get(url)
    assert answer.status == 200
    samples = {}
    for family in text_string_to_metric_families(answer.body):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples
