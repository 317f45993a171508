"""`vhmine mine` end to end against its join alone (scripts/bench_mine.py --end-to-end).

Writes an index of N CLIP-shaped rows (bench_mine.make_clip_like: 768-d CLIP, 1024-d DINOv2 by default) in the real
format (vhmine.index.write_index) into a temporary folder, with a COCO-like image table (paths under
train2017/, a coco_id on two rows of three, 0-3 category names a row); the images themselves are not written,
so the gallery shows no thumbnails (a real run also decodes up to 2 x --gallery-size images). Then, each in a
fresh process, alternated --repeat times:

- the real command line, `vhmine mine --full` (the console script next to this Python), into a new folder (the
  first of them digests every row (BLAKE2b) and keeps the digests with the index, row_digests.npz: the others
  only check them, XXH3 at memory speed; its CPU time is the first of those listed);
- the join alone: a process that imports vhmine.index and vhmine.mine.join, opens the index (open_index) and
  runs find_pairs with the same thresholds (what the mine runs: --clip, every DINOv2 similarity kept), with
  fresh memory in 4 KiB pages and exiting as the command line does (vhmine.cli.small_pages: numpy's and
  pyarrow's huge pages off, 0.5-2 system CPU-s here; exit_without_collecting: gc.freeze at exit, so that
  Python's shutdown does not walk torch's objects, 0.5-0.7 CPU-s): the strongest baseline, the one the
  line's ratio is against;
- the same join exiting as a plain script does (its shutdown collections walk every object), for information:
  the ratio against it is printed beside.

Time is CPU time (user + system of the child: scripts/bench_timing.py's clock): the medians, and their
ratio; wall times and the user time alone (system time swings from run to run here) beside, for information.
Prints the CPU and the load before, the kernel the mine used, the
heavy libraries the join alone imported (torch where its kernel is torch's, as `_int_mm` is: then torch's
import is the join's cost as much as the mine's), and the load after.
Reads and writes nothing outside its temporary folder (but the kernel calibration's cache).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (its sibling modules, when imported from elsewhere)
from bench_timing import clock, load_text  # noqa: E402

HEAVY = ("torch", "matplotlib", "pandas", "pyarrow", "faiss")
# the join alone, as `vhmine mine` runs it: import, open the index, find_pairs with --clip and no DINOv2 cut;
# {exit} is EXIT_AS_CLI (the baseline) or nothing (a plain script's exit)
JOIN = """
import math, os, sys
for key, value in {pages!r}.items(): os.environ.setdefault(key, value)
{exit}
from vhmine.index import open_index
from vhmine.mine.join import find_pairs
idx = open_index(sys.argv[1], sys.argv[2])
found = find_pairs(idx.clip, idx.dino, float(sys.argv[3]), math.inf, progress=False)
print("pairs", len(found.i))
print("heavy", *[m for m in {heavy!r} if m in sys.modules])
"""
# what vhmine.cli.main does before the command (small_pages, exit_without_collecting), without importing the
# command line (typer); tests/mine/join/test_bench_mine.py checks that these are vhmine.cli's own
SMALL_PAGES = {"NUMPY_MADVISE_HUGEPAGE": "0", "ARROW_DEFAULT_MEMORY_POOL": "system"}
EXIT_AS_CLI = "import atexit, gc; atexit.register(gc.freeze)"


def write_synthetic_index(folder: Path, n: int, dim: int = 768, dino_dim: int = 1024, seed: int = 0) -> None:
    """An index of n CLIP-shaped rows (make_clip_like) at `folder` (its name: the folder's), COCO-like image rows."""
    import numpy as np
    import pandas as pd
    from bench_mine import make_clip_like

    from vhmine.index import write_index

    clip, dino = make_clip_like(n, dim, dino_dim, seed)
    names = np.array(["person", "dog", "cat", "car", "bicycle", "pizza", "couch", "tv", "traffic light"], object)
    rng = np.random.default_rng(seed)
    picks = [sorted(names[rng.choice(len(names), k, replace=False)]) for k in rng.integers(0, 4, n)]
    images = pd.DataFrame(
        {
            "image_id": [f"{k * 2654435761 % 2**64:016x}" for k in range(n)],
            "path": [f"train2017/{k:012d}.jpg" for k in range(n)],
            "sha256": [f"{k:064x}" for k in range(n)],
            "width": [640] * n,
            "height": [480] * n,
            "coco_id": pd.array([k if k % 3 else None for k in range(n)], dtype="Int64"),
            "categories": picks,
        }
    )
    encoders = {"clip": {"spec": "synthetic", "dim": dim}, "dino": {"spec": "synthetic", "dim": dino_dim}}
    write_index(
        folder,
        images,
        clip,
        dino,
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={"name": folder.name, "root": str(folder.parent / "images"), "encoders": encoders},
    )


def _timed(cmd: list[str], cwd: Path) -> tuple[float, float, str, float]:
    """(CPU seconds, wall seconds, what it printed, user CPU seconds) of a command run to its end
    (bench_timing.clock: the child's user + system time, waited for; this process only waits meanwhile)."""
    user0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    with clock() as c:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return c.cpu_s, c.wall_s, res.stdout + res.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - user0


def console_script() -> list[str]:
    """The `vhmine` console script this Python installed (what a user runs), else the module."""
    script = Path(sys.executable).parent / "vhmine"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "vhmine.cli"]


