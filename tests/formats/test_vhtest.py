"""formats.vhtest against VHTest's own scripts: the accuracies vhmine eval gives on a VHTest folder are what VHTest's
llava_ynq_version.py prints (its scoring loop transcribed), and a VHTest folder as published imports."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import TRICKY, classify_response, vh_mode_list

from vhmine import formats as F
from vhmine.errors import FormatError


def vhtest_ynq_scores(test_xlsx_path, raw_answers):
    """VHTest's scoring loop over its sheets; `raw_answers[(sheet file, row index)]` stands in for the model's
    decoded output (the script strips it before classify_response). Returns its printed lines' figures."""
    import pandas as pd

    result_value_list, per_mode = [], {}
    for vh_mode in vh_mode_list:
        pattern = os.path.join(test_xlsx_path, f"{vh_mode}*.xlsx")
        for file_path in glob.glob(pattern):
            df = pd.read_excel(file_path)
            bug_success = []
            for index, row in df.iterrows():
                outputs = raw_answers[(os.path.basename(file_path), index)].strip()
                yn_output = classify_response(outputs)
                bug_success.append(0 if yn_output == row["yes_or_no_ground_truth"] else 1)
            yn_LLaVA_bug_success_avg = np.mean(bug_success)
            per_mode[vh_mode] = 1 - yn_LLaVA_bug_success_avg  # "vh_mode {m} ynq_acc_LLaVA {acc}"
            result_value_list.append(1 - yn_LLaVA_bug_success_avg)
    return per_mode, np.mean(result_value_list)  # ..., "mean_acc: {}"


def _png(path):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (200, 10, 10)).save(path)


def _sheet(path, header, rows):
    """An .xlsx written with openpyxl, as VHTest's published sheets are (one header row, then the rows)."""
    from openpyxl import Workbook

    path.parent.mkdir(parents=True, exist_ok=True)
    wb = Workbook()
    ws = wb.active
    ws.append(header)
    for r in rows:
        ws.append(r)
    wb.save(path)


def _vhtest_folder(root, modes=("counting", "OCR", "color")):
    """YNQ sheets with only the columns VHTest's YNQ script reads, plus one column of VHTest's own results."""
    answers = {}
    k = 0
    for mode in modes:
        rows = []
        for i in range(len(TRICKY)):
            _png(root / "Images" / mode / f"{mode}_{i}.png")
            gt = "y" if (i + len(mode)) % 2 else "n"
            rows.append([f"{mode}_{i}.png", f"Is the thing {i} in the {mode} picture red?", gt, i % 2])
            answers[(f"{mode}.xlsx", i)] = TRICKY[(i + k) % len(TRICKY)]
        k += 7  # each mode sees the answers in another order
        _sheet(
            root / "YNQ_Benchmark" / f"{mode}.xlsx",
            ["image_path", "yes_or_no_question", "yes_or_no_ground_truth", "LLaVA_bug_success"],
            rows,
        )
    return answers


def test_vhtest_accuracies_equal_what_vhtests_script_prints(tmp_path):
    from vhmine.eval.job import EvalOptions, evaluate

    root = tmp_path / "Benchmark"
    raw = _vhtest_folder(root)
    bench = F.load(root)
    assert F.detect(root) == "vhtest" and len(bench) == 3 * len(TRICKY)
    ids = {
        (it.meta["sheet"], int(Path(it.image).stem.rsplit("_", 1)[1])): it.id for it in bench
    }  # row i shows <mode>_i.png
    preds = tmp_path / "answers.jsonl"
    preds.write_text("".join(json.dumps({"id": ids[k], "answer": a}) + "\n" for k, a in raw.items()))
    report = evaluate(EvalOptions(bench=root, out=tmp_path / "ev", predictions=[("m", preds)], rule="vhtest")).report
    ours = report["models"]["m"]["metrics"]["modes"]
    theirs, mean_acc = vhtest_ynq_scores(root / "YNQ_Benchmark", raw)
    assert set(theirs) == {"counting", "OCR", "color"}
    for vh_mode, acc in theirs.items():
        assert ours["ocr" if vh_mode == "OCR" else vh_mode]["accuracy"] == pytest.approx(acc), vh_mode
    assert np.mean([m["accuracy"] for m in ours.values()]) == pytest.approx(mean_acc)
    # an answer VHTest calls "wrong format" is counted unreadable and wrong, never "no"
    wrong_format = sum(classify_response(a.strip()) == "wrong_format" for a in raw.values())
    assert report["models"]["m"]["metrics"]["overall"]["unreadable"] == wrong_format > 0
    details = [json.loads(line) for line in (tmp_path / "ev" / "answers-m.jsonl").read_text().splitlines()]
    assert all(not d["correct"] for d in details if d["read_as"] == "unreadable")
    # the first-word reader scores the same answers differently: the label matters
    other = evaluate(EvalOptions(bench=root, out=tmp_path / "ev2", predictions=[("m", preds)], rule="firstword")).report
    assert (
        other["models"]["m"]["metrics"]["overall"]["accuracy"]
        != report["models"]["m"]["metrics"]["overall"]["accuracy"]
    )


def test_a_vhtest_folder_as_published_imports_with_its_extra_columns(tmp_path):
    root = tmp_path / "Benchmark"
    _png(root / "Images" / "color" / "color_0.png")
    _png(root / "Images" / "color" / "color_1.png")
    _sheet(
        root / "OEQ_Benchmark" / "color.xlsx",
        ["Image", "Question", "Note"],
        [["color_0.png", "What color is the cup?", "hard"], ["color_1.png", "What color is the car?", None]],
    )
    _sheet(
        root / "YNQ_Benchmark" / "color.xlsx",
        ["image_path", "yes_or_no_question", "yes_or_no_ground_truth", "Note"],
        [["color_0.png", "Is the cup red?", "y", "from OEQ 0"], ["color_1.png", "Is the car red?", "n", None]],
    )
    bench = F.load(root)
    got = {(it.kind, it.question): it for it in bench}
    assert len(bench) == 4 and {it.mode for it in bench} == {"color"}
    oeq = got[("OEQ", "What color is the cup?")]
    assert oeq.answers == () and oeq.image == "Images/color/color_0.png" and oeq.meta["extras"] == {"Note": "hard"}
    assert got[("OEQ", "What color is the car?")].meta["extras"] == {"Note": ""}
    yes, no = got[("YNQ", "Is the cup red?")], got[("YNQ", "Is the car red?")]
    assert (yes.truth, no.truth) == (True, False) and yes.image == "Images/color/color_0.png"
    assert yes.meta["extras"] == {"Note": "from OEQ 0"} and yes.meta["sheet"] == "color.xlsx"
    assert bench.image_bytes(no) == (root / "Images" / "color" / "color_1.png").read_bytes()
    # a sheet without a column VHTest's script reads is refused, naming it
    _sheet(
        root / "YNQ_Benchmark" / "color.xlsx",
        ["Image", "yes_or_no_question", "yes_or_no_ground_truth"],
        [["color_0.png", "Is the cup red?", "y"]],
    )
    with pytest.raises(FormatError, match=r"color\.xlsx: no column 'image_path'"):
        F.load(root)
