"""export.privacy: exports hold no worker names or machine paths unless --with-provenance, in every format;
pseudonyms are per store."""

import base64
import csv
import io
import json
import sys
from pathlib import Path

from vhmine.export.job import ExportOptions, export_benchmark

from helpers import make_ready_store

FORMATS = ("vhtest", "vlmevalkit", "hf", "pope", "llava", "hallusionbench", "lmms-eval")


def _readable(path: Path) -> bytes:
    """A file's bytes and, for containers, the text inside them (xlsx cells, parquet rows, TSV base64 decoded)."""
    data = path.read_bytes()
    parts = [data]
    if path.suffix == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path)
        parts += [str(c.value).encode() for ws in wb for row in ws.iter_rows() for c in row if c.value is not None]
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        parts.append(json.dumps(t.to_pylist(), default=lambda b: b.hex()).encode())
        parts += [k + b"=" + v for k, v in (t.schema.metadata or {}).items()]
    elif path.suffix == ".tsv":
        csv.field_size_limit(sys.maxsize)
        for row in csv.DictReader(io.StringIO(data.decode()), delimiter="\t"):
            parts += [base64.b64decode(v) if k == "image" and len(v) > 64 else v.encode() for k, v in row.items()]  # <= 64: a row index
    return b"\n".join(parts)


def _export_all(store, root: Path, **kw) -> dict[str, bytes]:
    out = {}
    for fmt in FORMATS:
        kind = "ynq" if fmt in ("pope", "hallusionbench") else "both"
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
    made_by = {v["created_by"] for fmt in FORMATS
               for v in json.loads(files[f"{fmt}/manifest.json"].decode())["instances"].values()}
    assert made_by == {alias}
    man = json.loads(files["vhtest/manifest.json"].decode())
    assert man["store"] == "sqlite:///store.db"
    assert {v["source_path"] for v in man["instances"].values()} <= {"astronaut.png", "coffee.png", "rocket.png"}
    monkeypatch.chdir(tmp_path)  # inside the working folder: paths relative to it
    from vhmine.export.privacy import public_path, public_store

    assert (public_path(str(tmp_path / "photos" / "coffee.png")), public_store(store.url)) == ("photos/coffee.png", "sqlite:///store.db")
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


def test_cli_export_with_provenance(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    store = make_ready_store(tmp_path)
    url = store.url
    store.close()
    for flag, present in (([], False), (["--with-provenance"], True)):
        out = tmp_path / ("full" if present else "plain")
        r = CliRunner().invoke(app, ["export", "--db", url, "--out", str(out), "--format", "pope", "--kind", "ynq", *flag])
        assert r.exit_code == 0, r.output
        assert (b"alice" in (out / "questions.jsonl").read_bytes()) is present