def end_to_end_line(args) -> float:
    """Print the end-to-end line (and what it rests on) for bench_mine's options (--n, --dim, --dino-dim, --clip,
    --dino, --repeat, --seed); returns the ratio of the medians' CPU time."""
    from bench_mine import machine_line

    n, clip, dino, repeat = args.n, args.clip, args.dino, args.repeat
    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        write_synthetic_index(tmp / "indexes" / "synthetic", n, args.dim, args.dino_dim, args.seed)
        print(f"index of {n:,} CLIP-shaped rows written in {time.perf_counter() - t:.0f} s (not timed)", flush=True)
        where = [str(tmp / "indexes"), "synthetic", str(clip)]
        join = [sys.executable, "-c", JOIN.format(heavy=HEAVY, pages=SMALL_PAGES, exit=EXIT_AS_CLI), *where]
        plain = [sys.executable, "-c", JOIN.format(heavy=HEAVY, pages=SMALL_PAGES, exit=""), *where]
        mine = [*console_script(), "mine", "--indexes", str(tmp / "indexes"), "--index", "synthetic"]
        mine += ["--clip", str(clip), "--dino", str(dino), "--full"]
        said = _timed(join, tmp)[2]  # warm: the page cache, and the kernel's calibration when not cached yet
        times: dict[str, list] = {"mine": [], "join": [], "plain": []}
        for r in range(repeat):  # alternated: a change in the machine's load meets all alike
            times["join"].append(_timed(join, tmp))
            times["plain"].append(_timed(plain, tmp))
            times["mine"].append(_timed([*mine, "--out", str(tmp / f"run{r}")], tmp))
            out = times["mine"][-1][2]
            shutil.rmtree(tmp / f"run{r}")
        counts = [ln for ln in out.splitlines() if " pairs written to " in ln or ln.startswith("products kernel")]
        print("  " + "\n  ".join(counts), flush=True)
        heavy = [ln.split()[1:] for ln in said.splitlines() if ln.startswith("heavy")][0]
        print(f"  the join alone imported: {', '.join(heavy) or 'none of ' + ', '.join(HEAVY)}")
    a, b, p = (statistics.median(t[0] for t in times[k]) for k in ("mine", "join", "plain"))
    wa, wb = (statistics.median(t[1] for t in times[k]) for k in ("mine", "join"))
    ua, ub = (statistics.median(t[3] for t in times[k]) for k in ("mine", "join"))
    print(
        f"mine end to end at N={n}: {a:.2f} CPU-s against the join alone {b:.2f} CPU-s ({a / b:.2f} x); "
        f"wall {wa:.2f} s against {wb:.2f} s (medians of {repeat}; CPU-s of each run: mine "
        f"{', '.join(f'{t[0]:.2f}' for t in times['mine'])}; join {', '.join(f'{t[0]:.2f}' for t in times['join'])}; "
        f"after: {load_text()})",
        flush=True,
    )
    print(
        f"  against the join alone exiting as a plain script (its shutdown collections; CPU-s "
        f"{', '.join(f'{t[0]:.2f}' for t in times['plain'])}): {p:.2f} CPU-s ({a / p:.2f} x)",
        flush=True,
    )
    print(  # system time swings by a second or more from run to run on a shared machine (zeroing fresh pages)
        f"  user CPU-s alone: mine {ua:.2f} against the join alone {ub:.2f} ({ua / ub:.2f} x; medians)",
        flush=True,
    )
    return a / b
