"""Where the real benchmark files the tests compare against are: tests/fixtures/anchors/ (HallusionBench and POPE
question files with their licences, see its README.md), inside the repository so that a fresh clone runs
every test that needs them. VHMINE_ANCHORS points elsewhere; a missing file fails the test, never skips it."""

import os
from pathlib import Path


def anchors_dir() -> Path:
    env = os.environ.get("VHMINE_ANCHORS")
    return Path(env) if env else Path(__file__).resolve().parent / "fixtures" / "anchors"


def anchor(rel: str) -> Path:
    p = anchors_dir() / rel
    if not p.is_file():
        raise FileNotFoundError(
            f"real benchmark file {p} is absent: it ships in tests/fixtures/anchors/ "
            "(or set VHMINE_ANCHORS to a folder that has it)"
        )
    return p
