"""formats.mmvp: MMVP's layout written as MMVP's scripts read it (pandas, Question + " " + Options, the image of row
k at `MMVP Images/<k>.jpg`, rows 2k-1 and 2k a pair) and read back without loss; MMVP's own rows read as MMVP shows
them; a benchmark it cannot hold, and a malformed folder, refused with the file, row and field."""

import io
import json
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.errors import FormatError, InputError
from vhmine.formats import mmvp


def _image(path, seed, fmt):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (10, 12, 3), dtype=np.uint8)).save(path, format=fmt)
    return str(path)


@pytest.fixture
def pairs_bench(tmp_path):
    """Three mined pairs asked one yes/no question each (one JPEG pair, two PNG), an unpaired question, an open one."""
    d = tmp_path / "src"
    d.mkdir()
    items = []
    for p in range(3):
        fmt, ext = ("JPEG", "jpg") if p == 0 else ("PNG", "png")
        a, b = _image(d / f"p{p}a.{ext}", 2 * p, fmt), _image(d / f"p{p}b.{ext}", 2 * p + 1, fmt)
        q = f"Is the dog facing left in picture {p}?"
        items += [
            BenchItem(
                f"y{p}a",
                "orientation",
                "YNQ",
                q,
                ("Yes",),
                True,
                a,
                f"img{p}a",
                f"pair{p}:YNQ:q",
                {"pair_id": f"pair{p}", "slots": {"n": p}},
            ),
            BenchItem(
                f"y{p}b",
                "orientation",
                "YNQ",
                q,
                ("No",),
                False,
                b,
                f"img{p}b",
                f"pair{p}:YNQ:q",
                {"pair_id": f"pair{p}"},
            ),
        ]
    lone = BenchItem("lone", "color", "YNQ", "Is the car red?", ("Yes",), True, items[0].image, "img0a", None, {})
    oeq = BenchItem("open", "counting", "OEQ", "How many dogs?", ("2",), None, items[0].image, "img0a", None, {})
    return Benchmark("tiny", items + [lone]), oeq


def _plain(items):
    return sorted((replace(it, image=None, image_data=None) for it in items), key=lambda it: it.id)


def test_write_then_read_loses_nothing(pairs_bench, tmp_path):
    bench, _ = pairs_bench
    pairs, left = mmvp.paired_items(bench)
    assert [tuple(it.id for it in p) for p in pairs] == [("y0a", "y0b"), ("y1a", "y1b"), ("y2a", "y2b")]
    assert [it.id for it in left] == ["lone"]
    src = Benchmark(bench.name, [it for p in pairs for it in p])
    out = tmp_path / "out"
    out.mkdir()
    mmvp.write(src, out)
    back = mmvp.read(out)
    assert _plain(back) == _plain(src) and [it.id for it in back] == [it.id for it in src]
    for it in src:
        got = back.image_bytes(back.by_id()[it.id])
        assert got[:3] == b"\xff\xd8\xff"  # every image a JPEG
        if it.image.endswith(".jpg"):
            assert got == src.image_bytes(it)  # a JPEG is copied byte for byte
        else:  # a PNG converted at quality 95: the same picture
            pixels = np.asarray(Image.open(io.BytesIO(got)), dtype=int)
            diff = np.abs(pixels - np.asarray(Image.open(it.image), dtype=int))
            assert diff.mean() < 6  # random noise, the worst case for JPEG


def test_the_folder_reads_as_mmvps_evaluate_mllm_reads_it(pairs_bench, tmp_path):
    import pandas as pd

    bench, _ = pairs_bench
    pairs, _ = mmvp.paired_items(bench)
    mmvp.write(Benchmark("t", [it for p in pairs for it in p]), tmp_path)
    df = pd.read_csv(tmp_path / "Questions.csv")  # as evaluate_mllm.py: pd.read_csv(directory/Questions.csv)
    assert list(df.columns[:4]) == ["Index", "Question", "Options", "Correct Answer"]
    for index, row in df.iterrows():
        cur_prompt = row["Question"] + " " + row["Options"]
        assert cur_prompt.endswith("? (a) Yes (b) No")
        Image.open(tmp_path / "MMVP Images" / f"{index + 1}.jpg").verify()  # photo_id = index + 1
        assert row["Index"] == index + 1
    assert list(df["Correct Answer"]) == ["(a)", "(b)"] * 3
    assert df["Question"][0] == df["Question"][1] != df["Question"][2]  # rows 2k-1 and 2k: one question, two images
    assert json.loads(df["vhmine"][0])["id"] == "y0a"


