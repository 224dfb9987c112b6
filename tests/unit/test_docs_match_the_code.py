"""The pages name only what exists: `cassette` commands and their flags, the pytest plugin's options, settings
and marker arguments, the files and tests they cite, and every module of the package in "Where things live".

The addon's `cassette_*` options are checked in the proxy's environment (tests/addon/test_documented_options.py).
"""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path

import pytest
from cassette_proxy import cli, pytest_plugin
from docs_pages import ROOT, code, code_spans, pages, section, split, table_first_column

PAGES = pages()
COMMAND = re.compile(r"(?<![\w./$-])cassette ([a-z]+)(?=[\s)\"']|$)(.*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """The `cassette` command's subparsers, built as `cassette` builds them."""
    parser = argparse.ArgumentParser(prog="cassette")
    subparsers = parser.add_subparsers(dest="subcommand")
    for module in cli.SUBCOMMANDS:
        module.register(subparsers)
    return dict(subparsers.choices)


def invocations() -> list[tuple[str, str, str, str]]:
    """(page, command, its arguments, the code they were read from) for every `cassette COMMAND ...` in code."""
    found = []
    for page, text in PAGES.items():
        for piece, _ in code(text):
            for match in COMMAND.finditer(piece):
                # The arguments stop where COMMAND's own begin (` -- `), at a shell comment or the next command.
                arguments = re.split(r"\s--\s|\s--$|\s#|;|&&|\|\s", match.group(2))[0]
                found.append((page, match.group(1), arguments, piece))
    return found


def test_every_cassette_command_and_flag_in_the_docs_exists():
    commands = subcommands()
    wrong = []
    for page, name, arguments, piece in invocations():
        if name not in commands:
            wrong.append(f"{page}: `cassette {name}` is not a command ({piece!r})")
            continue
        known = commands[name]._option_string_actions
        wrong.extend(
            f"{page}: `cassette {name}` has no {flag} ({piece!r})"
            for flag in FLAG.findall(arguments)
            if flag not in known
        )
    assert not wrong, "\n".join(wrong)


def test_the_docs_show_every_cassette_command():
    shown = {name for _, name, _, _ in invocations()}
    assert set(subcommands()) - shown == set()


class PluginOptions:
    """Stands in for pytest's parser: records what the plugin declares."""

    def __init__(self) -> None:
        self.options: set[str] = set()
        self.settings: dict[str, object] = {}

    def getgroup(self, *args: object) -> PluginOptions:
        return self

    def addoption(self, *names: str, **kwargs: object) -> None:
        self.options.update(names)

    def addini(self, name: str, help: str, type: str | None = None, default: object = None) -> None:
        self.settings[name] = default


@pytest.fixture(scope="module")
def plugin() -> PluginOptions:
    declared = PluginOptions()
    pytest_plugin.pytest_addoption(declared, pytest.PytestPluginManager())
    return declared


def test_every_pytest_option_in_the_docs_is_the_plugins(plugin):
    named = {
        (page, flag)
        for page, text in PAGES.items()
        for piece, _ in code(text)
        for flag in re.findall(r"(?<![\w-])(--cassette-[a-z-]+)", piece)
    }
    assert {(page, flag) for page, flag in named if flag not in plugin.options} == set()
    assert plugin.options - {flag for _, flag in named} == set(), "options the docs never name"


def test_every_pytest_setting_in_the_docs_is_the_plugins(plugin):
    listed = set(table_first_column(PAGES["docs/options.md"], "The pytest plugin"))
    assert listed == set(plugin.settings)
    in_ini_blocks = set()
    for text in PAGES.values():
        for block in split(text)[1]:
            if block[0].strip().endswith("ini"):
                in_ini_blocks.update(re.findall(r"^(cassette\w*)\s*=", "\n".join(block[1:]), re.MULTILINE))
    assert in_ini_blocks - set(plugin.settings) == set()


def test_the_plugin_settings_defaults_in_the_docs_are_the_plugins(plugin):
    shown = {}
    for line in section(PAGES["docs/options.md"], "The pytest plugin").splitlines():
        cells = line.split("|")[1:-1]
        if len(cells) == 3:
            for name in code_spans(cells[0]):
                shown[name] = code_spans(cells[-1])
    for name, default in plugin.settings.items():
        if default is None:
            continue  # a list setting with no default: the page says what an empty one means
        if isinstance(default, bool):
            values = [str(default).lower()]
        elif isinstance(default, list):
            values = [str(item) for item in default]
        else:
            values = [str(default)]
        assert set(values) <= set(shown[name]), (
            f"{name}: the plugin's default is {values}, the page shows {shown[name]}"
        )


def test_the_marker_arguments_in_the_docs_are_the_plugins():
    arguments = {
        name
        for text in PAGES.values()
        for call in re.findall(r"pytest\.mark\.cassette\(([^)]*)\)", text)
        for name in re.findall(r"(\w+)\s*=", call)
    }
    assert arguments and arguments <= set(pytest_plugin.MARKER_OPTIONS)


def _generated() -> list[str]:
    """What .gitignore says a run writes (`/benchmarks/results/`): named by the docs, absent from a checkout."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return [line.strip("/") for line in lines if line.startswith("/")]


def test_every_repository_path_in_the_docs_exists():
    missing = []
    for page, text in PAGES.items():
        for piece, line in code(text):
            if not line or not re.match(r"^(addon|tests|benchmarks|scripts|docs|\.ci)/[\w./-]*$", piece):
                continue
            if not (ROOT / piece).exists() and not any(piece.startswith(g) for g in _generated()):
                missing.append(f"{page}: {piece}")
    assert not missing, "\n".join(missing)


TEST_FILE = re.compile(r"^(tests/[\w/]+/)?(test_\w+\.py)(?:::(\w+))?")


TEST_FILES = {path.name: path for path in sorted((ROOT / "tests").rglob("test_*.py"))}


def _test_file(folder: str | None, name: str) -> Path | None:
    if folder:
        return ROOT / folder / name if (ROOT / folder / name).is_file() else None
    return TEST_FILES.get(name)


@functools.cache
def _defines(path: Path, name: str) -> bool:
    return re.search(rf"^\s*(async )?def {name}\(", path.read_text(encoding="utf-8"), re.MULTILINE) is not None


def test_every_test_the_docs_cite_as_proof_exists():
    wrong = []
    for page, text in PAGES.items():
        for line in split(text)[0]:
            current = None  # a `::name` span refers to the last file of its line
            for match in re.finditer(r"`([^`]+)`", line):
                span = match.group(1)
                cited = TEST_FILE.match(span)
                if cited:
                    current = _test_file(cited.group(1), cited.group(2))
                    if current is None:
                        wrong.append(f"{page}: no test file {span}")
                    name = cited.group(3)
                elif span.startswith("::") and current is not None:
                    name = span[2:]
                else:
                    continue
                if current is not None and name and not _defines(current, name):
                    wrong.append(f"{page}: no {name} in {current.relative_to(ROOT)}")
    assert not wrong, "\n".join(wrong)


LAYERS = {"core": "`core/`: pure, no mitmproxy", "proxy": "`proxy/`: inside mitmdump", "launch": "`launch/`: the user's environment", "viewer": "`viewer/`: what `cassette view` serves and exports", "cli": "`cli/`: one module per command"}  # fmt: skip


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_where_things_live_names_every_module_of_each_layer(layer):
    """A module added (or removed) without its line in docs/architecture.md fails here, naming it."""
    folder = ROOT / "addon" / "cassette_proxy" / layer
    suffixes = (".py", ".cjs", ".html", ".css", ".js")
    # Modules in the layer's subpackages by their path in it (`keys/key.py`); a table row names each in backticks.
    modules = {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.suffix in suffixes and path.name != "__init__.py" and "__pycache__" not in path.parts
    }
    text = section(PAGES["docs/architecture.md"], LAYERS[layer])
    named = set(re.findall(r"^\| `([\w./]+\.(?:py|cjs|html|css|js))` \|", text, re.MULTILINE))
    named |= {m for m in re.findall(r"`([\w./]+\.(?:py|cjs|html|css|js))`", text) if m in modules}
    assert (sorted(modules - named), sorted(named - modules)) == ([], []), "(not on the page, not in the package)"
