"""The package's layout: no import cycles (imports inside functions included), none between folders (the stages,
and the rooms inside a stage), a folder per stage whose `__init__` says what it reads and writes, only public
names imported across packages, the index's files named in vhmine.index alone, the miner's engines siblings over
a join that knows no runs, the shared vocabulary at the top, the thin app entry, and ruff's checks."""

import ast
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from package_imports import _imports, _resolve, import_graph, module_files

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "vhmine"
STAGES = (
    "data",
    "index",
    "embed",
    "mine",
    "store",
    "curate",
    "models",
    "manipulate",
    "export",
    "formats",
    "eval",
    "cli",
    "apps",
)


def package_of(mod: str, mods: dict[str, Path]) -> str:
    """The package a module belongs to: the folder its file is in (a package's __init__ is its package)."""
    return mod if mods[mod].name == "__init__.py" else mod.rpartition(".")[0]


def private_imports(mods: dict[str, Path]) -> list[str]:
    """Imports that reach into another package for a private module or a private name: across packages
    (a package and its subpackages are packages of their own) only public names of public modules."""
    top = next(iter(mods)).split(".")[0]
    bad = []
    for mod, path in mods.items():
        for t, name in _imports(mod, path, mods):
            if not (t == top or t.startswith(top + ".")):
                continue
            target = _resolve(t, mods)
            if not target or target == mod or package_of(target, mods) == package_of(mod, mods):
                continue

            def private(part: str) -> bool:
                return part.startswith("_") and not part.endswith("__")  # __version__ is public

            if any(private(p) for p in target.split(".")) or (name and private(name)):
                bad.append(f"{mod} imports {target}{'.' + name if name else ''}")
    return sorted(set(bad))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")
    (pkg / "c.py").write_text("from . import a\nx = 1\n")
    (pkg / "d.py").write_text("from pkg import c\n")
    mods = module_files(pkg)
    assert cycles(import_graph(mods)) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    (pkg / "c.py").write_text("x = 1\n")
    assert cycles(import_graph(module_files(pkg))) == []


def test_the_package_has_no_import_cycles():
    mods = module_files()
    found = cycles(import_graph(mods))
    named = ["  " + " <-> ".join(str(mods[m].relative_to(REPO)) for m in comp) for comp in found]
    assert not found, "import cycles (move the shared piece below both sides):\n" + "\n".join(named)


def folder_of(mod: str, mods: dict[str, Path]) -> str:
    """A module's folder under the package (vhmine.curate for vhmine.curate.derived); a top-level module is its own."""
    parts = mod.split(".")
    folder = ".".join(parts[:2])
    return folder if len(parts) > 2 or mods.get(folder, Path()).name == "__init__.py" else mod