def test_what_mmvp_cannot_hold_is_refused_before_anything_is_written(pairs_bench, tmp_path):
    bench, oeq = pairs_bench
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FormatError, match=r"1 item\(s\) are not one of a pair .*first: lone.*leaves the others out"):
        mmvp.write(bench, out)
    with pytest.raises(FormatError, match="item open is not a yes/no question"):
        mmvp.write(Benchmark("t", [oeq]), out)
    same_image = [replace(bench.items[0]), replace(bench.items[1], image_id="img0a", image=bench.items[0].image)]
    with pytest.raises(FormatError, match="first: y0a"):
        mmvp.write(Benchmark("t", same_image), out)
    assert list(out.iterdir()) == []


def _mmvp_folder(root, rows, images=True):
    root.mkdir()
    (root / "Questions.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    if images:
        (root / "MMVP Images").mkdir()
        for k in range(1, len(rows)):
            _image(root / "MMVP Images" / f"{k}.jpg", k, "JPEG")
    return root


MMVP_ROWS = [
    "Index,Question,Options,Correct Answer",
    "1,Are the butterfly's wings closer to being open or closed?,(a) Open (b) Closed,(a)",
    "2,Are the butterfly's wings closer to being open or closed?,(a) Open (b) Closed,(b)",
    '3,"Is the dog facing left, or right?",(a) Left (b) Right,(b)',
    '4,"Is the dog facing left, or right?",(a) Left (b) Right,(a)',
]


def test_mmvps_own_rows_read_as_mmvp_shows_them(tmp_path):
    bench = mmvp.read(_mmvp_folder(tmp_path / "MMVP", MMVP_ROWS))
    assert [it.id for it in bench] == ["mmvp:1", "mmvp:2", "mmvp:3", "mmvp:4"]
    first = bench.items[0]
    assert first.question == "Are the butterfly's wings closer to being open or closed? (a) Open (b) Closed"
    assert (first.kind, first.mode, first.answers, first.truth) == ("OEQ", "MMVP", ("Open",), None)
    assert first.meta == {
        "source": "mmvp",
        "index": 1,
        "question": "Are the butterfly's wings closer to being open or closed?",
        "options": "(a) Open (b) Closed",
        "correct_answer": "(a)",
    }
    assert [it.answers for it in bench.items[1:]] == [("Closed",), ("Right",), ("Left",)]
    assert [it.pair_id for it in bench] == ["mmvp:pair1", "mmvp:pair1", "mmvp:pair2", "mmvp:pair2"]
    assert bench.image_path(bench.items[2]) == tmp_path / "MMVP" / "MMVP Images" / "3.jpg"
    assert bench.image_bytes(bench.items[2])[:3] == b"\xff\xd8\xff"
    assert mmvp.read(tmp_path / "MMVP" / "Questions.csv").by_id().keys() == bench.by_id().keys()  # the file itself


def test_a_spreadsheets_bom_is_read(tmp_path):
    root = _mmvp_folder(tmp_path / "m", MMVP_ROWS)
    (root / "Questions.csv").write_bytes(b"\xef\xbb\xbf" + (root / "Questions.csv").read_bytes())
    assert len(mmvp.read(root)) == 4


@pytest.mark.parametrize(
    "rows, message",
    [
        (MMVP_ROWS[:4], r"3 rows, and rows 2k-1 and 2k are pairs"),
        ([MMVP_ROWS[0], MMVP_ROWS[2], MMVP_ROWS[1]], r"row 2, field Index: '2' is not the row's number 1"),
        (["Index,Question,Answer", "1,Q,(a)", "2,Q,(b)"], r"no column 'Options'"),
        ([MMVP_ROWS[0], "1,Open?,,(a)", "2,Open?,(a) Yes (b) No,(b)"], r"row 2, field Options: empty"),
        ([MMVP_ROWS[0] + ",vhmine", MMVP_ROWS[1] + ",{not json", MMVP_ROWS[2] + ","], r"row 2, field vhmine: not JSON"),
        ([MMVP_ROWS[0] + ",vhmine", MMVP_ROWS[1] + ',"{""id"": 1}"', MMVP_ROWS[2] + ","], r"not a vhmine item"),
    ],
)
def test_a_malformed_folder_is_refused_with_its_row_and_field(tmp_path, rows, message):
    with pytest.raises(FormatError, match=message):
        mmvp.read(_mmvp_folder(tmp_path / "m", rows))


def test_a_missing_file_and_an_images_folder_that_leads_out_are_refused(tmp_path):
    with pytest.raises(FormatError, match="does not exist: not an MMVP folder"):
        mmvp.read(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    root = _mmvp_folder(tmp_path / "m", MMVP_ROWS, images=False)
    (root / "MMVP Images").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="leads outside"):
        mmvp.read(root)


def test_options_parse():
    assert mmvp.options_of("(a) Open (b) Closed") == {"(a)": "Open", "(b)": "Closed"}
    assert mmvp.options_of("(A) a red car (B) a blue (or teal) car") == {
        "(a)": "a red car",
        "(b)": "a blue (or teal) car",
    }
    assert mmvp.options_of("no options") == {}
