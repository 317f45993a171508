"""Back from the harnesses: `vhmine eval --predictions` reads VLMEvalKit's result files and lmms-eval's
--log_samples JSONL, written here exactly as those harnesses write them, and scores them to the same numbers
as the same answers in vhmine's own predictions file. The judge (judge.py) serves probe and eval alike
against an OpenAI-compatible server on loopback, and `--judge-agreement` reports Cohen's kappa against
workers' labels. Stage modules hold no SQL (a source scan)."""

import ast
import hashlib
import json
from pathlib import Path

import pytest
from helpers import write_tiny_bench
from hypothesis import given
from hypothesis import strategies as st
from openai_server import chat_text

from vhmine import formats as F
from vhmine.bench import Benchmark
from vhmine.errors import EvalError, FormatError
from vhmine.eval.job import EvalOptions, evaluate, load_predictions

REPO = Path(__file__).resolve().parents[2]

# one model's answers: OEQ o1 right, o2 wrong; YNQ y1 right, y2 wrong (said yes), y3 unreadable, y4 right
ANSWERS = {
    "o1": "There are three cats.",
    "o2": "2",
    "y1": "Yes.",
    "y2": "Yes, three.",
    "y3": "I cannot tell.",
    "y4": "No",
}


@pytest.fixture
def bench_dir(tmp_path):
    return write_tiny_bench(
        tmp_path, {"o2": "How many dogs are there in the picture?", "y2": "Are there exactly 3 cats in this picture?"}
    )


def _own(tmp_path, answers=ANSWERS) -> Path:
    p = tmp_path / "own.jsonl"
    p.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    return p


def _numbers(res, name):
    m = res.report["models"][name]
    return m["metrics"], m["answered"], m["failed"], m["oeq_unjudged"]


# --- VLMEvalKit ---------------------------------------------------------------------------------------


def _vlmevalkit_result(tsv: Path, work_dir: Path, model: str, answers: dict, fmt: str = "xlsx", drop=()) -> Path:
    """What VLMEvalKit's infer_data_job writes: the dataset's TSV as its `load` reads it (pandas), without the
    image column, plus `prediction`; dumped as `<model>_<dataset>.<fmt>` by its `dump` (to_excel / to_csv QUOTE_ALL)."""
    import csv

    import pandas as pd

    data = pd.read_csv(tsv, sep="\t")
    ids = data["vhmine_id"].tolist()  # which answer goes on which row (the harness asks the model per row)
    data["prediction"] = [str(answers[i]) for i in ids]
    data.pop("image")
    for col in drop:
        data.pop(col)
    out = work_dir / f"{model}_{tsv.stem}.{fmt}"
    if fmt == "xlsx":
        with pd.ExcelWriter(
            out, engine="openpyxl"
        ) as writer:  # VLMEvalKit's engine is xlsxwriter; the sheet is the same
            data.to_excel(writer, index=False)
    else:
        data.to_csv(out, sep="\t" if fmt == "tsv" else ",", index=False, encoding="utf-8", quoting=csv.QUOTE_ALL)
    return out


@pytest.mark.parametrize(
    "fmt,drop", [("xlsx", ()), ("xlsx", ("vhmine_id", "vhmine_item")), ("tsv", ()), ("csv", ("vhmine_id",))]
)
def test_vlmevalkit_result_files_score_as_own_predictions(bench_dir, tmp_path, fmt, drop):
    """With the vhmine_id column, or without it (index k is the k-th item of the dataset's kind), the numbers are
    those of the same answers in vhmine's own file; the model's two result files (one per dataset) merge."""
    own = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "own", predictions=[("m", _own(tmp_path))]))
    files = [_vlmevalkit_result(t, tmp_path, "MyVLM", ANSWERS, fmt, drop) for t in sorted(bench_dir.glob("*.tsv"))]
    assert [f.name for f in files] == [f"MyVLM_tiny_OEQ.{fmt}", f"MyVLM_tiny_YNQ.{fmt}"]
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "vk", predictions=[("m", f) for f in files]))
    assert _numbers(res, "m") == _numbers(own, "m")
    assert res.report["models"]["m"]["harness"] == "vlmevalkit"
    assert res.report["models"]["m"]["metrics"]["overall"]["accuracy"] == pytest.approx(3 / 6)


