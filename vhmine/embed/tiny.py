"""Tiny encoders with random weights, built locally and saved in the real on-disk formats.

The offline demo, the tests and the CPU benchmarks load these through the same code as real
models (`local-dir:` for open_clip, `from_pretrained` for DINOv2). Their embeddings mean nothing:
they exist so the pipeline runs where no weights can be downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path


def build_clip(
    folder: Path,
    *,
    seed: int = 0,
    image_size: int = 64,
    width: int = 64,
    layers: int = 2,
    patch_size: int = 16,
    embed_dim: int = 32,
    like: str | None = None,
) -> str:
    """Write an open_clip `local-dir:` folder (config + safetensors); returns its --clip-model spec.

    `like="ViT-L-14"` copies a built-in architecture instead (random weights cost what real ones do).
    """
    import open_clip
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    spec = f"local-dir:{folder}"
    if (folder / "open_clip_model.safetensors").is_file():
        return spec
    if like:
        model_cfg = open_clip.get_model_config(like)
        image_size = model_cfg["vision_cfg"]["image_size"]
    else:
        model_cfg = {
            "embed_dim": embed_dim,
            "vision_cfg": {"image_size": image_size, "layers": layers, "width": width, "patch_size": patch_size},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
        }
    torch.manual_seed(seed)
    model = open_clip.CLIP(**model_cfg)
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "model_cfg": model_cfg,
        "preprocess_cfg": {"size": image_size, "interpolation": "bicubic", "resize_mode": "shortest"},
    }
    (folder / "open_clip_config.json").write_text(json.dumps(config, indent=2))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "open_clip_model.safetensors"))
    return spec


def build_dino(
    folder: Path,
    *,
    seed: int = 0,
    image_size: int = 56,
    hidden_size: int = 32,
    layers: int = 2,
    heads: int = 2,
    patch_size: int = 14,
) -> str:
    """Write a DINOv2 folder (config, weights, image processor) with save_pretrained; returns its path."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    folder = Path(folder)
    # The processor is saved last: with it there, the model's config and weights are there too.
    if (folder / "config.json").is_file() and (folder / "preprocessor_config.json").is_file():
        return str(folder)
    torch.manual_seed(seed)
    config = Dinov2Config(
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden_size * 4,
        image_size=image_size,
        patch_size=patch_size,
    )
    model = Dinov2Model(config)
    processor = BitImageProcessor(
        do_resize=True,
        size={"shortest_edge": image_size + image_size // 7},
        resample=3,
        do_center_crop=True,
        crop_size={"height": image_size, "width": image_size},
        do_normalize=True,
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    )
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return str(folder)
