"""`vhmine eval` at a new user's edges (issue 33): report.json names the benchmark by its name and checksum, the
same from any folder and with no path of this machine; an `--out` that cannot be written is one line; a benchmark
file with a byte-order mark is read; the summary says what became of open answers the judge called unclear."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import run_vhmine, unwritable_folders, write_tiny_bench

ANSWERS = {"o1": "3", "o2": "5", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"}


@pytest.fixture
def bench_dir(tmp_path):
    return write_tiny_bench(tmp_path)


def _preds(path: Path, answers: dict = ANSWERS) -> Path:
    path.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    return path


def test_report_json_is_the_same_from_any_folder_and_holds_no_path(bench_dir, tmp_path):
    """The same benchmark by its absolute path from one folder and by a relative one from another: identical
    report.json files, naming the export's name and its manifest's sha256, and no path of this machine."""
    import hashlib

    _preds(tmp_path / "p.jsonl")
    elsewhere = tmp_path / "deep" / "er"
    elsewhere.mkdir(parents=True)
    a = run_vhmine("eval", "--bench", str(bench_dir), "--predictions", "m=p.jsonl", "--out", "ev", cwd=tmp_path)
    b = run_vhmine("eval", "--bench", "../../bench", "--predictions", "m=../../p.jsonl", "--out", "ev", cwd=elsewhere)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    one, two = (tmp_path / "ev" / "report.json").read_text(), (elsewhere / "ev" / "report.json").read_text()
    assert one == two
    assert json.loads(one)["benchmark"] == {
        "name": "tiny",  # the export's own name (its manifest's), not the folder it was copied into
        "format": "vlmevalkit",
        "items": 6,
        "sha256": hashlib.sha256((bench_dir / "manifest.json").read_bytes()).hexdigest(),
        "sha256_of": "manifest.json",
    }
    for path in (str(tmp_path), str(bench_dir), "../", os.path.expanduser("~")):
        assert json.dumps(path)[1:-1] not in one, path


def test_a_benchmark_file_is_named_by_its_own_checksum(tmp_path):
    """A benchmark given as a file (POPE's JSON lines): its stem and the file's sha256, whatever folder."""
    import hashlib

    from vhmine.eval.job import EvalOptions, evaluate

    images = tmp_path / "imgs"
    images.mkdir()
    line = {"question_id": 1, "image": "a.png", "text": "Is there a cat?", "label": "yes"}
    bench = tmp_path / "coco_pope.jsonl"
    bench.write_text(json.dumps(line) + "\n")
    p = _preds(tmp_path / "p.jsonl", {"coco_pope:1": "yes"})
    report = evaluate(EvalOptions(bench=bench, out=tmp_path / "ev", predictions=[("m", p)], images=images)).report
    assert report["benchmark"] == {
        "name": "coco_pope",
        "format": "pope",
        "items": 1,
        "sha256": hashlib.sha256(bench.read_bytes()).hexdigest(),
        "sha256_of": "coco_pope.jsonl",
    }
    assert str(tmp_path) not in (tmp_path / "ev" / "report.json").read_text()


def test_an_out_folder_that_cannot_be_written_is_said_in_one_line(bench_dir, tmp_path):
    """As mine, embed, export and seed say it: the folder, the system's reason, what to do; no traceback."""
    from typer.testing import CliRunner

    from vhmine.cli import app

    p = _preds(tmp_path / "p.jsonl")
    for folder in unwritable_folders(tmp_path):
        r = CliRunner().invoke(
            app, ["eval", "--bench", str(bench_dir), "--predictions", f"m={p}", "--out", str(folder / "ev")]
        )
        assert r.exit_code == 2, (folder, r.output, r.exception)
        (line,) = r.output.strip().splitlines()
        assert line.startswith(f"error: --out: cannot write in {folder / 'ev'} (") and line.endswith(
            "or fix its permissions"
        )


def test_a_full_disk_under_out_is_said_in_one_line(bench_dir, tmp_path):
    """The folder could be written at first, then the disk filled: one line, no traceback."""
    from helpers import on_a_full_disk

    p = _preds(tmp_path / "p.jsonl")
    argv = [sys.executable, "-m", "vhmine.cli", "eval", "--bench", str(bench_dir), "--predictions", f"m={p}"]
    r = on_a_full_disk(tmp_path / "full", "12k", [*argv, "--out", str(tmp_path / "full" / "ev")], cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert line.startswith("error: writing ") and "failed (No space left on device): " in line, line
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("fmt", [None, "pope"])
def test_a_benchmark_file_with_a_byte_order_mark_is_read(tmp_path, fmt):
    """A POPE file saved by a Windows editor starts with a BOM: read as without it, detected or named."""
    from vhmine import formats as F

    lines = [
        {"question_id": 1, "image": "a.png", "text": "Is there a cat?", "label": "yes"},
        {"question_id": 2, "image": "a.png", "text": "Is there a dog?", "label": "no"},
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    plain, bom = tmp_path / "plain.json", tmp_path / "bom.json"
    plain.write_text(text, encoding="utf-8")
    bom.write_text(text, encoding="utf-8-sig")
    got = F.load(bom, fmt, images=tmp_path)
    assert [(it.question, it.truth) for it in got] == [(it.question, it.truth) for it in F.load(plain, fmt)]


def test_every_text_benchmark_reader_takes_a_byte_order_mark(bench_dir, tmp_path):
    """Each format that is text (JSON, JSON lines, TSV, the manifest) reads the same with a BOM first."""
    from helpers import write_group_bench

    from vhmine import formats as F
    from vhmine.export.job import write_benchmark

    src = F.load(write_group_bench(tmp_path / "g"))
    for fmt, files in (
        ("pope", ["questions.jsonl", "manifest.json"]),
        ("llava", ["train.json", "test.json", "manifest.json"]),
        ("hallusionbench", ["HallusionBench.json", "manifest.json"]),
        ("vlmevalkit", ["*.tsv", "manifest.json"]),
    ):
        folder = tmp_path / fmt
        write_benchmark(src.select(kind="YNQ") if fmt in ("pope", "hallusionbench") else src, folder, fmt)
        before = F.load(folder)
        for pattern in files:
            for f in folder.glob(pattern):
                f.write_bytes(b"\xef\xbb\xbf" + f.read_bytes())
        after = F.load(folder)
        assert [(it.id, it.question, it.truth, it.answers) for it in after] == [
            (it.id, it.question, it.truth, it.answers) for it in before
        ], fmt


def test_the_summary_says_the_judge_called_an_answer_unclear_and_it_was_scored_wrong(
    bench_dir, tmp_path, openai_server
):
    """The judge said "unclear": the answer is scored wrong, and the summary says so in those words (it said
    "1 open answers unjudged", as if no judge had looked at it); one answer, then two."""
    from openai_server import chat_text

    from vhmine.eval.job import EvalOptions, evaluate

    unclear = {"one": True}

    def judge(body):
        text = chat_text(body)
        if "correct, incorrect or unclear" in text:  # the judge: o1's reference is 3
            return "unclear" if "correct: 3\n" in text or not unclear["one"] else "correct"
        return "3"

    openai_server.responder = judge
    p = _preds(tmp_path / "p.jsonl")
    for n, words in ((1, "1 open answer the judge called unclear"), (2, "2 open answers the judge called unclear")):
        unclear["one"] = n == 1
        res = evaluate(
            EvalOptions(
                bench=bench_dir,
                out=tmp_path / f"ev{n}",
                predictions=[("m", p)],
                judge="j",
                base_url=openai_server.base_url,
                llm={"cache": tmp_path / f"c{n}.db", "progress": False},
            )
        )
        assert res.report["models"]["m"]["oeq_unjudged"] == n
        assert f", {words}, scored wrong" in res.summary(), res.summary()
        assert "unjudged" not in res.summary()


def test_a_folder_without_a_manifest_is_named_by_every_files_checksum(bench_dir, tmp_path):
    """A foreign folder (no manifest.json): a sha256 over its files' names and bytes, the same for a copy
    elsewhere, another when one byte changes."""
    import shutil

    from vhmine import formats as F

    (bench_dir / "manifest.json").unlink()
    copy = shutil.copytree(bench_dir, tmp_path / "else" / "where" / "bench")
    one, two = (F.identity(b, F.load(b, "vlmevalkit"), "vlmevalkit") for b in (bench_dir, copy))
    assert one == two and one["sha256_of"] == "every file" and one["name"] == "bench"
    tsv = next(copy.glob("*_YNQ.tsv"))
    tsv.write_bytes(tsv.read_bytes() + b"\n")
    assert F.identity(copy, F.load(copy, "vlmevalkit"), "vlmevalkit")["sha256"] != one["sha256"]


def test_a_judge_whose_replies_are_no_verdicts_stops_the_run_or_leaves_those_items_unjudged(
    bench_dir, tmp_path, openai_server
):
    """A judge answering with an HTML page: on every open answer, the run stops in one line (exit 2 from the CLI),
    where it scored them all wrong (OEQ accuracy 0.0%, exit 0: issue 43); on one of two, that one is "unjudged":
    named with the reply, left out of the figure and its n, never scored wrong."""
    from openai_server import chat_text

    from vhmine.errors import EvalError
    from vhmine.eval.job import EvalOptions, evaluate

    broken = {"all": True}

    def judge(body):
        text = chat_text(body)
        if "correct, incorrect or unclear" in text:
            if broken["all"] or "correct: 3\n" in text:
                return "<!DOCTYPE html><html><body>502 Bad Gateway</body></html>"
            return "correct"
        return "3"

    openai_server.responder = judge
    p = _preds(tmp_path / "p.jsonl")

    def run(name):
        opts = EvalOptions(
            bench=bench_dir,
            out=tmp_path / name,
            predictions=[("m", p)],
            judge="j",
            base_url=openai_server.base_url,
            llm={"cache": tmp_path / f"{name}.db", "progress": False},
        )
        return evaluate(opts)

    with pytest.raises(EvalError, match=r"the judge j gave no verdict on any of m's 2 open answer\(s\)") as err:
        run("all")
    assert "<!DOCTYPE html>" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "all" / "report.json").exists()
    broken["all"] = False
    res = run("one")
    m = res.report["models"]["m"]
    assert (m["failed"], m["oeq_unjudged"]) == (1, 0), m
    [item] = m["failed_items"]
    assert item["why"].startswith("unjudged: the judge j's reply is no verdict: '<!DOCTYPE html>")
    assert m["answered"] == 5  # the unjudged one is in no figure's n
    broken["all"] = True
    r = run_vhmine(
        "eval", "--bench", str(bench_dir), "--predictions", f"m={p}", "--judge", "j", "--base-url",
        openai_server.base_url, "--out", str(tmp_path / "cli"), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "gave no verdict on any" in r.stderr, (r.returncode, r.stderr[-500:])
    assert [x for x in r.stderr.splitlines() if x.startswith("error:")] == [r.stderr.strip().splitlines()[-1]]
