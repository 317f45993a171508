"""vhmine.embed.precision through `vhmine embed --precision`: the precision named or measured, recorded in
job.json and manifest.json, kept by a grown index (another one named is refused), and the rows embedded in it;
with tiny real encoders (tests/conftest.py's tiny_models) on scikit-image's photos."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import copy_photos, embed_options  # noqa: E402

from vhmine.embed import precision as P  # noqa: E402
from vhmine.embed.job import embed_collection  # noqa: E402
from vhmine.errors import EncoderMismatchError, InputError  # noqa: E402
from vhmine.index import open_index  # noqa: E402


def _encode(specs, precision, paths):
    """The rows `vhmine embed` should hold for `paths`: the encoders loaded in `precision`, one image a batch."""
    from vhmine.embed.encoders import load_pair
    from vhmine.images import decode_rgb

    pair = load_pair(*specs, "cpu", precision)
    imgs = [decode_rgb(Path(p).read_bytes()) for p in paths]
    clip = np.stack([pair.clip.encode(pair.clip.preprocess(i)[None])[0].numpy() for i in imgs])
    dino = np.stack([pair.dino.encode(pair.dino.preprocess(i)[None])[0].numpy() for i in imgs])
    return clip, dino


def test_requested_and_kept_read_what_was_asked_and_what_an_index_recorded(monkeypatch):
    monkeypatch.delenv(P.ENV, raising=False)
    assert P.requested(None) == "auto" and P.requested("BF16") == "bf16"
    monkeypatch.setenv(P.ENV, "fp16")
    assert P.requested(None) == "fp16" and P.requested("fp32") == "fp32"  # the option wins over the variable
    with pytest.raises(InputError, match="--precision half: use fp32, bf16, fp16 or auto"):
        P.requested("half")
    monkeypatch.setenv(P.ENV, "int8")
    with pytest.raises(InputError, match="VHMINE_PRECISION int8: use fp32, bf16, fp16 or auto"):
        P.requested(None)
    assert P.kept({"precision": {"name": "bf16", "chosen": "measured"}, "encoders": {}}) == "bf16"
    # an index from before the record: the dtype its encoders ran in
    legacy = {"encoders": {"clip": {"dtype": "bfloat16"}, "dino": {"dtype": "bfloat16"}}}
    assert P.kept(legacy) == "bf16" and P.kept({"encoders": {}}) is None and P.kept(None) is None


def test_auto_keeps_fp32_unless_a_lower_precision_is_min_gain_times_faster():
    assert P.fastest({"fp32": 10.0, "bf16": 12.4}) == "fp32"  # 1.24x: not worth moving every similarity
    assert P.fastest({"fp32": 10.0, "bf16": 12.5}) == "bf16"
    assert P.fastest({"fp32": 10.0, "bf16": 8.0}) == "fp32"
    assert P.fastest({"fp32": 10.0, "fp16": 31.0}) == "fp16"


@pytest.mark.slow
def test_auto_measures_once_per_machine_and_shapes_then_reads_the_cache(tmp_path, tiny_models):
    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.embed.tiny import build_dino

    cache = tmp_path / "precision.json"

    def choose(dino_spec=tiny_models[1]):
        import torch

        encoders = (load_clip(tiny_models[0], "cpu"), load_dino(dino_spec, "cpu"))
        return P.choose(encoders, torch.device("cpu"), "auto", cache=cache), encoders

    first, encoders = choose()
    assert first.source == "measured" and set(first.rates) == {"fp32", "bf16"} and min(first.rates.values()) > 0
    assert first.name == P.fastest(first.rates)
    assert {p.dtype for e in encoders for p in e.model.parameters()} == {P.torch_dtype(first.name)}
    assert {e.dtype for e in encoders} == {P.torch_dtype(first.name)}
    second, _ = choose()
    assert (second.source, second.rates, second.name) == ("cached", first.rates, first.name)
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == 1
    # the cache is keyed by the encoders' shapes, not their files: other weights of the same shapes read it,
    # another architecture measures again
    same_shapes = build_dino(tmp_path / "dino-seed1", seed=1)
    assert choose(same_shapes)[0].source == "cached"
    wider = build_dino(tmp_path / "dino-wide", hidden_size=48, heads=3)
    assert choose(wider)[0].source == "measured" and len(json.loads(cache.read_text())["entries"]) == 2
    # a machine where bf16 pays (the rates as a faster CPU measured them): auto takes it and casts the models
    for entry in entries.values():
        entry["rates"] = {"fp32": 10.0, "bf16": 25.0}
    cache.write_text(json.dumps({"entries": entries}))
    chosen, encoders = choose()
    assert (chosen.name, chosen.source) == ("bf16", "cached")
    assert {p.dtype for e in encoders for p in e.model.parameters()} == {P.torch_dtype("bf16")}
    assert chosen.record() == {"name": "bf16", "chosen": "cached", "images_per_s": {"fp32": 10.0, "bf16": 25.0}}
    assert "bf16" in chosen.line() and "cached" in chosen.line()


def test_bf16_is_recorded_and_its_rows_are_the_bf16_encoders_close_to_fp32s(tmp_path, photos_dir, tiny_models):
    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat", "coffee", "camera", "rocket"))
    res = embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="b", precision="bf16"))
    assert "embedding precision: bf16 (named by --precision)" in res.summary()
    idx = open_index(tmp_path / "idx", "b")
    assert idx.manifest["precision"] == {"name": "bf16", "chosen": "forced"}
    assert {idx.manifest["encoders"][k]["dtype"] for k in ("clip", "dino")} == {"bfloat16"}
    job = json.loads((idx.folder / "work" / "job.json").read_text())
    assert job["precision"] == idx.manifest["precision"]
    paths = [photos / p for p in idx.images["path"]]
    clip, dino = _encode(tiny_models, "bf16", paths)
    assert np.allclose(idx.clip, clip, atol=1e-6) and np.allclose(idx.dino, dino, atol=1e-6)
    clip32, dino32 = _encode(tiny_models, "fp32", paths)
    # bf16 keeps 8 bits of each number: the vectors move, by far less than the thresholds' scale
    moved = max(np.abs(idx.clip - clip32).max(), np.abs(idx.dino - dino32).max())
    assert 0 < moved < 0.05, moved


def test_a_grown_index_keeps_its_precision_and_another_one_is_refused(tmp_path, photos_dir, tiny_models, monkeypatch):
    from PIL import Image

    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat", "coffee"))
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="g", precision="bf16"))
    before = open_index(tmp_path / "idx", "g")
    Image.open(photos_dir / "rocket.png").resize((64, 48)).save(photos / "rocket.png")
    with pytest.raises(EncoderMismatchError) as err:
        embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="g", precision="fp32"))
    assert str(err.value) == (
        f"index 'g' was embedded in bf16, not fp32: one index holds one precision (mixed, whether a pair passes a "
        f"threshold would depend on when its images were embedded). Pass --precision bf16 or auto (keeps it), use "
        f"another --name, or delete {before.folder} to rebuild in fp32"
    )
    assert open_index(tmp_path / "idx", "g").manifest == before.manifest  # nothing was written
    monkeypatch.setenv(P.ENV, "auto")  # auto: the index's own precision, not a measured one
    res = embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="g"))
    assert res.embedded_now == 1
    grown = open_index(tmp_path / "idx", "g")
    assert grown.manifest["precision"] == {"name": "bf16", "chosen": "forced"}  # as first chosen
    new = grown.images["path"] == "rocket.png"
    clip, dino = _encode(tiny_models, "bf16", [photos / "rocket.png"])
    assert np.allclose(grown.clip[new.to_numpy()], clip, atol=1e-6)
    assert np.allclose(grown.dino[new.to_numpy()], dino, atol=1e-6)
    kept_rows = grown.images["path"] != "rocket.png"
    assert np.array_equal(grown.clip[kept_rows.to_numpy()], before.clip)  # the old rows as they were


def test_an_index_from_before_the_record_keeps_the_dtype_its_encoders_ran_in(tmp_path, photos_dir, tiny_models):
    """job.json and manifest.json as vhmine wrote them before the precision record: encoders' dtype only."""
    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat", "coffee"))
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="old", precision="bf16"))
    folder = tmp_path / "idx" / "old"
    for f in (folder / "work" / "job.json", folder / "manifest.json"):
        record = json.loads(f.read_text())
        del record["precision"]
        f.write_text(json.dumps(record))
    with pytest.raises(EncoderMismatchError, match="index 'old' was embedded in bf16, not fp32"):
        embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="old", precision="fp32"))
    from PIL import Image

    Image.open(photos_dir / "rocket.png").resize((40, 40)).save(photos / "more.png")  # a new image: the index grows
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="old", precision="auto"))
    idx = open_index(tmp_path / "idx", "old")
    assert len(idx.images) == 4 and "more.png" in set(idx.images["path"])
    assert idx.manifest["precision"] == {"name": "bf16", "chosen": "index"}
    assert {idx.manifest["encoders"][k]["dtype"] for k in ("clip", "dino")} == {"bfloat16"}


