"""Issue 8, formats: the llava split keeps image groups whole; imported benchmarks' image paths stay inside
their folder (or --images), so a crafted benchmark never makes `eval --model` upload another file; exports
hold no worker names or machine paths unless --with-provenance."""

import base64
import csv
import io
import json
import os
import sys
from pathlib import Path

import pytest

from helpers import make_ready_store, write_pairs, write_photos
from openai_server import png_bytes, openai_server  # noqa: F401  (fixture)
from vhmine import curate as C
from vhmine import formats as F
from vhmine.errors import EvalError, InputError
from vhmine.export.job import ExportOptions, export_benchmark

FORMATS = ("vhtest", "vlmevalkit", "hf", "pope", "llava", "hallusionbench", "lmms-eval")


# --- the llava split ------------------------------------------------------------------------------

@pytest.fixture
def pairs_store(tmp_path):
    """Five mined pairs on ten different photos, each annotated (2 OEQ) with its 4 yes/no drafts kept."""
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    st = open_store(tmp_path / "s.db")
    photos = write_photos(tmp_path / "photos")
    for k in range(5):
        seed_pairs(st, write_pairs(tmp_path / "runs" / f"r{k}", photos[2 * k:2 * k + 2]), per_mode=1, modes=["counting"])
    C.add_worker(st, "alice")
    for k in range(5):
        item = C.next_item(st, "alice", "counting")
        a, b = (v.id for v in item.images)
        saved = C.save_annotation(st, "alice", item.task_id, C.Annotation("counting.how_many", {"object": "cats"},
                                                                         answers={a: str(k + 2), b: str(k + 3)}))
        C.confirm_drafts(st, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    yield st
    st.close()


def _llava_sides(folder: Path) -> dict[str, list[dict]]:
    return {side: json.loads((folder / f"{side}.json").read_text()) for side in ("train", "test")}


def test_llava_split_shares_no_image_pair_or_drafted_question(pairs_store, tmp_path):
    res = export_benchmark(pairs_store, ExportOptions(out=tmp_path / "ll", format="llava", seed=0))
    assert res.counts["counting"] == {"OEQ": 10, "YNQ": 20, "yes": 10, "no": 10}
    sides = _llava_sides(tmp_path / "ll")
    assert len(sides["train"]) == 24 and len(sides["test"]) == 6  # 4 of 5 pair groups: 80/20
    side_of = {r["id"]: s for s, recs in sides.items() for r in recs}
    images = {s: {r["image"] for r in recs} for s, recs in sides.items()}
    assert images["train"] and images["test"] and not images["train"] & images["test"]
    shas = {s: {r["vhmine"]["meta"]["image_sha256"] for r in recs} for s, recs in sides.items()}
    assert not shas["train"] & shas["test"]
    drafted = [r for recs in sides.values() for r in recs if r["vhmine"]["meta"]["derived_from"]]
    assert len(drafted) == 20
    for r in drafted:  # a yes/no question drafted from an open one sits on its side
        assert side_of[r["vhmine"]["meta"]["derived_from"]] == side_of[r["id"]]
    by_pair = {}
    for r in (r for recs in sides.values() for r in recs):
        by_pair.setdefault(r["vhmine"]["meta"]["pair_id"], set()).add(side_of[r["id"]])
    assert len(by_pair) == 5 and all(len(v) == 1 for v in by_pair.values())  # both images of a pair: one side
    # seeded and deterministic: the same seed gives the same split; another seed may move whole groups only
    export_benchmark(pairs_store, ExportOptions(out=tmp_path / "ll2", format="llava", seed=0))
    assert {r["id"] for r in _llava_sides(tmp_path / "ll2")["test"]} == {r["id"] for r in sides["test"]}


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
        f.write_text(json.dumps({"question_id": 1, "image": image, "text": "Is there a cat in the image?", "label": "yes"}) + "\n")
        return f, r"questions\.jsonl, line 1, field image"
    if fmt == "hallusionbench":
        f = bench / "HallusionBench.json"
        f.write_text(json.dumps([{"category": "VD", "subcategory": "illusion", "visual_input": "1", "set_id": "0",
                                  "figure_id": "0", "question_id": "0", "question": "Is the left line longer?",
                                  "gt_answer": "0", "gt_answer_details": "", "filename": image}]))
        return f, r"HallusionBench\.json, row 0, field filename"
    if fmt == "llava":
        rec = {"id": "q1", "image": image, "conversations": [{"from": "human", "value": "<image>\nIs there a cat?"},
                                                             {"from": "gpt", "value": "Yes"}]}
        (bench / "train.json").write_text(json.dumps([rec]))
        (bench / "test.json").write_text("[]")
        return bench / "train.json", r"train\.json, record 0, field image"
    if fmt == "vhtest":
        import pandas as pd

        (bench / "YNQ_Benchmark").mkdir(exist_ok=True)
        (bench / "Images" / "counting").mkdir(parents=True, exist_ok=True)
        f = bench / "YNQ_Benchmark" / "counting.xlsx"
        pd.DataFrame([{"Image": image, "image_path": image, "yes_or_no_question": "Are there 3 cats?",
                       "yes_or_no_ground_truth": "y"}]).to_excel(f, index=False)
        return f, r"counting\.xlsx, row 2, field (Image|image_path)"
    raise AssertionError(fmt)


# how each format's reader spells "the secret, by way of ..": (absolute, `..`, a symlink inside the folder)
ESCAPES = {
    "pope": lambda secret, bench: (str(secret), "../../private/secret.png", "link.png"),
    "hallusionbench": lambda secret, bench: (str(secret), "./../private/secret.png", "./link.png"),
    "llava": lambda secret, bench: (str(secret), "../private/secret.png", "link.png"),
    "vhtest": lambda secret, bench: (str(secret), "../../../private/secret.png", "link.png"),
}
LINK_AT = {"pope": "images/link.png", "hallusionbench": "link.png", "llava": "link.png", "vhtest": "Images/counting/link.png"}


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
    target = {"pope": bench / "images" / "a.png", "vhtest": bench / "Images" / "counting" / "a.png"}.get(fmt, bench / "a.png")
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
    r = CliRunner().invoke(app, ["eval", "--bench", str(bench), "--format", fmt, "--model", "fake-vlm",
                                 "--base-url", srv.base_url, "--out", str(tmp_path / "ev")])
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
    with pytest.raises(EvalError, match=r"^--images is for benchmarks whose images live apart \(pope, hallusionbench, llava\); "
                                        r"a vlmevalkit benchmark carries its own: drop --images$"):
        evaluate(EvalOptions(bench=tmp_path / "vl", out=tmp_path / "ev", predictions=[("m", p)], images=tmp_path))


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, " ".join(text.split())) is not None


