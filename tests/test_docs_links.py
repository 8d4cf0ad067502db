"""Links in the README and the docs resolve: every relative link names a file that exists and, with
a `#fragment`, a heading of that file, slugged as GitHub and as the docs site (Python-Markdown's
`toc`) both slug it. The docs site is built from `docs/` with plain relative links between pages,
so a page renamed or a heading reworded without its links fails here, not in a reader's browser."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The pages people read: the front page, the docs, and the benchmark figures it links to.
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md", *(ROOT / "docs").glob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
#: Inline links and images, `[text](target "title")`, and reference definitions, `[id]: target`.
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^[ ]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def unfenced(text: str) -> str:
    """The text with fenced code blocks blanked (a `# comment` in a shell block is no heading)."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def prose(text: str) -> str:
    """The text with code blocks and code spans blanked: links there are examples, not links."""
    return _CODE_SPAN.sub("", unfenced(text))


def links(text: str) -> list[str]:
    body = prose(text)
    return [m.group(1) for m in _INLINE.finditer(body)] + [m.group(1) for m in _REFERENCE.finditer(body)]


def heading_text(raw: str) -> str:
    """A heading as rendered: links reduced to their text, emphasis and code marks dropped."""
    raw = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return re.sub(r"[`*_]", "", raw)


def github_slug(heading: str) -> str:
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def toc_slug(heading: str) -> str:
    """Python-Markdown's `toc.slugify` (the docs site's), separator "-"."""
    value = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def anchors(page: Path) -> set[str]:
    """The fragments a link may name on a page: those both slugs agree on."""
    found = set()
    for match in _HEADING.finditer(unfenced(page.read_text(encoding="utf-8"))):
        text = heading_text(match.group(2))
        if github_slug(text) == toc_slug(text):
            found.add(github_slug(text))
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in links(page.read_text(encoding="utf-8")):
        if _SCHEME.match(target):
            continue  # http(s), mailto: not this test's to check offline
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}: {target}"
        if not resolved.is_relative_to(root):
            problems.append(f"{where} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where} names a file that does not exist")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{where} names no heading of {resolved.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    # The checker itself, on pages made to fail: a test of links that could never fail proves nothing.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\n## The cloud's side (EKS)\n", encoding="utf-8")
    page = docs / "b.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#the-clouds-side-eks) [web](https://example.com/x.md)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n"
        "[gone](missing.md) ![picture](img/none.png) [no heading](a.md#nothing)\n[ref]: gone-too.md\n",
        encoding="utf-8",
    )
    assert broken_links(page, root=tmp_path) == [
        "docs/b.md: missing.md names a file that does not exist",
        "docs/b.md: img/none.png names a file that does not exist",
        "docs/b.md: a.md#nothing names no heading of docs/a.md",
        "docs/b.md: gone-too.md names a file that does not exist",
    ]


def test_the_docs_images_are_small_pngs() -> None:
    images = sorted((ROOT / "docs" / "img").iterdir())
    assert images, "docs/img holds the README's picture"
    for image in images:
        assert image.suffix == ".png", image.name
        assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image.name
        assert image.stat().st_size < 300 * 1024, f"{image.name}: {image.stat().st_size} bytes"
