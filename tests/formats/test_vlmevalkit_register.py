"""The VLMEvalKit export's registration file (formats.vlmevalkit_register) run by the stand-in `vlmeval` of
test_harness_export (VLMEvalKit's loader, image cache and its own yes/no scoring, transcribed from its code):

- the registered yes/no dataset scores by the rule the export names (default VHTest's), so its figures are
  those of `vhmine eval` and of the lmms-eval export on the same answers, where VLMEvalKit's own evaluate
  (YOrN_Extraction) gives others; `vhmine eval --rule vlmevalkit` gives VLMEvalKit's own figures;
- the README's steps run as written;
- a re-export under the same name never shows a model the images VLMEvalKit cached for an earlier one.
"""

import json
import shlex
import subprocess
import sys

import numpy as np
import pytest
from harness_standins import _load_py
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.eval.job import EvalOptions, evaluate
from vhmine.export.job import write_benchmark

# answers on which VHTest's rule and VLMEvalKit's YOrN_Extraction differ, with their truths (NOTES of the
# verification against VLMEvalKit's code: its reading is Unknown, Unknown, Unknown, Yes, Unknown, Unknown, Yes,
# No, Yes, Yes, No, Unknown)
YN = [
    ("Not sure", False),
    ("Nope", False),
    ("Yesterday", True),
    ("I think yes", True),
    ("No, but yes", True),
    ("None", False),
    ("Yes", True),
    ("No.", False),
    ("yes!", False),
    ("YES", True),
    ("no", True),
    ("N/A", False),
]
OPEN = {
    "o-count": ("How many cats are there?", ("4",), "four"),
    "o-what": ("What is next to the cat?", ("a dog",), "The dog."),
}
MODEL = "Qwen2-VL-2B-Instruct"


def _bench(folder, seed=1):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(3):
        paths.append(folder / f"im{i}.png")
        Image.fromarray(rng.integers(0, 255, (12, 10, 3), dtype=np.uint8)).save(paths[-1])
    items = [
        BenchItem(
            f"y{k}",
            "ocr" if k % 2 else "counting",
            "YNQ",
            f"Does the sign say {k}?",
            ("Yes" if t else "No",),
            t,
            str(paths[k % 3]),
            f"i{k % 3}",
        )
        for k, (_, t) in enumerate(YN)
    ]
    items += [
        BenchItem(i, "counting", "OEQ", q, refs, None, str(paths[n]), f"i{n}")
        for n, (i, (q, refs, _)) in enumerate(OPEN.items())
    ]
    return Benchmark("yn", items)


ANSWERS = {**{f"y{k}": a for k, (a, _) in enumerate(YN)}, **{i: a for i, (_, _, a) in OPEN.items()}}


def _infer(folder, work, model=MODEL):
    """What `python vhmine_vlmevalkit.py --data ... --model MODEL` leaves in outputs/MODEL/: each dataset built by
    build_dataset, its rows answered, the table dumped as infer_data_job does (data minus image, plus prediction)."""
    import vlmeval.dataset as D
    from vlmeval.smp import dump

    reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    files = {}
    for cls in (reg.VhmineYNQ, reg.VhmineOEQ):
        for name in cls.supported_datasets():
            ds = D.build_dataset(name)
            data = ds.data.copy()
            data["prediction"] = [str(ANSWERS[i]) for i in data["vhmine_id"]]
            data.pop("image")
            files[name] = work / model / f"{model}_{name}.xlsx"
            files[name].parent.mkdir(parents=True, exist_ok=True)
            dump(data, str(files[name]))
    return reg, files


def _metrics(folder, files, out, rule):
    res = evaluate(EvalOptions(bench=folder, out=out, predictions=[("m", f) for f in files], rule=rule, partial=True))
    return res.report["models"]["m"]["metrics"]


@pytest.mark.parametrize("rule", ["vhtest", "vlmevalkit"])
def test_the_yes_no_dataset_scores_by_the_rule_the_export_names(tmp_path, vlmeval, rule):  # noqa: F811
    folder = tmp_path / "vl"
    write_benchmark(_bench(tmp_path / "img"), folder, "vlmevalkit", **({} if rule == "vhtest" else {"rule": rule}))
    assert f"YNQ_RULE = {rule!r}" in (folder / "vhmine_vlmevalkit.py").read_text()
    reg, files = _infer(folder, tmp_path / "outputs")
    import vlmeval.dataset as D
    from vlmeval.dataset.image_yorn import ImageYORNDataset

    ds = D.build_dataset("yn_YNQ")
    got = ds.evaluate(str(files["yn_YNQ"])).iloc[0]
    own = ImageYORNDataset.evaluate(ds, str(files["yn_YNQ"])).iloc[0]  # what VLMEvalKit itself would score
    m = _metrics(folder, [files["yn_YNQ"]], tmp_path / "ev", rule)
    o = m["overall"]
    assert got["Overall"] == pytest.approx(100 * o["accuracy"])
    for mode in ("counting", "ocr"):
        assert got[mode] == pytest.approx(100 * m["modes"][mode]["accuracy"]), mode
    for name in ("precision", "recall", "f1", "yes_ratio"):
        assert got[name] == pytest.approx(100 * o[name]), name
    assert (got["unreadable"], got["failed"]) == (o["unreadable"], 0)
    # the figures themselves: VHTest's reading gets 7 of the 12 right, VLMEvalKit's 4
    assert o["accuracy"] == pytest.approx(7 / 12 if rule == "vhtest" else 4 / 12)
    # `vhmine eval --rule vlmevalkit` is VLMEvalKit's own figure, per category too ("None", "N/A" cells included)
    vk = _metrics(folder, [files["yn_YNQ"]], tmp_path / "ev-vk", "vlmevalkit")
    assert own["Overall"] == pytest.approx(100 * vk["overall"]["accuracy"]) == pytest.approx(100 * 4 / 12)
    for mode in ("counting", "ocr"):
        assert own[mode] == pytest.approx(100 * vk["modes"][mode]["accuracy"]), mode
    # and the lmms-eval export's hooks, on the same answers, give vhmine eval's default figure
    if rule == "vhtest":
        write_benchmark(_bench(tmp_path / "img"), tmp_path / "le", "lmms-eval")
        utils = _load_py(tmp_path / "le" / "utils.py", "vhmine_utils_yn")
        recs = [
            utils.process_results({"kind": "YNQ", "id": f"y{k}", "mode": "", "truth": t}, [a])["accuracy"]
            for k, (a, t) in enumerate(YN)
        ]
        assert 100 * utils.aggregate_accuracy(recs) == pytest.approx(got["Overall"])


