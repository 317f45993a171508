"""formats: an imported benchmark's image paths stay inside its folder (or --images), so a crafted benchmark never
makes `eval --model` upload another file; unusable paths are named."""

import base64
import json
import os
from pathlib import Path

import pytest
from helpers import make_ready_store, re_search
from openai_server import png_bytes

from vhmine import formats as F
from vhmine.errors import EvalError, InputError
from vhmine.export.job import ExportOptions, export_benchmark

# --- the llava split ------------------------------------------------------------------------------


# --- image paths of imported benchmarks stay inside their folder ---------------------------------


def _secret(tmp_path: Path) -> Path:
    p = tmp_path / "private" / "secret.png"
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(png_bytes(424242))
    return p


def _craft(fmt: str, bench: Path, image: str) -> tuple[Path, str]:
    """A one-question benchmark of `fmt` in `bench` whose image path is `image`: (its file, where-regex)."""
    bench.mkdir(parents=True, exist_ok=True)
    if fmt == "pope":
        (bench / "images").mkdir(exist_ok=True)
        f = bench / "questions.jsonl"
        f.write_text(
            json.dumps({"question_id": 1, "image": image, "text": "Is there a cat in the image?", "label": "yes"})
            + "\n"
        )
        return f, r"questions\.jsonl, line 1, field image"
    if fmt == "hallusionbench":
        f = bench / "HallusionBench.json"
        f.write_text(
            json.dumps(
                [
                    {
                        "category": "VD",
                        "subcategory": "illusion",
                        "visual_input": "1",
                        "set_id": "0",
                        "figure_id": "0",
                        "question_id": "0",
                        "question": "Is the left line longer?",
                        "gt_answer": "0",
                        "gt_answer_details": "",
                        "filename": image,
                    }
                ]
            )
        )
        return f, r"HallusionBench\.json, row 0, field filename"
    if fmt == "llava":
        rec = {
            "id": "q1",
            "image": image,
            "conversations": [{"from": "human", "value": "<image>\nIs there a cat?"}, {"from": "gpt", "value": "Yes"}],
        }
        (bench / "train.json").write_text(json.dumps([rec]))
        (bench / "test.json").write_text("[]")
        return bench / "train.json", r"train\.json, record 0, field image"
    if fmt == "vhtest":
        import pandas as pd

        (bench / "YNQ_Benchmark").mkdir(exist_ok=True)
        (bench / "Images" / "counting").mkdir(parents=True, exist_ok=True)
        f = bench / "YNQ_Benchmark" / "counting.xlsx"
        pd.DataFrame(
            [
                {
                    "Image": image,
                    "image_path": image,
                    "yes_or_no_question": "Are there 3 cats?",
                    "yes_or_no_ground_truth": "y",
                }
            ]
        ).to_excel(f, index=False)
        return f, r"counting\.xlsx, row 2, field (Image|image_path)"
    raise AssertionError(fmt)


# how each format's reader spells "the secret, by way of ..": (absolute, `..`, a symlink inside the folder)
ESCAPES = {
    "pope": lambda secret, bench: (str(secret), "../../private/secret.png", "link.png"),
    "hallusionbench": lambda secret, bench: (str(secret), "./../private/secret.png", "./link.png"),
    "llava": lambda secret, bench: (str(secret), "../private/secret.png", "link.png"),
    "vhtest": lambda secret, bench: (str(secret), "../../../private/secret.png", "link.png"),
}
LINK_AT = {
    "pope": "images/link.png",
    "hallusionbench": "link.png",
    "llava": "link.png",
    "vhtest": "Images/counting/link.png",
}


@pytest.mark.parametrize("fmt", sorted(ESCAPES))
@pytest.mark.parametrize("how", [0, 1, 2], ids=["absolute", "dotdot", "symlink"])
def test_image_path_leaving_the_benchmark_is_refused(tmp_path, fmt, how):
    secret = _secret(tmp_path)
    bench = tmp_path / "bench"
    f, where = _craft(fmt, bench, ESCAPES[fmt](secret, bench)[how])
    if how == 2:
        os.symlink(secret, bench / LINK_AT[fmt])
    with pytest.raises(InputError, match=rf"{where}: image path .* leads outside .*--images"):
        F.load(bench, fmt)


def test_unusable_image_path_is_named(tmp_path):
    f, where = _craft("llava", tmp_path / "bench", "a\0.png")
    with pytest.raises(InputError, match=rf"{where}: 'a\\x00\.png' is not a usable image path"):
        F.load(tmp_path / "bench", "llava")


@pytest.mark.parametrize("fmt", sorted(ESCAPES))
def test_image_path_inside_the_benchmark_reads(tmp_path, fmt):
    bench = tmp_path / "bench"
    inside = {"pope": "a.png", "hallusionbench": "./a.png", "llava": "a.png", "vhtest": "a.png"}[fmt]
    _craft(fmt, bench, inside)
    target = {"pope": bench / "images" / "a.png", "vhtest": bench / "Images" / "counting" / "a.png"}.get(
        fmt, bench / "a.png"
    )
    target.write_bytes(png_bytes(1))
    b = F.load(bench, fmt)
    assert b.image_bytes(b.items[0]) == png_bytes(1)


def test_images_folder_confines_too(tmp_path):
    """With --images DIR, paths resolve in DIR and may not leave it either."""
    secret = _secret(tmp_path)
    imgs = tmp_path / "coco"
    imgs.mkdir()
    (imgs / "x.png").write_bytes(png_bytes(2))
    f, _ = _craft("pope", tmp_path / "bench", "x.png")
    b = F.load(f, images=imgs)
    assert b.image_bytes(b.items[0]) == png_bytes(2)
    f, where = _craft("pope", tmp_path / "bench2", "../private/" + secret.name)
    with pytest.raises(InputError, match=rf"{where}: image path '\.\./private/secret\.png' leads outside {imgs}"):
        F.load(f, images=imgs)


@pytest.mark.parametrize("fmt", sorted(ESCAPES))
def test_crafted_benchmark_never_makes_eval_upload_a_file(tmp_path, fmt, openai_server):
    """`vhmine eval --model` on a benchmark pointing at a file outside it stops before any request."""
    from typer.testing import CliRunner

    from vhmine.cli import app

    srv = openai_server
    secret = _secret(tmp_path)
    bench = tmp_path / "bench"
    _, where = _craft(fmt, bench, str(secret))
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--bench",
            str(bench),
            "--format",
            fmt,
            "--model",
            "fake-vlm",
            "--base-url",
            srv.base_url,
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert r.exit_code == 2, r.output
    assert re_search(where, r.output) and "leads outside" in r.output
    assert srv.requests == []
    sent = json.dumps([q["body"] for q in srv.requests])
    assert base64.b64encode(secret.read_bytes()).decode() not in sent


def test_eval_images_for_a_format_that_carries_its_own(tmp_path):
    from vhmine.eval.job import EvalOptions, evaluate

    store = make_ready_store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "vl", format="vlmevalkit"))
    store.close()
    p = tmp_path / "p.jsonl"
    p.write_text("")
    with pytest.raises(
        EvalError,
        match=r"^--images is for benchmarks whose images live apart \(pope, hallusionbench, llava\); "
        r"a vlmevalkit benchmark carries its own: drop --images$",
    ):
        evaluate(EvalOptions(bench=tmp_path / "vl", out=tmp_path / "ev", predictions=[("m", p)], images=tmp_path))


# --- exports hold nothing private by default -----------------------------------------------------
