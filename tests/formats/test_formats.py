"""vhmine.formats: every format round-trips without loss; VHTest sheets read as VHTest reads them;
the real HallusionBench and POPE files import; malformed files name the file, row and field."""

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from anchors import anchor
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from vhmine import formats as F
from vhmine.bench import BenchItem, Benchmark
from vhmine.errors import FormatError, InputError


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = tmp_path_factory.mktemp("imgs")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        p = d / f"im{i}.png"
        Image.fromarray(rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    jpg = d / "photo.jpg"
    Image.fromarray(rng.integers(0, 255, (9, 9, 3), dtype=np.uint8)).save(jpg)
    items = [
        BenchItem(
            "c-oeq-a",
            "counting",
            "OEQ",
            "How many cats are there in the picture?",
            ("4", "5"),
            None,
            paths[0],
            "img0",
            "p1:OEQ:q",
            {"slots": {"object": "cats"}, "template_id": "counting.how_many"},
        ),
        BenchItem(
            "c-oeq-b",
            "counting",
            "OEQ",
            "How many cats are there in the picture?",
            ("2",),
            None,
            paths[1],
            "img1",
            "p1:OEQ:q",
            {"slots": {"object": "cats"}},
        ),
        BenchItem(
            "c-ynq-a",
            "counting",
            "YNQ",
            "Are there exactly 4 cats in the picture?",
            ("Yes",),
            True,
            paths[0],
            "img0",
            "p1:YNQ:q",
            {},
        ),
        BenchItem(
            "c-ynq-b",
            "counting",
            "YNQ",
            "Are there exactly 4 cats in the picture?",
            ("No",),
            False,
            paths[1],
            "img1",
            "p1:YNQ:q",
            {},
        ),
        BenchItem(
            "o-ynq-1",
            "ocr",
            "YNQ",
            'Does the text on the sign say "STOP"?',
            ("Yes",),
            True,
            paths[2],
            "img2",
            None,
            {"x": [1, "ü"]},
        ),
        BenchItem(
            "o-ynq-2", "ocr", "YNQ", 'Does the text on the sign say "SHOP"?', ("No",), False, paths[2], "img2", None, {}
        ),
        BenchItem(
            "p-oeq",
            "position",
            "OEQ",
            "Where is the cat relative to the dog?",
            ("to the left of",),
            None,
            str(jpg),
            "imgj",
            None,
            {},
        ),
    ]
    return Benchmark("tiny", items)


def _plain(items):
    return sorted((replace(it, image=None, image_data=None) for it in items), key=lambda it: it.id)


@pytest.mark.parametrize("fmt", ["vhtest", "vlmevalkit", "hf", "pope", "llava", "hallusionbench", "lmms-eval", "mmvp"])
def test_round_trip_loses_nothing(bench, tmp_path, fmt):
    src = bench.select(kind="YNQ") if fmt in ("pope", "hallusionbench") else bench
    if fmt == "mmvp":  # MMVP's layout holds yes/no questions in pairs only
        from vhmine.formats.mmvp import pairs_only

        src, left = pairs_only(bench.select(kind="YNQ"))
        assert (len(src), left) == (2, 2)
    F.write(fmt, src, tmp_path)
    back = F.read(fmt, tmp_path)
    assert F.detect(tmp_path) == fmt
    assert _plain(back) == _plain(src)
    got = {it.id: back.image_bytes(it) for it in back}
    for it in src:
        data = src.image_bytes(it)
        if fmt == "vhtest" and it.image.endswith(".jpg"):
            assert got[it.id][:8] == b"\x89PNG\r\n\x1a\n"  # VHTest's layout is PNG: converted, same pixels
            assert np.array_equal(
                np.asarray(Image.open(it.image)), np.asarray(Image.open(back.image_path(back.by_id()[it.id])))
            )
        elif fmt == "mmvp" and not data.startswith(b"\xff\xd8\xff"):  # MMVP's images are JPEG: converted
            assert got[it.id][:3] == b"\xff\xd8\xff"
            pixels = [np.asarray(Image.open(io.BytesIO(b)).convert("RGB"), dtype=float) for b in (got[it.id], data)]
            assert np.abs(pixels[0] - pixels[1]).mean() < 8  # quality 95, no chroma subsampling
        else:
            assert got[it.id] == data


def test_hallusionbench_layout_keeps_our_ids_and_modes(bench, tmp_path):
    src = bench.select(kind="YNQ")
    F.write("hallusionbench", src, tmp_path)
    back = F.read("hallusionbench", tmp_path)
    assert sorted((it.id, it.mode, it.question, it.truth) for it in back) == sorted(
        (it.id, it.mode, it.question, it.truth) for it in src
    )
    for it in src:
        assert back.image_bytes(back.by_id()[it.id]) == src.image_bytes(it)
    rows = json.loads((tmp_path / "HallusionBench.json").read_text())
    assert {r["category"] for r in rows} == {"VD"} and all(r["gt_answer"] in ("0", "1") for r in rows)


def test_vhtest_sheets_read_as_vhtest_reads_them(bench, tmp_path):
    import pandas as pd

    F.write("vhtest", bench, tmp_path)
    assert sorted(p.name for p in (tmp_path / "YNQ_Benchmark").iterdir()) == ["OCR.xlsx", "counting.xlsx"]
    oeq = pd.read_excel(tmp_path / "OEQ_Benchmark" / "counting.xlsx")
    assert list(oeq.columns[:3]) == ["Image", "Question", "Reference_Answer"]
    assert oeq["Reference_Answer"].tolist() == ["4 or 5", "2"]  # written as text, so "2" stays "2"
    ynq = pd.read_excel(tmp_path / "YNQ_Benchmark" / "counting.xlsx")
    for _, row in ynq.iterrows():  # the lines of VHTest's llava_ynq_version.py that touch the sheet
        image_file = tmp_path / "Images" / "counting" / row["image_path"]
        assert image_file.is_file() and row["Image"] == row["image_path"]
        assert row["yes_or_no_ground_truth"] in ("y", "n") and row["yes_or_no_question"].endswith("?")
    assert sorted(ynq["yes_or_no_ground_truth"]) == ["n", "y"]
    assert sorted(p.name for p in (tmp_path / "Images" / "counting").iterdir()) == ["counting_0.png", "counting_1.png"]


def test_llava_split_is_seeded_and_follows_vhtest_conventions(bench, tmp_path):
    from vhmine.formats import llava

    sides = llava.split(bench, seed=1)
    assert sides == llava.split(Benchmark("x", list(reversed(bench.items))), seed=1)  # not row order
    F.write("llava", bench, tmp_path, seed=1)
    recs = {r["id"]: r for f in ("train.json", "test.json") for r in json.loads((tmp_path / f).read_text())}
    assert recs["c-oeq-a"]["conversations"][1]["value"] == "There are 4 cats."
    assert recs["p-oeq"]["conversations"][0]["value"].endswith("?\nAnswer the question using a single word or phrase.")
    assert recs["o-ynq-2"]["conversations"][1]["value"] == "No"
    assert recs["c-ynq-a"]["conversations"][0]["value"].startswith("<image>\n")
    # 80/20 over image groups: 50 items on 50 images split 40/10; on one image they stay together
    big = Benchmark("b", [replace(bench.items[0], id=f"i{k}", image_id=f"img{k}", pair_id=None) for k in range(50)])
    assert sum(v == "train" for v in llava.split(big, seed=3).values()) == 40
    one = Benchmark("b", [replace(bench.items[0], id=f"i{k}", pair_id=None) for k in range(50)])
    assert len(set(llava.split(one, seed=3).values())) == 1
    # the fixture's counting items share images and pairs: one group, on one side
    assert len({sides[i] for i in ("c-oeq-a", "c-oeq-b", "c-ynq-a", "c-ynq-b")}) == 1


def test_hf_folder_loads_with_datasets(bench, tmp_path):
    datasets = pytest.importorskip(
        "datasets", reason="the hf round trip through `datasets` needs pip install 'vhmine[test]'"
    )
    F.write("hf", bench, tmp_path)
    ds = datasets.load_dataset(str(tmp_path), split="test")
    rows = {r["id"]: r for r in ds}
    assert (
        rows["c-oeq-a"]["answers"] == ["4", "5"]
        and rows["c-ynq-b"]["truth"] is False
        and rows["p-oeq"]["truth"] is None
    )
    img = rows["o-ynq-1"]["image"]
    assert np.array_equal(np.asarray(img), np.asarray(Image.open(bench.by_id()["o-ynq-1"].image)))


def test_real_hallusionbench_imports():
    b = F.load(anchor("hallusionbench/HallusionBench.json"))
    assert len(b) == 1129 and {it.kind for it in b} == {"YNQ"}
    assert sum(it.truth for it in b) == 484
    no_image = [it for it in b if it.image is None]
    assert len(no_image) == 178 and all(it.meta["visual_input"] == "0" for it in no_image)
    it = b.by_id()["VD_illusion_0_0_0"]
    assert it.image == "VD/illusion/0_0.png" and it.pair_id == "VD_illusion_0_0" and it.image_id == "VD_illusion_0_0"


def test_real_pope_imports(tmp_path):
    for split in ("random", "popular", "adversarial"):
        b = F.load(anchor(f"pope/coco_pope_{split}.json"), images=tmp_path)
        assert len(b) == 3000 and sum(it.truth for it in b) == 1500
        first = b.by_id()[f"coco_pope_{split}:1"]
        assert first.image.startswith("COCO_val2014_") and b.image_path(first).parent == tmp_path
    some = Benchmark("some", b.items[:12], b.root, b.source)
    for it in some:  # COCO's images are not here: stand-ins, so the lines can go back out as POPE lines
        Image.new("RGB", (4, 4)).save(some.image_path(it))
    (tmp_path / "again").mkdir()
    F.write("pope", some, tmp_path / "again")
    assert _plain(F.read("pope", tmp_path / "again")) == _plain(some)


@pytest.mark.parametrize(
    "content, message",
    [
        (
            (
                '{"question_id": 1, "image": "a.jpg", "text": "Is there a cat?", "label": "yes"}\n{"question_id": 2,'
                ' "image": "a.jpg", "text": "Is there a dog?", "label": "maybe"}\n'
            ),
            r"bad\.jsonl, line 2, field label: 'maybe' is not yes or no$",
        ),
        ('{"question_id": 1, "image": "a.jpg", "label": "yes"}\n', r"bad\.jsonl, line 1, field text: missing"),
        ('{"question_id": 1, \n', r"bad\.jsonl, line 1: not JSON"),
    ],
)
def test_malformed_pope_names_file_line_and_field(tmp_path, content, message):
    (tmp_path / "bad.jsonl").write_text(content)
    with pytest.raises(FormatError, match=message):
        F.load(tmp_path / "bad.jsonl")


@pytest.mark.parametrize(
    "fmt, file, where",
    [
        ("pope", "questions.jsonl", r"questions\.jsonl, line 1, field vhmine"),
        ("llava", "train.json", r"train\.json, record 0, field vhmine"),
        ("hallusionbench", "HallusionBench.json", r"HallusionBench\.json, row 0, field vhmine"),
    ],
)
def test_a_broken_vhmine_record_is_named_not_a_crash(bench, tmp_path, fmt, file, where):
    src = Benchmark("one", [bench.by_id()["c-ynq-a"]] * 1)
    F.write(fmt, src, tmp_path)
    path = tmp_path / file
    if fmt == "pope":
        rec = json.loads(path.read_text())
        del rec["vhmine"]["pair_id"]
        path.write_text(json.dumps(rec) + "\n")
    else:
        recs = json.loads(path.read_text())
        del recs[0]["vhmine"]["pair_id"]
        path.write_text(json.dumps(recs))
    with pytest.raises(FormatError, match=where + r": not a vhmine item \(no 'pair_id' in its vhmine record\)"):
        F.read(fmt, tmp_path)


def test_malformed_hallusionbench_and_result_file(tmp_path):
    rows = json.loads(anchor("hallusionbench/HallusionBench.json").read_text())[:3]
    rows[2]["gt_answer"] = "yes"
    (tmp_path / "hb.json").write_text(json.dumps(rows))
    with pytest.raises(
        FormatError, match=r"hb\.json, row 2, field gt_answer: 'yes' is not \"1\" \(yes\) or \"0\" \(no\)$"
    ):
        F.load(tmp_path / "hb.json")
    with pytest.raises(
        FormatError,
        match=r"row 0, field gt_answer: missing: a result file without answers is scored against HallusionBench.json",
    ):
        F.load(anchor("hallusionbench/HallusionBench_result_sample.json"))


def test_malformed_vhtest_sheet(bench, tmp_path):
    import pandas as pd

    F.write("vhtest", bench, tmp_path)
    df = pd.read_excel(tmp_path / "YNQ_Benchmark" / "OCR.xlsx").drop(columns=["vhmine_item"])
    df.loc[1, "yes_or_no_ground_truth"] = "perhaps"
    df.to_excel(tmp_path / "YNQ_Benchmark" / "OCR.xlsx", index=False)
    with pytest.raises(FormatError, match=r"OCR\.xlsx, row 3, field yes_or_no_ground_truth: 'perhaps' is not y or n$"):
        F.read("vhtest", tmp_path)


def test_unknown_format_lists_the_valid_ones():
    with pytest.raises(
        InputError,
        match=r"^unknown format 'csv': choose one of vhtest, vlmevalkit, hf, pope, llava, hallusionbench, lmms-eval, "
        r"mmvp$",
    ):
        F.get_format("csv")


# --- property: every format gives back the items it was given, whatever their text, from any working folder ---


TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(list("\n\t\"'<>&\\;,|")),
    min_size=1,
    max_size=24,
).filter(lambda s: s.strip())
ALL = ("vhtest", "vlmevalkit", "hf", "pope", "llava", "hallusionbench", "lmms-eval")


