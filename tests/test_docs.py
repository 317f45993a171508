"""The README and the docs site stay true: every `vhmine ...` command they show names a real command and real
options, every path they name is in the repository, `mkdocs build --strict` passes (no broken link, no page
left out of the nav), the CLI reference is what scripts/cli_reference.py generates now, and the import-layer
table of docs/architecture.md holds for the real import graph."""

import ast
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import typer.main
import yaml
from package_imports import import_graph, module_files

from vhmine.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _commands(text: str) -> list[str]:
    """Every `vhmine ...` command a page shows: inline code, lines of code blocks (fenced, or indented 4 spaces)."""
    text = re.sub(r"\\\n\s*", " ", text)  # a command continued on the next line with a backslash
    found = re.findall(r"`(vhmine [^`]+)`", text)
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            code = re.sub(r"^\s*(\$ )?", "", line)
            found += [m.strip() for m in re.findall(r"(?:^|&& )(vhmine [^#\n]+)", code)]
    return sorted({" ".join(c.split()) for c in found})


def _command_errors(line: str, root) -> list[str]:
    words = shlex.split(line)[1:]
    cmd, path = root, ["vhmine"]
    while words and hasattr(cmd, "commands"):
        known = {o: p for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", []))}
        if words[0] in known:  # a group's own option before the subcommand: `vhmine -v mine ...`
            param = known[words.pop(0)]
            if not getattr(param, "is_flag", False) and words:
                words.pop(0)
        elif words[0] in cmd.commands:
            cmd = cmd.commands[words[0]]
            path.append(words.pop(0))
        else:
            break
    if hasattr(cmd, "commands") and words not in ([], ["--help"]):  # a group named alone is fine
        return [f"`{line}` names no command"]
    known = {"--help"} | {opt for p in cmd.params for opt in (*p.opts, *getattr(p, "secondary_opts", []))}
    return [
        f"`{line}`: {' '.join(path)} has no option {w}"
        for w in words
        if w.startswith("--") and w.split("=")[0] not in known
    ]


def test_every_page_shows_only_real_commands_and_options():
    root = typer.main.get_command(app)
    readme = _commands(README.read_text(encoding="utf-8"))
    assert any(c.startswith("vhmine embed") for c in readme) and any(c.startswith("vhmine mine") for c in readme)
    errors, seen = [], 0
    for page in PAGES:
        for line in _commands(page.read_text(encoding="utf-8")):
            seen += 1
            errors += [f"{_rel(page)}: {e}" for e in _command_errors(line, root)]
    assert seen > 100 and not errors, "\n".join(errors)


def test_the_command_check_catches_a_wrong_command_or_option():
    root = typer.main.get_command(app)
    assert _command_errors("vhmine -v mine --index x --clip 0.9", root) == []
    assert _command_errors("vhmine workers add alice --admin", root) == []
    assert _command_errors("vhmine export --no-near-dups --out b", root) == []
    assert _command_errors("vhmine mine --clips 0.9", root) == [
        "`vhmine mine --clips 0.9`: vhmine mine has no option --clips"
    ]
    assert _command_errors("vhmine workers ad alice", root) == ["`vhmine workers ad alice` names no command"]
    cmds = _commands("    vhmine seed --pairs p   # a comment\n```bash\nvhmine eval --bench b \\\n  --rule pope\n```\n")
    assert cmds == ["vhmine eval --bench b --rule pope", "vhmine seed --pairs p"]


def test_pages_use_only_what_a_clone_has():
    # a new user has no ../shared beside the clone: every path a page shows lives in the repository
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, f"{_rel(page)} points at ../shared, which a clone does not have"
        for rel in re.findall(r"(?<![\w./-])((?:vhmine|tests|scripts|apps|docs)/[\w./-]*)", text):
            rel = rel.rstrip(".")
            if not (ROOT / rel).exists():
                missing.append(f"{_rel(page)} names {rel}, which the repository does not have")
    assert not missing, "\n".join(missing)


# --- the site ------------------------------------------------------------------------------------------


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _nav_pages(nav) -> list[str]:
    out = []
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_the_site_builds_strict_with_every_page_in_the_nav(tmp_path):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["theme"]["name"] == "material"
    assert sorted(_nav_pages(config["nav"])) == sorted(p.name for p in DOCS.glob("*.md"))
    res = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert res.returncode == 0, res.stdout + res.stderr
    for page in DOCS.glob("*.md"):
        html = tmp_path / "site" / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert html.is_file(), f"{page.name} was not built"


def test_the_strict_build_fails_on_a_broken_link_and_a_page_outside_the_nav(tmp_path):
    # the same config on a copy of the pages, with one broken anchor and one page the nav does not list
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a", encoding="utf-8") as f:
        f.write("\nSee [the rules](eval.md#no-such-section).\n")
    (tmp_path / "docs" / "stray.md").write_text("# stray\n")
    res = _mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "no-such-section" in out and "stray.md" in out, out


# --- the CLI reference ---------------------------------------------------------------------------------


def _cli_reference():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_cli_reference_is_what_the_cli_says_now():
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout + res.stderr + "\n(run: python scripts/cli_reference.py)"
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    # every command and subcommand has its section, with the options its --help lists
    for name, cmd in root.commands.items():
        assert f"## vhmine {name}\n" in text
        for sub in getattr(cmd, "commands", {}):
            assert f"## vhmine {name} {sub}\n" in text
    assert "--coco-annotations <path>" in text and "--judge-agreement" in text


def test_the_cli_reference_check_fails_on_a_stale_page(tmp_path, capsys):
    ref = _cli_reference()
    ref.OUT = tmp_path / "cli.md"
    assert ref.main([]) == 0 and ref.main(["--check"]) == 0
    ref.OUT.write_text(ref.OUT.read_text().replace("--max-per-image", "--max-per-picture"))
    assert ref.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err


# --- the import layers of docs/architecture.md -----------------------------------------------------------


def _layer_table(text: str) -> list[tuple[int, str, list[str], set[str]]]:
    """(layer, name, module names, names of the layers it may import) per row of the `| layer | name |` table."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            allowed = {n.strip() for n in cells[3].split(",")} - {"—", "-", ""}
            rows.append((int(cells[0]), cells[1], re.findall(r"`([\w.]+)`", cells[2]), allowed))
    return rows


def layer_violations(rows, mods, edges) -> list[str]:
    """What in the package breaks the table: a module in no row, an import the row may not make, a claim upward."""
    top = next(iter(mods)).split(".")[0]
    full = {r[1]: [top if m == top else f"{top}.{m}" for m in r[2]] for r in rows}
    layer = {r[1]: r[0] for r in rows}
    bad = []
    for n, name, _, allowed in rows:
        bad += [f"row {name!r} may import {a!r}, which is no row" for a in allowed if a not in layer]
        bad += [
            f"row {name!r} (layer {n}) may import {a!r}, which is not below it"
            for a in allowed
            if a in layer and layer[a] >= n
        ]

    def row_of(mod: str):
        hits = [
            (len(p), name)
            for name, ps in full.items()
            for p in ps
            if mod == p or (p != top and mod.startswith(p + "."))
        ]
        return max(hits)[1] if hits else None

    where = {m: row_of(m) for m in mods}
    bad += [f"{m} is in no row of the table" for m, r in where.items() if r is None]
    allowed_of = {r[1]: r[3] for r in rows}
    for mod, targets in sorted(edges.items()):
        for t in sorted(targets):
            a, b = where.get(mod), where.get(t)
            if a and b and b != a and b not in allowed_of[a]:
                bad.append(
                    f"{mod} ({a}, layer {layer[a]}) imports {t} ({b}, layer {layer[b]}): "
                    f"the table says {a} may import {', '.join(sorted(allowed_of[a])) or 'nothing'}"
                )
        # importing a module runs its packages' __init__ first: one above the module's layer must import nothing
        # when it runs (a face may still load its names on first use, in a module __getattr__)
        parts = mod.split(".")
        for i in range(1, len(parts)):
            pkg = ".".join(parts[:i])
            runs = init_imports(pkg, mods)
            if where.get(pkg) and where.get(mod) and layer[where[pkg]] > layer[where[mod]] and runs:
                bad.append(
                    f"{pkg} (layer {layer[where[pkg]]}) imports {sorted(runs)} in its __init__, "
                    f"so importing {mod} (layer {layer[where[mod]]}) reaches above its layer"
                )
    return sorted(set(bad))


def init_imports(pkg: str, mods) -> set[str]:
    """The package modules a package's __init__ imports as it runs: its module-level imports (those inside
    functions, a face's module __getattr__ among them, run only when called)."""
    path = mods.get(pkg)
    if path is None or path.name != "__init__.py":
        return set()
    top = pkg.split(".")[0]
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom):
                source = sub.module or ""
                if sub.level:
                    source = ".".join(pkg.split(".")[: len(pkg.split(".")) - (sub.level - 1)] + [source]).strip(".")
                if source == top or source.startswith(top + "."):
                    out |= {f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source for a in sub.names}
            elif isinstance(sub, ast.Import):
                out |= {a.name for a in sub.names if a.name.startswith(top + ".")}
    return out - {pkg}


