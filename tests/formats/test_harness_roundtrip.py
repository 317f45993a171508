"""Round trips through the harnesses' own writers: export -> harness -> its result file -> `vhmine eval`.

lmms-eval (0.7.3, the real package): the `--format lmms-eval` export runs through its TaskManager, get_task_dict
and evaluator with a model giving canned answers and log_samples on (also with --predict_only, which logs no
metric), and the samples are written by lmms-eval's own EvaluationTracker exactly as `lmms-eval --log_samples
--output_path` does (lmms_eval/__main__.py cli_evaluate_single); `vhmine eval --predictions` reads those
files through the CLI. VLMEvalKit (not on PyPI): the `--format vlmevalkit`
TSV is loaded through the registration file vhmine wrote and the stand-in `vlmeval` of test_harness_export
(VLMEvalKit's loader rules), predictions are added and the table dumped as infer_data_job does
(vlmeval/inference.py, vlmeval/smp/file.py dump: the dataset's data minus `image` plus `prediction`, as
`<model>_<dataset>.xlsx` through pandas' xlsxwriter engine). Every number equals vhmine eval on the same
answers in vhmine's own predictions file, and, for lmms-eval, what lmms-eval's own aggregation reported.
"""

import json
import subprocess
import sys

import pytest
from harness_standins import CANNED, _load_py, _run_lmms_eval

from vhmine.eval.job import EvalOptions, evaluate
from vhmine.export.job import write_benchmark


def _report(out):
    """The model's entry in report.json (`source` left out) and its answers as answers-canned.jsonl lists them."""
    entry = json.loads((out / "report.json").read_text())["models"]["canned"]
    entry.pop("source")
    answers = [json.loads(line) for line in (out / "answers-canned.jsonl").read_text().splitlines()]
    return entry, sorted(answers, key=lambda d: d["id"])


