"""vhmine.export.job: a store with ready instances becomes benchmark folders; 50/50 yes/no or a stop that
says by how much; a manifest with counts, checksums and provenance; atomic writes; the CLI."""

import json

import pytest
from helpers import write_pairs, write_photos

from vhmine import curate as C
from vhmine import formats as F
from vhmine.errors import ExportError, UnbalancedError
from vhmine.export.job import ExportOptions, export_benchmark
from vhmine.images import sha256_file


def _annotate(store, worker, mode, template, slots, answers_ab, keep_no=True):
    item = C.next_item(store, worker, mode)
    ids = [v.id for v in item.images]
    saved = C.save_annotation(
        store, worker, item.task_id, C.Annotation(template, slots, answers=dict(zip(ids, answers_ab)))
    )
    drafts = C.pending_drafts(store, worker, mode)
    C.confirm_drafts(store, worker, [C.DraftDecision(d.instance_id, keep_no or d.truth) for d in drafts])
    return saved


@pytest.fixture
def store(tmp_path):
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    st = open_store(tmp_path / "s.db")
    pairs = write_pairs(
        tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    )
    seed_pairs(st, pairs, per_mode=2, modes=["counting", "color"])
    C.add_worker(st, "alice")
    # counting: 2 pairs, each 2 OEQ + 4 YNQ (2 yes, 2 no); color: 1 pair, 2 OEQ + YNQ with the "no" drafts rejected
    _annotate(st, "alice", "counting", "counting.how_many", {"object": "cats"}, ["3", "2"])
    _annotate(st, "alice", "counting", "counting.how_many", {"object": "dogs"}, ["1", "4"])
    _annotate(st, "alice", "color", "color.what_color", {"object": "car"}, ["red", "blue"], keep_no=False)
    yield st
    st.close()


def test_unbalanced_store_stops_and_says_by_how_much(store, tmp_path):
    with pytest.raises(
        UnbalancedError,
        match=r"^yes/no questions are not 50/50 within each mode: color: 2 yes / 0 no "
        r"\(100.0% yes; 2 more 'no' question\(s\) needed, or 2 'yes' dropped\)\. .*--allow-unbalanced$",
    ):
        export_benchmark(store, ExportOptions(out=tmp_path / "b", format="pope", kind="ynq"))
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob(".b.tmp-*"))
    res = export_benchmark(store, ExportOptions(out=tmp_path / "b", format="pope", kind="ynq", allow_unbalanced=True))
    assert res.counts["color"]["yes"] == 2 and "not 50/50" in res.summary()


def test_vhtest_export_with_manifest(store, tmp_path):
    import pandas as pd

    out = tmp_path / "vh"
    res = export_benchmark(store, ExportOptions(out=out, format="vhtest", modes=["counting"]))
    assert res.counts == {"counting": {"OEQ": 4, "YNQ": 8, "yes": 4, "no": 4}}
    man = json.loads((out / "manifest.json").read_text())
    assert man["format"] == "vhtest" and man["totals"] == {"OEQ": 4, "YNQ": 8}
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert sorted(man["files"]) == files
    assert all(man["files"][f]["sha256"] == sha256_file(out / f) for f in files)
    recs = {r.id: r for r in C.ready_instances(store, "counting")}
    assert set(man["instances"]) == set(recs)
    some = next(iter(recs.values()))
    prov = man["instances"][some.id]
    from vhmine.export.privacy import pseudonym, pseudonym_key

    assert (prov["image_sha256"], prov["task_id"], prov["created_by"], prov["template_id"]) == (
        some.image_sha256,
        some.task_id,
        pseudonym("alice", pseudonym_key(store)),
        some.template_id,
    )
    ynq = pd.read_excel(out / "YNQ_Benchmark" / "counting.xlsx")
    assert sorted(ynq["yes_or_no_ground_truth"]) == ["n"] * 4 + ["y"] * 4
    n_images = len({r.image_id for r in recs.values()})  # two pairs may share an image
    assert sorted(set(ynq["image_path"])) == [f"counting_{k}.png" for k in range(n_images)]
    assert sorted(p.name for p in (out / "Images" / "counting").iterdir()) == [
        f"counting_{k}.png" for k in range(n_images)
    ]
    back = F.load(out)
    assert {it.id for it in back} == set(recs) and all(back.image_path(it).is_file() for it in back)


