"""mine.scatter: scatter.png, drawn in numpy and written by Pillow. Its legend says the run's counts (how many
pairs of the box were written; whether the grey background is every pair or a sample); each point and both
thresholds are drawn where the axes put them; the axes hold every point and the box for any data; the discs'
dilation equals stamping each disc; no matplotlib is loaded, and the same data draws the same bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.scatter import (
    BACKGROUND_OPACITY,
    GREY,
    RED,
    nice_ticks,
    scatter_axes,
    stamp_discs,
    tick_label,
    write_scatter,
)


def test_scatter_legend_says_how_many_of_the_box_were_written(tmp_path):
    import numpy as np

    clip, dino = np.array([0.95, 0.94, 0.93, 0.92, 0.91]), np.array([0.1, 0.2, 0.3, 0.9, 0.95])
    background = (np.array([0.1, 0.2]), np.array([0.1, 0.3]))
    labels = write_scatter(tmp_path / "a.png", clip, dino, background, 0.9, 0.5, title="t", written=2)  # --max-pairs 2
    assert labels[1:] == [
        "CLIP-alike, DINOv2-alike (2)",
        "in the box (3); 2 of them written (--max-pairs / --max-per-image)",
    ]
    labels = write_scatter(tmp_path / "b.png", clip, dino, background, 0.9, 0.5, title="t", written=3)
    assert labels[2] == "in the box: mined and written (3)"
    assert (tmp_path / "a.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "n, legend", [(40, r"all pairs \(780\)"), (260, "a random sample of 19,92\\d pairs \\(of 33,670\\)")]
)
def test_scatter_background_says_whether_it_is_every_pair_or_a_sample(tmp_path, n, legend):
    """It said "all pairs, or a random sample (741)" either way."""
    import json
    import re

    import numpy as np
    from helpers import make_index, unit_rows

    from vhmine.mine import MineOptions, mine_index

    rng = np.random.default_rng(n)
    make_index(
        tmp_path / "idx",
        "syn",
        unit_rows(rng.normal(size=(n, 8))),
        unit_rows(rng.normal(size=(n, 4))),
        root=tmp_path / "imgs",
    )
    mine_index(
        MineOptions(index="syn", indexes=tmp_path / "idx", clip=0.9, dino=0.2, out=tmp_path / "r", progress=False)
    )
    labels = json.loads((tmp_path / "r" / "run.json").read_text())["scatter_legend"]
    assert re.fullmatch(legend, labels[0]), labels


def _colour_at(path, axes, x, y):
    from PIL import Image

    col, row = axes.pixel(x, y)
    return np.asarray(Image.open(path).convert("RGB"))[int(round(float(row))), int(round(float(col)))].astype(int)


def _near(got, want, tol=12):
    return bool(np.all(np.abs(np.asarray(got) - np.asarray(want)) <= tol))


def test_each_layer_and_both_thresholds_are_drawn_where_the_axes_put_them(tmp_path):
    clip, dino = np.array([0.95, 0.97]), np.array([0.2, 0.8])  # one in the box (red), one above it (blue)
    background = (np.array([0.37]), np.array([0.13]))  # (off the grid lines)
    write_scatter(tmp_path / "s.png", clip, dino, background, 0.9, 0.5, title="t")
    axes, lo = scatter_axes(clip, dino, background, 0.9, 0.5)
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.95, 0.2), RED)
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.97, 0.8), (76, 114, 176))
    # the background, partly transparent over white
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.37, 0.13), [255 + (c - 255) * BACKGROUND_OPACITY for c in GREY])
    # the thresholds: a red line along CLIP = 0.9 (above the box, where nothing else is) and along DINOv2 = 0.5
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.9, 0.75), RED, tol=40)
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.6, 0.5), RED, tol=40)
    # and nothing where no point is
    assert _near(_colour_at(tmp_path / "s.png", axes, 0.6, 0.8), (255, 255, 255), tol=30)
    assert lo < min(dino.min(), background[1].min())


def test_the_same_data_draws_the_same_bytes_and_matplotlib_stays_out(tmp_path):
    import subprocess
    import sys

    draw = (
        "import sys\n"
        "import numpy as np\n"
        "from vhmine.mine.scatter import write_scatter\n"
        "rng = np.random.default_rng(0)\n"
        "bg = rng.uniform(-0.2, 0.8, 3000), rng.uniform(-0.2, 0.8, 3000)\n"
        "clip, dino = rng.uniform(0.9, 1, 2000), rng.uniform(0.2, 1, 2000)\n"
        "write_scatter(sys.argv[1], clip, dino, bg, 0.9, 0.55, title='t: 2000 pairs', written=700, pairs=10**6)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n"
    )
    for name in ("one", "two"):
        r = subprocess.run([sys.executable, "-c", draw, str(tmp_path / f"{name}.png")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "[]"
    assert (tmp_path / "one.png").read_bytes() == (tmp_path / "two.png").read_bytes()
    assert (tmp_path / "one.png").stat().st_size > 10_000  # a picture with the points in it


finite = st.floats(-1.0, 1.0, allow_nan=False)


@given(
    st.lists(st.tuples(finite, finite), max_size=30),
    st.lists(st.tuples(finite, finite), max_size=30),
    st.floats(-0.5, 0.99),
    st.floats(-0.5, 0.99),
)
def test_the_axes_hold_every_point_the_box_and_the_thresholds_with_round_ticks(alike, bg, clip_min, dino_max):
    clip, dino = (np.array([p[k] for p in alike], float) for k in (0, 1))
    background = tuple(np.array([p[k] for p in bg], float) for k in (0, 1))
    axes, lo = scatter_axes(clip, dino, background, clip_min, dino_max)
    xs = np.r_[clip, background[0], clip_min, 1.0]
    ys = np.r_[dino, background[1], dino_max, lo]
    assert axes.x0 < xs.min() and xs.max() < axes.x1 and axes.y0 < ys.min() and ys.max() < axes.y1
    assert lo < min([-0.1, dino_max, *dino, *background[1]])
    for a, b in ((axes.x0, axes.x1), (axes.y0, axes.y1)):
        ticks = nice_ticks(a, b)
        assert 2 <= len(ticks) <= 8 and np.all(np.diff(ticks) > 0) and a <= ticks[0] and ticks[-1] <= b
        labels = [tick_label(t, ticks[1] - ticks[0]) for t in ticks]
        negative_zero = any(x.startswith("\u2212") and float(x[1:]) == 0 for x in labels)
        assert len(set(labels)) == len(labels) and not negative_zero
        assert all(abs(float(x.replace("\u2212", "-")) - t) < (ticks[1] - ticks[0]) / 2 for x, t in zip(labels, ticks))


@given(
    st.lists(st.tuples(st.integers(-12, 40), st.integers(-12, 50)), max_size=25),
    st.floats(0.5, 6.0),
)
def test_thestamp_discs_dilation_is_every_disc_stamped_one_by_one(centres, radius):
    h, w = 30, 41
    rows, cols = (np.array([c[k] for c in centres], np.int64) for k in (0, 1))
    want = np.zeros((h, w), bool)
    yy, xx = np.mgrid[0:h, 0:w]
    for r, c in zip(rows, cols):
        want |= (yy - r) ** 2 + (xx - c) ** 2 <= np.floor(radius) ** 2 + (radius**2 - np.floor(radius) ** 2)
    got = stamp_discs(rows, cols, h, w, radius)
    assert np.array_equal(got, want)
