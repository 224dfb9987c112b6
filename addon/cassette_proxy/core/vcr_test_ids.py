"""Which test a VCR cassette file belongs to, as the pytest node id the proxy's test scope files recordings by.

VCR.py and pytest-recording keep one file per test, named after it: pytest-recording writes
`<module dir>/cassettes/<module>/<Class>.<test>[<params>].yaml`, so the module is the folder's name;
langchain_tests' config (`cassette_library_dir: tests/cassettes`) keeps every test's file in one folder,
`tests/cassettes/<Class>.<test>.yaml.gz`, so the module is whichever test module defines that class or
function, found by reading the test modules beside the folder. Where several modules define the name
(langchain's standard suites reuse class names for unit and integration tests), those that mention `vcr`
are the ones that record; when none or several do, the file goes to each of them, as under VCR each would
have replayed that one file. Node ids are relative to pytest's rootdir, which the import takes to be the
working folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .recording_formats import RECORDING_SUFFIXES

_DEFINITION = re.compile(rb"^(?:class|(?:async[ \t]+)?def)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
"""A top-level class or function: pytest-recording names a file after the class (`TestX.test_y`) or a function."""
_TEST_MODULE = re.compile(r"^(?:test_.*|.*_test)\.py$")
"""pytest's default `python_files`."""
_NOT_SEARCHED = frozenset({".git", ".hg", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__"})


def test_parts(file_name: str) -> tuple[str, str]:
    """(`Class` or "", `test[params]`) from a file name: `TestX.test_y[gpt-4.1].yaml.gz` → ("TestX", "test_y[gpt-4.1]").

    Dots before the parameters separate the class from the test; a parameter may hold dots of its own.
    """
    stem = file_name.removesuffix(".gz")
    for suffix in RECORDING_SUFFIXES:
        stem = stem.removesuffix(suffix)
    head, bracket, params = stem.partition("[")
    parts = head.split(".")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"{file_name} is not named after a test (<test>, <Class>.<test>, with [params])")
    return ("", parts[0] + bracket + params) if len(parts) == 1 else (parts[0], parts[1] + bracket + params)


test_parts.__test__ = False  # type: ignore[attr-defined]  # not a test to pytest


class TestModules:
    """The test modules under the working folder and the top-level names each defines, each read once."""

    __test__ = False  # not a test class to pytest

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir.resolve()
        self._names: dict[Path, tuple[frozenset[str], bool]] = {}
        self._modules: dict[Path, list[Path]] = {}

    def test_ids(self, path: Path) -> list[str]:
        """The node ids of the tests this cassette file belongs to; ValueError saying why there are none."""
        path = path.resolve()
        if not path.is_relative_to(self.rootdir):
            raise ValueError(
                f"it is outside the working folder {self.rootdir}: run the import from the folder pytest runs in, "
                "since node ids are relative to it"
            )
        class_name, test = test_parts(path.name)
        wanted = class_name or test.partition("[")[0]
        folder = path.parent
        module = folder.parent.parent / f"{folder.name}.py"  # pytest-recording: <module dir>/cassettes/<module>/
        if folder.parent.name == "cassettes" and module.is_file():
            if wanted not in self._defined(module)[0]:
                shown = module.relative_to(self.rootdir).as_posix()
                raise ValueError(f"{shown} defines no {wanted}, which the file is named after (a removed test?)")
            modules = [module]
        else:
            searched = folder.parent if folder != self.rootdir else folder
            modules = [m for m in self._modules_under(searched) if wanted in self._defined(m)[0]]
            modules = [m for m in modules if self._defined(m)[1]] or modules
            if not modules:
                where = searched.relative_to(self.rootdir).as_posix() or "."
                raise ValueError(f"no test module under {where}/ defines {wanted}, which the file is named after")
        prefix = f"::{class_name}" if class_name else ""
        return sorted(f"{m.relative_to(self.rootdir).as_posix()}{prefix}::{test}" for m in modules)

    def _modules_under(self, folder: Path) -> list[Path]:
        if folder not in self._modules:
            found = []
            for current, folders, files in os.walk(folder):
                folders[:] = sorted(f for f in folders if f not in _NOT_SEARCHED and not f.startswith("."))
                found += [Path(current) / name for name in sorted(files) if _TEST_MODULE.match(name)]
            self._modules[folder] = found
        return self._modules[folder]

    def _defined(self, module: Path) -> tuple[frozenset[str], bool]:
        """The top-level names a module defines, and whether it mentions vcr (`@pytest.mark.vcr`, `vcr_config`)."""
        if module not in self._names:
            try:
                source = module.read_bytes()
            except OSError:
                source = b""
            names = frozenset(name.decode() for name in _DEFINITION.findall(source))
            self._names[module] = (names, b"vcr" in source.lower())
        return self._names[module]
