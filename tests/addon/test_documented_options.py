"""The pages name only the addon's real options, and docs/options.md lists every one of them.

The options are read from the addon as mitmdump loads it (`addon/cassette.py`'s `addons`, in mitmproxy's test
context), so the check holds however the addon declares them.
"""

from __future__ import annotations

import re

import cassette
import pytest
from docs_pages import code, code_spans, pages, section, table_first_column
from mitmproxy.test import taddons

PAGES = pages()


@pytest.fixture(scope="module")
def declared() -> set[str]:
    with taddons.context(*cassette.addons) as tctx:
        names = tctx.options.keys()  # an OptManager is not iterable itself
        return {name for name in names if name.startswith("cassette_")}


def test_the_options_page_lists_every_option_the_addon_declares_and_no_other(declared):
    listed = table_first_column(PAGES["docs/options.md"], "The addon's options")
    assert sorted(set(listed) - declared) == []
    assert sorted(declared - set(listed)) == [], "declared but not on docs/options.md"


def test_every_option_set_in_the_docs_is_declared(declared):
    """`--set cassette_x=…`, `cassette_x=…` in commands, and the README's and the options page's tables."""
    named = set()
    for page, text in PAGES.items():
        for piece, _ in code(text):
            named.update((page, name) for name in re.findall(r"(?<![\w-])(cassette_[a-z_]+)=", piece))
    named.update(("README.md", name) for name in table_first_column(PAGES["README.md"], "Main options"))
    named.update(
        ("docs/options.md", name) for name in table_first_column(PAGES["docs/options.md"], "Where each option is set")
    )
    assert len(named) > 20
    assert sorted((page, name) for page, name in named if name not in declared) == []


def test_the_defaults_on_the_options_page_are_the_addons(declared, monkeypatch):
    """Each row's last cell shows the default the addon declares (a value, or every item of a short list)."""
    for variable in ("CASSETTE_MODE", "CASSETTE_DIR", "CASSETTE_REPLAY_TIMING", "CASSETTE_CONTROL_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    with taddons.context(*cassette.addons) as tctx:
        defaults = {name: tctx.options.default(name) for name in declared}
    rows = {}
    for line in section(PAGES["docs/options.md"], "The addon's options").splitlines():
        cells = line.split("|")[1:-1]
        if len(cells) == 3 and code_spans(cells[0]):
            rows[code_spans(cells[0])[0]] = code_spans(cells[-1])
    wrong = []
    for name, default in sorted(defaults.items()):
        shown = [str(item) for item in default] if isinstance(default, list | tuple) else [str(default)]
        if default in (None, "", []) or len(shown) > 5:
            continue  # no default to show, or a long list the page summarises in words
        if not set(shown) <= set(rows[name]):
            wrong.append(f"{name}: the addon's default is {shown}, the page shows {rows[name]}")
    assert not wrong, "\n".join(wrong)