def test_a_job_that_never_finished_a_shard_starts_again_in_the_precision_now_named(tmp_path, photos_dir, tiny_models):
    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat"))
    work = tmp_path / "idx" / "s" / "work"
    work.mkdir(parents=True)
    (work / "job.json").write_text(  # a job stopped while its encoders loaded: its record, no shard
        json.dumps(
            {
                "clip_model": tiny_models[0],
                "dino_model": tiny_models[1],
                "root": str(photos),
                "precision": {"name": "bf16", "chosen": "forced"},
            }
        )
    )
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="s", precision="fp32"))
    assert open_index(tmp_path / "idx", "s").manifest["precision"]["name"] == "fp32"


def test_cli_precision_option(tmp_path, photos_dir, tiny_models):
    from typer.testing import CliRunner

    from vhmine.cli import app

    photos = copy_photos(tmp_path / "photos", photos_dir, ("astronaut", "cat"))
    base = ["embed", str(photos), "--indexes", str(tmp_path / "idx"), "--clip-model", tiny_models[0]]
    base += ["--dino-model", tiny_models[1], "--device", "cpu", "--workers", "0"]
    r = CliRunner().invoke(app, [*base, "--precision", "half"])
    assert r.exit_code == 2 and "--precision half: use fp32, bf16, fp16 or auto" in r.output, r.output
    assert not (tmp_path / "idx").exists()
    r = CliRunner().invoke(app, [*base, "--precision", "fp16"])
    assert r.exit_code == 0, r.output
    assert "embedding precision: fp16 (named by --precision)" in r.output
    assert json.loads((tmp_path / "idx" / "photos" / "manifest.json").read_text())["precision"]["name"] == "fp16"
