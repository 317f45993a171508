"""cli.py: the commands as a user runs them: instant help, documented options, the offline demo."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from vhmine.cli import app

HEAVY = (
    "torch",
    "open_clip",
    "transformers",
    "diffusers",
    "faiss",
    "streamlit",
    "openai",
    "sqlalchemy",
    "pandas",
    "pyarrow",
    "matplotlib",
)


def test_help_imports_nothing_heavy():
    code = (
        "import sys; from vhmine.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', [m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "LOADED []" in out, out
    assert "embed" in out and "mine" in out


@pytest.mark.slow
def test_every_command_has_help():
    import typer.main

    runner = CliRunner()

    group = typer.main.get_command(app)

    def walk(cmd, path):
        if hasattr(cmd, "commands"):  # a group (typer ships its own click)
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        else:
            yield path, cmd

    commands = list(walk(group, []))
    assert ["embed"] in [p for p, _ in commands] and ["data", "coco"] in [p for p, _ in commands]
    for path, cmd in commands:
        assert cmd.help, f"`vhmine {' '.join(path)}` has no help text"
        r = runner.invoke(app, path + ["--help"])
        assert r.exit_code == 0 and "Usage" in r.output
        for param in cmd.params:
            if getattr(param, "param_type_name", "") == "option" and param.name != "help":
                assert param.help, f"`vhmine {' '.join(path)}` option {param.opts[0]} has no help"


def _help(*words: str) -> str:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *words, "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    ).stdout


def test_help_shows_bracketed_defaults_and_env_names():
    text = " ".join(_help("embed").split())
    assert "Collection name [default: the folder's name]." in text  # rich markup used to eat the brackets
    assert "[env VHMINE_INDEXES; default ./indexes]" in text
    assert "[default: 64" in text


def test_a_mistyped_db_never_creates_a_store(tmp_path):
    """Only the commands that put the first things into a store (seed, generate, manipulate, workers add) may create
    one; every other command with --db refuses a store that does not exist, names its path and creates nothing.
    (Before: `blind --db typo.db` made an empty store, printed "0 questions" and exited 0.)"""
    import typer.main
    from helpers import write_tiny_bench

    from vhmine.store.db import CREATORS

    bench = write_tiny_bench(tmp_path)
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": i, "answer": "yes"}) + "\n" for i in ("o1", "o2", "y1", "y2", "y3", "y4"))
    )
    args = {  # enough for each command to reach its store
        "probe": ["--model", "m"],
        "describe": ["--model", "m"],
        "blind": ["--model", "m"],
        "draft": ["--model", "m"],
        "export": ["--out", str(tmp_path / "out")],
        "curate": [],
        "eval": [
            "--bench",
            str(bench),
            "--predictions",
            f"m={preds}",
            "--oeq",
            "labels",
            "--out",
            str(tmp_path / "ev"),
        ],
        "workers list": [],
        "workers rotate": ["alice"],
        "workers deactivate": ["alice"],
        "workers activate": ["alice"],
    }

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        elif any("--db" in p.opts for p in cmd.params):
            yield " ".join(path)

    with_db = set(walk(typer.main.get_command(app), []))
    readers = {"status"}  # reports that there is no store yet, and creates none
    assert with_db == set(args) | set(CREATORS) | readers, (
        "a new command with --db: add it to `args`, to store.db.CREATORS or to `readers`"
    )
    runner = CliRunner()
    for name, extra in list(args.items()) + [("draft", ["--stats"])]:
        typo = tmp_path / f"typo-{name.replace(' ', '-')}.db"
        r = runner.invoke(app, name.split() + extra + ["--db", str(typo)])
        assert r.exit_code == 2, (name, r.output)
        assert f"no store at {typo}: check --db / VHMINE_DB" in r.output, (name, r.output)
        assert not typo.exists(), name
    typo = tmp_path / "typo-status.db"
    r = runner.invoke(app, ["status", "--folder", str(tmp_path), "--db", str(typo)])
    assert r.exit_code == 0 and "store: none yet" in r.output and not typo.exists(), r.output
    # an empty file is no store either
    (tmp_path / "empty.db").write_bytes(b"")
    r = runner.invoke(app, ["blind", "--model", "m", "--db", str(tmp_path / "empty.db")])
    assert r.exit_code == 2 and "no store at" in r.output, r.output
    # a command that makes the first thing in a store still makes it
    r = runner.invoke(app, ["workers", "add", "alice", "--db", str(tmp_path / "new.db")])
    assert r.exit_code == 0 and (tmp_path / "new.db").is_file(), r.output
    r = runner.invoke(
        app, ["blind", "--model", "m", "--db", str(tmp_path / "new.db"), "--base-url", "http://127.0.0.1:9/v1"]
    )
    assert "no store at" not in r.output


def test_usage_lines_read_as_people_write_them():
    env = {**os.environ, "COLUMNS": "200"}
    for words, usage in (
        (["embed"], "Usage: vhmine embed [OPTIONS] IMAGES"),
        (["workers", "add"], "Usage: vhmine workers add [OPTIONS] NAME"),
        (["workers", "rotate"], "Usage: vhmine workers rotate [OPTIONS] NAME"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "vhmine.cli", *words, "--help"], capture_output=True, text=True, env=env, check=True
        ).stdout
        assert out.splitlines()[0] == usage
        assert "{" not in out.splitlines()[0]


def test_describe_takes_its_modes_as_the_other_stages_do():
    out = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", "describe", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=True,
    ).stdout
    assert "--mode <list[str]>" in out and "--modes" not in out
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", "describe", "--model", "m", "--modes", "shape,ocr"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert (
        r.returncode == 2
        and "--modes was replaced by --mode, as the other stages take it: --mode shape --mode ocr" in r.stderr
    )


def test_the_command_line_leaves_its_objects_out_of_the_collections_at_exit():
    # a probe registered before main runs after main's hook (atexit runs the last registered first): by then
    # every object is frozen, so the shutdown's collections walk none of them; main twice registers it once
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('AT EXIT frozen', gc.get_freeze_count() > 1000, flush=True))\n"
        "from vhmine.cli import main\n"
        "hooks = []\n"
        "for _ in range(2):\n    try:\n        main(['--help'])\n    except SystemExit:\n        pass\n"
        "    hooks.append(atexit._ncallbacks())\n"
        "print('BEFORE EXIT frozen', gc.get_freeze_count(), 'hooks added by the second main', hooks[1] - hooks[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "BEFORE EXIT frozen 0 hooks added by the second main 0" in out, out  # nothing frozen while it works
    assert "AT EXIT frozen True" in out, out
