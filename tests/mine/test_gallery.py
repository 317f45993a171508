"""mine.gallery: the scatter plot's legend says how many pairs of the box were written, and whether its grey
background is every pair of the collection or a random sample of them."""

from __future__ import annotations

import pytest


def test_scatter_legend_says_how_many_of_the_box_were_written(tmp_path):
    import numpy as np

    from vhmine.mine.gallery import write_scatter

    clip, dino = np.array([0.95, 0.94, 0.93, 0.92, 0.91]), np.array([0.1, 0.2, 0.3, 0.9, 0.95])
    background = (np.array([0.1, 0.2]), np.array([0.1, 0.3]))
    labels = write_scatter(tmp_path / "a.png", clip, dino, background, 0.9, 0.5, title="t", written=2)  # --max-pairs 2
    assert labels[1:] == ["CLIP-alike, DINOv2-alike (2)", "in the box (3); 2 of them written (--max-pairs / --max-per-image)"]
    labels = write_scatter(tmp_path / "b.png", clip, dino, background, 0.9, 0.5, title="t", written=3)
    assert labels[2] == "in the box: mined and written (3)"
    assert (tmp_path / "a.png").stat().st_size > 1000


@pytest.mark.parametrize("n, legend", [(40, r"all pairs \(780\)"), (260, "a random sample of 19,92\\d pairs \\(of 33,670\\)")])
def test_scatter_background_says_whether_it_is_every_pair_or_a_sample(tmp_path, n, legend):
    """It said "all pairs, or a random sample (741)" either way."""
    import json
    import re

    import numpy as np

    from helpers import make_index, unit_rows
    from vhmine.mine.job import MineOptions, mine_index

    rng = np.random.default_rng(n)
    make_index(tmp_path / "idx", "syn", unit_rows(rng.normal(size=(n, 8))), unit_rows(rng.normal(size=(n, 4))),
               root=tmp_path / "imgs")
    mine_index(MineOptions(index="syn", indexes=tmp_path / "idx", clip=0.9, dino=0.2, out=tmp_path / "r", progress=False))
    labels = json.loads((tmp_path / "r" / "run.json").read_text())["scatter_legend"]
    assert re.fullmatch(legend, labels[0]), labels
