"""mine.gallery: the scatter plot's legend says how many pairs of the box were written."""

from __future__ import annotations


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
