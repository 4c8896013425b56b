"""Every relative link of the README, BENCHMARKS.md and the docs/ pages names a file that exists, and
its #anchor a heading of that file (GitHub's anchor rule: lower case, punctuation dropped, spaces to -)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code holds no links
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        dest = page.parent / path if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor}")
    return broken


def test_every_relative_link_resolves() -> None:
    assert all(page.exists() for page in PAGES)
    assert {page: broken_links(page) for page in PAGES if broken_links(page)} == {}


def test_a_broken_link_is_found(tmp_path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading) [gone](missing.md) [bad](there.md#nope) `[x](y)`\n"
                    "```\n[in code](nowhere.md)\n```\n[web](https://example.com)\n")
    assert broken_links(page) == ["missing.md: no such file", "there.md#nope: no heading #nope"]