# --- exports hold nothing private by default -----------------------------------------------------

def _readable(path: Path) -> bytes:
    """A file's bytes and, for containers, the text inside them (xlsx cells, parquet rows, TSV base64 decoded)."""
    data = path.read_bytes()
    parts = [data]
    if path.suffix == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path)
        parts += [str(c.value).encode() for ws in wb for row in ws.iter_rows() for c in row if c.value is not None]
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        parts.append(json.dumps(t.to_pylist(), default=lambda b: b.hex()).encode())
        parts += [k + b"=" + v for k, v in (t.schema.metadata or {}).items()]
    elif path.suffix == ".tsv":
        csv.field_size_limit(sys.maxsize)
        for row in csv.DictReader(io.StringIO(data.decode()), delimiter="\t"):
            parts += [base64.b64decode(v) if k == "image" and len(v) > 64 else v.encode() for k, v in row.items()]  # <= 64: a row index
    return b"\n".join(parts)


def _export_all(store, root: Path, **kw) -> dict[str, bytes]:
    out = {}
    for fmt in FORMATS:
        kind = "ynq" if fmt in ("pope", "hallusionbench") else "both"
        export_benchmark(store, ExportOptions(out=root / fmt, format=fmt, kind=kind, **kw))
        for p in sorted((root / fmt).rglob("*")):
            if p.is_file():
                out[f"{fmt}/{p.relative_to(root / fmt)}"] = _readable(p)
    return out


def test_exports_hold_no_worker_names_or_machine_paths(tmp_path, monkeypatch):
    store = make_ready_store(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # store and photos lie outside the working folder: names only
    private = [b"alice", str(tmp_path).encode(), str(Path.home()).encode() + b"/"]
    files = _export_all(store, tmp_path / "out")
    assert len(files) > len(FORMATS) * 2
    for name, data in files.items():
        for word in private:
            assert word not in data, f"{word!r} in {name}"
    # one worker, one pseudonym, in every export of the store
    from vhmine.export.privacy import pseudonym, pseudonym_key

    alias = pseudonym("alice", pseudonym_key(store))
    assert alias.startswith("w-") and len(alias) == 10
    made_by = {v["created_by"] for fmt in FORMATS
               for v in json.loads(files[f"{fmt}/manifest.json"].decode())["instances"].values()}
    assert made_by == {alias}
    man = json.loads(files["vhtest/manifest.json"].decode())
    assert man["store"] == "sqlite:///store.db"
    assert {v["source_path"] for v in man["instances"].values()} <= {"astronaut.png", "coffee.png", "rocket.png"}
    monkeypatch.chdir(tmp_path)  # inside the working folder: paths relative to it
    from vhmine.export.privacy import public_path, public_store

    assert (public_path(str(tmp_path / "photos" / "coffee.png")), public_store(store.url)) == ("photos/coffee.png", "sqlite:///store.db")
    # internal use: --with-provenance keeps the names and paths
    full = _export_all(store, tmp_path / "full", with_provenance=True)
    for fmt in FORMATS:
        assert b"alice" in full[f"{fmt}/manifest.json"] and str(tmp_path).encode() in full[f"{fmt}/manifest.json"]
    assert any(b"alice" in full[n] for n in full if n.startswith("hf/data/"))  # inside the parquet too
    store.close()


def test_pseudonyms_are_per_store(tmp_path):
    from vhmine.export.privacy import pseudonym, pseudonym_key

    a = make_ready_store(tmp_path / "a")
    b = make_ready_store(tmp_path / "b")
    assert pseudonym_key(a) == pseudonym_key(a) != pseudonym_key(b)
    assert pseudonym("alice", pseudonym_key(a)) != pseudonym("alice", pseudonym_key(b))
    assert pseudonym("alice", pseudonym_key(a)) != pseudonym("bob", pseudonym_key(a))
    a.close()
    b.close()


def test_cli_export_with_provenance(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    store = make_ready_store(tmp_path)
    url = store.url
    store.close()
    for flag, present in (([], False), (["--with-provenance"], True)):
        out = tmp_path / ("full" if present else "plain")
        r = CliRunner().invoke(app, ["export", "--db", url, "--out", str(out), "--format", "pope", "--kind", "ynq", *flag])
        assert r.exit_code == 0, r.output
        assert (b"alice" in (out / "questions.jsonl").read_bytes()) is present
