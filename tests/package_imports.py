"""The package's import graph, read from its sources (test_layout and test_docs check it): `module_files()`, every
module and its file; `import_graph(mods)`, what each module imports anywhere in its source; `_imports`, each import
of one module (with the names it takes)."""

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "vhmine"


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package (a package is its __init__.py)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(mod: str, path: Path, mods: dict[str, Path]):
    """(target module, names imported from it or None for a plain import) for every import of `mod`."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                # `from pkg import sub` imports the submodule; `from mod import name` imports name from mod
                sub = f"{source}.{a.name}"
                yield (sub, None) if sub in mods else (source, a.name)


def _resolve(name: str, mods: dict[str, Path]) -> str:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its source (top level or inside functions)."""
    top = next(iter(mods)).split(".")[0]
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        for t, _ in _imports(mod, path, mods):
            if t == top or t.startswith(top + "."):
                target = _resolve(t, mods)
                if target and target != mod:
                    edges[mod].add(target)
    return edges
