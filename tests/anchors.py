"""Where the real benchmark files of ../shared/anchors are (VHMINE_ANCHORS overrides); tests skip without them."""

import os
from pathlib import Path

import pytest


def anchors_dir() -> Path:
    env = os.environ.get("VHMINE_ANCHORS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "anchors"


def anchor(rel: str) -> Path:
    p = anchors_dir() / rel
    if not p.is_file():
        pytest.skip(f"real benchmark file {p} is absent: clone shared/ beside the repo or set VHMINE_ANCHORS")
    return p