def folder_graph(mods: dict[str, Path], edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph folded to folders and top-level modules (the package itself left out: it only holds
    `__version__`)."""
    top = next(iter(mods)).split(".")[0]
    out: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            fa, fb = folder_of(a, mods), folder_of(b, mods)
            if fa != fb and top not in (fa, fb):
                out[fa].add(fb)
    return out


def test_folder_fold_finds_a_cycle_between_folders_that_no_module_cycle_shows(tmp_path):
    # a.x -> b.y and b.z -> a.w: no module imports itself back, but folder a and folder b do
    pkg = tmp_path / "pkg"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from pkg.b import y\n")
    (pkg / "b" / "y.py").write_text("")
    (pkg / "b" / "z.py").write_text("from pkg.a import w\n")
    (pkg / "a" / "w.py").write_text("")
    mods = module_files(pkg)
    assert cycles(import_graph(mods)) == []
    assert cycles(folder_graph(mods, import_graph(mods))) == [["pkg.a", "pkg.b"]]


def test_no_folder_imports_a_folder_that_imports_it_back():
    mods = module_files()
    edges = import_graph(mods)
    found = cycles(folder_graph(mods, edges))
    lines = []
    for comp in found:
        lines.append("  " + " <-> ".join(comp))
        lines += [
            f"    {a} -> {b}"
            for a in sorted(edges)
            for b in sorted(edges[a])
            if folder_of(a, mods) in comp and folder_of(b, mods) in comp and folder_of(a, mods) != folder_of(b, mods)
        ]
    assert not found, "folders in an import cycle (move the shared piece into vhmine/rules or below):\n" + "\n".join(
        lines
    )


def nested_folder_graph(mods: dict[str, Path], edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Inside each stage's folder (test_no_folder_imports_a_folder_that_imports_it_back folds the stages
    themselves), the import graph folded to each module's own folder (its deepest package); the __init__ of a
    package with subpackages (its public face, which gathers names from them) stands as a node of its own."""
    has_subpackages = {package_of(m, mods).rpartition(".")[0] for m, p in mods.items() if p.name == "__init__.py"}

    def node(m: str) -> str:
        return m + ".__init__" if m in has_subpackages and mods[m].name == "__init__.py" else package_of(m, mods)

    out: dict[str, set[str]] = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            same_stage = a.split(".")[:2] == b.split(".")[:2] and min(a.count("."), b.count(".")) >= 1
            na, nb = node(a), node(b)
            if same_stage and na != nb:
                out[na].add(nb)
    return out


def test_nested_fold_finds_a_cycle_between_a_subfolder_and_its_parent(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "run" / "ray").mkdir(parents=True)
    for init in (pkg, pkg / "run", pkg / "run" / "ray"):
        (init / "__init__.py").write_text("")
    (pkg / "run" / "job.py").write_text("from pkg.run.ray import engine\n")
    (pkg / "run" / "folder.py").write_text("")
    (pkg / "run" / "ray" / "engine.py").write_text("def f():\n    from pkg.run import folder\n")
    mods = module_files(pkg)
    assert cycles(import_graph(mods)) == []
    assert cycles(nested_folder_graph(mods, import_graph(mods))) == [["pkg.run", "pkg.run.ray"]]
    (pkg / "run" / "ray" / "engine.py").write_text("")
    assert cycles(nested_folder_graph(module_files(pkg), import_graph(module_files(pkg)))) == []


def test_no_subfolder_imports_a_folder_that_imports_it_back():
    # mine.join below mine.ray below the run at mine/; curate's groups likewise: each folder a layer
    mods = module_files()
    edges = import_graph(mods)
    found = cycles(nested_folder_graph(mods, edges))
    assert not found, "folders in an import cycle (move the shared piece below both):\n" + "\n".join(
        "  " + " <-> ".join(comp) for comp in found
    )


def test_private_import_finder_sees_private_modules_and_names_across_packages(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    for init in (pkg, pkg / "a", pkg / "b"):
        (init / "__init__.py").write_text("")
    (pkg / "a" / "_base.py").write_text("_x = 1\ny = 2\n")
    (pkg / "a" / "face.py").write_text("from pkg.a._base import _x, y\n")  # inside its package: fine
    (pkg / "b" / "use.py").write_text("from pkg.a._base import y\nfrom pkg.a.face import _x\n")
    (pkg / "b" / "ok.py").write_text("from pkg.a import face\nfrom .use import _helper\n")
    assert private_imports(module_files(pkg)) == ["pkg.b.use imports pkg.a._base.y", "pkg.b.use imports pkg.a.face._x"]


def test_across_packages_only_public_names_are_imported():
    bad = private_imports(module_files())
    assert not bad, "private modules or names imported from another package (make them public):\n" + "\n".join(bad)


def _declared_all(path: Path) -> set[str] | None:
    """The names a module's `__all__ = [...]` lists, or None when it has none."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return None


def face_bypasses(mods: dict[str, Path]) -> list[str]:
    """Imports that reach past another package's face. A module imports another module of the package only when
    that one is in the importer's own package, is a package's `__init__` (its face), or lies directly under the
    top package (the shared vocabulary: errors, config, files, ...); and of a face that declares `__all__` it
    imports only the names listed there (a package's own modules, which the face gathers from, aside)."""
    top = next(iter(mods)).split(".")[0]
    bad = []
    for mod, path in mods.items():
        for t, name in _imports(mod, path, mods):
            if not (t == top or t.startswith(top + ".")):
                continue
            target = _resolve(t, mods)
            if not target or target == mod or target.count(".") == 0:
                continue
            if mods[target].name == "__init__.py":
                listed = _declared_all(mods[target])
                if name and listed is not None and name not in listed and not mod.startswith(target + "."):
                    bad.append(f"{mod} imports {target}.{name}, which its face does not list in __all__")
            elif target.count(".") > 1 and package_of(target, mods) != package_of(mod, mods):
                bad.append(f"{mod} imports {target}{'.' + name if name else ''}")
    return sorted(set(bad))


def test_face_finder_sees_imports_past_a_face(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "a" / "room").mkdir(parents=True)
    (pkg / "b").mkdir()
    for init in (pkg, pkg / "b"):
        (init / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("from pkg.a.job import run\n\n__all__ = ['run']\n")
    (pkg / "a" / "room" / "__init__.py").write_text("from pkg.a.room.part import piece\n")
    (pkg / "a" / "job.py").write_text("from pkg.a.room import piece\nfrom pkg.a import helper\nrun = 1\n")
    (pkg / "a" / "helper.py").write_text("from pkg.a.room.part import piece\n")  # past its own room's face
    (pkg / "a" / "room" / "part.py").write_text("from pkg import errors\npiece = 1\n")
    (pkg / "errors.py").write_text("")
    (pkg / "b" / "use.py").write_text("from pkg.a import run\nfrom pkg.a.job import run as r\nfrom pkg.a import job\n")
    (pkg / "b" / "more.py").write_text("from pkg.a import helper_name\nfrom pkg.errors import x\n")
    assert face_bypasses(module_files(pkg)) == [
        "pkg.a.helper imports pkg.a.room.part.piece",
        "pkg.b.more imports pkg.a.helper_name, which its face does not list in __all__",
        "pkg.b.use imports pkg.a.job",
        "pkg.b.use imports pkg.a.job.run",
    ]


def test_imports_go_through_package_faces():
    # a package's __init__ is its interface (scikit-learn's neighbors/: _base.py behind __init__): moving a module
    # inside a package breaks no caller outside it. Tests import internals freely; the package does not.
    bad = face_bypasses(module_files())
    assert not bad, "imports past another package's face (import from the package, and list the name there):\n" + (
        "\n".join(bad)
    )


def test_a_folder_per_stage_each_saying_what_it_reads_and_writes():
    for stage in STAGES:
        init = PACKAGE / stage / "__init__.py"
        assert init.is_file(), f"vhmine/{stage}/ is not a package"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc) > 80, f"vhmine/{stage}/__init__.py needs a docstring saying what the stage reads and writes"
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, f"{len(top)} modules directly under vhmine/: {top}"
    # a module inside a stage's folder carries no stage prefix
    prefixed = [str(p.relative_to(REPO)) for stage in STAGES for p in (PACKAGE / stage).glob(f"{stage}_*.py")]
    assert not prefixed, prefixed


def test_no_submodule_hides_a_name_its_package_exports():
    # `from vhmine import curate as C; C.next_item(...)` must stay the function even once a module of that name
    # would have been imported, and the face finder reads `from pkg import name` as the submodule when there is
    # one: so no submodule of any package may share a name its package exports
    code = (
        "import importlib, inspect, pathlib, pkgutil\n"
        "import vhmine\n"
        "root = pathlib.Path(vhmine.__file__).parent\n"
        "bad = []\n"
        "for init in sorted(root.rglob('__init__.py')):\n"
        "    if 'migrations' in init.parts:\n"
        "        continue\n"
        "    pkg = importlib.import_module('.'.join(('vhmine', *init.parent.relative_to(root).parts)))\n"
        "    exported = {n for n, o in vars(pkg).items() if not n.startswith('_') and not inspect.ismodule(o)}\n"
        "    listed = getattr(pkg, '__all__', ())  # a face's names loaded on first use count too (not its rooms)\n"
        "    exported |= {n for n in listed if not inspect.ismodule(getattr(pkg, n, None))}\n"
        "    bad += [pkg.__name__ + '.' + m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name in exported]\n"
        "    for name in listed:  # every name a face lists is there\n"
        "        if not hasattr(pkg, name):\n"
        "            bad.append(pkg.__name__ + '.' + name + ' (listed, missing)')\n"
        "print('BAD', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert "BAD []" in out, out


def test_the_top_level_app_entry_runs_the_packaged_app(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("VHMINE_DB", str(tmp_path / "store.db"))
    from vhmine.store import open_store

    open_store(str(tmp_path / "store.db")).close()
    at = AppTest.from_file(str(REPO / "apps" / "curate.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["vhmine curation"]
    assert at.text_input(key="token") is not None


def test_test_files_have_unique_names():
    # pytest imports each test file by its file name alone (no __init__.py under tests/): two of one name in
    # different folders would stop the whole run at collection
    seen: dict[str, list[str]] = defaultdict(list)
    for path in (REPO / "tests").rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(REPO)))
    assert not {n: p for n, p in seen.items() if len(p) > 1}


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for t in edges.get(todo.pop(), ()):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def test_the_local_and_ray_runs_are_siblings_over_a_join_that_knows_no_runs():
    edges = import_graph(module_files())
    local, ray = _reach(edges, "vhmine.mine.local_run"), _reach(edges, "vhmine.mine.ray_run")
    assert not {m for m in local if m == "vhmine.mine.ray_run" or m.startswith("vhmine.mine.ray.")}, local
    assert "vhmine.mine.local_run" not in ray
    # the join: no run, no folder of runs, no Ray, no index files; only its own modules and the vocabulary
    for mod in (m for m in module_files() if m.startswith("vhmine.mine.join")):
        outside = {t for t in _reach(edges, mod) if t.startswith("vhmine.") and not t.startswith("vhmine.mine.join")}
        vocabulary = {"vhmine", "vhmine.errors", "vhmine.config", "vhmine.files", "vhmine.images"}
        assert outside <= vocabulary, (mod, outside - vocabulary)
    # the Ray engine reads an index through vhmine.index, and knows no run folder
    for mod in (m for m in module_files() if m.startswith("vhmine.mine.ray.")):
        above = {
            t
            for t in _reach(edges, mod)
            if t.startswith("vhmine.mine.") and not t.startswith(("vhmine.mine.ray.", "vhmine.mine.join"))
        }
        assert not above, (mod, above)


def test_no_module_outside_the_index_room_names_an_index_file():
    # manifest.json, images.parquet and the vector files are read and written through vhmine.index alone
    # (status and export name manifest.json for their own records: an export's manifest, the walk for records)
    names = ('"images.parquet"', '"clip.faiss"', '"dino.faiss"', '"skipped.csv"', "IMAGES", "VECTOR_FILES")
    bad = []
    for mod, path in module_files().items():
        if mod.startswith("vhmine.index"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and f'"{node.value}"' in names:
                bad.append(f"{mod}: {node.value}")
            if isinstance(node, ast.alias) and node.name in names:
                bad.append(f"{mod} imports {node.name}")
    assert not bad, bad


def test_ruff_finds_nothing_and_the_tree_is_formatted():
    # scripts/test.sh runs the same two commands before pytest; here a failure names the files
    for args in (["check", "--quiet", "."], ["format", "--check", "--quiet", "."]):
        run = subprocess.run([sys.executable, "-m", "ruff", *args], capture_output=True, text=True, cwd=REPO)
        assert run.returncode == 0, f"ruff {' '.join(args)}:\n{run.stdout}{run.stderr}"


def test_every_ruff_exception_says_why():
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)

    lines = (REPO / "pyproject.toml").read_text().splitlines()
    lint = tomllib.loads("\n".join(lines))["tool"]["ruff"]["lint"]
    ignored = [*lint.get("ignore", []), *lint.get("per-file-ignores", {})]
    assert len(ignored) <= 6, ignored  # a short list
    for name in ignored:
        at = next(i for i, ln in enumerate(lines) if ln.strip().startswith((f'"{name}"', f"'{name}'")))
        while lines[at - 1].strip().startswith('"'):  # entries that share one reason stand under it together
            at -= 1
        assert lines[at - 1].strip().startswith("#"), f"{name}: no comment above it in pyproject.toml saying why"


def test_a_missing_app_extra_is_named_whichever_curation_module_is_imported(tmp_path):
    # sorted imports put `from sqlalchemy import ...` above `from vhmine.store import ...` in a module: the curate
    # package imports vhmine.store first of all, so a missing extra is still said in vhmine.store's words
    from helpers import NO_APP_EXTRA

    (tmp_path / "sitecustomize.py").write_text(NO_APP_EXTRA)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    for mod in ("vhmine.curate", "vhmine.curate.decisions.derived", "vhmine.curate.work.queue", "vhmine.store"):
        run = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True, env=env)
        assert run.returncode == 1 and "the curation store needs sqlalchemy: pip install 'vhmine[app]'" in run.stderr, (
            mod,
            run.stderr[-400:],
        )
