"""vhmine.embed.backend through `vhmine embed --backend`: the runtime named, measured or fallen back to,
recorded in manifest.json; OpenVINO's embeddings against torch's (where openvino is installed: the `cpu`
extra); with tiny real encoders (tests/conftest.py's tiny_models) on scikit-image's photos."""

import builtins
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import copy_photos, embed_options  # noqa: E402

from vhmine.embed import backend as B  # noqa: E402
from vhmine.embed.job import embed_collection  # noqa: E402
from vhmine.errors import InputError  # noqa: E402


def _no_openvino(monkeypatch):
    """An install without the `cpu` extra: `import openvino` fails."""
    real = builtins.__import__

    def fake(name, *args, **kw):
        if name == "openvino" or name.startswith("openvino."):
            raise ImportError("No module named 'openvino'")
        return real(name, *args, **kw)

    monkeypatch.delitem(sys.modules, "openvino", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake)


def _manifest(indexes, name):
    return json.loads((Path(indexes) / name / "manifest.json").read_text())


def test_requested_reads_the_option_then_the_variable(monkeypatch):
    monkeypatch.delenv(B.ENV, raising=False)
    assert B.requested(None) == "auto" and B.requested("OpenVINO") == "openvino"
    monkeypatch.setenv(B.ENV, "torch")
    assert B.requested(None) == "torch" and B.requested("auto") == "auto"  # the option wins
    with pytest.raises(InputError, match="--backend onnx: use torch, openvino or auto"):
        B.requested("onnx")


def test_embed_records_the_runtime_in_the_manifest_and_falls_back_without_openvino(
    tmp_path, tiny_models, photos_dir, monkeypatch, caplog
):
    copy_photos(tmp_path / "imgs", photos_dir, ("astronaut", "cat", "coffee"))
    embed_collection(embed_options(tmp_path / "imgs", tmp_path / "idx", tiny_models, name="t", backend="torch"))
    rec = _manifest(tmp_path / "idx", "t")["backend"]
    assert (rec["name"], rec["chosen"], rec["batch_size"]) == ("torch", "forced", 4) and rec["threads"] >= 1

    _no_openvino(monkeypatch)
    assert B.openvino_version() is None
    with caplog.at_level("WARNING"):
        embed_collection(embed_options(tmp_path / "imgs", tmp_path / "idx", tiny_models, name="f", backend="openvino"))
    rec = _manifest(tmp_path / "idx", "f")["backend"]
    assert (rec["name"], rec["chosen"]) == ("torch", "fallback") and "not installed" in rec["note"]
    assert "openvino named but not installed" in caplog.text
    # auto without the package: torch, the one installed, and nothing measured
    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path / "b.json"))
    embed_collection(embed_options(tmp_path / "imgs", tmp_path / "idx", tiny_models, name="a", backend="auto"))
    assert _manifest(tmp_path / "idx", "a")["backend"]["chosen"] == "only"
    assert not (tmp_path / "b.json").exists()
    # the same vectors whichever way torch was come to
    from vhmine.index import open_index

    t, f = open_index(tmp_path / "idx", "t"), open_index(tmp_path / "idx", "f")
    assert np.array_equal(t.clip, f.clip) and np.array_equal(t.dino, f.dino)


def _encoders(specs, precision):
    import torch

    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.embed.precision import choose

    encoders = (load_clip(specs[0], "cpu"), load_dino(specs[1], "cpu"))
    choose(encoders, torch.device("cpu"), precision)
    return encoders


def _vectors(encoders, batch):
    return [enc.encode(batch[enc.kind]).numpy() for enc in encoders]


@pytest.mark.slow
@pytest.mark.parametrize("precision, bound", [("fp32", 0.9999), ("bf16", 0.99)])
def test_openvino_embeddings_are_torch_fp32s_within_the_precisions_rounding(
    tiny_models, tmp_path, monkeypatch, precision, bound
):
    ov_package = pytest.importorskip("openvino")
    import torch

    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path / "b.json"))
    from vhmine.embed.precision import example_input

    ref = _encoders(tiny_models, "fp32")
    rng = np.random.default_rng(0)
    batch = {}
    for e in ref:
        x, shape = example_input(e)
        batch[e.kind] = x.repeat(5, 1, 1, 1) + torch.from_numpy(rng.normal(0, 0.5, (5, *shape)).astype("f4"))
    want = _vectors(ref, batch)
    ov = _encoders(tiny_models, precision)
    choice = B.choose(ov, torch.device("cpu"), "openvino", precision)
    assert choice.name == "openvino" and choice.source == "forced"
    assert all(isinstance(e.model, B.OpenVINOModel) for e in ov)
    for w, g in zip(want, _vectors(ov, batch)):
        assert g.shape == w.shape and g.dtype == np.float32
        cos = (w * g).sum(axis=1)  # both L2-normalised
        assert cos.min() >= bound, (precision, cos)
    # batches of another size run on the same converted model (its batch is dynamic)
    assert [v.shape[0] for v in _vectors(ov, {k: v[:2] for k, v in batch.items()})] == [2, 2]
    # the converted encoders were kept: a second load reads them, converts nothing and gives the same vectors
    kept = sorted(p.name.split("-")[0] for p in (tmp_path / "openvino").glob("*.xml"))
    assert kept == ["clip", "dino"] and all(
        p.with_suffix(".bin").is_file() for p in (tmp_path / "openvino").glob("*.xml")
    )

    def no_conversion(*args, **kw):
        raise AssertionError("converted again")

    monkeypatch.setattr(ov_package, "convert_model", no_conversion)
    again = _encoders(tiny_models, precision)
    B.choose(again, torch.device("cpu"), "openvino", precision)
    for w, g in zip(_vectors(ov, batch), _vectors(again, batch)):
        assert np.array_equal(w, g)


@pytest.mark.slow
def test_auto_measures_both_runtimes_once_then_reads_the_cache(tiny_models, tmp_path, monkeypatch):
    pytest.importorskip("openvino")
    import torch

    monkeypatch.setenv(B.CACHE_ENV, str(tmp_path / "b.json"))
    cache = tmp_path / "b.json"
    converted, convert = [], B.convert
    monkeypatch.setattr(B, "convert", lambda enc, *a: converted.append(enc.kind) or convert(enc, *a))
    first = B.choose(_encoders(tiny_models, "fp32"), torch.device("cpu"), "auto", "fp32", cache=cache)
    assert first.source == "measured" and set(first.rates) == {"torch", "openvino"} and min(first.rates.values()) > 0
    assert converted == ["clip", "dino"]  # the measured conversions run the encoders: none converted twice
    want = "openvino" if first.rates["openvino"] >= B.MIN_GAIN * first.rates["torch"] else "torch"
    assert first.name == want
    encoders = _encoders(tiny_models, "fp32")
    second = B.choose(encoders, torch.device("cpu"), "auto", "fp32", cache=cache)
    assert (second.source, second.rates, second.name) == ("cached", first.rates, first.name)
    assert isinstance(encoders[0].model, B.OpenVINOModel) == (want == "openvino")
    assert len(json.loads(cache.read_text())["entries"]) == 1