def test_the_architecture_page_layers_hold_for_the_real_imports():
    rows = _layer_table((DOCS / "architecture.md").read_text(encoding="utf-8"))
    assert [r[0] for r in rows] == list(range(len(rows))) and len(rows) >= 10
    assert rows[0][1] == "vocabulary" and {"errors", "config", "files", "images", "bench", "llm"} <= set(rows[0][2])
    assert rows[1][1:3] == ("rules", ["rules"])  # the ground floor: every stage reads its rules, it reads none
    mods = module_files()
    assert layer_violations(rows, mods, import_graph(mods)) == []


def test_the_layer_check_catches_an_upward_import_and_a_module_in_no_row(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("low", "high"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "low" / "a.py").write_text("from pkg import errors\n")
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")
    rows = _layer_table(
        "| 0 | vocabulary | `pkg`, `errors` | — |\n| 1 | low | `low` | vocabulary |\n"
        "| 2 | high | `high` | vocabulary, low |\n"
    )
    mods = module_files(pkg)
    assert layer_violations(rows, mods, import_graph(mods)) == []
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import b\n")  # upward, inside a function
    (pkg / "stray.py").write_text("")
    found = layer_violations(rows, module_files(pkg), import_graph(module_files(pkg)))
    assert any(v.startswith("pkg.low.a (low, layer 1) imports pkg.high.b") for v in found), found
    assert "pkg.stray is in no row of the table" in found
    bad_claim = _layer_table("| 0 | vocabulary | `pkg`, `errors` | high |\n| 1 | high | `high` | vocabulary |\n")
    assert "row 'vocabulary' (layer 0) may import 'high', which is not below it" in layer_violations(
        bad_claim, {"pkg": pkg / "__init__.py"}, {}
    )


# --- every dotted vhmine path the docs and docstrings name exists -------------------------------------------------

DOTTED = re.compile(r"(?<![\w./-])vhmine(?:\.[A-Za-z_]\w*)+")
FILE_NAMES = ("db", "yaml", "yml", "json", "jsonl", "md", "py", "toml", "txt", "csv", "html", "log")  # vhmine.db


def resolves(path: str) -> bool:
    """Whether a dotted path names a module of the package, or an attribute of one (importlib, then getattr)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except ModuleNotFoundError:
            continue
        obj = importlib.import_module(name)
        for part in parts[i:]:
            obj = getattr(obj, part, None)
            if obj is None:
                return False
        return True
    return False


def stale_paths(texts) -> list[str]:
    """`<where>: <path>` for every dotted `vhmine.` path in (where, text) pairs that names nothing."""
    bad = set()
    for where, text in texts:
        for m in DOTTED.finditer(text):
            path = m.group(0)
            if path.rpartition(".")[2] not in FILE_NAMES and not resolves(path):
                bad.add(f"{where}: {path}")
    return sorted(bad)


def _docstrings():
    for path in sorted((ROOT / "vhmine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield _rel(path), doc


def test_the_stale_path_check_catches_a_moved_module_and_a_missing_name():
    texts = [
        ("a", "the face (vhmine.curate.next_item), a room's (vhmine.curate.work.next_review), a module (vhmine.rules)"),
        ("b", "gone: vhmine.curate.kappa, vhmine.rules.modes.no_such_rule; a file: vhmine.db."),
    ]
    assert stale_paths(texts) == ["b: vhmine.curate.kappa", "b: vhmine.rules.modes.no_such_rule"]


def test_every_dotted_vhmine_path_in_the_docs_and_docstrings_exists():
    bad = stale_paths([*_docstrings(), *((_rel(p), p.read_text()) for p in PAGES)])
    assert not bad, "dotted paths that name no module or attribute (moved or renamed?):\n" + "\n".join(bad)


def test_the_architecture_page_names_every_top_level_package_face():
    # docs/architecture.md's "Faces" table: one row for each package directly under vhmine/ that callers use
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    faces = text.split("## Faces", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(vhmine\.[\w.]+)`", faces))
    packages = {
        f"vhmine.{p.parent.name}"
        for p in (ROOT / "vhmine").glob("*/__init__.py")
        if p.parent.name not in ("apps", "prompts")
    }
    assert packages - named == set(), f"packages whose face the page does not show: {sorted(packages - named)}"