def test_per_mode_sampling_is_balanced_and_seeded(store, tmp_path):
    opts = dict(format="vlmevalkit", kind="ynq", per_mode=2, modes=["counting"])
    a = export_benchmark(store, ExportOptions(out=tmp_path / "a", **opts))
    export_benchmark(store, ExportOptions(out=tmp_path / "b", **opts))
    assert a.counts == {"counting": {"OEQ": 0, "YNQ": 2, "yes": 1, "no": 1}}
    ids = lambda p: set(json.loads((p / "manifest.json").read_text())["instances"])  # noqa: E731
    assert ids(tmp_path / "a") == ids(tmp_path / "b")
    with pytest.raises(
        UnbalancedError, match=r"^mode counting has 4 yes and 4 no questions: 5 of each are needed for --per-mode 10"
    ):
        export_benchmark(store, ExportOptions(out=tmp_path / "c", **dict(opts, per_mode=10)))


def test_failed_export_leaves_no_half_folder(store, tmp_path):
    from vhmine.store import Image

    with store.session() as s:  # one image changes on disk after it was curated
        path = s.query(Image).first().path
    with open(path, "ab") as f:
        f.write(b"\0")
    res = export_benchmark(store, ExportOptions(out=tmp_path / "x", format="hf", kind="oeq"))  # the others go out
    assert "changed since it was curated" in res.summary()
    assert [p.name for p in tmp_path.glob("*x*")] == ["x"]
    with pytest.raises(ExportError, match=r"^format pope holds YNQ only: pass --kind ynq$"):
        export_benchmark(store, ExportOptions(out=tmp_path / "y", format="pope", kind="both"))


def test_existing_folder_needs_replace(store, tmp_path):
    out = tmp_path / "ll"
    export_benchmark(store, ExportOptions(out=out, format="llava", modes=["counting"]))
    with pytest.raises(ExportError, match="already exists: choose another --out, or pass --replace"):
        export_benchmark(store, ExportOptions(out=out, format="llava", modes=["counting"]))
    export_benchmark(store, ExportOptions(out=out, format="llava", modes=["counting"], replace=True))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert len(json.loads((out / "train.json").read_text())) + len(json.loads((out / "test.json").read_text())) == 12


