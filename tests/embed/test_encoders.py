"""encoders.py: spec parsing, loading tiny real models through the real loaders, preprocessing."""

import json
import time

import numpy as np
import pytest
import torch
from PIL import Image

from vhmine.embed import encoders
from vhmine.errors import EncoderError


def test_parse_clip_spec():
    assert encoders.parse_clip_spec("ViT-L-14:openai") == ("ViT-L-14", "openai")
    assert encoders.parse_clip_spec("ViT-B-32:/w/ckpt.pt") == ("ViT-B-32", "/w/ckpt.pt")
    assert encoders.parse_clip_spec("local-dir:/a/b") == ("local-dir:/a/b", None)
    assert encoders.parse_clip_spec("hf-hub:org/repo") == ("hf-hub:org/repo", None)
    assert encoders.parse_clip_spec("ViT-B-32") == ("ViT-B-32", None)


def _photo():
    import skimage.data

    return Image.fromarray(skimage.data.astronaut())


def test_local_dir_clip_embeds_normalised_and_matches_the_model(tiny_models):
    clip_spec, _ = tiny_models
    enc = encoders.load_clip(clip_spec, "cpu")
    x = enc.preprocess(_photo())
    assert x.shape == (3, 64, 64)
    v = enc.encode(torch.stack([x, x]))
    assert v.shape == (2, enc.dim) and enc.dim == 32
    assert torch.allclose(v.norm(dim=-1), torch.ones(2), atol=1e-6)
    with torch.no_grad():
        ref = torch.nn.functional.normalize(enc.model.encode_image(x[None]), dim=-1)
    assert torch.allclose(v[0], ref[0], atol=1e-6)
    d = enc.describe()
    assert d["preprocess"]["size"] in ((64, 64), [64, 64], 64) and d["library"] == "open_clip"


def test_checkpoint_path_spec_loads_registered_config(tmp_path, tiny_models):
    import open_clip

    clip_spec, _ = tiny_models
    folder = clip_spec[len("local-dir:") :]
    cfg = json.loads(open(f"{folder}/open_clip_config.json").read())["model_cfg"]
    (tmp_path / "cfgs").mkdir()
    (tmp_path / "cfgs" / "vhmine-test-tiny.json").write_text(json.dumps(cfg))
    open_clip.add_model_config(tmp_path / "cfgs")
    model = open_clip.create_model("vhmine-test-tiny")
    torch.save(model.state_dict(), tmp_path / "w.pt")
    enc = encoders.load_clip(f"vhmine-test-tiny:{tmp_path / 'w.pt'}", "cpu")
    x = enc.preprocess(_photo())[None]
    with torch.no_grad():
        ref = torch.nn.functional.normalize(model.eval().encode_image(x), dim=-1)
    assert torch.allclose(enc.encode(x), ref, atol=1e-6)


def test_clip_errors_say_what_to_do(tmp_path):
    (tmp_path / "open_clip_config.json").write_text("{}")
    with pytest.raises(EncoderError, match="no weights"):
        encoders.load_clip(f"local-dir:{tmp_path}")
    with pytest.raises(EncoderError, match="open_clip_config.json not found"):
        encoders.load_clip(f"local-dir:{tmp_path / 'nope'}")
    with pytest.raises(EncoderError, match="no pretrained weights named; use NAME:TAG"):
        encoders.load_clip("ViT-B-32")
    with pytest.raises(EncoderError, match="unknown open_clip model 'NoSuchNet'"):
        encoders.load_clip("NoSuchNet:openai")
    with pytest.raises(EncoderError, match="checkpoint file .* not found"):
        encoders.load_clip(f"ViT-B-32:{tmp_path / 'missing.pt'}")


def test_hub_models_offline_fail_fast_with_a_hint():
    t0 = time.time()
    with pytest.raises(EncoderError, match="unreachable: pass a local folder"):
        encoders.load_dino("facebook/dinov2-large")
    with pytest.raises(EncoderError, match="unreachable: pass local weights"):
        encoders.load_clip("ViT-L-14:openai")
    assert time.time() - t0 < 30  # no 50 s hub time-outs (generous bound on a shared machine)


def test_dino_cls_token_and_preprocess_match_transformers(tiny_models):
    from transformers import AutoImageProcessor, AutoModel

    _, dino_spec = tiny_models
    enc = encoders.load_dino(dino_spec, "cpu")
    assert enc.dim == 32
    odd = Image.fromarray((np.random.default_rng(0).random((77, 131, 3)) * 255).astype("uint8"))
    for img in (_photo(), odd):
        ours = enc.preprocess(img)
        # transformers' PIL backend is the one that matches how DINOv2 was trained (torchvision on PIL).
        ref = AutoImageProcessor.from_pretrained(dino_spec, backend="pil")(img, return_tensors="pt")["pixel_values"][0]
        assert ours.shape == ref.shape
        assert torch.allclose(ours, ref, atol=1e-5)
    x = enc.preprocess(_photo())[None]
    model = AutoModel.from_pretrained(dino_spec).eval()
    with torch.no_grad():
        cls = model(pixel_values=x).last_hidden_state[:, 0]
    assert torch.allclose(enc.encode(x), torch.nn.functional.normalize(cls, dim=-1), atol=1e-6)


def test_dino_folder_without_config_is_refused(tmp_path):
    with pytest.raises(EncoderError, match="config.json not found"):
        encoders.load_dino(str(tmp_path))


def test_cuda_asked_for_but_absent():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(EncoderError, match="no CUDA device"):
        encoders.resolve_device("cuda")


def test_unknown_device_name_says_what_to_use():
    with pytest.raises(EncoderError, match="--device gpu: not a device name; use cpu, cuda or cuda:N"):
        encoders.resolve_device("gpu")


def test_half_built_tiny_dino_folder_is_rebuilt(tmp_path):
    """A build killed after the model's config but before the processor is finished on the next call."""
    from vhmine.embed import tiny

    (tmp_path / "dino").mkdir()
    (tmp_path / "dino" / "config.json").write_text("{}")
    spec = tiny.build_dino(tmp_path / "dino")
    assert encoders.load_dino(spec, "cpu").dim == 32


def test_reachability_probes_the_configured_proxy(monkeypatch):
    """Behind a proxy, the hub host itself does not resolve, yet downloads work: probe the proxy."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        port = listener.getsockname()[1]
        for var in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{port}")
        monkeypatch.setattr(encoders, "_reachable_cache", {})
        assert encoders.host_reachable("hub.vhmine-test.invalid", 443, timeout=2)
        monkeypatch.setenv("no_proxy", "hub.vhmine-test.invalid")
        assert not encoders.host_reachable("hub.vhmine-test.invalid", 443, timeout=2)
    finally:
        listener.close()
