"""Which tests a VCR cassette file belongs to, as the pytest node ids the proxy's test scope files recordings by.

VCR.py and pytest-recording keep one file per test, named after it: pytest-recording writes
`<module dir>/cassettes/<module>/<Class>.<test>[<params>].yaml`, so the module is the folder's name;
langchain_tests' config (`cassette_library_dir: tests/cassettes`) keeps every test's file in one folder,
`tests/cassettes/<Class>.<test>.yaml.gz`, so the module is whichever test module defines that class or
function, found by reading the test modules beside the folder. A test may name its file itself
(`@pytest.mark.default_cassette("test_web_search.yaml.gz")`, which langchain-openai's parametrized tests
share) or adds to its own (`@pytest.mark.vcr("shared.yaml")`): every test that names it owns it, and so
does the test its name spells unless that test renames its own (a parametrized `test_web_search` and a
sibling `test_web_search_async` naming its file both replayed it under VCR, so each gets it). Where several modules define a name (langchain's standard
suites reuse class names for unit and integration tests), those that mention `vcr` are the ones that
record; when none or several do, the file goes to each of them, as under VCR each would have replayed it.

A file named without parameters serves every parametrization of its test, and only pytest knows those:
given the suite's node ids (`pytest --collect-only -q`), each file goes to every collected test it
serves, inherited test methods included; without them, to the test its name spells. Node ids are
relative to pytest's rootdir, which the import takes to be the working folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .recording_formats import RECORDING_SUFFIXES

_DEFINITION = re.compile(rb"^(?:class|(?:async[ \t]+)?def)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
"""A top-level class or function: pytest-recording names a file after the class (`TestX.test_y`) or a function."""
_NAMED = re.compile(rb"""(default_cassette|mark\.vcr)\(\s*["']([^"']+)["']""")
"""`default_cassette("name")` renames a test's file; `vcr("name", ...)` adds files to its own."""
_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_CLASS = re.compile(rb"^class[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_IMPORTED = re.compile(rb"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
"""`from tests.x import TestX`: a test class imported into another module is collected there too."""
_TEST_MODULE = re.compile(r"^(?:test_.*|.*_test)\.py$")
"""pytest's default `python_files`."""
_NOT_SEARCHED = frozenset({".git", ".hg", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__"})
_UNSAFE_IN_NAMES = re.compile(r"""[<>?%*:|"'/\\]""")
"""What pytest-recording replaces by `-` in a file name it makes from a test's name."""


def _stem(file_name: str) -> str:
    stem = file_name.removesuffix(".gz")
    for suffix in RECORDING_SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem


def test_parts(file_name: str) -> tuple[str, str]:
    """(`Class` or "", `test[params]`) from a file name: `TestX.test_y[gpt-4.1].yaml.gz` → ("TestX", "test_y[gpt-4.1]").

    Dots before the parameters separate the class from the test; a parameter may hold dots of its own.
    """
    head, bracket, params = _stem(file_name).partition("[")
    parts = head.split(".")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"{file_name} is not named after a test (<test>, <Class>.<test>, with [params])")
    return ("", parts[0] + bracket + params) if len(parts) == 1 else (parts[0], parts[1] + bracket + params)


test_parts.__test__ = False  # type: ignore[attr-defined]  # not a test to pytest


@dataclass(frozen=True)
class _Module:
    names: frozenset[str]
    """The top-level classes and functions it defines."""
    imported: frozenset[str]
    """The names it imports with `from ... import`."""
    mentions_vcr: bool
    named: dict[str, list[tuple[str, str]]]
    """`default_cassette` file stems → (class or "", function) of every test that names them."""
    renamed: frozenset[tuple[str, str]]
    """(class or "", function) of the tests that name their file themselves: a file their name spells is not theirs."""


@dataclass(frozen=True)
class _Owner:
    module: Path
    class_name: str
    function: str
    params: str | None
    """`[...]` the file's name gives, "" for none; None: every parametrization (the test named its file)."""


class TestModules:
    """The test modules under the working folder, each read once, and the suite's node ids when given."""

    __test__ = False  # not a test class to pytest

    def __init__(self, rootdir: Path, collected: Iterable[str] | None = None) -> None:
        self.rootdir = rootdir.resolve()
        self.collected = None if collected is None else [line.strip() for line in collected if "::" in line]
        self._parsed: dict[Path, _Module] = {}
        self._modules: dict[Path, list[Path]] = {}

    def test_ids(self, path: Path) -> list[str]:
        """The node ids of the tests this cassette file (its resolved path) belongs to, sorted; ValueError saying why
        there are none."""
        if not path.is_relative_to(self.rootdir):
            raise ValueError(
                f"it is outside the working folder {self.rootdir}: run the import from the folder pytest runs in, "
                "since node ids are relative to it"
            )
        owners = self._owners(path)
        if self.collected is None:
            return sorted({self._node_id(owner) for owner in owners})
        found = sorted({node for node in self.collected for owner in owners if self._serves(owner, node)})
        if not found:
            shown = ", ".join(sorted({self._node_id(owner) for owner in owners}))
            raise ValueError(f"no collected test is {shown}, which the file is named after (a removed test?)")
        return found

    def _owners(self, path: Path) -> list[_Owner]:
        try:
            class_name, test = test_parts(path.name)
        except ValueError as e:  # a name only a `default_cassette` gives
            class_name, test, not_a_test = "", "", str(e)
        function, bracket, params = test.partition("[")
        folder = path.parent
        layout = folder.parent.parent / f"{folder.name}.py"  # pytest-recording: <module dir>/cassettes/<module>/
        if folder.parent.name == "cassettes" and layout.is_file():
            modules, where = [layout], layout.relative_to(self.rootdir).as_posix()
        else:
            searched = folder.parent if folder != self.rootdir else folder
            modules = self._modules_under(searched)
            where = f"{searched.relative_to(self.rootdir).as_posix() or '.'}/"
        stem, wanted = _stem(path.name), class_name or function
        parsed = [(m, self._parsed_module(m)) for m in modules]
        named = [_Owner(m, *test, None) for m, module in parsed for test in module.named.get(stem, [])]
        if not test:
            if not named:
                raise ValueError(f"{not_a_test}, and no test module in {where} names it with default_cassette")
            return named
        candidates = [
            (m, module.mentions_vcr)
            for m, module in parsed
            if wanted in module.names and (class_name, function) not in module.renamed
        ]
        defining = [m for m, vcr in candidates if vcr] or [m for m, _ in candidates]
        if not defining and not named:
            raise ValueError(f"no test module in {where} defines {wanted}, which the file is named after")
        taken = {(o.module, o.class_name, o.function) for o in named}
        spelled = [_Owner(m, class_name, function, bracket + params) for m in defining]
        return named + [o for o in spelled if (o.module, o.class_name, o.function) not in taken]

    def _node_id(self, owner: _Owner) -> str:
        scope = f"::{owner.class_name}" if owner.class_name else ""
        return f"{owner.module.relative_to(self.rootdir).as_posix()}{scope}::{owner.function}{owner.params or ''}"

    def _serves(self, owner: _Owner, node: str) -> bool:
        """The collected node id is a test that replayed this file: the owner's test, any parametrization of it
        when the file names none, else the parametrization the file names (as pytest-recording spells it)."""
        module, _, rest = node.partition("::")
        *classes, name = rest.split("::")
        if (classes[-1] if classes else "") != owner.class_name:
            return False
        if module != owner.module.relative_to(self.rootdir).as_posix() and not (
            # The class imported into another module (langchain-openai's `test_responses_standard.py` imports
            # `TestOpenAIStandard`): collected there as well, and replayed the same file under VCR.
            owner.class_name and owner.class_name in self._parsed_module(self.rootdir / module).imported
        ):
            return False
        function, bracket, params = name.partition("[")
        if function != owner.function:
            return False
        return not owner.params or _UNSAFE_IN_NAMES.sub("-", bracket + params) == owner.params

    def _modules_under(self, folder: Path) -> list[Path]:
        if folder not in self._modules:
            found = []
            for current, folders, files in os.walk(folder):
                folders[:] = sorted(f for f in folders if f not in _NOT_SEARCHED and not f.startswith("."))
                found += [Path(current) / name for name in sorted(files) if _TEST_MODULE.match(name)]
            self._modules[folder] = found
        return self._modules[folder]

    def _parsed_module(self, module: Path) -> _Module:
        if module not in self._parsed:
            try:
                source = module.read_bytes()
            except OSError:
                source = b""
            self._parsed[module] = _Module(
                frozenset(name.decode() for name in _DEFINITION.findall(source)),
                frozenset(name.decode() for names in _IMPORTED.findall(source) for name in re.findall(rb"\w+", names)),
                b"vcr" in source.lower(),
                *_named_cassettes(source),
            )
        return self._parsed[module]


def _named_cassettes(source: bytes) -> tuple[dict[str, list[tuple[str, str]]], frozenset[tuple[str, str]]]:
    """`@pytest.mark.default_cassette("name")` and `@pytest.mark.vcr("name")` → every test they decorate (the next
    `def`, in the class before it when indented); and the tests whose own file `default_cassette` renames."""
    named: dict[str, list[tuple[str, str]]] = {}
    renamed = set()
    for mark in _NAMED.finditer(source):
        test = _DEF.search(source, mark.end())
        if test is None:
            continue
        classes = [c.group(1) for c in _CLASS.finditer(source, 0, test.start())] if test.group(1) else []
        owner = (classes[-1].decode() if classes else "", test.group(2).decode())
        tests = named.setdefault(_stem(mark.group(2).decode().rpartition("/")[2]), [])
        if owner not in tests:
            tests.append(owner)
        if mark.group(1) == b"default_cassette":
            renamed.add(owner)
    return named, frozenset(renamed)
