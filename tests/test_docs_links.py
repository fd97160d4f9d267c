"""The README's and the docs' links stay inside the repository, and every one of them resolves.

A link with a scheme (``https:``, ``mailto:``) or an absolute path leaves the repository; a
relative one must name a file of the repository (a docs page one under ``docs/``, which is all
the site holds), and its ``#anchor`` a heading of that file, slugged as mkdocs slugs it."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
_HTML_TARGET = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_BARE_URL = re.compile(r"\b(?:https?://|www\.)\S+")


@dataclass(frozen=True)
class Link:
    """A link target as written, and the line of its block (1-based)."""

    target: str
    line: int


def _walk(tokens: list[Token]) -> list[tuple[Token, int]]:
    """Every token, inline children included, with the line of the block it is in."""
    found: list[tuple[Token, int]] = []
    line = 1
    for token in tokens:
        if token.map is not None:
            line = token.map[0] + 1
        found.append((token, line))
        found += [(child, line) for child in token.children or []]
    return found


def links_of(markdown: str) -> list[Link]:
    """Every link and image target of ``markdown`` (reference links resolved, raw HTML's
    ``href``/``src`` too), and every bare URL in its prose (GitHub shows those as links)."""
    links: list[Link] = []
    inside = 0  # the text of a link is its label, not another link
    for token, line in _walk(MarkdownIt().parse(markdown)):
        if token.type == "link_open":
            links.append(Link(str(token.attrGet("href")), line))
            inside += 1
        elif token.type == "link_close":
            inside -= 1
        elif token.type == "image":
            links.append(Link(str(token.attrGet("src")), line))
        elif token.type in ("html_inline", "html_block"):
            links += [Link(t, line) for t in _HTML_TARGET.findall(token.content)]
        elif token.type == "text" and not inside:
            links += [Link(t, line) for t in _BARE_URL.findall(token.content)]
    return links


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs makes it (Python-Markdown's ``toc.slugify``)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors_of(markdown: str) -> set[str]:
    """The anchors of a page's headings (a repeated one gets ``_1``, ``_2`` as mkdocs does)."""
    tokens = MarkdownIt().parse(markdown)
    found: set[str] = set()
    for index, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = "".join(
            child.content
            for child in tokens[index + 1].children or []
            if child.type in ("text", "code_inline")
        )
        base = anchor = slug(text)
        count = 0
        while anchor in found:
            count += 1
            anchor = f"{base}_{count}"
        found.add(anchor)
    return found


def problem(page: Path, link: Link) -> str | None:
    """What is wrong with ``link`` on ``page``, or None when it resolves inside the repository."""
    target = link.target
    where = f"{page.relative_to(ROOT)}:{link.line}: {target!r}"
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("//", "www.")):
        return f"{where} points outside the repository"
    if target.startswith("/"):
        return f"{where} is an absolute path: link relative to the page"
    path_part, _, anchor = target.partition("#")
    file = (page.parent / path_part).resolve() if path_part else page
    home = DOCS if page.is_relative_to(DOCS) else ROOT
    if not file.is_relative_to(home):
        return f"{where} leaves {home.relative_to(ROOT.parent)}/"
    if not file.exists():
        return f"{where} names nothing: {file.relative_to(ROOT)} does not exist"
    if anchor and file.is_dir():
        return f"{where} puts an anchor on a folder"
    if anchor and anchor not in anchors_of(file.read_text(encoding="utf-8")):
        return f"{where}: {file.relative_to(ROOT)} has no heading with the anchor #{anchor}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_stays_in_the_repository_and_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    problems = [p for link in links_of(text) if (p := problem(page, link)) is not None]
    assert not problems, "\n".join(problems)
    # The old README sent readers to a sibling checkout's design notes, which a clone lacks.
    assert "../shared" not in text


def test_the_readme_links_into_the_docs_and_the_docs_are_many_pages() -> None:
    readme = links_of((ROOT / "README.md").read_text(encoding="utf-8"))
    linked = {(ROOT / link.target.partition("#")[0]).resolve() for link in readme}
    assert DOCS / "tutorial-own-videos.md" in linked
    assert DOCS / "settings.md" in linked
    assert len(PAGES) > 10


@pytest.mark.parametrize(
    ("target", "wrong"),
    [
        ("https://example.org/x", "points outside the repository"),
        ("mailto:someone@example.org", "points outside the repository"),
        ("//example.org/x", "points outside the repository"),
        ("/etc/passwd", "is an absolute path"),
        ("../shared/DESIGN.md", "leaves"),
        ("docs/nowhere.md", "names nothing"),
        ("docs/settings.md#no-such-heading", "has no heading with the anchor"),
    ],
)
def test_a_bad_link_from_the_readme_is_named(target: str, wrong: str) -> None:
    found = problem(ROOT / "README.md", Link(target, 1))
    assert found is not None
    assert wrong in found


@pytest.mark.parametrize(
    ("target", "wrong"),
    [
        ("../README.md", "leaves"),  # not part of the site: mkdocs cannot link it
        ("curation.md#nowhere", "has no heading with the anchor"),
    ],
)
def test_a_bad_link_from_a_docs_page_is_named(target: str, wrong: str) -> None:
    found = problem(DOCS / "index.md", Link(target, 1))
    assert found is not None
    assert wrong in found


def test_good_links_pass_and_anchors_are_slugged_as_mkdocs_does() -> None:
    assert problem(ROOT / "README.md", Link("docs/settings.md#reference", 1)) is None
    assert problem(DOCS / "index.md", Link("curation.md", 1)) is None
    assert problem(DOCS / "settings.md", Link("#logs", 1)) is None
    assert slug("Curation (step 2)") == "curation-step-2"
    assert anchors_of("# A\n\n## A\n\n### `[index]`\n") == {"a", "a_1", "index"}


def test_links_are_read_from_prose_references_and_html_not_from_code() -> None:
    markdown = (
        "See [x](a.md), [y][ref], <https://example.org>, www.example.org and "
        '<a href="b.md">b</a>.\n\n[ref]: c.md#top\n\n`https://in-code.example` and\n\n'
        "```bash\ncurl https://in-a-block.example\n```\n"
    )
    targets = [link.target for link in links_of(markdown)]
    assert targets == ["a.md", "c.md#top", "https://example.org", "www.example.org", "b.md"]