def test_failed_rows_are_counted_never_scored(tmp_path, vlmeval):  # noqa: F811
    folder = tmp_path / "vl"
    write_benchmark(_bench(tmp_path / "img"), folder, "vlmevalkit")
    reg, files = _infer(folder, tmp_path / "outputs")
    import pandas as pd

    sheet = pd.read_excel(files["yn_YNQ"], dtype=object, keep_default_na=False)
    sheet.loc[sheet["vhmine_id"] == "y0", "prediction"] = "Failed to obtain answer via API."
    sheet.to_excel(files["yn_YNQ"], index=False)
    got = reg.VhmineYNQ(dataset="yn_YNQ").evaluate(str(files["yn_YNQ"])).iloc[0]
    m = _metrics(folder, [files["yn_YNQ"]], tmp_path / "ev", "vhtest")["overall"]
    assert (got["failed"], m["n"]) == (1, 11)
    assert got["Overall"] == pytest.approx(100 * m["accuracy"]) == pytest.approx(100 * 6 / 11)


@pytest.mark.slow
def test_the_readme_steps_work_as_written(tmp_path, vlmeval):  # noqa: F811
    folder = tmp_path / "vl"
    write_benchmark(_bench(tmp_path / "img"), folder, "vlmevalkit")
    readme = (folder / "README.md").read_text()
    run = next(line.strip() for line in readme.splitlines() if line.strip().startswith("python vhmine_vlmevalkit.py"))
    reg, files = _infer(folder, folder / "outputs")  # step 2, in this folder, as VLMEvalKit's run.py leaves it
    data = shlex.split(run)[shlex.split(run).index("--data") + 1 : shlex.split(run).index("--model")]
    assert sorted(data) == sorted(reg.VhmineYNQ.supported_datasets() + reg.VhmineOEQ.supported_datasets())
    assert shlex.split(run)[-1] == MODEL
    step3 = next(line.strip() for line in readme.splitlines() if line.strip().startswith("vhmine eval"))
    argv = shlex.split(step3)
    r = subprocess.run([sys.executable, "-m", "vhmine.cli"] + argv[1:], cwd=folder, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    report = json.loads((folder / "eval" / "report.json").read_text())["models"][MODEL]
    assert (report["answered"], report["failed"]) == (len(ANSWERS), 0)
    # the scores VLMEvalKit writes beside the answers are those figures
    ynq = reg.VhmineYNQ(dataset="yn_YNQ").evaluate(str(files["yn_YNQ"])).iloc[0]
    oeq = reg.VhmineOEQ(dataset="yn_OEQ").evaluate(str(files["yn_OEQ"])).iloc[0]
    answers = {
        d["id"]: d["correct"]
        for d in map(json.loads, (folder / "eval" / f"answers-{MODEL}.jsonl").read_text().splitlines())
    }
    assert ynq["Overall"] == pytest.approx(100 * sum(answers[f"y{k}"] for k in range(len(YN))) / len(YN))
    assert oeq["Overall"] == pytest.approx(100 * sum(answers[i] for i in OPEN) / len(OPEN)) == 100.0
    assert (folder / "outputs" / MODEL / f"{MODEL}_yn_YNQ_score.csv").is_file()


def test_a_reexport_never_shows_a_model_stale_images(tmp_path, vlmeval):  # noqa: F811
    """VLMEvalKit decodes a dataset's images once into LMUData/images/... and reuses what is there: the same
    --name exported again with other pictures must still show the model the new ones."""
    import vlmeval.dataset as D

    folder = tmp_path / "vl"

    def shown(seed):
        bench = _bench(tmp_path / f"img{seed}", seed)
        write_benchmark(bench, folder, "vlmevalkit", replace=True)
        for name in [m for m in sys.modules if m == "vhmine_vlmevalkit"]:
            del sys.modules[name]
        reg = _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
        D.DATASET_CLASSES[:] = [c for c in D.DATASET_CLASSES if c.__name__ not in ("VhmineYNQ", "VhmineOEQ")]
        D.DATASET_CLASSES.extend([reg.VhmineYNQ, reg.VhmineOEQ])
        ds = D.build_dataset("yn_YNQ")
        out = {}
        for i in range(len(ds.data)):
            line = ds.data.iloc[i]
            path = ds.build_prompt(line)[0]["value"]
            out[line["vhmine_id"]] = np.asarray(Image.open(path).convert("RGB"))
        want = {it.id: np.asarray(Image.open(it.image).convert("RGB")) for it in bench if it.kind == "YNQ"}
        return out, want

    first, want1 = shown(1)
    assert all(np.array_equal(first[k], want1[k]) for k in want1)
    second, want2 = shown(2)  # same name, same indices, other pictures
    assert not np.array_equal(want1["y0"], want2["y0"])
    for k in want2:
        assert np.array_equal(second[k], want2[k]), f"{k}: the model was shown the earlier export's image"
