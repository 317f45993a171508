"""A `--db` file that holds no store (0 bytes, random bytes, a text file) is refused in one line by every command
that opens a store, the creators (seed, generate, manipulate, workers add) too, and left byte for byte as it was,
with nothing beside it (vhmine.store.sqlite_file reads its header before any connection could write)."""

import json
import os

import pytest
from helpers import write_pairs, write_photos, write_tiny_bench
from typer.testing import CliRunner

BAD = {
    "empty": b"",
    "random": bytes(range(256)) * 12,
    "text": b"pairs I mean to look at later\n",
    "short": b"SQLite",  # the header's start, cut off
}


def _args(tmp_path) -> dict[str, list[str]]:
    """Each command with --db, with enough to reach its store."""
    bench = write_tiny_bench(tmp_path)
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "answer": "yes"}) + "\n" for i in ("o1", "o2", "y1", "y2")))
    pairs = write_pairs(tmp_path / "runs" / "r", write_photos(tmp_path / "photos", ("astronaut", "coffee")))
    return {
        "seed": ["--pairs", str(pairs)],
        "generate": ["--backend", "openai:dall-e-3"],
        "manipulate": ["--model", "m"],
        "workers add": ["alice"],
        "probe": ["--model", "m"],
        "describe": ["--model", "m"],
        "blind": ["--model", "m"],
        "draft": ["--model", "m"],
        "export": ["--out", str(tmp_path / "out")],
        "curate": [],
        "eval": ["--bench", str(bench), "--predictions", f"m={preds}", "--oeq", "labels", "--out", str(tmp_path / "e")],
        "workers list": [],
        "workers rotate": ["alice"],
        "workers deactivate": ["alice"],
        "workers activate": ["alice"],
        "status": ["--folder", str(tmp_path)],
    }


def _listing(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_every_command_refuses_a_db_file_that_holds_no_store_and_leaves_it_as_it_was(tmp_path):
    import typer.main

    from vhmine.cli import app

    args = _args(tmp_path)

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        elif any("--db" in p.opts for p in cmd.params):
            yield " ".join(path)

    assert set(walk(typer.main.get_command(app), [])) == set(args), "a new command with --db: add it to _args"
    runner = CliRunner()
    for kind, data in BAD.items():
        folder = tmp_path / f"db-{kind}"
        folder.mkdir()
        db = folder / "vhmine.db"
        db.write_bytes(data)
        os.chmod(db, 0o640)
        for name, extra in args.items():
            r = runner.invoke(app, name.split() + extra + ["--db", str(db)])
            assert _listing(folder) == {"vhmine.db": data}, (kind, name, r.output)  # no -wal, -shm, -journal
            assert (db.stat().st_mode & 0o777) == 0o640
            said = [line for line in r.output.splitlines() if str(db) in line]
            if name == "status":  # a report: the store's line says it (a damaged file then exits 2, after the rest)
                assert said[0].startswith("store: ") and "check --db / VHMINE_DB" in said[0], r.output
                assert r.exit_code == (0 if kind == "empty" else 2), r.output
                continue
            assert len(said) == 1 and "check --db / VHMINE_DB" in said[0], (kind, name, r.output)
            assert r.exit_code == 2 and said[0].startswith("error: "), (kind, name, r.output)
            if kind == "empty":
                assert f"no store at {db}: the file is empty (0 bytes)" in said[0], said
                assert "remove the empty file to let `vhmine seed`" in said[0], said
            else:
                assert f"the store {db} is not a SQLite database" in said[0], said


def test_open_store_refuses_an_empty_file_even_where_it_may_create_a_store(tmp_path):
    from vhmine.errors import StoreCorruptError, StoreError, StoreMissingError
    from vhmine.store import open_store

    empty = tmp_path / "empty.db"
    empty.touch()
    for kw in ({"create": True}, {"create": False}):
        with pytest.raises(StoreError, match="the file is empty") as err:
            open_store(empty, **kw)
        assert not isinstance(err.value, StoreMissingError)  # only where the store is only read
    with pytest.raises(StoreMissingError, match="the file is empty"):
        open_store(empty, migrate=False)
    text = tmp_path / "notes.db"
    text.write_text("not a database\n")
    for kw in ({"create": True}, {"migrate": False}):
        with pytest.raises(StoreCorruptError, match="is not a SQLite database"):
            open_store(text, **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "notes.db"] and empty.stat().st_size == 0
    new = tmp_path / "new.db"  # where no file is, a creator still makes the store
    open_store(new, create=True).close()
    assert new.read_bytes().startswith(b"SQLite format 3\x00")
    with open_store(new, create=False) as store:
        assert store.revision() is not None
