"""cli.py: the commands as a user runs them: instant help, documented options, the offline demo."""

import json
import os
import subprocess
import sys
import time

import pandas as pd
from typer.testing import CliRunner

from vhmine.cli import app

HEAVY = ("torch", "open_clip", "transformers", "diffusers", "faiss", "streamlit", "openai", "sqlalchemy",
         "pandas", "pyarrow", "matplotlib")


def test_help_imports_nothing_heavy():
    code = ("import sys; from vhmine.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', [m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "LOADED []" in out, out
    assert "embed" in out and "mine" in out


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


def test_offline_demo_end_to_end(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", "demo", "--workdir", str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Pairs from untrained encoders mean nothing" in r.stdout
    assert time.time() - t0 < 240
    run = tmp_path / "runs" / "demo-offline"
    pairs = pd.read_parquet(run / "pairs.parquet")
    assert len(pairs) >= 5  # the demo's box holds at least the 5 pairs it was drawn around
    meta = json.loads((run / "run.json").read_text())
    assert meta["counts"]["in_box"] == len(pairs) and meta["index"] == "demo-skimage"
    assert (tmp_path / "indexes" / "demo-skimage" / "manifest.json").is_file()
    assert "motorcycle_left.png" in set(pd.read_parquet(tmp_path / "indexes" / "demo-skimage" / "images.parquet")["path"])
    assert str(run / "gallery.html") in r.stdout


def test_offline_demo_names_its_encoders_and_the_embed_line_for_ones_own_folder(tmp_path):
    """The printed `vhmine embed` line is run as printed, on another folder: it embeds with the demo's encoders."""
    import shlex

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", "demo", "--offline"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"encoders of this demo (random weights, built here): CLIP {tmp_path / 'data/demo-models/tiny-clip'}, " \
           f"DINOv2 {tmp_path / 'data/demo-models/tiny-dinov2'}" in lines
    line = next(ln for ln in lines if ln.startswith("your own images, offline: "))
    cmd = line.removeprefix("your own images, offline: ")
    assert cmd == ("vhmine embed FOLDER --name NAME --clip-model local-dir:data/demo-models/tiny-clip "
                   "--dino-model data/demo-models/tiny-dinov2")
    assert "next: vhmine seed --pairs runs/demo-offline/pairs.parquet" in lines
    from helpers import write_photos

    write_photos(tmp_path / "mine", ("coffee", "rocket", "horse"))
    words = shlex.split(cmd.replace("FOLDER", "mine").replace("NAME", "own"))
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", *words[1:]], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "indexes" / "own" / "manifest.json").read_text())
    assert man["counts"]["images"] == 3 and "tiny-clip" in json.dumps(man["encoders"]["clip"])


def test_usage_lines_read_as_people_write_them():
    env = {**os.environ, "COLUMNS": "200"}
    for words, usage in ((["embed"], "Usage: vhmine embed [OPTIONS] IMAGES"),
                         (["workers", "add"], "Usage: vhmine workers add [OPTIONS] NAME"),
                         (["workers", "rotate"], "Usage: vhmine workers rotate [OPTIONS] NAME")):
        out = subprocess.run([sys.executable, "-m", "vhmine.cli", *words, "--help"], capture_output=True, text=True,
                             env=env, check=True).stdout
        assert out.splitlines()[0] == usage
        assert "{" not in out.splitlines()[0]


def test_describe_takes_its_modes_as_the_other_stages_do():
    out = subprocess.run([sys.executable, "-m", "vhmine.cli", "describe", "--help"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"}, check=True).stdout
    assert "--mode <list[str]>" in out and "--modes" not in out
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", "describe", "--model", "m", "--modes", "shape,ocr"],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 2 and "--modes was replaced by --mode, as the other stages take it: --mode shape --mode ocr" in r.stderr