def test_vlmevalkit_failed_answers_are_not_scored_and_wrong_files_are_named(bench_dir, tmp_path):
    ynq = bench_dir / "tiny_YNQ.tsv"
    failed = dict(ANSWERS, y3="Failed to obtain answer via API.")
    f = _vlmevalkit_result(ynq, tmp_path, "MyVLM", failed)
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev", predictions=[("m", f)], partial=True))
    m = res.report["models"]["m"]
    assert (m["answered"], m["failed"], res.partial) == (3, 1, True)  # y3 listed as failed, never read as "no"
    assert m["failed_items"][0]["id"] == "y3" and "VLMEvalKit recorded no answer" in m["failed_items"][0]["why"]
    # a sheet without `prediction`: the file and what was expected
    import pandas as pd

    bad = tmp_path / "MyVLM_tiny_YNQ_bad.xlsx"
    pd.read_csv(ynq, sep="\t").drop(columns=["image"]).to_excel(bad, index=False)
    with pytest.raises(
        FormatError, match=r"MyVLM_tiny_YNQ_bad\.xlsx: read as VLMEvalKit's result file .* no column 'prediction'"
    ):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "e2", predictions=[("m", bad)]))
    # by position (no vhmine_id), a file of another benchmark is refused on its questions, not scored
    other = dict(ANSWERS)
    g = _vlmevalkit_result(ynq, tmp_path, "Other", other, drop=("vhmine_id", "vhmine_item"))
    import pandas as pd

    df = pd.read_excel(g)
    df["question"] = df["question"][::-1].tolist()
    df.to_excel(g, index=False)
    with pytest.raises(FormatError, match=r"Other_tiny_YNQ\.xlsx, row 2: the row's question .* is not item y1's"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "e3", predictions=[("m", g)], partial=True))


# --- lmms-eval -------------------------------------------------------------------------------------------


def _lmms_eval_samples(bench: Benchmark, kind: str, folder: Path, answers: dict, carry_id: bool) -> Path:
    """`<date>_samples_<task>.jsonl` as lmms-eval 0.7.3 writes it: evaluator.py builds each doc's `example`
    (doc_id, doc, target, arguments, resps, filtered_resps, token_counts, doc_hash, then the metrics
    process_results returned) and loggers/evaluation_tracker.py save_results_samples rewrites it: input =
    arguments[0], resps / filtered_resps flattened for one request, resps dropped when equal, target as str,
    arguments and doc dropped."""
    task = f"vhmine_{kind.lower()}"
    path = folder / "my-vlm" / f"20250101_120000_samples_{task}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for doc_id, it in enumerate(x for x in bench if x.kind == kind):
            doc = {"id": it.id, "question": it.question, "answer": it.answers[0], "mode": it.mode}
            context = it.question + (" ONLY answer yes or no." if kind == "YNQ" else "")
            text = answers[it.id]
            metric = {"id": it.id, "mode": it.mode, "prediction": text} if carry_id else 0.0
            sample = {
                "doc_id": doc_id,
                "doc": doc,
                "target": it.answers[0],
                "arguments": [context, {"max_new_tokens": 64}],
                "resps": [[text]],
                "filtered_resps": [text],
                "token_counts": [None],
                "doc_hash": hashlib.sha256(json.dumps(doc, indent=2).encode()).hexdigest(),
                "vhmine_accuracy": metric,
            }
            sample["input"] = sample["arguments"][0]
            sample["resps"] = sample["resps"]  # sanitize_list leaves strings as they are
            if isinstance(sample["resps"], list) and len(sample["resps"]) == 1:
                sample["resps"] = sample["resps"][0]
            if isinstance(sample["filtered_resps"], list) and len(sample["filtered_resps"]) == 1:
                sample["filtered_resps"] = sample["filtered_resps"][0]
            if sample["resps"] == sample["filtered_resps"]:
                sample.pop("resps")
            elif (
                isinstance(sample["resps"], list)
                and len(sample["resps"]) == 1
                and sample["resps"][0] == sample["filtered_resps"]
            ):
                sample.pop("resps")
            sample["target"] = str(sample["target"])
            sample.pop("arguments")
            sample.pop("doc")
            f.write(json.dumps(sample, ensure_ascii=False) + "\n")
    return path