def test_cli_export(store, tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    url = store.url
    r = CliRunner().invoke(
        app, ["export", "--db", url, "--out", str(tmp_path / "cli"), "--format", "pope", "--kind", "ynq"]
    )
    assert r.exit_code == 2 and "color: 2 yes / 0 no" in r.output
    r = CliRunner().invoke(
        app,
        [
            "export",
            "--db",
            url,
            "--out",
            str(tmp_path / "cli"),
            "--format",
            "pope",
            "--kind",
            "ynq",
            "--mode",
            "counting",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "exported 8 instance(s) in 1 mode(s) as pope" in r.output
    assert len((tmp_path / "cli" / "questions.jsonl").read_text().splitlines()) == 8


def test_a_writer_failing_midway_leaves_nothing(tmp_path):
    from vhmine.bench import BenchItem, Benchmark
    from vhmine.errors import FormatError
    from vhmine.export.job import write_benchmark

    [ok] = write_photos(tmp_path / "p", ("coffee",))
    items = [
        BenchItem("a", "color", "OEQ", "What color is the cup?", ("white",), None, str(ok), "i1"),
        BenchItem("b", "color", "OEQ", "What color is the cup?", ("red",), None, str(tmp_path / "gone.png"), "i2"),
    ]
    with pytest.raises(FormatError, match=r"gone\.png of item b cannot be read"):
        write_benchmark(Benchmark("t", items), tmp_path / "out", "llava")
    assert [p.name for p in tmp_path.iterdir()] == ["p"]


def test_a_replace_that_fails_at_the_last_rename_keeps_the_previous_export(store, tmp_path, monkeypatch):
    import os

    out = tmp_path / "b"
    export_benchmark(store, ExportOptions(out=out, format="pope", kind="ynq", modes=["counting"]))
    before = (out / "manifest.json").read_bytes()
    real_rename = os.rename

    def rename(src, dst):
        if str(src).startswith(str(tmp_path / ".b.tmp-")):  # the new folder cannot be moved into place
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(ExportError, match=r"failed .*nothing was left behind"):
        export_benchmark(store, ExportOptions(out=out, format="pope", kind="ynq", modes=["counting"], replace=True))
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".b.")) == []


def test_export_ends_with_the_eval_command_and_the_harness_steps(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from pathlib import Path

    res = export_benchmark(store, ExportOptions(out=Path("benchmarks/vh"), format="vhtest", modes=["counting"]))
    assert res.summary().splitlines()[-1].startswith("next: vhmine eval --bench benchmarks/vh --model MODEL   (")
    res = export_benchmark(
        store, ExportOptions(out=tmp_path / "benchmarks" / "lm", format="lmms-eval", modes=["counting"])
    )
    run, score, ask = res.summary().splitlines()[-3:]
    assert "lmms-eval --model MODEL" in run and "--tasks vhmine --include_path benchmarks/lm " in run
    assert (tmp_path / "benchmarks" / "lm" / "vhmine.yaml").is_file()  # the group the command names
    assert score == (
        "then score its answers with vhmine's rules: vhmine eval --bench benchmarks/lm "
        "--predictions MODEL=results/.../<date>_samples_vhmine_ynq.jsonl "
        "--predictions MODEL=results/.../<date>_samples_vhmine_oeq.jsonl"
    )
    assert ask.startswith("or ask a model from here: vhmine eval --bench benchmarks/lm --model MODEL")
    res = export_benchmark(
        store, ExportOptions(out=tmp_path / "benchmarks" / "vk", format="vlmevalkit", name="vh", modes=["counting"])
    )
    run, score = res.summary().splitlines()[-3:-1]
    tsvs = sorted(p.stem for p in (tmp_path / "benchmarks" / "vk").glob("*.tsv"))
    assert run.endswith(f"(cd benchmarks/vk && python vhmine_vlmevalkit.py --data {' '.join(tsvs)} --model MODEL)")
    assert (tmp_path / "benchmarks" / "vk" / "vhmine_vlmevalkit.py").is_file()
    assert score.endswith(" ".join(f"--predictions MODEL=benchmarks/vk/outputs/MODEL/MODEL_{t}.xlsx" for t in tsvs))


@pytest.mark.parametrize("fmt", ["pope", "hallusionbench"])
def test_yes_no_only_formats_export_their_yes_no_questions_without_kind_and_say_what_was_left_out(store, tmp_path, fmt):
    """`export --format pope` refused to run without --kind ynq, though pope holds yes/no questions only."""
    from typer.testing import CliRunner

    from vhmine import formats as F
    from vhmine.cli import app
    from vhmine.curate import ready_instances

    ready = ready_instances(store, "counting")
    n_open = sum(r.kind == "OEQ" for r in ready)
    assert n_open and any(r.kind == "YNQ" for r in ready)
    res = export_benchmark(store, ExportOptions(out=tmp_path / "api", format=fmt, modes=["counting"]))
    bench = F.load(tmp_path / "api")
    assert {it.kind for it in bench} == {"YNQ"} and len(bench) == len(ready) - n_open
    assert f"left out {n_open} open question(s): the {fmt} format holds yes/no questions only" in res.summary()
    assert json.loads((tmp_path / "api" / "manifest.json").read_text())["kind"] == "ynq"
    r = CliRunner().invoke(
        app, ["export", "--db", store.url, "--out", str(tmp_path / "cli"), "--format", fmt, "--mode", "counting"]
    )
    assert r.exit_code == 0, r.output
    assert f"left out {n_open} open question(s)" in r.output
    quiet = export_benchmark(
        store, ExportOptions(out=tmp_path / "asked", format=fmt, kind="ynq", modes=["counting"])
    )  # asked for: no note
    assert "left out" not in quiet.summary()
