"""Exports that evaluation harnesses run as they are: `--format lmms-eval` and `--format vlmevalkit`.

lmms-eval is the real one (0.7.3 from PyPI, installed by scripts/test.sh): the exported folder is loaded
through its own TaskManager(include_path=...) and get_task_dict, and its own evaluator runs the tasks with a
model that gives canned answers; every number equals `vhmine eval --predictions` on the same answers.
VLMEvalKit is not on PyPI, so its side is a transcription: a stand-in `vlmeval` package written by this
test copies VLMEvalKit's loader rules (load_tsv, the image-index resolution of ImageBaseDataset.__init__,
dump_image, build_prompt, build_dataset's class search, and ImageYORNDataset.evaluate's own yes/no reading and
default_rating as verified against VLMEvalKit's code); the registration file must import against it, declare the
right classes, and score like vhmine.
"""

import base64
import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from harness_standins import CANNED, _load_py
from helpers import canned_lmms
from PIL import Image

from vhmine import formats as F
from vhmine.eval.job import YNQ_SUFFIX, match_oeq, prompt_of
from vhmine.export.job import write_benchmark
from vhmine.rules import harness as harness_rules
from vhmine.rules.answers import parse_yes_no


def _vhmine_eval(folder, answers, out, partial=False):
    """`vhmine eval --predictions` on `answers` (item id -> text): its report.json's metrics."""
    preds = out.parent / f"{out.name}.jsonl"
    preds.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    cmd = [
        sys.executable,
        "-m",
        "vhmine.cli",
        "eval",
        "--bench",
        str(folder),
        "--predictions",
        f"m={preds}",
        "--out",
        str(out),
    ]
    r = subprocess.run(cmd + (["--partial"] if partial else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "report.json").read_text())["models"]["m"]["metrics"]


# --- the rules harness users get are vhmine's ---------------------------------------------------------

ANSWERS = [
    "Yes",
    "yes.",
    "  YES  ",
    "Yesterday",
    "yes, no",
    "No",
    "no",
    "Nope",
    "Not sure",
    "nO",
    " - yes",
    "Maybe",
    "",
    "y",
    "n",
    "Yes\nNo",
    "\tno",
    "None",
    "noon",
    "Ye s",
    "ÝES",
    "nö",
    "Yes!" * 3,
]
OEQ_CASES = [
    ("There are four cats.", ["4"]),
    ("4 cats", ["four"]),
    ("fourteen", ["4"]),
    ("The cat is left", ["to the left of"]),
    ("it's red", ["red"]),
    ("Red!", ["the red"]),
    ("reddish", ["red"]),
    ("", ["a"]),
    ("the", ["the"]),
    ("twenty one", ["21"]),
    ("TWO dogs", ["2", "three"]),
    ("a, b", ["a b"]),
    ("it's", ["it"]),
    ("x", [""]),
]