@pytest.mark.parametrize("carry_id", [True, False])
def test_lmms_eval_samples_score_as_own_predictions(bench_dir, tmp_path, carry_id):
    """The item comes from the id process_results logged, or else from doc_id (the k-th item of the task's kind,
    its `input` checked to hold the item's question): the same numbers as vhmine's own file."""
    bench = F.load(bench_dir)
    own = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "own", predictions=[("m", _own(tmp_path))]))
    files = [_lmms_eval_samples(bench, k, tmp_path / "logs", ANSWERS, carry_id) for k in ("YNQ", "OEQ")]
    first = json.loads(files[0].read_text().splitlines()[0])
    assert (
        "doc" not in first and first["filtered_resps"] == "Yes." and first["input"].endswith("ONLY answer yes or no.")
    )
    res = evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "lm", predictions=[("m", f) for f in files]))
    assert _numbers(res, "m") == _numbers(own, "m") and res.report["models"]["m"]["harness"] == "lmms-eval"


def test_lmms_eval_samples_of_another_benchmark_or_broken_are_named(bench_dir, tmp_path):
    bench = F.load(bench_dir)
    f = _lmms_eval_samples(bench, "YNQ", tmp_path / "logs", ANSWERS, carry_id=False)
    lines = f.read_text().splitlines()
    swapped = [json.loads(x) for x in lines]
    swapped[0]["input"], swapped[1]["input"] = swapped[1]["input"], swapped[0]["input"]
    f.write_text("".join(json.dumps(x) + "\n" for x in swapped))
    with pytest.raises(FormatError, match=r"samples_vhmine_ynq\.jsonl, line 1: the row's question .* is not item y1's"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "e", predictions=[("m", f)], partial=True))
    broken = json.loads(lines[1])
    broken.pop("filtered_resps")
    f.write_text(lines[0] + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(
        FormatError,
        match=r"samples_vhmine_ynq\.jsonl, line 2: not an lmms-eval sample \(expected doc_id and filtered_resps",
    ):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "e", predictions=[("m", f)], partial=True))
    # the same item in two files of one model is refused, naming both
    a = _lmms_eval_samples(bench, "OEQ", tmp_path / "a", ANSWERS, carry_id=True)
    b = _lmms_eval_samples(bench, "OEQ", tmp_path / "b", ANSWERS, carry_id=True)
    with pytest.raises(EvalError, match=r"item 'o1' is answered in .*b/my-vlm.* and in .*a/my-vlm"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "e", predictions=[("m", a), ("m", b)], partial=True))


# --- judges: one judge for probe and eval, on any OpenAI-compatible server; agreement with workers ----------


