"""export.privacy: exports hold no worker names or machine paths unless --with-provenance, in every format;
pseudonyms are per store."""

import json
from pathlib import Path

import pytest
from helpers import make_ready_store, readable_bytes

from vhmine.export.job import ExportOptions, export_benchmark

FORMATS = ("vhtest", "vlmevalkit", "hf", "pope", "llava", "hallusionbench", "lmms-eval", "mmvp")


_readable = readable_bytes


def _export_all(store, root: Path, **kw) -> dict[str, bytes]:
    out = {}
    for fmt in FORMATS:
        kind = "ynq" if fmt in ("pope", "hallusionbench", "mmvp") else "both"
        export_benchmark(store, ExportOptions(out=root / fmt, format=fmt, kind=kind, **kw))
        for p in sorted((root / fmt).rglob("*")):
            if p.is_file():
                out[f"{fmt}/{p.relative_to(root / fmt)}"] = _readable(p)
    return out


def test_exports_hold_no_worker_names_or_machine_paths(tmp_path, monkeypatch):
    store = make_ready_store(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # store and photos lie outside the working folder: names only
    private = [b"alice", str(tmp_path).encode(), str(Path.home()).encode() + b"/"]
    files = _export_all(store, tmp_path / "out")
    assert len(files) > len(FORMATS) * 2
    for name, data in files.items():
        for word in private:
            assert word not in data, f"{word!r} in {name}"
    # one worker, one pseudonym, in every export of the store
    from vhmine.export.privacy import pseudonym, pseudonym_key

    alias = pseudonym("alice", pseudonym_key(store))
    assert alias.startswith("w-") and len(alias) == 10
    made_by = {
        v["created_by"]
        for fmt in FORMATS
        for v in json.loads(files[f"{fmt}/manifest.json"].decode())["instances"].values()
    }
    assert made_by == {alias}
    man = json.loads(files["vhtest/manifest.json"].decode())
    assert man["store"] == "sqlite:///store.db"
    assert {v["source_path"] for v in man["instances"].values()} <= {"astronaut.png", "coffee.png", "rocket.png"}
    monkeypatch.chdir(tmp_path)  # inside the working folder: the same (no index records a root for these photos)
    from vhmine.export.privacy import public_path, public_store

    assert (public_path(str(tmp_path / "photos" / "coffee.png")), public_store(store.url)) == (
        "coffee.png",
        "sqlite:///store.db",
    )
    # internal use: --with-provenance keeps the names and paths
    full = _export_all(store, tmp_path / "full", with_provenance=True)
    for fmt in FORMATS:
        assert b"alice" in full[f"{fmt}/manifest.json"] and str(tmp_path).encode() in full[f"{fmt}/manifest.json"]
    assert any(b"alice" in full[n] for n in full if n.startswith("hf/data/"))  # inside the parquet too
    store.close()


def test_pseudonyms_are_per_store(tmp_path):
    from vhmine.export.privacy import pseudonym, pseudonym_key

    a = make_ready_store(tmp_path / "a")
    b = make_ready_store(tmp_path / "b")
    assert pseudonym_key(a) == pseudonym_key(a) != pseudonym_key(b)
    assert pseudonym("alice", pseudonym_key(a)) != pseudonym("alice", pseudonym_key(b))
    assert pseudonym("alice", pseudonym_key(a)) != pseudonym("bob", pseudonym_key(a))
    a.close()
    b.close()


@pytest.mark.slow
def test_cli_export_with_provenance(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    store = make_ready_store(tmp_path)
    url = store.url
    store.close()
    for flag, present in (([], False), (["--with-provenance"], True)):
        out = tmp_path / ("full" if present else "plain")
        r = CliRunner().invoke(
            app, ["export", "--db", url, "--out", str(out), "--format", "pope", "--kind", "ynq", *flag]
        )
        assert r.exit_code == 0, r.output
        assert (b"alice" in (out / "questions.jsonl").read_bytes()) is present


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file's bytes; manifest.json without its created_at (the clock's, not the folder's)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "manifest.json":
                man = json.loads(data)
                man.pop("created_at")
                data = json.dumps(man, sort_keys=True).encode()
            out[p.relative_to(folder).as_posix()] = data
    return out


@pytest.mark.slow
def test_an_export_is_the_same_byte_for_byte_from_any_working_folder_paths_relative_to_the_collection_root(mined):
    """Run from /, source_path, the encoders, manifest.json, questions and croissant.json held the machine's full
    paths; from two folders the data files differed. Now: relative to the root the index records, from anywhere."""
    from helpers import run_vhmine

    tmp_path, photos, store = mined
    db = str(tmp_path / "data" / "vhmine.db")
    (tmp_path / "a" / "deeper").mkdir(parents=True)
    trees = []
    for k, cwd in enumerate(("/", tmp_path / "a", tmp_path / "a" / "deeper")):
        out = tmp_path / "exports" / f"e{k}"
        r = run_vhmine("export", "--db", db, "--out", str(out), "--format", "pope", "--name", "b", cwd=cwd)
        assert r.returncode == 0, r.stdout + r.stderr
        trees.append(_tree(out))
    assert all(t == trees[0] for t in trees[1:]), [sorted(n for n in t if t[n] != trees[0].get(n)) for t in trees[1:]]
    files = trees[0]
    man = json.loads(files["manifest.json"])
    assert {v["source_path"] for v in man["instances"].values()} <= {p.name for p in photos.iterdir()}
    for name, data in files.items():
        for private in (str(tmp_path).encode(), b"/tmp/", str(Path.home()).encode() + b"/"):
            assert private not in data, (private, name)
    enc = man["datasheet"]["collection"]["runs"][0]["encoders"]
    assert enc and all("/" not in (e["spec"] or "").split(":", 1)[-1] for e in enc.values()), enc


def test_public_paths_do_not_depend_on_the_working_folder(tmp_path, monkeypatch):
    from vhmine.export.privacy import public_path, public_spec

    root = tmp_path / "photos"
    root.mkdir()
    shown = set()
    for cwd in ("/", tmp_path, root):
        monkeypatch.chdir(cwd)
        shown.add(
            (
                public_path(str(root / "sub" / "cat.png"), [root]),
                public_path(str(root / "cat.png")),
                public_spec(f"local-dir:{tmp_path}/models/clip"),
                public_path("sub/cat.png", [root]),
            )
        )
    assert shown == {("sub/cat.png", "cat.png", "local-dir:clip", "sub/cat.png")}
