"""vhmine.status and `vhmine status`: what a working folder holds, and the next step at each stage of a
project, on real stage outputs; read only; fast on a store of 10,000 tasks (scripts/bench_status.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import counting_annotation, write_photos

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _index(folder: Path, photos: list[Path]):
    """indexes/photos as `vhmine embed` writes it, over `photos`, with vectors whose pairs are known."""
    from vhmine.embed.index import write_index
    from vhmine.images import sha256_file

    shas = [sha256_file(p) for p in photos]
    rng = np.random.default_rng(0)
    clip = rng.normal(size=(len(photos), 6)).astype(np.float32)
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    images = pd.DataFrame({"image_id": [s[:16] for s in shas], "path": [p.name for p in photos], "sha256": shas,
                           "width": 96, "height": 96, "coco_id": pd.array([None] * len(photos), dtype="Int64"),
                           "categories": [[] for _ in photos]})
    write_index(folder / "indexes" / "photos", images, clip, clip[::-1].copy(), skipped=pd.DataFrame({"path": ["bad.png"], "reason": ["truncated file"]}),
                manifest={"producer": "vhmine embed", "name": "photos", "root": str(photos[0].parent.resolve()),
                          "encoders": {"clip": {"spec": "local-dir:tiny-clip", "dim": 6}, "dino": {"spec": "tiny-dino", "dim": 6}},
                          "counts": {"images": len(photos), "skipped": 1, "duplicates": 0}})


def test_the_next_step_follows_the_project_from_an_empty_folder_to_an_eval(tmp_path, monkeypatch):
    from vhmine import api
    from vhmine import curate as C
    from vhmine.status import collect
    from vhmine.store import open_store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VHMINE_DB", raising=False)
    st = collect()
    assert st.next_step.startswith("vhmine embed FOLDER --name NAME")
    assert st.store is None and not (tmp_path / "data").exists()  # nothing created

    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    _index(tmp_path, photos)
    st = collect()
    assert [(i.name, i.images, i.skipped, i.clip, i.dino) for i in st.indexes] == [("photos", 4, 1, "local-dir:tiny-clip", "tiny-dino")]
    assert st.next_step == "vhmine mine --index photos"

    from vhmine.embed.index import open_index
    from vhmine.mine.simsearch import brute_force_pairs

    idx = open_index(Path("indexes"), "photos")
    low = float(brute_force_pairs(idx.clip, idx.dino, -1.0).dino_sim.min())
    dino = round(np.floor(low * 10) / 10 - 0.05, 2)  # below every pair's DINOv2: nothing passes
    res = api.mine("photos", clip=-1.0, dino=dino, progress=False)
    assert res.written == 0
    st = collect()
    run = f"photos-clip-1-dino{dino:g}"
    assert [(r.name, r.pairs) for r in st.runs] == [(run, 0)]
    # the command it names is the one the run's own summary suggests
    relax = next(ln for ln in res.summary().splitlines() if ln.startswith("relax: ")).split("  (")[0].removeprefix("relax: ")
    assert st.next_step.startswith(relax + f"   (the last run, {run}, found 0 pairs)"), (st.next_step, relax)

    api.mine("photos", clip=-1.0, dino=1.0, progress=False)
    assert collect().next_step == "vhmine seed --pairs runs/photos-clip-1-dino1/pairs.parquet"
    api.seed("runs/photos-clip-1-dino1/pairs.parquet", per_mode=2, modes=["counting"])
    st = collect()
    assert st.runs[-1].seeded and st.store["tasks"] == 2
    assert st.next_step.startswith("vhmine workers add NAME   (")
    with open_store(None) as store:
        C.add_worker(store, "alice")
    assert collect().next_step.startswith("vhmine curate   (2 task(s) left to annotate")
    with open_store(None) as store:
        item = C.next_item(store, "alice", "counting")
        C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
        C.confirm_drafts(store, "alice", [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice")])
        ready = len(C.ready_instances(store))
    st = collect()
    counting = next(m for m in st.store["modes"] if m["mode"] == "counting")
    assert (counting["open"], counting["done"], counting["ready"]) == (1, 1, ready)
    assert st.next_step.startswith(f"vhmine export --format vhtest --out benchmarks/vh-v1   ({ready} question(s) ready)")

    api.export("benchmarks/vh-v1", "vhtest", near_dups=None)
    st = collect()
    assert [(e.folder, e.format, e.version, e.items) for e in st.exports] == [("benchmarks/vh-v1", "vhtest", "1", ready)]
    assert st.next_step.startswith("vhmine eval --bench benchmarks/vh-v1 --model MODEL")
    bench = api.read_benchmark("benchmarks/vh-v1")
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": it.id, "answer": "3"}) + "\n" for it in bench))
    api.evaluate("benchmarks/vh-v1", "evals/e1", predictions=[("m", "p.jsonl")])
    st = collect()
    assert [(e.folder, e.items, list(e.models)) for e in st.evals] == [("evals/e1", ready, ["m"])]
    assert st.next_step == "vhmine curate   (1 task(s) left to annotate)"
    text = st.text()
    assert "  photos: 4 images, 1 skipped; encoders local-dir:tiny-clip + tiny-dino" in text
    assert "  benchmarks/vh-v1: vhtest, version 1," in text and "evals/e1/report.md" in text


def test_status_reads_only_and_is_fast_on_a_store_of_10000_tasks(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_status
    finally:
        sys.path.remove(str(SCRIPTS))
    held = bench_status.build(tmp_path)
    before = _tree(tmp_path)
    from vhmine.status import collect

    t0 = time.perf_counter()
    st = collect(tmp_path, indexes=tmp_path / "indexes", db=held["db"])
    took = time.perf_counter() - t0
    assert st.store["tasks"] == 10_000
    assert sum(m["done"] for m in st.store["modes"]) == held["done"]
    assert sum(m["discarded"] for m in st.store["modes"]) == 1
    assert sum(m["ready"] for m in st.store["modes"]) == held["ready"]
    assert took < 2.0, f"collect took {took:.2f} s"
    # the command, as a user runs it (a new process, imports included): the same figures as JSON
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "vhmine.cli", "status", "--json"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["store"]["tasks"] == 10_000 and rec["runs"][0]["seeded"] is True
    assert rec["next_step"].startswith("vhmine export --format vhtest")
    print(f"vhmine status --json: {took:.2f} s")
    assert _tree(tmp_path) == before  # nothing written, not even the store's -wal


def test_status_does_not_migrate_an_older_store(tmp_path):
    from vhmine.status import collect
    from vhmine.store import open_store

    open_store(tmp_path / "old.db", target="0001").close()
    before = _tree(tmp_path)
    st = collect(tmp_path, db=str(tmp_path / "old.db"))
    assert "has schema revision 0001" in st.store["problem"] and "migrates it" in st.store["problem"]
    assert _tree(tmp_path) == before
