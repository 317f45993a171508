"""vhmine.api: the notebook calls give what the commands give, since each command is the same call plus parsing."""

import json

import pandas as pd
import pytest
from helpers import make_ready_store
from typer.testing import CliRunner

from vhmine import api
from vhmine.cli import app
from vhmine.errors import InputError


def test_embed_and_mine_from_python_equal_the_commands(tiny_models, photos_dir, tmp_path):
    clip, dino = tiny_models
    emb = api.embed(photos_dir, name="py", clip_model=clip, dino_model=dino, indexes=tmp_path / "ix", batch_size=4)
    assert emb.folder == tmp_path / "ix" / "py" and emb.images >= 10
    r = CliRunner().invoke(
        app,
        [
            "embed",
            str(photos_dir),
            "--name",
            "cli",
            "--clip-model",
            clip,
            "--dino-model",
            dino,
            "--indexes",
            str(tmp_path / "ix"),
            "--batch-size",
            "4",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = {n: pd.read_parquet(tmp_path / "ix" / n / "images.parquet")[["image_id", "sha256"]] for n in ("py", "cli")}
    assert len(rows["py"]) >= 10 and rows["py"].equals(rows["cli"])

    got = api.mine("py", clip=0.0, dino=1.0, indexes=tmp_path / "ix", out=tmp_path / "run-py", gallery_size=2)
    r = CliRunner().invoke(
        app,
        [
            "mine",
            "--index",
            "cli",
            "--clip",
            "0",
            "--dino",
            "1",
            "--indexes",
            str(tmp_path / "ix"),
            "--out",
            str(tmp_path / "run-cli"),
            "--gallery-size",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    a = pd.read_parquet(tmp_path / "run-py" / "pairs.parquet")
    b = pd.read_parquet(tmp_path / "run-cli" / "pairs.parquet")
    cols = ["image_id_a", "image_id_b", "clip_sim", "dino_sim"]
    assert len(a) > 0 and a[cols].equals(b[cols])
    assert got.run_dir == tmp_path / "run-py" and got.written == len(a)


def test_a_bad_option_is_the_stage_error_not_a_type_error(tmp_path):
    with pytest.raises(InputError, match="--clip"):
        api.mine("nothing", clip=1.5, indexes=tmp_path)
    with pytest.raises(TypeError):
        api.mine("nothing", no_such_option=1)


def test_export_evaluate_and_read_from_python(tmp_path):
    store = make_ready_store(tmp_path)
    url = store.url
    store.close()
    res = api.export(tmp_path / "bench", "vlmevalkit", db=url, near_dups=None)
    assert res.out == tmp_path / "bench" and (tmp_path / "bench" / "manifest.json").is_file()
    bench = api.read_benchmark(tmp_path / "bench")
    assert len(bench) == 12 and {it.mode for it in bench} == {"counting", "color"}

    preds = tmp_path / "p.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": it.id, "answer": "Yes" if it.kind == "YNQ" else "3"}) + "\n" for it in bench)
    )
    out = api.evaluate(tmp_path / "bench", tmp_path / "ev", predictions=[("yes-man", str(preds))])
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--bench",
            str(tmp_path / "bench"),
            "--predictions",
            f"yes-man={preds}",
            "--out",
            str(tmp_path / "ev-cli"),
        ],
    )
    assert r.exit_code == 0, r.output
    cli_report = json.loads((tmp_path / "ev-cli" / "report.json").read_text())
    assert report["models"] == cli_report["models"]
    assert out.out == tmp_path / "ev" and out.report["models"] == report["models"]
