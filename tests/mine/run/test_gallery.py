"""mine.gallery: the HTML page of a run's top pairs."""

from __future__ import annotations


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
