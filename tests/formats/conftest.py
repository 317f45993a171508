"""The harness tests' fixtures: `bench`, a tiny benchmark of three random images and eleven items (per test
module), and `vlmeval`, the stand-in VLMEvalKit package importable for one test."""

import sys

import numpy as np
import pytest
from harness_standins import STAND_IN
from PIL import Image

from vhmine.bench import BenchItem, Benchmark


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(1)
    p = []
    for i in range(3):
        p.append(d / f"im{i}.png")
        Image.fromarray(rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)).save(p[-1])
    q = "Are there exactly 4 cats in the picture?"
    items = [
        BenchItem("c-oeq-a", "counting", "OEQ", "How many cats are there?", ("4",), None, str(p[0]), "i0", "p:O"),
        BenchItem("c-oeq-b", "counting", "OEQ", "How many cats are there?", ("2", "two"), None, str(p[1]), "i1", "p:O"),
        BenchItem(
            "p-oeq",
            "position",
            "OEQ",
            "Where is the cat relative to the dog?",
            ("to the left of",),
            None,
            str(p[2]),
            "i2",
        ),
        BenchItem("c-ynq-a", "counting", "YNQ", q, ("Yes",), True, str(p[0]), "i0", "p:Y"),
        BenchItem("c-ynq-b", "counting", "YNQ", q, ("No",), False, str(p[1]), "i1", "p:Y"),
        BenchItem("c-ynq-c", "counting", "YNQ", "Are there 2 cats?", ("Yes",), True, str(p[1]), "i1"),
        BenchItem("c-ynq-d", "counting", "YNQ", "Are there 9 cats?", ("No",), False, str(p[0]), "i0"),
        BenchItem("o-ynq-1", "ocr", "YNQ", 'Does the sign say "STOP"?', ("Yes",), True, str(p[2]), "i2"),
        BenchItem("o-ynq-2", "ocr", "YNQ", 'Does the sign say "SHOP"?', ("No",), False, str(p[2]), "i2"),
        BenchItem("o-ynq-3", "ocr", "YNQ", 'Does the sign say "EXIT"?', ("No",), False, str(p[0]), "i0"),
        BenchItem("o-ynq-4", "ocr", "YNQ", 'Does the sign say "OPEN"?', ("Yes",), True, str(p[1]), "i1"),
    ]
    return Benchmark("tiny", items)


@pytest.fixture
def vlmeval(tmp_path, monkeypatch):
    """The stand-in `vlmeval` importable, LMUData in tmp_path; removed from sys.modules afterwards."""
    root = tmp_path / "standin"
    for rel, text in STAND_IN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("LMUData", str(tmp_path / "LMUData"))
    yield root
    for name in [m for m in sys.modules if m == "vlmeval" or m.startswith("vlmeval.") or m == "vhmine_vlmevalkit"]:
        del sys.modules[name]
