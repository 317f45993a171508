"""`vhmine status` on a working folder with a store of 10,000 tasks: how long a user waits for it.

Builds, in a temporary folder (or --folder), what a project holds after a while: an index, a mining run,
a store seeded with 10,000 tasks (1,250 pairs in each of the 8 modes, over --images tiny PNGs) with a
worker and some work done, and an export; then runs `vhmine status` as a user does (a new process each
time, imports included) --repeat times, interleaved with the two floors any vhmine command stands on:
`python -c pass` (the interpreter) and `vhmine --help` (the interpreter and the CLI), and prints each wall
time and CPU time (user + system, which the load barely changes), the medians, the ratio of status to each
floor (the machine is shared: the ratios are what compare across runs; CPU time over CPU time measured in the same
run, the wall-time ratio beside it for information) and the load average. Exits 1 when status's median wall time
is over --limit seconds (the target: 2 s, on a 2-core machine at load 5: wall time by nature, how long a user
waits).

    python scripts/bench_status.py                 # build, time 3 runs
    python scripts/bench_status.py --keep DIR      # build into DIR and leave it there
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(folder: Path, tasks: int = 10_000, n_images: int = 51) -> dict:
    """A working folder with an index, a run, a seeded store of `tasks` tasks, a worker, done work and an
    export; returns what it holds (counts the status must show)."""
    import itertools

    import numpy as np
    import pandas as pd
    from PIL import Image

    from vhmine import curate as C
    from vhmine.images import sha256_file
    from vhmine.index import write_index
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    folder = Path(folder)
    photos = folder / "photos"
    photos.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for k in range(n_images):
        p = photos / f"img{k:03d}.png"
        Image.fromarray(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    shas = [sha256_file(p) for p in paths]
    clip = rng.normal(size=(n_images, 8)).astype(np.float32)
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    images = pd.DataFrame(
        {
            "image_id": [s[:16] for s in shas],
            "path": [p.name for p in paths],
            "sha256": shas,
            "width": 16,
            "height": 12,
            "coco_id": pd.array([None] * n_images, dtype="Int64"),
            "categories": [[] for _ in paths],
        }
    )
    write_index(
        folder / "indexes" / "photos",
        images,
        clip,
        clip.copy(),
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={
            "producer": "vhmine embed",
            "name": "photos",
            "root": str(photos.resolve()),
            "encoders": {"clip": {"spec": "tiny-clip", "dim": 8}, "dino": {"spec": "tiny-dino", "dim": 8}},
            "counts": {"images": n_images, "skipped": 0, "duplicates": 0},
        },
    )
    rows = []
    for (a, sa), (b, sb) in itertools.combinations(zip(paths, shas), 2):
        rows.append(
            {
                "image_id_a": sa[:16],
                "image_id_b": sb[:16],
                "sha256_a": sa,
                "sha256_b": sb,
                "path_a": str(a.resolve()),
                "path_b": str(b.resolve()),
                "clip_sim": 0.95,
                "dino_sim": 0.3,
                "gap": 0.65 - len(rows) * 1e-6,
                "categories_a": [],
                "categories_b": [],
            }
        )
    per_mode = tasks // 8
    if len(rows) < per_mode:
        raise SystemExit(f"{n_images} images give {len(rows)} pairs, fewer than {per_mode} per mode: raise --images")
    run = folder / "runs" / "photos-clip0.9-dino0.55"
    run.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame(rows)
    df.insert(0, "rank", range(1, len(df) + 1))
    df.to_parquet(run / "pairs.parquet")
    (run / "run.json").write_text(
        json.dumps(
            {
                "producer": "vhmine mine",
                "index": "photos",
                "index_folder": str((folder / "indexes" / "photos").resolve()),
                "clip_threshold": 0.9,
                "dino_threshold": 0.55,
                "created": "2025-01-01T00:00:00+0000",
                "counts": {"images": n_images, "clip_alike": len(df), "in_box": len(df), "written": len(df)},
            }
        )
    )
    db = folder / "data" / "vhmine.db"
    with open_store(db) as store:
        seed_pairs(store, run / "pairs.parquet", per_mode=per_mode)
        C.add_worker(store, "alice", admin=True)
        done = 0
        for mode in ("counting", "color"):  # some finished work: annotated, confirmed, one discarded
            for _ in range(3):
                item = C.next_item(store, "alice", mode)
                ids = [v.id for v in item.images]
                tpl, slots, ans = (
                    ("counting.how_many", {"object": "cats"}, ("3", "2"))
                    if mode == "counting"
                    else ("color.what_color", {"object": "car"}, ("red", "blue"))
                )
                C.save_annotation(store, "alice", item.task_id, C.Annotation(tpl, slots, answers=dict(zip(ids, ans))))
                C.confirm_drafts(
                    store,
                    "alice",
                    [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice", mode)],
                )
                done += 1
        item = C.next_item(store, "alice", "shape")
        C.discard(store, "alice", item.task_id, "no shape to ask about")
        ready = len(C.ready_instances(store))
    return {"tasks": per_mode * 8, "done": done, "discarded": 1, "ready": ready, "db": str(db)}


FLOORS = {
    "python -c pass": ["-c", "pass"],
    "vhmine --help": ["-m", "vhmine.cli", "--help"],
    # a command run (Typer's option coercion included), with no store to open: what the store adds is the rest
    "vhmine status (empty folder)": ["-m", "vhmine.cli", "status"],
}


def time_status(folder: Path, repeat: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall times and CPU times (user + system: what the load does not change) of `vhmine status` and of each
    floor (FLOORS), run in turn `repeat` times in `folder`."""
    import resource

    env = dict(os.environ, COLUMNS="200")
    env.pop("VHMINE_DB", None)
    runs = {"vhmine status": ["-m", "vhmine.cli", "status"], **FLOORS}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    empty = Path(tempfile.mkdtemp())
    for _ in range(repeat):
        for name, args in runs.items():  # interleaved: a load change hits them all alike
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run(
                [sys.executable, *args],
                cwd=empty if "empty" in name else folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            wall[name].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if r.returncode != 0:
                raise SystemExit(f"{name} failed:\n{r.stderr}")
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--images", type=int, default=51, help="tiny PNGs; their pairs must be >= tasks / 8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=float, default=2.0, help="seconds the median may take")
    ap.add_argument("--keep", type=Path, help="build into this folder and keep it")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        t0 = time.perf_counter()
        held = build(folder, args.tasks, args.images)
        print(
            f"built {folder}: {held['tasks']} tasks, {held['done']} done, {held['ready']} ready "
            f"({time.perf_counter() - t0:.1f} s)"
        )
        load = os.getloadavg()[0]
        times, cpu = time_status(folder, args.repeat)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name, ts in times.items():
            print(
                f"{name}: "
                + ", ".join(f"{t:.2f} s" for t in ts)
                + f"; median {med[name]:.2f} s, CPU {statistics.median(cpu[name]):.2f} s"
            )
        status = med["vhmine status"]
        # CPU time first: the ratios that compare across runs of a shared machine; wall time for information
        for what, of in (("CPU", {n: statistics.median(ts) for n, ts in cpu.items()}), ("wall", med)):
            print(f"{what}: vhmine status / " + "; / ".join(f"{n}: {of['vhmine status'] / of[n]:.2f}x" for n in FLOORS))
        print(
            f"vhmine status: median {status:.2f} s (target < {args.limit:g} s); load {load:.1f} -> "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        return 0 if status < args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
