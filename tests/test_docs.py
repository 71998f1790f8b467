"""The README and docs/ link to what exists: every relative file link to a file of the repository, every
#anchor to a heading of its page (GitHub's slugs). Files move (issue 59 split a dozen modules); a doc
that sends a reader to a missing page or section teaches nothing. A user guide opens with what a user
does, as commands, and stays short: the figures live in docs/results.md, the history in docs/archive/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)  # not in code
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def broken_links(pages: list[Path]) -> list[str]:
    """`page: target` for every relative link whose file or anchor is missing."""
    found = []
    for page in pages:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not ours to check
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                found.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                found.append(f"{page.name}: {target} (no such heading)")
    return found


def test_every_link_of_the_readme_and_docs_reaches_a_file_and_heading():
    assert broken_links(PAGES) == []


def test_the_link_check_sees_a_missing_page_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# Title — `x/y.py`\n\n## Real text\n\n```\n# not a heading\n```\n")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#title--xypy) [ok](a.md#real-text) [gone](c.md) [no](a.md#not-a-heading) [web](https://x.y/#z)\n"
    )
    assert broken_links([tmp_path / "b.md"]) == [
        "b.md: c.md (no such file)",
        "b.md: a.md#not-a-heading (no such heading)",
    ]


GUIDE_LIMIT = 15_000  # characters: a guide a user reads through, not a lab notebook (issue 59)
GUIDES = [p for p in sorted((REPO / "docs").glob("*.md")) if p.name not in ("results.md", "architecture.md")]
FIRST_COMMANDS = 1_500  # characters: a guide's first code block starts within them


def opens_with_commands(text: str) -> bool:
    """A fenced code block starts in the page's first FIRST_COMMANDS characters."""
    fence = re.search(r"^```", text, re.M)
    return fence is not None and fence.start() < FIRST_COMMANDS


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_each_user_guide_opens_with_commands_and_fits_in_a_read(guide):
    text = guide.read_text(encoding="utf-8")
    assert len(text) <= GUIDE_LIMIT, f"{guide.name}: {len(text):,} characters, over {GUIDE_LIMIT:,}"
    assert opens_with_commands(text), f"{guide.name}: no command block in its first {FIRST_COMMANDS:,} characters"


def test_the_guide_check_sees_a_page_that_opens_with_prose_only():
    prose = "# A page\n\n" + "Words about runs. " * 100 + "\n\n```bash\nmemlm eval\n```\n"
    assert not opens_with_commands(prose)
    assert opens_with_commands("# A page\n\nWhat you do:\n\n```bash\nmemlm eval\n```\n" + prose)


def test_the_readme_is_a_first_page_that_starts_with_its_two_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 10_000, f"README.md: {len(text):,} characters, over 10,000"
    first = re.search(r"^```bash\n(.*?)^```", text, re.M | re.S)
    assert first is not None and first.start() < 200, "README.md opens with a bash block"
    commands = [line for line in first.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["bash scripts/quickstart.sh", "bash scripts/install.sh --tests && python3 -m pytest -q"]
