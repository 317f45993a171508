"""Shared fixtures: tiny real encoders (built once per session, saved in their real formats) and
real photos from scikit-image. Hub look-ups are switched off: nothing is downloaded in tests."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """(clip_spec, dino_spec) of tiny random-weight encoders saved as local-dir / save_pretrained folders."""
    from vhmine import tiny

    root = tmp_path_factory.mktemp("models")
    return tiny.build_clip(root / "clip"), tiny.build_dino(root / "dino")


@pytest.fixture(scope="session")
def photos_dir(tmp_path_factory):
    """scikit-image's sample photos as PNG files (cat.png and chelsea.png are the same picture)."""
    from vhmine.demo import write_sample_photos

    folder = tmp_path_factory.mktemp("photos")
    write_sample_photos(folder)
    return folder