def _eval_cli(folder, files, out, partial=False):
    """`vhmine eval --bench folder --predictions canned=<file> ...` through the real CLI."""
    cmd = [sys.executable, "-m", "vhmine.cli", "eval", "--bench", str(folder), "--out", str(out)]
    for f in files:
        cmd += ["--predictions", f"canned={f}"]
    r = subprocess.run(cmd + (["--partial"] if partial else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return _report(out)


def _own_eval(folder, answers, out, partial=False):
    """The same answers in vhmine's own predictions file (id, answer per line), scored by the same eval."""
    own = out.parent / f"{out.name}-own.jsonl"
    own.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    evaluate(EvalOptions(bench=folder, out=out, predictions=[("canned", own)], partial=partial))
    entry, read = _report(out)
    assert entry.pop("harness") == "vhmine"
    return entry, read


# --- lmms-eval ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lmms_logged(bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("lmms-roundtrip")
    write_benchmark(bench, root / "vh", "lmms-eval")
    results = _run_lmms_eval(root / "vh", root / "logs")
    return root, results["results"]


def _samples_files(logs):
    files = sorted(
        logs.glob("acme__canned-vlm/*_samples_*.jsonl")
    )  # <output_path>/<sanitized model>/<date>_samples_<task>
    assert [f.name.split("_samples_")[1] for f in files] == ["vhmine_oeq.jsonl", "vhmine_ynq.jsonl"]
    return files


@pytest.mark.slow
def test_lmms_eval_log_samples_score_as_lmms_eval_and_as_own_predictions(lmms_logged, bench):
    root, results = lmms_logged
    folder, files = root / "vh", _samples_files(root / "logs")
    ynq_ids = {it.id for it in bench if it.kind == "YNQ"}
    # both task files under one name: the whole benchmark, as vhmine's own file of the same answers scores it
    full, read = _eval_cli(folder, files, root / "full")
    assert full.pop("harness") == "lmms-eval"
    assert (full, read) == _own_eval(folder, CANNED, root / "full-own")
    assert full["answered"] == len(bench) and full["failed"] == 0
    assert {d["id"]: d["answer"] for d in read} == CANNED  # every answer as the model gave it
    assert results["vhmine"]["accuracy,none"] == pytest.approx(full["metrics"]["overall"]["accuracy"])
    # one task's file alone: lmms-eval's own aggregation of that task, metric by metric and mode by mode
    for task, f, metrics, modes in (
        (
            "vhmine_ynq",
            files[1],
            ("accuracy", "precision", "recall", "f1", "yes_ratio", "unreadable"),
            ("counting", "ocr"),
        ),
        ("vhmine_oeq", files[0], ("accuracy",), ("counting", "position")),
    ):
        mine, read = _eval_cli(folder, [f], root / task, partial=True)
        assert mine.pop("harness") == "lmms-eval"
        kind = {k: v for k, v in CANNED.items() if (k in ynq_ids) == (task == "vhmine_ynq")}
        assert (mine, read) == _own_eval(folder, kind, root / f"{task}-own", partial=True)
        got = mine["metrics"]
        for name in metrics:
            assert results[task][f"{name},none"] == pytest.approx(got["overall"][name]), (task, name)
        for mode in modes:
            assert results[task][f"{mode}_acc,none"] == pytest.approx(got["modes"][mode]["accuracy"]), (task, mode)
    assert results["vhmine_ynq"]["f1,none"] == pytest.approx(2 / 7)  # the numbers compared are not all zero


@pytest.mark.slow
def test_lmms_eval_predict_only_samples_are_read_by_doc_id(bench, tmp_path):
    """`--predict_only` logs no metric (so no item id): the reader places each line by doc_id within the task's
    kind and checks its logged input holds the item's question; the numbers are those of the same answers."""
    write_benchmark(bench, tmp_path / "vh", "lmms-eval")
    _run_lmms_eval(tmp_path / "vh", tmp_path / "logs", predict_only=True)
    files = _samples_files(tmp_path / "logs")
    first = json.loads(files[1].read_text().splitlines()[0])
    assert set(first) == {"doc_id", "target", "filtered_resps", "token_counts", "doc_hash", "bypass", "input"}
    got, read = _eval_cli(tmp_path / "vh", files, tmp_path / "ev")
    assert got.pop("harness") == "lmms-eval"
    assert (got, read) == _own_eval(tmp_path / "vh", CANNED, tmp_path / "own")


# --- VLMEvalKit ---------------------------------------------------------------------------------------------


class _NumpyEncoder(json.JSONEncoder):
    """vlmeval/smp/file.py NumpyEncoder (the numpy scalars and arrays a dataset's table holds)."""

    def default(self, obj):
        import numpy as np

        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            return float(obj)
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        if isinstance(obj, np.bool_):
            return bool(obj)
        return json.JSONEncoder.default(self, obj)


def _vlmevalkit_dump(data, f):
    """vlmeval/smp/file.py dump for what infer_data_job writes: xlsx (PRED_FORMAT's default), tsv or json."""
    import csv

    import pandas as pd

    suffix = f.split(".")[-1]
    if suffix == "xlsx":
        with pd.ExcelWriter(
            f, engine="xlsxwriter", engine_kwargs={"options": {"strings_to_formulas": False}}
        ) as writer:
            data.to_excel(writer, index=False)
    elif suffix == "tsv":
        data.to_csv(f, sep="\t", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    else:
        with open(f, "w") as out:
            json.dump(data.to_dict("records"), out, indent=4, ensure_ascii=False, cls=_NumpyEncoder)


# answers a sheet could misread: a number, pandas' default NA spellings, a formula, leading blanks
VK_ANSWERS = dict(CANNED, **{"c-oeq-a": "4", "c-oeq-b": "None", "o-ynq-4": "N/A", "o-ynq-3": "=yes", "c-ynq-d": "  No"})


def test_vlmevalkit_result_files_as_its_inference_writes_them(bench, tmp_path, vlmeval):
    """The TSV loaded as VLMEvalKit loads it (build_dataset through vhmine's registration file), each row's prompt
    answered, the table written as infer_data_job writes it (dataset.data, `prediction` added, `image` popped,
    dumped as <model>_<dataset>.<PRED_FORMAT>): vhmine eval reads every answer as given and scores as its own file."""
    import numpy as np
    from PIL import Image

    from vhmine.eval.job import prompt_of

    folder, work = tmp_path / "vl", tmp_path / "outputs"
    write_benchmark(bench, folder, "vlmevalkit")
    work.mkdir()
    _load_py(folder / "vhmine_vlmevalkit.py", "vhmine_vlmevalkit")
    import vlmeval.dataset as D

    def pixels(path):
        return np.asarray(Image.open(path).convert("RGB")).tobytes()

    asked = {(prompt_of(it), pixels(it.image)): it.id for it in bench}  # the model sees the prompt and the picture only
    files = {fmt: [] for fmt in ("xlsx", "tsv", "json")}
    for name in ("tiny_OEQ", "tiny_YNQ"):
        dataset = D.build_dataset(name)
        data_all = {}
        for i in range(len(dataset.data)):
            msgs = dataset.build_prompt(dataset.data.iloc[i])
            data_all[dataset.data.iloc[i]["index"]] = VK_ANSWERS[asked[(msgs[-1]["value"], pixels(msgs[0]["value"]))]]
        for fmt in files:  # infer_data_job
            data = dataset.data.copy()
            data["prediction"] = [str(data_all[x]) for x in data["index"]]
            if "image" in data:
                data.pop("image")
            files[fmt].append(work / f"Qwen2-VL-2B-Instruct_{name}.{fmt}")
            _vlmevalkit_dump(data, str(files[fmt][-1]))
    own = _own_eval(folder, VK_ANSWERS, tmp_path / "own")
    assert {d["id"]: d["answer"] for d in own[1]} == VK_ANSWERS
    got, read = _eval_cli(folder, files["xlsx"], tmp_path / "xlsx")
    assert got.pop("harness") == "vlmevalkit"
    assert (got, read) == own
    for fmt in ("tsv", "json"):  # PRED_FORMAT=tsv / json: the same table
        evaluate(EvalOptions(bench=folder, out=tmp_path / fmt, predictions=[("canned", f) for f in files[fmt]]))
        got, read = _report(tmp_path / fmt)
        assert got.pop("harness") == "vlmevalkit", fmt
        assert (got, read) == own, fmt
