"""Every relative link in the documentation points to a file that exists (and to a heading in it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "bench").glob("*.md"),
        *(ROOT / "bench" / "log").glob("*.md"),
        ROOT / "deploy" / "README.md",
    ]
)

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)


def relative_links(document: Path) -> list[str]:
    """The document's link targets that are not URLs, outside code blocks and inline code."""
    text = FENCE.sub("", document.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def heading_anchors(document: Path) -> set[str]:
    """GitHub's anchors for the document's headings: lower case, punctuation dropped, spaces -> '-'."""
    text = FENCE.sub("", document.read_text())
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.MULTILINE):
        anchor = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
        anchors.add(anchor.replace(" ", "-"))
    return anchors


def test_the_documents_exist_and_link_somewhere() -> None:
    assert all(document.is_file() for document in DOCUMENTS), DOCUMENTS
    assert {ROOT / "docs" / "architecture.md", ROOT / "docs" / "performance.md"} <= set(DOCUMENTS)
    assert "docs/architecture.md" in relative_links(ROOT / "README.md")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(document: Path) -> None:
    broken = []
    for link in relative_links(document):
        path_part, _, anchor = link.partition("#")
        target = (document.parent / path_part).resolve() if path_part else document
        if not target.exists():
            broken.append(link)
            continue
        if anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
            broken.append(link)
    assert not broken, f"{document.relative_to(ROOT)}: broken links {broken}"
