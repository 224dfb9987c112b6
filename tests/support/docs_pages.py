"""The project's pages as the tests that keep them true read them: prose, code, tables, sections.

The pages are README.md, docs/*.md and benchmarks/README.md, the same set scripts/check-docs checks.
What a user types is in code (inline spans and fenced blocks), so the names a test checks come from there.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def pages() -> dict[str, str]:
    """Every page's text by its path relative to the repository."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in paths}


def split(markdown: str) -> tuple[list[str], list[list[str]]]:
    """The prose lines, and the fenced code blocks (each a list of lines, its opening line first)."""
    prose: list[str] = []
    blocks: list[list[str]] = []
    fence = None
    for line in markdown.splitlines():
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
            blocks.append([line])
        elif fence is not None:
            if line.strip() and not line.strip().strip(fence[0]) and len(line.strip()) >= len(fence):
                fence = None
            else:
                blocks[-1].append(line)
        else:
            prose.append(line)
    return prose, blocks


def code_spans(line: str) -> list[str]:
    """The inline code of one prose line (a table's `\\|` read as `|`)."""
    return [match.group(2).strip().replace("\\|", "|") for match in CODE_SPAN.finditer(line)]


def code(markdown: str) -> list[tuple[str, str]]:
    """Every piece of code of a page, with the prose line it sits in ("" for a fenced block's line).

    A fenced block's continuation lines (after a trailing backslash, or indented options such as
    `    [--hosts GLOB]...`) are joined to the line they continue.
    """
    prose, blocks = split(markdown)
    found = [(span, line) for line in prose for span in code_spans(line)]
    for block in blocks:
        joined: list[str] = []
        for line in block[1:]:
            if joined and (joined[-1].endswith("\\") or re.match(r"\s+[\[-]", line)):
                joined[-1] = joined[-1].rstrip("\\") + " " + line.strip()
            else:
                joined.append(line)
        found.extend((line, "") for line in joined)
    return found


def table_first_column(markdown: str, heading: str) -> list[str]:
    """The inline code of the first column of the tables under a heading, up to the next heading."""
    names = []
    for line in section(markdown, heading).splitlines():
        if line.startswith("|") and not re.match(r"^\|[\s|:-]*$", line):
            names.extend(code_spans(line.split("|")[1]))
    return names


def section(markdown: str, heading: str) -> str:
    """The prose under a heading (its exact text after the #s), up to the next heading of its level or above."""
    lines, _ = split(markdown)
    for index, line in enumerate(lines):
        match = re.match(r"^(#{1,6}) (.*)$", line)
        if match and match.group(2).strip() == heading:
            level = len(match.group(1))
            body = []
            for rest in lines[index + 1 :]:
                following = re.match(r"^(#{1,6}) ", rest)
                if following and len(following.group(1)) <= level:
                    break
                body.append(rest)
            return "\n".join(body)
    raise LookupError(f"no heading {heading!r}")