@pytest.mark.slow
def test_probe_and_eval_share_the_judge_and_eval_reports_its_agreement_with_workers(openai_server, tmp_path):
    """probe and eval send the judge the same requests (judge.py) at a vLLM-style base URL (http://host:port/v1);
    `--judge-agreement` gives Cohen's kappa between the judge and the workers' majority where both exist."""
    from helpers import make_ready_store
    from typer.testing import CliRunner

    from vhmine import curate as C
    from vhmine.cli import app
    from vhmine.curate.stages.model_responses import mode_responses
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.llm import LLMOptions
    from vhmine.models.probe import ProbeOptions, probe

    srv = openai_server

    def responder(body):
        text = chat_text(body)
        if "correct, incorrect or unclear" in text:  # the judge: right when the reference is 3 or red
            refs = text.split("any one of which is correct:", 1)[1].split("\n", 1)[0]
            return "correct" if refs.strip() in ("3", "red") else "incorrect"
        return "An answer to: " + text.splitlines()[0]

    srv.responder = responder
    store = make_ready_store(tmp_path)
    probe(
        store,
        ProbeOptions(
            LLMOptions(model="victim", base_url=srv.base_url, cache=tmp_path / "c1.db", progress=False),
            judge="judge-llm",
        ),
    )
    probe_judged = sorted(chat_text(b) for b in srv.chats() if b["model"] == "judge-llm")
    oeq = {r.instance_id: r for m in ("counting", "color") for r in mode_responses(store, m) if r.kind == "OEQ"}
    assert len(oeq) == 4 and len(probe_judged) == 4
    # workers: agree with the judge on "3" (correct) and "2" (hallucinated), disagree on "red", tie on "blue"
    C.add_worker(store, "bob")
    by_ref = {r.answers[0]: r for r in oeq.values()}
    for ref, (va, vb) in {
        "3": ("correct", "correct"),
        "2": ("hallucinated", "hallucinated"),
        "red": ("hallucinated", "hallucinated"),
        "blue": ("correct", "hallucinated"),
    }.items():
        C.work.label_response(store, "alice", by_ref[ref].response_id, va)
        C.work.label_response(store, "bob", by_ref[ref].response_id, vb)
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf"))
    store.close()
    bench = F.load(tmp_path / "b")
    preds = tmp_path / "victim.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"id": it.id, "answer": oeq[it.id].answer if it.id in oeq else "Yes"}) + "\n" for it in bench
        )
    )
    srv.requests.clear()
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--bench",
            str(tmp_path / "b"),
            "--predictions",
            f"victim={preds}",
            "--judge",
            "judge-llm",
            "--judge-agreement",
            "--db",
            str(tmp_path / "store.db"),
            "--base-url",
            srv.base_url,
            "--cache",
            str(tmp_path / "c2.db"),
            "--out",
            str(tmp_path / "ev"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert (
        sorted(chat_text(b) for b in srv.chats() if b["model"] == "judge-llm") == probe_judged
    )  # the same judge requests
    # judge [T, F, T] vs workers [T, F, F] on 3 items (the tie is left out): po 2/3, pe 4/9, kappa 0.4
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert report["models"]["victim"]["judge_agreement"] == {
        "items": 3,
        "agree": 2,
        "kappa": 0.4,
        "judge_only": 1,
        "workers_only": 0,
    }
    assert "| victim | 3 | 2 | 0.400 | 1 | 0 |" in (tmp_path / "ev" / "report.md").read_text()
    assert "judge vs workers: Cohen's kappa 0.400 over 3 open answer(s) both judged (2 agree)" in r.output
    r = CliRunner().invoke(
        app,
        [
            "eval",
            "--bench",
            str(tmp_path / "b"),
            "--predictions",
            f"victim={preds}",
            "--judge-agreement",
            "--out",
            str(tmp_path / "ev2"),
        ],
    )
    assert (
        r.exit_code != 0
        and "--judge-agreement compares a judge's verdicts with workers' labels: pass --judge MODEL" in r.output
    )


# --- the stages hold no SQL -----------------------------------------------------------------------------

STAGES = (
    "models/probe",
    "models/describe",
    "models/generate",
    "eval/job",
    "eval/score",
    "eval/report",
    "seed",
    "rules/judge",
)
QUERY_METHODS = {"session", "execute", "scalars", "scalar", "query"}  # a store's or a session's
QUERY_BUILDERS = {"select", "insert", "update", "delete"}  # sqlalchemy's statement builders
STORE_NAMES_ALLOWED = {"open_store"}  # opening the store a user named is not a query


def test_stage_modules_hold_no_sql():
    files = [p for p in (REPO / "vhmine" / f"{m}.py" for m in STAGES) if p.is_file()]
    files += sorted((REPO / "vhmine" / "eval" / "predictions").glob("*.py"))
    assert len(files) >= 12
    found = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlalchemy" for a in node.names):
                found.append(f"{path.name}:{node.lineno} imports sqlalchemy")
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if mod.split(".")[0] == "sqlalchemy":
                    found.append(f"{path.name}:{node.lineno} imports from sqlalchemy")
                elif mod == "vhmine.store" or (node.level > 0 and mod == "store"):
                    extra = {a.name for a in node.names} - STORE_NAMES_ALLOWED
                    if extra:
                        found.append(f"{path.name}:{node.lineno} imports the store's tables {sorted(extra)}")
            elif isinstance(node, ast.Call):
                fn = node.func
                if isinstance(fn, ast.Attribute) and fn.attr in QUERY_METHODS:
                    found.append(f"{path.name}:{node.lineno} calls .{fn.attr}()")
                elif isinstance(fn, ast.Name) and fn.id in QUERY_BUILDERS:
                    found.append(f"{path.name}:{node.lineno} calls {fn.id}()")
    assert not found, "stage modules must reach the store through vhmine.curate: " + "; ".join(found)


# --- inputs read exactly -----------------------------------------------------------------------------------


def _cli(*args, cwd=None):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def test_a_json_object_holding_an_id_twice_is_refused(bench_dir, tmp_path):
    """{"y1": "no", "y1": "yes"}: json keeps the last silently; refused, as a repeated id in JSON lines is."""
    bench = F.load(bench_dir)
    p = tmp_path / "p.json"
    p.write_text('{"o1": "3", "o2": "4", "y1": "no", "y2": "no", "y3": "yes", "y4": "no", "y1": "yes"}')
    with pytest.raises(
        FormatError, match=r"p\.json: the key 'y1' appears twice in one object: give each item's answer once"
    ):
        load_predictions(p, bench)
    q = tmp_path / "q.jsonl"  # inside a JSON line: which answer is it?
    q.write_text('{"id": "o1", "answer": "3", "answer": "4"}\n')
    with pytest.raises(FormatError, match=r"q\.jsonl, line 1: the key 'answer' appears twice"):
        load_predictions(q, bench)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
def test_a_file_that_is_not_utf8_gets_one_line(bench_dir, tmp_path, suffix):
    rows = {
        ".jsonl": '{"id": "o1", "answer": "trois \xe9l\xe8ves"}\n',
        ".csv": "id,answer\no1,trois \xe9l\xe8ves\n",
        ".tsv": "id\tanswer\no1\ttrois \xe9l\xe8ves\n",
    }
    p = tmp_path / f"latin1{suffix}"
    p.write_bytes(rows[suffix].encode("latin-1"))
    r = _cli("eval", "--bench", bench_dir, "--predictions", f"m={p}", "--out", tmp_path / "ev", "--partial")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{p}: not UTF-8 text (byte 0xe9 cannot be decoded): save it as UTF-8" in r.stderr
    # a VLMEvalKit result csv (index, prediction) in latin-1 alike
    v = tmp_path / f"M_tiny_YNQ{suffix}"
    if suffix != ".jsonl":
        sep = "\t" if suffix == ".tsv" else ","
        v.write_bytes(f"index{sep}prediction\n0{sep}oui \xe9\n".encode("latin-1"))
        r = _cli("eval", "--bench", bench_dir, "--predictions", f"m={v}", "--partial")
        assert r.returncode == 2 and "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_predictions_without_a_model_name_are_refused(bench_dir, tmp_path):
    p = _own(tmp_path)
    r = _cli("eval", "--bench", bench_dir, "--predictions", f"={p}", "--out", tmp_path / "ev")
    assert r.returncode == 2 and f"--predictions '={p}' has no model name: pass NAME=FILE" in r.stderr, r.stderr
    assert not (tmp_path / "ev").exists()
    with pytest.raises(EvalError, match=r"has no model name: pass NAME=FILE"):
        evaluate(EvalOptions(bench=bench_dir, out=tmp_path / "ev2", predictions=[("", p)]))


def test_a_hallusionbench_result_file_of_vhmines_own_export_reads_back(tmp_path):
    """HallusionBench's scripts add `model_prediction` to each row of HallusionBench.json and dump the list: made
    from vhmine's `hallusionbench` export, its rows name vhmine's items and score as vhmine's own file."""
    from helpers import write_tiny_bench

    from vhmine.export.job import write_benchmark

    (tmp_path / "t").mkdir()
    tiny = F.load(write_tiny_bench(tmp_path / "t"))
    ynq = Benchmark("tiny", [it for it in tiny if it.kind == "YNQ"])
    write_benchmark(ynq, tmp_path / "hb", "hallusionbench")
    rows = json.loads((tmp_path / "hb" / "HallusionBench.json").read_text())
    for r in rows:
        r["model_prediction"] = ANSWERS[r["vhmine_id"]]
    result = tmp_path / "HallusionBench_result.json"
    result.write_text(json.dumps(rows, indent=4))
    got = evaluate(EvalOptions(bench=tmp_path / "hb", out=tmp_path / "ev", predictions=[("m", result)]))
    own = evaluate(
        EvalOptions(
            bench=tmp_path / "hb",
            out=tmp_path / "own",
            predictions=[("m", _own(tmp_path, {k: v for k, v in ANSWERS.items() if k.startswith("y")}))],
        )
    )
    assert _numbers(got, "m") == _numbers(own, "m")
    assert got.report["models"]["m"]["answered"] == 4


# --- one item, one answer, whatever its id's spelling; files as Windows saves them --------------------------


def _pope_bench(tmp_path, n=4):
    """POPE's own file (`pope_test.json`, JSON lines): ids `pope_test:1` ... `pope_test:n`, alternating yes / no."""
    p = tmp_path / "pope_test.json"
    p.write_text(
        "".join(
            json.dumps(
                {"question_id": k, "image": None, "text": f"Is there a cat {k}?", "label": "yes" if k % 2 else "no"}
            )
            + "\n"
            for k in range(1, n + 1)
        )
    )
    return p


def test_one_pope_item_answered_under_two_spellings_of_its_id_is_refused_naming_both_lines(tmp_path):
    """`1` and `pope_test:1` are one item: the last row winning made the file's order the score (0% or 100%)."""
    bench = F.load(_pope_bench(tmp_path))
    rows = [
        {"id": "pope_test:1", "answer": "yes"},
        {"id": "2", "answer": "no"},
        {"id": "3", "answer": "yes"},
        {"id": "4", "answer": "no"},
        {"id": "1", "answer": "no"},
    ]
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        FormatError,
        match=r"p\.jsonl, line 5, field id: '1' is item 'pope_test:1', answered as "
        r"'pope_test:1' \(first at .*p\.jsonl, line 1\): give each item's answer once",
    ):
        load_predictions(p, bench)
    q = tmp_path / "q.json"  # an {id: answer} object: the two spellings are named
    q.write_text(json.dumps({"1": "yes", "2": "no", "3": "yes", "4": "no", "pope_test:1": "no"}))
    with pytest.raises(FormatError, match=r"item 'pope_test:1' is answered twice, as '1' and as 'pope_test:1'"):
        load_predictions(q, bench)
    p.write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))  # each once, in either spelling: read
    assert load_predictions(p, bench) == {
        "pope_test:1": "yes",
        "pope_test:2": "no",
        "pope_test:3": "yes",
        "pope_test:4": "no",
    }


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".tsv"])
def test_a_predictions_file_with_a_utf8_bom_is_read(bench_dir, tmp_path, suffix):
    """Notepad and Excel's "CSV UTF-8" put a byte-order mark first: the file is read as without one."""
    bench = F.load(bench_dir)
    text = {
        ".jsonl": "".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in ANSWERS.items()),
        ".json": json.dumps([{"id": k, "answer": v} for k, v in ANSWERS.items()]),
        ".csv": "id,answer\n" + "".join(f'{k},"{v}"\n' for k, v in ANSWERS.items()),
        ".tsv": "id\tanswer\n" + "".join(f"{k}\t{v}\n" for k, v in ANSWERS.items()),
    }[suffix]
    p = tmp_path / f"bom{suffix}"
    p.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert load_predictions(p, bench) == ANSWERS


