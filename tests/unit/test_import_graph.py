"""The package's import graph: no cycle, no import hidden in a function to get round one, no folder past about
twenty modules (docs/architecture.md, issue 34)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "addon" / "cassette_proxy"
MAX_MODULES = 20


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, is_package: bool, body: list[ast.stmt], modules: dict) -> set[str]:
    """The package's modules `body` imports when it runs (blocks under `if TYPE_CHECKING:` never run)."""
    out: set[str] = set()
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                out |= _imports(module, is_package, block, modules)
            for handler in getattr(node, "handlers", []):
                out |= _imports(module, is_package, handler.body, modules)
        elif isinstance(node, ast.ImportFrom):
            target = _target(module, is_package, node)
            for alias in node.names:
                name = f"{target}.{alias.name}"
                out.add(name if name in modules else target)
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
    return {name for name in out if name in modules and name != module}


def test_no_module_imports_the_package_inside_a_function():
    """A function-level import of our own code is how a cycle hides: each module imports what it needs at its top."""
    hidden = []
    for path, _ in _modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (
                        inner.level or (inner.module or "").startswith("cassette_proxy")
                    ):
                        hidden.append(f"{path.relative_to(PACKAGE)}:{inner.lineno} in {node.name}()")
    assert hidden == []


def test_the_import_graph_has_no_cycle():
    modules = _modules()
    graph = {
        module: _imports(module, is_package, ast.parse(path.read_text(encoding="utf-8")).body, modules)
        for module, (path, is_package) in modules.items()
    }
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    cycles = []

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append(" -> ".join([*path[path.index(imported) :], imported]))
            elif imported not in state:
                walk(imported, [*path, imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def test_no_folder_of_the_package_holds_more_than_about_twenty_modules():
    crowded = {
        folder.relative_to(PACKAGE).as_posix() or ".": count
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES
    }
    assert crowded == {}
