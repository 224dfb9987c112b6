"""scripts/check-docs: relative links and #anchors resolve, with GitHub's anchor names; code is not prose."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-docs"


def _load_checker():
    loader = importlib.machinery.SourceFileLoader("check_docs", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("check_docs", loader))
    loader.exec_module(module)
    return module


check_docs = _load_checker()


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The key", "the-key"),
        ("Changing the key settings: `cassette rekey`", "changing-the-key-settings-cassette-rekey"),
        ("Redaction at write time (`cassette_redact`)", "redaction-at-write-time-cassette_redact"),
        ("Earlier (issues 5–9)", "earlier-issues-59"),
        ("Node (node:test, Jest, Vitest)", "node-nodetest-jest-vitest"),
        ("See [the key](key.md) — why", "see-the-key--why"),
        ("**Bold** and *stress*", "bold-and-stress"),
        ("Straße über 2×", "straße-über-2"),
    ],
)
def test_headings_get_githubs_anchor_names(heading, anchor):
    assert check_docs.slug(heading) == anchor


def test_repeated_headings_are_numbered_and_headings_in_code_are_not_headings():
    page = '# Usage\n## Usage\n```ini\n# pytest.ini\n```\n### Usage ##\n<a id="kept"></a>\n'
    assert check_docs.anchors(page) == {"usage", "usage-1", "usage-2", "kept"}


def _fixture(root: Path) -> Path:
    (root / "docs").mkdir()
    (root / "img.png").write_bytes(b"\x89PNG")
    (root / "README.md").write_text("# Top\n\nSee [the key](docs/key.md#what-is-keyed).\n", encoding="utf-8")
    (root / "docs" / "key.md").write_text("# The key\n\n## What is keyed\n\n## What is keyed\n", encoding="utf-8")
    page = root / "docs" / "page.md"
    page.write_text(
        "# Page\n"
        "[fine](key.md#what-is-keyed-1) [up](../README.md#top) [here](#page) [folder](../docs) ![img](../img.png)\n"
        "[web](https://example.com/nowhere.md#x) [mail](mailto:a@example.com)\n"
        "[gone](missing.md) and [bad anchor](key.md#what-is-keyd)\n"
        "`[in code](missing.md)`\n"
        "```md\n[in a block](missing.md)\n```\n"
        '[self](#nowhere) [titled](key.md#the-key "The key")\n'
        "[ref]: ../nothing-here.md\n",
        encoding="utf-8",
    )
    return page


def test_broken_links_and_anchors_are_listed_with_their_lines(tmp_path):
    page = _fixture(tmp_path)
    problems = check_docs.check_page(page, {})
    assert problems == [
        f"{page}:4: missing.md: no such file 'missing.md'",
        f"{page}:4: key.md#what-is-keyd: no heading with the anchor #what-is-keyd in key.md",
        f"{page}:9: #nowhere: no heading with the anchor #nowhere in this page",
        f"{page}:10: ../nothing-here.md: no such file '../nothing-here.md'",
    ]
    assert check_docs.check_page(tmp_path / "README.md", {}) == []


def test_the_command_exits_1_listing_every_broken_link_and_0_when_all_resolve(tmp_path):
    page = _fixture(tmp_path)
    broken = subprocess.run([sys.executable, SCRIPT, page], capture_output=True, text=True)
    assert broken.returncode == 1
    assert "4 broken link(s) in 1 page(s)" in broken.stderr
    assert "key.md#what-is-keyd" in broken.stderr
    clean = subprocess.run([sys.executable, SCRIPT, tmp_path / "README.md"], capture_output=True, text=True)
    assert (clean.returncode, clean.stderr) == (0, "")
    missing = subprocess.run([sys.executable, SCRIPT, tmp_path / "absent.md"], capture_output=True, text=True)
    assert missing.returncode == 2


def test_the_projects_own_pages_have_no_broken_link():
    result = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