def test_a_vlmevalkit_csv_and_an_lmms_eval_file_with_a_bom_are_read(bench_dir, tmp_path):
    bench = F.load(bench_dir)
    ynq = [it for it in bench if it.kind == "YNQ"]
    v = tmp_path / "m_vh_YNQ.csv"
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows(
        [("index", "question", "prediction")] + [(k, it.question, ANSWERS[it.id]) for k, it in enumerate(ynq)]
    )
    v.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode())
    assert load_predictions(v, bench) == {it.id: ANSWERS[it.id] for it in ynq}
    lm = tmp_path / "20250101_samples_vhmine_ynq.jsonl"
    lm.write_bytes(
        b"\xef\xbb\xbf"
        + "".join(
            json.dumps({"doc_id": k, "input": it.question, "filtered_resps": [ANSWERS[it.id]]}) + "\n"
            for k, it in enumerate(ynq)
        ).encode()
    )
    assert load_predictions(lm, bench) == {it.id: ANSWERS[it.id] for it in ynq}


@given(
    spelt=st.lists(st.tuples(st.booleans(), st.sampled_from(["yes", "no", "maybe"])), min_size=1, max_size=8),
    twice=st.one_of(st.none(), st.integers(0, 7)),
    layout=st.sampled_from([".jsonl", ".json", ".csv"]),
)
def test_property_aliases_of_one_id_are_one_id(tmp_path_factory, spelt, twice, layout):
    """Any mix of `n` and `pope_test:n` reads as the full ids; one item under both spellings (or the same one twice)
    is refused, whichever comes first."""
    tmp = tmp_path_factory.mktemp("alias")
    bench = F.load(_pope_bench(tmp, len(spelt)))
    rows = [(str(k) if bare else f"pope_test:{k}", a) for k, (bare, a) in enumerate(spelt, start=1)]
    if twice is not None:
        k = twice % len(spelt) + 1
        rows.append((f"pope_test:{k}" if rows[k - 1][0] == str(k) else str(k), "yes"))
    p = tmp / f"p{layout}"
    if layout == ".jsonl":
        p.write_text("".join(json.dumps({"id": i, "answer": a}) + "\n" for i, a in rows))
    elif layout == ".json":
        p.write_text(json.dumps([{"id": i, "answer": a} for i, a in rows]))
    else:
        p.write_text("id,answer\n" + "".join(f"{i},{a}\n" for i, a in rows))
    if twice is not None:
        with pytest.raises(FormatError, match="give each item's answer once"):
            load_predictions(p, bench)
        return
    assert load_predictions(p, bench) == {f"pope_test:{k}": a for k, (_, a) in enumerate(spelt, start=1)}