def test_harness_rules_equal_vhmines(tmp_path, bench):
    """The copies utils.py and the VLMEvalKit registration file carry read and score exactly as vhmine eval."""
    from vhmine.rules.modes import _ARTICLES, _NUMBER_WORDS, normalize_answer

    assert harness_rules.YNQ_SUFFIX == YNQ_SUFFIX
    assert harness_rules.NUMBER_WORDS == _NUMBER_WORDS and harness_rules.ARTICLES.pattern == _ARTICLES.pattern
    write_benchmark(bench, tmp_path / "le", "lmms-eval")
    utils = _load_py(tmp_path / "le" / "utils.py", "vhmine_utils_under_test")
    imports = [
        line
        for line in (tmp_path / "le" / "utils.py").read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert imports == ["import re"]  # self-contained: a harness user may not have vhmine
    for a in ANSWERS + list(CANNED.values()):
        assert harness_rules.read_yes_no(a) is parse_yes_no(a, "vhtest"), a
        assert utils.read_yes_no(a) is parse_yes_no(a, "vhtest"), a
        assert utils.normalize_answer(a) == normalize_answer(a), a
    for answer, refs in OEQ_CASES:
        assert utils.match_oeq(answer, refs) == match_oeq(answer, refs), (answer, refs)
        assert harness_rules.match_oeq(answer, refs) == match_oeq(answer, refs), (answer, refs)


# --- lmms-eval --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lmms_run(bench, tmp_path_factory):
    """The export run by lmms-eval's own TaskManager, get_task_dict and evaluator, with canned answers."""
    from lmms_eval import evaluator
    from lmms_eval.tasks import TaskManager, get_task_dict

    folder = tmp_path_factory.mktemp("lmms") / "vh"
    write_benchmark(bench, folder, "lmms-eval")
    task_dict = get_task_dict(["vhmine"], TaskManager(include_path=str(folder)))

    lm = canned_lmms(CANNED)
    lm.task_dict = {t.config.task: t.dataset for group in task_dict.values() for t in group.values()}
    res = evaluator.evaluate(lm=lm, task_dict=task_dict, bootstrap_iters=0, log_samples=False)
    return folder, res["results"], lm.seen


@pytest.mark.slow
def test_lmms_eval_folder_layout(lmms_run, bench):
    folder, results, seen = lmms_run
    assert sorted(p.name for p in folder.iterdir()) == [
        "croissant.json",
        "data",
        "manifest.json",
        "utils.py",
        "vhmine.yaml",
        "vhmine_oeq.yaml",
        "vhmine_ynq.yaml",
    ]
    assert set(results) == {"vhmine", "vhmine_ynq", "vhmine_oeq"}
    # every document reached the model with its image (a PIL image, as lmms-eval models take) and vhmine eval's prompt
    assert set(seen) == {it.id for it in bench}
    for it in bench:
        context, visuals = seen[it.id]
        assert context == prompt_of(it)
        assert len(visuals) == 1 and isinstance(visuals[0], Image.Image)
        assert np.array_equal(np.asarray(visuals[0]), np.asarray(Image.open(it.image).convert("RGB")))


@pytest.mark.slow
def test_lmms_eval_numbers_equal_vhmine_eval(lmms_run, bench, tmp_path):
    folder, results, _ = lmms_run
    ynq_ids = {it.id for it in bench if it.kind == "YNQ"}
    full = _vhmine_eval(folder, CANNED, tmp_path / "all")
    ynq = _vhmine_eval(folder, {k: v for k, v in CANNED.items() if k in ynq_ids}, tmp_path / "ynq", partial=True)
    oeq = _vhmine_eval(folder, {k: v for k, v in CANNED.items() if k not in ynq_ids}, tmp_path / "oeq", partial=True)
    y, o = results["vhmine_ynq"], results["vhmine_oeq"]
    assert results["vhmine"]["accuracy,none"] == pytest.approx(full["overall"]["accuracy"])
    for name in ("accuracy", "precision", "recall", "f1", "yes_ratio", "unreadable"):
        assert y[f"{name},none"] == pytest.approx(ynq["overall"][name]), name
    assert o["accuracy,none"] == pytest.approx(oeq["overall"]["accuracy"])
    for mode in ("counting", "ocr"):
        assert y[f"{mode}_acc,none"] == pytest.approx(ynq["modes"][mode]["accuracy"]), mode
    for mode in ("counting", "position"):
        assert o[f"{mode}_acc,none"] == pytest.approx(oeq["modes"][mode]["accuracy"]), mode
    # the yes ratio counts the model's "yes" answers (3 of 8), not the truths' (4 of 8)
    assert ynq["overall"]["yes_ratio"] == 3 / 8 and ynq["overall"]["truth_yes_ratio"] == 4 / 8
    # the group shows the overall accuracy only: no per-mode number pooled across tasks with the wrong weights
    assert not [k for k in results["vhmine"] if k.endswith("_acc,none")]


def test_lmms_eval_export_reads_back(bench, tmp_path):
    write_benchmark(bench, tmp_path / "le", "lmms-eval")
    assert F.detect(tmp_path / "le") == "lmms-eval"
    back = F.load(tmp_path / "le")
    assert sorted(back.by_id()) == sorted(bench.by_id())
    for it in bench:
        b = back.by_id()[it.id]
        assert (b.mode, b.kind, b.question, b.answers, b.truth, b.pair_id) == (
            it.mode,
            it.kind,
            it.question,
            it.answers,
            it.truth,
            it.pair_id,
        )
        assert back.image_bytes(b) == bench.image_bytes(it)


# --- VLMEvalKit ---------------------------------------------------------------------------------------------


def _tsv_rows(path):
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_vlmevalkit_tsv_stores_each_image_once(bench, tmp_path):
    write_benchmark(bench, tmp_path / "vl", "vlmevalkit")
    for kind in ("YNQ", "OEQ"):
        rows = _tsv_rows(tmp_path / "vl" / f"tiny_{kind}.tsv")
        items = {it.id: it for it in bench if it.kind == kind}
        full = [r for r in rows if len(r["image"]) > 64]
        assert len(full) == len({items[r["vhmine_id"]].image for r in rows})  # one full copy per distinct image
        by_index = {r["index"]: r for r in rows}
        for r in rows:
            it = items[r["vhmine_id"]]
            if len(r["image"]) <= 64:  # a reference: to an EARLIER row holding the same picture in full
                ref = by_index[r["image"]]
                assert int(ref["index"]) < int(r["index"]) and len(ref["image"]) > 64
                assert items[ref["vhmine_id"]].image == it.image
            else:
                assert base64.b64decode(r["image"]) == bench.image_bytes(it)
            assert r["category"] == it.mode
            if kind == "YNQ":
                assert r["answer"] == ("Yes" if it.truth else "No")
    assert F.detect(tmp_path / "vl") == "vlmevalkit"
    back = F.load(tmp_path / "vl")  # index references resolved by vhmine's reader too
    assert {it.id: back.image_bytes(it) for it in back} == {it.id: bench.image_bytes(it) for it in bench}


def test_vlmevalkit_reader_rejects_a_dangling_reference(bench, tmp_path):
    from vhmine.errors import FormatError

    write_benchmark(bench, tmp_path / "vl", "vlmevalkit")
    tsv = tmp_path / "vl" / "tiny_OEQ.tsv"
    rows = _tsv_rows(tsv)
    rows[0]["image"] = "99"
    with open(tsv, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(
        FormatError, match=r"tiny_OEQ.tsv, row 2, field image: '99' is a reference .* no row with that index"
    ):
        F.load(tmp_path / "vl")


def test_vlmevalkit_registration_as_vlmevalkit_loads_it(bench, tmp_path, vlmeval):
    folder = tmp_path / "vl"
    write_benchmark(bench, folder, "vlmevalkit")
    assert "python vhmine_vlmevalkit.py --data tiny_OEQ tiny_YNQ --model" in (folder / "README.md").read_text()
    reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    import vlmeval.dataset as D
    from vlmeval.dataset.image_vqa import ImageVQADataset
    from vlmeval.dataset.image_yorn import ImageYORNDataset

    assert issubclass(reg.VhmineYNQ, ImageYORNDataset) and issubclass(reg.VhmineOEQ, ImageVQADataset)
    assert reg.VhmineYNQ.supported_datasets() == ["tiny_YNQ"] and reg.VhmineOEQ.supported_datasets() == ["tiny_OEQ"]
    assert D.VhmineYNQ is reg.VhmineYNQ and {"tiny_YNQ", "tiny_OEQ"} <= set(D.SUPPORTED_DATASETS)
    for kind, cls in (("YNQ", reg.VhmineYNQ), ("OEQ", reg.VhmineOEQ)):
        ds = D.build_dataset(f"tiny_{kind}")
        assert type(ds) is cls
        items = [it for it in bench if it.kind == kind]
        assert len(ds.data) == len(items)
        for n, it in enumerate(items):
            line = ds.data.iloc[n]
            msgs = ds.build_prompt(line)
            assert [m["type"] for m in msgs] == ["image", "text"] and msgs[1]["value"] == prompt_of(it)
            assert np.array_equal(
                np.asarray(Image.open(msgs[0]["value"])), np.asarray(Image.open(it.image).convert("RGB"))
            )
            assert line["category"] == it.mode
            if kind == "YNQ":
                assert line["answer"] == ("Yes" if it.truth else "No")  # YORN compares with exactly these
    # the open questions are scored by vhmine's `match`, from VLMEvalKit's prediction file
    oeq = [it for it in bench if it.kind == "OEQ"]
    preds = D.build_dataset("tiny_OEQ").data.drop(columns=["image"])
    preds["prediction"] = [CANNED[i] for i in preds["vhmine_id"]]
    eval_file = str(tmp_path / "M_tiny_OEQ.xlsx")
    preds.to_excel(eval_file, index=False)
    score = reg.VhmineOEQ(dataset="tiny_OEQ").evaluate(eval_file)
    hits = {it.id: match_oeq(CANNED[it.id], it.answers) for it in oeq}
    assert score["Overall"][0] == pytest.approx(100 * sum(hits.values()) / len(hits))
    assert score["counting"][0] == pytest.approx(100 * (hits["c-oeq-a"] + hits["c-oeq-b"]) / 2)


def test_vlmevalkit_registration_refuses_a_changed_tsv(bench, tmp_path, vlmeval):
    folder = tmp_path / "vl"
    write_benchmark(bench, folder, "vlmevalkit")
    with open(folder / "tiny_YNQ.tsv", "a", encoding="utf-8") as f:
        f.write("\n")
    reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    with pytest.raises(ValueError, match=r"tiny_YNQ.tsv changed since `vhmine export` wrote it \(md5 differs\)"):
        reg.VhmineYNQ(dataset="tiny_YNQ")
