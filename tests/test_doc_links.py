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


def module_map(text: str) -> list[str]:
    """The paths the module map of docs/architecture.md names (the first code block under "## Layers"):
    ``pkg/sub/file.py`` per module, ``pkg/folder/`` for a folder named as a whole. An entry of several
    files (``app/train.py, play.py, eval.py``) names each, a bare later name in the first one's folder."""
    block = text.split("## Layers", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    named, package = [], ""
    for line in block.splitlines():
        if not line.strip() or line.startswith("    "):  # a description's continuation
            continue
        entry = re.split(r"\s{2,}", line.strip())[0]
        if not line.startswith(" "):
            package = entry
            continue
        first, *rest = [name.strip() for name in entry.split(",")]
        folder = first.rpartition("/")[0]
        named += [package + first] + [package + (name if "/" in name or not folder else f"{folder}/{name}")
                                      for name in rest]
    return named


def test_the_module_map_names_every_module_and_only_modules_that_exist() -> None:
    named = module_map((ROOT / "docs" / "architecture.md").read_text())
    folders = [n for n in named if n.endswith("/")]
    assert [n for n in named if not (ROOT / n).exists()] == []
    modules = sorted(str(p.relative_to(ROOT)) for pkg in ("ppo_bootstrap", "isaac_adapter")
                     for p in (ROOT / pkg).rglob("*.py") if p.name != "__init__.py")
    unnamed = [m for m in modules if m not in named and not any(m.startswith(f) for f in folders)]
    assert unnamed == []


def test_the_module_map_reader_reads_each_kind_of_entry() -> None:
    text = ("## Layers\n\n```text\npkg/\n  a.py                  one\n  app/b.py, c.py        two\n"
            "                        more of two\n  d.py, app/e.py        three\n  sub/                  all of sub\n```\n")
    assert module_map(text) == ["pkg/a.py", "pkg/app/b.py", "pkg/app/c.py", "pkg/d.py", "pkg/app/e.py", "pkg/sub/"]