@st.composite
def generated_bench(draw, images):
    n = draw(st.integers(1, 5))
    items = []
    for k in range(n):
        kind = draw(st.sampled_from(["OEQ", "YNQ"]))
        truth = draw(st.booleans()) if kind == "YNQ" else None
        answers = (
            (("Yes" if truth else "No"),) if kind == "YNQ" else tuple(draw(st.lists(TEXT, min_size=1, max_size=2)))
        )
        items.append(
            BenchItem(
                f"i{k}",
                draw(st.sampled_from(["counting", "ocr", "color"])),
                kind,
                draw(TEXT),
                answers,
                truth,
                images[k % len(images)],
                f"img{k % len(images)}",
                None,
                {"note": draw(TEXT)},
            )
        )
    return Benchmark(draw(st.sampled_from(["gen", "g-ü"])), items)


@pytest.fixture(scope="module")
def photo_files(tmp_path_factory):
    from helpers import write_photos

    return [str(p) for p in write_photos(tmp_path_factory.mktemp("genimgs"), ("astronaut", "coffee"))]


@pytest.mark.slow
@settings(max_examples=8)  # seven exports and seven reads an example
@given(data=st.data())
def test_property_every_format_reads_back_the_same_items_from_any_working_folder_with_no_machine_path(
    photo_files, tmp_path_factory, data
):
    import os

    from helpers import readable_bytes

    from vhmine.api import read_benchmark
    from vhmine.export.job import write_benchmark

    bench = data.draw(generated_bench(photo_files))
    tmp = tmp_path_factory.mktemp("prop")
    (tmp / "one").mkdir()
    (tmp / "two" / "deep").mkdir(parents=True)
    here = os.getcwd()
    try:
        for fmt in ALL:
            src = bench.select(kind="YNQ") if fmt in ("pope", "hallusionbench") else bench
            if not len(src):
                continue
            os.chdir(data.draw(st.sampled_from([tmp / "one", tmp / "two" / "deep", Path("/")]), label=f"cwd {fmt}"))
            write_benchmark(src, tmp / "out" / fmt, fmt)
            os.chdir(data.draw(st.sampled_from([tmp / "one", tmp / "two" / "deep"]), label=f"read from {fmt}"))
            back = read_benchmark(tmp / "out" / fmt)
            assert _plain(back) == _plain(src), fmt
            for p in (tmp / "out" / fmt).rglob("*"):
                if p.is_file():
                    blob = readable_bytes(p)
                    for private in (str(tmp).encode(), os.path.dirname(photo_files[0]).encode()):
                        assert private not in blob, (fmt, p.name)
    finally:
        os.chdir(here)
