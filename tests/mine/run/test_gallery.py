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


def _pairs_frame(tmp_path, across: bool):
    import numpy as np
    import pandas as pd
    from PIL import Image

    paths = []
    for k in range(3):
        p = tmp_path / f"g{k}.png"
        Image.fromarray(np.full((20, 30, 3), 60 * k, np.uint8)).save(p)
        paths.append(str(p))
    df = pd.DataFrame(
        {
            "rank": [1, 2],
            "image_id_a": ["a0", "a1"],
            "image_id_b": ["b0", "b1"],
            "path_a": paths[:2],
            "path_b": [paths[2], paths[2]],
            "clip_sim": [0.95, 0.93],
            "dino_sim": [0.2, 0.3],
            "gap": [0.75, 0.63],
            "categories_a": [["cat"], []],
            "categories_b": [[], []],
        }
    )
    if across:  # what a `vhmine mine --index coco --against my-photos` run's head holds
        df["index_a"], df["index_b"] = "coco", "my-photos"
    return df


def test_gallery_of_an_against_run_names_each_images_index_and_a_plain_run_is_as_before(tmp_path):
    import re

    from vhmine.mine.gallery import write_gallery

    write_gallery(tmp_path / "plain.html", _pairs_frame(tmp_path, False), title="t", subtitle="s")
    write_gallery(tmp_path / "across.html", _pairs_frame(tmp_path, True), title="t", subtitle="s")
    plain, across = ((tmp_path / n).read_text() for n in ("plain.html", "across.html"))
    assert "<th>image A</th><th>image B</th>" in plain and "index coco" not in plain and "my-photos" not in plain
    assert "<th>image A (coco)</th><th>image B (my-photos)</th>" in across
    captions = re.findall(r"<div class=meta>index ([^<]+)<br>(\w+)<br>", across)
    assert captions == [("coco", "a0"), ("my-photos", "b0"), ("coco", "a1"), ("my-photos", "b1")]
    # with the side names taken out, the page is the plain run's, byte for byte
    stripped = across.replace(" (coco)", "").replace(" (my-photos)", "").replace("index coco<br>", "")
    assert stripped.replace("index my-photos<br>", "") == plain


def test_gallery_head_of_sides_with_several_index_names_names_none(tmp_path):
    from vhmine.mine.gallery import write_gallery

    df = _pairs_frame(tmp_path, True)
    df.loc[1, "index_b"] = "other"
    write_gallery(tmp_path / "g.html", df, title="t")
    page = (tmp_path / "g.html").read_text()
    assert "<th>image A (coco)</th><th>image B</th>" in page and "index other<br>b1<br>" in page


def test_scatter_png_is_the_bytes_of_matplotlibs_own_import_and_pyplot_stays_out(tmp_path):
    # figure_classes imports matplotlib's figure without building the Artist classes' `set` docstrings; the
    # picture must be the one a process that imported matplotlib as usual draws, and pyplot is never loaded
    import subprocess
    import sys

    draw = (
        "import sys\n"
        "import numpy as np\n"
        "{before}\n"
        "from vhmine.mine.gallery import write_scatter\n"
        "rng = np.random.default_rng(0)\n"
        "bg = rng.uniform(-0.2, 0.8, 3000), rng.uniform(-0.2, 0.8, 3000)\n"
        "clip, dino = rng.uniform(0.9, 1, 2000), rng.uniform(0.2, 1, 2000)\n"
        "write_scatter(sys.argv[1], clip, dino, bg, 0.9, 0.55, title='t: 2000 pairs', written=700, pairs=10**6)\n"
        "print('pyplot' if 'matplotlib.pyplot' in sys.modules else 'no pyplot')\n"
    )
    outs = {}
    for name, before in (("ours", ""), ("usual", "import matplotlib.figure, matplotlib.backends.backend_agg")):
        r = subprocess.run(
            [sys.executable, "-c", draw.format(before=before), str(tmp_path / f"{name}.png")],
            capture_output=True,
            text=True,
            check=True,
        )
        outs[name] = r.stdout.strip()
    assert outs == {"ours": "no pyplot", "usual": "no pyplot"}
    assert (tmp_path / "ours.png").read_bytes() == (tmp_path / "usual.png").read_bytes()
    assert (tmp_path / "ours.png").stat().st_size > 10_000  # a picture with the points in it


def test_figure_classes_leave_matplotlibs_kwdoc_as_it_was():
    import matplotlib.artist

    from vhmine.mine.gallery import figure_classes

    kwdoc = matplotlib.artist.kwdoc
    canvas, figure, rectangle = figure_classes()
    assert matplotlib.artist.kwdoc is kwdoc
    assert figure.__name__ == "Figure" and rectangle.__name__ == "Rectangle" and canvas.__name__ == "FigureCanvasAgg"
